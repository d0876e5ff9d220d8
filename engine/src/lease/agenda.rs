//! Which leases an input can concern, so that an input costs what it touches.
//!
//! A host owning many leases used to look at every one of them on every input: a
//! reply about one lease paid for a hundred. The agenda narrows each input to the
//! leases that changed since the passes last looked at them, the leases whose next
//! wake-up time has come, the handoffs whose claimant's heartbeat has just expired,
//! and, under the timestamp rule, the few whose needs hang on the wall clock.
//! A lease outside that scope would do nothing in the passes, so the host behaves
//! exactly as if it had looked at them all; debug builds check that on every input
//! of a host with a small table by running the full passes on a copy.
//!
//! The agenda is derived from the rest of the host's state, so it takes no part in
//! the host's equality or hashing (see `LeaseHost`'s impls): the model checker's state
//! space is unchanged by it.

use super::host::{LeaseHost, Phase};
use super::slot::{ReleaseTo, Slot};
use crate::expiry::ExpiryRule;
use crate::ids::{HostId, LeaseToken};
use crate::time::{LocalTime, Now};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Derived bookkeeping about which leases the next input must look at.
#[derive(Clone, Debug, Default)]
pub(super) struct Agenda {
    /// Leases changed since the passes last looked at them.
    dirty: BTreeSet<LeaseToken>,
    /// When each owned or stale lease next needs a look, earliest first.
    wakes: BTreeSet<(LocalTime, LeaseToken)>,
    /// The key of each lease's entry in `wakes`.
    wake_of: BTreeMap<LeaseToken, LocalTime>,
    /// When the claimant of each lease being handed off stops counting as alive, at
    /// which point the handoff must be called off. Not a wake-up for the driver: the
    /// host has always noticed that at its next input, whatever it was.
    rechecks: BTreeSet<(LocalTime, LeaseToken)>,
    /// The key of each lease's entry in `rechecks`.
    recheck_of: BTreeMap<LeaseToken, LocalTime>,
    /// Leases being handed off: a scan that changes what the members claim concerns
    /// them all.
    handoffs: BTreeSet<LeaseToken>,
    /// Leases looked at on every input because, under the timestamp rule, what they
    /// wait for (a fence, a claimant's heartbeat) hangs on the wall clock, which may
    /// step.
    watched: BTreeSet<LeaseToken>,
    /// The configured partitions in token order, to walk beside the slots.
    partitions: Arc<Vec<LeaseToken>>,
}

impl Agenda {
    /// An empty agenda for a host configured with `partitions`.
    pub(super) fn new(partitions: &[LeaseToken]) -> Agenda {
        let mut sorted = partitions.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Agenda {
            partitions: Arc::new(sorted),
            ..Agenda::default()
        }
    }

    /// The configured partitions in token order, without repeats.
    pub(super) fn partitions(&self) -> &[LeaseToken] {
        &self.partitions
    }
}

impl LeaseHost {
    /// Notes that `token`'s slot changed (or may have), so the next passes look at it.
    ///
    /// The active index stays a superset of the owned and stale leases while an input
    /// is handled; [`settle`](Self::settle) makes it exact again.
    pub(super) fn touch(&mut self, token: &LeaseToken) {
        if !self.agenda.dirty.contains(token) {
            self.agenda.dirty.insert(token.clone());
        }
        let active = self
            .slots
            .get(token)
            .is_some_and(|s| s.own.is_some() || s.stale);
        if active && !self.active.contains(token) {
            self.active.insert(token.clone());
        }
    }

    /// Notes that what other hosts claim, or whether they are alive, may have
    /// changed: every handoff must be checked again.
    pub(super) fn touch_handoffs(&mut self) {
        let handoffs = self.agenda.handoffs.iter().cloned();
        self.agenda.dirty.extend(handoffs);
    }

    /// The leases the passes must look at `now`, in token order; clears the changes.
    pub(super) fn scope(&mut self, now: LocalTime) -> Vec<LeaseToken> {
        let agenda = &mut self.agenda;
        let mut scope = std::mem::take(&mut agenda.dirty);
        let due = |set: &BTreeSet<(LocalTime, LeaseToken)>| -> Vec<LeaseToken> {
            set.iter()
                .take_while(|(at, _)| *at <= now)
                .map(|(_, token)| token.clone())
                .collect()
        };
        scope.extend(due(&agenda.wakes));
        scope.extend(due(&agenda.rechecks));
        scope.extend(agenda.watched.iter().cloned());
        scope.into_iter().collect()
    }

    /// Brings the active index and the agenda up to date for the leases in `scope`
    /// and for those changed since it was taken; the latter stay marked for the next
    /// input, whose passes have not seen them yet.
    pub(super) fn settle(&mut self, scope: &[LeaseToken]) {
        let changed: Vec<LeaseToken> = self.agenda.dirty.iter().cloned().collect();
        for token in scope.iter().chain(&changed) {
            self.settle_one(token);
        }
    }

    fn settle_one(&mut self, token: &LeaseToken) {
        let agenda = &mut self.agenda;
        if let Some(at) = agenda.wake_of.remove(token) {
            agenda.wakes.remove(&(at, token.clone()));
        }
        if let Some(at) = agenda.recheck_of.remove(token) {
            agenda.rechecks.remove(&(at, token.clone()));
        }
        agenda.watched.remove(token);
        agenda.handoffs.remove(token);
        let Some(slot) = self.slots.get(token).filter(|s| s.own.is_some() || s.stale) else {
            self.active.remove(token);
            return;
        };
        if !self.active.contains(token) {
            self.active.insert(token.clone());
        }
        let handoff = claimant(slot).is_some();
        if handoff {
            self.agenda.handoffs.insert(token.clone());
        }
        if self.is_watched(slot) {
            self.agenda.watched.insert(token.clone());
            return;
        }
        if let Some(at) = self.slot_wake(slot, self.now) {
            self.agenda.wakes.insert((at, token.clone()));
            self.agenda.wake_of.insert(token.clone(), at);
        }
        if let Some(at) = self.recheck_at(slot) {
            self.agenda.rechecks.insert((at, token.clone()));
            self.agenda.recheck_of.insert(token.clone(), at);
        }
    }

    fn is_watched(&self, slot: &Slot) -> bool {
        let timestamp = self.config.expiry.rule == ExpiryRule::Timestamp;
        timestamp
            && slot
                .own
                .as_ref()
                .is_some_and(|own| own.fence.is_some() || claimant(slot).is_some())
    }

    /// When a handoff's claimant stops counting as alive, if it still does.
    fn recheck_at(&self, slot: &Slot) -> Option<LocalTime> {
        let member = self.members.get(claimant(slot)?)?;
        let now = self.now;
        self.is_alive(member, now)
            .then(|| self.config.expiry.expires_at(&member.observation(), now))
    }

    /// The earliest wake-up the agenda asks for: its first timed entry, or a watched
    /// lease's time worked out afresh.
    pub(super) fn agenda_wake(&self) -> Option<LocalTime> {
        let timed = self.agenda.wakes.first().map(|(at, _)| *at);
        let watched = self
            .agenda
            .watched
            .iter()
            .filter_map(|t| self.slots.get(t))
            .filter_map(|slot| self.slot_wake(slot, self.now));
        timed.into_iter().chain(watched).min()
    }

    /// When one owned or stale lease next needs a look, if nothing else changes.
    ///
    /// Only what is not blocked on an answer counts: a deadline that is already due
    /// but waits for a response must not make the driver spin.
    pub(super) fn slot_wake(&self, slot: &Slot, now: Now) -> Option<LocalTime> {
        let policy = &self.config.expiry;
        let own = slot.own.as_ref();
        let mut wake: Option<LocalTime> = None;
        let mut at = |t: LocalTime| wake = Some(wake.map_or(t, |w| w.min(t)));
        let run = own.and_then(|_| self.sessions.get(&slot.doc.token));
        if let (Some(own), Some(run)) = (own, run)
            && !run.is_lost()
            && run.epoch == own.epoch
            && let Some(until) = own.authority_until
        {
            at(until);
        }
        if let (Some(own), Some(since)) = (own, run.and_then(|r| r.lost_since()))
            && own.release.is_none()
        {
            at(since + self.config.stop_timeout);
        }
        let draining = run.is_some_and(|r| r.is_draining());
        if let Some(own) = own
            && !own.fence_passed(policy, now)
            && let Some(fence) = &own.fence
        {
            at(policy.expires_at(fence, now));
        }
        if slot.op.is_none() {
            match (slot.retry_at, own) {
                (Some(retry), _) if retry > now.local => at(retry),
                (_, Some(own)) if !draining && !self.session_liveness() => at(own.next_renew),
                _ => {}
            }
        }
        wake
    }

    /// Checks, in debug builds, that the agenda and the active index are exactly what
    /// the slots imply. (Whether the scope of the passes was wide enough is checked
    /// by running them over every lease: see `LeaseHost::drive`.)
    pub(super) fn check_agenda(&self) {
        if !cfg!(debug_assertions) || self.phase == Phase::Finished {
            return;
        }
        let active: BTreeSet<&LeaseToken> = self
            .slots
            .iter()
            .filter(|(_, s)| s.own.is_some() || s.stale)
            .map(|(t, _)| t)
            .collect();
        assert!(
            active.iter().copied().eq(self.active.iter()),
            "the active index is not exactly the owned and stale leases"
        );
        for token in &self.active {
            let Some(slot) = self.slots.get(token) else {
                continue;
            };
            let (watched, timed) = (
                self.agenda.watched.contains(token),
                self.agenda.wake_of.get(token).copied(),
            );
            assert_eq!(
                self.agenda.handoffs.contains(token),
                claimant(slot).is_some(),
                "{token}'s handoff is not in the agenda"
            );
            if self.is_watched(slot) {
                assert!(watched && timed.is_none(), "{token} should be watched");
            } else {
                assert!(!watched, "{token} should not be watched");
                assert_eq!(
                    timed,
                    self.slot_wake(slot, self.now),
                    "{token}'s wake-up in the agenda is out of date"
                );
                assert_eq!(
                    self.agenda.recheck_of.get(token).copied(),
                    self.recheck_at(slot),
                    "{token}'s handoff recheck in the agenda is out of date"
                );
            }
        }
        assert_eq!(
            self.agenda.wakes.len(),
            self.agenda.wake_of.len(),
            "the agenda's wake-up indexes disagree"
        );
        assert_eq!(
            self.agenda.rechecks.len(),
            self.agenda.recheck_of.len(),
            "the agenda's recheck indexes disagree"
        );
    }
}

/// The host a lease is being handed to, if it is.
fn claimant(slot: &Slot) -> Option<&HostId> {
    match slot.own.as_ref()?.release.as_ref()? {
        ReleaseTo::Host { to, .. } | ReleaseTo::Successor(to) => Some(to),
        ReleaseTo::Nobody => None,
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use crate::lease::{Input, LeaseConfig, LeaseHost, Output, Record};
    use crate::store::Container;
    use crate::{Checkpoint, HostId, Incarnation, LeaseToken, LocalTime, Now, WallTime};

    fn at(ms: u32) -> Now {
        Now::new(
            LocalTime(ms.into()),
            WallTime(1_700_000_000_000 + i64::from(ms)),
        )
    }

    /// A lone host that owns and processes two leases, its store answering at once.
    fn processing_host() -> LeaseHost {
        let config = LeaseConfig {
            partitions: vec![LeaseToken::from("0"), LeaseToken::from("1")],
            ..LeaseConfig::default()
        };
        let mut host = LeaseHost::new(HostId::from("a"), config, Incarnation(0)).unwrap();
        let mut store = Container::<Record>::new();
        let mut inputs = vec![Input::Tick];
        while let Some(input) = inputs.pop() {
            host.handle_input(at(0), input).unwrap();
            while let Some(output) = host.poll_output() {
                if let Output::Request(req) = output {
                    inputs.push(Input::Response {
                        id: req.id,
                        result: store.execute(req.op),
                    });
                }
            }
        }
        assert_eq!(host.active.len(), 2, "the host owns both leases");
        host
    }

    #[test]
    fn an_untouched_host_agrees_with_the_full_passes() {
        let mut host = processing_host();
        host.handle_input(at(1_000), Input::Tick).unwrap();
        host.check_agenda();
    }

    #[test]
    #[should_panic(expected = "passes over the agenda's leases differ")]
    fn a_change_the_agenda_was_not_told_of_is_caught() {
        let mut host = processing_host();
        // A checkpoint recorded behind the agenda's back: the full passes would write
        // it at once, the agenda's would not look at the lease.
        let own = host.slots.get_mut(&LeaseToken::from("1")).unwrap();
        own.own.as_mut().unwrap().checkpoint = Some(Checkpoint::from("7"));
        host.handle_input(at(1_000), Input::Tick).unwrap();
    }

    #[test]
    #[should_panic(expected = "wake-up in the agenda is out of date")]
    fn a_wake_up_time_out_of_date_is_caught() {
        let mut host = processing_host();
        let token = LeaseToken::from("0");
        let at = host.agenda.wake_of.remove(&token).unwrap();
        host.agenda.wakes.remove(&(at, token.clone()));
        let later = LocalTime(at.0 + 1);
        host.agenda.wakes.insert((later, token.clone()));
        host.agenda.wake_of.insert(token, later);
        host.check_agenda();
    }
}
