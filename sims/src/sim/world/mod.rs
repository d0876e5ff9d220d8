//! The discrete-event loop: hosts running the engine's own state machine, the
//! engine's reference store behind a simulated network, the handlers, the faults,
//! and the checker watching ground truth.
//!
//! - `handlers`: the workload's handlers, polling and checkpointing;
//! - `store`: the network between hosts and the store, and the writes it checks;
//! - `life`: boots, shutdowns, crashes, pauses, the faults and the heal.

use super::checker::{Checker, ViolationKind};
use super::clock::HostClock;
use super::config::{Scenario, SimConfig, SimError};
use super::cost::{self, Kind};
use super::faults::{self, FaultKind, StoreWeather};
use super::timeline::Timeline;
use super::trace::{Trace, TraceEvent};
use super::workload::Feed;
use leasehold_engine::drive::{self, Driver, Halt, Stepped};
use leasehold_engine::feed::FeedRanges;
use leasehold_engine::lease::{
    Input, InputError, Intent, LeaseConfig, LeaseDocument, LeaseHost, Output, Purpose, Record,
    StopReason, WriteFault, audit_write,
};
use leasehold_engine::store::{Document, Op, Replicated, Reply, StoreError};
use leasehold_engine::{Checkpoint, Epoch, HostId, Incarnation, LeaseToken, Millis, RequestId};
use leasehold_engine::{PartitionKey, Request, Session};

/// A host's request to the store, as the engine's contract carries it.
type StoreRequest = Request<Record, Intent>;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

mod handlers;
mod life;
mod refusals;
mod replay;
mod split;
mod store;

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
    /// The grace period of a lost call is over: the runtime aborts it.
    Abort {
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
    /// A zombie's end: life `life` of `host` dies, if it still runs.
    Die {
        host: usize,
        life: u64,
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
    /// Told the lease is lost while a batch was in flight: the call ignores its
    /// cancellation and runs on until the batch ends or the runtime aborts it.
    lost: bool,
    /// Lost while its host's handlers were stuck in blocking code: neither its batch
    /// nor the runtime's abort ends it, only its return, drawn past the stop timeout.
    stuck: bool,
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
    /// The SDK retries this host's writes beneath it before this.
    retry_until: u64,
    /// Its handlers are stuck in blocking code before this: a call lost then cannot
    /// be aborted.
    stuck_until: u64,
    wake: Option<u64>,
    handlers: HashMap<u32, Handler>,
    /// Drawn at first boot; kept across lives.
    clock_drawn: bool,
    up_since: Option<u64>,
    /// After the graceful shutdown in progress, restart this long after.
    restart_in: Option<u64>,
    /// Down after a fault, with a restart scheduled.
    restart_pending: bool,
    /// From this true time on, the slot boots the new build a rolling restart
    /// deploys.
    upgrade_at: Option<u64>,
    /// A zombie: a life believed dead, whose name a new slot took. It never starts
    /// again (two lives of one name would share an incarnation), and no fault picks
    /// it.
    doomed: bool,
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
    /// Store requests sent from the disturbance to the heal.
    pub requests: u64,
    /// Estimated request units from the disturbance to the heal.
    pub ru: f64,
    /// Requests and estimated request units by purpose, from the disturbance to the heal.
    pub by_purpose: BTreeMap<Purpose, (u64, f64)>,
    /// Host time up from the disturbance to the heal, in ms, summed over hosts.
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
    /// The settings of the new build a rolling restart deploys.
    deployed: LeaseConfig,
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    hosts: Vec<Host>,
    /// The container, as the hosts' sessions see it (Session consistency).
    store: Replicated<Record>,
    feeds: Vec<Feed>,
    /// Per partition: its feed's rate, the events it inherited from the range it
    /// split from, that range, and its token.
    rates: Vec<f64>,
    bases: Vec<u64>,
    parents: Vec<Option<u32>>,
    tokens: Vec<LeaseToken>,
    /// Which ranges have split: the engine's reference feed.
    ranges: FeedRanges,
    index: HashMap<LeaseToken, u32>,
    checker: Checker,
    /// The checkpoint policy's replay bound, where it is a count.
    replay: Option<replay::Replay>,
    trace: Trace,
    tail: Option<Vec<String>>,
    timeline: Option<Timeline>,
    weather: StoreWeather,
    healed: bool,
    requests: u64,
    ru: f64,
    by_purpose: BTreeMap<Purpose, (u64, f64)>,
    host_up_ms: u64,
    throttled: u64,
    timeouts: u64,
    fault_counts: HashMap<FaultKind, u64>,
    steps: u64,
    refusals: refusals::Refusals,
}

const SECOND: u64 = 1_000;

impl World {
    /// Sets up `cfg`; `timeline` records the ownership timeline for `--svg`.
    pub fn new(cfg: &SimConfig, timeline: bool) -> Result<World, SimError> {
        cfg.validate()?;
        let lease = cfg.lease_config()?;
        let deployed = cfg.deployed_config()?;
        let tokens = lease.partitions.clone();
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let heal = cfg.heal_at().as_millis();
        let rates: Vec<f64> = (0..cfg.partitions)
            .map(|p| {
                let hot = if p == 0 { cfg.workload.hot_factor } else { 1.0 };
                cfg.workload.rate * hot
            })
            .collect();
        let feeds = rates
            .iter()
            .map(|rate| Feed::new(*rate, rng.random_range(0..SECOND), heal))
            .collect();
        let index = lease
            .partitions
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut world = World {
            checker: Checker::new(cfg.partitions as usize, cfg.disturbance().as_millis()),
            replay: replay::Replay::new(
                lease.checkpoint,
                cfg.partitions as usize,
                cfg.faults.get(FaultKind::Drift) as u64,
            ),
            trace: Trace::new(cfg.trace_keep),
            tail: None,
            timeline: timeline.then(Timeline::default),
            cfg: cfg.clone(),
            lease,
            deployed,
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            hosts: Vec::new(),
            store: faults::replicated(&cfg.faults),
            feeds,
            bases: vec![0; rates.len()],
            parents: vec![None; rates.len()],
            tokens,
            rates,
            ranges: FeedRanges::default(),
            index,
            weather: StoreWeather::default(),
            healed: false,
            requests: 0,
            ru: 0.0,
            by_purpose: BTreeMap::new(),
            host_up_ms: 0,
            throttled: 0,
            timeouts: 0,
            fault_counts: HashMap::new(),
            steps: 0,
            refusals: refusals::Refusals::default(),
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
            retry_until: 0,
            stuck_until: 0,
            wake: None,
            handlers: HashMap::new(),
            clock_drawn: false,
            up_since: None,
            restart_in: None,
            restart_pending: false,
            upgrade_at: None,
            doomed: false,
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
                    let at = warmup + old as u64 * interval;
                    if cfg.names == super::config::Names::Reuse {
                        // A StatefulSet's pod: stopped, then started again under its
                        // name on the new build.
                        self.hosts[old].upgrade_at = Some(at);
                        self.push(
                            at,
                            Event::Shutdown {
                                host: old,
                                restart_in: Some(5 * SECOND),
                            },
                        );
                        continue;
                    }
                    let name = format!("{}-r1", self.hosts[old].name);
                    let new = self.add_host(name);
                    self.hosts[new].upgrade_at = Some(0);
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
            FaultKind::Throttle | FaultKind::Spike | FaultKind::Split | FaultKind::Stale => {
                self.cfg.faults.get(kind)
            }
            _ => self.cfg.faults.get(kind) * f64::from(self.cfg.hosts),
        };
        let mean = (3_600_000.0 / per_hour).clamp(1.0, 1e15) as u64;
        // Uniform gaps with the given mean: integer draws keep runs identical
        // everywhere, where a logarithm might differ in its last bit.
        self.rng.random_range(1..=2 * mean)
    }

    /// Runs to the liveness deadline.
    pub fn run(self) -> Finished {
        self.run_with(&mut |_| {})
    }

    /// Runs to the end as [`World::run`], telling `progress` the virtual time reached
    /// (in milliseconds) every 65,536 events: a run of a million partitions takes
    /// minutes, and showed nothing meanwhile.
    pub fn run_with(mut self, progress: &mut dyn FnMut(u64)) -> Finished {
        while let Some(Reverse(next)) = self.queue.pop() {
            self.now = next.at;
            self.steps += 1;
            if self.steps.is_multiple_of(1 << 16) {
                progress(self.now);
            }
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
                if h.life == life && h.wake == Some(self.now) && h.paused_until.is_some() {
                    // Dropped, and forgotten: the resume arms the next wake afresh.
                    // Remembered, a wake due at the very instant of the resume (the
                    // heal's) looked pending, none was armed, and the host slept to
                    // the end of the run (the swarm's seed 4176986).
                    h.wake = None;
                } else if h.life == life && h.wake == Some(self.now) && h.paused_until.is_none() {
                    h.wake = None;
                    // Only a kept trace asks: a quiet swarm pays nothing.
                    if self.trace.keeps()
                        && let Some((_, timer)) = h.engine.as_ref().and_then(|e| e.poll_timer())
                    {
                        let host = h.name.clone();
                        self.trace
                            .aside(self.now, || TraceEvent::Wake { host, timer });
                    }
                    self.feed(host, Input::Tick);
                }
            }
            Event::Arrive {
                host,
                life,
                request,
                sent,
            } => self.arrive(host, life, request, sent),
            event @ (Event::Answer { .. }
            | Event::Poll { .. }
            | Event::BatchDone { .. }
            | Event::Abort { .. }) => {
                // Meant for one life of a host: dropped if that life is over, held
                // while the host is paused.
                let (Event::Answer { host, life, .. }
                | Event::Poll { host, life, .. }
                | Event::BatchDone { host, life, .. }
                | Event::Abort { host, life, .. }) = &event
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
                    Some(Event::Abort {
                        partition, session, ..
                    }) => self.abort(host, partition, session),
                    _ => {}
                }
            }
            Event::Boot { host } if self.hosts[host].doomed => {}
            Event::Boot { host } => self.boot(host),
            Event::Crash { host, restart_in } => self.crash(host, restart_in),
            Event::Die { host, life } => {
                if self.alive(host, life) {
                    self.crash(host, None);
                }
            }
            Event::Shutdown { host, restart_in } => {
                let h = &mut self.hosts[host];
                if h.state == Life::Up {
                    h.state = Life::Leaving;
                    h.restart_in = restart_in;
                    let name = h.name.clone();
                    self.checker.orphan(host, true, self.now);
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
        let fed = drive::feed(&mut Feeding { world: self, host }, [first]);
        if let Err(Halt::Refused(error)) = fed {
            self.refused(host, error);
        }
        self.schedule_wake(host);
    }

    fn refused(&mut self, host: usize, error: InputError) {
        let name = self.hosts[host].name.clone();
        self.violate(
            ViolationKind::Driver,
            format!("{name} refused an input: {error}"),
        );
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
            // `drive::feed` hands every request to `send`: none comes here.
            Output::Request(_) => {}
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
                // The runtime's rule, from this host's own settings (a deploy may
                // change them).
                let (grace, stop_timeout) = self.hosts[host].engine.as_ref().map_or((0, 0), |e| {
                    let config = e.config();
                    (
                        config.expiry.abort_grace().as_millis(),
                        config.stop_timeout.as_millis(),
                    )
                });
                // A call stuck in blocking code returns one to three stop timeouts
                // past its grace: the engine gives its lease up meanwhile.
                let stuck = self.hosts[host].stuck_until > self.now;
                let h = &mut self.hosts[host];
                let Some(handler) = h.handlers.get_mut(&partition) else {
                    return;
                };
                if handler.session != session {
                    return;
                }
                let name = h.name.clone();
                let life = h.life;
                let lost = matches!(reason, StopReason::Lost(_));
                match (lost, handler.batch.is_some()) {
                    (false, true) => handler.draining = true,
                    (true, true) if !handler.lost => {
                        // Cancelled, but the handler does not look at its token: the
                        // call runs on until its batch ends or the grace is over.
                        handler.lost = true;
                        handler.stuck = stuck;
                        let stuck_for = if stuck {
                            self.rng.random_range(stop_timeout..=3 * stop_timeout)
                        } else {
                            0
                        };
                        let (running, epoch) = (handler.running, handler.epoch.0);
                        handler.running = false;
                        if running {
                            self.checker.halt(partition, host, self.now);
                            if let Some(t) = &mut self.timeline {
                                t.end(partition, host, self.now);
                            }
                        }
                        self.checker.linger(partition, host, epoch);
                        self.checker.stuck_calls += u64::from(stuck);
                        // The engine writes nothing more for this call: what it held
                        // back is judged from here, however long the call runs on.
                        if let Some(replay) = &mut self.replay {
                            replay.ended(host, partition, self.now);
                        }
                        self.push(
                            self.now + grace + stuck_for,
                            Event::Abort {
                                host,
                                life,
                                partition,
                                session,
                            },
                        );
                    }
                    (true, true) => {}
                    (_, false) => {
                        self.end_handler(host, partition);
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
            // A host that cannot run beside its group's documents shuts down; the
            // checker sees it leave like any other.
            Output::Refused(error) => {
                let name = self.hosts[host].name.clone();
                self.mark(format!("{name} refuses to run: {error}"));
            }
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

    /// Whether costs count now: from the disturbance to the heal, so that a warm-up
    /// (a cold start, say) and the settling after the heal stay out of the figures.
    pub(super) fn metered(&self) -> bool {
        let (from, to) = self.metered_window();
        (from..to).contains(&self.now)
    }

    fn metered_window(&self) -> (u64, u64) {
        (
            self.cfg.disturbance().as_millis(),
            self.cfg.heal_at().as_millis(),
        )
    }

    /// Adds a host's time up from `since` to `now`, as far as it lies in the window.
    pub(super) fn count_up(&mut self, since: u64, now: u64) {
        let (from, to) = self.metered_window();
        self.host_up_ms += now.min(to).saturating_sub(since.max(from));
    }

    fn finish(mut self) -> Finished {
        let now = self.now;
        for host in 0..self.hosts.len() {
            if let Some(since) = self.hosts[host].up_since {
                self.count_up(since, now);
            }
        }
        self.checker.finish(now);
        if let Some(t) = &mut self.timeline {
            t.finish(now);
        }
        let mut faults: Vec<(FaultKind, u64)> = self.fault_counts.into_iter().collect();
        faults.sort_unstable();
        // Each feed's own events: a child's inherited ones are its parent's.
        let events_produced = self.feeds.iter().map(|f| f.produced(now)).sum();
        Finished {
            trace_hash: self.trace.hash(),
            trace_events: self.trace.len(),
            tail: self.tail.unwrap_or_else(|| self.trace.tail()),
            checker: self.checker,
            requests: self.requests,
            ru: self.ru,
            by_purpose: self.by_purpose,
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

/// One host's engine as the engine's synchronous loop drives it in the world.
struct Feeding<'w> {
    world: &'w mut World,
    host: usize,
}

impl Driver<LeaseHost> for Feeding<'_> {
    fn step(&mut self, input: Input) -> Option<Stepped<LeaseHost>> {
        let h = &mut self.world.hosts[self.host];
        let now = h.clock.now(self.world.now);
        Some(drive::step(h.engine.as_mut()?, now, input))
    }

    fn send(&mut self, request: StoreRequest, _next: &mut VecDeque<Input>) {
        self.world.send(self.host, request);
    }

    fn output(&mut self, output: Output, next: &mut VecDeque<Input>) {
        self.world.on_output(self.host, output, next);
    }

    fn refused(&mut self, error: InputError) {
        self.world.refused(self.host, error);
    }
}
