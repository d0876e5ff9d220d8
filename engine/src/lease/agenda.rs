//! Which leases an input can concern, so that an input costs what it touches.
//!
//! A host owning many leases used to look at every one of them on every input: a
//! reply about one lease paid for a hundred. The agenda narrows each input to the
//! leases that changed since the passes last looked at them, the leases whose next
//! wake-up time has come, the handoffs whose claimant's heartbeat has just expired,
//! and, under the timestamp rule, the few whose needs hang on the wall clock.
//! A lease outside that scope would do nothing in the passes, so the host behaves
//! exactly as if it had looked at them all; debug builds check that on every input
//! of a host with a small table by running the full passes on a copy.
//!
//! The agenda is an index: it says where to look, not what is there. The host works
//! out each lease's [`Entry`] from its state (see `wake`) and files it here, so the
//! agenda takes no part in the host's equality or hashing (see `LeaseHost`'s impls)
//! and the model checker's state space is unchanged by it.

use crate::ids::LeaseToken;
use crate::time::LocalTime;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Derived bookkeeping about which leases the next input must look at.
#[derive(Clone, Debug, Default)]
pub(super) struct Agenda {
    /// The leases this host owns or must re-read: the only ones an ordinary input can
    /// concern. Exactly those slots after every input; a superset while one is
    /// handled.
    active: BTreeSet<LeaseToken>,
    /// Leases changed since the passes last looked at them.
    dirty: BTreeSet<LeaseToken>,
    /// When each owned or stale lease next needs a look, earliest first.
    wakes: BTreeSet<(LocalTime, LeaseToken)>,
    /// The key of each lease's entry in `wakes`.
    wake_of: BTreeMap<LeaseToken, LocalTime>,
    /// When the claimant of each lease being handed off stops counting as alive, at
    /// which point the handoff must be called off. Not a wake-up for the driver: the
    /// host has always noticed that at its next input, whatever it was.
    rechecks: BTreeSet<(LocalTime, LeaseToken)>,
    /// The key of each lease's entry in `rechecks`.
    recheck_of: BTreeMap<LeaseToken, LocalTime>,
    /// Leases being handed off: a scan that changes what the members claim concerns
    /// them all.
    handoffs: BTreeSet<LeaseToken>,
    /// Leases looked at on every input because, under the timestamp rule, what they
    /// wait for (a fence, a claimant's heartbeat) hangs on the wall clock, which may
    /// step.
    watched: BTreeSet<LeaseToken>,
    /// The configured partitions in token order, to walk beside the slots.
    partitions: Arc<Vec<LeaseToken>>,
}

/// Where one owned or stale lease stands: what the host worked out from its state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Entry {
    /// It is being handed off.
    pub handoff: bool,
    /// It is looked at on every input; its times are worked out afresh each time.
    pub watched: bool,
    /// When it next needs a look, if nothing else changes.
    pub wake: Option<LocalTime>,
    /// When its handoff's claimant stops counting as alive.
    pub recheck: Option<LocalTime>,
}

impl Agenda {
    /// An empty agenda for a host configured with `partitions`.
    pub fn new(partitions: &[LeaseToken]) -> Agenda {
        let mut sorted = partitions.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Agenda {
            partitions: Arc::new(sorted),
            ..Agenda::default()
        }
    }

    /// The configured partitions in token order, without repeats.
    pub fn partitions(&self) -> &[LeaseToken] {
        &self.partitions
    }

    /// The leases this host owns or must re-read.
    pub fn active(&self) -> &BTreeSet<LeaseToken> {
        &self.active
    }

    /// Notes that `token` changed (or may have), so the next passes look at it;
    /// `active` if it is owned or stale now.
    pub fn touch(&mut self, token: &LeaseToken, active: bool) {
        if !self.dirty.contains(token) {
            self.dirty.insert(token.clone());
        }
        if active && !self.active.contains(token) {
            self.active.insert(token.clone());
        }
    }

    /// Notes that what other hosts claim, or whether they are alive, may have
    /// changed: every handoff must be checked again.
    pub fn touch_handoffs(&mut self) {
        let handoffs = self.handoffs.iter().cloned();
        self.dirty.extend(handoffs);
    }

    /// The leases the passes must look at `now`, in token order; clears the changes.
    pub fn scope(&mut self, now: LocalTime) -> Vec<LeaseToken> {
        let mut scope = std::mem::take(&mut self.dirty);
        let due = |set: &BTreeSet<(LocalTime, LeaseToken)>| -> Vec<LeaseToken> {
            set.iter()
                .take_while(|(at, _)| *at <= now)
                .map(|(_, token)| token.clone())
                .collect()
        };
        scope.extend(due(&self.wakes));
        scope.extend(due(&self.rechecks));
        scope.extend(self.watched.iter().cloned());
        scope.into_iter().collect()
    }

    /// The leases changed since the scope was taken.
    pub fn changed(&self) -> Vec<LeaseToken> {
        self.dirty.iter().cloned().collect()
    }

    /// Files `token` under `entry`, or drops it if it is neither owned nor stale.
    pub fn file(&mut self, token: &LeaseToken, entry: Option<Entry>) {
        if let Some(at) = self.wake_of.remove(token) {
            self.wakes.remove(&(at, token.clone()));
        }
        if let Some(at) = self.recheck_of.remove(token) {
            self.rechecks.remove(&(at, token.clone()));
        }
        self.watched.remove(token);
        self.handoffs.remove(token);
        let Some(entry) = entry else {
            self.active.remove(token);
            return;
        };
        if !self.active.contains(token) {
            self.active.insert(token.clone());
        }
        if entry.handoff {
            self.handoffs.insert(token.clone());
        }
        if entry.watched {
            self.watched.insert(token.clone());
        }
        if let Some(at) = entry.wake {
            self.wakes.insert((at, token.clone()));
            self.wake_of.insert(token.clone(), at);
        }
        if let Some(at) = entry.recheck {
            self.rechecks.insert((at, token.clone()));
            self.recheck_of.insert(token.clone(), at);
        }
    }

    /// What is filed for `token`.
    pub fn entry(&self, token: &LeaseToken) -> Entry {
        Entry {
            handoff: self.handoffs.contains(token),
            watched: self.watched.contains(token),
            wake: self.wake_of.get(token).copied(),
            recheck: self.recheck_of.get(token).copied(),
        }
    }

    /// The earliest timed wake-up filed, and its lease.
    pub fn first_wake(&self) -> Option<(LocalTime, &LeaseToken)> {
        self.wakes.first().map(|(at, token)| (*at, token))
    }

    /// The leases looked at on every input.
    pub fn watched(&self) -> impl Iterator<Item = &LeaseToken> {
        self.watched.iter()
    }

    /// Checks that the agenda's two-way indexes agree with each other.
    pub fn check_indexes(&self) {
        assert_eq!(
            self.wakes.len(),
            self.wake_of.len(),
            "the agenda's wake-up indexes disagree"
        );
        assert_eq!(
            self.rechecks.len(),
            self.recheck_of.len(),
            "the agenda's recheck indexes disagree"
        );
    }
}
