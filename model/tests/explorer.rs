//! The Explorer's view: the domain's facts, short enough to walk by hand, over exactly
//! the states and properties the checker has.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_model::check::{self, Options, Outcome, Search, Stop};
use leasehold_model::explore::{Explored, step_view, view};
use leasehold_model::trace::Explain;
use leasehold_model::{
    Bounds, Bug, ItemModel, KnownBad, LockBounds, PartitionModel, QueueModel, properties,
};
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
    assert!(a.complete() && b.complete());
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
        bug: Some(Bug::Engine(KnownBad::RestartSameEpoch)),
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

/// The `x`, the anchor and the text of every `<text>` of `svg`, and its width.
fn svg_texts(svg: &str) -> (usize, Vec<(usize, bool, String)>) {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}='"))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('\'')?].to_string())
    };
    let width = attr(&svg[..svg.find('>').unwrap()], "width")
        .and_then(|w| w.parse().ok())
        .expect("a width");
    let mut texts = Vec::new();
    for piece in svg.split("<text").skip(1) {
        let (tag, rest) = piece.split_once('>').expect("a text tag");
        let body = rest.split("</text>").next().unwrap_or_default();
        let x = attr(tag, "x").and_then(|x| x.parse().ok()).expect("an x");
        let centred = tag.contains("text-anchor='middle'");
        texts.push((x, centred, body.replace("&gt;", ">").replace("&lt;", "<")));
    }
    (width, texts)
}

/// A path of the partition model: the first step offered, `steps` times.
fn first_steps(
    model: &PartitionModel,
    steps: usize,
) -> stateright::Path<<PartitionModel as Model>::State, <PartitionModel as Model>::Action> {
    let mut state = model.init_states().remove(0);
    let first = state.clone();
    let mut taken = Vec::new();
    for _ in 0..steps {
        let mut actions = Vec::new();
        model.actions(&state, &mut actions);
        let Some(action) = actions.into_iter().next() else {
            break;
        };
        state = model.next_state(&state, action.clone()).expect("a step");
        taken.push(action);
    }
    stateright::Path::from_actions(model, first, taken.iter()).expect("the path replays")
}

/// Every label fits in the diagram at a monospace advance of 0.6 em (11 px font), and
/// the diagram brings its own white background, so its black ink reads on the
/// Explorer's dark theme too. The sibling: the old fixed width (the store's lifeline
/// plus 260 px) cuts labels of this very path.
#[test]
fn a_sequence_diagram_fits_its_longest_label_on_its_own_background() {
    let model = partitions();
    let svg = leasehold_model::sequence_diagram(&model, first_steps(&model, 8));
    assert!(
        svg.contains("<rect width='100%' height='100%' fill='white'/>"),
        "{svg}"
    );
    let (width, texts) = svg_texts(&svg);
    let extent = |(x, centred, text): &(usize, bool, String)| {
        let advance = text.chars().count() as f64 * 6.6;
        if *centred {
            *x as f64 + advance / 2.0
        } else {
            *x as f64 + advance
        }
    };
    let widest = texts.iter().map(extent).fold(0.0, f64::max);
    assert!(
        widest <= width as f64,
        "a label reaches {widest} px of {width}"
    );
    let store_x = 40 + model.lanes().len() * 150;
    assert!(
        widest > (store_x + 260) as f64,
        "no label of this path needs more than the old width"
    );
}
