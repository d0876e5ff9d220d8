//! What a host reads each acquire interval.
//!
//! Under lease liveness every lease renews itself, so a host must watch every lease:
//! each interval it reads the whole table. Under session liveness a lease changes
//! hands only through events a host sees in the heartbeats (a member's tenure ends,
//! it leaves, it claims or is claimed from), so the interval's read is the heartbeats
//! alone, O(hosts). The table is read only when such an event calls for it, and by a
//! slow audit that catches anything missed.
//!
//! Reading less never risks safety: every take and handoff is a conditional write,
//! so a version known from an old read fails (412) instead of overwriting a newer
//! one, and the host re-reads that lease.

use super::timer::Timer;
use crate::ids::LeaseToken;
use crate::time::{LocalTime, Millis, Now};
use std::collections::BTreeSet;

/// When this host next reads the table (or the heartbeats) and plans, when it last
/// read the whole table, and whether something calls for a read before the audit is
/// due.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct TableReads {
    /// When the next read goes out.
    next_read: LocalTime,
    /// A read is in flight: the next waits for its answer.
    reading: bool,
    /// When a lease or heartbeat this host watches will expire: it plans again then,
    /// without waiting for the next read.
    replan_at: Option<LocalTime>,
    /// When the last complete read of the table was sent.
    read_at: Option<LocalTime>,
    /// An event calls for a read at the next scan.
    due: bool,
    /// When this host last had claims out.
    claimed_at: Option<LocalTime>,
    /// The last plan asked for nothing, and nothing this host holds changed since:
    /// a read of the heartbeats that shows no change needs no new plan.
    settled: bool,
    /// The heartbeats' lease counts say this host's view of the table is behind:
    /// read it at every interval until they agree.
    behind: bool,
    /// How many leases this host held in its tenure when the view was last compared
    /// with the counts.
    compared_holding: Option<u32>,
    /// Another host announced its leave: its heartbeat is read again at this time.
    poll_at: Option<LocalTime>,
    /// Reads of leaving hosts' heartbeats in flight: the next poll waits for them.
    watching: u32,
    /// Leases on which a take of this host's whose outcome is unknown may still land
    /// ([`Slot::may_land`](super::slot::Slot::may_land)): the whole table is read
    /// at every interval until a read shows each at another version. Landed after
    /// its re-read, such a take made this host the owner unknown to itself, while the
    /// host the plans gave the lease to saw it held: nobody processed it until the
    /// audit (found by the model's random walks).
    landing: BTreeSet<LeaseToken>,
}

/// Why the whole table is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// Every interval (lease liveness), or because an event calls for it.
    Needed,
    /// The audit.
    Audit,
}

/// What the choice of the interval's read depends on besides the reads themselves.
pub(super) struct Group {
    pub session: bool,
    /// This host has claims published.
    pub claiming: bool,
    /// Another host claims a lease this host holds.
    pub claimed_from: bool,
    /// A take of this host's may still land ([`TableReads::may_land`]).
    pub landing: bool,
    /// This host's audit period and phase, for the live hosts, this one included
    /// ([`LeaseConfig::audit_period`](super::LeaseConfig::audit_period),
    /// [`LeaseConfig::audit_phase`](super::LeaseConfig::audit_phase)).
    pub period: Millis,
    pub phase: Millis,
    pub lease_duration: Millis,
}

impl TableReads {
    /// This part's timers: the next read, unless one is in flight (a deadline already
    /// due that waits for an answer must not make the driver spin), and the next plan.
    pub fn timers(&self) -> impl Iterator<Item = (LocalTime, Timer)> {
        let read = (!self.reading).then_some((self.next_read, Timer::TableRead));
        let plan = self.replan_at.map(|t| (t, Timer::Replan));
        let poll = self
            .poll_at
            .filter(|_| self.watching == 0)
            .map(|t| (t, Timer::LeavePoll));
        read.into_iter().chain(plan).chain(poll)
    }

    /// Whether the next read is due at `now`.
    pub fn read_due(&self, now: LocalTime) -> bool {
        !self.reading && now >= self.next_read
    }

    /// Another host is leaving: read its heartbeat at `at`, or (`None`) stop.
    pub fn poll(&mut self, at: Option<LocalTime>) {
        self.poll_at = at;
    }

    /// Read a leaving host's heartbeat again by `at` at the latest.
    pub fn poll_by(&mut self, at: LocalTime) {
        self.poll_at = Some(self.poll_at.map_or(at, |t| t.min(at)));
    }

    /// Whether the leaving hosts' heartbeats are due to be read at `now`.
    pub fn poll_due(&self, now: LocalTime) -> bool {
        self.watching == 0 && self.poll_at.is_some_and(|t| now >= t)
    }

    /// `reads` reads of leaving hosts' heartbeats went out.
    pub fn polls_sent(&mut self, reads: u32) {
        self.poll_at = None;
        self.watching = reads;
    }

    /// One of them was answered.
    pub fn poll_answered(&mut self) {
        self.watching = self.watching.saturating_sub(1);
    }

    /// Whether a plan is due at `now`.
    pub fn replan_due(&self, now: LocalTime) -> bool {
        self.replan_at.is_some_and(|t| now >= t)
    }

    /// The next read goes out at `at`.
    pub fn read_at(&mut self, at: LocalTime) {
        self.next_read = at;
    }

    /// The next read goes out at `at` at the latest.
    pub fn read_by(&mut self, at: LocalTime) {
        self.next_read = self.next_read.min(at);
    }

    /// A read went out.
    pub fn read_sent(&mut self) {
        self.reading = true;
    }

    /// The read in flight was answered; the next goes out at `next`.
    pub fn read_answered(&mut self, next: LocalTime) {
        self.reading = false;
        self.next_read = next;
    }

    /// The next plan is due at `at`, if anything this host watches expires.
    pub fn plan_at(&mut self, at: Option<LocalTime>) {
        self.replan_at = at;
    }

    /// The interval's read is being sent at `now`: whether it must be the whole
    /// table, and why. A read of the table sees every change before it, so only
    /// later ones call for another.
    pub fn choose(&mut self, now: Now, group: &Group) -> Option<Why> {
        if group.claiming {
            self.claimed_at = Some(now.local);
        }
        let why = self.due_at(now, group);
        if why.is_some() {
            self.due = false;
        }
        why
    }

    fn due_at(&self, now: Now, group: &Group) -> Option<Why> {
        // A handoff confirmed just before its claim was withdrawn can still land:
        // the former claimant keeps reading for a lease duration, so that a lease
        // handed to it does not wait for the audit.
        let lately_claimed = self
            .claimed_at
            .is_some_and(|at| now.local < at + group.lease_duration);
        if !group.session || self.due || lately_claimed || group.claimed_from || group.landing {
            // Lease liveness watches every lease. In a handoff, both sides judge
            // the claim by how the leases are spread now: the claimant to see the
            // leases it asked for arrive, the owner to see whether to give them.
            return Some(Why::Needed);
        }
        let Some(at) = self.read_at else {
            return Some(Why::Needed);
        };
        // Each host audits once per period, at its own phase within it, so that the
        // group does not read the table all at once.
        let every = group.period.as_millis();
        let phase = group.phase.as_millis();
        let period = |t: LocalTime| (t.as_millis() + every - phase) / every;
        (period(now.local) > period(at)).then_some(Why::Audit)
    }

    /// A take of this host's on `token` may land unseen: read the table until it
    /// shows the lease at another version.
    pub fn may_land(&mut self, token: LeaseToken) {
        self.landing.insert(token);
    }

    /// Forgets the leases `may_land` no longer holds for; whether any is left.
    pub fn still_landing(&mut self, may_land: impl Fn(&LeaseToken) -> bool) -> bool {
        self.landing.retain(may_land);
        !self.landing.is_empty()
    }

    /// Whether no read of the whole table has come back yet in this life.
    pub fn never_read(&self) -> bool {
        self.read_at.is_none()
    }

    /// Something happened that only the table can tell the whole of.
    pub fn need(&mut self) {
        self.due = true;
    }

    /// A complete read of the table, sent at `sent_at`, came back, or failed.
    pub fn answered(&mut self, sent_at: LocalTime, ok: bool) {
        if ok {
            self.read_at = Some(sent_at);
        } else {
            self.due = true;
        }
    }

    /// Whether the last plan asked for nothing and nothing changed since.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// Records whether the plan just made asked for nothing.
    pub fn planned(&mut self, empty: bool) {
        self.settled = empty;
    }

    /// Something a plan reads changed: the next read of the heartbeats plans again.
    pub fn unsettle(&mut self) {
        self.settled = false;
    }

    /// Whether the view was found behind the heartbeats' counts at the last check.
    pub fn is_behind(&self) -> bool {
        self.behind
    }

    /// Whether this host holds another number of leases than at the last comparison
    /// of its view with the counts.
    pub fn held_changed(&self, held: u32) -> bool {
        self.compared_holding != Some(held)
    }

    /// Records whether the view is behind the heartbeats' counts, compared while this
    /// host held `held` leases: if so, the next interval's read is of the whole table.
    pub fn set_behind(&mut self, behind: bool, held: u32) {
        self.behind = behind;
        self.compared_holding = Some(held);
        if behind {
            self.due = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timers(reads: &TableReads) -> Vec<(LocalTime, Timer)> {
        reads.timers().collect()
    }

    #[test]
    fn a_read_in_flight_keeps_no_timer_so_a_due_read_cannot_spin_its_driver() {
        let mut reads = TableReads::default();
        assert_eq!(timers(&reads), [(LocalTime(0), Timer::TableRead)]);
        reads.read_sent();
        assert!(timers(&reads).is_empty());
        assert!(!reads.read_due(LocalTime(1_000)));
        reads.read_answered(LocalTime(5_000));
        assert!(!reads.read_due(LocalTime(4_999)));
        assert!(reads.read_due(LocalTime(5_000)));
    }

    #[test]
    fn an_event_brings_the_next_read_forward_but_never_back() {
        let mut reads = TableReads::default();
        reads.read_answered(LocalTime(5_000));
        reads.read_by(LocalTime(7_000));
        assert_eq!(timers(&reads), [(LocalTime(5_000), Timer::TableRead)]);
        reads.read_by(LocalTime(2_000));
        assert_eq!(timers(&reads), [(LocalTime(2_000), Timer::TableRead)]);
        reads.read_at(LocalTime(9_000));
        assert_eq!(timers(&reads), [(LocalTime(9_000), Timer::TableRead)]);
    }

    #[test]
    fn a_plan_is_due_when_something_watched_expires() {
        let mut reads = TableReads::default();
        reads.read_sent();
        assert!(!reads.replan_due(LocalTime(u64::MAX)));
        reads.plan_at(Some(LocalTime(3_000)));
        assert_eq!(timers(&reads), [(LocalTime(3_000), Timer::Replan)]);
        assert!(!reads.replan_due(LocalTime(2_999)));
        assert!(reads.replan_due(LocalTime(3_000)));
    }
}
