//! Ctrl-C during a long command: it reports what it did and exits 130.

use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts `leasehold args`, sends it SIGINT once it has run `after`, and returns its
/// exit code, stdout and stderr.
fn interrupted(args: &[&str], after: Duration) -> (Option<i32>, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Real time on purpose: the signal must come while the work runs.
    std::thread::sleep(after);
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_interrupted_swarm_reports_the_seeds_it_ran_and_exits_130() {
    let (code, out, err) = interrupted(
        &["sim", "swarm", "--seeds", "900000000..900100000", "--quiet"],
        Duration::from_secs(2),
    );
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(out.starts_with("swarm: "), "{out}");
    assert!(err.contains("interrupted (Ctrl-C) after"), "{err}");
    assert!(err.contains("of 100000"), "{err}");
}

#[test]
fn an_interrupted_check_reports_what_it_explored_and_exits_130() {
    let (code, out, err) = interrupted(
        &["check", "partitions", "--hosts", "3", "--partitions", "3"],
        Duration::from_secs(2),
    );
    assert_eq!(code, Some(130), "{out}\n{err}");
    assert!(out.contains("INCOMPLETE"), "{out}");
    assert!(out.contains("interrupted (Ctrl-C)"), "{out}");
}

/// A reader that goes away (`leasehold check | head -1`) ends the command quietly
/// with 141, as a shell reports SIGPIPE; it panicked with a backtrace before.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(["check", "queue"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("leasehold starts");
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr reads");
    let status = child.wait().expect("leasehold ends");
    assert_eq!(status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
