//! Seeded random walks through a model: the search for counterexamples too deep for
//! an exhaustive check to reach in time.
//!
//! Walk `k` of seed `s` is a pure function of `(s, k)`: it starts from an initial
//! state and takes, at each state, one of the enabled actions uniformly at random,
//! until it leaves the model's boundary, runs out of actions, comes back to a state it
//! has already been in, or breaks an `always` property. Workers take walks in order.
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
    let mut limit = None;
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
            if limit.is_none() && why.is_some() {
                limit = why;
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
        limit.unwrap_or(Cut::Interrupted)
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
    let mut order = Vec::new();
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
