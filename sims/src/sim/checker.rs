//! Ground truth: who processes what, checked online against the properties the model
//! checker proves, and measured for the report.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Which property a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// Two hosts were entitled to process one partition at the same instant, or a
    /// handler's work took effect without authority.
    Exclusivity,
    /// A stale owner's write was accepted: downstream (an older epoch after a newer
    /// one) or by the store (an owner write from a host that no longer owns the lease).
    Fencing,
    /// A stored checkpoint went backwards.
    CheckpointMonotonicity,
    /// An event was skipped, or never processed by the end of the run.
    EventLost,
    /// After the faults healed, the work did not settle by the deadline: a partition
    /// unprocessed or processed twice, or (for `handoff`) an unbalanced assignment.
    Liveness,
    /// The engine refused an input the simulator sent: a bug in the driver.
    Driver,
    /// Two handler calls of one partition overlapped on one host, or two
    /// overlapping calls shared an epoch, so downstream fencing could not tell them
    /// apart.
    Session,
    /// A queue consumer was told its completion was lost although that very
    /// completion deleted the message.
    Misreport,
    /// A new call delivered again more than the checkpoint policy allows beyond what
    /// a write in flight carried.
    Replay,
    /// A host wrote again on a version the store had refused it (412), which a
    /// lagging replica still showed: without a backoff, a busy loop against the
    /// store for as long as the replica lags.
    Rewrite,
}

impl ViolationKind {
    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Exclusivity => "exclusivity",
            ViolationKind::Fencing => "fencing",
            ViolationKind::CheckpointMonotonicity => "checkpoint-monotonicity",
            ViolationKind::EventLost => "event-lost",
            ViolationKind::Liveness => "liveness",
            ViolationKind::Driver => "driver",
            ViolationKind::Session => "session",
            ViolationKind::Misreport => "misreport",
            ViolationKind::Replay => "replay",
            ViolationKind::Rewrite => "rewrite",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken property.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    /// Which property.
    pub kind: ViolationKind,
    /// True time, in seconds.
    pub at_s: f64,
    /// What happened, in the domain's words.
    pub detail: String,
}

/// A handler that is running: started, not stopped, and its host not paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Running {
    /// The host's slot.
    pub host: usize,
    /// The lease epoch it processes under.
    pub epoch: u64,
}

#[derive(Clone, Debug, Default)]
struct Partition {
    running: Vec<Running>,
    /// Calls told that their lease is lost, still running until they return or are
    /// aborted. They no longer count as processing the partition.
    lingering: Vec<Running>,
    /// Every event below this was committed downstream at least once.
    committed: u64,
    /// The highest epoch whose work took effect downstream.
    max_epoch: u64,
    /// The epoch whose calls are delivering events again, and how many so far.
    replay: (u64, u64),
    /// The host that last started it, for counting moves.
    last_host: Option<usize>,
    /// Since when two or more handlers run at once.
    overlap_since: Option<u64>,
    /// Its range split: its children's leases replace its own, and it no longer
    /// counts for coverage or balance.
    gone: bool,
    /// Since when its host is gone (crashed, or told to shut down), and whether the
    /// host left gracefully: until another start ends the wait.
    orphaned: Option<(u64, bool)>,
}

/// The online checker and the run's measures.
#[derive(Clone, Debug)]
pub struct Checker {
    partitions: Vec<Partition>,
    /// Partitions each host slot is running.
    counts: Vec<u32>,
    /// Which host slots count for balance: up and not shutting down.
    live: Vec<bool>,
    /// Host slots told to shut down, which may process on through a leave notice:
    /// each partition's handover is timed from its handler's stop.
    leaving: Vec<bool>,
    /// Partitions with exactly one running handler, of those not gone.
    covered: usize,
    /// Partitions whose range split.
    gone: usize,
    violations: Vec<Violation>,
    /// Violations beyond this many are counted, not kept.
    keep: usize,
    dropped: BTreeMap<ViolationKind, u64>,
    /// When the disturbance happened; moves and imbalance count from then.
    disturbance: u64,
    balanced_since: Option<u64>,
    /// Owners at the disturbance, for the minimum number of moves.
    owners_at_disturbance: Option<Vec<Option<usize>>>,
    /// Counted measures.
    pub moves: u64,
    /// Events committed more than once.
    pub duplicate_events: u64,
    /// The most events the calls of one epoch of one partition delivered again: the
    /// longest replay a new owner made.
    pub max_replay: u64,
    /// Time two handlers ran for one partition, summed over partitions.
    pub duplicate_ms: u64,
    /// Events committed (with duplicates).
    pub events_processed: u64,
    /// Handler calls told their lease was lost that were still running.
    pub lost_calls: u64,
    /// Of those, calls that outlived the grace period and were aborted.
    pub aborted_calls: u64,
    /// Of those, calls stuck in blocking code: no abort ended them, and they ran on
    /// past the stop timeout.
    pub stuck_calls: u64,
    /// Batches that finished after their lease was lost: their writes reach the
    /// downstream, which refuses them by their epoch.
    pub fenced_batches: u64,
    /// The longest an event waited from arrival to its first commit.
    pub max_lag_ms: u64,
    /// The largest spread between the most and least loaded live hosts after the
    /// disturbance.
    pub max_imbalance: u32,
    /// Takeovers after a host crashed or left: each of its partitions processed
    /// again, timed from its death or its stop.
    pub takeovers: Takeovers,
    /// Of those, the ones after a graceful shutdown: the handover.
    pub handovers: Takeovers,
}

/// How long partitions waited to be processed again after their host crashed or
/// left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Takeovers {
    /// How many.
    pub count: u64,
    /// The longest wait, in ms.
    pub max_ms: u64,
    /// The waits summed, in ms.
    pub total_ms: u64,
}

impl Takeovers {
    fn add(&mut self, waited: u64) {
        self.count += 1;
        self.max_ms = self.max_ms.max(waited);
        self.total_ms += waited;
    }

    /// The mean wait, in seconds.
    pub fn mean_s(&self) -> Option<f64> {
        (self.count > 0).then(|| self.total_ms as f64 / self.count as f64 / 1_000.0)
    }
}

impl Checker {
    /// A checker for `partitions` partitions; the disturbance is at true time
    /// `disturbance`.
    pub fn new(partitions: usize, disturbance: u64) -> Checker {
        Checker {
            partitions: vec![Partition::default(); partitions],
            counts: Vec::new(),
            live: Vec::new(),
            leaving: Vec::new(),
            covered: 0,
            gone: 0,
            violations: Vec::new(),
            keep: 20,
            dropped: BTreeMap::new(),
            disturbance,
            balanced_since: None,
            owners_at_disturbance: None,
            moves: 0,
            duplicate_events: 0,
            max_replay: 0,
            duplicate_ms: 0,
            events_processed: 0,
            lost_calls: 0,
            aborted_calls: 0,
            stuck_calls: 0,
            fenced_batches: 0,
            max_lag_ms: 0,
            max_imbalance: 0,
            takeovers: Takeovers::default(),
            handovers: Takeovers::default(),
        }
    }

    /// Records a violation.
    pub fn violate(&mut self, kind: ViolationKind, at: u64, detail: String) {
        if self.violations.len() < self.keep {
            self.violations.push(Violation {
                kind,
                at_s: at as f64 / 1_000.0,
                detail,
            });
        } else {
            *self.dropped.entry(kind).or_default() += 1;
        }
    }

    /// The violations kept, in order.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Violations by kind, including those not kept.
    pub fn violation_counts(&self) -> BTreeMap<ViolationKind, u64> {
        let mut counts = self.dropped.clone();
        for v in &self.violations {
            *counts.entry(v.kind).or_default() += 1;
        }
        counts
    }

    /// The handlers running for `partition`.
    pub fn running(&self, partition: u32) -> &[Running] {
        &self.partitions[partition as usize].running
    }

    /// How far `partition` has been committed downstream.
    pub fn committed(&self, partition: u32) -> u64 {
        self.partitions[partition as usize].committed
    }

    fn slot(&mut self, host: usize) {
        if self.counts.len() <= host {
            self.counts.resize(host + 1, 0);
            self.live.resize(host + 1, false);
            self.leaving.resize(host + 1, false);
        }
    }

    /// Whether `host` counts for balance.
    pub fn set_live(&mut self, host: usize, live: bool, now: u64) {
        self.slot(host);
        self.live[host] = live;
        if live {
            self.leaving[host] = false;
        }
        self.changed(now);
    }

    /// Why a call of `partition` starting on `host` at `epoch` would break the stop
    /// contract: another call of it still running on that host, or any overlapping
    /// call at the same epoch.
    pub fn clash(&self, partition: u32, host: usize, epoch: u64) -> Option<String> {
        let p = &self.partitions[partition as usize];
        let calls = p.running.iter().chain(&p.lingering);
        let mut clash = None;
        for call in calls {
            if call.host == host {
                return Some(format!(
                    "a second call of partition {partition} starts on its host while one at epoch {} still runs",
                    call.epoch
                ));
            }
            if call.epoch == epoch {
                clash = Some(format!(
                    "a call of partition {partition} starts at epoch {epoch} while another at that epoch still runs"
                ));
            }
        }
        clash
    }

    /// A call of `host` on `partition` at `epoch` was told its lease is lost but
    /// runs on.
    pub fn linger(&mut self, partition: u32, host: usize, epoch: u64) {
        self.lost_calls += 1;
        self.partitions[partition as usize]
            .lingering
            .push(Running { host, epoch });
    }

    /// A lost call of `host` on `partition` ended: it returned, or was aborted.
    pub fn unlinger(&mut self, partition: u32, host: usize, aborted: bool) {
        let p = &mut self.partitions[partition as usize];
        if let Some(i) = p.lingering.iter().position(|r| r.host == host) {
            p.lingering.swap_remove(i);
            self.aborted_calls += u64::from(aborted);
        }
    }

    /// `host` crashed, or was told to shut down (`graceful`), at `now`: every
    /// partition it runs waits for another start, timed from here after a crash, and
    /// from its handler's stop after a shutdown (a host that announces its leave
    /// processes on through the notice). Only after the disturbance, as moves are.
    pub fn orphan(&mut self, host: usize, graceful: bool, now: u64) {
        if now < self.disturbance {
            return;
        }
        if graceful {
            self.slot(host);
            self.leaving[host] = true;
            return;
        }
        for p in &mut self.partitions {
            if !p.gone && p.orphaned.is_none() && p.running.iter().any(|r| r.host == host) {
                p.orphaned = Some((now, graceful));
            }
        }
    }

    /// A handler of `host` runs `partition` at `epoch` from now on (a start, or the
    /// end of a pause). `start` says it is a new start, which may count as a move.
    pub fn run(&mut self, partition: u32, host: usize, epoch: u64, start: bool, now: u64) {
        self.slot(host);
        if start && now >= self.disturbance {
            self.snapshot_owners();
        }
        let p = &mut self.partitions[partition as usize];
        if let Some((since, graceful)) = p.orphaned.filter(|_| start) {
            p.orphaned = None;
            let waited = now.saturating_sub(since);
            self.takeovers.add(waited);
            if graceful {
                self.handovers.add(waited);
            }
        }
        let p = &mut self.partitions[partition as usize];
        if start {
            if now >= self.disturbance && p.last_host.is_some_and(|h| h != host) {
                self.moves += 1;
            }
            p.last_host = Some(host);
        }
        let before = p.running.len();
        p.running.push(Running { host, epoch });
        if before == 1 {
            p.overlap_since = Some(now);
        }
        if p.gone {
            return;
        }
        self.covered = match before {
            0 => self.covered + 1,
            1 => self.covered - 1,
            _ => self.covered,
        };
        self.counts[host] += 1;
        self.changed(now);
    }

    /// The handler of `host` for `partition` no longer runs (stopped, crashed or paused).
    pub fn halt(&mut self, partition: u32, host: usize, now: u64) {
        let p = &mut self.partitions[partition as usize];
        let Some(i) = p.running.iter().position(|r| r.host == host) else {
            return;
        };
        p.running.swap_remove(i);
        let after = p.running.len();
        if after == 0
            && !p.gone
            && p.orphaned.is_none()
            && self.leaving.get(host).copied().unwrap_or(false)
        {
            p.orphaned = Some((now, true));
        }
        if after == 1
            && let Some(since) = p.overlap_since.take()
        {
            self.duplicate_ms += now - since;
        }
        if p.gone {
            return;
        }
        self.covered = match after {
            0 => self.covered - 1,
            1 => self.covered + 1,
            _ => self.covered,
        };
        self.counts[host] -= 1;
        self.changed(now);
    }

    /// Work of `host` at `epoch` on events `from..to` of `partition` took effect at
    /// `now`; `arrival` is when event `from` arrived.
    pub fn commit(
        &mut self,
        partition: u32,
        epoch: u64,
        from: u64,
        to: u64,
        arrival: u64,
        now: u64,
    ) -> Result<(), (ViolationKind, String)> {
        let p = &mut self.partitions[partition as usize];
        self.events_processed += to - from;
        if epoch < p.max_epoch {
            return Err((
                ViolationKind::Fencing,
                format!(
                    "partition {partition}: work at epoch {epoch} took effect after work at epoch {}",
                    p.max_epoch
                ),
            ));
        }
        p.max_epoch = epoch;
        if from > p.committed {
            return Err((
                ViolationKind::EventLost,
                format!(
                    "partition {partition}: events {}..{from} were skipped (a handler resumed past them)",
                    p.committed
                ),
            ));
        }
        let again = to.min(p.committed) - from;
        self.duplicate_events += again;
        if again > 0 {
            if p.replay.0 != epoch {
                p.replay = (epoch, 0);
            }
            p.replay.1 += again;
            self.max_replay = self.max_replay.max(p.replay.1);
        }
        if to > p.committed {
            if from == p.committed {
                self.max_lag_ms = self.max_lag_ms.max(now.saturating_sub(arrival));
            }
            p.committed = to;
        }
        Ok(())
    }

    /// Whether every partition is run by exactly one live host, and the live hosts'
    /// loads differ by at most one.
    pub fn balanced(&self) -> bool {
        self.covered() && self.spread() <= 1
    }

    /// Whether every partition is run by exactly one live host.
    pub fn covered(&self) -> bool {
        self.covered == self.partitions.len() - self.gone && self.all_on_live()
    }

    /// Partition `partition`'s range split at `now` into new partitions, which
    /// inherit everything it committed so far. It no longer counts for coverage or
    /// balance; handlers still running it stop counting too. Returns the children's
    /// numbers.
    pub fn split(&mut self, partition: u32, children: usize, now: u64) -> Vec<u32> {
        let p = &mut self.partitions[partition as usize];
        p.gone = true;
        p.orphaned = None;
        self.gone += 1;
        let running = p.running.clone();
        let committed = p.committed;
        if running.len() == 1 {
            self.covered -= 1;
        }
        for r in running {
            self.counts[r.host] -= 1;
        }
        let first = self.partitions.len() as u32;
        for _ in 0..children {
            self.partitions.push(Partition {
                committed,
                ..Partition::default()
            });
        }
        self.changed(now);
        (first..first + children as u32).collect()
    }

    /// `child` inherits whatever its parent committed since the split (a batch that
    /// was in flight then).
    pub fn inherit(&mut self, child: u32, committed: u64) {
        let c = &mut self.partitions[child as usize];
        c.committed = c.committed.max(committed);
    }

    fn all_on_live(&self) -> bool {
        self.counts
            .iter()
            .zip(&self.live)
            .all(|(count, live)| *live || *count == 0)
    }

    /// The most minus the fewest partitions run by a live host.
    pub fn spread(&self) -> u32 {
        let loads = self
            .counts
            .iter()
            .zip(&self.live)
            .filter(|(_, live)| **live)
            .map(|(c, _)| *c);
        let (min, max) = loads.fold((u32::MAX, 0), |(lo, hi), c| (lo.min(c), hi.max(c)));
        max.saturating_sub(min.min(max))
    }

    fn changed(&mut self, now: u64) {
        if now >= self.disturbance {
            self.max_imbalance = self.max_imbalance.max(self.spread());
        }
        match (self.balanced(), self.balanced_since) {
            (true, None) => self.balanced_since = Some(now),
            (false, Some(_)) => self.balanced_since = None,
            _ => {}
        }
    }

    fn snapshot_owners(&mut self) {
        if self.owners_at_disturbance.is_none() {
            // A partition never processed yet is not moved when first taken.
            let owners = self
                .partitions
                .iter()
                .map(|p| p.running.first().map(|r| r.host).or(p.last_host))
                .collect();
            self.owners_at_disturbance = Some(owners);
        }
    }

    /// Marks the disturbance: the owners now are what the minimum moves start from.
    pub fn disturb(&mut self, now: u64) {
        self.disturbance = now;
        self.owners_at_disturbance = None;
        self.snapshot_owners();
    }

    /// Seconds from the disturbance until the assignment became balanced for good, if
    /// it is balanced now.
    pub fn converge_s(&self) -> Option<f64> {
        self.balanced_since
            .map(|t| t.saturating_sub(self.disturbance) as f64 / 1_000.0)
    }

    /// The fewest moves that take the owners at the disturbance to a balanced
    /// assignment over the hosts live now: every partition of a host that is gone,
    /// plus each live host's excess over its share.
    pub fn min_moves(&self) -> u64 {
        let Some(owners) = &self.owners_at_disturbance else {
            return 0;
        };
        let live: Vec<usize> = (0..self.live.len()).filter(|h| self.live[*h]).collect();
        if live.is_empty() {
            return 0;
        }
        let mut loads: BTreeMap<usize, u64> = live.iter().map(|h| (*h, 0)).collect();
        let mut orphans = 0;
        for owner in owners.iter().flatten() {
            match loads.get_mut(owner) {
                Some(load) => *load += 1,
                None => orphans += 1,
            }
        }
        let total = owners.iter().flatten().count() as u64;
        let hosts = live.len() as u64;
        let (share, extra) = (total / hosts, total % hosts);
        let mut sorted: Vec<u64> = loads.into_values().collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let excess: u64 = sorted
            .iter()
            .enumerate()
            .map(|(i, load)| {
                let quota = share + u64::from((i as u64) < extra);
                load.saturating_sub(quota)
            })
            .sum();
        orphans + excess
    }

    /// Ends overlap accounting at `now`.
    pub fn finish(&mut self, now: u64) {
        for p in &mut self.partitions {
            if let Some(since) = p.overlap_since.take() {
                self.duplicate_ms += now - since;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_out_from_one_host_needs_all_but_its_share_moved() {
        let mut checker = Checker::new(10, 100);
        checker.set_live(0, true, 0);
        for p in 0..10 {
            checker.run(p, 0, 1, true, 0);
        }
        assert!(checker.balanced());
        checker.set_live(1, true, 100);
        checker.disturb(100);
        assert!(!checker.balanced());
        assert_eq!(checker.min_moves(), 5);
        for p in 0..5 {
            checker.halt(p, 0, 200);
            checker.run(p, 1, 2, true, 300);
        }
        assert_eq!(checker.moves, 5);
        assert_eq!(checker.converge_s(), Some(0.2));
    }

    #[test]
    fn a_handler_resuming_past_unprocessed_events_is_an_event_lost() {
        let mut checker = Checker::new(1, 0);
        assert!(checker.commit(0, 1, 0, 10, 0, 5).is_ok());
        assert!(checker.commit(0, 2, 5, 12, 0, 6).is_ok());
        assert_eq!(checker.duplicate_events, 5);
        assert!(matches!(
            checker.commit(0, 2, 20, 30, 0, 7),
            Err((ViolationKind::EventLost, _))
        ));
        assert!(matches!(
            checker.commit(0, 1, 30, 31, 0, 8),
            Err((ViolationKind::Fencing, _))
        ));
    }

    #[test]
    fn a_call_starting_beside_a_lost_call_on_its_host_or_at_its_epoch_clashes() {
        let mut checker = Checker::new(1, 0);
        checker.set_live(0, true, 0);
        checker.run(0, 0, 3, true, 0);
        checker.halt(0, 0, 10);
        checker.linger(0, 0, 3);
        assert!(checker.clash(0, 0, 4).is_some(), "same host, still running");
        assert!(checker.clash(0, 1, 3).is_some(), "same epoch elsewhere");
        assert_eq!(checker.clash(0, 1, 4), None, "another host, a newer epoch");
        checker.unlinger(0, 0, true);
        assert_eq!(checker.aborted_calls, 1);
        assert_eq!(checker.clash(0, 0, 3), None, "the lost call has ended");
    }

    #[test]
    fn two_running_handlers_count_as_duplicate_time() {
        let mut checker = Checker::new(1, 0);
        checker.set_live(0, true, 0);
        checker.set_live(1, true, 0);
        checker.run(0, 0, 1, true, 0);
        checker.run(0, 1, 2, true, 1_000);
        checker.halt(0, 0, 4_000);
        assert_eq!(checker.duplicate_ms, 3_000);
    }
}
