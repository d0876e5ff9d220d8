//! The cluster the partition model checks: H hosts running the engine's
//! [`LeaseHost`] against the engine's reference store, and the rules by which one
//! step of it moves.

use super::config::Bounds;
use super::state::{Action, Calls, Events, Ghost, Host, MAX_PARTITIONS, State, Work};
use crate::clocks::WALL_BASE;
use crate::limits::BoundsError;
use crate::transitions::Transitions;
use crate::world::{self, Budget, Fault, Request, Rules, note};
use leasehold_engine::feed::Read;
use leasehold_engine::lease::{
    CheckpointPolicy, Input, Intent, LeaseConfig, LeaseDocument, LeaseHost, LossCause, Output,
    Record, StopReason, WriteFault, audit_write,
};
use leasehold_engine::store::StoreResult;
use leasehold_engine::store::{Container, Op};
use leasehold_engine::{
    Checkpoint, ExpiryRule, HostId, Incarnation, LeaseToken, Now, PartitionKey, WallTime,
};
use std::sync::Arc;

/// The partition-lease model. Build it with [`PartitionModel::new`], then check it
/// with stateright's checkers, or with [`crate::check`].
#[derive(Clone, Debug)]
pub struct PartitionModel {
    /// The bounds being checked.
    pub bounds: Bounds,
    /// The hosts' lease settings (`h0`'s, in a deploy half done).
    pub config: LeaseConfig,
    /// In a deploy half done, the settings of every host but `h0`.
    pub deployed: Option<LeaseConfig>,
    /// Ticks after the last fault from which every partition must be owned by a live
    /// host ([`Bounds::liveness_ticks`]). Lower it to see that the bound is tight.
    pub liveness_ticks: u8,
    /// Ticks of stable membership after which owned counts must differ by at most one
    /// ([`Bounds::balance_ticks`]). Lower it to see the property fail.
    pub balance_ticks: u8,
    /// Under a checkpoint policy by items, the replay beyond a write in flight's that
    /// a new call may start with ([`CheckpointPolicy::lag_allowance`]). Lower it to
    /// see the property fail.
    pub replay_items: Option<u8>,
    /// Ticks after a split finished after which owned counts must differ by at most
    /// one ([`Bounds::split_balance_ticks`]).
    pub split_balance_ticks: u8,
    /// Ticks after a restart that waits out its earlier life's heartbeat after which
    /// owned counts must differ by at most one ([`Bounds::rejoin_balance_ticks`]).
    pub rejoin_balance_ticks: u8,
    /// Ticks after a write held on the wire for a restarted host landed, after which
    /// owned counts must differ by at most one ([`Bounds::relive_balance_ticks`]).
    /// Lower it to see the property fail.
    pub relive_balance_ticks: u8,
    /// Ticks after a lease was given up past a stuck call's stop timeout after which
    /// its new owner must know it holds it ([`Bounds::gift_ticks`]). Set it to 0 to
    /// see that it is needed.
    pub gift_ticks: u8,
    /// Ticks after the bounds that settle membership (or a fault's last move) after
    /// which a lease's new owner must know it holds it ([`Bounds::learn_ticks`]).
    /// Set it to 0 to see that it is needed.
    pub learn_ticks: u8,
    /// Explores one wall-clock set-up (every wall clock on true time) instead of every
    /// skew. Sound under the observed expiry rule only, where wall-clock readings are
    /// written into documents and never read back: a run with other offsets is this
    /// run with every written timestamp shifted, step for step. On by default exactly
    /// then, unless [`Bounds::unreduced`]; turn it on under the timestamp rule to see
    /// a skew counterexample vanish.
    pub fold_wall_clocks: bool,
    /// The engine transitions its checks computed, shared by its clones and reused
    /// across states ([`Transitions`]).
    pub transitions: Arc<Transitions<LeaseHost>>,
}

impl PartitionModel {
    /// A model of `bounds`.
    pub fn new(bounds: Bounds) -> Result<PartitionModel, BoundsError> {
        let config = bounds.lease_config()?;
        let deployed = if bounds.deploy {
            Some(bounds.lease_config_for(1)?)
        } else {
            None
        };
        Ok(PartitionModel {
            deployed,
            liveness_ticks: bounds.liveness_ticks(),
            balance_ticks: bounds.balance_ticks(),
            // The property is checked under a count only, so that every other check's
            // property list is what it was.
            replay_items: match config.checkpoint {
                CheckpointPolicy::AtMostEveryItems(_) => config
                    .checkpoint
                    .lag_allowance()
                    .map(|n| u8::try_from(n).unwrap_or(u8::MAX)),
                _ => None,
            },
            split_balance_ticks: bounds.split_balance_ticks(),
            rejoin_balance_ticks: bounds.rejoin_balance_ticks(),
            relive_balance_ticks: bounds.relive_balance_ticks(),
            gift_ticks: bounds.gift_ticks(),
            learn_ticks: bounds.learn_ticks(),
            fold_wall_clocks: !bounds.unreduced && config.expiry.rule == ExpiryRule::Observed,
            bounds,
            config,
            transitions: Arc::default(),
        })
    }

    /// The name of host `h`.
    pub fn host_name(h: u8) -> HostId {
        // Named on every write a step records; formatting each time showed in profiles.
        const NAMES: [&str; 4] = ["h0", "h1", "h2", "h3"];
        match NAMES.get(usize::from(h)) {
            Some(name) => HostId::from(*name),
            None => HostId::from(format!("h{h}")),
        }
    }

    /// The token of partition `p`.
    pub fn token(p: u8) -> LeaseToken {
        const TOKENS: [&str; 8] = ["0", "1", "2", "3", "4", "5", "6", "7"];
        match TOKENS.get(usize::from(p)) {
            Some(token) => LeaseToken::from(*token),
            None => LeaseToken::from(p.to_string()),
        }
    }

    /// How many leases there can be: the partitions and, if the feed may split,
    /// partition 0's two children.
    pub fn leases(&self) -> u8 {
        self.bounds.partitions + 2 * self.bounds.splits
    }

    /// The children partition 0 splits into.
    pub fn children(&self) -> [LeaseToken; 2] {
        self.split_plan()[0].1.clone()
    }

    /// The splits the bound allows, in the order they happen: partition 0's range
    /// into two children, then the first child's into two grandchildren.
    pub fn split_plan(&self) -> Vec<(LeaseToken, [LeaseToken; 2])> {
        let p = self.bounds.partitions;
        let all = [
            (Self::token(0), [Self::token(p), Self::token(p + 1)]),
            (Self::token(p), [Self::token(p + 2), Self::token(p + 3)]),
        ];
        all.into_iter()
            .take(usize::from(self.bounds.splits.max(1)))
            .collect()
    }

    /// Host `h`'s clocks at true time `time`.
    pub fn now(&self, host: &Host, time: u8) -> Now {
        crate::clocks::now(self.bounds.drift_ms, host.rate, host.wall_offset, time)
    }

    pub(super) fn engine(&self, h: u8, incarnation: u8) -> LeaseHost {
        let config = match &self.deployed {
            Some(deployed) if h > 0 => deployed.clone(),
            _ => self.config.clone(),
        };
        LeaseHost::new(
            Self::host_name(h),
            config,
            Incarnation(u64::from(incarnation)),
        )
        .expect("bounds produce a valid configuration")
    }

    /// The slot a zombie acts in, after the hosts, if the bounds allow one.
    pub fn zombie_slot(&self) -> Option<u8> {
        (self.bounds.zombies > 0).then_some(self.bounds.hosts)
    }

    /// The name client `c` runs under: a zombie keeps its host's.
    pub fn name_of(&self, state: &State, c: u8) -> HostId {
        match (self.zombie_slot(), state.ghost.zombie_of) {
            (Some(z), Some(h)) if z == c => Self::host_name(h),
            _ => Self::host_name(c),
        }
    }

    /// Host `h` is believed crashed: its life moves to the zombie slot, cut off from
    /// the store, and acts on there until its authority ends; `h` may restart.
    fn zombie(&self, state: &mut State, h: u8) -> Option<()> {
        let z = usize::from(self.zombie_slot()?);
        let host = state.clients[usize::from(h)].clone();
        state.clients[z] = crate::world::Client { cut: true, ..host };
        let left = &mut state.clients[usize::from(h)];
        left.engine = None;
        left.handler = Calls::default();
        state.ghost.zombies += 1;
        state.ghost.zombie_of = Some(h);
        state.last_fault = state.time;
        Some(())
    }

    /// A zombie whose authority has ended everywhere, with no call left running,
    /// is gone.
    fn bury(&self, state: &mut State, journal: &mut Option<Vec<String>>) {
        let Some(z) = self.zombie_slot() else {
            return;
        };
        let zombie = &state.clients[usize::from(z)];
        let Some(engine) = &zombie.engine else {
            return;
        };
        let local = self.now(zombie, state.time).local;
        let acting = (0..self.leases()).any(|p| engine.authority(&Self::token(p), local).is_some());
        let calls = zombie.handler.work.iter().chain(&zombie.handler.lingering);
        let calls = calls.chain(&zombie.handler.draining);
        if !acting && calls.clone().all(Option::is_none) {
            let slot = &mut state.clients[usize::from(z)];
            slot.engine = None;
            slot.handler = Calls::default();
            state.ghost.zombie_of = None;
            note(journal, || {
                format!("h{z}, the zombie, has no authority left and is gone")
            });
        }
    }

    /// The lease container as hosts find it: every lease exists, unowned. Creating
    /// leases (and racing to create them) is covered by the engine's host tests;
    /// leaving it out of the model keeps the cold start small.
    pub(super) fn initial_store(&self) -> Container<Record> {
        let mut store = Container::new();
        for p in 0..self.bounds.partitions {
            let doc = LeaseDocument::new(&self.config.prefix, Self::token(p), WallTime(WALL_BASE));
            store
                .create(Record::Lease(doc))
                .expect("a fresh container has room for every lease");
        }
        store
    }

    /// Whether host `h` has timers due.
    pub(super) fn due(&self, state: &State, h: usize) -> bool {
        let host = &state.clients[h];
        let local = self.now(host, state.time).local;
        host.engine
            .as_ref()
            .is_some_and(|e| e.poll_timeout().is_some_and(|t| t <= local))
    }

    /// Whether the world may move on to the next tick on time: no live host has
    /// timers due, and every lost call has ended (the driver's grace period is
    /// shorter than a tick) or is stuck. Held requests may stay on the wire across
    /// ticks.
    pub(super) fn quiescent(&self, state: &State) -> bool {
        (0..state.clients.len()).all(|h| !self.due(state, h))
            && state.clients.iter().all(|host| {
                let calls = &host.handler;
                (0..MAX_PARTITIONS)
                    .all(|p| calls.lingering[p].is_none() || calls.stuck & 1 << p != 0)
            })
    }

    /// A lost call on host `h` gets stuck: its driver cannot abort it, so time moves
    /// on past it. A fault for liveness from here: the engine holds the lease back
    /// for the stop timeout, then gives it up.
    fn call_sticks(
        &self,
        state: &mut State,
        h: u8,
        p: u8,
        journal: &mut Option<Vec<String>>,
    ) -> Option<()> {
        let calls = &mut state.clients[usize::from(h)].handler;
        if calls.lingering[usize::from(p)].is_none()
            || calls.stuck & 1 << p != 0
            || state.ghost.stuck_calls >= self.bounds.stuck_calls
        {
            return None;
        }
        calls.stuck |= 1 << p;
        state.ghost.stuck_calls += 1;
        state.last_fault = state.time;
        note(journal, || {
            format!("h{h}'s lost call for lease {p} cannot be aborted (a STUCK CALL)")
        });
        Some(())
    }

    /// A lost call on host `h` ends; the driver reports its session stopped.
    fn call_returns(
        &self,
        state: &mut State,
        h: u8,
        p: u8,
        journal: &mut Option<Vec<String>>,
    ) -> Option<()> {
        let calls = &mut state.clients[usize::from(h)].handler;
        let (call, what) = match calls.lingering[usize::from(p)].take() {
            Some(call) if calls.stuck & 1 << p != 0 => {
                // A stuck call is a fault for liveness until it ends, as a slow drain
                // is: its host may claim the lease again only from here.
                calls.stuck &= !(1 << p);
                state.last_fault = state.time;
                (call, "stuck call")
            }
            Some(call) => (call, "lost call"),
            None => {
                let call = calls.draining[usize::from(p)].take()?;
                // A slow drain is a fault for liveness until it ends.
                state.last_fault = state.time;
                (call, "draining call")
            }
        };
        note(journal, || {
            format!("h{h}'s {what} for lease {p} ends (returned or aborted)")
        });
        let stopped = Input::Stopped {
            lease: Self::token(p),
            session: call.session,
        };
        world::run(self, state, h, vec![stopped], None, journal)
    }

    /// Handlers process one more batch of every lease they hold each time their
    /// host's timers fire, and report it, up to the progress bound. When exactly a
    /// handler checkpoints matters less than how its write races with everything
    /// else, which faults and step orders still cover; a free choice here would
    /// multiply the states by dozens.
    fn handler_progress(
        &self,
        state: &mut State,
        h: u8,
        journal: &mut Option<Vec<String>>,
    ) -> Vec<Input> {
        let mut inputs = Vec::new();
        let calls = &mut state.clients[usize::from(h)].handler;
        for (p, work) in calls.work.iter_mut().enumerate() {
            let lease = Self::token(p as u8);
            if let (Some(work), Read::Gone(children)) =
                (work.as_ref(), state.ghost.feed.read(&lease))
            {
                note(journal, || {
                    format!("h{h}'s handler finds lease {p}'s range split")
                });
                inputs.push(Input::Split {
                    lease,
                    session: work.session,
                    children: children.to_vec(),
                });
                continue;
            }
            inputs.extend(self.one_more_checkpoint(h, p, work.as_mut(), "handler", journal));
        }
        // A slow drain's batch goes on, and its checkpoints with it.
        for (p, work) in calls.draining.iter_mut().enumerate() {
            let who = "draining call";
            inputs.extend(self.one_more_checkpoint(h, p, work.as_mut(), who, journal));
        }
        inputs
    }

    /// The next checkpoint `work`, a call of host `h` on lease `p`, reaches, if the
    /// progress bound leaves one.
    fn one_more_checkpoint(
        &self,
        h: u8,
        p: usize,
        work: Option<&mut Work>,
        who: &str,
        journal: &mut Option<Vec<String>>,
    ) -> Option<Input> {
        let work = work.filter(|w| w.progress < self.bounds.progress)?;
        work.progress += 1;
        note(journal, || {
            format!(
                "h{h}'s {who} reaches checkpoint {} of lease {p}",
                work.progress
            )
        });
        Some(Input::Checkpoint {
            lease: Self::token(p as u8),
            session: work.session,
            checkpoint: Checkpoint::from(work.progress.to_string()),
            items: 1,
        })
    }

    /// Host `h`'s timers fire, after its handlers report their progress, with `faults`
    /// on its requests.
    fn timers_fire(
        &self,
        state: &mut State,
        h: u8,
        faults: &[Fault],
        journal: &mut Option<Vec<String>>,
    ) -> Option<()> {
        let mut inputs = self.handler_progress(state, h, journal);
        if self.replay_items.is_some() {
            self.count_reports(state, h, &inputs);
        }
        if journal.is_some()
            && let Some(engine) = &state.clients[usize::from(h)].engine
            && let Some((at, timer)) = engine.poll_timer()
        {
            note(journal, || {
                format!("h{h} is due for {timer} (at {})", crate::trace::seconds(at))
            });
        }
        inputs.push(Input::Tick);
        world::run_with(self, state, h, inputs, faults, journal)
    }

    /// Records, for the replay bound, the checkpoints host `h`'s handlers report in
    /// `inputs`: those of calls with authority, and those reported while a write of
    /// `h`'s for the lease is on the wire or its reply on the way back (any held reply
    /// of `h`'s counts, which only widens the allowance).
    fn count_reports(&self, state: &mut State, h: u8, inputs: &[Input]) {
        let host = &state.clients[usize::from(h)];
        let Some(engine) = &host.engine else {
            return;
        };
        let local = self.now(host, state.time).local;
        let reply_held = state.replies.keys().any(|(c, _)| *c == h);
        for input in inputs {
            let Input::Checkpoint {
                lease, checkpoint, ..
            } = input
            else {
                continue;
            };
            let p = index(lease);
            let in_flight = reply_held
                || state.net.iter().any(|((c, _), req)| {
                    *c == h
                        && matches!(&req.op, Op::Replace { doc: Record::Lease(d), .. } if d.token == *lease)
                });
            let authority = engine.authority(lease, local).is_some();
            let g = &mut state.ghost;
            if authority {
                g.reported[p] = g.reported[p].max(number(Some(checkpoint)));
            }
            if in_flight {
                g.flown[p] = g.flown[p].saturating_add(1);
            }
        }
    }

    /// Takes `action` from `state`, telling what happened inside the step.
    pub fn explain(&self, state: &State, action: &Action) -> (Option<State>, Vec<String>) {
        let mut journal = Some(Vec::new());
        let next = self.step(state, action.clone(), &mut journal);
        (next, journal.unwrap_or_default())
    }

    /// Whether a new life of host `h` must wait out the heartbeat its earlier life
    /// left, which still vouches for a tenure: unfenced, under session liveness, as
    /// the engine judges it unless it takes the name as proof of death.
    fn waits_out_earlier_life(&self, state: &State, h: u8) -> bool {
        use leasehold_engine::lease::HostDocument;
        let id = HostDocument::id_for(&self.config.prefix, &Self::host_name(h));
        self.config.waits_out_earlier_life()
            && state.store.iter().any(|stored| {
                matches!(&stored.doc, Record::Host(d) if d.id == id && d.vouches_for_tenure())
            })
    }

    /// Records what an applied write means for the properties.
    fn record_write(&self, state: &mut State, h: u8, req: &Req, before: Option<&LeaseDocument>) {
        let Op::Replace {
            doc: Record::Lease(after),
            ..
        } = &req.op
        else {
            return;
        };
        let Some(before) = before else {
            return;
        };
        if matches!(req.intent, Intent::Release | Intent::Handoff)
            && let Some(host) = state.clients.get(usize::from(h))
            && let Some(engine) = &host.engine
        {
            // The next holder may start at once: no call of the lease may still run
            // here, unless it outlived the stop timeout (a call that never ends must
            // not wedge the lease).
            let local = self.now(host, state.time).local;
            let timeout = engine.config().stop_timeout;
            let lost_since = engine
                .sessions()
                .filter(|(token, _)| **token == after.token)
                .find_map(|(_, run)| run.lost_since());
            state.ghost.freed_beside_call |=
                lost_since.is_some_and(|since| local < since + timeout);
            // A lease given up past a stuck call's stop timeout moves without a
            // claim: its new owner learns of it from the giver's published count, and
            // the properties wait for that from here.
            if lost_since.is_some_and(|since| local >= since + timeout) {
                state.ghost.events.gave_up_stuck = true;
                state.ghost.last_gift = Some(state.time);
            }
        }
        let crashed = state.crashed;
        let time = state.time;
        let writer = self.name_of(state, h);
        let ghost = &mut state.ghost;
        // A finished split gives the table new leases to share: balance is judged
        // from here too.
        if after.is_finished_split() && !before.is_finished_split() {
            ghost.last_split = time;
        }
        let position = |d: &LeaseDocument| u64::from(number(d.checkpoint.as_ref()));
        for fault in audit_write(req.intent, &writer, before, after, position) {
            match fault {
                WriteFault::EpochNotRaised => ghost.epoch_not_increased = true,
                WriteFault::StaleOwnerWrite => ghost.stale_write_succeeded = true,
                WriteFault::CheckpointBack => ghost.checkpoint_went_back = true,
            }
        }
        let splitting = self.split_plan();
        for (i, (parent, _)) in splitting.iter().enumerate() {
            if after.token == *parent {
                let n = number(after.checkpoint.as_ref());
                ghost.parent_stored[i] = ghost.parent_stored[i].max(n);
            }
        }
        let taking = matches!(req.intent, Intent::Acquire | Intent::Steal);
        if let (true, Some(previous)) = (taking, &before.owner)
            && *previous != writer
        {
            let previous_index = previous.as_str()[1..].parse::<u8>().unwrap_or(u8::MAX);
            if crashed & (1 << previous_index) != 0 {
                ghost.events.takeover_after_crash = true;
            }
            if req.intent == Intent::Steal {
                ghost.events.rebalance_move = true;
            }
        }
        if req.intent == Intent::Handoff {
            ghost.events.rebalance_move = true;
        }
    }
}

/// A store request in the shared world's terms.
type Req = Request<Record, Intent>;

impl world::Modelled for LeaseHost {}

impl Rules for PartitionModel {
    type M = LeaseHost;
    type Ghost = Ghost;
    type Handler = Calls;
    const ACTOR: char = 'h';

    fn budget(&self) -> Budget {
        self.bounds.budget()
    }

    fn transitions(&self) -> &Transitions<LeaseHost> {
        &self.transitions
    }

    fn forget_events(&self, ghost: &mut Ghost) {
        ghost.events = Events::default();
    }

    /// The known-bad variants that live on the wire.
    fn tamper(&self, req: &mut Req, before: Option<&Record>) {
        let Some(bug) = self.bounds.bug else {
            return;
        };
        bug.tamper(req.intent, &mut req.op, before.and_then(Record::as_lease));
    }

    fn record(
        &self,
        state: &mut State,
        h: u8,
        req: &Req,
        before: Option<Record>,
        result: &StoreResult<Record>,
    ) {
        if self.replay_items.is_some()
            && let Op::Replace {
                doc: Record::Lease(doc),
                ..
            } = &req.op
        {
            let p = index(&doc.token);
            let carried = number(doc.checkpoint.as_ref());
            state.ghost.sent[p] = state.ghost.sent[p].max(carried);
        }
        if result.is_ok() {
            self.record_write(state, h, req, before.as_ref().and_then(Record::as_lease));
        }
    }

    /// What a handler does with the host's outputs other than requests.
    fn output(
        &self,
        state: &mut State,
        h: u8,
        output: Output,
        _fails: bool,
        journal: &mut Option<Vec<String>>,
    ) -> Option<Input> {
        let host = &mut state.clients[usize::from(h)];
        match output {
            Output::Request(_) => unreachable!("the world routes requests"),
            Output::Start {
                lease,
                session,
                checkpoint,
                epoch,
            } => {
                let progress = number(checkpoint.as_ref());
                let p = index(&lease);
                if let Some(bound) = self.replay_items {
                    // A write still on the wire was sent all the same.
                    let on_wire = state.net.values().filter_map(|req| match &req.op {
                        Op::Replace {
                            doc: Record::Lease(d),
                            ..
                        } if d.token == lease => Some(number(d.checkpoint.as_ref())),
                        _ => None,
                    });
                    let g = &mut state.ghost;
                    let sent = on_wire.fold(g.sent[p].max(progress), u8::max);
                    let beyond_sent = g.reported[p].saturating_sub(sent);
                    g.replay_beyond_bound |= beyond_sent > bound.saturating_add(g.flown[p]);
                }
                host.handler.work[p] = Some(Work {
                    session,
                    epoch: epoch.0,
                    progress,
                });
                if state.ghost.lapsed & lapse_bit(h, p) != 0 {
                    state.ghost.events.restart_after_lapse = true;
                }
                note(journal, || {
                    format!("h{h} starts processing lease {lease} at e{}", epoch.0)
                });
                None
            }
            Output::Stop {
                lease,
                session,
                reason,
                ..
            } => {
                let p = index(&lease);
                let call = host.handler.work[p].take_if(|w| w.session == session);
                note(journal, || {
                    format!("h{h} stops processing lease {lease}: {reason}")
                });
                match reason {
                    // The call is cancelled but runs on until it returns or is
                    // aborted (Action::Return), as the tokio worker's does.
                    StopReason::Lost(cause) => {
                        state.ghost.events.lost_lease = true;
                        if cause == LossCause::AuthorityLapsed {
                            state.ghost.lapsed |= lapse_bit(h, p);
                        }
                        if call.is_some() {
                            host.handler.lingering[p] = call;
                        }
                        None
                    }
                    // While the bound allows, a drain for a release or a handoff
                    // finishes its batch past the tick (Action::Return ends it).
                    StopReason::Released
                        if call.is_some() && state.ghost.slow_drains < self.bounds.slow_drains =>
                    {
                        state.ghost.slow_drains += 1;
                        state.last_fault = state.time;
                        host.handler.draining[p] = call;
                        note(journal, || {
                            format!(
                                "h{h}'s call for lease {lease} finishes its batch first (a SLOW DRAIN)"
                            )
                        });
                        None
                    }
                    // The handler finishes at once and acknowledges; after a split it
                    // had stopped reading already.
                    StopReason::Released | StopReason::Shutdown | StopReason::Split => {
                        Some(Input::Stopped { lease, session })
                    }
                }
            }
            Output::Checkpointed {
                lease, checkpoint, ..
            } => {
                let p = index(&lease);
                let n = number(Some(&checkpoint));
                state.ghost.confirmed[p] = state.ghost.confirmed[p].max(n);
                note(journal, || {
                    format!("h{h}'s checkpoint {checkpoint} of lease {lease} is confirmed")
                });
                None
            }
            Output::ShutdownComplete => {
                host.handler.finished = true;
                None
            }
            Output::CheckpointRejected { .. } => None,
            Output::Refused(error) => {
                note(journal, || format!("h{h} refuses to run: {error}"));
                None
            }
        }
    }

    fn reply_lost(&self, state: &mut State, applied: &StoreResult<Record>) {
        if applied.is_ok() {
            state.ghost.events.ambiguous_write = true;
        }
    }

    fn describe(&self, req: &Req) -> String {
        request(req)
    }
}

impl PartitionModel {
    /// Whether host `h` is up in a life after its first.
    fn restarted(&self, state: &State, h: u8) -> bool {
        let client = &state.clients[usize::from(h)];
        client.engine.is_some() && client.incarnation > 0
    }

    pub(super) fn step(
        &self,
        last: &State,
        action: Action,
        journal: &mut Option<Vec<String>>,
    ) -> Option<State> {
        let mut state = last.clone();
        self.forget_events(&mut state.ghost);
        match action {
            // A lost reply in a restarted host's step (its first heartbeat's, say),
            // like its reads throttled below, delays its joining as a held write
            // does: balance after it counts from there (a random walk at 2 × 2 met
            // both, and the join four seconds after the restart's bound). Other
            // faults leave the bound as it was: counting from every fault hid
            // `uncounted-table`'s counterexample past its horizon.
            Action::Step(h, fault) => {
                let relive =
                    matches!(fault, Some(Fault::LoseReply(_))) && self.restarted(&state, h);
                self.timers_fire(&mut state, h, fault.as_slice(), journal)?;
                if relive {
                    state.ghost.last_relive = Some(state.time);
                }
            }
            Action::StepTwice(h, a, b) => {
                let lost = [a, b].iter().any(|f| matches!(f, Fault::LoseReply(_)));
                let relive = lost && self.restarted(&state, h);
                self.timers_fire(&mut state, h, &[a, b], journal)?;
                if relive {
                    state.ghost.last_relive = Some(state.time);
                }
            }
            Action::Serve(h, id, fault) => {
                // A restarted host learns of its earlier life's heartbeat through its
                // own writes and reads: a held write, of either life, delays that
                // until it lands, and a reply held on the way back until it arrives
                // (a random walk at 2 × 2 met the new life's read of that heartbeat
                // answered late, its tenure fenced meanwhile, and its join after).
                let restarted = self.restarted(&state, h);
                world::serve_held(self, &mut state, h, id, fault, journal)?;
                if restarted {
                    state.ghost.last_relive = Some(state.time);
                }
            }
            Action::Deliver(h, id, fault) => {
                let restarted = self.restarted(&state, h);
                world::deliver(self, &mut state, h, id, fault, journal)?;
                if restarted {
                    state.ghost.last_relive = Some(state.time);
                }
            }
            Action::GiveUp(h, id) => world::give_up(self, &mut state, h, id, journal)?,
            Action::Crash(h) => world::crash(&mut state, h),
            Action::Zombie(h) => {
                self.zombie(&mut state, h)?;
                note(journal, || {
                    format!(
                        "h{h} is believed crashed, but acts on as h{}, cut off from the store",
                        self.bounds.hosts
                    )
                });
            }
            Action::Shutdown(h) => {
                // Its leases are released to nobody until others take them: liveness
                // counts from here, and from its exit.
                state.ghost.shutdowns += 1;
                state.ghost.last_join = state.time;
                state.last_fault = state.time;
                world::run(self, &mut state, h, vec![Input::Shutdown], None, journal)?;
                let client = &state.clients[usize::from(h)];
                state.ghost.events.leave_notice =
                    client.engine.as_ref().is_some_and(|e| e.is_leaving());
            }
            Action::Throttle(h) => {
                world::throttle(&self.bounds.budget(), &mut state, h)?;
                if self.restarted(&state, h) {
                    state.ghost.last_relive = Some(state.time);
                }
            }
            Action::Return(h, p) => self.call_returns(&mut state, h, p, journal)?,
            Action::Stick(h, p) => self.call_sticks(&mut state, h, p, journal)?,
            Action::Restart(h) => {
                // A restart adds a member; it orphans nothing, so it is not a fault.
                // Except into an empty cluster: nobody was watching the dead hosts'
                // heartbeats, so the first to come back must watch them expire from
                // now, and liveness counts from here.
                let empty = world::all_down(&state);
                if self.waits_out_earlier_life(&state, h) {
                    state.ghost.last_rejoin = Some(state.time);
                }
                world::restart(&mut state, h, |h, life| self.engine(h, life));
                state.ghost.last_join = state.time;
                if empty {
                    state.last_fault = state.time;
                }
            }
            Action::Advance => world::advance(&mut state, false),
            Action::Late => world::advance(&mut state, true),
            Action::Split => {
                let (range, children) = self.split_plan().get(state.ghost.feed.splits())?.clone();
                state.ghost.feed.split(&range, children.to_vec()).ok()?;
                state.last_fault = state.time;
            }
        }
        self.bury(&mut state, journal);
        // A host whose graceful shutdown finished in this step exits: the others see
        // it leave, and it may start again as a new life.
        for h in 0..state.clients.len() as u8 {
            if state.clients[usize::from(h)].handler.finished {
                world::exit(&mut state, h);
                state.ghost.last_join = state.time;
                state.last_fault = state.time;
                note(journal, || format!("h{h} has shut down and exits"));
            }
        }
        Some(state)
    }
}

/// A request, briefly: its intent and what it targets.
pub(crate) fn request(req: &Req) -> String {
    use leasehold_engine::store::Document;
    let target = match &req.op {
        Op::Replace { doc, if_match } => match if_match {
            Some(e) => format!("{} if-match {e:?}", doc.id()),
            None => format!("{} BLIND (no if-match)", doc.id()),
        },
        Op::Create(doc) => doc.id().to_string(),
        Op::Read { id, .. } | Op::Delete { id, .. } => id.to_string(),
        Op::ReadAll { .. } | Op::Query(_) => "the lease table".into(),
        Op::Batch { .. } => "a batch".into(),
    };
    format!("{} {target}", req.intent)
}

/// The ghost bit of host `h`'s lapse on partition `p`.
fn lapse_bit(h: u8, p: usize) -> u32 {
    1 << (usize::from(h) * MAX_PARTITIONS + p)
}

/// The partition index of a lease token.
pub(crate) fn index(lease: &LeaseToken) -> usize {
    lease.as_str().parse().unwrap_or(0)
}

/// A model checkpoint as a number; no checkpoint is 0.
pub(crate) fn number(checkpoint: Option<&Checkpoint>) -> u8 {
    checkpoint
        .and_then(|c| c.as_str().parse().ok())
        .unwrap_or(0)
}

/// The lease a replace would overwrite, as the store holds it.
pub fn lease_before(store: &Container<Record>, op: &Op<Record>) -> Option<LeaseDocument> {
    let Op::Replace {
        doc: Record::Lease(doc),
        ..
    } = op
    else {
        return None;
    };
    let stored = store
        .read(&PartitionKey::new(doc.id.as_str()), &doc.id)
        .ok()?;
    stored.doc.as_lease().cloned()
}
