//! The defaults `--help` shows, read from the settings the commands run with.
//!
//! Help once stated defaults by hand, and they drifted: `sim queue --help` said
//! `--fail-one-in` defaults to 0 while every queue run failed one handler run in 20.
//! Now no doc comment states a default: [`annotate`] appends `[default: …]` to each
//! flag's help from the same values `check` and `sim` start from ([`check_bounds`],
//! [`lock_bounds`], [`SimConfig::scenario`], [`QueueConfig::scenario`]), listing
//! where scenarios differ (`300s; steady: 0s`).

use crate::sim::SimConfig;
use crate::sim::config::Scenario;
use crate::sim::queue::{QueueConfig, QueueScenario};
use clap::Command;
use leasehold_model::{Bounds, Bug, LockBounds, LockBug, LockKind};
use serde::Serialize;
use serde_json::{Map, Value};

/// How far past its liveness bound a partition check explores when no `--horizon`
/// is given: a few seconds for the properties judged at the bound to be judged.
pub const PARTITION_HORIZON_PAST_LIVENESS: u8 = 3;
/// The same for the queue and item-lease checks.
pub const LOCK_HORIZON_PAST_LIVENESS: u8 = 1;
/// The longest horizon a check picks on its own, in seconds.
pub const HORIZON_CAP: u8 = 30;
/// What `--liveness` left unset means, in `check` and `sim` alike.
const LIVENESS_UNSET: &str = "session for handoff, lease for the rest";
/// How long random walks (`--walks`), and the search for a variant out of the model's
/// reach (`LeastBound::out_of_reach`), run when neither `--timeout` nor `--max-states`
/// is given.
pub const WALK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// Checker threads when `--threads` is not given.
pub const THREADS: u16 = 2;
/// The share of the memory available when a check starts that it may hold when
/// `--max-memory` is not given, in percent: the rest is for the system and the
/// report.
pub const MEMORY_SHARE_PERCENT: u64 = 90;

/// The bounds `check partitions` runs with where a flag is not given. The model's
/// own default allows a lost reply and a delayed write; the command line starts
/// without them, so that a first check answers in seconds.
///
/// ```
/// let bounds = leasehold_sims::cli::defaults::check_bounds();
/// assert_eq!((bounds.hosts, bounds.partitions, bounds.lost_replies), (2, 2, 0));
/// ```
pub fn check_bounds() -> Bounds {
    Bounds::quiet()
}

/// The bounds `check queue` and `check items` run with where a flag is not given
/// (as [`check_bounds`], without lost replies or delayed writes).
///
/// ```
/// assert_eq!(leasehold_sims::cli::defaults::lock_bounds().clients, 2);
/// ```
pub fn lock_bounds() -> LockBounds {
    LockBounds {
        lost_replies: 0,
        delays: 0,
        ..LockBounds::default()
    }
}

/// `partitions`, or `partitions; queue and items: locks` when they differ.
fn both(partitions: impl ToString, locks: impl ToString) -> String {
    let (p, l) = (partitions.to_string(), locks.to_string());
    if p == l {
        p
    } else {
        format!("{p}; queue and items: {l}")
    }
}

/// The default text of each flag of `check` and `explore` that has no clap default
/// (those that do show theirs, from the same values), by argument id.
pub fn model_defaults() -> Vec<(&'static str, String)> {
    let (b, l) = (check_bounds(), lock_bounds());
    vec![
        ("hosts", both(b.hosts, l.clients)),
        ("partitions", both(b.partitions, l.docs)),
        ("crashes", both(b.crashes, l.crashes)),
        ("shutdowns", b.shutdowns.to_string()),
        ("zombies", b.zombies.to_string()),
        ("skew", both(b.skew, l.skew)),
        ("splits", b.splits.to_string()),
        (
            "horizon",
            format!(
                "the liveness bound + {PARTITION_HORIZON_PAST_LIVENESS} s; queue and items: \
                 + {LOCK_HORIZON_PAST_LIVENESS} s; at most {HORIZON_CAP} s"
            ),
        ),
        ("strategy", b.strategy.name().to_string()),
        (
            "margin",
            "none; with `--expiry timestamp` that is CFP as shipped".to_string(),
        ),
        ("liveness", LIVENESS_UNSET.to_string()),
        ("pauses", both(b.pauses, l.pauses)),
        ("lost_replies", both(b.lost_replies, l.lost_replies)),
        ("delays", both(b.delays, l.delays)),
        ("stale_reads", both(b.stale_reads, l.stale_reads)),
        ("stale_depth", both(b.stale_depth, l.stale_depth)),
        ("late_replies", b.late_replies.to_string()),
        ("retries", both(b.retries, l.retries)),
        ("throttled_reads", b.throttled_reads.to_string()),
        ("faults_per_step", b.faults_per_step.to_string()),
        ("slow_drains", b.slow_drains.to_string()),
        ("stuck_calls", b.stuck_calls.to_string()),
        ("progress", b.progress.to_string()),
        ("checkpoint_items", b.checkpoint_items.to_string()),
        ("give_backs", l.give_backs.to_string()),
        ("renewals", l.renewals.to_string()),
        ("abandon_delay", l.abandon_delay.to_string()),
        ("batch", l.batch.to_string()),
        ("max_dequeue", l.max_dequeue.to_string()),
        ("dead_letter_deletes", l.dead_letter_deletes.to_string()),
        ("overruns", l.overruns.to_string()),
        ("lock_duration", l.lock_ticks.to_string()),
        ("claim_failures", l.claim_failures.to_string()),
        (
            "threads",
            format!(
                "{THREADS}; 1 for a known-bad variant's exhaustive search, which then prints the \
                 same counterexample on every run"
            ),
        ),
        (
            "max_memory",
            format!(
                "{MEMORY_SHARE_PERCENT} % of the memory available when the check starts, where \
                 the system says (Linux)"
            ),
        ),
    ]
}

/// What a setting left unset means, for the settings whose default is a rule rather
/// than a value.
fn unset_means(key: &str) -> &'static str {
    match key {
        "settle" => "computed from the intervals",
        "liveness" => LIVENESS_UNSET,
        "deploy-expiration" => "the old build's",
        "leave-notice" => "an acquire interval and a leave poll",
        "checkpoint-every" => "every batch",
        "checkpoint-items" => "every batch",
        "lock-watch" => "a quarter of the lock",
        _ => "none",
    }
}

fn settings(config: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn text_of(key: &str, value: &Value) -> String {
    match value {
        Value::Null => unset_means(key).to_string(),
        Value::String(text) if text.is_empty() => "none".to_string(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The value most scenarios have, then each scenario that differs: `300s; steady: 0s`.
fn spread(key: &str, values: &[(&'static str, Value)]) -> Option<String> {
    let texts: Vec<(&str, String)> = values
        .iter()
        .map(|(name, value)| (*name, text_of(key, value)))
        .collect();
    // The most common value; on a tie, the earlier scenario's.
    let common = texts
        .iter()
        .enumerate()
        .max_by_key(|(i, (_, t))| {
            let count = texts.iter().filter(|(_, u)| u == t).count();
            (count, std::cmp::Reverse(*i))
        })?
        .1
        .1
        .clone();
    let mut out = common.clone();
    for (name, text) in &texts {
        if *text != common {
            out.push_str(&format!("; {name}: {text}"));
        }
    }
    Some(out)
}

/// The default text of each flag of `sim`, by argument id, from every scenario's
/// own settings.
pub fn sim_defaults() -> Vec<(String, String)> {
    let leases: Vec<(&'static str, Map<String, Value>)> = Scenario::ALL
        .iter()
        .map(|s| (s.name(), settings(&SimConfig::scenario(*s, 1))))
        .collect();
    let queues: Vec<(&'static str, Map<String, Value>)> = QueueScenario::ALL
        .iter()
        .map(|s| (s.name(), settings(&QueueConfig::scenario(*s, 1))))
        .collect();
    let mut keys: Vec<&String> = leases
        .iter()
        .chain(&queues)
        .flat_map(|(_, map)| map.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for key in keys {
        let of = |runs: &[(&'static str, Map<String, Value>)]| {
            let values: Vec<(&'static str, Value)> = runs
                .iter()
                .filter_map(|(name, map)| Some((*name, map.get(key)?.clone())))
                .collect();
            spread(key, &values)
        };
        let text = match (of(&leases), of(&queues)) {
            (Some(l), Some(q)) if l == q => l,
            (Some(l), Some(q)) => format!("{l}; queue scenarios: {q}"),
            (Some(only), None) | (None, Some(only)) => only,
            (None, None) => continue,
        };
        let text = match key.as_str() {
            "margin" => format!("{text}; with `--expiry timestamp`: none, as CFP ships"),
            _ => text,
        };
        out.push((key.replace('-', "_"), text));
    }
    out
}

/// The known-bad variants `--bug` takes, from the model's own lists: the help named
/// them by hand and fell behind (`delete-parent-first`, then `claim-by-name`).
fn variants(lock_kinds: &[(LockKind, &str)]) -> String {
    let names = |bugs: &mut dyn Iterator<Item = &'static str>| bugs.collect::<Vec<_>>().join(", ");
    let mut out = format!(
        "partitions: {}",
        names(&mut Bug::ALL.iter().map(|b| b.name()))
    );
    for (kind, label) in lock_kinds {
        let list = names(
            &mut LockBug::ALL
                .iter()
                .filter(|b| b.applies_to(*kind))
                .map(|b| b.name()),
        );
        out.push_str(&format!("; {label}: {list}"));
    }
    out
}

/// `--bug`'s list for `check` and `explore`, with those the model does not show in
/// seconds.
pub fn check_variants() -> String {
    let far: Vec<&str> = Bug::ALL
        .iter()
        .filter(|b| b.least_bound().out_of_reach)
        .map(|b| b.name())
        .chain(
            LockBug::ALL
                .iter()
                .filter(|b| b.least_bound().out_of_reach)
                .map(|b| b.name()),
        )
        .collect();
    format!(
        "{}; not shown in seconds: {}",
        variants(&[(LockKind::Queue, "queue"), (LockKind::Items, "items")]),
        far.join(", ")
    )
}

/// `--bug`'s list for `sim`.
pub fn sim_variants() -> String {
    variants(&[(LockKind::Queue, "queue scenarios")])
}

/// Appends `[tag: text]` to the help of argument `id` of `command`, if it has one.
fn append_tagged(command: Command, id: &str, tag: &str, text: &str) -> Command {
    let Some(arg) = command.get_arguments().find(|a| a.get_id() == id) else {
        return command;
    };
    // Clap shows its own default; a second one would be noise, or a contradiction.
    if tag == "default" && !arg.get_default_values().is_empty() {
        return command;
    }
    command.mut_arg(id, |arg| {
        let tail = format!(" [{tag}: {text}]");
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        let long = arg.get_long_help().map(ToString::to_string);
        let arg = arg.help(format!("{help}{tail}"));
        match long {
            Some(long) => arg.long_help(format!("{long}{tail}")),
            None => arg,
        }
    })
}

/// Appends `[default: text]` to the help of each argument of `command` named in
/// `defaults` (and its long help, where it has one).
fn append<'a>(
    mut command: Command,
    defaults: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Command {
    for (id, text) in defaults {
        command = append_tagged(command, id, "default", text);
    }
    command
}

/// The `leasehold` command line with every default in its help read from the code:
/// `check` and `explore` from the bounds they run with, `sim` from each scenario's
/// settings.
pub fn annotate(command: Command) -> Command {
    let model = model_defaults();
    let sim = sim_defaults();
    let model = || model.iter().map(|(id, text)| (*id, text.as_str()));
    let (check_bugs, sim_bugs) = (check_variants(), sim_variants());
    command
        .mut_subcommand("check", |c| {
            append_tagged(append(c, model()), "bug", "variants", &check_bugs)
        })
        .mut_subcommand("explore", |c| {
            append_tagged(append(c, model()), "bug", "variants", &check_bugs)
        })
        .mut_subcommand("sim", |c| {
            let c = append_tagged(c, "bug", "variants", &sim_bugs);
            append(
                c,
                sim.iter()
                    // The scenario is the argument itself; a variant has no default.
                    .filter(|(id, _)| !["scenario", "bug"].contains(&id.as_str()))
                    .map(|(id, text)| (id.as_str(), text.as_str())),
            )
        })
}

/// Every argument of `command` and its subcommands whose help states a default by
/// hand (`[default: …]` or `[defaults: …]` in its doc comment), by
/// `subcommand --flag`. Clap's own `default_value` is not help text and is not
/// listed.
pub fn stated_by_hand(command: &Command) -> Vec<String> {
    let mut found = Vec::new();
    for arg in command.get_arguments() {
        let texts = [arg.get_help(), arg.get_long_help()];
        if texts
            .iter()
            .flatten()
            .any(|t| t.to_string().contains("[default"))
        {
            found.push(format!("{} --{}", command.get_name(), arg.get_id()));
        }
    }
    for sub in command.get_subcommands() {
        found.extend(stated_by_hand(sub));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Arg;

    #[test]
    fn a_default_written_into_a_doc_comment_is_found() {
        let cli = Command::new("leasehold").subcommand(
            Command::new("sim")
                .arg(Arg::new("poll").long("poll").help("Polls [default: 5s]"))
                .arg(Arg::new("lock").long("lock").help("The lock")),
        );
        assert_eq!(stated_by_hand(&cli), vec!["sim --poll".to_string()]);
    }

    #[test]
    fn a_queue_run_fails_one_handler_run_in_twenty_and_help_says_so() {
        let sim = sim_defaults();
        let text = |id: &str| sim.iter().find(|(i, _)| i == id).map(|(_, t)| t.clone());
        assert_eq!(text("fail_one_in").as_deref(), Some("20"));
        assert_eq!(
            text("poll").as_deref(),
            Some("5s; queue scenarios: 2s"),
            "a consumer polls sooner than a lease handler"
        );
        assert_eq!(text("warmup").as_deref(), Some("300s; steady: 0s"));
        assert_eq!(text("poison_every").as_deref(), Some("0; queue-poison: 10"));
    }

    #[test]
    fn the_defaults_a_check_states_are_those_it_runs() {
        let model = model_defaults();
        let text = |id: &str| model.iter().find(|(i, _)| *i == id).map(|(_, t)| t.clone());
        assert_eq!(text("lost_replies").as_deref(), Some("0"));
        assert_eq!(text("hosts"), Some(check_bounds().hosts.to_string()));
        assert_ne!(
            Bounds::default().lost_replies,
            check_bounds().lost_replies,
            "the model's own default is not what the command line runs"
        );
    }
}
