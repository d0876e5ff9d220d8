//! Running a check and reading its verdicts.
//!
//! A run that stops at a time, state or memory limit is *incomplete*: no property that
//! lacks a discovery is reported as holding (stateright itself reports such a run as
//! done). [`Report::cut`] says why it stopped.

use crate::first_discovery::FirstDiscovery;
use stateright::{Checker, Expectation, HasDiscoveries, Model};
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Breadth first: with one thread, counterexamples are shortest.
    Bfs,
    /// Depth first: less memory, and the faster way to a counterexample that lies deep.
    Dfs,
    /// Seeded random walks ([`crate::walk`]): never complete, so never "holds", but
    /// they reach counterexamples far deeper than an exhaustive search can in the same
    /// time. Only a discovery ([`Stop`]), a time, state or memory limit, or an
    /// interrupt ends them.
    Walks {
        /// The seed: walk `k` of a seed is the same on every run and thread count.
        seed: u64,
    },
}

/// How a check runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Breadth or depth first.
    pub search: Search,
    /// Checker threads.
    pub threads: usize,
    /// Give up after this long (the check is then incomplete).
    pub timeout: Option<Duration>,
    /// Give up after generating this many states (the check is then incomplete).
    pub max_states: Option<usize>,
    /// Give up once this process's resident memory reaches this many bytes (the
    /// check is then incomplete), rather than be killed by the system when memory
    /// runs out. Watched where the platform tells it ([`resident_bytes`]); elsewhere
    /// not.
    pub max_memory: Option<u64>,
    /// Stop early, at the first discovery of some kind.
    pub stop: Stop,
    /// Set from elsewhere (a Ctrl-C handler) to stop the check at once: it is then
    /// incomplete, its checker threads left to end with the process.
    pub interrupt: Option<Arc<AtomicBool>>,
}

/// When a check may stop before it has explored everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stop {
    /// Explore everything within the bounds.
    #[default]
    Never,
    /// Stop when any `always` property has a counterexample.
    FirstCounterexample,
    /// Stop when this property has a discovery.
    At(&'static str),
}

impl Default for Options {
    fn default() -> Self {
        Options {
            search: Search::Bfs,
            threads: 1,
            timeout: None,
            max_states: None,
            max_memory: None,
            stop: Stop::Never,
            interrupt: None,
        }
    }
}

/// What became of one property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An `always` property held in every state explored, and exploration finished.
    Holds,
    /// An `always` property failed; a counterexample was found.
    Counterexample,
    /// A `sometimes` property was reached.
    Reached,
    /// Exploration finished without reaching a `sometimes` property.
    NotReached,
    /// Exploration stopped early without a discovery for this property.
    Incomplete,
}

impl Outcome {
    /// The word printed for it.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Counterexample => "COUNTEREXAMPLE",
            Outcome::Reached => "reached",
            Outcome::NotReached => "not reached",
            Outcome::Incomplete => "incomplete",
        }
    }
}

/// One property's verdict; by default, of the partition model.
#[derive(Clone, Debug)]
pub struct Verdict<S, A> {
    /// The property.
    pub property: &'static str,
    /// Whether it is an `always` property.
    pub always: bool,
    /// The outcome.
    pub outcome: Outcome,
    /// The discovery (a counterexample or an example), as states and actions.
    pub path: Option<Vec<(S, Option<A>)>>,
    /// The discovery as stateright's action-index encoding, for replay.
    pub encoded: Option<String>,
}

/// Counts while a check runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// States generated, repeats included.
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// Deepest path explored.
    pub depth: usize,
    /// Seconds so far.
    pub seconds: f64,
    /// Random walks run to their end ([`Search::Walks`]; `None` for the exhaustive
    /// searches).
    pub walks: Option<u64>,
}

/// Why a check stopped before it had explored every state within its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Its stop condition was met (a counterexample, or the property it waited for).
    Discovery,
    /// Its time ran out.
    Timeout,
    /// It generated as many states as it was allowed.
    States,
    /// The process's resident memory reached the cap.
    Memory {
        /// The resident memory read, in bytes.
        resident: u64,
    },
    /// It was told to stop (Ctrl-C).
    Interrupted,
}

impl Cut {
    /// Why, in words, for a report's last line.
    pub fn reason(self) -> String {
        match self {
            Cut::Discovery => "at its first discovery".to_string(),
            Cut::Timeout => "out of time".to_string(),
            Cut::States => "at its state limit".to_string(),
            Cut::Memory { resident } => format!(
                "at its memory cap, {:.1} GiB resident (--max-memory; depth first needs less)",
                resident as f64 / (1u64 << 30) as f64
            ),
            Cut::Interrupted => "interrupted".to_string(),
        }
    }
}

/// The result of a check; by default, of the partition model.
#[derive(Clone, Debug)]
pub struct Report<S, A> {
    /// One verdict per property, in the model's order.
    pub verdicts: Vec<Verdict<S, A>>,
    /// Final counts.
    pub progress: Progress,
    /// Why the check stopped before it had explored every state within its bounds,
    /// if it did.
    pub cut: Option<Cut>,
}

impl<S, A> Report<S, A> {
    /// Whether every reachable state within the bounds was explored.
    pub fn complete(&self) -> bool {
        self.cut.is_none()
    }

    /// The verdict for `property`.
    pub fn verdict(&self, property: &str) -> &Verdict<S, A> {
        self.verdicts
            .iter()
            .find(|v| v.property == property)
            .unwrap_or_else(|| panic!("no property {property:?}"))
    }

    /// Whether an `always` property failed.
    pub fn violated(&self) -> bool {
        self.verdicts
            .iter()
            .any(|v| v.outcome == Outcome::Counterexample)
    }
}

/// What the checker needs of a model: stateright's bounds for running it on threads,
/// and which of its actions are faults, which random walks ([`crate::walk`]) space out.
pub trait Checkable: Model + Clone + Send + Sync + 'static
where
    Self::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    Self::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    /// Whether `action` is a fault the bounds budget (a crash, a held write, a
    /// pause...) rather than the system's own progress. A walk takes one at a rate
    /// it draws, not in proportion to how many are enabled: faults outnumber the
    /// other actions in most states, so a uniform choice spends every budget in the
    /// first steps and never reaches a fault that must come late.
    fn is_fault(&self, action: &Self::Action) -> bool {
        let _ = action;
        false
    }
}

/// Checks `model`, calling `progress` about every `every` while it runs.
///
/// Each property reports the first state that breaks (or reaches) it, so breadth first
/// on one thread reports a shortest counterexample. A model with more than 32
/// properties is checked as stateright alone checks it, which reports a later one.
pub fn check<M: Checkable>(
    model: &M,
    options: &Options,
    every: Duration,
    progress: impl FnMut(&Progress),
) -> Report<M::State, M::Action>
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    if let Search::Walks { seed } = options.search {
        return crate::walk::walk(model, options, seed, every, progress);
    }
    // Stateright keeps a property's last discovery; the wrapper keeps its first, which
    // breadth first on one thread meets along a shortest path.
    match FirstDiscovery::new(model.clone()) {
        Some(first) => search(&first, options, every, progress),
        None => search(model, options, every, progress),
    }
}

/// An exhaustive search of `model`, as `options` say.
fn search<M: Checkable>(
    model: &M,
    options: &Options,
    every: Duration,
    progress: impl FnMut(&Progress),
) -> Report<M::State, M::Action>
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let mut builder = model.clone().checker().threads(options.threads.max(1));
    if let Some(timeout) = options.timeout {
        builder = builder.timeout(timeout);
    }
    if let Some(max) = options.max_states {
        builder = builder.target_state_count(max);
    }
    match options.stop {
        Stop::Never => {}
        Stop::FirstCounterexample => builder = builder.finish_when(HasDiscoveries::AnyFailures),
        Stop::At(name) => {
            builder = builder.finish_when(HasDiscoveries::AnyOf(BTreeSet::from([name])));
        }
    }
    match options.search {
        Search::Dfs => finish(model, options, builder.spawn_dfs(), every, progress),
        _ => finish(model, options, builder.spawn_bfs(), every, progress),
    }
}

/// How early by a check's own clock stateright may stop at its timeout: it starts
/// timing before the check does, and stops between two states.
const EARLY: Duration = Duration::from_millis(50);

fn finish<M: Checkable, C: Checker<M>>(
    model: &M,
    options: &Options,
    checker: C,
    every: Duration,
    mut progress: impl FnMut(&Progress),
) -> Report<M::State, M::Action>
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let started = Instant::now();
    let counts = |c: &C| Progress {
        states: c.state_count(),
        unique: c.unique_state_count(),
        depth: c.max_depth(),
        seconds: started.elapsed().as_secs_f64(),
        walks: None,
    };
    let mut reported = Instant::now();
    // Stateright's own timeout is seen only between states, and a depth-first
    // worker can run long without one: past it (and a second of grace), or once
    // interrupted, the check stops waiting for its workers.
    let mut abandoned = false;
    let mut over_memory;
    loop {
        // Read before the first look at the workers too: a cap already passed at the
        // start stops the check however small it is.
        over_memory = resident_over_cap(options);
        if over_memory.is_some() {
            abandoned = true;
            break;
        }
        if checker.is_done() {
            break;
        }
        std::thread::sleep(every.min(Duration::from_millis(20)));
        let overdue = options
            .timeout
            .is_some_and(|t| started.elapsed() >= t + Duration::from_secs(1));
        if interrupted(options) || overdue {
            abandoned = true;
            break;
        }
        if reported.elapsed() >= every {
            progress(&counts(&checker));
            reported = Instant::now();
        }
    }
    // Stateright reports itself done once its timeout passes, while a lone
    // depth-first worker may still be deep in its own stack: joining it would wait
    // for that stack to empty (minutes at 4 hosts). Past the limit nothing is joined.
    // Its timeout runs from before this clock started, so it may pass a little early
    // by this clock: judged without that slack, a check at 3 hosts joined its worker
    // and ran 10 minutes past a 60 s timeout.
    let past_limit = options
        .timeout
        .is_some_and(|t| started.elapsed() + EARLY >= t);
    let checker = if abandoned || past_limit {
        checker
    } else {
        checker.join()
    };
    let last = counts(&checker);
    let discoveries = checker.discoveries();
    // A stop condition ends the run early only once it is met; a run whose condition
    // was never met explored everything.
    let always: BTreeSet<&str> = model
        .properties()
        .into_iter()
        .filter(|p| matches!(p.expectation, Expectation::Always))
        .map(|p| p.name)
        .collect();
    let stopped_early = match options.stop {
        Stop::Never => false,
        Stop::FirstCounterexample => discoveries.keys().any(|k| always.contains(k)),
        Stop::At(name) => discoveries.contains_key(name),
    };
    let elapsed = started.elapsed() + EARLY;
    let cut = limit(options, over_memory, elapsed, last.states)
        .or(stopped_early.then_some(Cut::Discovery));
    let verdicts = verdicts(model, cut.is_none(), |name| {
        discoveries
            .get(name)
            .map(|p| (p.encode(model), Some(p.clone().into_vec())))
    });
    Report {
        verdicts,
        progress: last,
        cut,
    }
}

/// The limit a run has reached after `elapsed` and `states`, if any, the first of:
/// `over_memory` (what [`resident_over_cap`] read), an interrupt, the time, the states.
pub(crate) fn limit(
    options: &Options,
    over_memory: Option<u64>,
    elapsed: Duration,
    states: usize,
) -> Option<Cut> {
    if let Some(resident) = over_memory {
        Some(Cut::Memory { resident })
    } else if interrupted(options) {
        Some(Cut::Interrupted)
    } else if options.timeout.is_some_and(|t| elapsed >= t) {
        Some(Cut::Timeout)
    } else if options.max_states.is_some_and(|max| states >= max) {
        Some(Cut::States)
    } else {
        None
    }
}

/// This process's resident memory, where it has reached the cap in `options`.
pub(crate) fn resident_over_cap(options: &Options) -> Option<u64> {
    options
        .max_memory
        .and_then(|cap| resident_bytes().filter(|&resident| resident >= cap))
}

fn interrupted(options: &Options) -> bool {
    options
        .interrupt
        .as_ref()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// One verdict per property of `model`, in its order: `found` gives a property's
/// discovery (its encoded path, and the path), and `complete` says whether every state
/// within the bounds was explored, without which nothing holds.
pub(crate) fn verdicts<M: Model>(
    model: &M,
    complete: bool,
    mut found: impl FnMut(&'static str) -> Option<(String, Option<Path<M>>)>,
) -> Vec<Verdict<M::State, M::Action>> {
    model
        .properties()
        .into_iter()
        .map(|property| {
            let always = matches!(property.expectation, Expectation::Always);
            let found = found(property.name);
            let outcome = match (found.is_some(), always, complete) {
                (true, true, _) => Outcome::Counterexample,
                (true, false, _) => Outcome::Reached,
                (false, _, false) => Outcome::Incomplete,
                (false, true, true) => Outcome::Holds,
                (false, false, true) => Outcome::NotReached,
            };
            let (encoded, path) = found.map_or((None, None), |(e, p)| (Some(e), p));
            Verdict {
                property: property.name,
                always,
                outcome,
                encoded,
                path,
            }
        })
        .collect()
}

/// This process's resident memory in bytes, where the platform tells it (Linux's
/// `/proc/self/status`); `None` elsewhere.
pub fn resident_bytes() -> Option<u64> {
    proc_kib("/proc/self/status", "VmRSS:")
}

/// The memory the system could give without swapping, in bytes, where the platform
/// tells it (Linux's `/proc/meminfo`); `None` elsewhere.
pub fn available_bytes() -> Option<u64> {
    proc_kib("/proc/meminfo", "MemAvailable:")
}

/// A `NAME:   N kB` line's value, in bytes.
fn proc_kib(path: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// A path of states, each with the action taken from it (none for the last).
pub type Path<M> = Vec<(<M as Model>::State, Option<<M as Model>::Action>)>;

/// Rebuilds a path from its action-index encoding, as printed after a counterexample.
pub fn replay<M: Model>(model: &M, encoded: &str) -> Option<Path<M>>
where
    M::State: Clone,
    M::Action: Clone,
{
    let mut indices = encoded.split('/').map(|s| s.parse::<usize>().ok());
    let mut state = model.init_states().get(indices.next()??)?.clone();
    let mut path = Vec::new();
    for index in indices {
        let mut actions = Vec::new();
        model.actions(&state, &mut actions);
        let action = actions.get(index?)?.clone();
        let next = model.next_state(&state, action.clone())?;
        path.push((state, Some(action)));
        state = next;
    }
    path.push((state, None));
    Some(path)
}

/// The `always` properties that `state` breaks.
pub fn broken<M: Model>(model: &M, state: &M::State) -> Vec<&'static str> {
    model
        .properties()
        .into_iter()
        .filter(|p| matches!(p.expectation, Expectation::Always))
        .filter(|p| !(p.condition)(model, state))
        .map(|p| p.name)
        .collect()
}
