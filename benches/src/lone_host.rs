//! One host alone with the reference store, driven in virtual time: the engine step
//! benchmark's workload.

use leasehold_engine::drive::{self, Driver, Stepped};
use leasehold_engine::lease::{Input, Intent, LeaseConfig, LeaseHost, Output, Record};
use leasehold_engine::store::Container;
use leasehold_engine::{
    Checkpoint, HostId, Incarnation, LeaseToken, LocalTime, Millis, Now, Request, Session, WallTime,
};
use std::collections::{BTreeMap, VecDeque};

/// A host that owns every lease of its store, with the sessions it is processing.
#[derive(Clone)]
pub struct LoneHost {
    host: LeaseHost,
    store: Container<Record>,
    processing: BTreeMap<LeaseToken, (Session, u64)>,
    now: u64,
    inputs: u64,
}

impl LoneHost {
    /// A host that has taken all `partitions` leases (CFP's intervals, `handoff`).
    ///
    /// ```
    /// let host = leasehold_benches::lone_host::LoneHost::owning(10);
    /// assert_eq!(host.processing(), 10);
    /// ```
    pub fn owning(partitions: usize) -> LoneHost {
        let config = LeaseConfig {
            prefix: "bench".into(),
            partitions: (0..partitions)
                .map(|p| LeaseToken::from(format!("{p:05}")))
                .collect(),
            ..LeaseConfig::default()
        };
        let host = LeaseHost::new(HostId::from("host-0"), config, Incarnation(0))
            .expect("the default intervals are valid");
        let mut lone = LoneHost {
            host,
            store: Container::new(),
            processing: BTreeMap::new(),
            now: 0,
            inputs: 0,
        };
        // Creation, acquisition and the observer's wait all fit in a few minutes.
        while lone.processing.len() < partitions && lone.now < 600_000 {
            lone.run_for(Millis::from_secs(1), Millis::from_secs(3_600));
        }
        lone
    }

    /// How many leases the host is processing.
    pub fn processing(&self) -> usize {
        self.processing.len()
    }

    /// Engine inputs handled so far.
    pub fn inputs(&self) -> u64 {
        self.inputs
    }

    /// Runs `span` of virtual time: a tick every 100 ms, every reply at once, and a
    /// checkpoint from each lease's handler every `checkpoint_every`.
    pub fn run_for(&mut self, span: Millis, checkpoint_every: Millis) {
        let end = self.now + span.as_millis();
        while self.now < end {
            self.now += 100;
            self.input(Input::Tick);
            let due: Vec<(LeaseToken, Session, u64)> = self
                .processing
                .iter()
                .filter(|(_, (_, since))| self.now - since >= checkpoint_every.as_millis())
                .map(|(lease, (session, _))| (lease.clone(), *session, self.now))
                .collect();
            for (lease, session, at) in due {
                self.processing.insert(lease.clone(), (session, at));
                self.input(Input::Checkpoint {
                    lease,
                    session,
                    checkpoint: Checkpoint::from(at.to_string()),
                    items: 1,
                });
            }
        }
    }

    fn input(&mut self, first: Input) {
        // A bench input the engine refuses (a checkpoint racing a stop) is part of the
        // workload, not an error of the harness.
        let _ = drive::feed(self, [first]);
    }
}

impl Driver<LeaseHost> for LoneHost {
    fn step(&mut self, input: Input) -> Option<Stepped<LeaseHost>> {
        let now = Now::new(LocalTime(self.now), WallTime(self.now as i64));
        self.inputs += 1;
        Some(drive::step(&mut self.host, now, input))
    }

    fn send(&mut self, request: Request<Record, Intent>, next: &mut VecDeque<Input>) {
        next.push_back(Input::Response {
            id: request.id,
            result: self.store.execute(request.op),
        });
    }

    fn output(&mut self, output: Output, next: &mut VecDeque<Input>) {
        match output {
            Output::Start { lease, session, .. } => {
                self.processing.insert(lease, (session, self.now));
            }
            Output::Stop { lease, session, .. } => {
                self.processing.remove(&lease);
                next.push_back(Input::Stopped { lease, session });
            }
            _ => {}
        }
    }
}
