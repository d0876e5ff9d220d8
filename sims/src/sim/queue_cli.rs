//! `leasehold sim queue`, `queue-crash` and `queue-poison`: the queue runs' flags,
//! table, JSON and violation report.

use super::cli::SimArgs;
use super::config::SimError;
use super::queue::{QueueConfig, QueueRun, QueueScenario, replay_command, simulate_queue, table};
use std::process::ExitCode;

/// Builds the queue run from the flags; lease-only flags are refused.
pub fn config_of(args: &SimArgs, scenario: QueueScenario) -> Result<QueueConfig, SimError> {
    let lease_only: [(&'static str, bool); 12] = [
        ("--partitions", args.partitions.is_some()),
        ("--from", args.from.is_some()),
        ("--affected", args.affected.is_some()),
        ("--interval", args.interval.is_some()),
        ("--warmup", args.warmup.is_some()),
        ("--expiry", args.expiry.is_some()),
        ("--expiration", args.expiration.is_some()),
        ("--renew", args.renew.is_some()),
        ("--acquire", args.acquire.is_some()),
        ("--rate", args.rate.is_some()),
        ("--hot-factor", args.hot_factor.is_some()),
        ("--svg", args.svg.is_some()),
    ];
    if let Some((flag, _)) = lease_only.iter().find(|(_, given)| *given) {
        return Err(SimError::NotApplicable {
            flag,
            scenario: scenario.to_string(),
        });
    }
    if args.seeds.is_some() {
        return Err(SimError::Size(
            "--seeds is for `leasehold sim swarm`; give one --seed",
        ));
    }
    let mut cfg = QueueConfig::scenario(scenario, args.seed);
    cfg.trace_keep = args.trace;
    let set = |target: &mut u32, value: Option<u32>| {
        if let Some(v) = value {
            *target = v;
        }
    };
    set(&mut cfg.consumers, args.hosts);
    set(&mut cfg.messages, args.messages);
    set(&mut cfg.backlog, args.backlog);
    set(&mut cfg.max_dequeue, args.max_dequeue);
    set(&mut cfg.poison_every, args.poison_every);
    set(&mut cfg.drift_bound_ppm, args.drift_bound);
    if let Some(v) = args.max_batch {
        cfg.batch = u32::try_from(v).map_err(|_| SimError::Size("--max-batch is too large"))?;
    }
    if let Some(v) = args.duration {
        cfg.duration = v;
    }
    if let Some(v) = args.settle {
        cfg.settle = v;
    }
    if let Some(v) = args.lock {
        cfg.lock = v;
    }
    if args.lock_watch.is_some() {
        cfg.lock_watch = args.lock_watch;
    }
    if let Some(v) = args.margin {
        cfg.margin = v;
    }
    if let Some(v) = args.poll {
        cfg.poll = v;
    }
    if let Some(text) = &args.faults {
        cfg.faults = cfg
            .faults
            .apply(text)
            .map_err(|e| SimError::Faults(e.to_string()))?;
    }
    if let Some(name) = &args.bug {
        let bug = leasehold_model::LockBug::parse(name, leasehold_model::LockKind::Queue)
            .map_err(|e| SimError::UnknownBug(e.to_string()))?;
        cfg.bug = Some(bug);
    }
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
    for v in &run.report.violations {
        out.push_str(&format!("  {} at {:.3} s: {}\n", v.kind, v.at_s, v.detail));
    }
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
