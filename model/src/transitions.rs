//! Engine transitions a check has already computed, to reuse instead of running the
//! engine again.
//!
//! An engine is a deterministic function of its state, the time it is handed and the
//! input: sans-IO, with no clock reads and no randomness of its own. A checker meets
//! the same host-local transition in many global states (the same host, in the same
//! state, at the same time, answered the same way, while the other hosts or the store
//! differ). Running the engine once per distinct transition and reusing the result
//! elsewhere explores exactly the same states; only the work per state falls. The
//! engine's debug self-checks still run on every distinct transition, which is every
//! transition they could ever see, since the same transition gives the same result.
//!
//! A remembered transition is reused only when the engine before it is *equal* to the
//! one at hand, not merely of the same digest, so a hash collision cannot make the
//! model take a step the engine would not.

use leasehold_engine::{Machine, Now};
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How many transitions a generation keeps; the memo keeps two. Reuse is local: a
/// host's next transitions mostly repeat ones met a few states earlier. Measured on
/// the 3 × 2 × 1 session-handoff bound (BENCHMARKS.md, "Model checking: reusing engine transitions"): one generation of
/// 8,192 reused 90 % of transitions in about 180 MB; one of 131,072 reused 94 %, but a
/// lease host's state is several kilobytes, and the 1.8 GB it took cost more in page
/// faults than the reuse saved.
const DEFAULT_CAPACITY: usize = 1 << 12;

/// Shards of the memo, each behind its own lock: checker threads rarely wait on each
/// other.
const SHARDS: usize = 64;

/// Transitions by key, each key listing the transitions whose key collides. The keys
/// are already hashes, so the map's own hasher is a cheap one.
type ByKey<M> = HashMap<u64, Vec<Arc<Entry<M>>>, ahash::RandomState>;

/// Part of the memo, in two generations: when the memo is full, the current one
/// becomes the previous one, and what was older is dropped. A transition found in
/// the previous generation moves to the current one, so the ones still in use stay.
struct Generations<M: Machine> {
    current: ByKey<M>,
    previous: ByKey<M>,
}

type Shard<M> = Mutex<Generations<M>>;

fn by_key<M: Machine>() -> ByKey<M> {
    HashMap::with_hasher(ahash::RandomState::with_seeds(1, 2, 3, 4))
}

/// One remembered transition.
struct Entry<M: Machine> {
    before: Arc<M>,
    now: Now,
    input: M::Input,
    after: Arc<M>,
    digest: u64,
    outputs: Vec<M::Output>,
}

/// What a step of an engine gave: the engine after it, its digest, and its outputs.
pub(crate) struct Outcome<M: Machine> {
    pub after: Arc<M>,
    pub digest: u64,
    pub outputs: Vec<M::Output>,
}

/// The engine transitions of one model's checks, shared by its checker threads.
///
/// ```
/// use leasehold_model::{Bounds, PartitionModel, check};
/// use std::time::Duration;
///
/// let bounds = Bounds { hosts: 2, partitions: 1, crashes: 0, horizon: 4, ..Bounds::default() };
/// let model = PartitionModel::new(bounds).unwrap();
/// check::check(&model, &check::Options::default(), Duration::from_secs(10), |_| {});
/// let stats = model.transitions.stats();
/// assert!(stats.reused > 0 && stats.computed > 0);
/// ```
pub struct Transitions<M: Machine> {
    shards: Vec<Shard<M>>,
    capacity: usize,
    kept: AtomicUsize,
    computed: AtomicUsize,
    reused: AtomicUsize,
}

/// How much a memo saved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Transitions the engine ran.
    pub computed: usize,
    /// Transitions taken from the memo instead.
    pub reused: usize,
}

impl<M: Machine> Transitions<M> {
    /// An empty memo.
    pub fn new() -> Transitions<M> {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// An empty memo that keeps at most `capacity` transitions at a time (0: none,
    /// so every transition runs the engine).
    pub fn with_capacity(capacity: usize) -> Transitions<M> {
        Transitions {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Generations {
                        current: by_key(),
                        previous: by_key(),
                    })
                })
                .collect(),
            capacity,
            kept: AtomicUsize::new(0),
            computed: AtomicUsize::new(0),
            reused: AtomicUsize::new(0),
        }
    }

    /// Whether it keeps any transitions at all.
    pub fn keeps(&self) -> bool {
        self.capacity > 0
    }

    /// How many transitions were computed and reused so far.
    pub fn stats(&self) -> Stats {
        Stats {
            computed: self.computed.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }
}

impl<M> Transitions<M>
where
    M: Machine + Clone + PartialEq + Hash,
    M::Input: Clone + PartialEq + Hash,
    M::Output: Clone,
{
    /// The engine `before` (whose digest is `digest`) after `input` at `now`: from the
    /// memo if this transition was seen, else by running it.
    pub(crate) fn step(
        &self,
        before: &Arc<M>,
        digest: u64,
        now: Now,
        input: M::Input,
        digest_of: impl Fn(&M) -> u64,
    ) -> Outcome<M> {
        let key = hash_key(&(digest, now, &input));
        // The top bits pick the shard; the map hashes the key again for its slot.
        let shard = &self.shards[(key >> 58) as usize % SHARDS];
        if self.capacity > 0 {
            let same = |e: &&Arc<Entry<M>>| {
                e.now == now
                    && e.input == input
                    && (Arc::ptr_eq(&e.before, before) || *e.before == **before)
            };
            let mut generations = lock(shard);
            let mut found = generations
                .current
                .get(&key)
                .and_then(|entries| entries.iter().find(same).cloned());
            if found.is_none() {
                found = generations
                    .previous
                    .get(&key)
                    .and_then(|entries| entries.iter().find(same).cloned());
                if let Some(entry) = &found {
                    generations
                        .current
                        .entry(key)
                        .or_default()
                        .push(entry.clone());
                    drop(generations);
                    self.count_one();
                }
            }
            if let Some(entry) = found {
                self.reused.fetch_add(1, Ordering::Relaxed);
                return Outcome {
                    after: entry.after.clone(),
                    digest: entry.digest,
                    outputs: entry.outputs.clone(),
                };
            }
        }
        self.computed.fetch_add(1, Ordering::Relaxed);
        let mut machine = M::clone(before);
        let outputs = run(&mut machine, now, input.clone());
        let after = Arc::new(machine);
        let after_digest = digest_of(&after);
        if self.capacity > 0 {
            self.count_one();
            let entry = Arc::new(Entry {
                before: before.clone(),
                now,
                input,
                after: after.clone(),
                digest: after_digest,
                outputs: outputs.clone(),
            });
            lock(shard).current.entry(key).or_default().push(entry);
        }
        Outcome {
            after,
            digest: after_digest,
            outputs,
        }
    }

    /// Counts one more transition in the current generation, and starts a new one
    /// when it is full.
    fn count_one(&self) {
        if self.kept.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.age();
        }
    }

    /// Drops the previous generation and makes the current one the previous. Only
    /// speed depends on what is kept.
    fn age(&self) {
        for shard in &self.shards {
            let mut generations = lock(shard);
            generations.previous = std::mem::replace(&mut generations.current, by_key());
        }
        // The entry about to go in is the first of the new count.
        self.kept.store(1, Ordering::Relaxed);
    }
}

impl<M: Machine> Default for Transitions<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Machine> fmt::Debug for Transitions<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transitions")
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Hands `machine` one input and collects what it output.
pub(crate) fn run<M: Machine>(machine: &mut M, now: Now, input: M::Input) -> Vec<M::Output> {
    // A refused input changes nothing but the clock, as for any driver.
    let _ = machine.handle_input(now, input);
    std::iter::from_fn(|| machine.poll_output()).collect()
}

/// A shard, even if a checker thread panicked while holding it: entries are whole
/// once inserted, and a lost one only costs a recomputation.
fn lock<T>(shard: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A hash with fixed keys, so the same value hashes the same in every state and run:
/// engines' digests, and the keys of remembered transitions. AHash, as stateright's
/// own fingerprints.
pub(crate) fn hash_key<T: Hash>(value: &T) -> u64 {
    let keys = ahash::RandomState::with_seeds(
        0x6c65_6173_6568_6f6c,
        0x6469_6765_7374_0001,
        0x9e37_79b9_7f4a_7c15,
        0xd1b5_4a32_d192_ed03,
    );
    keys.hash_one(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_engine::{LocalTime, WallTime};

    /// A machine that sums its inputs and reports each new sum with the time it
    /// was handed.
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct Sum {
        total: u64,
        out: Vec<(u64, u64)>,
    }

    impl Machine for Sum {
        type Input = u64;
        type Output = (u64, u64);
        type Error = std::convert::Infallible;

        fn handle_input(&mut self, now: Now, input: u64) -> Result<(), Self::Error> {
            self.total += input;
            self.out.push((self.total, now.local.as_millis()));
            Ok(())
        }

        fn poll_output(&mut self) -> Option<(u64, u64)> {
            self.out.pop()
        }

        fn poll_timeout(&self) -> Option<LocalTime> {
            None
        }
    }

    fn at(ms: u64) -> Now {
        Now::new(LocalTime::from_millis(ms), WallTime(0))
    }

    fn sum(total: u64) -> Arc<Sum> {
        Arc::new(Sum {
            total,
            out: Vec::new(),
        })
    }

    fn digest(machine: &Sum) -> u64 {
        hash_key(machine)
    }

    fn step(
        memo: &Transitions<Sum>,
        before: &Arc<Sum>,
        now: Now,
        input: u64,
    ) -> (u64, Vec<(u64, u64)>) {
        let outcome = memo.step(before, digest(before), now, input, digest);
        assert_eq!(outcome.digest, digest(&outcome.after));
        (outcome.after.total, outcome.outputs)
    }

    #[test]
    fn a_transition_met_again_in_another_state_is_reused_not_run() {
        let memo = Transitions::new();
        let first = step(&memo, &sum(1), at(5), 2);
        // An equal engine held by another state: a different allocation.
        let again = step(&memo, &sum(1), at(5), 2);
        assert_eq!(first, (3, vec![(3, 5)]));
        assert_eq!(again, first);
        assert_eq!(
            memo.stats(),
            Stats {
                computed: 1,
                reused: 1
            }
        );
    }

    #[test]
    fn another_time_input_or_engine_runs_the_engine() {
        let memo = Transitions::new();
        step(&memo, &sum(1), at(5), 2);
        assert_eq!(step(&memo, &sum(1), at(6), 2), (3, vec![(3, 6)]));
        assert_eq!(step(&memo, &sum(1), at(5), 3), (4, vec![(4, 5)]));
        assert_eq!(step(&memo, &sum(2), at(5), 2), (4, vec![(4, 5)]));
        assert_eq!(
            memo.stats(),
            Stats {
                computed: 4,
                reused: 0
            }
        );
    }

    /// The sibling: were engines matched by digest alone, an engine whose digest
    /// collides with a remembered one would take that one's step.
    #[test]
    fn engines_whose_digests_collide_are_told_apart() {
        let memo = Transitions::new();
        let (a, b) = (sum(1), sum(10));
        let colliding = 42;
        let from_a = memo.step(&a, colliding, at(5), 2, digest);
        let from_b = memo.step(&b, colliding, at(5), 2, digest);
        assert_eq!(from_a.after.total, 3);
        assert_eq!(from_b.after.total, 12);
        assert_eq!(
            memo.stats(),
            Stats {
                computed: 2,
                reused: 0
            }
        );
    }

    #[test]
    fn a_full_memo_forgets_its_oldest_transitions_and_still_answers_right() {
        let memo = Transitions::with_capacity(2);
        for input in 0..5 {
            step(&memo, &sum(1), at(5), input);
        }
        // Two generations later, the first transition is gone: it runs again.
        assert_eq!(step(&memo, &sum(1), at(5), 0), (1, vec![(1, 5)]));
        assert_eq!(
            memo.stats(),
            Stats {
                computed: 6,
                reused: 0
            }
        );
        assert_eq!(step(&memo, &sum(1), at(5), 0), (1, vec![(1, 5)]));
        assert_eq!(memo.stats().reused, 1);
    }

    #[test]
    fn a_transition_still_in_use_outlives_its_generation() {
        let memo = Transitions::with_capacity(2);
        step(&memo, &sum(1), at(5), 0);
        step(&memo, &sum(1), at(5), 1);
        // A new generation starts; transition 0 is met again, so it moves up.
        step(&memo, &sum(1), at(5), 2);
        step(&memo, &sum(1), at(5), 0);
        // And another: transition 1, not met since, is dropped; 0 stays.
        step(&memo, &sum(1), at(5), 3);
        step(&memo, &sum(1), at(5), 0);
        step(&memo, &sum(1), at(5), 1);
        assert_eq!(
            memo.stats(),
            Stats {
                computed: 5,
                reused: 2
            }
        );
    }

    #[test]
    fn a_memo_without_room_keeps_nothing() {
        let memo = Transitions::with_capacity(0);
        assert!(!memo.keeps());
        step(&memo, &sum(1), at(5), 2);
        step(&memo, &sum(1), at(5), 2);
        assert_eq!(
            memo.stats(),
            Stats {
                computed: 2,
                reused: 0
            }
        );
    }
}
