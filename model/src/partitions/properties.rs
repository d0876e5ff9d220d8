//! The properties checked on every reachable state.
//!
//! `eventually` is only checked at terminal states in stateright, so liveness is an
//! `always` property on the timed state: once no fault has happened for long enough,
//! the goal must hold.

use super::cluster::{PartitionModel, index, number};
use super::state::State;
use leasehold_engine::HostId;
use leasehold_engine::lease::LeaseDocument;
use stateright::Property;

/// The safety properties, which hold in every state whatever the faults.
pub const SAFETY: [&str; 10] = [
    EXCLUSIVITY,
    EPOCHS,
    STALE_WRITES,
    FREED_AFTER_CALL,
    CHECKPOINT_MONOTONIC,
    CHECKPOINT_KEPT,
    SESSIONS,
    SPLIT_APART,
    CHILD_CHECKPOINT,
    REFUSED_ONCE,
];

/// The liveness properties, checked once faults have stopped for long enough.
pub const LIVENESS: [&str; 3] = [OWNED, BALANCED, KNOWN];

/// Exclusivity.
pub const EXCLUSIVITY: &str = "exclusivity: one host with authority per partition";
/// Fencing, part one.
pub const EPOCHS: &str = "fencing: the epoch rises with every change of owner";
/// Fencing, part two.
pub const STALE_WRITES: &str = "fencing: no write by a former owner succeeds";
/// The stop contract across hosts: a release or a handoff lets the next holder start
/// at once, so it waits for the lost call it follows.
pub const FREED_AFTER_CALL: &str =
    "stop: a lease is released or handed off only once its lost call has ended";
/// Checkpoint safety, part one.
pub const CHECKPOINT_MONOTONIC: &str = "checkpoint: the stored checkpoint never goes back";
/// Checkpoint safety, part two.
pub const CHECKPOINT_KEPT: &str = "checkpoint: a confirmed checkpoint is never lost";
/// The replay bound of a checkpoint policy by items.
pub const REPLAY_BOUNDED: &str =
    "checkpoint: a new call replays fewer than the policy's items beyond a write in flight's";
/// The stop contract, seen from the handler calls.
pub const SESSIONS: &str =
    "sessions: one lease's calls never overlap on a host, nor share an epoch anywhere";
/// Bounded liveness.
pub const OWNED: &str = "liveness: every partition owned by a live host once faults stop";
/// Bounded liveness, seen from the owner: a lease given to a host that does not
/// know it holds it, or held by one whose stuck call of it bars a new one while
/// another live host could take it, is processed by nobody, though the store shows
/// it owned.
pub const KNOWN: &str = "liveness: every partition's owner knows it holds it and can process it once membership settles";
/// Bounded liveness of the handoff strategy.
pub const BALANCED: &str = "liveness: owned counts differ by at most 1 once membership settles";
/// Splits, part one.
pub const SPLIT_APART: &str = "split: no two hosts process overlapping ranges at once";
/// Splits, part two.
pub const CHILD_CHECKPOINT: &str =
    "split: a child's stored checkpoint never goes behind its parent's";
/// No busy loop against a lagging replica: a version the store refused a write on
/// is never written again. Only a stale read, or the late reply of a read sent
/// before the write, can show it again, so only checks with those faults can break
/// it.
pub const REFUSED_ONCE: &str = "store: no host writes again on a version the store refused it";
/// Non-vacuity of stuck calls: the engine's stop timeout elapsed and the lease went.
pub const GAVE_UP_STUCK: &str = "sometimes: a lease is given up past its stuck call's stop timeout";
/// Non-vacuity of the split properties.
pub const SPLIT_DONE: &str = "sometimes: a split range's children are processed";
/// Non-vacuity.
pub const TAKEOVER: &str = "sometimes: a takeover after a crash";
/// A host told to shut down announced its leave and processes on through the notice.
pub const LEAVE_NOTICE: &str = "sometimes: a host told to stop processes on through a leave notice";
/// Non-vacuity.
pub const REBALANCE: &str = "sometimes: a rebalance move";
/// Non-vacuity.
pub const LOST: &str = "sometimes: a lost lease";
/// Non-vacuity.
pub const AMBIGUOUS: &str = "sometimes: an ambiguous write";
/// Non-vacuity of the stop contract.
pub const RESTART_AFTER_LAPSE: &str = "sometimes: a lapse, then a restart";
/// Non-vacuity of the liveness guard: the check applies after a crash.
pub const CALM_AFTER_CRASH: &str = "sometimes: liveness is checked after a crash";
/// Non-vacuity of the balance guard: the check applies after a restart, with every
/// host up.
pub const SETTLED_AFTER_RESTART: &str = "sometimes: balance is checked after a restart";

/// Every property of `model`, `always` ones first. Without a split there is nothing
/// for the split's `sometimes` to find: it was once true in every state, reported as
/// reached and recorded again at each one.
pub fn all(model: &PartitionModel) -> Vec<Property<PartitionModel>> {
    let mut all = vec![
        Property::always(EXCLUSIVITY, exclusive),
        Property::always(EPOCHS, |_, s: &State| !s.ghost.epoch_not_increased),
        Property::always(STALE_WRITES, |_, s: &State| !s.ghost.stale_write_succeeded),
        Property::always(FREED_AFTER_CALL, |_, s: &State| !s.ghost.freed_beside_call),
        Property::always(CHECKPOINT_MONOTONIC, |_, s: &State| {
            !s.ghost.checkpoint_went_back
        }),
        Property::always(CHECKPOINT_KEPT, confirmed_kept),
        Property::always(REPLAY_BOUNDED, |_, s: &State| !s.ghost.replay_beyond_bound),
        Property::always(SESSIONS, sessions_apart),
        Property::always(OWNED, owned_when_calm),
        Property::always(BALANCED, balanced_when_settled),
        Property::always(KNOWN, known_when_settled),
        Property::always(SPLIT_APART, split_apart),
        Property::always(CHILD_CHECKPOINT, children_not_behind),
        Property::always(REFUSED_ONCE, |_, s: &State| !s.rewrote_refused),
        Property::sometimes(SPLIT_DONE, |m, s: &State| {
            m.children()
                .iter()
                .all(|c| holders(m, s, index(c) as u8) > 0)
        }),
        Property::sometimes(TAKEOVER, |_, s: &State| s.ghost.events.takeover_after_crash),
        Property::sometimes(REBALANCE, |_, s: &State| s.ghost.events.rebalance_move),
        Property::sometimes(LEAVE_NOTICE, |_, s: &State| s.ghost.events.leave_notice),
        Property::sometimes(LOST, |_, s: &State| s.ghost.events.lost_lease),
        Property::sometimes(GAVE_UP_STUCK, |_, s: &State| s.ghost.events.gave_up_stuck),
        Property::sometimes(AMBIGUOUS, |_, s: &State| s.ghost.events.ambiguous_write),
        Property::sometimes(RESTART_AFTER_LAPSE, |_, s: &State| {
            s.ghost.events.restart_after_lapse
        }),
        Property::sometimes(CALM_AFTER_CRASH, |m, s: &State| {
            s.crashes > 0 && s.time.saturating_sub(s.last_fault) >= m.liveness_ticks
        }),
        Property::sometimes(SETTLED_AFTER_RESTART, |m, s: &State| {
            let hosts = s.clients.iter().take(usize::from(m.bounds.hosts));
            let all_up = hosts.clone().all(|h| h.engine.is_some());
            let restarted = hosts.into_iter().any(|h| h.incarnation > 0);
            restarted
                && all_up
                && s.time.saturating_sub(s.ghost.last_join) == m.balance_ticks
                && s.time.saturating_sub(s.last_fault) >= m.liveness_ticks
        }),
    ];
    if model.bounds.splits == 0 {
        all.retain(|p| p.name != SPLIT_DONE);
    }
    if model.bounds.shutdowns == 0 {
        all.retain(|p| p.name != LEAVE_NOTICE);
    }
    if model.bounds.stuck_calls == 0 {
        all.retain(|p| p.name != GAVE_UP_STUCK);
    }
    // After every batch, nothing waits unsent but a write in flight's.
    if model.replay_items.is_none() {
        all.retain(|p| p.name != REPLAY_BOUNDED);
    }
    all
}

/// The `always` properties that `state` breaks, by name.
pub fn broken(model: &PartitionModel, state: &State) -> Vec<&'static str> {
    crate::check::broken(model, state)
}

/// How many up hosts hold processing authority over partition `p`, by their own clocks.
pub fn holders(model: &PartitionModel, state: &State, p: u8) -> usize {
    let token = PartitionModel::token(p);
    state
        .clients
        .iter()
        .filter(|host| {
            let local = model.now(host, state.time).local;
            host.engine
                .as_ref()
                .is_some_and(|e| e.authority(&token, local).is_some())
        })
        .count()
}

fn exclusive(model: &PartitionModel, state: &State) -> bool {
    (0..model.leases()).all(|p| holders(model, state, p) <= 1)
}

/// No two ranges of which one descends from the other are processed at once, by any
/// hosts.
fn split_apart(model: &PartitionModel, state: &State) -> bool {
    if model.bounds.splits == 0 {
        return true;
    }
    let held: Vec<u8> = (0..model.leases())
        .filter(|&p| holders(model, state, p) > 0)
        .collect();
    let feed = &state.ghost.feed;
    held.iter().all(|&a| {
        held.iter().all(|&b| {
            a == b || !feed.overlaps(&PartitionModel::token(a), &PartitionModel::token(b))
        })
    })
}

/// Every child's stored checkpoint is at least the highest its parent ever stored.
fn children_not_behind(model: &PartitionModel, state: &State) -> bool {
    model.bounds.splits == 0
        || model
            .split_plan()
            .iter()
            .zip(state.ghost.parent_stored)
            .all(|((_, children), floor)| {
                stored(state)
                    .filter(|doc| children.contains(&doc.token))
                    .all(|doc| number(doc.checkpoint.as_ref()) >= floor)
            })
}

/// Every handler call of one lease, running or lost but not yet ended: on one host
/// at most one, and across hosts no two at the same epoch, since a downstream system
/// fencing by epoch could not tell them apart.
fn sessions_apart(model: &PartitionModel, state: &State) -> bool {
    (0..usize::from(model.leases())).all(|p| {
        let mut epochs = Vec::new();
        for host in &state.clients {
            let calls = [
                &host.handler.work[p],
                &host.handler.lingering[p],
                &host.handler.draining[p],
            ];
            let calls: Vec<u64> = calls.into_iter().flatten().map(|w| w.epoch).collect();
            if calls.len() > 1 {
                return false;
            }
            epochs.extend(calls);
        }
        epochs.sort_unstable();
        epochs.windows(2).all(|w| w[0] != w[1])
    })
}

/// The stored leases. Properties run on every state, so they read the documents as
/// they are instead of formatting trace lines.
fn stored(state: &State) -> impl Iterator<Item = &LeaseDocument> {
    state
        .store
        .iter()
        .filter_map(|stored| stored.doc.as_lease())
}

/// The index of the live host named `owner`, if it is up.
fn live_host(state: &State, owner: &HostId) -> Option<usize> {
    let h: usize = owner.as_str().strip_prefix('h')?.parse().ok()?;
    state.clients.get(h)?.engine.as_ref().map(|_| h)
}

fn confirmed_kept(_: &PartitionModel, state: &State) -> bool {
    stored(state)
        .all(|doc| number(doc.checkpoint.as_ref()) >= state.ghost.confirmed[index(&doc.token)])
}

/// Owned in the owner's tenure, not processing: a lease moved between live hosts (a steal, or a handoff)
/// is owned at once, but its new owner learns of it on its next scan and must wait
/// out the old owner's authority before it processes; that wait is the price of
/// exclusivity, and exclusivity is checked separately.
fn owned_when_calm(model: &PartitionModel, state: &State) -> bool {
    // A request still held on the wire is a fault that has not stopped; so is a
    // cluster with every host down, where nobody is left to own anything (the first
    // restart then starts the count again).
    let nobody = crate::world::all_down(state);
    // A lease given up past a stuck call's stop timeout names the successor's tenure
    // as the giver last read it, which may have ended since (the successor
    // restarted): the successor learns of it from the giver's heartbeat, within the
    // gift's bound, and takes it as any lease of an ended tenure, within liveness's.
    let gift = model.gift_ticks.saturating_add(model.liveness_ticks);
    let gifted = state
        .ghost
        .last_gift
        .is_some_and(|t| state.time.saturating_sub(t) < gift);
    if gifted
        || state.time.saturating_sub(state.last_fault) < model.liveness_ticks
        || !state.net.is_empty()
        || !state.replies.is_empty()
        || nobody
    {
        return true;
    }
    stored(state).all(|doc| {
        doc.is_finished_split()
            || doc.owner.as_ref().is_some_and(|o| {
                live_host(state, o).is_some_and(|h| in_owners_tenure(state, h, doc))
            })
    })
}

/// Under session liveness, a lease holds authority only while it names its owner's
/// current tenure; one named after an ended tenure of a live owner is processed by
/// nobody until that owner resumes it (the swarm's stranded leases, seeds 20293 and
/// 36321, were owned by a live host in this sense alone). A handoff names the new
/// owner's tenure at once, so this needs no wait beyond the liveness bound.
fn in_owners_tenure(state: &State, h: usize, doc: &LeaseDocument) -> bool {
    doc.owner_tenure.is_none()
        || state.clients[h]
            .engine
            .as_ref()
            .is_some_and(|e| e.tenure() == doc.owner_tenure)
}

/// Once membership settles, no lease moves but by a fault, so the owner the store
/// names has read what made it the owner: a handoff reaches its claimant at its next
/// poll, one acquire interval after the last move balance allows, and a lease given
/// up past a stuck call's stop timeout reaches the successor it was given to through
/// the giver's published count (seeds 1001253 and 1012240: the successor never read
/// the table, and the lease waited for its audit). Knowing, and no stuck call in the
/// way, is asked, not processing itself: a thief that knows waits out its fence, and
/// exclusivity is checked separately.
fn known_when_settled(model: &PartitionModel, state: &State) -> bool {
    if !settled(model, state, model.learn_ticks) {
        return true;
    }
    stored(state).all(|doc| {
        if doc.is_finished_split() {
            return true;
        }
        let Some(h) = doc.owner.as_ref().and_then(|o| live_host(state, o)) else {
            return true;
        };
        if !in_owners_tenure(state, h, doc) {
            return true;
        }
        // A stuck call of the lease bars a new one on its host for as long as it
        // runs; alone, the host keeps the lease, since nobody else could take it.
        let p = index(&doc.token);
        let calls = &state.clients[h].handler;
        let barred = calls.stuck & 1 << p != 0 && calls.lingering[p].is_some();
        let others = (0..usize::from(model.bounds.hosts))
            .any(|o| o != h && state.clients[o].engine.is_some());
        !(barred && others)
            && state.clients[h].engine.as_ref().is_some_and(|e| {
                e.leases()
                    .any(|l| l.doc.token == doc.token && l.owned == Some(doc.epoch))
            })
    })
}

/// Membership has been stable for the balance bound, and every fault is far enough
/// back for its leases to be owned again (a crash, a pause or a lost reply can
/// orphan leases, which only expiry frees), each `after` ticks more. A lease given
/// up past a stuck call's stop timeout upsets the counts once its new owner knows
/// of it, so the balance bound runs from there.
fn settled(model: &PartitionModel, state: &State, after: u8) -> bool {
    let since = |t: u8, bound: u8| state.time.saturating_sub(t) >= bound.saturating_add(after);
    let gift = model.gift_ticks.saturating_add(model.balance_ticks);
    since(state.ghost.last_join, model.balance_ticks)
        && state.ghost.last_gift.is_none_or(|t| since(t, gift))
        && state
            .ghost
            .last_rejoin
            .is_none_or(|t| since(t, model.rejoin_balance_ticks))
        && state
            .ghost
            .last_relive
            .is_none_or(|t| since(t, model.relive_balance_ticks))
        && (state.ghost.last_split == 0 || since(state.ghost.last_split, model.split_balance_ticks))
        && since(state.last_fault, model.liveness_ticks)
        && state.net.is_empty()
        && state.replies.is_empty()
}

fn balanced_when_settled(model: &PartitionModel, state: &State) -> bool {
    // A stuck call still running is a fault that has not stopped: its host claims
    // no lease the plan gives it while a call of that lease runs there, and the
    // plans give it no other.
    let stuck = state.clients.iter().any(|c| c.handler.stuck != 0);
    if model.bounds.strategy != leasehold_engine::balance::Strategy::Handoff
        || stuck
        || !settled(model, state, 0)
    {
        return true;
    }
    let hosts = usize::from(model.bounds.hosts);
    let mut owned = vec![0usize; hosts];
    for owner in stored(state).filter_map(|doc| doc.owner.as_ref()) {
        if let Some(h) = live_host(state, owner).filter(|h| *h < hosts) {
            owned[h] += 1;
        }
    }
    // A zombie is no member: it acts on only until its authority ends.
    let counts = (0..hosts)
        .filter(|&h| state.clients[h].engine.is_some())
        .map(|h| owned[h]);
    let (max, min) = (counts.clone().max(), counts.min());
    matches!((max, min), (Some(a), Some(b)) if a - b <= 1) || max.is_none()
}
