//! The queue run's event loop: the engine's own queue consumers, a producer, and the
//! reference store behind the simulated network, over virtual time.
//!
//! - `network`: latency, unknown outcomes, throttling, and the checks on every write;
//! - `faults`: crashes, pauses, clock steps, store-wide windows and the heal.

use super::config::{ABANDON_DELAY, QueueConfig};
use super::truth::{Holder, Truth};
use crate::sim::clock::HostClock;
use crate::sim::cost::{Kind, request_units};
use crate::sim::faults::{FaultKind, StoreWeather};
use crate::sim::trace::Trace;
use leasehold_engine::drive::{self, Driver, Stepped};
use leasehold_engine::lock::LockToken;
use leasehold_engine::queue::{
    ClaimKey, Consumer, ConsumerConfig, Delivery, Handle, Input, Message, MessageName,
    MessageState, Output, QueueError, QueueIntent,
};
use leasehold_engine::store::{BatchOp, Op, Reader, Replicated, Reply, StoreError, Stored};
use leasehold_engine::{DocId, HostId, Incarnation, Millis, Request, RequestId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// A request to the store, as the engine's contract carries it.
type QueueRequest = Request<Message, QueueIntent>;

mod claims;
mod faults;
mod network;

const SECOND: u64 = 1_000;
/// How often ground truth checks, after the heal, that no message waits while a
/// consumer has room.
const PROBE_MS: u64 = SECOND;
/// The producer's index among the clients; consumers are 0..n.
const PRODUCER: usize = usize::MAX;
/// The most part-set heads one sweep reads.
const SWEEP_MAX: usize = 16;
/// The most dead letters the operator lists at once.
const LIST_MAX: usize = 100;
/// How often the operator lists the dead letters, at most (ms).
const LIST_EVERY: u64 = 5_000;

#[derive(Clone, Debug)]
enum Event {
    Produce(u32),
    Poll {
        c: usize,
        life: u64,
    },
    Arrive {
        c: usize,
        life: u64,
        request: QueueRequest,
        answer: bool,
    },
    Answer {
        c: usize,
        life: u64,
        id: RequestId,
        result: Result<Reply<Message>, StoreError>,
    },
    WorkDone {
        c: usize,
        life: u64,
        delivery: Handle,
    },
    Retry {
        c: usize,
        life: u64,
        delivery: Handle,
        complete: bool,
    },
    /// The producer's claim-checked payload reaches the claim store.
    ClaimPut {
        key: ClaimKey,
    },
    /// The producer's discard of a claim-checked payload reaches the claim store.
    ClaimDiscard {
        key: ClaimKey,
    },
    /// A client's delete of a claim-checked payload reaches the claim store.
    ClaimDrop {
        c: usize,
        life: u64,
        key: ClaimKey,
    },
    /// The operator asks consumer `c` to delete a dead letter it listed.
    Discard {
        c: usize,
        life: u64,
        letter: Stored<Message>,
    },
    Fault(FaultKind),
    Boot {
        c: usize,
    },
    Resume {
        c: usize,
        life: u64,
    },
    Heal,
    /// Ground truth looks at the queue (after the heal, every second); nothing in the
    /// run sees it.
    Probe,
    Deadline,
}

/// What the trace records.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueueEvent {
    /// A consumer started a life.
    Boot(HostId, u64),
    /// A fault struck, with its size in ms.
    Fault(FaultKind, Option<HostId>, i64),
    /// Every fault ended.
    Heal,
    /// A consumer sent a request.
    Request(HostId, QueueIntent, Option<DocId>),
    /// A consumer was handed a message.
    Delivered(HostId, DocId, u32),
    /// A handler finished with authority: committed or failed.
    Processed(HostId, DocId, bool),
    /// A handler finished without authority: its result was dropped.
    Dropped(HostId, DocId),
    /// The store dead-lettered a message.
    DeadLettered(DocId),
    /// The store deleted a dead letter, on the operator's request.
    DeadLetterDeleted(DocId),
}

impl fmt::Display for QueueEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueEvent::Boot(h, life) => write!(f, "{h} boots (life {life})"),
            QueueEvent::Fault(k, Some(h), ms) => write!(f, "fault {k} on {h} ({ms} ms)"),
            QueueEvent::Fault(k, None, ms) => write!(f, "fault {k} ({ms} ms)"),
            QueueEvent::Heal => f.write_str("heal"),
            QueueEvent::Request(h, i, Some(d)) => write!(f, "{h} sends {i} {d}"),
            QueueEvent::Request(h, i, None) => write!(f, "{h} sends {i}"),
            QueueEvent::Delivered(h, d, n) => write!(f, "{h} gets {d} (delivery {n})"),
            QueueEvent::Processed(h, d, ok) => {
                write!(f, "{h} {} {d}", if *ok { "commits" } else { "fails" })
            }
            QueueEvent::Dropped(h, d) => write!(f, "{h} drops {d}: authority ran out"),
            QueueEvent::DeadLettered(d) => write!(f, "{d} dead-lettered"),
            QueueEvent::DeadLetterDeleted(d) => write!(f, "dead letter {d} deleted"),
        }
    }
}

struct Work {
    delivery: Delivery,
    started: u64,
}

struct Client {
    name: HostId,
    life: u64,
    consumer: Option<Consumer>,
    clock: HostClock,
    paused_until: Option<u64>,
    cut_until: u64,
    lose_until: u64,
    /// Until then the SDK retries this consumer's writes beneath it: one that landed
    /// with its answer lost is sent again, and the consumer hears what the second
    /// attempt found.
    retry_until: u64,
    dequeuing: bool,
    /// Documents the reads of the running dequeue returned so far.
    dequeue_docs: u64,
    working: BTreeMap<DocId, Work>,
    /// The lock of each message's give-back or completion on its way: what a retry
    /// names, and whose work its answer ends. (An answer names its message only, so
    /// an earlier delivery's late answer may still end a later delivery's work.)
    settling: BTreeMap<DocId, LockToken>,
}

/// A finished queue run: what the report is made of.
#[derive(Clone, Debug)]
pub struct QueueFinished {
    /// Ground truth and the measures taken from it.
    pub truth: Truth,
    /// The last trace events before the first violation (or the end).
    pub tail: Vec<String>,
    /// The hash of every trace event: equal seeds, equal hashes.
    pub trace_hash: u64,
    /// Events handled.
    pub steps: u64,
    /// Store requests sent by consumers.
    pub requests: u64,
    /// Estimated request units of the consumers' requests.
    pub ru: f64,
    /// Dequeues whose read of the visible messages reached the store.
    pub dequeues: u64,
    /// Documents the store returned to dequeues' reads.
    pub docs_read: u64,
    /// The most documents one dequeue's reads returned.
    pub max_docs_read: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// True time at the end, ms.
    pub end: u64,
}

/// The queue run.
pub struct QueueWorld {
    cfg: QueueConfig,
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    /// Pending events by (true time, order of scheduling).
    queue: BTreeMap<(u64, u64), Event>,
    /// The queue's partition, as the consumers' sessions see it.
    store: Replicated<Message>,
    clients: Vec<Client>,
    producer: Consumer,
    /// The claim store of runs that keep large payloads in claims.
    claims: BTreeMap<ClaimKey, String>,
    /// When the operator next lists the dead letters.
    list_at: u64,
    /// The consumers' settings, built once.
    consumer_config: ConsumerConfig,
    truth: Truth,
    trace: Trace<QueueEvent>,
    tail: Option<Vec<String>>,
    weather: StoreWeather,
    healed: bool,
    steps: u64,
    requests: u64,
    ru: f64,
    dequeues: u64,
    docs_read: u64,
    max_docs_read: u64,
    faults: BTreeMap<FaultKind, u64>,
}

impl QueueWorld {
    /// A run of `cfg`, ready to go.
    pub fn new(cfg: &QueueConfig) -> Result<QueueWorld, super::QueueConfigError> {
        cfg.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let skew = cfg.faults.get(FaultKind::Skew);
        let drift = cfg.faults.get(FaultKind::Drift);
        let clients = (0..cfg.consumers)
            .map(|i| {
                let offset_ms = if skew > 0.0 {
                    let s = (skew * 1_000.0) as i64;
                    rng.random_range(-s..=s)
                } else {
                    0
                };
                let drift_ppm = if drift > 0.0 {
                    let d = drift as i32;
                    rng.random_range(-d..=d)
                } else {
                    0
                };
                Client {
                    name: HostId::from(format!("c{i}")),
                    life: 0,
                    consumer: None,
                    clock: HostClock {
                        boot: 0,
                        drift_ppm,
                        offset_ms,
                    },
                    paused_until: None,
                    cut_until: 0,
                    lose_until: 0,
                    retry_until: 0,
                    dequeuing: false,
                    dequeue_docs: 0,
                    working: BTreeMap::new(),
                    settling: BTreeMap::new(),
                }
            })
            .collect();
        let consumer_config = cfg.consumer_config();
        let producer = Consumer::new(
            HostId::from("producer"),
            Incarnation(0),
            consumer_config.clone(),
        )
        .map_err(|e| super::QueueConfigError::Consumer(e.to_string()))?;
        let mut world = QueueWorld {
            truth: Truth::new(cfg),
            trace: Trace::new(cfg.trace_keep),
            cfg: cfg.clone(),
            rng,
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            store: crate::sim::faults::replicated(&cfg.faults),
            clients,
            producer,
            claims: BTreeMap::new(),
            consumer_config,
            tail: None,
            weather: StoreWeather::default(),
            healed: false,
            steps: 0,
            list_at: 0,
            requests: 0,
            ru: 0.0,
            dequeues: 0,
            docs_read: 0,
            max_docs_read: 0,
            faults: BTreeMap::new(),
        };
        world.fill_backlog();
        world.plan();
        Ok(world)
    }

    /// Stores the backlog before anyone starts, numbered after the messages the
    /// producer sends, so that `poison_every` picks among them alike.
    fn fill_backlog(&mut self) {
        let wall = self.producer_now().wall;
        for i in 0..self.cfg.backlog {
            let number = self.cfg.messages + i;
            let name = MessageName::new(format!("m{number:07}")).expect("a valid name");
            let message = Message::new(
                self.consumer_config.queue.clone(),
                name,
                number.to_string(),
                wall,
                Millis::ZERO,
            );
            self.truth.enqueue(message.id.clone(), number, self.now);
            self.truth.written(&message, self.now);
            self.store
                .fresh(Reader(u32::MAX), Op::Create(message))
                .expect("backlog names are distinct");
        }
    }

    fn plan(&mut self) {
        let span = self.cfg.duration.as_millis();
        for i in 0..self.cfg.messages {
            let at = span * u64::from(i) / u64::from(self.cfg.messages);
            self.push(at, Event::Produce(i));
        }
        for c in 0..self.clients.len() {
            let at = self.rng.random_range(0..2 * SECOND);
            self.push(at, Event::Boot { c });
        }
        for kind in FaultKind::ALL {
            if self.cfg.faults.get(kind) > 0.0 && !kind.is_static() {
                let gap = self.fault_gap(kind);
                self.push(gap, Event::Fault(kind));
            }
        }
        self.push(self.cfg.heal_at(), Event::Heal);
        self.push(self.cfg.heal_at() + PROBE_MS, Event::Probe);
        self.push(self.cfg.deadline(), Event::Deadline);
    }

    fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.insert((at, self.seq), event);
    }

    fn fault_gap(&mut self, kind: FaultKind) -> u64 {
        let per_hour = match kind {
            FaultKind::Throttle | FaultKind::Spike => self.cfg.faults.get(kind),
            _ => self.cfg.faults.get(kind) * f64::from(self.cfg.consumers),
        };
        let mean = (3_600_000.0 / per_hour).clamp(1.0, 1e15) as u64;
        self.rng.random_range(1..=2 * mean)
    }

    /// Runs to the liveness deadline.
    pub fn run(mut self) -> QueueFinished {
        while let Some(((at, _), event)) = self.queue.pop_first() {
            self.now = at;
            self.steps += 1;
            if matches!(event, Event::Deadline) {
                self.truth.deadline(self.now, &self.store, &self.claims);
                break;
            }
            let touched = match &event {
                Event::Poll { c, .. }
                | Event::Answer { c, .. }
                | Event::WorkDone { c, .. }
                | Event::Retry { c, .. }
                | Event::Boot { c }
                | Event::Resume { c, .. } => Some(*c..c.saturating_add(1)),
                Event::Fault(_) => Some(0..self.clients.len()),
                _ => None,
            };
            self.handle(event);
            for c in touched
                .into_iter()
                .flatten()
                .filter(|c| *c < self.clients.len())
            {
                let room = self.has_room(c);
                self.truth.room(c, room, self.now);
            }
            if self.tail.is_none() && self.truth.violated() {
                self.tail = Some(self.trace.tail());
            }
        }
        if self.tail.is_none() && self.truth.violated() {
            self.tail = Some(self.trace.tail());
        }
        QueueFinished {
            tail: self.tail.unwrap_or_else(|| self.trace.tail()),
            trace_hash: self.trace.hash(),
            steps: self.steps,
            requests: self.requests,
            ru: self.ru,
            dequeues: self.dequeues,
            docs_read: self.docs_read,
            max_docs_read: self.max_docs_read,
            faults: self.faults,
            end: self.now,
            truth: self.truth,
        }
    }

    fn note(&mut self, event: QueueEvent) {
        self.trace.record(self.now, event);
    }

    fn alive(&self, c: usize, life: u64) -> bool {
        let client = &self.clients[c];
        client.life == life && client.consumer.is_some()
    }

    /// Events for a paused consumer wait for its pause to end.
    fn deferred(&mut self, c: usize, event: Event) -> Option<Event> {
        match self.clients[c].paused_until {
            Some(until) if until > self.now => {
                self.push(until, event);
                None
            }
            _ => Some(event),
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Produce(i) => self.produce(i),
            Event::Boot { c } => self.boot(c),
            Event::Fault(kind) => self.fault(kind),
            Event::Heal => self.heal(),
            Event::Resume { c, life } => {
                if self.clients[c].life == life {
                    self.clients[c].paused_until = None;
                }
            }
            Event::Arrive {
                c,
                life,
                request,
                answer,
            } => self.arrive(c, life, request, answer),
            Event::Answer { c, id, result, .. } if c == PRODUCER => {
                self.producer_answer(id, result)
            }
            Event::ClaimPut { key } => self.claim_put(key),
            Event::ClaimDiscard { key } => self.claim_discard(key),
            Event::ClaimDrop { c, key, .. } if c == PRODUCER => self.claim_drop(c, key),
            Event::ClaimDrop { c, life, key } => {
                if self.alive(c, life) {
                    self.claim_drop(c, key);
                }
            }
            Event::Probe => self.probe(),
            Event::Deadline => {}
            event => {
                let (c, life) = match &event {
                    Event::Poll { c, life }
                    | Event::Answer { c, life, .. }
                    | Event::WorkDone { c, life, .. }
                    | Event::Retry { c, life, .. }
                    | Event::Discard { c, life, .. } => (*c, *life),
                    _ => return,
                };
                if !self.alive(c, life) {
                    return;
                }
                let Some(event) = self.deferred(c, event) else {
                    return;
                };
                match event {
                    Event::Poll { c, .. } => self.poll(c),
                    Event::Answer { c, id, result, .. } => {
                        self.feed(c, Input::Response { id, result });
                    }
                    Event::WorkDone { c, delivery, .. } => self.work_done(c, delivery),
                    Event::Retry {
                        c,
                        delivery,
                        complete,
                        ..
                    } => self.settle(c, delivery, complete),
                    Event::Discard { c, letter, .. } => {
                        self.feed(c, Input::DeleteDeadLetter(letter));
                    }
                    _ => {}
                }
            }
        }
    }

    /// Whether consumer `c` could take another message now: up, not paused, and
    /// holding fewer than its batch.
    fn has_room(&self, c: usize) -> bool {
        let client = &self.clients[c];
        client.consumer.is_some()
            && client.paused_until.is_none_or(|until| until <= self.now)
            && client.working.len() < self.cfg.batch as usize
    }

    fn probe(&mut self) {
        let walls: Vec<i64> = self
            .clients
            .iter()
            .map(|c| c.clock.wall(self.now).0)
            .collect();
        let slots: Vec<(usize, DocId, u64)> = self
            .clients
            .iter()
            .enumerate()
            .flat_map(|(c, client)| {
                client
                    .working
                    .iter()
                    .map(move |(id, w)| (c, id.clone(), w.started))
            })
            .collect();
        self.truth.probe(self.now, &walls, &slots);
        if self.now + PROBE_MS < self.cfg.deadline() {
            self.push(self.now + PROBE_MS, Event::Probe);
        }
    }

    fn produce(&mut self, i: u32) {
        let name = MessageName::new(format!("m{i:06}")).expect("a valid name");
        let id = Message::id_for(&self.consumer_config.queue, &name);
        self.truth.enqueue(id, i, self.now);
        let input = self.enqueue_input(i, name);
        self.feed_producer(input);
    }

    /// Hands `input` to the producer, and sends what it asks for.
    fn feed_producer(&mut self, input: Input) {
        // A refusal (a claim answered twice) changes nothing: nothing to send.
        let _ = drive::feed(&mut Producing { world: self }, [input]);
    }

    fn producer_now(&self) -> leasehold_engine::Now {
        HostClock {
            boot: 0,
            drift_ppm: 0,
            offset_ms: 0,
        }
        .now(self.now)
    }

    /// Acts on what the producer asks for besides a request: a large payload's next
    /// part or message; an enqueue that failed (throttled, lost) is made again a
    /// second later, its name making it idempotent.
    fn producer_output(&mut self, out: Output) {
        match out {
            Output::Failed { message, .. } => {
                let n = self.truth.number(&message);
                self.push(self.now + SECOND, Event::Produce(n));
            }
            Output::StoreClaim(key) => {
                let at = self.now + self.latency();
                self.push(at, Event::ClaimPut { key });
            }
            Output::DropClaim(key) => self.send_claim_drop(PRODUCER, key),
            Output::DiscardClaim(key) => {
                let at = self.now + self.latency();
                self.push(at, Event::ClaimDiscard { key });
            }
            _ => {}
        }
    }

    /// The producer's request goes straight to the store, past the network's faults
    /// (no cut, no lost answer) and a known-bad variant's tampering: it is the
    /// workload, not a host under test. The store may still throttle it.
    fn producer_send(&mut self, request: QueueRequest) {
        let at = self.now + self.latency();
        let (c, life, answer) = (PRODUCER, 0, true);
        self.push(
            at,
            Event::Arrive {
                c,
                life,
                request,
                answer,
            },
        );
    }

    fn producer_answer(&mut self, id: RequestId, result: Result<Reply<Message>, StoreError>) {
        self.feed_producer(Input::Response { id, result });
    }

    fn boot(&mut self, c: usize) {
        let cfg = self.consumer_config.clone();
        let client = &mut self.clients[c];
        client.life += 1;
        client.clock.boot = self.now;
        client.paused_until = None;
        client.dequeuing = false;
        client.working.clear();
        client.settling.clear();
        let life = client.life;
        client.consumer = Consumer::new(client.name.clone(), Incarnation(life), cfg).ok();
        self.truth.booted(c, life, self.now);
        let name = client.name.clone();
        self.note(QueueEvent::Boot(name, life));
        self.push(self.now, Event::Poll { c, life });
    }

    fn poll(&mut self, c: usize) {
        // The operator's dead letters, through consumer 0 however busy it is.
        if c == 0 && self.cfg.delete_dead_letters_every > 0 && self.now >= self.list_at {
            self.list_at = self.now + LIST_EVERY;
            self.feed(c, Input::ListDeadLetters { max: LIST_MAX });
        }
        let client = &self.clients[c];
        let room = (self.cfg.batch as usize).saturating_sub(client.working.len());
        if client.dequeuing {
            // The running dequeue schedules the next poll when it finishes.
            return;
        }
        if room == 0 {
            let (life, next) = (client.life, self.now + self.cfg.poll.as_millis());
            self.push(next, Event::Poll { c, life });
            return;
        }
        self.clients[c].dequeuing = true;
        if !self.feed(c, Input::Dequeue { max: room }) {
            self.clients[c].dequeuing = false;
        }
        // With large payloads, every poll also sweeps part sets left behind (refused,
        // and skipped, while the previous sweep runs).
        if self.cfg.large_every > 0 {
            self.feed(c, Input::Sweep { max: SWEEP_MAX });
        }
    }

    /// The operator deletes the listed dead letters of the messages it is to delete,
    /// each a while after the listing, as a person reading the list would: faults
    /// then strike the deletes apart from the listing.
    fn delete_dead_letters(&mut self, c: usize, letters: Vec<Stored<Message>>) {
        let every = self.cfg.delete_dead_letters_every;
        let life = self.clients[c].life;
        for letter in letters {
            let id = Message::id_for(&letter.doc.queue, &letter.doc.name);
            if every > 0 && self.truth.number(&id).is_multiple_of(every) {
                let at = self.now + self.rng.random_range(SECOND..=LIST_EVERY);
                self.push(at, Event::Discard { c, life, letter });
            }
        }
    }

    /// Hands `input` to consumer `c`; false if it refused it.
    fn feed(&mut self, c: usize, input: Input) -> bool {
        drive::feed(&mut Consuming { world: self, c }, [input]).is_ok()
    }

    fn on_output(&mut self, c: usize, out: Output) {
        let life = self.clients[c].life;
        let name = self.clients[c].name.clone();
        match out {
            // `drive::feed` hands every request to `send`: none comes here.
            Output::Request(_) => {}
            Output::DropClaim(key) => self.send_claim_drop(c, key),
            Output::Delivered(delivery) => {
                let Some(delivery) = self.fetch_claim(c, delivery) else {
                    return;
                };
                let number = self.truth.number(&delivery.id);
                if delivery.payload != self.cfg.payload(number) {
                    self.truth.payload_differs(&delivery.id, self.now);
                }
                self.note(QueueEvent::Delivered(
                    name,
                    delivery.id.clone(),
                    delivery.dequeue_count,
                ));
                self.truth.delivered(&delivery.id);
                let (lo, hi) = self.cfg.work_ms;
                let took = self.rng.random_range(lo..=hi);
                let handle = delivery.handle();
                let started = self.now;
                self.clients[c]
                    .working
                    .insert(handle.message.clone(), Work { delivery, started });
                let done = Event::WorkDone {
                    c,
                    life,
                    delivery: handle,
                };
                self.push(self.now + took, done);
            }
            Output::DequeueFinished { delivered, .. } => {
                self.clients[c].dequeuing = false;
                let docs = std::mem::take(&mut self.clients[c].dequeue_docs);
                self.max_docs_read = self.max_docs_read.max(docs);
                let next = if delivered > 0 {
                    10
                } else {
                    self.cfg.poll.as_millis()
                };
                self.push(self.now + next, Event::Poll { c, life });
            }
            Output::Completed(id) | Output::Abandoned(id) => self.settled(c, &id),
            Output::DeadLetters(letters) => self.delete_dead_letters(c, letters),
            Output::Failed {
                message,
                intent,
                error,
            } => match (intent, error) {
                (QueueIntent::Complete | QueueIntent::Abandon, QueueError::Store(e))
                    if e.is_ambiguous() || matches!(e, StoreError::Throttled { .. }) =>
                {
                    // Sent again for the delivery whose call it was.
                    let complete = intent == QueueIntent::Complete;
                    if let Some(lock) = self.clients[c].settling.get(&message) {
                        let delivery = Handle {
                            message,
                            lock: lock.clone(),
                        };
                        let retry = Event::Retry {
                            c,
                            life,
                            delivery,
                            complete,
                        };
                        self.push(self.now + SECOND, retry);
                    }
                }
                // Honest about what it cannot know: nothing to check.
                (QueueIntent::Complete, QueueError::Gone(_)) => self.settled(c, &message),
                (QueueIntent::Complete, _) => {
                    self.truth.completion_lost(&message, (c, life), self.now);
                    self.settled(c, &message);
                }
                (QueueIntent::Abandon, _) => {
                    self.truth.lock_lost();
                    self.settled(c, &message);
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn work_done(&mut self, c: usize, delivery: Handle) {
        let local = self.clients[c].clock.local(self.now);
        let name = self.clients[c].name.clone();
        let authority = self.clients[c]
            .consumer
            .as_ref()
            .is_some_and(|k| k.has_authority(&delivery, local));
        let message = delivery.message.clone();
        let Some(work) = self.clients[c].working.get(&message) else {
            return;
        };
        if work.delivery.lock != delivery.lock {
            // The consumer let this handler's lock go and delivered the message again,
            // to another handler: this one's result is dropped, and that one's work
            // goes on.
            self.note(QueueEvent::Dropped(name, message));
            self.truth.dropped();
            return;
        }
        let started = work.started;
        let count = work.delivery.dequeue_count;
        if !authority {
            self.clients[c].working.remove(&message);
            self.note(QueueEvent::Dropped(name, message));
            self.truth.dropped();
            return;
        }
        let poison = self.truth.is_poison(&message);
        let fails =
            poison || (self.cfg.fail_one_in > 0 && self.rng.random_ratio(1, self.cfg.fail_one_in));
        let holder = (c, self.clients[c].life);
        self.truth
            .processed(&message, holder, started, self.now, !fails, count);
        self.note(QueueEvent::Processed(name, message.clone(), !fails));
        self.settle(c, delivery, !fails);
    }

    /// A give-back or completion of `message` was answered: the work of the delivery
    /// it was sent for is over (not a later delivery's).
    fn settled(&mut self, c: usize, message: &DocId) {
        let client = &mut self.clients[c];
        let Some(lock) = client.settling.remove(message) else {
            return;
        };
        if client
            .working
            .get(message)
            .is_some_and(|w| w.delivery.lock == lock)
        {
            client.working.remove(message);
        }
    }

    /// Completes or abandons a processed message (again, after an unknown outcome).
    fn settle(&mut self, c: usize, delivery: Handle, complete: bool) {
        let message = delivery.message.clone();
        let lock = delivery.lock.clone();
        let newer = self.clients[c]
            .settling
            .insert(message.clone(), lock.clone());
        let input = if complete {
            Input::Complete(delivery)
        } else {
            Input::Abandon {
                delivery,
                delay: ABANDON_DELAY,
            }
        };
        if !self.feed(c, input) {
            // No longer held: the message comes back to someone after its lock. A
            // retry refused this way leaves the record of a later delivery's call on
            // its way (its answer may still need a retry of its own).
            let client = &mut self.clients[c];
            match newer {
                Some(newer) if newer != lock => client.settling.insert(message.clone(), newer),
                _ => client.settling.remove(&message),
            };
            if client
                .working
                .get(&message)
                .is_some_and(|w| w.delivery.lock == lock)
            {
                client.working.remove(&message);
            }
        }
    }
}

/// Consumer `c` as the engine's synchronous loop drives it in the world.
struct Consuming<'w> {
    world: &'w mut QueueWorld,
    c: usize,
}

impl Driver<Consumer> for Consuming<'_> {
    fn step(&mut self, input: Input) -> Option<Stepped<Consumer>> {
        let client = &mut self.world.clients[self.c];
        let now = client.clock.now(self.world.now);
        Some(drive::step(client.consumer.as_mut()?, now, input))
    }

    fn send(&mut self, request: QueueRequest, _next: &mut VecDeque<Input>) {
        self.world.send(self.c, request);
    }

    fn output(&mut self, output: Output, _next: &mut VecDeque<Input>) {
        self.world.on_output(self.c, output);
    }
}

/// The producer as the engine's synchronous loop drives it in the world.
struct Producing<'w> {
    world: &'w mut QueueWorld,
}

impl Driver<Consumer> for Producing<'_> {
    fn step(&mut self, input: Input) -> Option<Stepped<Consumer>> {
        let now = self.world.producer_now();
        Some(drive::step(&mut self.world.producer, now, input))
    }

    fn send(&mut self, request: QueueRequest, _next: &mut VecDeque<Input>) {
        self.world.producer_send(request);
    }

    fn output(&mut self, output: Output, _next: &mut VecDeque<Input>) {
        self.world.producer_output(output);
    }
}
