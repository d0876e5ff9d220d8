//! `leasehold sim`: the simulator's command line.

use super::check::counted;
use super::queue as queue_cli;
use crate::sim::config::{Scenario, SimConfig, SimError, parse_strategy_spec};
use crate::sim::flags;
use crate::sim::queue::QueueScenario;
use crate::sim::report::{RunReport, table, violation_lines};
use crate::sim::{replay_command, simulate_with, svg, swarm};
use leasehold_engine::{ExpiryRule, Millis};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use super::args::{LeaseFlags, QueueFlags, RunFlags, SimArgs, parse_duration};
use super::args::{refuse, run_settings};

/// Builds the run of one strategy from the flags.
pub fn config_of(
    args: &SimArgs,
    scenario: Scenario,
    strategy: &str,
) -> Result<SimConfig, SimError> {
    refuse(&args.queue, scenario.name())?;
    let base = SimConfig::scenario(scenario, args.seed);
    let (strategy, liveness) = parse_strategy_spec(strategy)?;
    let mut settings = run_settings(&args.run, base.faults)?;
    settings.extend(flags::of(&args.lease));
    settings.insert("strategy".into(), Value::String(strategy.to_string()));
    if let (None, Some(l)) = (args.lease.liveness, liveness) {
        settings.insert("liveness".into(), Value::String(l.to_string()));
    }
    let mut cfg = flags::overlay(&base, settings)?;
    // CFP ships its timestamp rule with no margin: that is what `--expiry timestamp`
    // runs unless a margin is given.
    if cfg.expiry == ExpiryRule::Timestamp && args.run.margin.is_none() {
        cfg.margin = Millis::ZERO;
    }
    cfg.validate()?;
    Ok(cfg)
}

fn svg_path(base: &Path, strategy: &str, several: bool) -> PathBuf {
    if !several {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("timeline");
    base.with_file_name(format!("{stem}-{strategy}.svg"))
}

/// Runs `leasehold sim`; exit 0 when every property held, 1 on a violation, 2 on bad
/// flags.
pub fn run(args: &SimArgs) -> ExitCode {
    let result = if args.scenario == "swarm" {
        run_swarm(args)
    } else if let Ok(scenario) = args.scenario.parse::<QueueScenario>() {
        queue_cli::run(args, scenario)
    } else {
        run_scenario(args)
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_scenario(args: &SimArgs) -> Result<ExitCode, SimError> {
    let scenario: Scenario = args.scenario.parse()?;
    if args.seeds.is_some() {
        return Err(SimError::Size(
            "--seeds is for `leasehold sim swarm`; give one --seed",
        ));
    }
    let strategies: Vec<&str> = args.strategy.split(',').map(str::trim).collect();
    let configs = strategies
        .iter()
        .map(|s| config_of(args, scenario, s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut reports = Vec::new();
    let mut failed = false;
    for cfg in &configs {
        // Virtual seconds simulated; drawn only on a terminal, so reports and tests
        // see nothing of it.
        let bar = indicatif::ProgressBar::new(cfg.deadline().as_millis() / 1_000);
        bar.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{} {{bar:40}} {{pos}}/{{len}} virtual s · {{elapsed}}",
                cfg.label()
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let run = simulate_with(cfg, args.svg.is_some(), &mut |now| {
            bar.set_position(now / 1_000);
        })?;
        bar.finish_and_clear();
        if let (Some(base), Some(timeline)) = (&args.svg, &run.finished.timeline) {
            let path = svg_path(base, &cfg.label(), configs.len() > 1);
            let title = format!(
                "{} · {} · seed {} · {} · {}",
                cfg.scenario,
                cfg.label(),
                cfg.seed,
                counted(u64::from(cfg.hosts), "host", "hosts"),
                counted(u64::from(cfg.partitions), "partition", "partitions")
            );
            svg::draw(timeline, cfg.partitions, run.finished.end, &title, &path)
                .map_err(SimError::Output)?;
            eprintln!("wrote {}", path.display());
        }
        if !run.report.passed() {
            failed = true;
            eprint!("{}", violation_text(cfg, &run.report, &run.finished.tail));
        }
        reports.push(run.report);
    }
    if args.json {
        let json = serde_json::json!({ "runs": reports });
        println!("{json}");
    } else {
        let cfg = &configs[0];
        println!(
            "leasehold sim {} · seed {} · {} · {} · disturbance at {} · {} until the heal · settle {} · {} expiry, margin {} · faults {}",
            cfg.scenario,
            cfg.seed,
            counted(u64::from(cfg.hosts), "host", "hosts"),
            counted(u64::from(cfg.partitions), "partition", "partitions"),
            cfg.warmup,
            cfg.duration,
            cfg.settle(),
            cfg.expiry,
            cfg.margin,
            cfg.faults
        );
        print!("{}", table(&reports));
    }
    Ok(ExitCode::from(if failed { 1 } else { 0 }))
}

/// The text printed for a run that broke a property: seed, scenario, what broke,
/// the last trace events and the replay command.
pub fn violation_text(cfg: &SimConfig, report: &RunReport, tail: &[String]) -> String {
    let mut out = format!(
        "VIOLATION in {} with {} (seed {}):\n",
        cfg.scenario,
        cfg.label(),
        cfg.seed
    );
    out.push_str(&violation_lines(
        &report.violations,
        report.violation_counts.values().sum(),
    ));
    out.push_str(&format!("last {} events before the first:\n", tail.len()));
    for line in tail {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str(&format!("replay: {}\n", replay_command(cfg)));
    out
}

/// Refuses what a swarm does not use: each seed draws its own scenario, strategy,
/// sizes, settings and faults, so a flag for any of them would be ignored without a
/// word. A swarm takes `--seeds` (required), `--bug`, `--json` and `--quiet`.
fn refuse_for_swarm(args: &SimArgs) -> Result<(), SimError> {
    const SWARM: &str = "swarm (each seed draws its own)";
    let run = RunFlags {
        bug: None,
        ..args.run.clone()
    };
    refuse(&run, SWARM)?;
    refuse(&args.lease, SWARM)?;
    refuse(&args.queue, SWARM)?;
    let others = [
        ("--seed", args.seed != 1),
        ("--strategy", args.strategy != "cfp,handoff"),
        ("--svg", args.svg.is_some()),
    ];
    if let Some((flag, _)) = others.into_iter().find(|(_, given)| *given) {
        return Err(SimError::NotApplicable {
            flag: flag.to_string(),
            scenario: SWARM.to_string(),
        });
    }
    if args.seeds.is_none() {
        return Err(SimError::Size("`leasehold sim swarm` needs --seeds A..B"));
    }
    Ok(())
}

fn run_swarm(args: &SimArgs) -> Result<ExitCode, SimError> {
    refuse_for_swarm(args)?;
    let seeds = swarm::parse_seeds(args.seeds.as_deref().unwrap_or_default())?;
    let variant = match &args.run.bug {
        Some(name) => swarm::Variant::parse(name)?,
        None => swarm::Variant::Shipped,
    };
    let bar = if args.quiet || args.json {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(seeds.end - seeds.start);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} seeds · {elapsed} · {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    };
    let first = seeds.start;
    let asked = seeds.end - seeds.start;
    let stop = super::interrupt::flag();
    let summary = swarm::run_until(seeds, variant, &stop, |_, s| {
        bar.inc(1);
        let broken: u64 = s.failures.len() as u64;
        bar.set_message(format!("{broken} seeds with violations"));
    });
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string(&summary).unwrap_or_default());
    } else {
        println!(
            "swarm: {} from {first} · {:.0} virtual hours",
            counted(summary.seeds, "seed", "seeds"),
            summary.virtual_s / 3_600.0
        );
        let scenarios: Vec<String> = summary
            .scenarios
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!("scenarios: {}", scenarios.join(", "));
        let faults: Vec<String> = summary
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!("faults injected: {}", faults.join(", "));
        if summary.violations.is_empty() {
            println!("violations: none");
        } else {
            let kinds: Vec<String> = summary
                .violations
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            println!(
                "violations: {} in {}",
                kinds.join(", "),
                counted(summary.failures.len() as u64, "seed", "seeds")
            );
        }
        match summary.slowest {
            Some((seed, s)) => println!("slowest convergence: {s:.1} s (seed {seed})"),
            None => println!("slowest convergence: none converged"),
        }
        // Every failing seed with its replay; the trace tails of the first few only,
        // and a line that says so (the summary counted 6 failing seeds and listed 5).
        const TRACED: usize = 5;
        for (i, f) in summary.failures.iter().enumerate() {
            eprintln!("seed {} ({}): {}", f.seed, f.scenario, f.first);
            if i < TRACED {
                for line in &f.tail {
                    eprintln!("  {line}");
                }
            }
            eprintln!("replay: {}", f.replay);
            eprintln!(
                "   or: leasehold sim swarm --seeds {}..{}{}",
                f.seed,
                f.seed + 1,
                variant.flag()
            );
        }
        if summary.failures.len() > TRACED {
            eprintln!(
                "trace tails shown for the first {TRACED} of {} failing seeds; each replay prints its own",
                summary.failures.len()
            );
        }
    }
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!(
            "interrupted (Ctrl-C) after {} of {asked}: the summary covers those",
            counted(summary.seeds, "seed", "seeds")
        );
        return Ok(ExitCode::from(super::interrupt::EXIT));
    }
    Ok(ExitCode::from(if summary.failures.is_empty() {
        0
    } else {
        1
    }))
}
