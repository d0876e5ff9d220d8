//! Seeded random walks through a model: the search for counterexamples too deep for
//! an exhaustive check to reach in time.
//!
//! Walk `k` of seed `s` is a pure function of `(s, k)`: it starts from an initial
//! state and takes, at each state, one of the enabled actions at random, until it
//! leaves the model's boundary, runs out of actions, comes back to a state it has
//! already been in, or breaks an `always` property. Each walk draws a fault rate
//! first: where both a fault ([`Checkable::is_fault`]) and a step of the system's own
//! are enabled, it takes a fault at that rate, then one of that kind uniformly. A
//! uniform choice over all actions would spend the fault budgets in the first few
//! steps, as faults outnumber the rest; a bug that needs a fault late in the horizon
//! (a read throttled after a pause) is then out of reach. Workers take walks in order.
//! When a run stops at a discovery ([`Stop`]), no walk after the first that made it
//! starts, every walk before it runs to its end, and what later walks already running
//! found is dropped: the report is the first such walk's, whatever the thread count,
//! and the same seed finds it again. If a limit (time, states, memory, an interrupt)
//! cuts a walk before that one short, the run is reported cut by the limit instead.
//!
//! Walks never explore everything: a run with no discovery is incomplete, however
//! long it ran. A walk ends at its first broken `always` property, so it never sees
//! what lies past it (an exhaustive search does). `eventually` properties are judged
//! where a walk runs out of actions, as stateright judges them at terminal states.
//! Stateright's own simulation checker is not used, as it records a wrong path
//! whenever a generated action turns out to be disabled (its `next_state` is
//! `None`), which happens in these models.

use crate::check::{Checkable, limit, resident_over_cap};
use crate::check::{Cut, Options, Progress, Report, Stop, replay, verdicts};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stateright::{Expectation, Property};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A walk that neither leaves the boundary nor repeats a state within this many steps
/// is cut short: a model whose time never runs out would otherwise hold a worker.
const MAX_STEPS: usize = 100_000;

/// States a worker walks between looks at the shared stop conditions.
const LOOK_EVERY: usize = 1024;

/// A property's first discovery: the walk that made it and its action indices.
#[derive(Clone, Debug)]
struct Found {
    walk: u64,
    encoded: String,
}

struct Shared {
    next_walk: AtomicU64,
    /// Walks run to their end.
    walks: AtomicU64,
    states: AtomicUsize,
    depth: AtomicUsize,
    /// The first walk that broke an `always` property (or left an `eventually` one
    /// unmet), once one has.
    failing: AtomicU64,
    /// The first walk a limit cut short, if one was.
    abandoned: AtomicU64,
    stop: AtomicBool,
    /// Per property, the first walk known to have discovered it, so that a
    /// discovery no earlier than that costs no lock.
    firsts: Vec<AtomicU64>,
    found: Mutex<BTreeMap<&'static str, Found>>,
}

/// How a walk ended.
enum Ended {
    /// At its end: a boundary, a repeat, no action left, or a broken property.
    Done,
    /// Cut short by a limit.
    Abandoned,
}

/// Walks `model` from `seed`, calling `progress` about every `every`.
pub(crate) fn walk<M: Checkable>(
    model: &M,
    options: &Options,
    seed: u64,
    every: Duration,
    mut progress: impl FnMut(&Progress),
) -> Report<M::State, M::Action>
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let started = Instant::now();
    let properties = model.properties();
    let target = match options.stop {
        Stop::At(name) => properties.iter().position(|p| p.name == name),
        _ => None,
    };
    let shared = Shared {
        next_walk: AtomicU64::new(0),
        walks: AtomicU64::new(0),
        states: AtomicUsize::new(0),
        depth: AtomicUsize::new(0),
        failing: AtomicU64::new(u64::MAX),
        abandoned: AtomicU64::new(u64::MAX),
        stop: AtomicBool::new(false),
        firsts: properties
            .iter()
            .map(|_| AtomicU64::new(u64::MAX))
            .collect(),
        found: Mutex::new(BTreeMap::new()),
    };
    // The walk whose discovery ends the run, once there is one.
    let met = |shared: &Shared| match (options.stop, target) {
        (Stop::FirstCounterexample, _) => shared.failing.load(Ordering::Relaxed),
        (Stop::At(_), Some(i)) => shared.firsts[i].load(Ordering::Relaxed),
        _ => u64::MAX,
    };
    let counts = |shared: &Shared| Progress {
        states: shared.states.load(Ordering::Relaxed),
        unique: 0,
        depth: shared.depth.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
        walks: Some(shared.walks.load(Ordering::Relaxed)),
    };
    let mut cut_by = None;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..options.threads.max(1))
            .map(|_| scope.spawn(|| worker(model, seed, &shared, &met)))
            .collect();
        let mut reported = Instant::now();
        loop {
            if workers.iter().all(|w| w.is_finished()) {
                break;
            }
            std::thread::sleep(every.min(Duration::from_millis(20)));
            let why = limit(
                options,
                resident_over_cap(options),
                started.elapsed(),
                shared.states.load(Ordering::Relaxed),
            );
            if cut_by.is_none() && why.is_some() {
                cut_by = why;
                shared.stop.store(true, Ordering::Relaxed);
            }
            if reported.elapsed() >= every {
                progress(&counts(&shared));
                reported = Instant::now();
            }
        }
    });
    let last = counts(&shared);
    let cutoff = met(&shared);
    let mut found = shared.found.into_inner().unwrap_or_else(|e| e.into_inner());
    // Later walks that were already running when the deciding one ended found what a
    // run on fewer threads would never have reached.
    found.retain(|_, f| f.walk <= cutoff);
    let complete_to_cutoff = cutoff != u64::MAX && shared.abandoned.into_inner() > cutoff;
    let cut = if complete_to_cutoff {
        Cut::Discovery
    } else {
        // Workers end on their own only at a discovery, so a run not decided by one
        // was stopped by a limit.
        cut_by.unwrap_or(Cut::Interrupted)
    };
    // Walks never explore everything: what they did not find is incomplete.
    let verdicts = verdicts(model, false, |name| {
        found
            .get(name)
            .map(|f| (f.encoded.clone(), replay(model, &f.encoded)))
    });
    Report {
        verdicts,
        progress: last,
        cut: Some(cut),
    }
}

fn worker<M: Checkable>(model: &M, seed: u64, shared: &Shared, met: &impl Fn(&Shared) -> u64)
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let properties = model.properties();
    let mut tally = Tally::default();
    while !shared.stop.load(Ordering::Relaxed) {
        let k = shared.next_walk.fetch_add(1, Ordering::Relaxed);
        // A walk after the one that decided the run cannot be the one reported;
        // every walk before it still runs.
        if k > met(shared) {
            break;
        }
        match walk_once(model, &properties, seed, k, shared, &mut tally) {
            Ended::Done => {
                shared.walks.fetch_add(1, Ordering::Relaxed);
            }
            Ended::Abandoned => {
                shared.abandoned.fetch_min(k, Ordering::Relaxed);
                break;
            }
        }
    }
    tally.flush(shared);
}

/// What a worker counted and has not yet published.
#[derive(Default)]
struct Tally {
    states: usize,
    depth: usize,
}

impl Tally {
    fn flush(&mut self, shared: &Shared) {
        shared.states.fetch_add(self.states, Ordering::Relaxed);
        shared.depth.fetch_max(self.depth, Ordering::Relaxed);
        self.states = 0;
    }
}

/// Walk `k`.
fn walk_once<M: Checkable>(
    model: &M,
    properties: &[Property<M>],
    seed: u64,
    k: u64,
    shared: &Shared,
    tally: &mut Tally,
) -> Ended
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(k);
    let hasher = ahash::RandomState::with_seeds(1, 2, 3, 4);
    let mut inits = model.init_states();
    // Counted even when there is none, so that a state limit ends such a run.
    tally.states += 1;
    if inits.is_empty() {
        return Ended::Done;
    }
    let first = rng.random_range(0..inits.len());
    let mut state = inits.swap_remove(first);
    let mut indices = vec![first];
    let mut seen = HashSet::new();
    let mut unmet: Vec<usize> = properties
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.expectation, Expectation::Eventually))
        .map(|(i, _)| i)
        .collect();
    let mut actions = Vec::new();
    let mut faults = Vec::new();
    let mut progress = Vec::new();
    let rate = fault_rate(&mut rng);
    let encode = |indices: &[usize]| {
        indices
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("/")
    };
    loop {
        if indices.len() > 1 {
            tally.states += 1;
        }
        tally.depth = tally.depth.max(indices.len() - 1);
        if tally.states >= LOOK_EVERY {
            tally.flush(shared);
            if shared.stop.load(Ordering::Relaxed) {
                return Ended::Abandoned;
            }
        }
        if !model.within_boundary(&state) || !seen.insert(hasher.hash_one(&state)) {
            return Ended::Done;
        }
        for (i, property) in properties.iter().enumerate() {
            let holds = (property.condition)(model, &state);
            match property.expectation {
                Expectation::Always if !holds => {
                    record(shared, i, property.name, k, || encode(&indices));
                    shared.failing.fetch_min(k, Ordering::Relaxed);
                    return Ended::Done;
                }
                Expectation::Sometimes if holds => {
                    record(shared, i, property.name, k, || encode(&indices));
                }
                Expectation::Eventually if holds => unmet.retain(|&e| e != i),
                _ => {}
            }
        }
        if indices.len() > MAX_STEPS {
            return Ended::Done;
        }
        actions.clear();
        model.actions(&state, &mut actions);
        faults.clear();
        progress.clear();
        for (i, action) in actions.iter().enumerate() {
            if model.is_fault(action) {
                faults.push(i);
            } else {
                progress.push(i);
            }
        }
        // A disabled action is drawn again from what is left of its class, then of
        // the other.
        let fault_first = !faults.is_empty() && (progress.is_empty() || rng.random_bool(rate));
        let next = loop {
            let class = match (fault_first, faults.is_empty(), progress.is_empty()) {
                (_, true, true) => break None,
                (true, false, _) | (false, false, true) => &mut faults,
                _ => &mut progress,
            };
            let index = class.swap_remove(rng.random_range(0..class.len()));
            if let Some(next) = model.next_state(&state, actions[index].clone()) {
                break Some((index, next));
            }
        };
        let Some((index, next)) = next else {
            // A terminal state: an `eventually` property still unmet is broken.
            for &i in &unmet {
                record(shared, i, properties[i].name, k, || encode(&indices));
                shared.failing.fetch_min(k, Ordering::Relaxed);
            }
            return Ended::Done;
        };
        indices.push(index);
        state = next;
    }
}

/// The least and greatest rate at which a walk takes a fault where both a fault and a
/// step of the system's own are enabled, as powers of two: from one such state in 64
/// to every one. A walk's rate is drawn log-uniformly between them, as swarm testing
/// varies its configurations: walks at a high rate spend their budgets at once, those
/// at a low one keep them for late in the horizon. BENCHMARKS.md (twenty-first
/// session) compares rates with the uniform choice.
const FAULT_RATE_LOG2: (f64, f64) = (-6.0, 0.0);

/// A walk's fault rate, drawn from its own stream before its first step.
fn fault_rate(rng: &mut ChaCha8Rng) -> f64 {
    let (least, most) = FAULT_RATE_LOG2;
    rng.random_range(least..=most).exp2()
}

/// Keeps walk `k`'s discovery of property `i` (`name`) unless an earlier walk made one.
fn record(shared: &Shared, i: usize, name: &'static str, k: u64, encoded: impl FnOnce() -> String) {
    if shared.firsts[i].load(Ordering::Relaxed) <= k {
        return;
    }
    let mut found = shared.found.lock().unwrap_or_else(|e| e.into_inner());
    if found.get(name).is_some_and(|f| f.walk <= k) {
        return;
    }
    found.insert(
        name,
        Found {
            walk: k,
            encoded: encoded(),
        },
    );
    shared.firsts[i].store(k, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Outcome, Search, check};
    use stateright::Model;

    /// A clock that ticks to 50 beside eight ways to fail once: the one property breaks
    /// only if the failure comes at tick 40 or later. `spaced` says whether the walks
    /// are told which actions are faults.
    #[derive(Clone)]
    struct LateFault {
        spaced: bool,
    }

    #[derive(Clone, Debug, PartialEq)]
    enum Act {
        Tick,
        Fail(u8),
    }

    impl Model for LateFault {
        type State = (u8, Option<u8>);
        type Action = Act;

        fn init_states(&self) -> Vec<Self::State> {
            vec![(0, None)]
        }

        fn actions(&self, state: &Self::State, actions: &mut Vec<Act>) {
            actions.push(Act::Tick);
            if state.1.is_none() {
                actions.extend((0..8).map(Act::Fail));
            }
        }

        fn next_state(&self, state: &Self::State, action: Act) -> Option<Self::State> {
            match action {
                Act::Tick => Some((state.0 + 1, state.1)),
                Act::Fail(_) => Some((state.0, Some(state.0))),
            }
        }

        fn within_boundary(&self, state: &Self::State) -> bool {
            state.0 <= 50
        }

        fn properties(&self) -> Vec<Property<Self>> {
            vec![Property::always(
                "a failure comes early",
                |_, s: &Self::State| s.1.is_none_or(|at| at < 40),
            )]
        }
    }

    impl Checkable for LateFault {
        fn is_fault(&self, action: &Act) -> bool {
            self.spaced && matches!(action, Act::Fail(_))
        }
    }

    fn late_failure_found(spaced: bool) -> bool {
        let options = Options {
            search: Search::Walks { seed: 1 },
            threads: 1,
            max_states: Some(100_000),
            stop: Stop::FirstCounterexample,
            ..Options::default()
        };
        let report = check(
            &LateFault { spaced },
            &options,
            Duration::from_secs(600),
            |_| {},
        );
        report.verdicts[0].outcome == Outcome::Counterexample
    }

    #[test]
    fn walks_that_know_the_faults_keep_one_for_late_in_the_horizon() {
        assert!(late_failure_found(true));
    }

    #[test]
    fn a_uniform_choice_spends_the_fault_at_once() {
        // One tick against eight failures: 40 ticks first come once in 9^40 walks.
        assert!(!late_failure_found(false));
    }
}
