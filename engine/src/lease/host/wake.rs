//! When each lease needs the host's attention next: the host works out every owned
//! or stale lease's agenda [`Entry`] from its own state and files it in the agenda.

use super::LeaseHost;
use crate::expiry::ExpiryRule;
use crate::ids::{HostId, LeaseToken};
use crate::lease::agenda::Entry;
use crate::lease::phase::Phase;
use crate::lease::slot::{ReleaseTo, Slot};
use crate::time::{LocalTime, Now};
use std::collections::BTreeSet;

impl LeaseHost {
    /// Notes that `token`'s slot changed (or may have), so the next passes look at it.
    ///
    /// The active index stays a superset of the owned and stale leases while an input
    /// is handled; [`settle`](Self::settle) makes it exact again.
    pub(super) fn touch(&mut self, token: &LeaseToken) {
        let active = self.slots.get(token).is_some_and(|s| s.is_active());
        self.agenda.touch(token, active);
    }

    /// Notes that what other hosts claim, or whether they are alive, may have
    /// changed: every handoff must be checked again.
    pub(super) fn touch_handoffs(&mut self) {
        self.agenda.touch_handoffs();
    }

    /// Brings the agenda up to date for the leases in `scope` and for those changed
    /// since it was taken; the latter stay marked for the next input, whose passes
    /// have not seen them yet.
    pub(super) fn settle(&mut self, scope: &[LeaseToken]) {
        let changed = self.agenda.changed();
        for token in scope.iter().chain(&changed) {
            let entry = self
                .slots
                .get(token)
                .filter(|s| s.is_active())
                .map(|slot| self.entry(slot));
            self.agenda.file(token, entry);
        }
    }

    /// Where an owned or stale lease belongs in the agenda now.
    fn entry(&self, slot: &Slot) -> Entry {
        let handoff = claimant(slot).is_some();
        if self.is_watched(slot) {
            return Entry {
                handoff,
                watched: true,
                ..Entry::default()
            };
        }
        Entry {
            handoff,
            watched: false,
            wake: self.slot_wake(slot, self.now),
            recheck: self.recheck_at(slot),
        }
    }

    fn is_watched(&self, slot: &Slot) -> bool {
        let timestamp = self.config.expiry.rule == ExpiryRule::Timestamp;
        timestamp
            && slot
                .own()
                .is_some_and(|own| own.fence.is_some() || claimant(slot).is_some())
    }

    /// When a handoff's claimant stops counting as alive, if it still does.
    fn recheck_at(&self, slot: &Slot) -> Option<LocalTime> {
        let member = self.membership.member(claimant(slot)?)?;
        let now = self.now;
        self.is_alive(member, now)
            .then(|| self.config.expiry.expires_at(&member.observation(), now))
    }

    /// The earliest wake-up the agenda asks for: its first timed entry, or a watched
    /// lease's time worked out afresh.
    pub(super) fn agenda_wake(&self) -> Option<(LocalTime, LeaseToken)> {
        let watched = self.agenda.watched().filter_map(|t| {
            let at = self.slot_wake(self.slots.get(t)?, self.now)?;
            Some((at, t))
        });
        let first = self.agenda.first_wake().into_iter().chain(watched).min();
        first.map(|(at, token)| (at, token.clone()))
    }

    /// When one owned or stale lease next needs a look, if nothing else changes.
    ///
    /// Only what is not blocked on an answer counts: a deadline that is already due
    /// but waits for a response must not make the driver spin.
    fn slot_wake(&self, slot: &Slot, now: Now) -> Option<LocalTime> {
        let policy = &self.config.expiry;
        let own = slot.own();
        let mut wake: Option<LocalTime> = None;
        let mut at = |t: LocalTime| wake = Some(wake.map_or(t, |w| w.min(t)));
        let run = own.and_then(|_| self.sessions.get(&slot.doc().token));
        if let (Some(own), Some(run)) = (own, run)
            && !run.is_lost()
            && run.epoch == own.epoch
            && let Some(until) = own.authority_until
        {
            at(until);
        }
        // A lost call that outlives the stop timeout: the lease is given up then, or,
        // if a release already waits for the call to end, released then.
        if let (Some(_), Some(since)) = (own, run.and_then(|r| r.lost_since()))
            && since + self.config.stop_timeout > now.local
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
        if !slot.in_flight() {
            match (slot.retry_at(), own) {
                (Some(retry), _) if retry > now.local => at(retry),
                // A marked lease is never renewed: its creates' answers wake it.
                (_, Some(own))
                    if !draining
                        && !self.session_liveness()
                        && slot.doc().split_into.is_empty() =>
                {
                    at(own.next_renew)
                }
                _ => {}
            }
            // A checkpoint held back by the policy: its own write goes then.
            if let Some(own) = own
                && own.checkpoint.is_some()
                && let Some(after) = own.checkpoint_after
                && after > now.local
            {
                at(after);
            }
        }
        wake
    }

    /// Checks, in debug builds, that the agenda is exactly what the slots imply.
    /// (Whether the scope of the passes was wide enough is checked by running them
    /// over every lease: see `LeaseHost::drive`.)
    pub(super) fn check_agenda(&self) {
        if !cfg!(debug_assertions) || self.phase == Phase::Finished {
            return;
        }
        let active: BTreeSet<&LeaseToken> = self
            .slots
            .iter()
            .filter(|(_, s)| s.is_active())
            .map(|(t, _)| t)
            .collect();
        assert!(
            active.iter().copied().eq(self.agenda.active().iter()),
            "the active index is not exactly the owned and stale leases"
        );
        for token in self.agenda.active() {
            let Some(slot) = self.slots.get(token) else {
                continue;
            };
            let (filed, due) = (self.agenda.entry(token), self.entry(slot));
            assert_eq!(
                filed.handoff, due.handoff,
                "{token}'s handoff is not in the agenda"
            );
            if due.watched {
                assert!(
                    filed.watched && filed.wake.is_none(),
                    "{token} should be watched"
                );
            } else {
                assert!(!filed.watched, "{token} should not be watched");
                assert_eq!(
                    filed.wake, due.wake,
                    "{token}'s wake-up in the agenda is out of date"
                );
                assert_eq!(
                    filed.recheck, due.recheck,
                    "{token}'s handoff recheck in the agenda is out of date"
                );
            }
        }
        self.agenda.check_indexes();
    }
}

/// The host a lease is being handed to, if it is.
fn claimant(slot: &Slot) -> Option<&HostId> {
    match slot.own()?.release.as_ref()? {
        ReleaseTo::Host { to, .. } | ReleaseTo::Successor(to) => Some(to),
        ReleaseTo::Nobody => None,
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use crate::lease::agenda::Entry;
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
        assert_eq!(host.agenda.active().len(), 2, "the host owns both leases");
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
        own.own_mut().unwrap().checkpoint = Some(Checkpoint::from("7"));
        host.handle_input(at(1_000), Input::Tick).unwrap();
    }

    #[test]
    #[should_panic(expected = "wake-up in the agenda is out of date")]
    fn a_wake_up_time_out_of_date_is_caught() {
        let mut host = processing_host();
        let token = LeaseToken::from("0");
        let filed = host.agenda.entry(&token);
        let later = LocalTime(filed.wake.unwrap().0 + 1);
        let entry = Entry {
            wake: Some(later),
            ..filed
        };
        host.agenda.file(&token, Some(entry));
        host.check_agenda();
    }
}
