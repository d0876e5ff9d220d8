//! The partition check's savings, checked against the model without them:
//! - its one reduction: under the observed expiry rule, every wall-clock set-up of a
//!   skew is checked as one (`PartitionModel::fold_wall_clocks`);
//! - reusing engine transitions (`PartitionModel::transitions`), which must explore
//!   exactly the states that running the engine every time does.
//!
//! docs/model-checking.md, "Model-checking speed", says why both are sound; these tests check them at small
//! bounds, and that the fold is unsound where a wall clock is read.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_engine::ExpiryRule;
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::Liveness;
use leasehold_model::PartitionReport;
use leasehold_model::check::{self, Options, Outcome, Search, Stop};
use leasehold_model::transitions::Transitions;
use leasehold_model::{Bounds, Bug, KnownBad, PartitionModel, properties as p};
use std::sync::Arc;
use std::time::Duration;

fn run(model: &PartitionModel, options: &Options) -> PartitionReport {
    let report = check::check(model, options, Duration::from_secs(60), |_| {});
    println!(
        "fold {}, reuse {}: {} unique, depth {}, {:.1} s",
        model.fold_wall_clocks,
        model.transitions.keeps(),
        report.progress.unique,
        report.progress.depth,
        report.progress.seconds
    );
    report
}

fn exhaustive(model: &PartitionModel) -> PartitionReport {
    let options = Options {
        search: Search::Dfs,
        threads: 2,
        ..Options::default()
    };
    let report = run(model, &options);
    assert!(report.complete(), "the check must explore every state");
    report
}

/// The length and replay encoding of the shortest counterexample to `property`, which
/// must exist.
fn shortest_counterexample(model: &PartitionModel, property: &'static str) -> (usize, String) {
    let first = Options {
        search: Search::Bfs,
        threads: 1,
        stop: Stop::At(property),
        ..Options::default()
    };
    let report = run(model, &first);
    let verdict = report.verdict(property);
    assert_eq!(verdict.outcome, Outcome::Counterexample);
    let path = verdict.path.as_ref().expect("a counterexample has a path");
    let encoded = verdict.encoded.clone().expect("and an encoding");
    (path.len(), encoded)
}

/// The model as the CLI builds it, and the same bounds with every set-up explored.
fn folded_and_unreduced(bounds: Bounds) -> (PartitionModel, PartitionModel) {
    let folded = PartitionModel::new(bounds.clone()).expect("valid bounds");
    let unreduced = PartitionModel::new(Bounds {
        unreduced: true,
        ..bounds
    })
    .expect("valid bounds");
    assert!(folded.fold_wall_clocks && !unreduced.fold_wall_clocks);
    (folded, unreduced)
}

/// Same verdict for every property, and exactly one folded state for each wall-clock
/// set-up of every unfolded one: the unreduced state graph is that many shifted copies
/// of the folded one.
fn assert_fold_is_exact(bounds: Bounds) {
    let setups = (2 * u64::from(bounds.skew) + 1).pow(u32::from(bounds.hosts) - 1);
    let (folded, unreduced) = folded_and_unreduced(bounds);
    let small = exhaustive(&folded);
    let full = exhaustive(&unreduced);
    assert_eq!(
        full.progress.unique,
        small.progress.unique * setups as usize
    );
    for (a, b) in small.verdicts.iter().zip(&full.verdicts) {
        assert_eq!((a.property, a.outcome), (b.property, b.outcome));
    }
}

#[test]
fn folding_the_wall_clocks_changes_no_verdict_under_session_liveness() {
    assert_fold_is_exact(Bounds {
        hosts: 2,
        partitions: 2,
        crashes: 1,
        skew: 2,
        horizon: 11,
        lost_replies: 0,
        delays: 0,
        ..Bounds::default()
    });
}

#[test]
fn folding_the_wall_clocks_changes_no_verdict_under_lease_liveness_with_three_hosts() {
    assert_fold_is_exact(Bounds {
        hosts: 3,
        partitions: 1,
        crashes: 1,
        skew: 1,
        horizon: 7,
        lost_replies: 0,
        delays: 0,
        strategy: Strategy::CFP,
        liveness: Some(Liveness::Lease),
        ..Bounds::default()
    });
}

/// A counterexample under the observed rule is found folded too, and no later.
#[test]
fn a_known_bad_variant_is_found_as_soon_with_the_wall_clocks_folded() {
    let (folded, unreduced) = folded_and_unreduced(Bounds {
        bug: Some(Bug::ThinMargin),
        crashes: 0,
        pauses: 1,
        horizon: 10,
        lost_replies: 0,
        delays: 0,
        ..Bounds::default()
    });
    let steps = |model| shortest_counterexample(model, p::EXCLUSIVITY).0;
    assert_eq!(steps(&folded), steps(&unreduced));
}

/// The sibling: under the timestamp rule wall clocks are compared, so folding them
/// would hide CFP's skew bug. The model therefore does not fold there.
#[test]
fn folding_the_wall_clocks_under_the_timestamp_rule_would_hide_a_skew_bug() {
    let bounds = Bounds {
        bug: Some(Bug::TimestampSkew),
        skew: 2,
        crashes: 0,
        horizon: 10,
        lost_replies: 0,
        delays: 0,
        strategy: Strategy::CFP,
        expiry: ExpiryRule::Timestamp,
        ..Bounds::default()
    };
    let mut model = PartitionModel::new(bounds).expect("valid bounds");
    assert!(
        !model.fold_wall_clocks,
        "the timestamp rule reads wall clocks"
    );
    let found = exhaustive(&model);
    assert_eq!(
        found.verdict(p::EXCLUSIVITY).outcome,
        Outcome::Counterexample
    );
    model.fold_wall_clocks = true;
    let hidden = exhaustive(&model);
    assert_eq!(hidden.verdict(p::EXCLUSIVITY).outcome, Outcome::Holds);
}

/// The model as the CLI builds it, and the same model running the engine for every
/// transition.
fn reusing_and_running(bounds: Bounds) -> (PartitionModel, PartitionModel) {
    let reusing = PartitionModel::new(bounds).expect("valid bounds");
    let mut running = reusing.clone();
    running.transitions = Arc::new(Transitions::with_capacity(0));
    (reusing, running)
}

/// Same states, same verdicts; and the transitions were in fact reused, or the
/// comparison would prove nothing.
fn assert_reuse_is_exact(bounds: Bounds) {
    let (reusing, running) = reusing_and_running(bounds);
    let reused = exhaustive(&reusing);
    let ran = exhaustive(&running);
    assert_eq!(reused.progress.unique, ran.progress.unique);
    for (a, b) in reused.verdicts.iter().zip(&ran.verdicts) {
        assert_eq!((a.property, a.outcome), (b.property, b.outcome));
    }
    let stats = reusing.transitions.stats();
    println!("{stats:?}");
    assert!(stats.reused > stats.computed, "{stats:?}");
    assert_eq!(running.transitions.stats().reused, 0);
}

#[test]
fn reusing_engine_transitions_changes_no_state_and_no_verdict_under_lost_replies_and_pauses() {
    assert_reuse_is_exact(Bounds {
        hosts: 2,
        partitions: 2,
        crashes: 0,
        skew: 0,
        drift_ms: 0,
        horizon: 7,
        pauses: 1,
        lost_replies: 1,
        delays: 0,
        ..Bounds::default()
    });
}

#[test]
fn reusing_engine_transitions_changes_no_state_and_no_verdict_with_three_hosts_and_a_split() {
    assert_reuse_is_exact(Bounds {
        hosts: 3,
        partitions: 2,
        crashes: 0,
        splits: 1,
        skew: 0,
        drift_ms: 0,
        horizon: 6,
        lost_replies: 0,
        delays: 0,
        ..Bounds::default()
    });
}

/// A known-bad variant's shortest counterexample is the same path either way.
#[test]
fn a_known_bad_variant_gives_the_same_counterexample_with_transitions_reused() {
    let (reusing, running) = reusing_and_running(Bounds {
        bug: Some(Bug::Engine(KnownBad::RestartSameEpoch)),
        crashes: 0,
        skew: 0,
        drift_ms: 0,
        horizon: 8,
        lost_replies: 0,
        delays: 1,
        ..Bounds::default()
    });
    let path = |model| shortest_counterexample(model, p::SESSIONS).1;
    assert_eq!(path(&reusing), path(&running));
}
