//! `leasehold sim`: the simulator's command line.

use super::config::{Scenario, SimConfig, SimError, parse_strategy_spec};
use super::faults::Faults;
use super::flags::{self, opt_duration, opt_text};
use super::queue::QueueScenario;
use super::report::{RunReport, table, violation_lines};
use super::{queue_cli, replay_command, simulate_with, svg, swarm};
use crate::check::counted;
use leasehold_engine::lease::Liveness;
use leasehold_engine::{ExpiryRule, Millis};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The flags of `leasehold sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// steady, scale-out, scale-in, rolling-restart, crash, flapping-host,
    /// skewed-clocks, throttled-store, hot-partition; queue, queue-crash,
    /// queue-poison (work-queue consumers); or swarm (many seeds, each a random
    /// scenario and fault mix).
    pub scenario: String,
    /// The seed every random choice comes from.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Swarm: the seeds to run, as A..B (B excluded); required. A swarm takes only
    /// this, --bug, --json and --quiet: each seed draws its own scenario, strategy,
    /// sizes, settings and faults.
    #[arg(long, value_name = "A..B")]
    pub seeds: Option<String>,
    /// Strategies to run on the same seed, side by side; an entry may name its
    /// liveness after a colon (`cfp,handoff:lease,handoff:session`).
    #[arg(long, default_value = "cfp,handoff", value_name = "LIST")]
    pub strategy: String,
    /// Settings of every scenario.
    #[command(flatten)]
    pub run: RunFlags,
    /// Settings of the partition-lease scenarios.
    #[command(flatten)]
    pub lease: LeaseFlags,
    /// Settings of the queue scenarios.
    #[command(flatten)]
    pub queue: QueueFlags,
    /// Print one JSON object with one run per strategy.
    #[arg(long)]
    pub json: bool,
    /// Partition-lease scenarios: draw the ownership timeline to this SVG file (one
    /// file per strategy when there are several: NAME-STRATEGY.svg).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Swarm: no progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Flags every scenario takes. Each names a setting of the run's configuration
/// ([`SimConfig`], [`QueueConfig`](super::queue::QueueConfig)) and is laid over the
/// scenario's default ([`flags::overlay`]).
#[derive(clap::Args, Clone, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunFlags {
    /// Hosts at full strength; queue scenarios: consumers.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<u32>,
    /// Time from the disturbance until faults heal and the source stops.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub duration: Option<Millis>,
    /// The liveness deadline after the heal.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub settle: Option<Millis>,
    /// Faults: `none`, or a list such as crash=4,pause=6,throttle=20 (kinds: crash,
    /// shutdown, pause, jump, timeout, partition per host per hour; throttle, spike
    /// windows per hour; skew seconds; drift ppm). Added to the scenario's own.
    #[arg(long, value_name = "LIST")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<String>,
    /// The clock drift the hosts allow for, in ppm (10000 is 1%).
    #[arg(long, value_name = "PPM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_bound: Option<u32>,
    /// How much earlier than strictly needed a host or consumer gives up its authority.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub margin: Option<Millis>,
    /// How long an idle handler or consumer waits before polling again.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub poll: Option<Millis>,
    /// The most events in one batch; queue scenarios: the most messages one consumer
    /// holds.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u64>,
    /// Run a known-bad variant of the protocol (the model checker's; those of session
    /// liveness need handoff under it). With swarm, every seed runs the variant
    /// (lease or queue runs only).
    #[arg(long, value_name = "NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bug: Option<String>,
    /// Trace events shown before a violation.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<usize>,
}

/// Flags of the partition-lease scenarios only.
#[derive(clap::Args, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeaseFlags {
    /// Partitions.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    /// Scale-out: hosts before the disturbance.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// Scale-in and crash: hosts that leave.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affected: Option<u32>,
    /// Rolling restart: time between replacements; flapping host: between crashes.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub interval: Option<Millis>,
    /// Rolling restart: the lease expiration the new build runs with, so that old
    /// and new hosts with different settings meet mid-deploy.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub deploy_expiration: Option<Millis>,
    /// Write each lease's checkpoint at most once per this interval rather than after
    /// every batch (the default); a release or a handoff still writes the last one.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub checkpoint_every: Option<Millis>,
    /// Write each lease's checkpoint once the handler has finished this many events
    /// since the last one written, rather than after every batch.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_items: Option<u32>,
    /// Rolling restart: `new`, each new pod under a new name, started before the old
    /// one stops (a Deployment); or `reuse`, under the old pod's name once it has
    /// stopped (a StatefulSet).
    #[arg(long, value_name = "NEW|REUSE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<String>,
    /// Time before the disturbance.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Millis>,
    /// Where authority comes from, for every strategy listed: `lease` (each lease
    /// renewed) or `session` (one heartbeat per host; handoff only).
    #[arg(long, value_parser = flags::liveness_parser())]
    #[serde(with = "opt_text", skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// Under session liveness, how often the group reads the whole lease table.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub audit: Option<Millis>,
    /// The expiry rule.
    #[arg(long, value_parser = flags::expiry_parser())]
    #[serde(with = "opt_text", skip_serializing_if = "Option::is_none")]
    pub expiry: Option<ExpiryRule>,
    /// Lease expiration.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Millis>,
    /// Renew interval.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub renew: Option<Millis>,
    /// Acquire interval.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub acquire: Option<Millis>,
    /// Events per second per partition.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How many times the rate partition 0 gets.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_factor: Option<f64>,
}

/// Flags of the queue scenarios only.
#[derive(clap::Args, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct QueueFlags {
    /// Queue scenarios: messages enqueued over the duration.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<u32>,
    /// Queue scenarios: messages already waiting when the consumers start, besides
    /// those enqueued over the duration.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u32>,
    /// Queue scenarios: the lock duration of a delivery.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub lock: Option<Millis>,
    /// Queue scenarios: how often a dequeue reads the locked messages, besides when a
    /// watched lock is due (0s: at every dequeue).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub lock_watch: Option<Millis>,
    /// Queue scenarios: deliveries before a message is dead-lettered.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_dequeue: Option<u32>,
    /// Queue scenarios: every message whose number is a multiple of this is poison
    /// (0: none).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poison_every: Option<u32>,
    /// Queue scenarios: every message whose number is a multiple of this is larger
    /// than a document and kept in parts (0: none). Documents then hold 8 KiB, and
    /// these payloads 10 to 40 KiB, so that each takes several parts.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_every: Option<u32>,
    /// Queue scenarios: where large payloads are kept: `parts`, in the queue's
    /// partition, or `claims`, in a claim store through the queue's claim check (the
    /// run's own, in memory, failing one call in 20 until the heal).
    #[arg(long, value_name = "WHERE", value_parser = ["parts", "claims"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_kept: Option<String>,
    /// Queue scenarios: one handler run in this many fails and abandons its message
    /// (0: none).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_one_in: Option<u32>,
}

pub use super::flags::parse_duration;

/// Refuses the flags of `group` given to a scenario they do not apply to.
pub(crate) fn refuse(group: &impl Serialize, scenario: &str) -> Result<(), SimError> {
    match flags::given(group).into_iter().next() {
        Some(flag) => Err(SimError::NotApplicable {
            flag: format!("--{flag}"),
            scenario: scenario.to_string(),
        }),
        None => Ok(()),
    }
}

/// The flags every scenario takes, ready to lay over a configuration: `--faults` is
/// added to the scenario's own faults rather than replacing them.
pub(crate) fn run_settings(
    run: &RunFlags,
    base_faults: Faults,
) -> Result<Map<String, Value>, SimError> {
    let mut settings = flags::of(run);
    if let Some(text) = &run.faults {
        let faults = base_faults
            .apply(text)
            .map_err(|e| SimError::Faults(e.to_string()))?;
        settings.insert("faults".into(), Value::String(faults.to_string()));
    }
    Ok(settings)
}

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
    let stop = crate::interrupt::flag();
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
        return Ok(ExitCode::from(crate::interrupt::EXIT));
    }
    Ok(ExitCode::from(if summary.failures.is_empty() {
        0
    } else {
        1
    }))
}
