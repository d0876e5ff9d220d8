//! The engine stays pure: serde and serde_json are its only dependencies, and its
//! source never reads a clock, spawns a thread, or draws a random number.

use std::path::Path;
use std::process::Command;

const ALLOWED: &[&str] = &["serde", "serde_json"];

/// Names of normal and build dependencies (dev-dependencies may be anything) in
/// `cargo metadata` output for one package that are not allowed.
fn forbidden_dependencies(metadata: &serde_json::Value, package: &str) -> Vec<String> {
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let Some(engine) = packages.iter().find(|p| p["name"] == package) else {
        return vec![format!("package {package} not found")];
    };
    engine["dependencies"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|d| d["kind"].as_str() != Some("dev"))
        .filter_map(|d| d["name"].as_str())
        .filter(|name| !ALLOWED.contains(name))
        .map(String::from)
        .collect()
}

/// Lines of Rust source that read a clock, spawn, or use a runtime or an RNG.
fn impure_lines(source: &str) -> Vec<String> {
    const PATTERNS: &[&str] = &[
        "Instant",
        "SystemTime",
        "std::thread",
        "thread::spawn",
        "tokio",
        "rand::",
        "std::fs",
        "std::net",
        "std::env",
    ];
    source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .filter(|line| PATTERNS.iter().any(|p| names(line, p)))
        .map(String::from)
        .collect()
}

/// Whether `line` names `pattern` as a path of its own, not as the tail of a longer
/// identifier (`Errand::` is no `rand::`).
fn names(line: &str, pattern: &str) -> bool {
    line.match_indices(pattern).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_engine_depends_on_nothing_but_serde_and_serde_json() {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        forbidden_dependencies(&metadata, "leasehold-engine"),
        Vec::<String>::new()
    );
}

#[test]
fn the_engine_source_reads_no_clock_and_spawns_nothing() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 10);
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            impure_lines(&source),
            Vec::<String>::new(),
            "in {}",
            file.display()
        );
    }
}

#[test]
fn the_dependency_check_catches_a_new_dependency() {
    let metadata = serde_json::json!({"packages": [{
        "name": "leasehold-engine",
        "dependencies": [
            {"name": "serde", "kind": null},
            {"name": "tokio", "kind": null},
            {"name": "proptest", "kind": "dev"},
            {"name": "cc", "kind": "build"},
        ]
    }]});
    assert_eq!(
        forbidden_dependencies(&metadata, "leasehold-engine"),
        ["tokio", "cc"]
    );
}

#[test]
fn the_source_check_catches_a_clock_read() {
    let source = "// Instant is fine in a comment\nlet t = std::time::Instant::now();";
    assert_eq!(impure_lines(source), ["let t = std::time::Instant::now();"]);
}

#[test]
fn the_source_check_catches_a_random_draw_but_not_a_name_ending_in_rand() {
    let source = "let e = Errand::Fence;\nlet x: u8 = rand::random();\nlet y = ::rand::random();";
    assert_eq!(
        impure_lines(source),
        ["let x: u8 = rand::random();", "let y = ::rand::random();"]
    );
}
