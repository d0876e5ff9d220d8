//! `leasehold sim` from the outside: the report formats, exit codes and replay.

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .arg("sim")
        .args(args)
        .output()
        .expect("the leasehold binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn json_has_one_run_per_strategy_with_the_documented_fields() {
    let out = sim(&[
        "scale-out",
        "--hosts",
        "4",
        "--partitions",
        "12",
        "--duration",
        "3m",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = json["runs"].as_array().unwrap();
    let strategies: Vec<&str> = runs
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(strategies, ["cfp", "handoff"]);
    for field in [
        "strategy",
        "seed",
        "converge_s",
        "moves",
        "min_moves",
        "max_imbalance",
        "duplicate_s",
        "duplicate_events",
        "store_requests_per_host_min",
        "ru_per_host_min",
        "events_processed",
        "max_lag_s",
    ] {
        assert!(
            runs.iter().all(|r| r.get(field).is_some()),
            "{field} missing"
        );
    }
    assert_eq!(runs[1]["min_moves"], 9);
}

#[test]
fn the_table_puts_strategies_side_by_side() {
    let out = sim(&[
        "crash",
        "--hosts",
        "4",
        "--partitions",
        "8",
        "--affected",
        "1",
        "--duration",
        "2m",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("cfp") && stdout.contains("handoff"));
    assert!(stdout.contains("converge (s)") && stdout.contains("RU / host / min"));
}

#[test]
fn svg_draws_one_timeline_per_strategy() {
    let dir = std::env::temp_dir().join(format!("leasehold-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("timeline.svg");
    let out = sim(&[
        "flapping-host",
        "--hosts",
        "3",
        "--partitions",
        "6",
        "--duration",
        "3m",
        "--svg",
        base.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for strategy in ["cfp", "handoff"] {
        let svg = std::fs::read_to_string(dir.join(format!("timeline-{strategy}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("h00 crashes"));
        // Every number on the axes is whole: no partition "2.5" nor time "60.0".
        let labels = svg.split("</text>").filter_map(|t| t.rsplit('>').next());
        for label in labels.map(str::trim) {
            assert!(
                !(label.contains('.') && label.parse::<f64>().is_ok()),
                "{label}"
            );
        }
        // The owners' legend stands right of every drawn lease, not on them: its
        // names start right of where any lease's bar ends (its swatches, just left
        // of the names, aside).
        let legend_x: Vec<f64> = svg
            .split("<text ")
            .filter(|t| {
                let content = t.split('>').nth(1).unwrap_or("").split('<').next();
                content.is_some_and(|c| c.trim().starts_with("h0") && !c.contains(' '))
            })
            .filter_map(|t| t.split('"').nth(1)?.parse().ok())
            .collect();
        let names_from = legend_x.iter().copied().fold(f64::MAX, f64::min);
        let attr = |tag: &str, name: &str| -> Option<f64> {
            tag.split(&format!(" {name}=\""))
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()
        };
        let bars_to = svg
            .split("<rect")
            .skip(1)
            .filter_map(|r| Some((attr(r, "x")?, attr(r, "width")?)))
            .filter(|&(x, w)| !(x == 0.0 && w >= 1_400.0) && x < names_from - 20.0)
            .map(|(x, w)| x + w)
            .fold(0.0, f64::max);
        assert!(
            !legend_x.is_empty() && bars_to < names_from,
            "legend names from {names_from}, lease bars up to {bars_to}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_violation_exits_1_and_its_replay_command_reproduces_it() {
    assert_violation_replays(
        &[
            "crash",
            "--hosts",
            "4",
            "--partitions",
            "16",
            "--affected",
            "1",
            "--duration",
            "3m",
            "--bug",
            "same-epoch",
            "--strategy",
            "handoff",
        ],
        "fencing",
    );
}

#[test]
fn bad_flags_are_usage_errors_with_exit_2() {
    for (args, message) in [
        (vec!["meteor-strike"], "unknown scenario"),
        (vec!["steady", "--faults", "meteor=1"], "unknown fault"),
        (vec!["steady", "--faults", "crash=-1"], "must be a number"),
        (vec!["scale-out", "--hosts", "3", "--from", "3"], "--from"),
        (vec!["steady", "--strategy", "greedy"], "unknown strategy"),
        (vec!["steady", "--renew", "90s"], "invalid lease settings"),
        (vec!["steady", "--bug", "nonsense"], "nonsense"),
        (vec!["swarm", "--seeds", "9..3"], "--seeds"),
        (
            vec!["queue", "--partitions", "4"],
            "--partitions does not apply",
        ),
        (vec!["queue", "--bug", "same-epoch"], "dequeue-seed"),
        (vec!["queue", "--messages", "0"], "messages"),
        (
            vec!["queue-crash", "--lock", "1s"],
            "invalid consumer settings",
        ),
    ] {
        let out = sim(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(message),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// A swarm of a known-bad variant exits 1 and says how to rerun a failing seed.
#[test]
fn a_swarm_of_a_known_bad_variant_exits_1_with_a_rerun_per_failing_seed() {
    let out = sim(&[
        "swarm",
        "--seeds",
        "0..10",
        "--bug",
        "dequeue-seed",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    // Exclusivity, among what else the variant breaks (a holder that believes its
    // lock excludes others takes a completion's 404 for its own, and deletes the
    // payload of a message another holder dead-lettered).
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("violations:") && l.contains("exclusivity")),
        "{stdout}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--bug dequeue-seed") && stderr.contains("or: leasehold sim swarm --seeds"),
        "{stderr}"
    );
    let bad = sim(&["swarm", "--seeds", "0..10", "--bug", "blind-lease"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("the queue's are"));
}

#[test]
fn a_swarm_prints_its_summary() {
    let out = sim(&["swarm", "--seeds", "0..20", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("swarm: 20 seeds"));
    assert!(stdout.contains("violations: none"));
    assert!(stdout.contains("slowest convergence"));
}

#[test]
fn a_queue_run_prints_what_became_of_the_messages() {
    let out = sim(&["queue-poison", "--messages", "50", "--duration", "2m"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("dead-lettered (poison)"), "{stdout}");
    let json = sim(&[
        "queue-poison",
        "--messages",
        "50",
        "--duration",
        "2m",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let run = &json["runs"][0];
    assert_eq!(run["enqueued"], 50);
    assert_eq!(run["dead_lettered_poison"], 5);
    assert_eq!(run["completed"], 45);
}

/// Runs a scenario that must break `property`, then its replay command, and checks
/// both exit 1 with the same trace.
fn assert_violation_replays(args: &[&str], property: &str) {
    let mut first = args.to_vec();
    first.push("--json");
    let out = sim(&first);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("VIOLATION") && stderr.contains(property),
        "{stderr}"
    );
    let replay = stderr
        .lines()
        .find_map(|l| l.strip_prefix("replay: leasehold sim "))
        .expect("a replay line");
    let mut again: Vec<&str> = replay.split_whitespace().collect();
    again.push("--json");
    let second = sim(&again);
    assert_eq!(second.status.code(), Some(1));
    let hash = |o: &Output| {
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        json["runs"][0]["trace_hash"].as_str().unwrap().to_string()
    };
    assert_eq!(hash(&out), hash(&second));
}

#[test]
fn a_queue_violation_exits_1_and_its_replay_command_reproduces_it() {
    assert_violation_replays(
        &[
            "queue",
            "--messages",
            "40",
            "--duration",
            "2m",
            "--bug",
            "dequeue-seed",
        ],
        "exclusivity",
    );
}

/// A violation that needs drifting clocks, a short lock and fast polls replays with
/// all three.
#[test]
fn a_clock_violation_replays_with_its_drift_lock_and_poll() {
    assert_violation_replays(
        &[
            "queue",
            "--messages",
            "120",
            "--duration",
            "5m",
            "--lock",
            "3s",
            "--poll",
            "200ms",
            "--faults",
            "drift=100000",
            "--bug",
            "lock-no-drift",
            // Locks read on every poll, the widest window for the race; seed 9 is the
            // first of seeds 1-40 whose timing breaks it.
            "--lock-watch",
            "0s",
            "--seed",
            "9",
        ],
        "exclusivity",
    );
}

/// A swarm draws every seed's scenario, strategy, sizes, settings and faults: a flag
/// for any of them was ignored without a word (byte-identical output), and with no
/// `--seeds` it quietly ran 100. Each is now a usage error.
#[test]
fn a_swarm_refuses_the_flags_it_does_not_use_and_needs_its_seeds() {
    for flags in [
        &["--hosts", "5"][..],
        &["--partitions", "5"],
        &["--strategy", "cfp"],
        &["--duration", "5m"],
        &["--faults", "crash=3"],
        &["--svg", "swarm.svg"],
        &["--seed", "7"],
    ] {
        let mut args = vec!["swarm", "--seeds", "0..2", "--quiet"];
        args.extend_from_slice(flags);
        let out = sim(&args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("{} does not apply to swarm", flags[0])),
            "{flags:?}: {stderr}"
        );
    }
    let out = sim(&["swarm", "--quiet"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("needs --seeds"));
}

/// Every failing seed of a swarm is listed with its replay: the summary counted 6
/// failing seeds and listed 5. Only the trace tails stop after the first few, and a
/// line says so.
#[test]
fn a_swarm_lists_every_failing_seed_and_says_where_traces_stop() {
    let out = sim(&[
        "swarm",
        "--seeds",
        "0..12",
        "--bug",
        "dequeue-seed",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let counted: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("violations: "))
        .and_then(|l| l.rsplit(" in ").next())
        .and_then(|l| l.trim_end_matches(" seeds").parse().ok())
        .unwrap_or_else(|| panic!("a count of failing seeds: {stdout}"));
    assert!(counted > 5, "enough failing seeds to cut: {counted}");
    let stderr = text(&out.stderr);
    let listed = stderr.lines().filter(|l| l.starts_with("seed ")).count();
    assert_eq!(listed, counted, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "trace tails shown for the first 5 of {counted} failing seeds"
        )),
        "{stderr}"
    );
}

/// Counts of one take the singular: "1 hosts", "1 seeds" read as typos.
#[test]
fn a_count_of_one_is_singular() {
    let out = sim(&["swarm", "--seeds", "5..6", "--quiet"]);
    assert!(
        text(&out.stdout).starts_with("swarm: 1 seed from 5"),
        "{}",
        text(&out.stdout)
    );
    let out = sim(&[
        "steady",
        "--hosts",
        "1",
        "--partitions",
        "1",
        "--duration",
        "1m",
        "--strategy",
        "handoff",
    ]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains(" · 1 host · 1 partition · "), "{stdout}");
}

/// Messages name owners in the domain's words: the fencing message read
/// `to Some("h08") ... not above None's epoch 0`.
#[test]
fn a_fencing_violation_names_owners_without_debug_formatting() {
    let out = sim(&[
        "crash",
        "--seed",
        "1",
        "--bug",
        "same-epoch",
        "--strategy",
        "cfp",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("the epoch no longer fences"))
        .unwrap_or_else(|| panic!("a fencing violation: {stderr}"));
    assert!(!line.contains("Some(") && !line.contains("None"), "{line}");
    assert!(line.contains("nobody's epoch"), "{line}");
}

/// A queue run's violation list says how many it left out, as a lease run's does
/// (`violations 228` in the table, 20 listed, and nothing said before).
#[test]
fn a_cut_violation_list_says_how_many_it_left_out() {
    let out = sim(&["queue", "--bug", "dequeue-seed"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let listed = err
        .lines()
        .filter(|l| l.contains(" at ") && l.contains(" s: "))
        .count();
    let total: u64 = text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("violations"))
        .and_then(|n| n.trim().parse().ok())
        .expect("the table counts violations");
    assert!(total > listed as u64, "{total} counted, {listed} listed");
    assert!(
        err.contains(&format!("… and {} more", total - listed as u64)),
        "{err}"
    );
}

/// Queue traces name requests as flags are written (`c1 sends claim`), not `Claim`.
#[test]
fn a_queue_trace_names_its_requests_in_words() {
    let err = text(&sim(&["queue", "--bug", "dequeue-seed"]).stderr);
    assert!(err.contains(" sends claim work:m"), "{err}");
    assert!(!err.contains(" sends Claim"), "{err}");
}

/// The rows indented under `protocol RU` sum to it; checkpoints, which it leaves
/// out, stand beside it (they were indented under it).
#[test]
fn the_rows_under_protocol_ru_sum_to_it() {
    let out = text(&sim(&["scale-out", "--strategy", "cfp"]).stdout);
    let value = |line: &str| -> f64 {
        line.split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a figure in {line:?}"))
    };
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("protocol RU"))
        .expect("a protocol row");
    let total = value(lines[at]);
    let parts: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("  "))
        .copied()
        .collect();
    let sum: f64 = parts.iter().map(|l| value(l)).sum();
    assert!(
        (sum - total).abs() < 0.05 * parts.len() as f64,
        "{sum} against {total}:\n{out}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("checkpoint RU")),
        "checkpoints beside the total:\n{out}"
    );
}
