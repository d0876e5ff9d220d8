//! The host's side of membership: it sends the heartbeat requests the membership asks
//! for, acts on the leases when a tenure begins or ends, and deletes the heartbeats of
//! hosts that stopped.

use super::LeaseHost;
use crate::ids::{HostId, LeaseToken, PartitionKey};
use crate::lease::LossCause;
use crate::lease::heartbeat::{BeatPlan, BeatRules, BeatStep};
use crate::lease::membership::{Member, successor};
use crate::lease::phase::Phase;
use crate::lease::wire::Aim;
use crate::lease::{HostDocument, Intent, KnownBad};
use crate::store::{Op, Reply, StoreError};
use crate::time::{LocalTime, Now};
use std::collections::BTreeSet;

impl LeaseHost {
    pub(super) fn uses_heartbeats(&self) -> bool {
        self.config.strategy.needs_membership()
    }

    /// Whether a lease given away without a claim is announced in the heartbeat.
    /// The variants from before the announcement leave it to the counts alone.
    pub(super) fn announces_gifts(&self) -> bool {
        !matches!(
            self.config.known_bad,
            Some(KnownBad::GiftUnannounced | KnownBad::SilentSuccessor)
        )
    }

    /// Whether the heartbeat of `member` is live at `now`: not fenced, not expired.
    pub(super) fn is_alive(&self, member: &Member, now: Now) -> bool {
        member.is_alive(&self.config.expiry, now)
    }

    /// Live members other than this host, sorted by id.
    pub(super) fn live_members(&self, now: Now) -> impl Iterator<Item = &Member> {
        self.membership.live(&self.me, &self.config.expiry, now)
    }

    pub(super) fn drive_heartbeat(&mut self, now: Now) {
        if !self.uses_heartbeats() {
            return;
        }
        // Under session liveness the heartbeat vouches for the leases still being
        // released: it is renewed until the last is gone, and only then deleted.
        let leaving =
            self.phase == Phase::ShuttingDown && !(self.session_liveness() && self.holds_leases());
        // The last lease released, the leave is due at once, not at the next renewal.
        if leaving {
            self.membership.beat.hurry_leave(now.local);
        }
        if self.membership.beat.idle(now, self.phase) {
            return;
        }
        let owned = if self.session_liveness() {
            self.held_count()
        } else {
            0
        };
        let plan = BeatPlan {
            me: &self.me,
            incarnation: self.incarnation(),
            prefix: &self.config.prefix,
            phase: self.phase,
            session: self.session_liveness(),
            leaving,
            owned,
            leases: u32::try_from(self.slots.len()).unwrap_or(u32::MAX),
        };
        let Some((intent, op, step)) = self.membership.beat.next(now, &plan) else {
            return;
        };
        let id = self.send(now, intent, op, Aim::Beat(step));
        self.membership.beat.sent(id);
    }

    pub(super) fn on_heartbeat_response(
        &mut self,
        now: Now,
        sent_at: LocalTime,
        step: BeatStep,
        result: Result<Reply<crate::lease::Record>, StoreError>,
    ) {
        let rules = BeatRules {
            policy: self.config.expiry,
            renew: self.config.renew_interval,
            backoff: self.backoff(),
            session: self.session_liveness(),
            incarnation: self.incarnation(),
            waits_out_earlier_life: self.config.waits_out_earlier_life(),
            remembers_refusals: self.config.known_bad != Some(KnownBad::RewriteRefusedVersion),
        };
        let news = self
            .membership
            .beat
            .answered(now, sent_at, step, result, &rules);
        if news.ended {
            self.lose_tenure();
        }
        if news.began {
            self.table.unsettle();
            // Leases may have been handed to this name's earlier tenure since the
            // table was last read (a claim its earlier life left in the heartbeat,
            // honoured while this life waited that life out): only the table says.
            if self.phase == Phase::Running {
                self.need_table(now);
            }
            // Resumes wait for a tenure to name.
            let held: Vec<LeaseToken> = self.agenda.active().iter().cloned().collect();
            held.iter().for_each(|t| self.touch(t));
        }
        if news.renewed {
            self.grant_session_authority();
        }
        // Takes wait for a tenure to hold the leases in: plan now.
        if news.began && self.phase == Phase::Running && !self.slots.is_empty() {
            self.rebalance(now);
        }
    }

    /// How many leases this host holds in its current tenure, finished splits aside.
    pub(super) fn held_count(&self) -> u32 {
        let held = self
            .agenda
            .active()
            .iter()
            .filter_map(|t| self.slots.get(t));
        held.filter(|s| s.is_owned() && self.held_in_tenure(s.doc()))
            .count() as u32
    }

    /// Under session liveness, whether this host's view of the table is behind what
    /// the heartbeats say: a member's view holds more leases than this host's, or
    /// counting each member's leases as its heartbeat publishes them gives this host
    /// another share to hold than counting them in its view.
    /// Then only a read of the table mends the view (a read from a lagging replica, a
    /// handoff or a split it has not seen); left alone, two hosts whose views differ
    /// can each wait for the other to claim, until the audit (the swarm's seeds 307453
    /// and 427170: loads 2 apart). A view that is wrong in a way no share depends on
    /// is left for the claims and the audit to mend. Walks the table: callers ask
    /// only when a published count changed, after a read of the table, or while the
    /// view was behind.
    pub(super) fn view_behind_counts(&self, now: Now) -> bool {
        if !self.session_liveness() {
            return false;
        }
        let live: Vec<&Member> = self.live_members(now).collect();
        // Leases are only ever created: a member whose view holds more has read some
        // this host has not (a read of the table at start that a lagging replica
        // served: the swarm's seed 957203, a split's child that every peer planned
        // for this host, which never learned of it).
        let known = self.slots.len();
        let counted = self.config.known_bad != Some(KnownBad::UncountedTable);
        if counted
            && live
                .iter()
                .any(|m| m.doc.leases.is_some_and(|n| n as usize > known))
        {
            return true;
        }
        let Some(published) = live
            .iter()
            .map(|m| m.doc.owned.map(|n| n as usize))
            .collect::<Option<Vec<usize>>>()
        else {
            return false;
        };
        let mut seen = vec![0usize; live.len()];
        let mut leases = 0usize;
        for slot in self.slots.values().filter(|s| !s.doc().is_finished_split()) {
            leases += 1;
            let owner = slot.doc().owner.as_ref();
            if let Some(m) = live.iter().position(|m| {
                owner == Some(&m.doc.host)
                    && slot.doc().owner_tenure.is_some()
                    && slot.doc().owner_tenure == m.doc.tenure
            }) {
                seen[m] += 1;
            }
        }
        // A member that holds fewer leases than this view gives it has given some
        // away. One it could not process goes to its successor without a claim
        // (`give_up_stuck`), and nothing but a read of the table tells the successor:
        // the swarm's seed 1012240, where the counts still gave every host its share.
        // Only the successor reads, so that a handoff between two others costs nothing.
        let hosts: Vec<&HostId> = live.iter().map(|m| &m.doc.host).collect();
        let gave_to_me = live.iter().zip(&published).zip(&seen).any(|((m, &p), &s)| {
            let others: Vec<&HostId> = hosts
                .iter()
                .copied()
                .filter(|h| **h != m.doc.host)
                .chain([&self.me])
                .collect();
            p < s && successor(&m.doc.host, others) == Some(&self.me)
        });
        if gave_to_me && self.config.known_bad != Some(KnownBad::SilentSuccessor) {
            return true;
        }
        // This host among the members, in id order, with what it holds itself. Each
        // side shares out every lease the view knows: those no live member holds by
        // that side's counts are free, and the plans give them to the members in
        // need. A lease that left its holder for no live member (handed to a name
        // that had left, through a lagging replica's read of its heartbeat) changes
        // no member's count but its giver's, and only this comparison tells the
        // member the plans give it to (the swarm's rolling-restart seed 3382147).
        let mine = self.held_count() as usize;
        let at = live.partition_point(|m| m.doc.host < self.me);
        let uncounted = self.config.known_bad == Some(KnownBad::OrphanUncounted);
        let free_in_view = leases.saturating_sub(seen.iter().sum::<usize>() + mine);
        let share = |mut counts: Vec<usize>| {
            counts.insert(at, mine);
            let held = counts.iter().sum::<usize>();
            let total = if uncounted {
                held + free_in_view
            } else {
                held.max(leases)
            };
            crate::balance::ranked_targets(&counts, total).1[at]
        };
        share(published) != share(seen)
    }

    /// Deletes heartbeats of hosts that stopped, so that restarted hosts with new
    /// identities do not pile up. Conditional, so a host that just came back wins.
    ///
    /// Under session liveness a heartbeat some lease still names stays: deleting it
    /// would end that tenure without the fence its taker writes, and a fenced one
    /// tells everyone the tenure is over. It goes once no lease names the host.
    pub(super) fn retire_dead_members(&mut self, now: Now) {
        // Walking the slots costs O(partitions): only when there is someone to retire.
        if !self.membership.any_dead(&self.config.expiry, now) {
            return;
        }
        let named: BTreeSet<&HostId> = if self.session_liveness() {
            self.slots
                .values()
                .filter_map(|s| s.doc().owner.as_ref())
                .collect()
        } else {
            BTreeSet::new()
        };
        let dead = self.membership.retire(&self.config.expiry, now, &named);
        for (host, etag) in dead {
            let id = HostDocument::id_for(&self.config.prefix, &host);
            let op = Op::Delete {
                pk: PartitionKey::new(id.as_str()),
                id,
                if_match: Some(etag.clone()),
            };
            self.send(now, Intent::Retire, op, Aim::Retire(host, etag));
        }
    }

    /// This host's tenure is over (fenced, deleted, or replaced): every lease held
    /// under it is lost at once, and the next heartbeat write starts a new tenure.
    fn lose_tenure(&mut self) {
        let held: Vec<LeaseToken> = self
            .agenda
            .active()
            .iter()
            .filter(|t| self.slots.get(*t).is_some_and(|s| s.is_owned()))
            .cloned()
            .collect();
        // They stay named after this host until someone takes them; its own plans
        // see them as free, like everyone else's.
        for token in held {
            self.lose(&token, LossCause::SessionFenced);
        }
    }
}
