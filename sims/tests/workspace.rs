//! The workspace as a service links it: the minimum Rust version the manifests declare
//! is one the whole dependency tree builds with, so a user on an older toolchain gets
//! cargo's clear message instead of a build failure deep in a dependency.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// A `rust-version` as numbers: "1.88" and "1.88.0" compare equal.
fn parse(version: &str) -> Option<[u32; 3]> {
    let mut parts = version.split('.').map(str::parse::<u32>);
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some([major, minor, patch])
}

/// The packages of `metadata`'s resolved tree that ask for more than `declared`, as
/// "name version (needs x)".
fn needing_more(declared: &str, metadata: &Value) -> Vec<String> {
    let declared = parse(declared).expect("a declared rust-version");
    let resolved: Vec<&str> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("a resolved tree")
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| resolved.contains(&id)))
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            let (name, version) = (p["name"].as_str()?, p["version"].as_str()?);
            (parse(needs)? > declared).then(|| format!("{name} {version} (needs {needs})"))
        })
        .collect()
}

/// The host's target triple, so that the metadata covers only what this machine
/// builds (and so has downloaded): no network is needed.
fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc names its host")
}

/// `cargo metadata` for the workspace, offline.
fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("a workspace");
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(host())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// The `rust-version` every workspace member declares (they inherit one).
fn declared(metadata: &Value) -> String {
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let versions: Vec<&str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(&id)))
        .map(|p| {
            p["rust_version"]
                .as_str()
                .expect("every member declares one")
        })
        .collect();
    assert!(
        versions.windows(2).all(|w| w[0] == w[1]),
        "one rust-version for the workspace: {versions:?}"
    );
    versions[0].to_string()
}

#[test]
fn the_declared_rust_version_covers_every_dependency() {
    let metadata = metadata();
    let declared = declared(&metadata);
    let short = needing_more(&declared, &metadata);
    assert!(
        short.is_empty(),
        "rust-version {declared} is below what these need: {short:?}"
    );
}

/// The check's sibling: the version the manifests declared before (1.85) is caught,
/// naming the Cosmos DB SDK that needs more.
#[test]
fn a_rust_version_below_a_dependencys_is_caught() {
    let short = needing_more("1.85", &metadata());
    assert!(
        short.iter().any(|p| p.starts_with("azure_data_cosmos ")),
        "{short:?}"
    );
}

/// The crates meant for publishing.
const PUBLISHED: [&str; 4] = [
    "leasehold-engine",
    "leasehold-model",
    "leasehold-adapters",
    "leasehold-sims",
];

/// What a published crate's manifest lacks of what crates.io and docs.rs show:
/// license, readme, keywords, categories, repository, rust-version and docs.rs
/// settings.
fn manifest_gaps(package: &Value) -> Vec<&'static str> {
    let mut gaps = Vec::new();
    let text = |key: &str| package[key].as_str().is_some_and(|s| !s.is_empty());
    let list = |key: &str| package[key].as_array().is_some_and(|a| !a.is_empty());
    for (ok, name) in [
        (text("license"), "license"),
        (text("readme"), "readme"),
        (text("repository"), "repository"),
        (text("rust_version"), "rust-version"),
        (text("description"), "description"),
        (list("keywords"), "keywords"),
        (list("categories"), "categories"),
        (
            package["metadata"]["docs"]["rs"].is_object(),
            "package.metadata.docs.rs",
        ),
    ] {
        if !ok {
            gaps.push(name);
        }
    }
    gaps
}

#[test]
fn every_published_crate_carries_its_license_files_and_metadata() {
    let metadata = metadata();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for name in PUBLISHED {
        let package = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} in the workspace"));
        assert_eq!(manifest_gaps(package), Vec::<&str>::new(), "{name}");
        let dir = Path::new(package["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap();
        for file in ["LICENSE-MIT", "LICENSE-APACHE"] {
            let text = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("{name}/{file}: {e}"));
            assert!(text.len() > 500, "{name}/{file} is a license text");
        }
    }
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).expect("CHANGELOG.md");
    for heading in ["## What is public API", "## [Unreleased]"] {
        assert!(changelog.contains(heading), "CHANGELOG.md lacks {heading}");
    }
}

/// The sibling: a manifest without keywords or docs.rs settings is caught.
#[test]
fn a_manifest_without_its_metadata_is_caught() {
    let bare = serde_json::json!({
        "license": "MIT OR Apache-2.0",
        "readme": "README.md",
        "repository": "https://example.invalid",
        "rust_version": "1.88",
        "description": "d",
        "keywords": [],
        "categories": ["database"],
        "metadata": null,
    });
    assert_eq!(
        manifest_gaps(&bare),
        vec!["keywords", "package.metadata.docs.rs"]
    );
}

/// The command-line reference's exit-code table lists every code the command line
/// uses (it never mentioned 3 or 130).
#[test]
fn the_cli_reference_lists_every_exit_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("docs/cli.md")).expect("docs/cli.md");
    for code in ["0", "1", "2", "3", "130", "141"] {
        assert!(
            readme
                .lines()
                .any(|l| l.starts_with(&format!("| {code} | "))),
            "no row for exit {code}"
        );
    }
}
