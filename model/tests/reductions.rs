//! The partition check's one reduction, checked against the unreduced model: under the
//! observed expiry rule, every wall-clock set-up of a skew is checked as one
//! (`PartitionModel::fold_wall_clocks`). README, "Reductions", says why that is sound;
//! these tests check it at small bounds, and that it is unsound where a wall clock is
//! read.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_engine::ExpiryRule;
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::Liveness;
use leasehold_model::check::{self, Options, Outcome, Report, Search, Stop};
use leasehold_model::{Bounds, Bug, PartitionModel, properties as p};
use std::time::Duration;

fn run(model: &PartitionModel, options: &Options) -> Report {
    let report = check::check(model, options, Duration::from_secs(60), |_| {});
    println!(
        "fold {}: {} unique, depth {}, {:.1} s",
        model.fold_wall_clocks,
        report.progress.unique,
        report.progress.depth,
        report.progress.seconds
    );
    report
}

fn exhaustive(model: &PartitionModel) -> Report {
    let options = Options {
        search: Search::Dfs,
        threads: 2,
        ..Options::default()
    };
    let report = run(model, &options);
    assert!(report.complete, "the check must explore every state");
    report
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
    let first = Options {
        search: Search::Bfs,
        threads: 1,
        stop: Stop::At(p::EXCLUSIVITY),
        ..Options::default()
    };
    let steps = |report: &Report| {
        let verdict = report.verdict(p::EXCLUSIVITY);
        assert_eq!(verdict.outcome, Outcome::Counterexample);
        verdict.path.as_ref().map(Vec::len)
    };
    assert_eq!(
        steps(&run(&folded, &first)),
        steps(&run(&unreduced, &first))
    );
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
