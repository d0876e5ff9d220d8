//! The discrete-event loop: hosts running the engine's own state machine, the
//! engine's reference store behind a simulated network, the handlers, the faults,
//! and the checker watching ground truth.

use super::checker::{Checker, ViolationKind};
use super::clock::HostClock;
use super::config::{Scenario, SimConfig, SimError};
use super::cost::{self, Kind};
use super::faults::FaultKind;
use super::timeline::Timeline;
use super::trace::{Trace, TraceEvent};
use super::workload::Feed;
use leasehold_engine::lease::{
    Input, Intent, LeaseConfig, LeaseDocument, LeaseHost, Output, Record, StopReason, StoreRequest,
};
use leasehold_engine::store::{Container, Document, Op, Reply, StoreError};
use leasehold_engine::{Checkpoint, Epoch, HostId, Incarnation, LeaseToken, Millis, RequestId};
use leasehold_engine::{PartitionKey, Session};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

#[derive(Debug)]
enum Event {
    Wake {
        host: usize,
        life: u64,
    },
    Arrive {
        host: usize,
        life: u64,
        request: StoreRequest,
        sent: u64,
    },
    Answer {
        host: usize,
        life: u64,
        id: RequestId,
        intent: Intent,
        result: Result<Reply<Record>, StoreError>,
    },
    Poll {
        host: usize,
        life: u64,
        partition: u32,
        session: Session,
    },
    BatchDone {
        host: usize,
        life: u64,
        partition: u32,
        session: Session,
    },
    Boot {
        host: usize,
    },
    Crash {
        host: usize,
        restart_in: Option<u64>,
    },
    Shutdown {
        host: usize,
        restart_in: Option<u64>,
    },
    Resume {
        host: usize,
        life: u64,
    },
    Fault(FaultKind),
    Disturb,
    Heal,
    Deadline,
}

struct Scheduled {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    Down,
    Up,
    Leaving,
}

/// A handler processing one partition.
#[derive(Debug)]
struct Handler {
    token: LeaseToken,
    session: Session,
    epoch: Epoch,
    /// The next event to process.
    next: u64,
    /// Events in the batch in flight.
    batch: Option<u64>,
    /// Released or shutting down: finish the batch, checkpoint, then report stopped.
    draining: bool,
    /// Not paused.
    running: bool,
}

struct Host {
    name: HostId,
    life: u64,
    engine: Option<LeaseHost>,
    clock: HostClock,
    state: Life,
    paused_until: Option<u64>,
    /// Cannot reach the store before this.
    cut_until: u64,
    /// Replies are lost before this.
    lose_until: u64,
    wake: Option<u64>,
    handlers: HashMap<u32, Handler>,
    /// Drawn at first boot; kept across lives.
    clock_drawn: bool,
    up_since: Option<u64>,
    /// After the graceful shutdown in progress, restart this long after.
    restart_in: Option<u64>,
    /// Down after a fault, with a restart scheduled.
    restart_pending: bool,
}

/// What a finished run measured and found.
#[derive(Clone, Debug)]
pub struct Finished {
    /// The checker, with the measures and violations.
    pub checker: Checker,
    /// The trace's hash and length.
    pub trace_hash: u64,
    /// Events traced.
    pub trace_events: u64,
    /// The last trace events before the first violation (or the end).
    pub tail: Vec<String>,
    /// Store requests sent.
    pub requests: u64,
    /// Estimated request units.
    pub ru: f64,
    /// Host time up, in ms, summed over hosts.
    pub host_up_ms: u64,
    /// Requests throttled.
    pub throttled: u64,
    /// Requests answered with a timeout.
    pub timeouts: u64,
    /// Faults injected, by kind.
    pub faults: Vec<(FaultKind, u64)>,
    /// Events the source produced.
    pub events_produced: u64,
    /// True time at the end, in ms.
    pub end: u64,
    /// The ownership timeline, if asked for.
    pub timeline: Option<Timeline>,
    /// Simulator events handled.
    pub steps: u64,
}

/// One run in progress.
pub struct World {
    cfg: SimConfig,
    lease: LeaseConfig,
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    hosts: Vec<Host>,
    store: Container<Record>,
    feeds: Vec<Feed>,
    index: HashMap<LeaseToken, u32>,
    checker: Checker,
    trace: Trace,
    tail: Option<Vec<String>>,
    timeline: Option<Timeline>,
    throttle_until: u64,
    spike_until: u64,
    spike_ms: u64,
    healed: bool,
    requests: u64,
    ru: f64,
    host_up_ms: u64,
    throttled: u64,
    timeouts: u64,
    fault_counts: HashMap<FaultKind, u64>,
    steps: u64,
}

const SECOND: u64 = 1_000;

impl World {
    /// Sets up `cfg`; `timeline` records the ownership timeline for `--svg`.
    pub fn new(cfg: &SimConfig, timeline: bool) -> Result<World, SimError> {
        cfg.validate()?;
        let lease = cfg.lease_config()?;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let heal = cfg.heal_at().as_millis();
        let feeds = (0..cfg.partitions)
            .map(|p| {
                let hot = if p == 0 { cfg.workload.hot_factor } else { 1.0 };
                Feed::new(cfg.workload.rate * hot, rng.random_range(0..SECOND), heal)
            })
            .collect();
        let index = lease
            .partitions
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut world = World {
            checker: Checker::new(cfg.partitions as usize, cfg.disturbance().as_millis()),
            trace: Trace::new(cfg.trace_keep),
            tail: None,
            timeline: timeline.then(Timeline::default),
            cfg: cfg.clone(),
            lease,
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            hosts: Vec::new(),
            store: Container::new(),
            feeds,
            index,
            throttle_until: 0,
            spike_until: 0,
            spike_ms: 0,
            healed: false,
            requests: 0,
            ru: 0.0,
            host_up_ms: 0,
            throttled: 0,
            timeouts: 0,
            fault_counts: HashMap::new(),
            steps: 0,
        };
        world.plan();
        Ok(world)
    }

    fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            event,
        }));
    }

    fn add_host(&mut self, name: String) -> usize {
        let name = HostId::from(name);
        if let Some(t) = &mut self.timeline {
            t.names.push(name.to_string());
        }
        self.hosts.push(Host {
            name,
            life: 0,
            engine: None,
            clock: HostClock {
                boot: 0,
                drift_ppm: 0,
                offset_ms: 0,
            },
            state: Life::Down,
            paused_until: None,
            cut_until: 0,
            lose_until: 0,
            wake: None,
            handlers: HashMap::new(),
            clock_drawn: false,
            up_since: None,
            restart_in: None,
            restart_pending: false,
        });
        self.hosts.len() - 1
    }

    /// Schedules the scenario's membership changes, the faults and the deadlines.
    fn plan(&mut self) {
        let cfg = self.cfg.clone();
        let width = cfg.hosts.saturating_sub(1).to_string().len().max(2);
        for i in 0..cfg.hosts {
            self.add_host(format!("h{i:0width$}"));
        }
        let warmup = cfg.warmup.as_millis();
        let heal = cfg.heal_at().as_millis();
        let stagger = |rng: &mut ChaCha8Rng| rng.random_range(0..2 * SECOND);
        let initial = match cfg.scenario {
            Scenario::ScaleOut => cfg.from,
            _ => cfg.hosts,
        } as usize;
        for host in 0..cfg.hosts as usize {
            let at = if host < initial { 0 } else { warmup };
            let at = at + stagger(&mut self.rng);
            self.push(at, Event::Boot { host });
        }
        let hosts = cfg.hosts as usize;
        let affected = cfg.affected as usize;
        let interval = cfg.interval.as_millis();
        match cfg.scenario {
            Scenario::ScaleIn => {
                for host in hosts - affected..hosts {
                    self.push(
                        warmup,
                        Event::Shutdown {
                            host,
                            restart_in: None,
                        },
                    );
                }
            }
            Scenario::Crash => {
                for host in hosts - affected..hosts {
                    self.push(
                        warmup,
                        Event::Crash {
                            host,
                            restart_in: None,
                        },
                    );
                }
            }
            Scenario::RollingRestart => {
                for old in 0..hosts {
                    let name = format!("{}-r1", self.hosts[old].name);
                    let new = self.add_host(name);
                    let at = warmup + old as u64 * interval;
                    self.push(at, Event::Boot { host: new });
                    // The new pod is ready before the old one is terminated.
                    self.push(
                        at + 5 * SECOND,
                        Event::Shutdown {
                            host: old,
                            restart_in: None,
                        },
                    );
                }
            }
            Scenario::FlappingHost => {
                let mut at = warmup;
                while at < heal {
                    self.push(
                        at,
                        Event::Crash {
                            host: 0,
                            restart_in: Some(20 * SECOND),
                        },
                    );
                    at += interval;
                }
            }
            _ => {}
        }
        self.push(warmup, Event::Disturb);
        for (kind, _) in cfg.faults.enabled() {
            if !kind.is_static() {
                let gap = self.fault_gap(kind);
                self.push(warmup + gap, Event::Fault(kind));
            }
        }
        self.push(heal, Event::Heal);
        self.push(cfg.deadline().as_millis(), Event::Deadline);
    }

    fn fault_gap(&mut self, kind: FaultKind) -> u64 {
        let per_hour = match kind {
            FaultKind::Throttle | FaultKind::Spike => self.cfg.faults.get(kind),
            _ => self.cfg.faults.get(kind) * f64::from(self.cfg.hosts),
        };
        let mean = (3_600_000.0 / per_hour).clamp(1.0, 1e15) as u64;
        // Uniform gaps with the given mean: integer draws keep runs identical
        // everywhere, where a logarithm might differ in its last bit.
        self.rng.random_range(1..=2 * mean)
    }

    /// Runs to the liveness deadline.
    pub fn run(mut self) -> Finished {
        while let Some(Reverse(next)) = self.queue.pop() {
            self.now = next.at;
            self.steps += 1;
            if let Event::Deadline = next.event {
                self.deadline();
                break;
            }
            self.handle(next.event);
        }
        self.finish()
    }

    fn alive(&self, host: usize, life: u64) -> bool {
        let h = &self.hosts[host];
        h.life == life && h.engine.is_some()
    }

    /// Whether an event for `host` must wait for its pause to end; if so it is
    /// scheduled again then.
    fn deferred(&mut self, host: usize, event: Event) -> Option<Event> {
        match self.hosts[host].paused_until {
            Some(until) if until > self.now => {
                self.push(until, event);
                None
            }
            _ => Some(event),
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Wake { host, life } => {
                let h = &mut self.hosts[host];
                if h.life == life && h.wake == Some(self.now) && h.paused_until.is_none() {
                    h.wake = None;
                    self.feed(host, Input::Tick);
                }
            }
            Event::Arrive {
                host,
                life,
                request,
                sent,
            } => self.arrive(host, life, request, sent),
            event @ (Event::Answer { .. } | Event::Poll { .. } | Event::BatchDone { .. }) => {
                // Meant for one life of a host: dropped if that life is over, held
                // while the host is paused.
                let (Event::Answer { host, life, .. }
                | Event::Poll { host, life, .. }
                | Event::BatchDone { host, life, .. }) = &event
                else {
                    return;
                };
                let host = *host;
                if !self.alive(host, *life) {
                    return;
                }
                match self.deferred(host, event) {
                    Some(Event::Answer {
                        id, intent, result, ..
                    }) => self.answer(host, id, intent, result),
                    Some(Event::Poll {
                        life,
                        partition,
                        session,
                        ..
                    }) => self.poll(host, life, partition, session),
                    Some(Event::BatchDone {
                        life,
                        partition,
                        session,
                        ..
                    }) => self.batch_done(host, life, partition, session),
                    _ => {}
                }
            }
            Event::Boot { host } => self.boot(host),
            Event::Crash { host, restart_in } => self.crash(host, restart_in),
            Event::Shutdown { host, restart_in } => {
                let h = &mut self.hosts[host];
                if h.state == Life::Up {
                    h.state = Life::Leaving;
                    h.restart_in = restart_in;
                    let name = h.name.clone();
                    self.checker.set_live(host, false, self.now);
                    self.note(TraceEvent::Shutdown { host: name.clone() });
                    self.mark(format!("{name} shuts down"));
                    self.feed(host, Input::Shutdown);
                }
            }
            Event::Resume { host, life } => self.resume(host, life),
            Event::Fault(kind) => self.fault(kind),
            Event::Disturb => self.checker.disturb(self.now),
            Event::Heal => self.heal(),
            Event::Deadline => {}
        }
    }

    fn note(&mut self, event: TraceEvent) {
        self.trace.record(self.now, event);
    }

    fn mark(&mut self, label: String) {
        if let Some(t) = &mut self.timeline {
            t.mark(self.now, label);
        }
    }

    fn violate(&mut self, kind: ViolationKind, detail: String) {
        if self.tail.is_none() {
            self.tail = Some(self.trace.tail());
        }
        self.checker.violate(kind, self.now, detail);
    }

    /// Hands `first` to a host's engine, then carries out everything it asks for,
    /// feeding back what the handlers answer at once.
    fn feed(&mut self, host: usize, first: Input) {
        let mut inputs = VecDeque::from([first]);
        let mut outputs = Vec::new();
        while let Some(input) = inputs.pop_front() {
            let h = &mut self.hosts[host];
            let Some(engine) = h.engine.as_mut() else {
                break;
            };
            let now = h.clock.now(self.now);
            if let Err(e) = engine.handle_input(now, input) {
                let name = h.name.clone();
                self.violate(
                    ViolationKind::Driver,
                    format!("{name} refused an input: {e}"),
                );
            }
            let Some(engine) = self.hosts[host].engine.as_mut() else {
                break;
            };
            while let Some(output) = engine.poll_output() {
                outputs.push(output);
            }
            for output in outputs.drain(..) {
                self.on_output(host, output, &mut inputs);
            }
        }
        self.schedule_wake(host);
    }

    fn schedule_wake(&mut self, host: usize) {
        let now = self.now;
        let h = &mut self.hosts[host];
        let Some(next) = h.engine.as_ref().and_then(|e| e.poll_timeout()) else {
            return;
        };
        let at = h.clock.true_at(next).max(now + 1);
        if h.wake.is_none_or(|w| at < w || w < now) {
            h.wake = Some(at);
            let life = h.life;
            self.push(at, Event::Wake { host, life });
        }
    }

    fn on_output(&mut self, host: usize, output: Output, inputs: &mut VecDeque<Input>) {
        match output {
            Output::Request(request) => self.send(host, request),
            Output::Start {
                lease,
                epoch,
                session,
                checkpoint,
            } => self.start(host, lease, epoch, session, checkpoint),
            Output::Stop {
                lease,
                session,
                reason,
                epoch,
            } => {
                let Some(&partition) = self.index.get(&lease) else {
                    return;
                };
                let h = &mut self.hosts[host];
                let Some(handler) = h.handlers.get_mut(&partition) else {
                    return;
                };
                if handler.session != session {
                    return;
                }
                let name = h.name.clone();
                let lost = matches!(reason, StopReason::Lost(_));
                if !lost && handler.batch.is_some() {
                    handler.draining = true;
                } else {
                    self.end_handler(host, partition);
                    if !lost {
                        inputs.push_back(Input::Stopped { lease, session });
                    }
                }
                self.note(TraceEvent::Stop {
                    host: name,
                    partition,
                    epoch: epoch.0,
                    reason,
                });
            }
            Output::Checkpointed { .. } | Output::CheckpointRejected { .. } => {}
            Output::ShutdownComplete => {
                let name = self.hosts[host].name.clone();
                self.note(TraceEvent::Down { host: name });
                let restart = self.hosts[host].restart_in.take();
                self.down(host);
                if let Some(after) = restart {
                    self.hosts[host].restart_pending = true;
                    self.push(self.now + after, Event::Boot { host });
                }
            }
        }
    }

    /// Removes a handler and takes it off the ground truth.
    fn end_handler(&mut self, host: usize, partition: u32) {
        if let Some(handler) = self.hosts[host].handlers.remove(&partition)
            && handler.running
        {
            self.checker.halt(partition, host, self.now);
            if let Some(t) = &mut self.timeline {
                t.end(partition, host, self.now);
            }
        }
    }

    /// Whether another host than `host` is entitled to process `partition` now.
    fn rival_authority(&self, host: usize, partition: u32, token: &LeaseToken) -> Option<String> {
        self.checker
            .running(partition)
            .iter()
            .filter(|r| r.host != host)
            .find_map(|r| {
                let other = &self.hosts[r.host];
                let local = other.clock.local(self.now);
                let epoch = other.engine.as_ref()?.authority(token, local)?;
                Some(format!("{} (epoch {})", other.name, epoch.0))
            })
    }

    fn start(
        &mut self,
        host: usize,
        lease: LeaseToken,
        epoch: Epoch,
        session: Session,
        checkpoint: Option<Checkpoint>,
    ) {
        let Some(&partition) = self.index.get(&lease) else {
            return;
        };
        let name = self.hosts[host].name.clone();
        let from = match checkpoint.as_ref().map(|c| c.as_str().parse::<u64>()) {
            None => 0,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                self.violate(
                    ViolationKind::Driver,
                    format!("{name} resumed {lease} from an unreadable checkpoint {checkpoint:?}"),
                );
                0
            }
        };
        if let Some(rival) = self.rival_authority(host, partition, &lease) {
            self.violate(
                ViolationKind::Exclusivity,
                format!(
                    "{name} starts partition {partition} at epoch {} while {rival} still holds authority",
                    epoch.0
                ),
            );
        }
        self.note(TraceEvent::Start {
            host: name,
            partition,
            epoch: epoch.0,
            from,
        });
        self.hosts[host].handlers.insert(
            partition,
            Handler {
                token: lease,
                session,
                epoch,
                next: from,
                batch: None,
                draining: false,
                running: true,
            },
        );
        self.checker.run(partition, host, epoch.0, true, self.now);
        if let Some(t) = &mut self.timeline {
            t.start(partition, host, self.now);
        }
        let life = self.hosts[host].life;
        self.push(
            self.now,
            Event::Poll {
                host,
                life,
                partition,
                session,
            },
        );
    }

    fn latency(&mut self) -> u64 {
        let (lo, hi) = self.cfg.network.latency_ms;
        let mut ms = self.rng.random_range(lo..=hi);
        let one_in = self.cfg.network.tail_one_in;
        if one_in > 0 && self.rng.random_ratio(1, one_in) {
            ms += self.rng.random_range(20..=200);
        }
        if self.spike_until > self.now {
            ms += self.spike_ms;
        }
        ms
    }

    fn send(&mut self, host: usize, request: StoreRequest) {
        self.requests += 1;
        let doc = match &request.op {
            Op::Read { id, .. } | Op::Delete { id, .. } => Some(id.clone()),
            Op::Replace { doc, .. } | Op::Create(doc) => Some(doc.id().clone()),
            Op::ReadAll { .. } | Op::Batch { .. } => None,
        };
        let h = &self.hosts[host];
        let (name, life, cut) = (h.name.clone(), h.life, h.cut_until > self.now);
        self.note(TraceEvent::Request {
            host: name,
            intent: request.intent,
            doc,
        });
        let timeout = self.cfg.network.request_timeout.as_millis();
        if cut {
            self.timeouts += 1;
            let event = Event::Answer {
                host,
                life,
                id: request.id,
                intent: request.intent,
                result: Err(StoreError::Timeout),
            };
            self.push(self.now + timeout, event);
        } else {
            let at = self.now + self.latency();
            let sent = self.now;
            self.push(
                at,
                Event::Arrive {
                    host,
                    life,
                    request,
                    sent,
                },
            );
        }
    }

    /// A request reaches the store, which applies it (whether or not its sender is
    /// still alive to hear the answer).
    fn arrive(&mut self, host: usize, life: u64, mut request: StoreRequest, sent: u64) {
        if let Some(bug) = self.cfg.bug {
            let before = leasehold_model::lease_before(&self.store, &request.op);
            bug.tamper(&mut request, before.as_ref());
        }
        let StoreRequest { id, intent, op } = request;
        let result = if self.throttle_until > self.now && self.rng.random_bool(0.5) {
            self.throttled += 1;
            let retry_after = Millis(self.rng.random_range(100..=2_000));
            Err(StoreError::Throttled { retry_after })
        } else {
            self.apply(host, intent, op)
        };
        let h = &self.hosts[host];
        let lost = h.lose_until > self.now || h.cut_until > self.now;
        let at = self.now + self.latency();
        let deadline = sent + self.cfg.network.request_timeout.as_millis();
        let (at, result) = if lost || at > deadline {
            self.timeouts += 1;
            (deadline.max(self.now), Err(StoreError::Timeout))
        } else {
            (at, result)
        };
        self.push(
            at,
            Event::Answer {
                host,
                life,
                id,
                intent,
                result,
            },
        );
    }

    /// Executes `op` on the reference store and checks what it did to a lease.
    fn apply(
        &mut self,
        host: usize,
        intent: Intent,
        op: Op<Record>,
    ) -> Result<Reply<Record>, StoreError> {
        let kind = Kind::of(&op);
        let written = match &op {
            Op::Replace {
                doc: Record::Lease(doc),
                ..
            } => {
                let before = self
                    .store
                    .read(&PartitionKey::new(doc.id.as_str()), &doc.id)
                    .ok()
                    .and_then(|s| match s.doc {
                        Record::Lease(d) => Some(d),
                        Record::Host(_) => None,
                    });
                Some((doc.clone(), before))
            }
            _ => None,
        };
        let result = self.store.execute(op);
        let ru = cost::request_units(kind, &result);
        self.ru += ru;
        if let (Ok(_), Some((after, before))) = (&result, written) {
            self.check_lease_write(host, intent, &after, before.as_ref());
        }
        result
    }

    fn check_lease_write(
        &mut self,
        host: usize,
        intent: Intent,
        after: &LeaseDocument,
        before: Option<&LeaseDocument>,
    ) {
        let Some(&partition) = self.index.get(&after.token) else {
            return;
        };
        let position = |d: &LeaseDocument| {
            d.checkpoint
                .as_ref()
                .and_then(|c| c.as_str().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let new = position(after);
        let sender = self.hosts[host].name.clone();
        if let Some(before) = before {
            let old = position(before);
            if new < old {
                self.violate(
                    ViolationKind::CheckpointMonotonicity,
                    format!(
                        "{sender}'s {intent:?} moved partition {partition}'s checkpoint back from {old} to {new}"
                    ),
                );
            }
            let same_epoch = after.epoch == before.epoch;
            let handed_on = matches!(intent, Intent::Release | Intent::Handoff)
                && after.epoch == before.epoch.next();
            if after.owner != before.owner && after.epoch <= before.epoch {
                self.violate(
                    ViolationKind::Fencing,
                    format!(
                        "{sender}'s {intent:?} gave partition {partition} to {:?} at epoch {}, not above {:?}'s epoch {}: the epoch no longer fences the former owner",
                        after.owner, after.epoch.0, before.owner, before.epoch.0
                    ),
                );
            }
            if intent.is_owner_write()
                && (!before.is_owned_by(&sender) || !(same_epoch || handed_on))
            {
                self.violate(
                    ViolationKind::Fencing,
                    format!(
                        "the store accepted {sender}'s {intent:?} of partition {partition} at epoch {} over epoch {} owned by {:?}",
                        after.epoch.0, before.epoch.0, before.owner
                    ),
                );
            }
        }
        let committed = self.checker.committed(partition);
        if new > committed {
            self.violate(
                ViolationKind::EventLost,
                format!(
                    "{sender} stored checkpoint {new} for partition {partition}, but events from {committed} on were never processed"
                ),
            );
        }
        self.note(TraceEvent::Stored {
            partition,
            owner: after.owner.clone(),
            epoch: after.epoch.0,
            checkpoint: new,
        });
    }

    fn answer(
        &mut self,
        host: usize,
        id: RequestId,
        intent: Intent,
        result: Result<Reply<Record>, StoreError>,
    ) {
        let status = match &result {
            Ok(_) => 200,
            Err(e) => e.status().code(),
        };
        let name = self.hosts[host].name.clone();
        self.note(TraceEvent::Reply {
            host: name,
            intent,
            status,
        });
        self.feed(host, Input::Response { id, result });
    }

    fn poll(&mut self, host: usize, life: u64, partition: u32, session: Session) {
        let produced = self.feeds[partition as usize].produced(self.now);
        let w = &self.cfg.workload;
        let (max_batch, poll) = (w.max_batch, w.poll.as_millis());
        let Some(handler) = self.hosts[host].handlers.get_mut(&partition) else {
            return;
        };
        if handler.session != session || handler.batch.is_some() || handler.draining {
            return;
        }
        let available = produced.saturating_sub(handler.next);
        if available == 0 {
            self.push(
                self.now + poll,
                Event::Poll {
                    host,
                    life,
                    partition,
                    session,
                },
            );
        } else {
            let n = available.min(max_batch);
            handler.batch = Some(n);
            let at = self.now + self.cfg.workload.batch_time(n);
            self.push(
                at,
                Event::BatchDone {
                    host,
                    life,
                    partition,
                    session,
                },
            );
        }
    }

    fn batch_done(&mut self, host: usize, life: u64, partition: u32, session: Session) {
        // A runtime asks the engine before the batch takes effect: a lease whose
        // authority ran out is stopped first, and its batch is dropped.
        let lapsed = {
            let h = &self.hosts[host];
            let local = h.clock.local(self.now);
            h.handlers.get(&partition).is_some_and(|handler| {
                let held = h
                    .engine
                    .as_ref()
                    .and_then(|e| e.authority(&handler.token, local));
                held != Some(handler.epoch)
            })
        };
        if lapsed {
            self.feed(host, Input::Tick);
        }
        let h = &self.hosts[host];
        let Some(handler) = h.handlers.get(&partition) else {
            return;
        };
        let Some(n) = handler.batch.filter(|_| handler.session == session) else {
            return;
        };
        let (token, epoch, from, draining) = (
            handler.token.clone(),
            handler.epoch,
            handler.next,
            handler.draining,
        );
        let name = h.name.clone();
        let local = h.clock.local(self.now);
        let entitled = h.engine.as_ref().and_then(|e| e.authority(&token, local));
        if entitled != Some(epoch) {
            self.violate(
                ViolationKind::Exclusivity,
                format!(
                    "{name}'s batch on partition {partition} took effect without authority (epoch {})",
                    epoch.0
                ),
            );
        }
        if let Some(rival) = self.rival_authority(host, partition, &token) {
            self.violate(
                ViolationKind::Exclusivity,
                format!(
                    "{name}'s batch on partition {partition} took effect at epoch {} while {rival} holds authority",
                    epoch.0
                ),
            );
        }
        let to = from + n;
        let arrival = self.feeds[partition as usize].arrival(from);
        if let Err((kind, detail)) = self
            .checker
            .commit(partition, epoch.0, from, to, arrival, self.now)
        {
            self.violate(kind, detail);
        }
        self.note(TraceEvent::Commit {
            host: name,
            partition,
            epoch: epoch.0,
            from,
            to,
        });
        if let Some(handler) = self.hosts[host].handlers.get_mut(&partition) {
            handler.next = to;
            handler.batch = None;
        }
        let checkpoint = Checkpoint::from(to.to_string());
        self.feed(
            host,
            Input::Checkpoint {
                lease: token.clone(),
                session,
                checkpoint,
            },
        );
        if draining {
            self.end_handler(host, partition);
            self.feed(
                host,
                Input::Stopped {
                    lease: token,
                    session,
                },
            );
        } else {
            self.push(
                self.now,
                Event::Poll {
                    host,
                    life,
                    partition,
                    session,
                },
            );
        }
    }

    fn boot(&mut self, host: usize) {
        if self.hosts[host].state != Life::Down {
            return;
        }
        if !self.hosts[host].clock_drawn {
            let skew = (self.cfg.faults.get(FaultKind::Skew) * 1_000.0) as i64;
            let drift = self.cfg.faults.get(FaultKind::Drift) as i32;
            let offset_ms = if skew > 0 {
                self.rng.random_range(-skew..=skew)
            } else {
                0
            };
            let drift_ppm = if drift > 0 {
                self.rng.random_range(-drift..=drift)
            } else {
                0
            };
            let h = &mut self.hosts[host];
            h.clock.offset_ms = offset_ms;
            h.clock.drift_ppm = drift_ppm;
            h.clock_drawn = true;
        }
        let now = self.now;
        let h = &mut self.hosts[host];
        h.life += 1;
        h.clock.boot = now;
        h.state = Life::Up;
        h.up_since = Some(now);
        h.restart_pending = false;
        h.paused_until = None;
        h.wake = None;
        h.engine = Some(
            LeaseHost::new(h.name.clone(), self.lease.clone(), Incarnation(h.life))
                .expect("the lease settings were validated with the run"),
        );
        let (name, life) = (h.name.clone(), h.life);
        self.checker.set_live(host, true, now);
        self.note(TraceEvent::Boot {
            host: name.clone(),
            life,
        });
        if life > 1 {
            self.mark(format!("{name} restarts"));
        }
        self.feed(host, Input::Tick);
    }

    /// The host stops existing: handlers end, nothing in flight is heard.
    fn down(&mut self, host: usize) {
        let partitions: Vec<u32> = self.hosts[host].handlers.keys().copied().collect();
        for partition in partitions {
            self.end_handler(host, partition);
        }
        let now = self.now;
        let h = &mut self.hosts[host];
        h.engine = None;
        h.state = Life::Down;
        h.wake = None;
        h.paused_until = None;
        if let Some(since) = h.up_since.take() {
            self.host_up_ms += now - since;
        }
        self.checker.set_live(host, false, now);
    }

    fn crash(&mut self, host: usize, restart_in: Option<u64>) {
        if self.hosts[host].state == Life::Down {
            return;
        }
        let name = self.hosts[host].name.clone();
        self.note(TraceEvent::Crash { host: name.clone() });
        self.mark(format!("{name} crashes"));
        self.down(host);
        if let Some(after) = restart_in {
            self.hosts[host].restart_pending = true;
            self.push(self.now + after, Event::Boot { host });
        }
    }

    fn pause(&mut self, host: usize, for_ms: u64) {
        let until = self.now + for_ms;
        let h = &mut self.hosts[host];
        h.paused_until = Some(until);
        let life = h.life;
        let mut halted = Vec::new();
        for (partition, handler) in &mut h.handlers {
            if handler.running {
                handler.running = false;
                halted.push(*partition);
            }
        }
        halted.sort_unstable();
        for partition in halted {
            self.checker.halt(partition, host, self.now);
        }
        self.push(until, Event::Resume { host, life });
    }

    fn resume(&mut self, host: usize, life: u64) {
        if !self.alive(host, life) || self.hosts[host].paused_until.is_none() {
            return;
        }
        self.hosts[host].paused_until = None;
        // The engine runs first: whatever lapsed during the pause stops before any
        // handler continues.
        self.feed(host, Input::Tick);
        let mut resumed: Vec<(u32, LeaseToken, u64)> = self.hosts[host]
            .handlers
            .iter_mut()
            .filter(|(_, h)| !h.running)
            .map(|(p, h)| {
                h.running = true;
                (*p, h.token.clone(), h.epoch.0)
            })
            .collect();
        resumed.sort_unstable_by_key(|(p, _, _)| *p);
        for (partition, token, epoch) in resumed {
            if let Some(rival) = self.rival_authority(host, partition, &token) {
                let name = self.hosts[host].name.clone();
                self.violate(
                    ViolationKind::Exclusivity,
                    format!(
                        "{name} resumes partition {partition} at epoch {epoch} after a pause while {rival} holds authority"
                    ),
                );
            }
            self.checker.run(partition, host, epoch, false, self.now);
        }
    }

    fn random_host(&mut self, up_only: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.hosts.len())
            .filter(|h| match self.hosts[*h].state {
                Life::Up => self.hosts[*h].paused_until.is_none(),
                Life::Leaving => !up_only,
                Life::Down => false,
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        Some(candidates[self.rng.random_range(0..candidates.len())])
    }

    fn fault(&mut self, kind: FaultKind) {
        if self.healed {
            return;
        }
        let struck = self.strike(kind);
        if let Some((host, size_ms)) = struck {
            *self.fault_counts.entry(kind).or_default() += 1;
            let name = host.map(|h| self.hosts[h].name.clone());
            // Crashes and shutdowns mark themselves, as scripted ones do.
            if !matches!(kind, FaultKind::Crash | FaultKind::Shutdown) {
                let label = match &name {
                    Some(n) => format!("{kind} {n}"),
                    None => kind.to_string(),
                };
                self.mark(label);
            }
            self.note(TraceEvent::Fault {
                kind,
                host: name,
                size_ms,
            });
        }
        let gap = self.fault_gap(kind);
        self.push(self.now + gap, Event::Fault(kind));
    }

    /// Applies one fault of `kind`; returns the host it hit and its size.
    fn strike(&mut self, kind: FaultKind) -> Option<(Option<usize>, i64)> {
        let now = self.now;
        let range =
            |rng: &mut ChaCha8Rng, lo: u64, hi: u64| rng.random_range(lo * SECOND..=hi * SECOND);
        match kind {
            FaultKind::Crash => {
                let host = self.random_host(false)?;
                let down = range(&mut self.rng, 5, 60);
                self.crash(host, Some(down));
                Some((Some(host), down as i64))
            }
            FaultKind::Shutdown => {
                let host = self.random_host(true)?;
                let down = range(&mut self.rng, 5, 30);
                self.handle(Event::Shutdown {
                    host,
                    restart_in: Some(down),
                });
                Some((Some(host), down as i64))
            }
            FaultKind::Pause => {
                let host = self.random_host(false)?;
                let stall = range(&mut self.rng, 1, 90);
                self.pause(host, stall);
                Some((Some(host), stall as i64))
            }
            FaultKind::Jump => {
                let host = self.random_host(false)?;
                let step = range(&mut self.rng, 1, 120) as i64;
                let step = if self.rng.random_bool(0.5) {
                    step
                } else {
                    -step
                };
                self.hosts[host].clock.offset_ms += step;
                Some((Some(host), step))
            }
            FaultKind::Throttle => {
                let window = range(&mut self.rng, 5, 60);
                self.throttle_until = self.throttle_until.max(now + window);
                Some((None, window as i64))
            }
            FaultKind::Spike => {
                let window = range(&mut self.rng, 5, 30);
                self.spike_until = self.spike_until.max(now + window);
                self.spike_ms = self.rng.random_range(200..=8_000);
                Some((None, window as i64))
            }
            FaultKind::Timeout => {
                let host = self.random_host(false)?;
                let window = range(&mut self.rng, 1, 20);
                self.hosts[host].lose_until = now + window;
                Some((Some(host), window as i64))
            }
            FaultKind::Partition => {
                let host = self.random_host(false)?;
                let window = range(&mut self.rng, 5, 90);
                self.hosts[host].cut_until = now + window;
                Some((Some(host), window as i64))
            }
            FaultKind::Skew | FaultKind::Drift => None,
        }
    }

    /// Every fault ends; hosts a fault took down come back.
    fn heal(&mut self) {
        self.healed = true;
        self.throttle_until = 0;
        self.spike_until = 0;
        self.note(TraceEvent::Heal);
        self.mark("heal".into());
        for host in 0..self.hosts.len() {
            let h = &mut self.hosts[host];
            h.cut_until = 0;
            h.lose_until = 0;
            if h.paused_until.is_some() {
                h.paused_until = Some(self.now);
                let life = h.life;
                self.push(self.now, Event::Resume { host, life });
            }
            if self.hosts[host].restart_pending {
                self.push(self.now, Event::Boot { host });
            }
        }
    }

    /// The liveness deadline: the work must have settled, and nothing may be lost.
    fn deadline(&mut self) {
        if !self.checker.covered() {
            let missing = self.checker.spread();
            self.violate(
                ViolationKind::Liveness,
                format!(
                    "{:.0} s after the heal and the last change, some partition is not processed by exactly one live host (spread {missing})",
                    self.cfg.settle().as_millis() as f64 / 1_000.0
                ),
            );
        } else if self.cfg.strategy.needs_membership() && !self.checker.balanced() {
            let spread = self.checker.spread();
            self.violate(
                ViolationKind::Liveness,
                format!(
                    "{:.0} s after the heal and the last change, the live hosts' loads still differ by {spread}",
                    self.cfg.settle().as_millis() as f64 / 1_000.0
                ),
            );
        }
        let mut behind = Vec::new();
        for p in 0..self.feeds.len() {
            let produced = self.feeds[p].produced(self.now);
            let committed = self.checker.committed(p as u32);
            if committed < produced {
                behind.push((p, committed, produced));
                let waited = self.now - self.feeds[p].arrival(committed);
                self.checker.max_lag_ms = self.checker.max_lag_ms.max(waited);
            }
        }
        if let Some((p, committed, produced)) = behind.first() {
            self.violate(
                ViolationKind::EventLost,
                format!(
                    "at the end, {} partitions have unprocessed events; partition {p}: events {committed}..{produced}",
                    behind.len()
                ),
            );
        }
    }

    fn finish(mut self) -> Finished {
        let now = self.now;
        for host in 0..self.hosts.len() {
            if let Some(since) = self.hosts[host].up_since {
                self.host_up_ms += now - since;
            }
        }
        self.checker.finish(now);
        if let Some(t) = &mut self.timeline {
            t.finish(now);
        }
        let mut faults: Vec<(FaultKind, u64)> = self.fault_counts.into_iter().collect();
        faults.sort_unstable();
        let events_produced = self.feeds.iter().map(|f| f.produced(now)).sum();
        Finished {
            trace_hash: self.trace.hash(),
            trace_events: self.trace.len(),
            tail: self.tail.unwrap_or_else(|| self.trace.tail()),
            checker: self.checker,
            requests: self.requests,
            ru: self.ru,
            host_up_ms: self.host_up_ms,
            throttled: self.throttled,
            timeouts: self.timeouts,
            faults,
            events_produced,
            end: now,
            timeline: self.timeline,
            steps: self.steps,
        }
    }
}
