//! `leasehold check` and `leasehold explore`: the partition model on the command
//! line, with verdicts, counterexample traces and replay commands.

use leasehold_engine::ExpiryRule;
use leasehold_model::check::{self, Checkable, Cut, Options, Outcome, Report, Search};
use leasehold_model::trace::{self, Explain};
use leasehold_model::{Bounds, LockBounds, LockKind, PartitionModel};
use std::fmt::Debug;
use std::fmt::Write;
use std::hash::Hash;

/// How a check ended, as the process exit code says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every `always` property holds, and everything within the bounds was explored.
    Proven,
    /// Some `always` property has a counterexample (exit code 1).
    Violated,
    /// No counterexample, but the run stopped at a limit: nothing is proven (exit code 3).
    Incomplete,
}

impl Verdict {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Proven => 0,
            Verdict::Violated => 1,
            Verdict::Incomplete => 3,
        }
    }
}

/// The flags that reproduce `bounds`, for replay commands.
pub fn flags(bounds: &Bounds) -> String {
    let mut out = format!(
        "--hosts {} --partitions {} --crashes {} --skew {} --drift {} --horizon {} \
         --strategy {} --expiry {}",
        bounds.hosts,
        bounds.partitions,
        bounds.crashes,
        bounds.skew,
        bounds.drift_ms,
        bounds.horizon,
        bounds.strategy,
        match bounds.expiry {
            ExpiryRule::Observed => "observed",
            ExpiryRule::Timestamp => "timestamp",
        },
    );
    for (flag, value) in [
        ("--shutdowns", bounds.shutdowns),
        ("--zombies", bounds.zombies),
        ("--pauses", bounds.pauses),
        ("--lost-replies", bounds.lost_replies),
        ("--delays", bounds.delays),
        ("--stale-reads", bounds.stale_reads),
        ("--late-replies", bounds.late_replies),
        ("--retries", bounds.retries),
        ("--throttled-reads", bounds.throttled_reads),
        ("--slow-drains", bounds.slow_drains),
        ("--stuck-calls", bounds.stuck_calls),
        ("--splits", bounds.splits),
    ] {
        if value > 0 {
            let _ = write!(out, " {flag} {value}");
        }
    }
    if bounds.stale_reads > 0 && bounds.stale_depth > 1 {
        let _ = write!(out, " --stale-depth {}", bounds.stale_depth);
    }
    if bounds.faults_per_step != 1 {
        let _ = write!(out, " --faults-per-step {}", bounds.faults_per_step);
    }
    if bounds.progress != 1 {
        let _ = write!(out, " --progress {}", bounds.progress);
    }
    if bounds.checkpoint_items > 0 {
        let _ = write!(out, " --checkpoint-items {}", bounds.checkpoint_items);
    }
    if bounds.deploy {
        out.push_str(" --deploy");
    }
    if let Some(liveness) = bounds.liveness {
        let _ = write!(out, " --liveness {liveness}");
    }
    if let Some(ms) = bounds.margin_ms {
        let _ = write!(out, " --margin {ms}ms");
    }
    if let Some(bug) = bounds.bug {
        let _ = write!(out, " --bug {bug}");
    }
    if bounds.unreduced {
        out.push_str(" --unreduced");
    }
    out
}

/// What is being checked, in one paragraph.
pub fn header(model: &PartitionModel, options: &Options) -> String {
    let b = &model.bounds;
    let count = |n: u8, one: &str, many: &str| counted(u64::from(n), one, many);
    let mut out = format!(
        "partition leases: {}, {}, {}; skew ±{} s, drift ±{} ms/s, horizon {} s\n",
        count(b.hosts, "host", "hosts"),
        count(b.partitions, "partition", "partitions"),
        count(b.crashes, "crash", "crashes"),
        b.skew,
        b.drift_ms,
        b.horizon,
    );
    let _ = writeln!(
        out,
        "  strategy {}, {} expiry, margin {}, {} liveness{}; faults: {}, {}, {}{}{}",
        b.strategy,
        // The rule the hosts run, which a variant may set (timestamp-skew runs CFP's).
        match model.config.expiry.rule {
            ExpiryRule::Observed => "observed",
            ExpiryRule::Timestamp => "timestamp",
        },
        // As the flag takes it: `--margin 4s` reads back `margin 4s`.
        model.config.expiry.safety_margin,
        model.config.liveness(),
        b.bug
            .map_or(String::new(), |bug| format!(", KNOWN-BAD VARIANT {bug}")),
        count(b.pauses, "pause", "pauses"),
        count(b.lost_replies, "lost reply", "lost replies"),
        count(b.delays, "delayed write", "delayed writes"),
        {
            let mut more = String::new();
            for (n, one, many) in [
                (b.shutdowns, "graceful shutdown", "graceful shutdowns"),
                (b.zombies, "zombie", "zombies"),
                (b.stale_reads, "stale read", "stale reads"),
                (b.late_replies, "late reply", "late replies"),
                (b.retries, "retried write", "retried writes"),
                (
                    b.throttled_reads,
                    "burst of throttled reads",
                    "bursts of throttled reads",
                ),
                (b.slow_drains, "slow drain", "slow drains"),
                (b.stuck_calls, "stuck call", "stuck calls"),
            ] {
                if n > 0 {
                    let _ = write!(more, ", {}", count(n, one, many));
                }
            }
            if b.faults_per_step > 1 {
                let _ = write!(
                    more,
                    "; up to {} faults in one host step",
                    b.faults_per_step
                );
            }
            more
        },
        if b.splits > 0 {
            format!(", {} of partition 0", count(b.splits, "split", "splits"))
        } else {
            String::new()
        },
    );
    if b.deploy {
        let _ = writeln!(
            out,
            "  a deploy half done: h0 leases for {} ms, every other host for {} ms",
            model.config.expiry.duration.as_millis(),
            model
                .deployed
                .as_ref()
                .map_or(0, |c| c.expiry.duration.as_millis()),
        );
    }
    let _ = writeln!(
        out,
        "  liveness checked {} s after the last fault; balance {} s after the last join, \
         {} s after a restart that waits out its earlier life{}{}",
        model.liveness_ticks,
        model.balance_ticks,
        model.rejoin_balance_ticks,
        if b.delays > 0 && b.crashes + b.shutdowns > 0 {
            format!(
                ", {} s after a restarted host's held write lands",
                model.relive_balance_ticks
            )
        } else {
            String::new()
        },
        if b.splits > 0 {
            format!(" and {} s after the last split", model.split_balance_ticks)
        } else {
            String::new()
        }
    );
    let _ = write!(
        out,
        "  owners know their leases {} s after balance is checked",
        model.learn_ticks
    );
    if b.stuck_calls > 0 {
        let _ = write!(
            out,
            "; a lease given up past a stuck call's stop timeout reaches its new owner within \
             {} s, and balance is checked {} s after it",
            model.gift_ticks,
            model.gift_ticks.saturating_add(model.balance_ticks)
        );
    }
    let _ = writeln!(out);
    let setups = (2 * u32::from(b.skew) + 1).pow(u32::from(b.hosts.saturating_sub(1)));
    if model.fold_wall_clocks && setups > 1 {
        let _ = writeln!(
            out,
            "  wall clocks: {setups} skew set-ups checked as one (observed expiry never reads a \
             wall clock; --unreduced explores each)"
        );
    }
    let _ = writeln!(
        out,
        "  {} search on {} thread{}{}",
        match options.search {
            Search::Bfs => "breadth-first".to_string(),
            Search::Dfs => "depth-first".to_string(),
            Search::Walks { seed } => format!("random walks (seed {seed})"),
        },
        options.threads,
        if options.threads == 1 { "" } else { "s" },
        match options.timeout {
            Some(t) => format!(", time limit {} s", t.as_secs()),
            None => String::new(),
        }
    );
    out
}

/// One progress line.
pub fn progress_line(p: &check::Progress) -> String {
    if let Some(walks) = p.walks {
        return format!(
            "  … {} states in {} walks, depth {}, {:.0} s",
            thousands(p.states),
            thousands(walks as usize),
            p.depth,
            p.seconds
        );
    }
    format!(
        "  … {} states, {} unique, depth {}, {:.0} s",
        thousands(p.states),
        thousands(p.unique),
        p.depth,
        p.seconds
    )
}

/// The flags that reproduce lock-model `bounds`, for replay commands.
pub fn lock_flags(bounds: &LockBounds) -> String {
    let mut out = format!(
        "--hosts {} --partitions {} --crashes {} --skew {} --drift {} --horizon {}",
        bounds.clients, bounds.docs, bounds.crashes, bounds.skew, bounds.drift_ms, bounds.horizon,
    );
    let d = super::defaults::lock_bounds();
    for (flag, value, default) in [
        ("--pauses", bounds.pauses, d.pauses),
        ("--lost-replies", bounds.lost_replies, d.lost_replies),
        ("--delays", bounds.delays, d.delays),
        ("--give-backs", bounds.give_backs, d.give_backs),
        ("--renewals", bounds.renewals, d.renewals),
        ("--abandon-delay", bounds.abandon_delay, d.abandon_delay),
        ("--batch", bounds.batch, d.batch),
        ("--max-dequeue", bounds.max_dequeue, d.max_dequeue),
        ("--late-replies", bounds.late_replies, d.late_replies),
        ("--claim-failures", bounds.claim_failures, d.claim_failures),
        ("--stale-reads", bounds.stale_reads, d.stale_reads),
        ("--stale-depth", bounds.stale_depth, d.stale_depth),
        ("--retries", bounds.retries, d.retries),
        (
            "--dead-letter-deletes",
            bounds.dead_letter_deletes,
            d.dead_letter_deletes,
        ),
        ("--overruns", bounds.overruns, d.overruns),
        ("--lock-duration", bounds.lock_ticks, d.lock_ticks),
    ] {
        if value != default {
            let _ = write!(out, " {flag} {value}");
        }
    }
    if bounds.large {
        out.push_str(" --large");
    }
    if bounds.claims {
        out.push_str(" --claims");
    }
    if let Some(bug) = bounds.bug {
        let _ = write!(out, " --bug {bug}");
    }
    out
}

/// What a queue or item-lease check covers, in one paragraph.
pub fn lock_header(kind: LockKind, b: &LockBounds, liveness: u8, options: &Options) -> String {
    let count = |n: u8, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let (clients, docs) = match kind {
        LockKind::Queue => (
            count(b.clients, "consumer", "consumers"),
            count(b.docs, "message", "messages"),
        ),
        LockKind::Items => (
            count(b.clients, "holder", "holders"),
            count(b.docs, "item", "items"),
        ),
    };
    let mut out = format!(
        "{}: {clients}, {docs}, {}; skew ±{} s, drift ±{} ms/s, horizon {} s\n",
        match kind {
            LockKind::Queue => "work queue",
            LockKind::Items => "item leases",
        },
        count(b.crashes, "crash", "crashes"),
        b.skew,
        b.drift_ms,
        b.horizon,
    );
    let _ = writeln!(
        out,
        "  locks of {} s, observed expiry{}; faults: {}, {}, {}{}",
        b.lock_duration().as_millis() / 1000,
        b.bug
            .map_or(String::new(), |bug| format!(", KNOWN-BAD VARIANT {bug}")),
        count(b.pauses, "pause", "pauses"),
        count(b.lost_replies, "lost reply", "lost replies"),
        count(b.delays, "delayed write", "delayed writes"),
        [
            (b.stale_reads, "stale read", "stale reads"),
            (b.late_replies, "late reply", "late replies"),
            (b.retries, "retried write", "retried writes"),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| format!(", {}", count(n, one, many)))
        .collect::<String>(),
    );
    if b.is_claims() {
        let _ = writeln!(
            out,
            "  the message is a large payload kept in a claim store, produced by c0; consumers sweep as they poll{}",
            if b.claim_failures > 0 {
                format!(
                    "; {} claim-store call{} may fail",
                    b.claim_failures,
                    if b.claim_failures == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            }
        );
    } else if b.is_large() {
        let _ = writeln!(
            out,
            "  the message is a large payload in two parts, produced by c0; consumers sweep as they poll"
        );
    }
    let _ = writeln!(
        out,
        "  no-loss checked {liveness} s after the last fault, restart, give-back or renewal; {} search on {} thread{}",
        match options.search {
            Search::Bfs => "breadth-first".to_string(),
            Search::Dfs => "depth-first".to_string(),
            Search::Walks { seed } => format!("random walks (seed {seed})"),
        },
        options.threads,
        if options.threads == 1 { "" } else { "s" },
    );
    out
}

/// The verdict table, the counts, and every counterexample with its replay command;
/// `command` is the check's command line without `--replay`.
pub fn render_report<M>(model: &M, report: &Report<M::State, M::Action>, command: &str) -> String
where
    M: Checkable + Explain,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let mut out = String::new();
    for v in &report.verdicts {
        let _ = writeln!(out, "  {:<15} {}", v.outcome.word(), v.property);
    }
    let p = &report.progress;
    // A discovery's stop speaks for itself in the counterexample that follows.
    let why = match report.cut {
        None | Some(Cut::Discovery) => String::new(),
        Some(cut) => format!(" {}", cut.reason()),
    };
    let counted = match p.walks {
        Some(walks) => format!("{} walks", thousands(walks as usize)),
        None => format!("{} unique", thousands(p.unique)),
    };
    let _ = writeln!(
        out,
        "{} states, {counted}, depth {}, {:.1} s: {}",
        thousands(p.states),
        p.depth,
        p.seconds,
        if report.complete() {
            "complete, every state within the bounds was explored".to_string()
        } else {
            format!("INCOMPLETE, stopped early{why}; what is not a counterexample is not proven")
        }
    );
    let violated: Vec<_> = report
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Counterexample)
        .collect();
    for (i, v) in violated.iter().enumerate() {
        let (Some(path), Some(encoded)) = (&v.path, &v.encoded) else {
            continue;
        };
        let _ = writeln!(out);
        if i == 0 {
            let _ = writeln!(
                out,
                "COUNTEREXAMPLE to \"{}\" ({} steps):",
                v.property,
                path.len() - 1
            );
            out.push_str(&trace::render(model, path));
        } else {
            let _ = writeln!(out, "COUNTEREXAMPLE to \"{}\" too.", v.property);
        }
        let _ = writeln!(out, "replay: {command} --replay {encoded}");
    }
    out
}

/// How the report reads as an exit status.
pub fn verdict<S, A>(report: &Report<S, A>) -> Verdict {
    if report.violated() {
        Verdict::Violated
    } else if report.complete() {
        Verdict::Proven
    } else {
        Verdict::Incomplete
    }
}

/// Replays an encoded path: its trace, and the `always` properties its last state
/// breaks.
pub fn replay<M>(model: &M, encoded: &str) -> Result<(String, bool), String>
where
    M: Checkable + Explain,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let path = check::replay(model, encoded).ok_or_else(|| {
        format!(
            "--replay {encoded:?} is not a path of this model; \
             replay with exactly the flags the check printed"
        )
    })?;
    let mut out = trace::render(model, &path);
    let last = &path[path.len() - 1].0;
    let broken = check::broken(model, last);
    if broken.is_empty() {
        out.push_str("every always-property holds at the last state\n");
    }
    for name in &broken {
        let _ = writeln!(out, "the last state BREAKS \"{name}\"");
    }
    Ok((out, !broken.is_empty()))
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` and the noun for it: "1 host", "2 hosts".
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(813_210), "813,210");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn replay_flags_name_every_setting_that_differs_from_the_cli_defaults() {
        let bounds = Bounds {
            lost_replies: 1,
            bug: Some(leasehold_model::Bug::BlindAcquire),
            ..Bounds::default()
        };
        let flags = flags(&bounds);
        assert!(flags.contains("--lost-replies 1"));
        assert!(flags.contains("--bug blind-acquire"));
        assert!(flags.contains("--horizon 8"));
    }
}
