//! Shell completions and man pages come from the command line's own definitions, so
//! they name every subcommand and flag the binary takes, and refuse what it does not.

use std::process::{Command, Output};

fn leasehold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .output()
        .expect("the leasehold binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const SUBCOMMANDS: [&str; 6] = ["balance", "check", "sim", "explore", "completions", "man"];

#[test]
fn a_completion_script_offers_every_subcommand_and_the_newest_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = leasehold(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = stdout(&out);
        for word in SUBCOMMANDS.iter().chain(&["stale-depth", "zombies"]) {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
}

#[test]
fn a_shell_it_cannot_complete_for_is_a_usage_error() {
    let out = leasehold(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
}

#[test]
fn the_man_page_lists_the_subcommands_and_each_has_its_own() {
    let top = stdout(&leasehold(&["man"]));
    assert!(top.starts_with(".ie"), "roff");
    assert!(top.contains(".TH leasehold 1"), "{top}");
    for name in SUBCOMMANDS {
        assert!(top.contains(name), "the top page names {name}");
    }
    let check = leasehold(&["man", "check"]);
    assert!(check.status.success());
    let page = stdout(&check);
    assert!(page.contains(".TH leasehold-check 1"), "{page}");
    assert!(
        page.contains("stale\\-depth"),
        "the check page documents --stale-depth"
    );
}

#[test]
fn a_man_page_for_a_subcommand_that_does_not_exist_is_refused_by_name() {
    let out = leasehold(&["man", "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"bogus\"") && err.contains("check"), "{err}");
}

/// `--bug`'s help lists every variant the model has, from the model's own lists
/// (`delete-parent-first`, then `claim-by-name`, were missing from a list written by
/// hand).
#[test]
fn the_bug_help_names_every_variant() {
    use leasehold_model::{Bug, LockBug};
    let check = stdout(&leasehold(&["check", "--help"]));
    let sim = stdout(&leasehold(&["sim", "--help"]));
    for name in Bug::ALL.iter().map(|b| b.name()) {
        assert!(check.contains(name), "check --help lacks {name}");
        assert!(sim.contains(name), "sim --help lacks {name}");
    }
    for name in LockBug::ALL.iter().map(|b| b.name()) {
        assert!(check.contains(name), "check --help lacks {name}");
    }
}

/// The rendered help states the defaults the runs use: a queue run fails one handler
/// run in 20 (help said 0), and polls every 2 s where a lease run polls every 5 s.
#[test]
fn sim_help_states_the_defaults_the_runs_use() {
    let help = stdout(&leasehold(&["sim", "--help"]));
    let flag = |name: &str| -> String {
        let at = help.find(&format!("--{name} ")).expect(name);
        help[at..]
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        flag("fail-one-in").contains("[default: 20]"),
        "{}",
        flag("fail-one-in")
    );
    assert!(
        flag("poll").contains("[default: 5s; queue scenarios: 2s]"),
        "{}",
        flag("poll")
    );
    let check = stdout(&leasehold(&["check", "--help"]));
    let at = check.find("--hosts ").expect("--hosts");
    let hosts = check[at..].split("\n\n").next().unwrap_or_default();
    assert!(hosts.contains("[default: 2]"), "{hosts}");
}
