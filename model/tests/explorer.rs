//! The Explorer's view: the domain's facts, short enough to walk by hand, over exactly
//! the states and properties the checker has.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_model::check::{self, Options, Outcome, Search, Stop};
use leasehold_model::explore::{Explored, step_view, view};
use leasehold_model::trace::Explain;
use leasehold_model::{Bounds, Bug, ItemModel, LockBounds, PartitionModel, QueueModel, properties};
use stateright::Model;
use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

/// Every distinct state within `depth` steps of the start; `on_step` sees every step
/// out of them as it is taken (kept, the steps took a gigabyte at the lock models'
/// default bounds).
fn walk<M: Explain<State: Clone + Debug + Eq + Hash, Action: Clone>>(
    model: &M,
    depth: usize,
    mut on_step: impl FnMut(&M::State, &M::Action),
) -> Vec<M::State> {
    // By the states themselves, as the checker tells them apart; keyed by their debug
    // text, the walk spent seconds formatting engines.
    let mut seen = HashSet::new();
    let mut states = Vec::new();
    let mut frontier: Vec<M::State> = model
        .init_states()
        .into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect();
    for level in 0..=depth {
        let mut next = Vec::new();
        for state in frontier {
            let mut actions = Vec::new();
            model.actions(&state, &mut actions);
            for action in actions {
                on_step(&state, &action);
                let after = model.next_state(&state, action);
                if let Some(after) = after.filter(|a| level < depth && seen.insert(a.clone())) {
                    next.push(after);
                }
            }
            states.push(state);
        }
        frontier = next;
    }
    states
}

/// The longest view of a state and of a step within `depth` steps of the start.
fn longest<M: Explain<State: Clone + Debug + Eq + Hash, Action: Clone>>(
    model: &M,
    depth: usize,
) -> (usize, usize) {
    let mut step = 0;
    let states = walk(model, depth, |s, a| {
        if let Some(text) = step_view(model, s, a) {
            step = step.max(text.lines().count());
        }
    });
    let state = states
        .iter()
        .map(|s| view(model, s).lines().count())
        .max()
        .unwrap_or(0);
    (state, step)
}

fn partitions() -> PartitionModel {
    PartitionModel::new(Bounds::default()).expect("valid bounds")
}

#[test]
fn a_two_by_two_partition_state_reads_in_forty_lines() {
    let (state, step) = longest(&partitions(), 4);
    println!("longest state {state} lines, longest step {step} lines");
    assert!(state <= 40, "{state} lines");
    assert!(step <= 60, "{step} lines");
}

#[test]
fn a_two_by_two_queue_and_items_state_reads_in_forty_lines() {
    let queue = QueueModel::new(LockBounds::default()).expect("valid bounds");
    let items = ItemModel::new(LockBounds::default()).expect("valid bounds");
    for (name, (state, step)) in [("queue", longest(&queue, 4)), ("items", longest(&items, 4))] {
        println!("{name}: longest state {state} lines, longest step {step} lines");
        assert!(state <= 40, "{name}: {state} lines");
        assert!(step <= 60, "{name}: {step} lines");
    }
}

/// The sibling of the two above: the measure tells the domain view from the engine
/// dump the Explorer used to show.
#[test]
fn the_engines_own_dump_of_the_first_state_is_far_longer() {
    let model = partitions();
    let first = &model.init_states()[0];
    let dump = format!("{first:#?}").lines().count();
    println!("the engine dump of the first state: {dump} lines");
    assert!(dump > 40, "{dump} lines");
    assert!(view(&model, first).lines().count() * 10 < dump);
}

#[test]
fn the_view_names_clocks_authority_documents_and_the_wire() {
    let model = partitions();
    let states = walk(&model, 3, |_, _| {});
    let text: String = states.iter().map(|s| view(&model, s)).collect();
    for needle in [
        "local",
        "wall",
        "authority until",
        "processing",
        "owner h",
        "etag:",
        "checkpoint",
        "held:",
    ] {
        assert!(text.contains(needle), "no {needle:?} in any view");
    }
}

#[test]
fn a_step_reads_as_the_domains_words() {
    let model = partitions();
    let first = model.init_states()[0].clone();
    let mut actions = Vec::new();
    model.actions(&first, &mut actions);
    let text = step_view(&model, &first, &actions[0]).expect("the first step is enabled");
    assert!(text.starts_with("h0's timers fire"), "{text}");
    assert!(text.contains("starts processing lease 0 at e1"), "{text}");
}

fn options(stop: Stop) -> Options {
    Options {
        search: Search::Bfs,
        threads: 1,
        stop,
        ..Options::default()
    }
}

#[test]
fn the_explorer_walks_the_checkers_states() {
    let bounds = Bounds {
        crashes: 0,
        lost_replies: 0,
        horizon: 4,
        ..Bounds::default()
    };
    let plain = PartitionModel::new(bounds.clone()).expect("valid bounds");
    let shown = Explored::new(plain.clone()).expect("few enough properties");
    let a = check::check(
        &plain,
        &options(Stop::Never),
        Duration::from_secs(60),
        |_| {},
    );
    let b = check::check(
        &shown,
        &options(Stop::Never),
        Duration::from_secs(60),
        |_| {},
    );
    assert!(a.complete && b.complete);
    assert_eq!(a.progress.unique, b.progress.unique);
    assert_eq!(a.verdicts.len(), b.verdicts.len());
    for (x, y) in a.verdicts.iter().zip(&b.verdicts) {
        assert_eq!((x.property, &x.outcome), (y.property, &y.outcome));
    }
}

/// Properties reach the wrapped model's: a known-bad variant's counterexample shows
/// through the Explorer too.
#[test]
fn the_explorer_finds_a_known_bad_variants_counterexample() {
    let bounds = Bounds {
        bug: Some(Bug::RestartSameEpoch),
        crashes: 0,
        skew: 0,
        drift_ms: 0,
        horizon: 8,
        delays: 1,
        ..Bounds::default()
    };
    let shown = Explored::new(PartitionModel::new(bounds).expect("valid bounds"))
        .expect("few enough properties");
    let report = check::check(
        &shown,
        &options(Stop::At(properties::SESSIONS)),
        Duration::from_secs(60),
        |_| {},
    );
    assert_eq!(
        report.verdict(properties::SESSIONS).outcome,
        Outcome::Counterexample
    );
}
