//! A tiny deterministic driver for host tests: hosts, the reference store, and a
//! queue of requests in flight. Time only moves when a test says so.
#![allow(dead_code)]

use leasehold_engine::lease::{
    Input, InputError, Intent, LeaseConfig, LeaseHost, Liveness, Output, Record, StoreRequest,
};
use leasehold_engine::store::{Container, Reply, StoreError};
use leasehold_engine::{
    Checkpoint, Drift, Epoch, ExpiryPolicy, Incarnation, LeaseToken, LocalTime, Millis, Now,
    Session, WallTime,
};
use std::collections::{BTreeMap, VecDeque};

/// Short intervals that keep test timelines readable: expiration 10 s, renew 3 s,
/// acquire 2 s, drift 1 %, margin 0.5 s. Authority lasts 9.4 s; observers wait 10.1 s.
pub fn config(partitions: usize) -> LeaseConfig {
    LeaseConfig {
        prefix: "t".into(),
        partitions: (0..partitions)
            .map(|p| LeaseToken::from(p.to_string()))
            .collect(),
        expiry: ExpiryPolicy {
            duration: Millis::from_secs(10),
            drift: Drift::ppm(10_000),
            safety_margin: Millis(500),
            ..ExpiryPolicy::default()
        },
        renew_interval: Millis::from_secs(3),
        acquire_interval: Millis::from_secs(2),
        // These scenarios follow each lease's own renewals; session liveness has its
        // own (tests/session_liveness.rs).
        liveness: Some(Liveness::Lease),
        ..LeaseConfig::default()
    }
}

/// The same settings under session liveness: the heartbeat renews every lease.
pub fn session_config(partitions: usize) -> LeaseConfig {
    LeaseConfig {
        liveness: Some(Liveness::Session),
        ..config(partitions)
    }
}

pub struct Node {
    pub host: LeaseHost,
    /// local clock = true time + offset (no drift here; the model adds drift).
    pub local_offset: u64,
    /// wall clock = base + true time + offset.
    pub wall_offset: i64,
    /// Leases the handler is processing, from Start/Stop outputs.
    pub processing: BTreeMap<LeaseToken, Epoch>,
    /// The latest session started for each lease.
    pub sessions: BTreeMap<LeaseToken, Session>,
    /// When false, the store answers this host's requests with 503 without applying them.
    pub reachable: bool,
    /// When true, the handler acknowledges a release or shutdown stop at once.
    pub auto_ack: bool,
}

pub struct Cluster {
    pub store: Container<Record>,
    pub nodes: BTreeMap<String, Node>,
    pub inflight: VecDeque<(String, StoreRequest)>,
    /// Every request ever sent, with its sender and true send time.
    pub sent: Vec<(u64, String, StoreRequest)>,
    /// Every other output, with its true time.
    pub events: Vec<(u64, String, Output)>,
    /// True time in milliseconds.
    pub time: u64,
}

const WALL_BASE: i64 = 1_700_000_000_000;

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

impl Cluster {
    pub fn new() -> Cluster {
        Cluster {
            store: Container::new(),
            nodes: BTreeMap::new(),
            inflight: VecDeque::new(),
            sent: Vec::new(),
            events: Vec::new(),
            time: 0,
        }
    }

    pub fn add(&mut self, name: &str, config: LeaseConfig) {
        self.add_with_clocks(name, config, 1_000_000, 0);
    }

    pub fn add_with_clocks(&mut self, name: &str, config: LeaseConfig, local: u64, wall: i64) {
        let host = LeaseHost::new(name.into(), config, Incarnation(0)).expect("valid config");
        self.nodes.insert(
            name.to_string(),
            Node {
                host,
                local_offset: local,
                wall_offset: wall,
                processing: BTreeMap::new(),
                sessions: BTreeMap::new(),
                reachable: true,
                auto_ack: true,
            },
        );
        self.input(name, Input::Tick).unwrap();
    }

    /// Replaces a host by a fresh incarnation with the same name (a crash and restart):
    /// volatile state and requests in flight are lost.
    pub fn restart(&mut self, name: &str) {
        let node = self.nodes.get_mut(name).unwrap();
        let config = node.host.config().clone();
        let next = Incarnation(node.host.incarnation().0 + 1);
        node.host = LeaseHost::new(name.into(), config, next).unwrap();
        node.processing.clear();
        self.inflight.retain(|(n, _)| n != name);
        self.input(name, Input::Tick).unwrap();
    }

    /// Removes a host without any goodbye (a crash).
    pub fn crash(&mut self, name: &str) {
        self.nodes.remove(name);
        self.inflight.retain(|(n, _)| n != name);
    }

    pub fn now(&self, name: &str) -> Now {
        let node = &self.nodes[name];
        Now::new(
            LocalTime(self.time + node.local_offset),
            WallTime(WALL_BASE + self.time as i64 + node.wall_offset),
        )
    }

    pub fn input(&mut self, name: &str, input: Input) -> Result<(), InputError> {
        let now = self.now(name);
        self.nodes
            .get_mut(name)
            .unwrap()
            .host
            .handle_input(now, input)?;
        self.collect(name);
        Ok(())
    }

    fn collect(&mut self, name: &str) {
        let mut acks = Vec::new();
        while let Some(output) = self.nodes.get_mut(name).unwrap().host.poll_output() {
            match output {
                Output::Request(req) => {
                    self.sent.push((self.time, name.to_string(), req.clone()));
                    self.inflight.push_back((name.to_string(), req));
                }
                other => {
                    let node = self.nodes.get_mut(name).unwrap();
                    match &other {
                        Output::Start {
                            lease,
                            epoch,
                            session,
                            ..
                        } => {
                            node.processing.insert(lease.clone(), *epoch);
                            node.sessions.insert(lease.clone(), *session);
                        }
                        Output::Stop { lease, session, .. } => {
                            node.processing.remove(lease);
                            // The handler's call ends as soon as it is told: lost or
                            // not, it reports that it has stopped.
                            if node.auto_ack {
                                acks.push(Input::Stopped {
                                    lease: lease.clone(),
                                    session: *session,
                                });
                            }
                        }
                        _ => {}
                    }
                    self.events.push((self.time, name.to_string(), other));
                }
            }
        }
        self.check_exclusive();
        for ack in acks {
            self.input(name, ack).unwrap();
        }
    }

    /// No two hosts hold processing authority for one lease at this true time.
    pub fn check_exclusive(&self) {
        // Keyed by document id: two processor groups may both have a lease "0".
        let mut holders: BTreeMap<&leasehold_engine::DocId, Vec<&str>> = BTreeMap::new();
        for (name, node) in &self.nodes {
            let local = self.now(name).local;
            for state in node.host.leases() {
                if node.host.authority(&state.doc.token, local).is_some() {
                    holders.entry(&state.doc.id).or_default().push(name);
                }
            }
        }
        for (lease, hosts) in holders {
            assert!(
                hosts.len() <= 1,
                "at {} ms lease {lease} is held by {hosts:?}",
                self.time
            );
        }
    }

    /// Answers one request: applies it to the store, or 503 if the sender is cut off.
    pub fn deliver_next(&mut self) -> bool {
        let Some((name, req)) = self.inflight.pop_front() else {
            return false;
        };
        let result = if self.nodes[&name].reachable {
            self.store.execute(req.op)
        } else {
            Err(StoreError::Unavailable)
        };
        self.input(&name, Input::Response { id: req.id, result })
            .unwrap();
        true
    }

    /// Answers every request `name` has on the wire from the store, however many its
    /// answers prompt, leaving the other hosts' requests where they are.
    pub fn serve(&mut self, name: &str) {
        while let Some(at) = self.inflight.iter().position(|(n, _)| n == name) {
            let (_, req) = self.inflight.remove(at).unwrap();
            let result = self.store.execute(req.op.clone());
            self.answer(name, &req, result);
        }
    }

    pub fn deliver_all(&mut self) {
        let mut budget = 100_000;
        while self.deliver_next() {
            budget -= 1;
            assert!(budget > 0, "requests never stop flowing");
        }
    }

    /// Takes the oldest request in flight from `name` with `intent` out of the queue.
    pub fn intercept(&mut self, name: &str, intent: Intent) -> StoreRequest {
        let at = self
            .inflight
            .iter()
            .position(|(n, r)| n == name && r.intent == intent)
            .unwrap_or_else(|| panic!("{name} has no {intent:?} in flight: {:?}", self.inflight));
        self.inflight.remove(at).unwrap().1
    }

    /// Answers an intercepted request with a chosen result.
    pub fn answer(
        &mut self,
        name: &str,
        req: &StoreRequest,
        result: Result<Reply<Record>, StoreError>,
    ) {
        self.input(name, Input::Response { id: req.id, result })
            .unwrap();
    }

    /// Lets `ms` of true time pass, waking each host when it asked and answering
    /// every request at once.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.time + ms;
        let mut spins = 0;
        loop {
            self.deliver_all();
            let next = self
                .nodes
                .iter()
                .filter_map(|(name, node)| {
                    let wake = node.host.poll_timeout()?;
                    Some((wake.as_millis() - node.local_offset, name.clone()))
                })
                .min();
            let Some((at, name)) = next.filter(|(at, _)| *at <= end) else {
                break;
            };
            if at <= self.time {
                spins += 1;
                assert!(
                    spins < 1_000,
                    "{name} asks to be woken now, again and again"
                );
            } else {
                spins = 0;
            }
            self.time = self.time.max(at);
            self.input(&name, Input::Tick).unwrap();
        }
        self.time = end;
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for name in names {
            self.input(&name, Input::Tick).unwrap();
        }
        self.deliver_all();
    }

    /// Which host processes each lease right now.
    pub fn assignment(&self) -> BTreeMap<LeaseToken, String> {
        let mut out = BTreeMap::new();
        for (name, node) in &self.nodes {
            for lease in node.processing.keys() {
                assert!(
                    out.insert(lease.clone(), name.clone()).is_none(),
                    "{lease} is processed twice"
                );
            }
        }
        out
    }

    pub fn count(&self, name: &str) -> usize {
        self.nodes[name].processing.len()
    }

    /// The stored lease document of `token`.
    pub fn lease(&self, token: &str) -> leasehold_engine::lease::LeaseDocument {
        self.store
            .iter()
            .find_map(|s| match &s.doc {
                Record::Lease(d) if d.token.as_str() == token => Some(d.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no lease {token}"))
    }

    /// When `name` last sent a write that would renew its authority (an acquire or
    /// an owner's write), before true time `before`.
    pub fn last_write(&self, name: &str, before: u64) -> u64 {
        self.sent
            .iter()
            .filter(|(t, n, r)| {
                n == name
                    && *t < before
                    && (r.intent == Intent::Acquire || r.intent.is_owner_write())
            })
            .map(|(t, _, _)| *t)
            .max()
            .unwrap_or_else(|| panic!("{name} wrote nothing before {before}"))
    }

    /// When `name` first sent a request with `intent`.
    pub fn first_sent(&self, name: &str, intent: Intent) -> u64 {
        self.sent
            .iter()
            .find(|(_, n, r)| n == name && r.intent == intent)
            .map(|(t, _, _)| *t)
            .unwrap_or_else(|| panic!("{name} never sent {intent:?}"))
    }

    /// The latest processing session `name` started for `lease`.
    pub fn session(&self, name: &str, lease: &str) -> Session {
        self.nodes[name].sessions[&LeaseToken::from(lease)]
    }

    /// `name`'s handler reports a checkpoint in its latest session of `lease`.
    pub fn checkpoint(&mut self, name: &str, lease: &str, value: &str) -> Result<(), InputError> {
        self.checkpoint_items(name, lease, value, 1)
    }

    /// `name`'s handler reports a checkpoint of `lease` after finishing `items` items.
    pub fn checkpoint_items(
        &mut self,
        name: &str,
        lease: &str,
        value: &str,
        items: u32,
    ) -> Result<(), InputError> {
        let input = Input::Checkpoint {
            lease: LeaseToken::from(lease),
            session: self.session(name, lease),
            checkpoint: Checkpoint::from(value),
            items,
        };
        self.input(name, input)
    }

    /// `name`'s handler reports that its call for `lease` has ended after a stop.
    pub fn stopped(&mut self, name: &str, lease: &str) {
        let input = Input::Stopped {
            lease: LeaseToken::from(lease),
            session: self.session(name, lease),
        };
        self.input(name, input).unwrap();
    }

    /// The stored lease document with id `id`.
    pub fn lease_by_id(&self, id: &str) -> leasehold_engine::lease::LeaseDocument {
        self.store
            .iter()
            .find_map(|s| match &s.doc {
                Record::Lease(d) if d.id.as_str() == id => Some(d.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no lease document {id}"))
    }

    pub fn events_of(&self, name: &str) -> Vec<&Output> {
        self.events
            .iter()
            .filter(|(_, n, _)| n == name)
            .map(|(_, _, o)| o)
            .collect()
    }

    /// Whether `name` has told its driver its shutdown is complete.
    pub fn has_shut_down(&self, name: &str) -> bool {
        self.events_of(name).contains(&&Output::ShutdownComplete)
    }
}
