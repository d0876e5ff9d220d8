//! What one simulated run is: a scenario, its sizes and faults, and the protocol's
//! settings. Every field has a scenario default and can be overridden.

pub use super::error::SimError;
use super::faults::{FaultKind, Faults};
use super::flags::{duration, opt_duration, opt_text, text};
use super::workload::Workload;
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::{CheckpointPolicy, LeaseConfig, Liveness};
use leasehold_engine::{Drift, ExpiryPolicy, ExpiryRule, LeaseToken, Millis};
use leasehold_model::Bug;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A named situation, with sensible defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// All hosts start together and stay; convergence counts from the start.
    Steady,
    /// `--from` hosts run, then the rest join at the disturbance.
    ScaleOut,
    /// All hosts run, then `--affected` of them shut down gracefully.
    ScaleIn,
    /// A Kubernetes rollout: every `--interval`, one host is replaced by a new one
    /// with a new name (the new one starts, then the old one shuts down).
    RollingRestart,
    /// `--affected` hosts die at the disturbance and stay dead.
    Crash,
    /// One host crashes every `--interval` and comes back 20 s later.
    FlappingHost,
    /// Clocks are offset, drift and jump.
    SkewedClocks,
    /// The store throttles and its latency spikes.
    ThrottledStore,
    /// Partition 0 receives 50 times the events of the others.
    HotPartition,
}

impl Scenario {
    /// Every scenario, in the order the CLI lists them.
    pub const ALL: [Scenario; 9] = [
        Scenario::Steady,
        Scenario::ScaleOut,
        Scenario::ScaleIn,
        Scenario::RollingRestart,
        Scenario::Crash,
        Scenario::FlappingHost,
        Scenario::SkewedClocks,
        Scenario::ThrottledStore,
        Scenario::HotPartition,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::ScaleOut => "scale-out",
            Scenario::ScaleIn => "scale-in",
            Scenario::RollingRestart => "rolling-restart",
            Scenario::Crash => "crash",
            Scenario::FlappingHost => "flapping-host",
            Scenario::SkewedClocks => "skewed-clocks",
            Scenario::ThrottledStore => "throttled-store",
            Scenario::HotPartition => "hot-partition",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| SimError::UnknownScenario(s.to_string()))
    }
}

/// The simulated network between hosts and the store.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Network {
    /// One-way latency, drawn uniformly from this range (ms).
    pub latency_ms: (u64, u64),
    /// One request in this many gets a tail latency of 20–200 ms more.
    pub tail_one_in: u32,
    /// A request with no answer after this long times out (its outcome unknown).
    pub request_timeout: Millis,
}

impl Network {
    /// One request's one-way latency: the base range, a tail for one request in
    /// `tail_one_in`, plus `extra` (a spike), in ms.
    pub fn draw_latency(&self, rng: &mut impl rand::Rng, extra: u64) -> u64 {
        let (lo, hi) = self.latency_ms;
        let mut ms = rng.random_range(lo..=hi);
        if self.tail_one_in > 0 && rng.random_ratio(1, self.tail_one_in) {
            ms += rng.random_range(20..=200);
        }
        ms + extra
    }
}

impl Default for Network {
    fn default() -> Self {
        Network {
            latency_ms: (2, 10),
            tail_one_in: 100,
            request_timeout: Millis::from_secs(5),
        }
    }
}

/// One run of the simulator. It serializes under the flags' names, each value as its
/// flag takes it ([`super::flags`]): the command line is laid over a scenario's
/// defaults through it, and the replay command is read from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SimConfig {
    /// The scenario.
    pub scenario: Scenario,
    /// The seed every random choice derives from.
    pub seed: u64,
    /// Hosts at full strength.
    pub hosts: u32,
    /// Partitions, one lease each.
    pub partitions: u32,
    /// Scale-out: hosts before the disturbance.
    pub from: u32,
    /// Scale-in and crash: hosts that leave.
    pub affected: u32,
    /// Rolling restart: time between replacements; flapping host: time between crashes.
    #[serde(with = "duration")]
    pub interval: Millis,
    /// Time before the disturbance, for the initial assignment to settle.
    #[serde(with = "duration")]
    pub warmup: Millis,
    /// Time from the disturbance until faults heal and the source stops.
    #[serde(with = "duration")]
    pub duration: Millis,
    /// Time after the heal by which the work must have settled (the liveness
    /// deadline); `None`: a bound computed from the intervals and sizes.
    #[serde(with = "opt_duration")]
    pub settle: Option<Millis>,
    /// The balancing strategy.
    #[serde(with = "text")]
    pub strategy: Strategy,
    /// Where authority comes from; `None` is the strategy's default.
    #[serde(with = "opt_text")]
    pub liveness: Option<Liveness>,
    /// Under session liveness, how often the group reads the whole table.
    #[serde(with = "duration")]
    pub audit: Millis,
    /// The expiry rule.
    #[serde(with = "text")]
    pub expiry: ExpiryRule,
    /// Lease expiration.
    #[serde(with = "duration")]
    pub expiration: Millis,
    /// Renew interval.
    #[serde(with = "duration")]
    pub renew: Millis,
    /// Acquire (scan) interval.
    #[serde(with = "duration")]
    pub acquire: Millis,
    /// The drift bound the hosts assume (ppm); clocks drifting beyond it break the
    /// protocol's assumption.
    #[serde(rename = "drift-bound")]
    pub drift_bound_ppm: u32,
    /// How much earlier than strictly needed a host gives up its authority.
    #[serde(with = "duration")]
    pub margin: Millis,
    /// Rolling restart: the lease expiration the new build runs with; `None`: the
    /// same as the old one's.
    #[serde(with = "opt_duration", default)]
    pub deploy_expiration: Option<Millis>,
    /// How long a host told to shut down processes on after announcing its leave
    /// (`None`: the engine's default, [`LeaseConfig::leave_notice`]).
    #[serde(with = "opt_duration", default)]
    pub leave_notice: Option<Millis>,
    /// Checkpoints written at most once per this interval (`None`: after every batch).
    #[serde(with = "opt_duration", default)]
    pub checkpoint_every: Option<Millis>,
    /// Checkpoints written once this many events have been finished since the last
    /// one written (`None`: after every batch, or by `checkpoint_every`).
    #[serde(default)]
    pub checkpoint_items: Option<u32>,
    /// Rolling restart: whether each new pod takes a new name (as a Deployment's do)
    /// or its predecessor's, once that one has stopped (as a StatefulSet's do).
    #[serde(with = "text", default)]
    pub names: Names,
    /// Faults and their rates.
    #[serde(with = "text")]
    pub faults: Faults,
    /// The source and the handler's costs.
    #[serde(flatten)]
    pub workload: Workload,
    /// The network; no flag sets it.
    #[serde(skip)]
    pub network: Network,
    /// How many trace events a violation report shows.
    #[serde(rename = "trace")]
    pub trace_keep: usize,
    /// A known-bad variant of the protocol (the model checker's), to show that the
    /// checks catch what it breaks.
    #[serde(with = "opt_text")]
    pub bug: Option<Bug>,
}

/// Parses a strategy name, one of the engine's (`cfp`, `handoff`, ...).
pub fn parse_strategy(name: &str) -> Result<Strategy, SimError> {
    let name = name.trim();
    Ok(name.parse::<Strategy>()?)
}

/// Parses one entry of a strategy list: a strategy, optionally with its liveness
/// after a colon (`handoff:lease`), so that both protocols run side by side.
pub fn parse_strategy_spec(spec: &str) -> Result<(Strategy, Option<Liveness>), SimError> {
    let (name, liveness) = match spec.trim().split_once(':') {
        Some((name, liveness)) => (name, Some(liveness)),
        None => (spec, None),
    };
    let strategy = parse_strategy(name)?;
    let liveness = liveness.map(|l| l.trim().parse::<Liveness>()).transpose()?;
    Ok((strategy, liveness))
}

impl SimConfig {
    /// The strategy's name, with the liveness when one was set explicitly
    /// (`handoff:lease`): how reports, timelines and replays name the run.
    pub fn label(&self) -> String {
        match self.liveness {
            Some(l) => format!("{}:{l}", self.strategy.name()),
            None => self.strategy.name().to_string(),
        }
    }

    /// The defaults of `scenario`: 10 hosts, 100 partitions, the change feed
    /// processor's intervals (expiration 60 s, renew 17 s, acquire 13 s), 10 minutes
    /// of disturbance.
    pub fn scenario(scenario: Scenario, seed: u64) -> SimConfig {
        let mut config = SimConfig {
            scenario,
            seed,
            hosts: 10,
            partitions: 100,
            from: 1,
            affected: 3,
            interval: Millis::from_secs(60),
            // The change feed processor's one steal per cycle needs about three minutes
            // to balance 100 leases over 10 hosts from a cold start.
            warmup: Millis::from_secs(300),
            duration: Millis::from_secs(600),
            settle: None,
            strategy: Strategy::Handoff,
            liveness: None,
            audit: Millis::from_secs(300),
            expiry: ExpiryRule::Observed,
            expiration: Millis::from_secs(60),
            renew: Millis::from_secs(17),
            acquire: Millis::from_secs(13),
            drift_bound_ppm: 10_000,
            margin: ExpiryPolicy::default().safety_margin,
            deploy_expiration: None,
            leave_notice: None,
            checkpoint_every: None,
            checkpoint_items: None,
            names: Names::New,
            faults: Faults::NONE,
            workload: Workload::default(),
            network: Network::default(),
            trace_keep: 40,
            bug: None,
        };
        match scenario {
            Scenario::Steady => config.warmup = Millis::ZERO,
            Scenario::ScaleIn => config.affected = 5,
            Scenario::FlappingHost => config.interval = Millis::from_secs(90),
            Scenario::SkewedClocks => {
                config.faults = Faults::NONE
                    .with(FaultKind::Skew, 30.0)
                    .with(FaultKind::Drift, 5_000.0)
                    .with(FaultKind::Jump, 2.0);
            }
            Scenario::ThrottledStore => {
                config.faults = Faults::NONE
                    .with(FaultKind::Throttle, 20.0)
                    .with(FaultKind::Spike, 10.0);
            }
            Scenario::HotPartition => config.workload.hot_factor = 50.0,
            Scenario::ScaleOut | Scenario::RollingRestart | Scenario::Crash => {}
        }
        config
    }

    /// The lease settings every host runs with.
    pub fn lease_config(&self) -> Result<LeaseConfig, SimError> {
        let mut expiry = ExpiryPolicy {
            rule: self.expiry,
            duration: self.expiration,
            drift: Drift::ppm(self.drift_bound_ppm),
            safety_margin: self.margin,
        };
        // The variants that change settings rather than the wire, as in the model.
        match self.bug {
            Some(Bug::TimestampSkew) => {
                expiry.rule = ExpiryRule::Timestamp;
                expiry.safety_margin = Millis::ZERO;
            }
            Some(Bug::ThinMargin) => {
                expiry.drift = Drift::ppm(0);
                expiry.safety_margin = Millis(1);
            }
            _ => {}
        }
        let config = LeaseConfig {
            prefix: "sim".into(),
            partitions: self.tokens(),
            expiry,
            renew_interval: self.renew,
            acquire_interval: self.acquire,
            strategy: self.strategy,
            stop_timeout: self.expiration,
            leave_notice: self.leave_notice,
            liveness: self.liveness,
            audit_interval: self.audit,
            checkpoint: self.checkpoint_policy()?,
            known_bad: self.bug.and_then(Bug::known_bad),
        };
        config.validate().map_err(SimError::Lease)?;
        Ok(config)
    }

    /// The lease settings of the new build a rolling restart deploys: the old
    /// build's, with the deploy's expiration if it has one.
    pub fn deployed_config(&self) -> Result<LeaseConfig, SimError> {
        let mut config = self.lease_config()?;
        if let Some(expiration) = self.deploy_expiration {
            config.expiry.duration = expiration;
            config.stop_timeout = expiration;
            config.validate().map_err(SimError::Lease)?;
        }
        Ok(config)
    }

    /// The partitions' lease tokens.
    pub fn tokens(&self) -> Vec<LeaseToken> {
        let width = self.partitions.saturating_sub(1).to_string().len();
        (0..self.partitions)
            .map(|p| LeaseToken::from(format!("p{p:0width$}")))
            .collect()
    }

    /// When the disturbance happens.
    pub fn disturbance(&self) -> Millis {
        self.warmup
    }

    /// When the faults heal and the source stops.
    pub fn heal_at(&self) -> Millis {
        self.warmup + self.duration
    }

    /// When the scenario's last scripted change happens (a rollout may run past the
    /// heal).
    pub fn last_change(&self) -> Millis {
        match self.scenario {
            Scenario::RollingRestart => {
                let rollout = self.interval.as_millis() * u64::from(self.hosts.saturating_sub(1));
                self.warmup + Millis(rollout + 5_000)
            }
            _ => self.warmup,
        }
    }

    /// The liveness deadline: the settle time after the heal or the last scripted
    /// change, whichever is later.
    pub fn deadline(&self) -> Millis {
        self.heal_at().max(self.last_change()) + self.settle()
    }

    /// How long after the heal the work must have settled. The default allows two
    /// expirations (a crashed owner's lease expiring, plus the drift allowance and a
    /// lost write), then one acquire interval per lease a host may need to take (the
    /// change feed processor takes one per cycle), then a few more cycles. The share
    /// is of the hosts that remain: after a scale-in or a crash, the rest take over
    /// the leavers' leases one per cycle (counting every host here gave cfp too few
    /// cycles; the long swarm's four cfp liveness violations were that). Expirations
    /// count at the longer of the old and the deployed build's; with splits there is
    /// one more, and with stuck handlers another.
    pub fn settle(&self) -> Millis {
        self.settle.unwrap_or_else(|| {
            let leaving = match self.scenario {
                Scenario::ScaleIn | Scenario::Crash => self.affected.min(self.hosts - 1),
                _ => 0,
            };
            let hosts = u64::from((self.hosts - leaving).max(1));
            let share = u64::from(self.partitions).div_ceil(hosts);
            // After a deploy that changed it, the longer expiration: a lease written
            // under it is waited out under it, by old and new hosts alike.
            let expiration = self
                .deploy_expiration
                .map_or(self.expiration, |d| d.max(self.expiration))
                .as_millis();
            // A split's children are found only once the parent is processed again,
            // possibly after the heal, and balanced by steals that each wait an
            // expiration out (the swarm's seed 1004479: two such waits in a row).
            let split = u64::from(self.faults.get(FaultKind::Split) > 0.0);
            // A call stuck in blocking code as the faults heal holds its lease back
            // for its host's stop timeout (an expiration here) before the engine
            // gives it up.
            let stuck = u64::from(self.faults.get(FaultKind::Stuck) > 0.0);
            let expirations = 2 + split + stuck;
            let expiry = expiration * expirations + expiration / 10;
            Millis(expiry + self.acquire.as_millis() * (share + 4) + self.renew.as_millis())
        })
    }

    /// The checkpoint policy the hosts run: one of `--checkpoint-every` and
    /// `--checkpoint-items`, or every batch.
    pub fn checkpoint_policy(&self) -> Result<CheckpointPolicy, SimError> {
        match (self.checkpoint_every, self.checkpoint_items) {
            (None, None) => Ok(CheckpointPolicy::EveryBatch),
            (Some(every), None) => Ok(CheckpointPolicy::AtMostEvery(every)),
            (None, Some(n)) => Ok(CheckpointPolicy::AtMostEveryItems(n)),
            (Some(_), Some(_)) => Err(SimError::Size(
                "give one of --checkpoint-every and --checkpoint-items, not both",
            )),
        }
    }

    /// Checks that the run makes sense.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.hosts == 0 || self.hosts > 10_000 {
            return Err(SimError::Size("--hosts must be 1 to 10,000"));
        }
        if self.partitions == 0 || self.partitions > 1_000_000 {
            return Err(SimError::Size("--partitions must be 1 to 1,000,000"));
        }
        if self.scenario == Scenario::ScaleOut && (self.from == 0 || self.from >= self.hosts) {
            return Err(SimError::Size(
                "scale-out needs 1 <= --from < --hosts (hosts before and after)",
            ));
        }
        if matches!(self.scenario, Scenario::ScaleIn | Scenario::Crash)
            && (self.affected == 0 || self.affected >= self.hosts)
        {
            return Err(SimError::Size(
                "scale-in and crash need 1 <= --affected < --hosts (someone must remain)",
            ));
        }
        if self.interval == Millis::ZERO {
            return Err(SimError::Size("--interval must be above 0"));
        }
        if self.duration == Millis::ZERO {
            return Err(SimError::Size("--duration must be above 0"));
        }
        let w = &self.workload;
        if !(w.rate.is_finite() && w.rate >= 0.0 && w.hot_factor.is_finite() && w.hot_factor > 0.0)
        {
            return Err(SimError::Size(
                "--rate must be a number >= 0 and the hot factor above 0",
            ));
        }
        if w.max_batch == 0 || w.poll == Millis::ZERO {
            return Err(SimError::Size("--max-batch and --poll must be above 0"));
        }
        let (lo, hi) = self.network.latency_ms;
        if lo > hi || self.network.request_timeout == Millis::ZERO {
            return Err(SimError::Size(
                "the latency range must be ordered and the request timeout above 0",
            ));
        }
        self.deployed_config().map(|_| ())
    }
}

/// What a rolling restart names its new pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Names {
    /// A new name each (a Deployment's pods), started before the old pod stops.
    #[default]
    New,
    /// The name of the pod it replaces (a StatefulSet's), started once that one has
    /// stopped.
    Reuse,
}

impl fmt::Display for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Names::New => "new",
            Names::Reuse => "reuse",
        })
    }
}

impl std::str::FromStr for Names {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Names, SimError> {
        match s {
            "new" => Ok(Names::New),
            "reuse" => Ok(Names::Reuse),
            _ => Err(SimError::Size("--names must be new or reuse")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_default_is_valid() {
        for scenario in Scenario::ALL {
            let config = SimConfig::scenario(scenario, 1);
            assert_eq!(config.validate(), Ok(()), "{scenario}");
            assert_eq!(config.name_round_trip(), scenario);
        }
    }

    #[test]
    fn impossible_runs_are_typed_errors() {
        let mut config = SimConfig::scenario(Scenario::ScaleOut, 1);
        config.from = 10;
        assert!(matches!(config.validate(), Err(SimError::Size(_))));
        let mut config = SimConfig::scenario(Scenario::Steady, 1);
        config.renew = Millis::from_secs(90);
        assert!(matches!(config.validate(), Err(SimError::Lease(_))));
        assert!(matches!(
            "meteor".parse::<Scenario>(),
            Err(SimError::UnknownScenario(_))
        ));
        assert!(matches!(
            parse_strategy("greedy"),
            Err(SimError::UnknownStrategy(_))
        ));
    }

    impl SimConfig {
        fn name_round_trip(&self) -> Scenario {
            self.scenario.name().parse().unwrap()
        }
    }
}
