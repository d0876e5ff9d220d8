//! Ground truth of a queue run: who processed which message when, and what became of
//! it; checked online and measured for the report.

use super::config::QueueConfig;
use crate::sim::checker::{Violation, ViolationKind};
use leasehold_engine::DocId;
use leasehold_engine::queue::{ClaimKey, Message, MessageState};
use leasehold_engine::store::Container;
use std::collections::{BTreeMap, BTreeSet};

/// A consumer's life: (consumer, life).
pub type Holder = (usize, u64);

/// A message's place in the dequeue's order: visible first, then created first.
type Order = (i64, i64);

/// A message stored and not yet settled.
#[derive(Clone, Copy, Debug)]
struct Open {
    /// When its current version was written (true time).
    since: u64,
    /// Who holds its lock, if it is locked: (consumer, life).
    holder: Option<Holder>,
    /// Its place in the dequeue's order; `order.0` is its visibility (wall time).
    order: Order,
}

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
    /// When an operator deleted its dead letter.
    discarded: Option<u64>,
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
    /// (true time), whether it is locked, and its place in the dequeue order.
    open: BTreeMap<DocId, Open>,
    /// The open messages in the dequeue's order.
    order: BTreeSet<(Order, DocId)>,
    /// Per consumer: its life and when it began (its sightings of locks with it).
    life_start: Vec<(u64, u64)>,
    /// Per consumer: since when it has been up, unpaused and holding fewer messages
    /// than its batch, without a break.
    room_since: Vec<Option<u64>>,
    /// Per consumer: the spans of time it had room, (start, end), in order; the
    /// last open-ended while it has room.
    room_spans: Vec<Vec<(u64, u64)>>,
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
    /// The lock duration.
    lock: u64,
    starved: BTreeSet<DocId>,
    /// Messages passed over by a claim of a later one: (the version passed over, when,
    /// what happened). Concurrent dequeues pass each other's messages over for a
    /// moment; one left untouched for the grace after that was starved.
    passed_over: BTreeMap<DocId, (u64, u64, String)>,
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
    /// Dead letters an operator deleted (`--delete-dead-letters-every`).
    pub dead_letters_deleted: u64,
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
            order: BTreeSet::new(),
            life_start: vec![(0, 0); cfg.consumers as usize],
            room_since: vec![None; cfg.consumers as usize],
            room_spans: vec![Vec::new(); cfg.consumers as usize],
            room_after_heal: 0,
            consumers: u64::from(cfg.consumers),
            deadline: cfg.deadline(),
            grace: Self::grace(cfg),
            lock_wait: Self::lock_wait(cfg),
            slot_limit: cfg.work_ms.1 + Self::lock_wait(cfg) + Self::grace(cfg),
            lock: cfg.lock.as_millis(),
            starved: BTreeSet::new(),
            passed_over: BTreeMap::new(),
            unfinished: 0,
        }
    }

    /// A consumer with room polls within `poll`, and a request is answered within its
    /// timeout; a message given back comes back after its delay. Twice each, so that
    /// one unlucky turn is never a verdict.
    fn grace(cfg: &QueueConfig) -> u64 {
        let delay = super::config::ABANDON_DELAY.as_millis();
        2 * (cfg.poll.as_millis() + cfg.network.request_timeout.as_millis() + delay)
    }

    /// A consumer sees a lock within the lock-watch interval, then waits the lock's
    /// duration and the drift allowance on a clock that may run slow by as much.
    fn lock_wait(cfg: &QueueConfig) -> u64 {
        let lock = cfg.lock.as_millis();
        // The engine's allowance at the run's drift bound (the variant that drops it
        // still runs on drifting clocks).
        let drift = leasehold_engine::Drift::ppm(cfg.drift_bound_ppm)
            .allowance(cfg.lock)
            .as_millis();
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
        self.poison_every > 0 && self.number(id).is_multiple_of(self.poison_every)
    }

    /// A consumer was handed message `id` with a payload other than the one enqueued:
    /// partial, mixed or damaged.
    pub fn payload_differs(&mut self, id: &DocId, now: u64) {
        let detail = format!("{id} was delivered with a payload other than the one enqueued");
        self.violate(ViolationKind::EventLost, now, detail);
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
        let commits = f.commits;
        self.close(id);
        self.last_settled = self.last_settled.max(now);
        if commits == 0 {
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
        self.close(&doc.id);
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

    /// The store deleted a message's dead letter, on an operator's request.
    pub fn discarded(&mut self, id: &DocId, now: u64) {
        if let Some(f) = self.fates.get_mut(id) {
            f.discarded = Some(now);
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

    /// The store wrote a new version of message `doc`.
    pub fn written(&mut self, doc: &Message, now: u64) {
        let settled = self
            .fates
            .get(&doc.id)
            .is_none_or(|f| f.deleted.is_some() || f.dead_lettered.is_some());
        if settled {
            return;
        }
        self.close(&doc.id);
        let order = (doc.next_visible_at.0, doc.created.0);
        // Consumers are named c0, c1, ... and a lock names its holder's life.
        let holder = doc.lock().map(|l| {
            let c = l.token.holder.as_str()[1..].parse().unwrap_or(usize::MAX);
            (c, l.token.incarnation.0)
        });
        let open = Open {
            since: now,
            holder,
            order,
        };
        self.open.insert(doc.id.clone(), open);
        self.order.insert((order, doc.id.clone()));
    }

    fn close(&mut self, id: &DocId) {
        if let Some(open) = self.open.remove(id) {
            self.order.remove(&(open.order, id.clone()));
        }
    }

    /// Consumer `c` began a life.
    pub fn booted(&mut self, c: usize, life: u64, now: u64) {
        if let Some(start) = self.life_start.get_mut(c) {
            *start = (life, now);
        }
    }

    /// From when consumer `c` could take message `m`, by the protocol's rules: a
    /// pending message once written (its visibility is judged apart); a locked one
    /// once `c` has watched its lock for the lock wait. It watches only while it
    /// dequeues (has room), and reliably only once faults end, so from its first room
    /// after the latest of the lock's write, its life's start and the heal; and the
    /// lock's own holder only once the lock stopped excluding others (a consumer
    /// watches its own lock only after it let it go).
    fn deliverable_from(&self, m: &Open, c: usize) -> u64 {
        let (life, started) = self.life_start.get(c).copied().unwrap_or((0, 0));
        let after = |t: u64| t.max(started).max(self.heal_at);
        let from = match m.holder {
            None => return m.since,
            Some(holder) if holder == (c, life) => after(m.since + self.lock),
            Some(_) => after(m.since),
        };
        self.first_room(c, from)
            .map_or(u64::MAX, |seen| seen.saturating_add(self.lock_wait))
    }

    /// The first moment at or after `t` when consumer `c` had room.
    fn first_room(&self, c: usize, t: u64) -> Option<u64> {
        let spans = self.room_spans.get(c)?;
        let i = spans.partition_point(|(_, end)| *end <= t);
        spans.get(i).map(|(start, _)| (*start).max(t))
    }

    /// Consumer `c` claimed `doc` (as stored before the claim). A dequeue takes the
    /// deliverable messages in order, so a message before it in that order that `c`
    /// could long have taken was passed over; if nobody takes it within the time any
    /// consumer needs to (a lock wait and the grace) after, it was starved, however
    /// busy the consumers are ([`Truth::probe`]).
    pub fn claimed(&mut self, c: usize, doc: &Message, now: u64) {
        if now < self.heal_at + self.grace {
            return;
        }
        let key = ((doc.next_visible_at.0, doc.created.0), doc.id.clone());
        let passed = self
            .order
            .range(..key)
            .filter(|(_, id)| !self.starved.contains(id) && !self.passed_over.contains_key(id))
            .find_map(|(_, id)| {
                let m = &self.open[id];
                let from = self.deliverable_from(m, c).max(self.heal_at);
                (now >= from.saturating_add(self.grace)).then(|| (id.clone(), *m))
            });
        if let Some((id, m)) = passed {
            let what = if m.holder.is_some() {
                "its lock written"
            } else {
                "visible"
            };
            let detail = format!(
                "c{c} took {} at {:.3} s while {id} ({what} at {:.3} s), ahead of it in the \
                 dequeue's order, had long been deliverable, and nobody took it after",
                doc.id,
                now as f64 / 1e3,
                m.since as f64 / 1e3
            );
            let confirm_at = now + self.lock_wait + self.grace;
            self.passed_over.insert(id, (m.since, confirm_at, detail));
        }
    }

    /// Consumer `c` now has room for another message, or not.
    pub fn room(&mut self, c: usize, room: bool, now: u64) {
        let Some(slot) = self.room_since.get_mut(c) else {
            return;
        };
        match (*slot, room) {
            (None, true) => {
                *slot = Some(now);
                self.room_spans[c].push((now, u64::MAX));
            }
            (Some(since), false) => {
                *slot = None;
                self.room_after_heal += now.saturating_sub(since.max(self.heal_at));
                if let Some(span) = self.room_spans[c].last_mut() {
                    span.1 = now;
                }
            }
            _ => {}
        }
    }

    /// Checks, after the heal, what the protocol controls: no message waits while a
    /// consumer has room for it, and no delivery holds a consumer's slot for good.
    /// `walls` are the consumers' wall clocks now (a message is visible to a consumer
    /// by its own clock, and another's wrote its visibility); `slots` are the
    /// deliveries consumers hold: (consumer, message, since).
    pub fn probe(&mut self, now: u64, walls: &[i64], slots: &[(usize, DocId, u64)]) {
        if now < self.heal_at {
            return;
        }
        let mut confirmed = Vec::new();
        self.passed_over.retain(|id, (since, confirm_at, detail)| {
            match self.open.get(id) {
                Some(m) if m.since == *since => {
                    if now >= *confirm_at {
                        confirmed.push((id.clone(), std::mem::take(detail)));
                        false
                    } else {
                        true
                    }
                }
                // Taken, settled or rewritten since: only passed over for a moment.
                _ => false,
            }
        });
        for (id, detail) in confirmed {
            self.starved.insert(id);
            self.violate(ViolationKind::Liveness, now, detail);
        }
        for (c, id, since) in slots {
            if now.saturating_sub((*since).max(self.heal_at)) > self.slot_limit
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
        let grace = self.grace;
        let roomy: Vec<(usize, u64)> = self
            .room_since
            .iter()
            .enumerate()
            .filter_map(|(c, s)| s.map(|s| (c, s.max(self.heal_at))))
            .filter(|(_, s)| now >= s + grace)
            .collect();
        for (c, room) in roomy {
            let wall = walls.get(c).copied().unwrap_or(i64::MIN);
            let starved = self.order.iter().map(|(_, id)| id).find(|id| {
                let m = &self.open[*id];
                // Visible to c for the grace already, by c's own clock.
                let visible = m.order.0.saturating_add(grace as i64) <= wall;
                let from = self.deliverable_from(m, c).max(room);
                visible && now >= from.saturating_add(grace) && !self.starved.contains(*id)
            });
            if let Some(id) = starved.cloned() {
                let m = self.open[&id];
                let what = if m.holder.is_some() {
                    "its lock written"
                } else {
                    "visible"
                };
                let detail = format!(
                    "{id} waited ({what} at {:.3} s) while c{c} had room from {:.3} s to {:.3} s",
                    m.since as f64 / 1e3,
                    room as f64 / 1e3,
                    now as f64 / 1e3
                );
                self.starved.insert(id);
                self.violate(ViolationKind::Liveness, now, detail);
            }
        }
    }

    /// At the deadline every message is completed or dead-lettered, and the store
    /// agrees.
    pub fn deadline(
        &mut self,
        now: u64,
        store: &Container<Message>,
        claims: &BTreeMap<ClaimKey, String>,
    ) {
        let mut unfinished = Vec::new();
        let mut lost = Vec::new();
        // Dead letters live under ids of their own: keyed here by their message's.
        let all = store.read_all("");
        let stored: BTreeMap<DocId, Message> = all
            .iter()
            .filter(|s| !is_part(&s.doc))
            .map(|s| (Message::id_for(&s.doc.queue, &s.doc.name), s.doc.clone()))
            .collect();
        // Every part set must be named by a message or a dead letter: the sweeps
        // have had the whole settle time to clear the others.
        let docs: Vec<&Message> = all.iter().map(|s| &s.doc).collect();
        let orphans = leasehold_model::queue::orphaned_parts(&docs);
        if !orphans.is_empty() {
            let detail = format!(
                "{} part documents no message names were left unswept, first {}",
                orphans.len(),
                orphans[0]
            );
            self.violate(ViolationKind::EventLost, now, detail);
        }
        if !leasehold_model::queue::payloads_kept(&docs, |key| claims.contains_key(key)) {
            let detail = "a payload was removed while a message or dead letter names it".into();
            self.violate(ViolationKind::EventLost, now, detail);
        }
        let stranded = leasehold_model::queue::orphaned_claims(&docs, claims.keys());
        if let Some(first) = stranded.first() {
            let detail = format!(
                "{} claim-checked payloads no head or message names were left in the claim \
                 store, first {first}",
                stranded.len()
            );
            self.violate(ViolationKind::EventLost, now, detail);
        }
        for (id, f) in &self.fates {
            let poison = self.poison_every > 0 && f.number % self.poison_every == 0;
            match (f.deleted, f.dead_lettered, stored.get(id)) {
                (Some(_), _, None) => {}
                (_, Some(_), Some(doc)) if doc.is_dead_lettered() => {}
                // Its dead letter deleted by the operator, and nothing of it stored (a
                // live copy written since is stored, and falls to the last arm: lost).
                (_, Some(_), None) if f.discarded.is_some() => {}
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
            m.dead_letters_deleted += u64::from(f.discarded.is_some());
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

/// Whether `doc` is a large payload's head or part, not a message.
fn is_part(doc: &Message) -> bool {
    matches!(
        doc.state,
        MessageState::PartSet { .. } | MessageState::Part { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::queue::QueueScenario;

    fn truth() -> (Truth, DocId) {
        let cfg = QueueConfig::scenario(QueueScenario::Queue, 1);
        let mut truth = Truth::new(&cfg);
        let doc = message("m1", 0);
        truth.enqueue(doc.id.clone(), 1, 0);
        truth.written(&doc, 0);
        truth.heal(cfg.heal_at());
        (truth, doc.id)
    }

    fn message(name: &str, at: i64) -> Message {
        use leasehold_engine::queue::{MessageName, QueueName};
        let queue = QueueName::new("work").unwrap();
        let name = MessageName::new(name).unwrap();
        Message::new(
            queue,
            name,
            String::new(),
            leasehold_engine::WallTime(at),
            leasehold_engine::Millis::ZERO,
        )
    }

    fn locked(mut doc: Message) -> Message {
        use leasehold_engine::queue::{MessageLock, MessageState};
        let token = leasehold_engine::lock::LockToken {
            holder: leasehold_engine::HostId::from("c1"),
            incarnation: leasehold_engine::Incarnation(0),
            seq: 1,
        };
        doc.state = MessageState::InProgress {
            lock: MessageLock {
                token,
                until: doc.next_visible_at,
                duration: leasehold_engine::Millis::from_secs(30),
            },
        };
        doc
    }

    /// A dead letter of `name` whose payload is claim-checked (set `c0.0.1`).
    fn claim_checked_dead_letter(name: &str) -> Message {
        use leasehold_engine::queue::{PartSetId, PartsRef};
        let token = leasehold_engine::lock::LockToken {
            holder: leasehold_engine::HostId::from("c0"),
            incarnation: leasehold_engine::Incarnation(0),
            seq: 1,
        };
        let mut doc = message(name, 0);
        doc.parts = Some(PartsRef {
            set: PartSetId::of(&token),
            count: 0,
            bytes: 1,
            hash: String::new(),
        });
        doc.into_dead_letter(&token, "poison".into())
    }

    #[test]
    fn a_dead_letters_claim_checked_payload_missing_at_the_deadline_is_a_loss() {
        let dead = claim_checked_dead_letter("m1");
        let key = ClaimKey::of(&dead).unwrap();
        let mut store = Container::new();
        store.create(dead).unwrap();
        let lost = |claims: &BTreeMap<ClaimKey, String>| {
            let (mut t, _) = truth();
            t.deadline(HEAL * 2, &store, claims);
            t.violations()
                .iter()
                .any(|v| v.detail.contains("a payload was removed"))
        };
        assert!(lost(&BTreeMap::new()));
        assert!(!lost(&BTreeMap::from([(key, String::new())])));
    }

    const HEAL: u64 = 600_000;
    /// Consumer c0's wall clock: every message long visible to it.
    const WALL: i64 = i64::MAX / 2;

    #[test]
    fn a_visible_message_that_waits_while_a_consumer_keeps_room_is_a_liveness_violation() {
        let (mut t, _) = truth();
        t.room(0, true, HEAL);
        t.probe(HEAL + t.grace - 1, &[WALL], &[]);
        assert!(!t.violated(), "within the grace");
        t.probe(HEAL + t.grace, &[WALL], &[]);
        assert_eq!(t.violation_counts()[&ViolationKind::Liveness], 1);
    }

    #[test]
    fn a_message_that_waits_while_every_consumer_is_full_is_no_violation() {
        let (mut t, _) = truth();
        t.room(0, true, HEAL);
        t.room(0, false, HEAL + 1_000);
        t.room(0, true, HEAL + 2_000);
        t.probe(HEAL + t.grace + 1_000, &[WALL], &[]);
        assert!(!t.violated(), "{:?}", t.violations());
    }

    #[test]
    fn a_locked_message_may_wait_out_its_lock_first() {
        let (mut t, _) = truth();
        t.written(&locked(message("m1", 0)), HEAL);
        t.room(0, true, HEAL);
        t.probe(HEAL + t.lock_wait + t.grace - 1, &[WALL], &[]);
        assert!(!t.violated());
        t.probe(HEAL + t.lock_wait + t.grace, &[WALL], &[]);
        assert!(t.violated());
    }

    #[test]
    fn a_delivery_that_holds_a_slot_for_good_is_a_liveness_violation() {
        let (mut t, id) = truth();
        t.written(&locked(message("m1", 0)), HEAL - 100_000);
        let held = [(0, id, HEAL - 100_000)];
        t.probe(HEAL + t.slot_limit, &[WALL], &held);
        assert!(!t.violated());
        t.probe(HEAL + t.slot_limit + 1, &[WALL], &held);
        assert!(t.violated());
    }

    /// However busy the consumers, a dequeue that takes a later message while an
    /// earlier one has long been deliverable passed it over.
    #[test]
    fn a_message_passed_over_for_later_ones_is_starved_however_busy_the_consumers() {
        let (mut t, _) = truth();
        let later = message("m2", 5);
        t.enqueue(later.id.clone(), 2, 0);
        t.written(&later, 0);
        let at = HEAL + t.grace;
        t.claimed(0, &later, at);
        let confirm = at + t.lock_wait + t.grace;
        t.probe(confirm - 1, &[WALL], &[]);
        assert!(
            !t.violated(),
            "a rival's claim of m1 may still be on its way"
        );
        t.probe(confirm, &[WALL], &[]);
        assert!(
            t.violated(),
            "m1 came first, was visible all along, and nobody took it"
        );
        // Taken by someone meanwhile: passed over only for a moment.
        let (mut t, _) = truth();
        t.claimed(0, &later, at);
        t.written(&locked(message("m1", 0)), at + 10);
        t.probe(confirm, &[WALL], &[]);
        assert!(!t.violated(), "{:?}", t.violations());
        // Locked: passed over only once its lock has long expired.
        let (mut t, _) = truth();
        t.room(0, true, HEAL);
        t.written(&locked(message("m1", 0)), HEAL);
        t.claimed(0, &later, at);
        t.probe(at + t.grace, &[WALL], &[]);
        assert!(!t.violated(), "m1's lock had not expired yet");
        let at = HEAL + t.lock_wait + t.grace;
        t.claimed(0, &later, at);
        t.probe(at + t.lock_wait + t.grace, &[WALL], &[]);
        assert!(t.violated(), "m1's lock had long expired");
    }

    /// A consumer watches its own lock only once the lock stopped excluding others,
    /// and a message is visible to a consumer by its own wall clock.
    #[test]
    fn a_consumer_waits_out_its_own_lock_and_sees_by_its_own_clock() {
        let (mut t, _) = truth();
        t.booted(1, 0, 0);
        t.written(&locked(message("m1", 0)), HEAL);
        t.room(1, true, HEAL);
        let others = HEAL + t.lock_wait + t.grace;
        t.probe(others, &[WALL, WALL], &[]);
        assert!(!t.violated(), "c1 holds the lock: it must first let it go");
        t.probe(others + t.lock, &[WALL, WALL], &[]);
        assert!(t.violated());
        // Visible at wall 10,000 s by its writer's clock; c0's reads 9,990 s.
        let (mut t, _) = truth();
        let late = message("m2", 10_000_000);
        t.enqueue(late.id.clone(), 2, 0);
        t.written(&late, 0);
        t.close(&DocId::from("work:m1"));
        t.room(0, true, HEAL);
        t.probe(HEAL + 10 * t.grace, &[9_990_000], &[]);
        assert!(!t.violated(), "not visible to c0 yet");
        t.probe(HEAL + 10 * t.grace, &[10_000_000 + t.grace as i64], &[]);
        assert!(t.violated());
    }
}
