//! `leasehold balance`, run as an operator would run it.

use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const NOW: &str = "2026-11-21T12:00:00Z";
const FRESH: &str = "2026-11-21T12:00:00Z";
const YEAR_AGO: &str = "2025-11-21T12:00:00Z";

fn leasehold(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // A command that refuses its arguments exits without reading stdin: a broken
    // pipe here is expected, not a failure.
    let _ = input.write_all(stdin.unwrap_or("").as_bytes());
    drop(input);
    child.wait_with_output().unwrap()
}

fn lease(token: &str, owner: Option<&str>, timestamp: &str) -> Value {
    json!({"id": format!("p..{token}"), "LeaseToken": token, "Owner": owner,
           "timestamp": timestamp, "ContinuationToken": null, "properties": {}})
}

/// Runs `balance` on `leases` (through stdin) and returns the lease tokens taken.
fn take(strategy: &str, leases: Value, expiration: &str) -> Vec<String> {
    let text = leases.to_string();
    let answer = answer(&["--strategy", strategy, "--expiration", expiration], &text);
    answer["take"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["lease"].as_str().unwrap().to_string())
        .collect()
}

fn owned(prefix: &str, n: usize, owner: &str) -> Vec<Value> {
    (1..=n)
        .map(|i| lease(&format!("{prefix}{i}"), Some(owner), FRESH))
        .collect()
}

#[test]
fn cfp_takes_every_unowned_lease_a_lone_host_needs() {
    let leases = json!([lease("1", None, FRESH), lease("2", None, FRESH)]);
    assert_eq!(take("cfp", leases, "600s"), ["1", "2"]);
}

#[test]
fn cfp_takes_the_expired_lease_of_a_busy_owner() {
    let mut leases = owned("", 3, "owner 1");
    leases.push(lease("4", Some("owner 1"), YEAR_AGO));
    assert_eq!(take("cfp", Value::from(leases), "600s"), ["4"]);
}

#[test]
fn cfp_steals_one_lease_from_an_owner_above_target() {
    let leases = [owned("A", 4, "owner 1"), owned("B", 2, "self")].concat();
    assert_eq!(take("cfp", Value::from(leases), "600s"), ["A1"]);
}

#[test]
fn cfp_does_not_steal_when_short_by_one_from_an_owner_at_target() {
    let leases = [owned("A", 4, "owner 1"), owned("B", 3, "self")].concat();
    assert!(take("cfp", Value::from(leases), "600s").is_empty());
}

#[test]
fn every_decision_comes_with_its_reason() {
    let leases = [owned("A", 4, "owner 1"), owned("B", 2, "self")].concat();
    let text = Value::from(leases).to_string();
    assert_eq!(
        answer(&["--strategy", "cfp"], &text),
        json!({"prefix": "p", "skipped": 0,
               "take": [{"lease": "A1", "reason": "steal from owner 1 (4 > target 3)"}]})
    );
}

#[test]
fn handoff_claims_its_share_of_an_overloaded_owner_in_one_cycle() {
    let leases = owned("A", 6, "owner 1");
    assert_eq!(
        take("handoff", Value::from(leases), "600s"),
        ["A6", "A5", "A4"]
    );
}

#[test]
fn the_expiration_decides_what_counts_as_expired() {
    let leases = json!([lease("1", Some("other"), "2026-11-21T11:59:00Z")]);
    assert_eq!(take("cfp", leases.clone(), "30s"), ["1"]);
    assert!(take("cfp", leases, "2m").is_empty());
}

#[test]
fn an_empty_container_gives_an_empty_take() {
    let out = leasehold(
        &["balance", "--host", "self", "--leases", "-", "--now", NOW],
        Some("[]"),
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"prefix":"","skipped":0,"take":[]}"#
    );
}

#[test]
fn the_shipped_sample_gives_the_answer_the_readme_shows() {
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../samples/cfp-leases.json");
    let out = leasehold(
        &[
            "balance",
            "--strategy",
            "cfp",
            "--host",
            "host-c",
            "--leases",
            sample.to_str().unwrap(),
            "--now",
            NOW,
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let readme = include_str!("../../docs/cli.md");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        readme.contains(printed.trim()),
        "docs/cli.md does not show {printed}"
    );
}

/// Runs `balance --host self --leases - --now NOW` plus `extra` on `input`, which
/// must succeed; returns its JSON answer.
fn answer(extra: &[&str], input: &str) -> Value {
    let mut args = vec!["balance", "--host", "self", "--leases", "-", "--now", NOW];
    args.extend_from_slice(extra);
    let out = leasehold(&args, Some(input));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `balance` on raw input; returns (exit code, stderr).
fn fails(input: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["balance", "--host", "self", "--leases", "-", "--now", NOW];
    args.extend_from_slice(extra);
    let out = leasehold(&args, Some(input));
    assert!(!out.status.success(), "accepted: {input}");
    assert!(out.stdout.is_empty());
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_line(stderr: &str) -> &str {
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr.trim_end()
}

#[test]
fn invalid_json_is_reported_with_its_position() {
    let (code, err) = fails("[{\"LeaseToken\": \"1\",", &[]);
    assert_eq!(code, 2, "an input error");
    let line = one_line(&err);
    assert!(
        line.contains("stdin: invalid JSON: EOF while parsing"),
        "{err}"
    );
    assert!(line.contains("line 1"), "{err}");
}

/// A document without a lease token is not a lease (the processor's `.info` marker
/// is one): skipped and counted, never an error.
#[test]
fn a_document_without_a_lease_token_is_skipped_and_counted() {
    let input = json!([lease("1", None, FRESH), {"id": "p.info", "timestamp": FRESH}]).to_string();
    let answer = answer(&[], &input);
    assert_eq!(answer["skipped"], 1);
    assert_eq!(answer["take"][0]["lease"], "1");
}

#[test]
fn a_malformed_timestamp_is_named_with_its_document_and_field() {
    let input = json!([lease("1", None, "yesterday")]).to_string();
    let (_, err) = fails(&input, &[]);
    let line = one_line(&err);
    assert!(
        line.contains("lease document 0: field `timestamp`"),
        "{err}"
    );
    assert!(
        line.contains("not an ISO-8601 time: \"yesterday\""),
        "{err}"
    );
}

#[test]
fn fields_of_the_wrong_type_are_named() {
    let cases = [
        (
            json!([{"LeaseToken": 1, "timestamp": FRESH}]),
            "field `LeaseToken`",
        ),
        (
            json!([{"LeaseToken": "1", "timestamp": true}]),
            "field `timestamp`",
        ),
        (
            json!([{"LeaseToken": "1", "timestamp": null, "_ts": "noon"}]),
            "field `_ts`",
        ),
        (
            json!([{"LeaseToken": "1", "timestamp": FRESH, "Owner": true}]),
            "field `Owner`",
        ),
        (
            json!([{"LeaseToken": "1", "timestamp": FRESH, "properties": {"k": 1}}]),
            "field `properties.k`",
        ),
        (
            json!([{"LeaseToken": "1"}]),
            "neither `timestamp` nor `_ts` is set",
        ),
        (
            json!([{"LeaseToken": "", "timestamp": FRESH}]),
            "must not be empty",
        ),
        (json!([42]), "lease document 0: expected a JSON object"),
        (json!({"leases": []}), "expected a JSON array"),
    ];
    for (input, expected) in cases {
        let (_, err) = fails(&input.to_string(), &[]);
        assert!(one_line(&err).contains(expected), "{input}: {err}");
    }
}

#[test]
fn two_leases_for_one_partition_are_refused() {
    let input = json!([
        lease("1", None, FRESH),
        lease("2", None, FRESH),
        lease("1", None, FRESH)
    ]);
    let (_, err) = fails(&input.to_string(), &[]);
    assert!(one_line(&err).contains("lease document 2"), "{err}");
    assert!(err.contains("also the token of document 0"), "{err}");
}

#[test]
fn an_unreadable_file_is_reported() {
    let out = leasehold(
        &[
            "balance",
            "--host",
            "self",
            "--leases",
            "/nonexistent/leases.json",
            "--now",
            NOW,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "an input error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        one_line(&err).contains("cannot read /nonexistent/leases.json"),
        "{err}"
    );
}

#[test]
fn wrong_arguments_are_refused_before_any_input_is_read() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--strategy", "cfp", "--min", "5", "--max", "3"],
            "minimum lease count (5)",
        ),
        (&["--min", "2"], "apply to --strategy cfp only"),
        (&["--expiration", "600"], "--expiration"),
        (&["--expiration", "0s"], "--expiration must be above 0"),
        (&["--now", "noon"], "--now"),
        (&["--strategy", "greedy"], "--strategy"),
    ];
    for (extra, expected) in cases {
        let (code, err) = fails("[]", extra);
        assert_eq!(code, 2, "{extra:?}: a usage error");
        assert!(err.contains(expected), "{extra:?}: {err}");
    }
    let out = leasehold(
        &["balance", "--host", " ", "--leases", "-", "--now", NOW],
        Some("[]"),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(one_line(&err).contains("--host must not be blank"), "{err}");
}

/// A lease container as the .NET processor keeps it: the group's `.info` marker and
/// `.lock` document beside the leases, one lease never acquired (`timestamp: null`).
#[test]
fn a_container_export_with_the_processors_own_documents_is_answered() {
    let mut docs = vec![
        json!({"id": "p.info", "_ts": 1_714_557_600}),
        json!({"id": "p.lock", "ttl": 10, "_ts": 1_714_557_601}),
        json!({"id": "p..9", "LeaseToken": "9", "Owner": null, "timestamp": null, "_ts": 1_714_557_600}),
    ];
    docs.extend(owned("A", 2, "self"));
    let text = Value::from(docs).to_string();
    let answer = answer(&["--strategy", "cfp"], &text);
    assert_eq!(answer["skipped"], 2);
    assert_eq!(answer["take"][0]["lease"], "9");
}

/// Two groups in one container: without `--prefix` the choice is the caller's, a
/// usage error that lists them; with it, the other group's leases are skipped.
#[test]
fn several_processor_groups_need_a_prefix() {
    let docs = json!([
        {"id": "orders..0", "LeaseToken": "0", "Owner": null, "timestamp": "2024-05-01T10:00:00Z"},
        {"id": "billing..0", "LeaseToken": "0", "Owner": null, "timestamp": "2024-05-01T10:00:00Z"}
    ])
    .to_string();
    let (code, err) = fails(&docs, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--prefix") && err.contains("billing, orders"),
        "{err}"
    );
    let answer = answer(&["--prefix", "orders"], &docs);
    assert_eq!(
        (answer["prefix"].as_str(), answer["skipped"].as_u64()),
        (Some("orders"), Some(1))
    );
}

/// Windows tools often save a UTF-8 export with a byte order mark: the table reads
/// the same as without one.
#[test]
fn a_table_saved_with_a_byte_order_mark_is_read() {
    let leases = json!([lease("1", None, FRESH), lease("2", None, FRESH)]);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("leases-with-bom.json");
    std::fs::write(&path, format!("\u{feff}{leases}")).unwrap();
    let file = path.to_str().unwrap();
    let args = [
        "balance",
        "--host",
        "self",
        "--leases",
        file,
        "--now",
        NOW,
        "--strategy",
        "cfp",
        "--expiration",
        "600s",
    ];
    let out = leasehold(&args, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["take"].as_array().map(Vec::len), Some(2), "{answer}");
}
