//! The checks the model's test files share: a whole bound explored, and a shortest
//! counterexample replayed.

use leasehold_model::PartitionReport;
use leasehold_model::check::{self, Options, Outcome, Search, Stop};
use leasehold_model::{Bounds, PartitionModel, properties as p, trace};
use std::time::Duration;

pub fn model(bounds: Bounds) -> PartitionModel {
    PartitionModel::new(bounds).expect("valid bounds")
}

/// Every state of `bounds`, depth first on two threads; each of `properties` holds.
pub fn proven_for<'a>(
    bounds: Bounds,
    properties: impl IntoIterator<Item = &'a &'static str>,
) -> PartitionReport {
    let model = model(bounds);
    let options = Options {
        search: Search::Dfs,
        threads: 2,
        ..Options::default()
    };
    let report = check::check(&model, &options, Duration::from_secs(600), |_| {});
    println!(
        "{:?}\n  {} states, {} unique, {:.1} s",
        model.bounds, report.progress.states, report.progress.unique, report.progress.seconds
    );
    assert!(report.complete(), "the check must explore every state");
    for property in properties {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Holds,
            "{property}"
        );
    }
    report
}

/// A counterexample to `property` under `bounds`, found by `search` on `threads`,
/// printed, and replayed to a state that breaks it; returns its length in steps.
pub fn counterexample(
    bounds: Bounds,
    property: &'static str,
    search: Search,
    threads: usize,
) -> usize {
    counterexample_of(&model(bounds), property, search, threads)
}

/// The same, for a model whose bounds for the properties were changed.
pub fn counterexample_of(
    model: &PartitionModel,
    property: &'static str,
    search: Search,
    threads: usize,
) -> usize {
    let options = Options {
        search,
        threads,
        stop: Stop::At(property),
        ..Options::default()
    };
    let report = check::check(model, &options, Duration::from_secs(600), |_| {});
    let verdict = report.verdict(property);
    assert_eq!(verdict.outcome, Outcome::Counterexample, "{property}");
    let path = verdict.path.as_ref().expect("a counterexample has a path");
    println!(
        "COUNTEREXAMPLE to {property:?} in {:?}:\n{}",
        model.bounds,
        trace::render(model, path)
    );
    let encoded = verdict.encoded.as_ref().expect("an encoded path");
    let replayed = check::replay(model, encoded).expect("the path replays");
    let last = &replayed.last().expect("a last state").0;
    assert!(p::broken(model, last).contains(&property));
    path.len() - 1
}

/// The shortest counterexample to `property` under `bounds` (breadth first, one
/// thread); its length in steps.
pub fn broken(bounds: Bounds, property: &'static str) -> usize {
    counterexample(bounds, property, Search::Bfs, 1)
}
