//! Ground truth of a queue run: who processed which message when, and what became of
//! it; checked online and measured for the report.

use super::config::QueueConfig;
use crate::sim::checker::{Violation, ViolationKind};
use leasehold_engine::DocId;
use leasehold_engine::queue::Message;
use leasehold_engine::store::Container;
use std::collections::{BTreeMap, BTreeSet};

/// A consumer's life: (consumer, life).
pub type Holder = (usize, u64);

#[derive(Clone, Debug, Default)]
struct Fate {
    number: u32,
    enqueued_at: u64,
    /// Handler runs that held authority from start to end.
    runs: Vec<(Holder, u64, u64)>,
    commits: u32,
    first_commit: Option<u64>,
    deleted: Option<u64>,
    /// The consumer life whose completion deleted it.
    deleted_by: Option<Holder>,
    dead_lettered: Option<u64>,
    deliveries: u32,
}

/// What a queue run's ground truth says.
#[derive(Clone, Debug)]
pub struct Truth {
    fates: BTreeMap<DocId, Fate>,
    poison_every: u32,
    max_dequeue: u32,
    heal_at: u64,
    violations: Vec<Violation>,
    counts: BTreeMap<ViolationKind, u64>,
    lock_lost: u64,
    dropped: u64,
    last_settled: u64,
    /// Messages stored and not yet settled: when their current version was written
    /// (true time), and whether it is locked.
    open: BTreeMap<DocId, (u64, bool)>,
    /// Per consumer: since when it has been up, unpaused and holding fewer messages
    /// than its batch, without a break.
    room_since: Vec<Option<u64>>,
    /// Consumer time with room after the heal, ms.
    room_after_heal: u64,
    consumers: u64,
    deadline: u64,
    /// How long a message may wait while a consumer has room, on top of the wait for
    /// a lock to expire and the spread of the clocks.
    grace: u64,
    /// From a lock's last write to when a consumer that watches it may take it.
    lock_wait: u64,
    /// The longest a delivery may occupy a consumer's slot after the heal.
    slot_limit: u64,
    starved: BTreeSet<DocId>,
    unfinished: u64,
}

/// What the report takes from ground truth.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct QueueMeasures {
    /// Messages enqueued.
    pub enqueued: u64,
    /// Messages processed and deleted.
    pub completed: u64,
    /// Poison messages dead-lettered, as they must be.
    pub dead_lettered_poison: u64,
    /// Healthy messages dead-lettered because faults made them reach the maximum.
    pub dead_lettered_healthy: u64,
    /// Deliveries, first ones included.
    pub deliveries: u64,
    /// Messages whose effect was committed more than once (at-least-once delivery).
    pub duplicate_commits: u64,
    /// Completes or abandons that found the lock taken over.
    pub lock_lost: u64,
    /// Handler results dropped because authority ran out first.
    pub dropped: u64,
    /// The longest time from enqueue to first commit, seconds.
    pub max_latency_s: f64,
    /// The mean time from enqueue to first commit, seconds.
    pub mean_latency_s: f64,
    /// When the last message was settled, seconds after the heal (0 if before).
    pub drained_after_heal_s: f64,
    /// Messages neither completed nor dead-lettered at the deadline. Not a violation
    /// by itself: the run may offer more work than its consumers can do (compare
    /// `room_after_heal`); a message that waits while a consumer has room is one.
    pub unfinished_at_deadline: u64,
    /// The share of consumer time after the heal with room for another message
    /// (0: every consumer always full, the load beyond capacity; 1: always room).
    pub room_after_heal: f64,
}

impl Truth {
    /// The ground truth of a run of `cfg`.
    pub fn new(cfg: &QueueConfig) -> Truth {
        Truth {
            fates: BTreeMap::new(),
            poison_every: cfg.poison_every,
            max_dequeue: cfg.max_dequeue,
            heal_at: cfg.heal_at(),
            violations: Vec::new(),
            counts: BTreeMap::new(),
            lock_lost: 0,
            dropped: 0,
            last_settled: 0,
            open: BTreeMap::new(),
            room_since: vec![None; cfg.consumers as usize],
            room_after_heal: 0,
            consumers: u64::from(cfg.consumers),
            deadline: cfg.deadline(),
            grace: Self::grace(cfg),
            lock_wait: Self::lock_wait(cfg),
            slot_limit: cfg.work_ms.1 + Self::lock_wait(cfg) + Self::grace(cfg),
            starved: BTreeSet::new(),
            unfinished: 0,
        }
    }

    /// A consumer with room polls within `poll`, and a request is answered within its
    /// timeout; a message given back comes back after its delay (1 s in these runs).
    /// Twice each, so that one unlucky turn is never a verdict.
    fn grace(cfg: &QueueConfig) -> u64 {
        2 * cfg.poll.as_millis() + 2 * cfg.network.request_timeout.as_millis() + 2_000
    }

    /// A consumer sees a lock within the lock-watch interval, then waits the lock's
    /// duration and the drift allowance on a clock that may run slow by as much.
    fn lock_wait(cfg: &QueueConfig) -> u64 {
        let lock = cfg.lock.as_millis();
        let drift = lock * u64::from(cfg.drift_bound_ppm) / 1_000_000;
        let watch = cfg.consumer_config().lock_watch_interval().as_millis();
        watch + lock + 2 * drift + cfg.margin.as_millis()
    }

    fn violate(&mut self, kind: ViolationKind, at: u64, detail: String) {
        *self.counts.entry(kind).or_default() += 1;
        if self.violations.len() < 20 {
            self.violations.push(Violation {
                kind,
                at_s: at as f64 / 1_000.0,
                detail,
            });
        }
    }

    /// Whether any property broke.
    pub fn violated(&self) -> bool {
        !self.counts.is_empty()
    }

    /// The first violations (at most 20).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Violations by kind.
    pub fn violation_counts(&self) -> &BTreeMap<ViolationKind, u64> {
        &self.counts
    }

    /// Message `number` was handed to the store (the first attempt counts).
    pub fn enqueue(&mut self, id: DocId, number: u32, now: u64) {
        self.fates.entry(id).or_insert_with(|| Fate {
            number,
            enqueued_at: now,
            ..Fate::default()
        });
    }

    /// The number of a message.
    pub fn number(&self, id: &DocId) -> u32 {
        self.fates.get(id).map_or(0, |f| f.number)
    }

    /// Whether a message's handler always fails.
    pub fn is_poison(&self, id: &DocId) -> bool {
        self.poison_every > 0 && self.number(id) % self.poison_every == 0
    }

    /// A consumer was handed the message.
    pub fn delivered(&mut self, id: &DocId) {
        if let Some(f) = self.fates.get_mut(id) {
            f.deliveries += 1;
        }
    }

    /// A handler ran on `id` from `start` to `end` holding authority throughout;
    /// `committed` if its effect took place. Two such runs of different consumers (or
    /// lives) overlapping is an exclusivity violation.
    pub fn processed(
        &mut self,
        id: &DocId,
        holder: Holder,
        start: u64,
        end: u64,
        committed: bool,
        dequeue_count: u32,
    ) {
        let Some(f) = self.fates.get_mut(id) else {
            return;
        };
        let rival = f
            .runs
            .iter()
            .find(|(h, s, e)| *h != holder && *s < end && start < *e)
            .copied();
        f.runs.push((holder, start, end));
        if committed {
            f.commits += 1;
            f.first_commit.get_or_insert(end);
        }
        if let Some(((c, life), s, e)) = rival {
            self.violate(
                ViolationKind::Exclusivity,
                end,
                format!(
                    "consumer c{} (life {}) processed {id} (delivery {dequeue_count}) from {:.3} s to \
                     {:.3} s while c{c} (life {life}) did from {:.3} s to {:.3} s",
                    holder.0,
                    holder.1,
                    start as f64 / 1e3,
                    end as f64 / 1e3,
                    s as f64 / 1e3,
                    e as f64 / 1e3
                ),
            );
        }
    }

    /// The store deleted a message, by `by`'s completion: only a completion after a
    /// commit may.
    pub fn deleted(&mut self, id: &DocId, by: Holder, now: u64) {
        let Some(f) = self.fates.get_mut(id) else {
            return;
        };
        f.deleted = Some(now);
        f.deleted_by = Some(by);
        self.open.remove(id);
        self.last_settled = self.last_settled.max(now);
        if f.commits == 0 {
            self.violate(
                ViolationKind::EventLost,
                now,
                format!("{id} was deleted but never processed"),
            );
        }
    }

    /// The store dead-lettered a message.
    pub fn dead_lettered(&mut self, doc: &Message, now: u64) {
        let max = self.max_dequeue;
        let Some(f) = self.fates.get_mut(&doc.id) else {
            return;
        };
        f.dead_lettered = Some(now);
        self.open.remove(&doc.id);
        self.last_settled = self.last_settled.max(now);
        if doc.dequeue_count < max {
            self.violate(
                ViolationKind::EventLost,
                now,
                format!(
                    "{} was dead-lettered after {} deliveries, short of the maximum {max}",
                    doc.id, doc.dequeue_count
                ),
            );
        }
    }

    /// The store accepted a holder's write after its lock was taken over.
    pub fn fenced(&mut self, now: u64, detail: String) {
        self.violate(ViolationKind::Fencing, now, detail);
    }

    /// A complete or abandon found the lock taken over.
    pub fn lock_lost(&mut self) {
        self.lock_lost += 1;
    }

    /// `holder` was told its completion of `id` was lost: wrong if that completion
    /// is the one that deleted it.
    pub fn completion_lost(&mut self, id: &DocId, holder: Holder, now: u64) {
        self.lock_lost();
        if self
            .fates
            .get(id)
            .is_some_and(|f| f.deleted_by == Some(holder))
        {
            self.violate(
                ViolationKind::Misreport,
                now,
                format!(
                    "c{} (life {}) was told its completion of {id} was lost, but that \
                     completion deleted it",
                    holder.0, holder.1
                ),
            );
        }
    }

    /// A handler's result was dropped for want of authority.
    pub fn dropped(&mut self) {
        self.dropped += 1;
    }

    /// The faults ended.
    pub fn heal(&mut self, now: u64) {
        self.heal_at = now;
    }

    /// The store wrote a new version of message `id`, `locked` or not.
    pub fn written(&mut self, id: &DocId, locked: bool, now: u64) {
        let settled = self
            .fates
            .get(id)
            .is_none_or(|f| f.deleted.is_some() || f.dead_lettered.is_some());
        if !settled {
            self.open.insert(id.clone(), (now, locked));
        }
    }

    /// Consumer `c` now has room for another message, or not.
    pub fn room(&mut self, c: usize, room: bool, now: u64) {
        let Some(slot) = self.room_since.get_mut(c) else {
            return;
        };
        match (*slot, room) {
            (None, true) => *slot = Some(now),
            (Some(since), false) => {
                *slot = None;
                self.room_after_heal += now.saturating_sub(since.max(self.heal_at));
            }
            _ => {}
        }
    }

    /// Checks, after the heal, what the protocol controls: no message waits while a
    /// consumer has room for it, and no delivery holds a consumer's slot for good.
    /// `spread` is how far apart the clocks' walls are (visibility is written by
    /// one clock and read by another); `slots` are the deliveries consumers hold:
    /// (consumer, message, since).
    pub fn probe(&mut self, now: u64, spread: u64, slots: &[(usize, DocId, u64)]) {
        if now < self.heal_at {
            return;
        }
        let wait = self.grace + spread;
        for (c, id, since) in slots {
            if now.saturating_sub((*since).max(self.heal_at)) > self.slot_limit + spread
                && self.starved.insert(id.clone())
            {
                self.violate(
                    ViolationKind::Liveness,
                    now,
                    format!(
                        "c{c} has held {id} since {:.3} s: a delivery never settled",
                        *since as f64 / 1e3
                    ),
                );
            }
        }
        // The consumer with room the longest: if it could not take a message, none
        // could.
        let Some(room) = self
            .room_since
            .iter()
            .enumerate()
            .filter_map(|(c, s)| s.map(|s| (s.max(self.heal_at), c)))
            .min()
        else {
            return;
        };
        if now < room.0 + wait {
            return;
        }
        let starved = self.open.iter().find(|(id, (since, locked))| {
            let mut start = (*since).max(room.0);
            if *locked {
                start += self.lock_wait;
            }
            now >= start + wait && !self.starved.contains(*id)
        });
        if let Some((id, (since, locked))) = starved {
            let id = id.clone();
            let what = if *locked {
                "its lock written"
            } else {
                "visible"
            };
            let detail = format!(
                "{id} waited ({what} at {:.3} s) while c{} had room from {:.3} s to {:.3} s",
                *since as f64 / 1e3,
                room.1,
                room.0 as f64 / 1e3,
                now as f64 / 1e3
            );
            self.starved.insert(id);
            self.violate(ViolationKind::Liveness, now, detail);
        }
    }

    /// At the deadline every message is completed or dead-lettered, and the store
    /// agrees.
    pub fn deadline(&mut self, now: u64, store: &Container<Message>) {
        let mut unfinished = Vec::new();
        let mut lost = Vec::new();
        // Dead letters live under ids of their own: keyed here by their message's.
        let stored: BTreeMap<DocId, Message> = store
            .read_all("")
            .into_iter()
            .map(|s| (Message::id_for(&s.doc.queue, &s.doc.name), s.doc))
            .collect();
        for (id, f) in &self.fates {
            let poison = self.poison_every > 0 && f.number % self.poison_every == 0;
            match (f.deleted, f.dead_lettered, stored.get(id)) {
                (Some(_), _, None) => {}
                (_, Some(_), Some(doc)) if doc.is_dead_lettered() => {}
                (None, None, Some(_)) => unfinished.push(id.clone()),
                (None, None, None) => lost.push(id.clone()),
                _ => lost.push(id.clone()),
            }
            if poison && f.deleted.is_some() {
                lost.push(id.clone());
            }
        }
        // Not a verdict: the probes judged what the protocol controls.
        self.unfinished = unfinished.len() as u64;
        for c in 0..self.room_since.len() {
            self.room(c, false, now);
        }
        if !lost.is_empty() {
            self.violate(
                ViolationKind::EventLost,
                now,
                format!("{} messages lost, first {}", lost.len(), lost[0]),
            );
        }
    }

    /// The measures of the run.
    pub fn measures(&self) -> QueueMeasures {
        let mut m = QueueMeasures {
            enqueued: self.fates.len() as u64,
            lock_lost: self.lock_lost,
            dropped: self.dropped,
            ..QueueMeasures::default()
        };
        let mut latencies = Vec::new();
        for f in self.fates.values() {
            let poison = self.poison_every > 0 && f.number % self.poison_every == 0;
            m.deliveries += u64::from(f.deliveries);
            m.completed += u64::from(f.deleted.is_some());
            if f.dead_lettered.is_some() {
                if poison {
                    m.dead_lettered_poison += 1;
                } else {
                    m.dead_lettered_healthy += 1;
                }
            }
            m.duplicate_commits += u64::from(f.commits > 1);
            if let Some(at) = f.first_commit {
                latencies.push(at.saturating_sub(f.enqueued_at) as f64 / 1e3);
            }
        }
        if !latencies.is_empty() {
            m.max_latency_s = latencies.iter().copied().fold(0.0, f64::max);
            m.mean_latency_s = latencies.iter().sum::<f64>() / latencies.len() as f64;
        }
        m.drained_after_heal_s = self.last_settled.saturating_sub(self.heal_at) as f64 / 1e3;
        m.unfinished_at_deadline = self.unfinished;
        let span = self.deadline.saturating_sub(self.heal_at) * self.consumers;
        m.room_after_heal = self.room_after_heal as f64 / (span.max(1) as f64);
        m
    }
}
