//! Seeded random walks through a model: the search for counterexamples too deep for
//! an exhaustive check to reach in time.
//!
//! Walk `k` of seed `s` is a pure function of `(s, k)`: it starts from an initial
//! state and takes, at each state, one of the enabled actions uniformly at random,
//! until it leaves the model's boundary, runs out of actions, or comes back to a state
//! it has already been in. Workers take walks in order, and once walk `k` breaks an
//! `always` property no walk after `k` starts; every walk before it is finished. So
//! the counterexample reported is that of the first failing walk, whatever the thread
//! count, and the same seed finds it again.
//!
//! Walks never explore everything: a run with no discovery is incomplete, however
//! long it ran. Stateright's own simulation checker is not used, as it records a
//! wrong path whenever a generated action turns out to be disabled (its `next_state`
//! is `None`), which happens in these models.

use crate::check::{Checkable, resident_bytes};
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
    walks: AtomicU64,
    states: AtomicUsize,
    depth: AtomicUsize,
    /// The first walk that broke an `always` property, once one has.
    failing: AtomicU64,
    stop: AtomicBool,
    /// Per property, the first walk known to have discovered it, so that a
    /// discovery no earlier than that costs no lock.
    firsts: Vec<AtomicU64>,
    found: Mutex<BTreeMap<&'static str, Found>>,
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
    let shared = Shared {
        next_walk: AtomicU64::new(0),
        walks: AtomicU64::new(0),
        states: AtomicUsize::new(0),
        depth: AtomicUsize::new(0),
        failing: AtomicU64::new(u64::MAX),
        stop: AtomicBool::new(false),
        firsts: model
            .properties()
            .iter()
            .map(|_| AtomicU64::new(u64::MAX))
            .collect(),
        found: Mutex::new(BTreeMap::new()),
    };
    let counts = |shared: &Shared| Progress {
        states: shared.states.load(Ordering::Relaxed),
        unique: 0,
        depth: shared.depth.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
        walks: shared.walks.load(Ordering::Relaxed),
    };
    let mut cut = None;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..options.threads.max(1))
            .map(|_| scope.spawn(|| worker(model, options, seed, &shared)))
            .collect();
        let mut reported = Instant::now();
        loop {
            if workers.iter().all(|w| w.is_finished()) {
                break;
            }
            std::thread::sleep(every.min(Duration::from_millis(20)));
            let interrupted = options
                .interrupt
                .as_ref()
                .is_some_and(|flag| flag.load(Ordering::Relaxed));
            let over_memory = options
                .max_memory
                .and_then(|cap| resident_bytes().filter(|&resident| resident >= cap));
            let overdue = options.timeout.is_some_and(|t| started.elapsed() >= t);
            let capped = options
                .max_states
                .is_some_and(|max| shared.states.load(Ordering::Relaxed) >= max);
            let why = if let Some(resident) = over_memory {
                Some(Cut::Memory { resident })
            } else if interrupted {
                Some(Cut::Interrupted)
            } else if overdue {
                Some(Cut::Timeout)
            } else if capped {
                Some(Cut::States)
            } else {
                None
            };
            if why.is_some() {
                cut = why;
                shared.stop.store(true, Ordering::Relaxed);
            }
            if reported.elapsed() >= every {
                progress(&counts(&shared));
                reported = Instant::now();
            }
        }
    });
    let last = counts(&shared);
    let found = shared.found.into_inner().unwrap_or_else(|e| e.into_inner());
    let failed = found.keys().any(|name| {
        model
            .properties()
            .iter()
            .any(|p| p.name == *name && matches!(p.expectation, Expectation::Always))
    });
    let stopped_early = match options.stop {
        Stop::Never => false,
        Stop::FirstCounterexample => failed,
        Stop::At(name) => found.contains_key(name),
    };
    // A stop condition met wins over a limit reached while the last walks finished.
    let cut = if stopped_early {
        Cut::Discovery
    } else {
        cut.unwrap_or(Cut::Interrupted)
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

fn worker<M: Checkable>(model: &M, options: &Options, seed: u64, shared: &Shared)
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let properties = model.properties();
    let target = match options.stop {
        Stop::At(name) => properties.iter().position(|p| p.name == name),
        _ => None,
    };
    let mut unflushed = 0usize;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let k = shared.next_walk.fetch_add(1, Ordering::Relaxed);
        // A walk after the first that met the stop condition cannot be the one
        // reported; every walk before it still runs.
        let met = match (options.stop, target) {
            (Stop::FirstCounterexample, _) => shared.failing.load(Ordering::Relaxed),
            (Stop::At(_), Some(i)) => shared.firsts[i].load(Ordering::Relaxed),
            _ => u64::MAX,
        };
        if k > met {
            break;
        }
        let stopped = walk_once(model, &properties, seed, k, shared, &mut unflushed);
        shared.walks.fetch_add(1, Ordering::Relaxed);
        if stopped {
            break;
        }
    }
    shared.states.fetch_add(unflushed, Ordering::Relaxed);
}

/// Walk `k`; whether the run stopped meanwhile.
fn walk_once<M: Checkable>(
    model: &M,
    properties: &[Property<M>],
    seed: u64,
    k: u64,
    shared: &Shared,
    unflushed: &mut usize,
) -> bool
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(k);
    let hasher = ahash::RandomState::with_seeds(1, 2, 3, 4);
    let mut inits = model.init_states();
    if inits.is_empty() {
        return false;
    }
    let first = rng.random_range(0..inits.len());
    let mut state = inits.swap_remove(first);
    let mut indices = vec![first];
    let mut seen = HashSet::new();
    let mut eventually: Vec<usize> = properties
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.expectation, Expectation::Eventually))
        .map(|(i, _)| i)
        .collect();
    let mut actions = Vec::new();
    let mut order = Vec::new();
    let encode = |indices: &[usize]| {
        indices
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("/")
    };
    loop {
        if !model.within_boundary(&state) || !seen.insert(hasher.hash_one(&state)) {
            break;
        }
        *unflushed += 1;
        if *unflushed >= LOOK_EVERY {
            shared.states.fetch_add(*unflushed, Ordering::Relaxed);
            *unflushed = 0;
            if shared.stop.load(Ordering::Relaxed) {
                return true;
            }
        }
        shared.depth.fetch_max(indices.len() - 1, Ordering::Relaxed);
        for (i, property) in properties.iter().enumerate() {
            let hit = match property.expectation {
                Expectation::Always => !(property.condition)(model, &state),
                Expectation::Sometimes => (property.condition)(model, &state),
                Expectation::Eventually => {
                    if (property.condition)(model, &state) {
                        eventually.retain(|&e| e != i);
                    }
                    false
                }
            };
            if hit {
                record(shared, i, property.name, k, || encode(&indices));
                if matches!(property.expectation, Expectation::Always) {
                    shared.failing.fetch_min(k, Ordering::Relaxed);
                    return false;
                }
            }
        }
        if indices.len() > MAX_STEPS {
            return false;
        }
        actions.clear();
        model.actions(&state, &mut actions);
        order.clear();
        order.extend(0..actions.len());
        let next = loop {
            if actions.is_empty() {
                break None;
            }
            let pick = rng.random_range(0..actions.len());
            let action = actions.swap_remove(pick);
            let index = order.swap_remove(pick);
            if let Some(next) = model.next_state(&state, action) {
                break Some((index, next));
            }
        };
        let Some((index, next)) = next else { break };
        indices.push(index);
        state = next;
    }
    // An `eventually` property still unmet where the walk ends is a counterexample.
    for i in eventually {
        record(shared, i, properties[i].name, k, || encode(&indices));
        shared.failing.fetch_min(k, Ordering::Relaxed);
    }
    false
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
