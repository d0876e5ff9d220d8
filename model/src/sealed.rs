//! A client's engine as the world holds it: shared between the states that have it,
//! and hashed once per change instead of once per state.
//!
//! A step changes one engine at most, yet stateright hashes every state it makes,
//! whole. Sharing the engines a step leaves alone saves cloning them, and keeping
//! each engine's digest saves hashing them again. Before, cloning, dropping and
//! hashing states took about 40 % of the 3 × 3 × 1 partition check's time (perf;
//! BENCHMARKS.md, "Where the time went").

use crate::transitions::{Transitions, hash_key};
use leasehold_engine::Now;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// A client's engine, shared and with its digest kept: sealed after each change.
///
/// Change it only through [`Sealed::get_mut`], then [`Sealed::seal`] it; the world's
/// `run` does both. An engine left unsealed still hashes correctly, only slower.
///
/// ```
/// use leasehold_model::world::Sealed;
///
/// let mut a = Sealed::new(vec![1, 2]);
/// let b = a.clone();
/// assert_eq!(a, b);
/// a.get_mut().push(3);
/// a.seal();
/// assert_ne!(a, b);
/// assert_eq!(*b, [1, 2]);
/// ```
#[derive(Clone, Debug)]
pub struct Sealed<M> {
    machine: Arc<M>,
    /// The machine's hash; `None` while it may have changed since.
    digest: Option<u64>,
}

fn digest_of<M: Hash>(machine: &M) -> u64 {
    hash_key(machine)
}

impl<M: Hash + Clone> Sealed<M> {
    /// A sealed engine.
    pub fn new(machine: M) -> Sealed<M> {
        let digest = Some(digest_of(&machine));
        Sealed {
            machine: Arc::new(machine),
            digest,
        }
    }

    /// The machine, to change: a copy of its own if another state shares it.
    pub fn get_mut(&mut self) -> &mut M {
        self.digest = None;
        Arc::make_mut(&mut self.machine)
    }

    /// Records the digest after a change.
    pub fn seal(&mut self) {
        if self.digest.is_none() {
            self.digest = Some(digest_of(&*self.machine));
        }
    }
}

impl<M> Sealed<M>
where
    M: leasehold_engine::Machine + Clone + PartialEq + Hash,
    M::Input: Clone + PartialEq + Hash,
    M::Output: Clone,
{
    /// Hands the machine `input` at `now` and returns what it output, reusing the
    /// transition if `transitions` has seen it (see [`Transitions`]).
    pub fn handle(
        &mut self,
        transitions: &Transitions<M>,
        now: Now,
        input: M::Input,
    ) -> Vec<M::Output> {
        if !transitions.keeps() {
            return crate::transitions::run(self.get_mut(), now, input);
        }
        let digest = match self.digest {
            Some(d) => d,
            None => digest_of(&*self.machine),
        };
        let step = transitions.step(&self.machine, digest, now, input, digest_of);
        self.machine = step.after;
        self.digest = Some(step.digest);
        step.outputs
    }
}

impl<M> Deref for Sealed<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.machine
    }
}

impl<M: Hash> Hash for Sealed<M> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.digest.unwrap_or_else(|| digest_of(&*self.machine)));
    }
}

impl<M: PartialEq> PartialEq for Sealed<M> {
    fn eq(&self, other: &Sealed<M>) -> bool {
        Arc::ptr_eq(&self.machine, &other.machine) || *self.machine == *other.machine
    }
}

impl<M: Eq> Eq for Sealed<M> {}
