//! The deterministic simulator: the engine's own host state machine, hundreds of
//! hosts, thousands of partitions, hours of virtual time, faults drawn from one seed.
//!
//! - [`config`]: scenarios and their settings; [`faults`]: what can go wrong.
//! - [`world`]: the single-threaded discrete-event loop over virtual time; the
//!   engine's reference store sits behind a simulated network.
//! - [`checker`]: ground truth, checked online (exclusivity, fencing, checkpoint
//!   monotonicity, no event lost, liveness after the heal) and measured.
//! - [`report`]: the measures, as a table or JSON; [`svg`]: the ownership timeline.
//! - [`swarm`]: many seeds, each a random mix of scenario and faults.
//!
//! ```
//! use leasehold_sims::sim::{self, Scenario, SimConfig};
//! use leasehold_engine::Millis;
//!
//! let mut config = SimConfig::scenario(Scenario::ScaleOut, 7);
//! config.hosts = 3;
//! config.partitions = 12;
//! config.duration = Millis::from_secs(120);
//! let run = sim::simulate(&config, false).unwrap();
//! assert!(run.report.passed(), "{:?}", run.report.violations);
//! assert_eq!(run.report.min_moves, 8);
//! // The same seed replays the same run, event for event.
//! let again = sim::simulate(&config, false).unwrap();
//! assert_eq!(run.report.trace_hash, again.report.trace_hash);
//! ```

pub mod checker;
pub mod cli;
pub mod clock;
pub mod config;
pub mod cost;
pub mod faults;
pub mod queue;
pub mod queue_cli;
pub mod report;
pub mod svg;
pub mod swarm;
pub mod timeline;
pub mod trace;
pub mod workload;
pub mod world;

pub use checker::{Violation, ViolationKind};
pub use config::{Scenario, SimConfig, SimError, parse_strategy};
pub use faults::{FaultKind, Faults, FaultsError};
pub use report::RunReport;

use leasehold_engine::Millis;
use std::time::Instant;

/// A finished run: its report, and what the report came from.
#[derive(Clone, Debug)]
pub struct Run {
    /// The measures and violations.
    pub report: RunReport,
    /// The raw outcome (trace tail, timeline).
    pub finished: world::Finished,
}

/// Runs `config`; `timeline` keeps the ownership timeline for [`svg::draw`].
pub fn simulate(config: &SimConfig, timeline: bool) -> Result<Run, SimError> {
    let started = Instant::now();
    let finished = world::World::new(config, timeline)?.run();
    let wall = started.elapsed().as_secs_f64();
    Ok(Run {
        report: RunReport::new(config, &finished, wall),
        finished,
    })
}

/// The command that replays `config` exactly.
pub fn replay_command(config: &SimConfig) -> String {
    let base = SimConfig::scenario(config.scenario, config.seed);
    let mut cmd = format!(
        "leasehold sim {} --seed {} --strategy {}",
        config.scenario,
        config.seed,
        config.label()
    );
    let mut flag = |name: &str, value: String, default: String| {
        if value != default {
            cmd.push_str(&format!(" --{name} {value}"));
        }
    };
    let secs = |m: Millis| format!("{}ms", m.as_millis());
    flag("hosts", config.hosts.to_string(), base.hosts.to_string());
    flag(
        "partitions",
        config.partitions.to_string(),
        base.partitions.to_string(),
    );
    flag("from", config.from.to_string(), base.from.to_string());
    flag(
        "affected",
        config.affected.to_string(),
        base.affected.to_string(),
    );
    flag("interval", secs(config.interval), secs(base.interval));
    flag("warmup", secs(config.warmup), secs(base.warmup));
    flag("duration", secs(config.duration), secs(base.duration));
    flag(
        "settle",
        config.settle.map(secs).unwrap_or_default(),
        base.settle.map(secs).unwrap_or_default(),
    );
    flag(
        "faults",
        format!("{}", config.faults),
        format!("{}", base.faults),
    );
    let rule = |r| match r {
        leasehold_engine::ExpiryRule::Observed => "observed".to_string(),
        leasehold_engine::ExpiryRule::Timestamp => "timestamp".to_string(),
    };
    flag("expiry", rule(config.expiry), rule(base.expiry));
    flag("expiration", secs(config.expiration), secs(base.expiration));
    flag("renew", secs(config.renew), secs(base.renew));
    flag("acquire", secs(config.acquire), secs(base.acquire));
    flag(
        "drift-bound",
        config.drift_bound_ppm.to_string(),
        base.drift_bound_ppm.to_string(),
    );
    flag("margin", secs(config.margin), secs(base.margin));
    let w = &config.workload;
    let b = &base.workload;
    flag("rate", w.rate.to_string(), b.rate.to_string());
    flag(
        "hot-factor",
        w.hot_factor.to_string(),
        b.hot_factor.to_string(),
    );
    flag("poll", secs(w.poll), secs(b.poll));
    flag(
        "max-batch",
        w.max_batch.to_string(),
        b.max_batch.to_string(),
    );
    if let Some(bug) = config.bug {
        cmd.push_str(&format!(" --bug {}", bug.name()));
    }
    cmd
}
