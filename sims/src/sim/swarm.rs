//! Swarm testing: each seed draws its own scenario, sizes, strategy and mix of
//! faults, so that many seeds cover combinations no one thought to write down.

use super::config::{Scenario, SimConfig, SimError};
use super::faults::{FaultKind, Faults};
use super::queue::{QueueConfig, QueueScenario, replay_command as queue_replay, simulate_queue};
use super::{replay_command, simulate};
use leasehold_engine::Millis;
use leasehold_engine::balance::{CfpConfig, Strategy};
use leasehold_engine::lease::Liveness;
use leasehold_model::{Bug, LockBug, LockKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

/// The run seed `seed` stands for: a small cluster, a random scenario, strategy and
/// fault mix. Every fault kind is on in some seeds.
pub fn draw(seed: u64) -> SimConfig {
    // A different stream than the run's own, so that the draw does not shift it.
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5157_4152_4d00_0000);
    let scenario = Scenario::ALL[rng.random_range(0..Scenario::ALL.len())];
    let mut cfg = SimConfig::scenario(scenario, seed);
    cfg.hosts = rng.random_range(2..=6);
    cfg.partitions = rng.random_range(4..=32);
    cfg.from = rng.random_range(1..cfg.hosts);
    cfg.affected = rng.random_range(1..cfg.hosts);
    cfg.interval = Millis::from_secs(rng.random_range(30..=90));
    cfg.warmup = Millis::from_secs(if scenario == Scenario::Steady { 0 } else { 60 });
    cfg.duration = Millis::from_secs(rng.random_range(180..=480));
    cfg.strategy = if rng.random_bool(0.5) {
        Strategy::Handoff
    } else {
        Strategy::Cfp(CfpConfig::default())
    };
    cfg.faults = draw_faults(&mut rng, cfg.faults);
    cfg.trace_keep = 30;
    // Drawn last, so that the draws above stay what they were before this was added.
    if rng.random_bool(0.25) {
        cfg.drift_bound_ppm = widen_drift(&mut cfg.faults);
    }
    // Half the handoff runs renew through the host's session (its default), half
    // lease by lease. Drawn after everything else, for the same reason as the drift.
    let session = rng.random_bool(0.5);
    if cfg.strategy == Strategy::Handoff {
        cfg.liveness = Some(if session {
            Liveness::Session
        } else {
            Liveness::Lease
        });
    }
    // Splits, drawn last for the same reason: one seed in four splits ranges, 10 to
    // 60 times an hour.
    if rng.random_bool(0.25) {
        cfg.faults
            .set(FaultKind::Split, rng.random_range(10..=60) as f64);
    }
    // Cosmos DB's own faults, drawn last for the same reason.
    draw_cosmos_faults(&mut rng, &mut cfg.faults);
    // Deploys, drawn last for the same reason: one seed in four has zombies (a host
    // believed dead acts on while a new life starts under its name), and a rolling
    // restart reuses its pods' names half the time and changes the expiration half
    // the time (30 s to 2 min: old and new hosts then meet with different settings).
    if rng.random_bool(0.25) {
        cfg.faults
            .set(FaultKind::Zombie, rng.random_range(2..=20) as f64);
    }
    if rng.random_bool(0.5) {
        cfg.names = super::config::Names::Reuse;
    }
    if rng.random_bool(0.5) {
        let expiration = Millis::from_secs(rng.random_range(30..=120));
        // The renew interval stays below the new build's authority.
        if expiration.as_millis() > cfg.renew.as_millis() * 2 {
            cfg.deploy_expiration = Some(expiration);
        }
    }
    // The checkpoint policy, drawn last for the same reason: one seed in three
    // checkpoints at most every 2 to 60 s rather than after every batch.
    if rng.random_bool(1.0 / 3.0) {
        cfg.checkpoint_every = Some(Millis::from_secs(rng.random_range(2..=60)));
    } else if rng.random_bool(0.25) {
        // One in six: at most every 2 to 50 events.
        cfg.checkpoint_items = Some(rng.random_range(2..=50));
    }
    // The leave notice, drawn last for the same reason: one seed in four leaves at
    // once (as every host did before the notice), or after 0.5 to 20 s, shorter or
    // longer than the others' interval; the rest run the engine's default.
    if rng.random_bool(0.25) {
        let notice = match rng.random_range(0..3) {
            0 => 0,
            _ => rng.random_range(500..=20_000),
        };
        cfg.leave_notice = Some(Millis(notice));
    }
    // Handlers stuck in blocking code, drawn last for the same reason: one seed in
    // four, 10 to 60 windows per host per hour (a host's handlers are then stuck a
    // tenth to half of the time, since few calls are lost with a batch in flight). A
    // call lost in one runs on past the stop timeout, and the engine gives its lease
    // up beside it.
    if rng.random_bool(0.25) {
        cfg.faults
            .set(FaultKind::Stuck, rng.random_range(10..=60) as f64);
    }
    cfg
}

/// One seed in four runs clocks that drift up to 10 %, and tells the hosts or
/// consumers so. The shipped rule stays safe; variants that leave out the drift
/// allowance get a race window ten times wider.
fn widen_drift(faults: &mut Faults) -> u32 {
    let drift = faults.get(FaultKind::Drift);
    if drift > 0.0 {
        faults.set(FaultKind::Drift, drift * 10.0);
    }
    100_000
}

/// Cosmos DB's own faults: replicas that lag at Session consistency (windows per
/// hour) and the SDK retrying writes beneath the engine (per host per hour), each on
/// in two seeds of five. Queue runs draw both too: a queue's documents share one
/// partition key, where Session reads are a consistent prefix of the partition's
/// writes, and the simulator's replicas, lagging document by document, are
/// staleness the queue must survive all the same (docs/limitations.md).
fn draw_cosmos_faults(rng: &mut ChaCha8Rng, faults: &mut Faults) {
    if rng.random_bool(0.4) {
        faults.set(FaultKind::Stale, rng.random_range(10..=60) as f64);
    }
    if rng.random_bool(0.4) {
        faults.set(FaultKind::Retry, rng.random_range(2..=30) as f64);
    }
}

/// Each fault kind on with probability 0.4, at a random rate.
fn draw_faults(rng: &mut ChaCha8Rng, mut faults: Faults) -> Faults {
    // Splits and Cosmos DB's own faults are drawn apart, after everything else (see
    // `draw`).
    for kind in FaultKind::ALL.into_iter().filter(|k| {
        !matches!(
            k,
            FaultKind::Split
                | FaultKind::Stale
                | FaultKind::Retry
                | FaultKind::Zombie
                | FaultKind::Stuck
        )
    }) {
        if !rng.random_bool(0.4) {
            continue;
        }
        let value = match kind {
            FaultKind::Skew => rng.random_range(1..=60) as f64,
            // Within the hosts' drift bound (1 %; 10 % after `widen_drift`): beyond it
            // the protocol's assumption is broken on purpose, which is a known-bad
            // run, not a swarm run.
            FaultKind::Drift => rng.random_range(100..=10_000) as f64,
            FaultKind::Throttle | FaultKind::Spike => rng.random_range(10..=60) as f64,
            _ => rng.random_range(2..=30) as f64,
        };
        faults.set(kind, value);
    }
    faults
}

/// One seed that broke a property.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The scenario it drew.
    pub scenario: String,
    /// The kinds broken.
    pub kinds: Vec<String>,
    /// The first violation.
    pub first: String,
    /// The last trace events before it.
    pub tail: Vec<String>,
    /// The command that replays the run.
    pub replay: String,
}

/// What a swarm found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Violations by kind, over all seeds.
    pub violations: BTreeMap<String, u64>,
    /// The seeds that broke something.
    pub failures: Vec<Failure>,
    /// The slowest convergence: seed and seconds.
    pub slowest: Option<(u64, f64)>,
    /// Seeds by scenario.
    pub scenarios: BTreeMap<String, u64>,
    /// Faults injected, by kind, over all seeds.
    pub faults: BTreeMap<String, u64>,
    /// Virtual seconds simulated.
    pub virtual_s: f64,
}

/// Reads `A..B` (B excluded).
pub fn parse_seeds(text: &str) -> Result<Range<u64>, SimError> {
    let bad = || SimError::Seeds(text.to_string());
    let (a, b) = text.split_once("..").ok_or_else(bad)?;
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    if a >= b {
        return Err(bad());
    }
    Ok(a..b)
}

/// Whether seed `seed` stands for a queue run: one seed in five.
pub fn is_queue_seed(seed: u64) -> bool {
    seed % 5 == 4
}

/// What a swarm runs: the shipped protocols, or one of the model checker's known-bad
/// variants, to see how often random runs catch it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// The shipped lease protocol and queue, one seed in five a queue run.
    #[default]
    Shipped,
    /// A known-bad lease protocol: every seed is a partition-lease run.
    Lease(Bug),
    /// A known-bad queue: every seed is a queue run.
    Queue(LockBug),
}

impl Variant {
    /// The variant named `name` (a `--bug` of either the lease protocol or the queue).
    ///
    /// ```
    /// use leasehold_sims::sim::swarm::Variant;
    ///
    /// assert!(matches!(Variant::parse("same-epoch"), Ok(Variant::Lease(_))));
    /// assert!(matches!(Variant::parse("dequeue-seed"), Ok(Variant::Queue(_))));
    /// assert!(Variant::parse("blind-lease").is_err()); // items are not simulated
    /// ```
    pub fn parse(name: &str) -> Result<Variant, SimError> {
        if let Ok(bug) = name.parse::<Bug>() {
            return Ok(Variant::Lease(bug));
        }
        LockBug::parse(name, LockKind::Queue)
            .map(Variant::Queue)
            .map_err(|_| {
                let lease: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
                let queue: Vec<&str> = LockBug::ALL
                    .iter()
                    .filter(|b| b.applies_to(LockKind::Queue))
                    .map(|b| b.name())
                    .collect();
                SimError::UnknownBug(format!(
                    "unknown variant {name:?}; the lease protocol's are {}, the queue's are {}",
                    lease.join(", "),
                    queue.join(", ")
                ))
            })
    }

    /// The `--bug` flag that selects it, empty for the shipped protocols.
    pub fn flag(self) -> String {
        match self {
            Variant::Shipped => String::new(),
            Variant::Lease(b) => format!(" --bug {}", b.name()),
            Variant::Queue(b) => format!(" --bug {}", b.name()),
        }
    }
}

/// The queue run seed `seed` stands for: a random queue scenario, size and fault mix.
pub fn draw_queue(seed: u64) -> QueueConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5157_4152_4d51_0000);
    let scenario = QueueScenario::ALL[rng.random_range(0..QueueScenario::ALL.len())];
    let mut cfg = QueueConfig::scenario(scenario, seed);
    cfg.consumers = rng.random_range(2..=6);
    cfg.messages = rng.random_range(40..=200);
    cfg.duration = Millis::from_secs(rng.random_range(180..=480));
    cfg.lock = Millis::from_secs(rng.random_range(10..=60));
    cfg.batch = rng.random_range(1..=8);
    cfg.max_dequeue = rng.random_range(3..=6);
    cfg.fail_one_in = rng.random_range(10..=30);
    cfg.faults = draw_faults(&mut rng, cfg.faults);
    cfg.trace_keep = 30;
    // Drawn last, as in `draw`. Short locks and fast polls let a rival see a lock
    // soon after it was written, which is when clock drift matters.
    if rng.random_bool(0.25) {
        cfg.drift_bound_ppm = widen_drift(&mut cfg.faults);
    }
    if rng.random_bool(0.25) {
        cfg.lock = Millis::from_secs(rng.random_range(3..=9));
        cfg.poll = Millis(200);
    }
    // Half the runs read the locks on every dequeue: rivals then see a fresh lock
    // soonest, where races between a holder and a rival are likeliest.
    if rng.random_bool(0.5) {
        cfg.lock_watch = Some(Millis::ZERO);
    }
    // A third of the runs carry large payloads, written and read in parts, and
    // sweep what crashes leave of them.
    if rng.random_bool(0.3) {
        cfg.large_every = rng.random_range(2..=6);
        // Half of them keep those payloads in a claim store rather than in parts.
        if rng.random_bool(0.5) {
            cfg.large_kept = crate::sim::queue::LargeKept::Claims;
        }
    }
    // Cosmos DB's own faults, drawn last so that every older seed draws as it did.
    draw_cosmos_faults(&mut rng, &mut cfg.faults);
    // Half the runs have an operator delete some dead letters, drawn after the rest
    // for the same reason.
    if rng.random_bool(0.5) {
        cfg.delete_dead_letters_every = rng.random_range(1..=3);
    }
    cfg
}

/// What one seed gave, whichever kind of run it was.
struct Outcome {
    scenario: String,
    virtual_s: f64,
    faults: BTreeMap<String, u64>,
    violation_counts: BTreeMap<String, u64>,
    first: Option<String>,
    kinds: Vec<String>,
    tail: Vec<String>,
    replay: String,
    converge_s: Option<f64>,
}

fn run_seed(seed: u64, variant: Variant) -> Result<Outcome, (String, String, String)> {
    let first = |v: &[super::Violation]| {
        v.first()
            .map(|f| format!("{} at {:.3} s: {}", f.kind, f.at_s, f.detail))
    };
    let queue = match variant {
        Variant::Shipped => is_queue_seed(seed),
        Variant::Lease(_) => false,
        Variant::Queue(_) => true,
    };
    if queue {
        let mut cfg = draw_queue(seed);
        if let Variant::Queue(bug) = variant {
            cfg.bug = Some(bug);
        }
        let replay = queue_replay(&cfg);
        let run = simulate_queue(&cfg)
            .map_err(|e| (cfg.scenario.to_string(), e.to_string(), replay.clone()))?;
        let r = run.report;
        let mut faults = r.faults.clone();
        // Not a fault but an operator's action, counted beside the faults so that a
        // swarm's summary shows how often its runs took that path.
        if r.measures.dead_letters_deleted > 0 {
            faults.insert(
                "dead letter deleted".into(),
                r.measures.dead_letters_deleted,
            );
        }
        return Ok(Outcome {
            scenario: r.scenario.clone(),
            virtual_s: r.virtual_s,
            faults,
            violation_counts: r.violation_counts.clone(),
            first: first(&r.violations),
            kinds: r
                .violated_kinds()
                .iter()
                .map(|k| k.name().to_string())
                .collect(),
            tail: run.tail,
            replay,
            converge_s: None,
        });
    }
    let mut cfg = draw(seed);
    if let Variant::Lease(bug) = variant {
        cfg.bug = Some(bug);
    }
    let replay = replay_command(&cfg);
    let run = simulate(&cfg, false).map_err(|e| {
        (
            cfg.scenario.name().to_string(),
            e.to_string(),
            replay.clone(),
        )
    })?;
    let r = run.report;
    let mut faults = r.faults.clone();
    if r.stuck_calls > 0 {
        faults.insert("stuck call".into(), r.stuck_calls);
    }
    Ok(Outcome {
        scenario: r.scenario.clone(),
        virtual_s: r.virtual_s,
        faults,
        violation_counts: r.violation_counts.clone(),
        first: first(&r.violations),
        kinds: r
            .violated_kinds()
            .iter()
            .map(|k| k.name().to_string())
            .collect(),
        tail: run.finished.tail,
        replay,
        converge_s: r.converge_s,
    })
}

/// Runs `variant` on every seed in `seeds`, calling `progress` after each. For the
/// shipped protocols one seed in five is a queue run ([`is_queue_seed`]) and the
/// others are partition-lease runs; a known-bad variant runs its own kind only.
pub fn run(seeds: Range<u64>, variant: Variant, progress: impl FnMut(u64, &Summary)) -> Summary {
    run_until(seeds, variant, &AtomicBool::new(false), progress)
}

/// [`run`], stopping before the next seed once `stop` is set: the summary then
/// covers the seeds run so far.
pub fn run_until(
    seeds: Range<u64>,
    variant: Variant,
    stop: &AtomicBool,
    mut progress: impl FnMut(u64, &Summary),
) -> Summary {
    let mut summary = Summary::default();
    for seed in seeds {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        summary.seeds += 1;
        match run_seed(seed, variant) {
            Ok(o) => {
                *summary.scenarios.entry(o.scenario.clone()).or_default() += 1;
                summary.virtual_s += o.virtual_s;
                for (kind, n) in &o.faults {
                    *summary.faults.entry(kind.clone()).or_default() += n;
                }
                for (kind, n) in &o.violation_counts {
                    *summary.violations.entry(kind.clone()).or_default() += n;
                }
                if let Some(s) = o.converge_s
                    && summary.slowest.is_none_or(|(_, worst)| s > worst)
                {
                    summary.slowest = Some((seed, s));
                }
                if let Some(first) = o.first {
                    summary.failures.push(Failure {
                        seed,
                        scenario: o.scenario,
                        kinds: o.kinds,
                        first,
                        tail: o.tail,
                        replay: o.replay,
                    });
                }
            }
            Err((scenario, error, replay)) => {
                *summary.scenarios.entry(scenario.clone()).or_default() += 1;
                *summary.violations.entry("setup".into()).or_default() += 1;
                summary.failures.push(Failure {
                    seed,
                    scenario,
                    kinds: vec!["setup".into()],
                    first: error,
                    tail: Vec::new(),
                    replay,
                });
            }
        }
        progress(seed, &summary);
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_range_is_read_or_refused() {
        assert_eq!(parse_seeds("0..500"), Ok(0..500));
        assert!(parse_seeds("5..5").is_err());
        assert!(parse_seeds("x..9").is_err());
        assert!(parse_seeds("12").is_err());
    }

    #[test]
    fn every_drawn_run_is_valid() {
        for seed in 0..200 {
            assert_eq!(draw(seed).validate(), Ok(()), "seed {seed}");
            assert_eq!(draw_queue(seed).validate(), Ok(()), "queue seed {seed}");
        }
    }

    /// Shipped runs must only meet clocks within what they were told to allow for;
    /// a fast drift past the bound would be a known-bad run, not a swarm run.
    #[test]
    fn drawn_clocks_drift_within_the_bound_and_some_drift_ten_times_more() {
        let mut wide = (0, 0);
        for seed in 0..400 {
            let lease = draw(seed);
            let queue = draw_queue(seed);
            for (drift, bound) in [
                (lease.faults.get(FaultKind::Drift), lease.drift_bound_ppm),
                (queue.faults.get(FaultKind::Drift), queue.drift_bound_ppm),
            ] {
                assert!(drift <= f64::from(bound), "seed {seed}: {drift} > {bound}");
                if drift > 10_000.0 {
                    wide.0 += 1;
                }
            }
            if queue.lock < Millis::from_secs(10) {
                wide.1 += 1;
            }
        }
        assert!(wide.0 > 50 && wide.1 > 50, "{wide:?}");
    }
}
