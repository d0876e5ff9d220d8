//! The replay bound of the checkpoint policy, checked from outside the engine: a new
//! call may start behind what was committed only by what the policy holds back
//! beyond what a write in flight carried, or what was committed while the lease's
//! writes were busy (a write on the wire, a failure not yet followed by a write that
//! went through, or the engine backing them off after a failed read of the lease,
//! `LeaseHost::writes_wait`). Under a count of `n` that is fewer than `n` events, none
//! after every batch; under an interval, only events committed within one interval
//! (on the holder's clock, at the run's worst drift, plus the holder's pauses)
//! before the holder's call ended, or was told its lease was lost (a lost call may
//! run on past the stop timeout, and the engine writes nothing for it meanwhile).
//! The model checks the count's bound (`REPLAY_BOUNDED` in `leasehold_model`).

use leasehold_engine::RequestId;
use leasehold_engine::lease::CheckpointPolicy;
use std::collections::{HashMap, HashSet, VecDeque};

/// Scheduling slack on top of an interval: a held checkpoint is written at the first
/// input at or after it falls due, and the simulator's ticks land on the millisecond.
const INTERVAL_SLACK_MS: u64 = 1_000;

/// What the policy may hold back.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// So many events.
    Events(u64),
    /// Events committed no longer than this (true milliseconds) before their holder's
    /// call ended.
    Window(u64),
}

/// Events first committed by one batch, while the committing host's writes of the
/// lease were free, not yet carried by a write.
#[derive(Clone, Copy, Debug)]
struct Commit {
    /// The events `lo..hi`.
    lo: u64,
    hi: u64,
    /// True time of the commit.
    at: u64,
    host: usize,
    /// How long the host had been paused in all before the commit.
    paused: u64,
    /// When the host's call of the partition ended, once it has: the host could write
    /// the events until then.
    ended: Option<u64>,
}

/// What the check knows of one partition.
#[derive(Clone, Debug, Default)]
struct Partition {
    /// The highest checkpoint a write of its lease carried.
    sent: u64,
    /// Events committed while the committing host's writes of the lease were busy,
    /// since a write last carried everything committed.
    flown: u64,
    /// Under an interval: the commits no write has carried yet, oldest first.
    unsent: VecDeque<Commit>,
}

/// The check of one run.
#[derive(Debug)]
pub(super) struct Replay {
    bound: Bound,
    /// Partitions from here on are split children, not checked: a child starts from
    /// its parent's last stored checkpoint and reads the parent's tail again, as the
    /// change feed's children do (`split.rs`).
    children_from: u32,
    partitions: Vec<Partition>,
    /// Lease writes on the wire, by sender, with their partition.
    pending: HashMap<(usize, RequestId), u32>,
    /// Per host and partition: writes on the wire.
    busy: HashMap<(usize, u32), u32>,
    /// Hosts that failed a write since their last one went through, per partition.
    failed: HashSet<(usize, u32)>,
    /// Per host, how long it has been paused in all.
    paused: HashMap<usize, u64>,
}

impl Replay {
    /// The check for `policy`, on hosts whose clocks drift up to `drift_ppm`; none
    /// where a clock may stand still.
    pub(super) fn new(
        policy: CheckpointPolicy,
        partitions: usize,
        drift_ppm: u64,
    ) -> Option<Replay> {
        let bound = match (policy.lag_allowance(), policy.lag_window()) {
            (Some(events), _) => Bound::Events(u64::from(events)),
            (None, Some(every)) => {
                const PPM: u128 = 1_000_000;
                let slowest = PPM.checked_sub(u128::from(drift_ppm)).filter(|r| *r > 0)?;
                let window = (u128::from(every.as_millis()) * PPM).div_ceil(slowest);
                Bound::Window(u64::try_from(window).ok()? + INTERVAL_SLACK_MS)
            }
            (None, None) => return None,
        };
        Some(Replay {
            bound,
            children_from: u32::try_from(partitions).unwrap_or(u32::MAX),
            partitions: vec![Partition::default(); partitions],
            pending: HashMap::new(),
            busy: HashMap::new(),
            failed: HashSet::new(),
            paused: HashMap::new(),
        })
    }

    fn part(&mut self, partition: u32) -> &mut Partition {
        let i = partition as usize;
        if i >= self.partitions.len() {
            self.partitions.resize(i + 1, Partition::default());
        }
        &mut self.partitions[i]
    }

    /// Host `host` sent write `id` of `partition`'s lease carrying `carried`, with
    /// `committed` events committed so far.
    pub(super) fn sent(
        &mut self,
        host: usize,
        id: RequestId,
        partition: u32,
        carried: u64,
        committed: u64,
    ) {
        self.pending.insert((host, id), partition);
        *self.busy.entry((host, partition)).or_default() += 1;
        let p = self.part(partition);
        p.sent = p.sent.max(carried);
        if carried >= committed {
            p.flown = 0;
        }
        let sent = p.sent;
        while p.unsent.front().is_some_and(|c| c.hi <= sent) {
            p.unsent.pop_front();
        }
        if let Some(c) = p.unsent.front_mut() {
            c.lo = c.lo.max(sent);
        }
    }

    /// Host `host` heard the answer to request `id`.
    pub(super) fn answered(&mut self, host: usize, id: RequestId, ok: bool) {
        let Some(partition) = self.pending.remove(&(host, id)) else {
            return;
        };
        if let Some(busy) = self.busy.get_mut(&(host, partition)) {
            *busy = busy.saturating_sub(1);
        }
        if ok {
            self.failed.remove(&(host, partition));
        } else {
            self.failed.insert((host, partition));
        }
        if self.busy.get(&(host, partition)) == Some(&0) {
            self.busy.remove(&(host, partition));
        }
    }

    /// Host `host` committed a batch of `events` of `partition` at true time `now`,
    /// of which `first..` are committed for the first time; `waits` if the host's
    /// writes of the lease wait (backing off after a failed read of it, which this
    /// check does not see: the confirm read before a handoff is of a heartbeat).
    pub(super) fn committed(
        &mut self,
        host: usize,
        partition: u32,
        events: u64,
        first: std::ops::Range<u64>,
        now: u64,
        waits: bool,
    ) {
        let busy = waits
            || self.busy.contains_key(&(host, partition))
            || self.failed.contains(&(host, partition));
        let paused = self.paused.get(&host).copied().unwrap_or(0);
        let window = matches!(self.bound, Bound::Window(_));
        let p = self.part(partition);
        if busy {
            p.flown = p.flown.saturating_add(events);
        } else if window && first.end > first.start.max(p.sent) {
            p.unsent.push_back(Commit {
                lo: first.start.max(p.sent),
                hi: first.end,
                at: now,
                host,
                paused,
                ended: None,
            });
        }
    }

    /// Host `host`'s call of `partition` ended at true time `now`.
    pub(super) fn ended(&mut self, host: usize, partition: u32, now: u64) {
        for c in &mut self.part(partition).unsent {
            if c.host == host {
                c.ended.get_or_insert(now);
            }
        }
    }

    /// Host `host` stalls for `ms`: a checkpoint it holds falls due that much later.
    pub(super) fn paused(&mut self, host: usize, ms: u64) {
        *self.paused.entry(host).or_default() += ms;
    }

    /// A life of `host` ended: its writes' answers will never be heard.
    pub(super) fn forget(&mut self, host: usize) {
        self.pending.retain(|(h, _), _| *h != host);
        self.busy.retain(|(h, _), _| *h != host);
        self.failed.retain(|(h, _)| *h != host);
    }

    /// A call of `partition` starts at `from`, at true time `now`, with `committed`
    /// events committed: the events beyond the bound it delivers again, if any.
    pub(super) fn beyond_bound(
        &mut self,
        partition: u32,
        from: u64,
        committed: u64,
        now: u64,
    ) -> Option<u64> {
        if partition >= self.children_from {
            return None;
        }
        let bound = self.bound;
        self.part(partition);
        let (p, paused) = (&self.partitions[partition as usize], &self.paused);
        let base = p.sent.max(from);
        match bound {
            Bound::Events(allowance) => {
                let beyond = committed.saturating_sub(base);
                (beyond > allowance.saturating_add(p.flown)).then_some(beyond)
            }
            Bound::Window(window) => {
                // The committer could write until its call ended; a call not seen to
                // end (a rival's, which the exclusivity check reports) is judged now.
                let overdue: u64 = p
                    .unsent
                    .iter()
                    .filter(|c| c.hi > base)
                    .filter(|c| {
                        let stalled = paused.get(&c.host).copied().unwrap_or(0);
                        let stalled = stalled.saturating_sub(c.paused);
                        c.at + window + stalled < c.ended.unwrap_or(now)
                    })
                    .map(|c| c.hi - c.lo.max(base))
                    .sum();
                (overdue > 0).then_some(overdue)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_engine::Incarnation;

    fn id(seq: u64) -> RequestId {
        RequestId {
            incarnation: Incarnation(0),
            seq,
        }
    }

    fn every_3() -> Replay {
        Replay::new(CheckpointPolicy::AtMostEveryItems(3), 1, 0).expect("a count")
    }

    #[test]
    fn a_new_call_may_start_fewer_than_the_count_behind_what_was_sent() {
        let mut r = every_3();
        r.sent(0, id(1), 0, 10, 10);
        r.answered(0, id(1), true);
        r.committed(0, 0, 2, 0..0, 0, false);
        assert_eq!(r.beyond_bound(0, 10, 12, 0), None);
    }

    #[test]
    fn a_new_call_as_far_behind_as_the_count_breaks_the_bound() {
        let mut r = every_3();
        r.sent(0, id(1), 0, 10, 10);
        r.answered(0, id(1), true);
        r.committed(0, 0, 3, 0..0, 0, false);
        assert_eq!(r.beyond_bound(0, 10, 13, 0), Some(3));
        // After every batch, one event unsent is already too many.
        let mut every_batch = Replay::new(CheckpointPolicy::EveryBatch, 1, 0).expect("a count");
        every_batch.committed(0, 0, 1, 0..0, 0, false);
        assert_eq!(every_batch.beyond_bound(0, 0, 1, 0), Some(1));
    }

    #[test]
    fn what_was_committed_while_a_write_flew_or_after_it_failed_is_allowed() {
        let mut r = every_3();
        r.sent(0, id(1), 0, 10, 10);
        r.committed(0, 0, 4, 0..0, 0, false);
        r.answered(0, id(1), false);
        r.committed(0, 0, 4, 0..0, 0, false);
        assert_eq!(r.beyond_bound(0, 10, 18, 0), None);
        // A write that carries everything committed starts the count again.
        r.sent(0, id(2), 0, 18, 18);
        r.answered(0, id(2), true);
        r.committed(0, 0, 3, 0..0, 0, false);
        assert_eq!(r.beyond_bound(0, 18, 21, 0), Some(3));
    }

    #[test]
    fn what_was_committed_while_the_engine_held_the_leases_writes_back_is_allowed() {
        // No write of it flew or failed, but the host backed off after a failed read
        // of the lease (the confirm before a handoff): the store held it back.
        let mut every_batch = Replay::new(CheckpointPolicy::EveryBatch, 1, 0).expect("a count");
        every_batch.committed(0, 0, 59, 266..325, 0, true);
        assert_eq!(every_batch.beyond_bound(0, 266, 325, 0), None);
        // The same batch with the writes free breaks the bound.
        let mut every_batch = Replay::new(CheckpointPolicy::EveryBatch, 1, 0).expect("a count");
        every_batch.committed(0, 0, 59, 266..325, 0, false);
        assert_eq!(every_batch.beyond_bound(0, 266, 325, 0), Some(59));
    }

    fn every_10s(drift_ppm: u64) -> Replay {
        let policy = CheckpointPolicy::AtMostEvery(leasehold_engine::Millis::from_secs(10));
        Replay::new(policy, 1, drift_ppm).expect("an interval")
    }

    /// Events 10..15 committed at 50 s, then the call ends at `end`.
    fn held_from_50s(r: &mut Replay, end: u64) {
        r.sent(0, id(1), 0, 10, 10);
        r.answered(0, id(1), true);
        r.committed(0, 0, 5, 10..15, 50_000, false);
        r.ended(0, 0, end);
    }

    #[test]
    fn under_an_interval_what_was_held_for_less_than_it_may_be_replayed() {
        let mut r = every_10s(0);
        // Ended 10 s + the slack after the commit: the write was not yet due.
        held_from_50s(&mut r, 61_000);
        assert_eq!(r.beyond_bound(0, 10, 15, 70_000), None);
        // A write that carried them leaves nothing to replay.
        let mut r = every_10s(0);
        held_from_50s(&mut r, 90_000);
        r.sent(0, id(2), 0, 15, 15);
        assert_eq!(r.beyond_bound(0, 15, 15, 95_000), None);
    }

    #[test]
    fn under_an_interval_the_bound_runs_to_the_end_of_the_committers_own_call() {
        let mut r = every_10s(0);
        r.committed(0, 0, 5, 10..15, 50_000, false);
        r.ended(0, 0, 55_000);
        // Another host's later call, started and ended long after, changes nothing.
        r.ended(1, 0, 200_000);
        assert_eq!(r.beyond_bound(0, 10, 15, 210_000), None);
        // A call not seen to end is judged at the new start.
        let mut r = every_10s(0);
        r.committed(0, 0, 5, 10..15, 50_000, false);
        assert_eq!(r.beyond_bound(0, 10, 15, 70_000), Some(5));
    }

    #[test]
    fn under_an_interval_what_was_held_longer_than_it_breaks_the_bound() {
        let mut r = every_10s(0);
        held_from_50s(&mut r, 61_001);
        assert_eq!(r.beyond_bound(0, 10, 15, 70_000), Some(5));
        // A new call that starts past them replays none of them.
        assert_eq!(r.beyond_bound(0, 15, 15, 70_000), None);
    }

    #[test]
    fn a_slow_clock_and_a_pause_of_the_holder_stretch_the_interval() {
        // At 10 % slow, 10 s on the holder's clock are 11.2 s of true time.
        let mut r = every_10s(100_000);
        held_from_50s(&mut r, 62_000);
        assert_eq!(r.beyond_bound(0, 10, 15, 70_000), None);
        let mut r = every_10s(0);
        r.sent(0, id(1), 0, 10, 10);
        r.committed(0, 0, 5, 10..15, 50_000, false);
        r.answered(0, id(1), true);
        assert_eq!(
            r.beyond_bound(0, 10, 15, 70_000),
            None,
            "committed while a write flew"
        );
        let paused_then_ended = |end: u64| {
            let mut r = every_10s(0);
            r.committed(0, 0, 5, 10..15, 50_000, false);
            r.paused(0, 30_000);
            r.ended(0, 0, end);
            r.beyond_bound(0, 10, 15, end + 1_000)
        };
        assert_eq!(paused_then_ended(85_000), None);
        assert_eq!(paused_then_ended(95_000), Some(5));
    }

    #[test]
    fn a_clock_that_may_stand_still_leaves_an_interval_unchecked() {
        let policy = CheckpointPolicy::AtMostEvery(leasehold_engine::Millis::from_secs(5));
        assert!(Replay::new(policy, 1, 1_000_000).is_none());
        assert!(Replay::new(policy, 1, 999_999).is_some());
    }
}
