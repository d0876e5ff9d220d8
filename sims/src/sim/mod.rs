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
pub mod clock;
pub mod config;
pub mod cost;
pub mod error;
pub mod faults;
pub mod flags;
pub mod queue;
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
    simulate_with(config, timeline, &mut |_| {})
}

/// Runs `config` as [`simulate`], telling `progress` the virtual time reached, in
/// milliseconds, from time to time (the run ends at [`SimConfig::deadline`]).
pub fn simulate_with(
    config: &SimConfig,
    timeline: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Run, SimError> {
    let started = Instant::now();
    let finished = world::World::new(config, timeline)?.run_with(progress);
    let wall = started.elapsed().as_secs_f64();
    Ok(Run {
        report: RunReport::new(config, &finished, wall),
        finished,
    })
}

/// The command that replays `config` exactly: every setting that differs from its
/// scenario's defaults, as a flag, and the strategy always (the command line's
/// default runs two).
pub fn replay_command(config: &SimConfig) -> String {
    flags::command(
        format!("leasehold sim {} --seed {}", config.scenario, config.seed),
        config,
        &SimConfig::scenario(config.scenario, config.seed),
        &["strategy"],
        &["scenario", "seed"],
    )
}
