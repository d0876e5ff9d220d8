//! `leasehold sim queue`, `queue-crash` and `queue-poison`: the queue runs' flags,
//! table, JSON and violation report.

use super::args::{SimArgs, refuse, run_settings};
use crate::sim::config::SimError;
use crate::sim::flags;
use crate::sim::queue::{
    QueueConfig, QueueRun, QueueScenario, replay_command, simulate_queue, table,
};
use crate::sim::report::violation_lines;
use std::process::ExitCode;

/// Builds the queue run from the flags; lease-only flags are refused.
pub fn config_of(args: &SimArgs, scenario: QueueScenario) -> Result<QueueConfig, SimError> {
    let name = scenario.to_string();
    refuse(&args.lease, &name)?;
    if args.svg.is_some() {
        return Err(SimError::NotApplicable {
            flag: "--svg".into(),
            scenario: name,
        });
    }
    if args.seeds.is_some() {
        return Err(SimError::Size(
            "--seeds is for `leasehold sim swarm`; give one --seed",
        ));
    }
    let base = QueueConfig::scenario(scenario, args.seed);
    let mut settings = run_settings(&args.run, base.faults)?;
    settings.extend(flags::of(&args.queue));
    let cfg = flags::overlay(&base, settings)?;
    cfg.validate().map_err(|e| SimError::Queue(e.to_string()))?;
    Ok(cfg)
}

/// Runs one queue scenario; exit 0 when every property held, 1 on a violation.
pub fn run(args: &SimArgs, scenario: QueueScenario) -> Result<ExitCode, SimError> {
    let cfg = config_of(args, scenario)?;
    let run = simulate_queue(&cfg).map_err(|e| SimError::Queue(e.to_string()))?;
    if !run.report.passed() {
        eprint!("{}", violation_text(&cfg, &run));
    }
    if args.json {
        println!("{}", serde_json::json!({ "runs": [run.report] }));
    } else {
        println!(
            "leasehold sim {} · seed {} · {} consumers · {} messages over {} · lock {} · settle {} · faults {}",
            cfg.scenario,
            cfg.seed,
            cfg.consumers,
            cfg.messages,
            cfg.duration,
            cfg.lock,
            cfg.settle,
            cfg.faults
        );
        print!("{}", table(&run.report));
    }
    Ok(ExitCode::from(u8::from(!run.report.passed())))
}

/// Seed, scenario, what broke, the last trace events and the replay command.
pub fn violation_text(cfg: &QueueConfig, run: &QueueRun) -> String {
    let mut out = format!("VIOLATION in {} (seed {}):\n", cfg.scenario, cfg.seed);
    out.push_str(&violation_lines(
        &run.report.violations,
        run.report.violation_counts.values().sum(),
    ));
    out.push_str(&format!(
        "last {} events before the first:\n",
        run.tail.len()
    ));
    for line in &run.tail {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&format!("replay: {}\n", replay_command(cfg)));
    out
}
