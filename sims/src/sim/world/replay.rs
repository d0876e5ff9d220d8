//! The replay bound of the checkpoint policy, checked from outside the engine: a new
//! call may start behind what was committed only by what the policy holds back (fewer
//! than `n` events under a policy of `n`, none after every batch) beyond what a write
//! in flight carried, or what was committed while the lease's writes were busy (a
//! write on the wire, or a failure not yet followed by a write that went through).
//! The model checks the same bound (`REPLAY_BOUNDED` in `leasehold_model`).

use leasehold_engine::RequestId;
use leasehold_engine::lease::CheckpointPolicy;
use std::collections::{HashMap, HashSet};

/// What the check knows of one partition.
#[derive(Clone, Copy, Debug, Default)]
struct Partition {
    /// The highest checkpoint a write of its lease carried.
    sent: u64,
    /// Events committed while the committing host's writes of the lease were busy,
    /// since a write last carried everything committed.
    flown: u64,
}

/// The check of one run.
#[derive(Debug)]
pub(super) struct Replay {
    /// What the policy may hold back, in events.
    allowance: u64,
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
}

impl Replay {
    /// The check for `policy`, or none where the bound is a time, not a count.
    pub(super) fn new(policy: CheckpointPolicy, partitions: usize) -> Option<Replay> {
        let allowance = u64::from(policy.lag_allowance()?);
        Some(Replay {
            allowance,
            children_from: u32::try_from(partitions).unwrap_or(u32::MAX),
            partitions: vec![Partition::default(); partitions],
            pending: HashMap::new(),
            busy: HashMap::new(),
            failed: HashSet::new(),
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

    /// Host `host` committed `events` of `partition`.
    pub(super) fn committed(&mut self, host: usize, partition: u32, events: u64) {
        let busy =
            self.busy.contains_key(&(host, partition)) || self.failed.contains(&(host, partition));
        if busy {
            let p = self.part(partition);
            p.flown = p.flown.saturating_add(events);
        }
    }

    /// A life of `host` ended: its writes' answers will never be heard.
    pub(super) fn forget(&mut self, host: usize) {
        self.pending.retain(|(h, _), _| *h != host);
        self.busy.retain(|(h, _), _| *h != host);
        self.failed.retain(|(h, _)| *h != host);
    }

    /// A call of `partition` starts at `from` with `committed` events committed: the
    /// events beyond the bound it delivers again, if any.
    pub(super) fn beyond_bound(
        &mut self,
        partition: u32,
        from: u64,
        committed: u64,
    ) -> Option<u64> {
        if partition >= self.children_from {
            return None;
        }
        let allowance = self.allowance;
        let p = self.part(partition);
        let beyond = committed.saturating_sub(p.sent.max(from));
        (beyond > allowance.saturating_add(p.flown)).then_some(beyond)
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
        Replay::new(CheckpointPolicy::AtMostEveryItems(3), 1).expect("a count")
    }

    #[test]
    fn a_new_call_may_start_fewer_than_the_count_behind_what_was_sent() {
        let mut r = every_3();
        r.sent(0, id(1), 0, 10, 10);
        r.answered(0, id(1), true);
        r.committed(0, 0, 2);
        assert_eq!(r.beyond_bound(0, 10, 12), None);
    }

    #[test]
    fn a_new_call_as_far_behind_as_the_count_breaks_the_bound() {
        let mut r = every_3();
        r.sent(0, id(1), 0, 10, 10);
        r.answered(0, id(1), true);
        r.committed(0, 0, 3);
        assert_eq!(r.beyond_bound(0, 10, 13), Some(3));
        // After every batch, one event unsent is already too many.
        let mut every_batch = Replay::new(CheckpointPolicy::EveryBatch, 1).expect("a count");
        every_batch.committed(0, 0, 1);
        assert_eq!(every_batch.beyond_bound(0, 0, 1), Some(1));
    }

    #[test]
    fn what_was_committed_while_a_write_flew_or_after_it_failed_is_allowed() {
        let mut r = every_3();
        r.sent(0, id(1), 0, 10, 10);
        r.committed(0, 0, 4);
        r.answered(0, id(1), false);
        r.committed(0, 0, 4);
        assert_eq!(r.beyond_bound(0, 10, 18), None);
        // A write that carries everything committed starts the count again.
        r.sent(0, id(2), 0, 18, 18);
        r.answered(0, id(2), true);
        r.committed(0, 0, 3);
        assert_eq!(r.beyond_bound(0, 18, 21), Some(3));
    }

    #[test]
    fn an_interval_is_not_checked_as_a_count() {
        let policy = CheckpointPolicy::AtMostEvery(leasehold_engine::Millis::from_secs(5));
        assert!(Replay::new(policy, 1).is_none());
    }
}
