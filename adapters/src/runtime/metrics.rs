//! Counters a running processor keeps, for dashboards and tests.

use leasehold_engine::lease::Intent;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one processor.
#[derive(Debug, Default)]
pub struct Metrics {
    owned: AtomicU64,
    acquisitions: AtomicU64,
    losses: AtomicU64,
    releases: AtomicU64,
    batches: AtomicU64,
    handler_failures: AtomicU64,
    checkpoints: AtomicU64,
    cancelled_calls: AtomicU64,
    aborted_calls: AtomicU64,
    by_intent: Mutex<Vec<(Intent, u64, f64)>>,
}

/// A copy of the counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// Leases being processed now.
    pub owned: u64,
    /// Leases started (acquired, stolen, handed over or resumed).
    pub acquisitions: u64,
    /// Leases lost to another host, a deletion or a lapse of authority.
    pub losses: u64,
    /// Leases released (handoff or shutdown).
    pub releases: u64,
    /// Batches handled successfully.
    pub batches: u64,
    /// Handler errors and panics (each retried).
    pub handler_failures: u64,
    /// Checkpoints the store confirmed.
    pub checkpoints: u64,
    /// Handler calls whose lease stopped while they ran (their token was cancelled).
    pub cancelled_calls: u64,
    /// Calls of a lost lease that outlived the abort grace and were aborted.
    pub aborted_calls: u64,
    /// Store requests by purpose: (purpose, calls, request units).
    pub requests: Vec<(Intent, u64, f64)>,
}

impl MetricsSnapshot {
    /// Mean request units per call of `intent`, if there were any.
    pub fn units_per_call(&self, intent: Intent) -> Option<f64> {
        self.requests
            .iter()
            .find(|(i, calls, _)| *i == intent && *calls > 0)
            .map(|(_, calls, units)| units / *calls as f64)
    }
}

impl Metrics {
    pub(crate) fn started(&self) {
        self.owned.fetch_add(1, Ordering::Relaxed);
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stopped(&self, lost: bool) {
        self.owned.fetch_sub(1, Ordering::Relaxed);
        let counter = if lost { &self.losses } else { &self.releases };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn batch(&self) {
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handler_failed(&self) {
        self.handler_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn call_cancelled(&self) {
        self.cancelled_calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn call_aborted(&self) {
        self.aborted_calls.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn checkpointed(&self) {
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn request(&self, intent: Intent, units: f64) {
        let mut all = self
            .by_intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match all.iter_mut().find(|(i, _, _)| *i == intent) {
            Some(entry) => {
                entry.1 += 1;
                entry.2 += units;
            }
            None => all.push((intent, 1, units)),
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let mut requests = self
            .by_intent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        requests.sort_by_key(|(i, _, _)| *i);
        MetricsSnapshot {
            owned: self.owned.load(Ordering::Relaxed),
            acquisitions: self.acquisitions.load(Ordering::Relaxed),
            losses: self.losses.load(Ordering::Relaxed),
            releases: self.releases.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            handler_failures: self.handler_failures.load(Ordering::Relaxed),
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            cancelled_calls: self.cancelled_calls.load(Ordering::Relaxed),
            aborted_calls: self.aborted_calls.load(Ordering::Relaxed),
            requests,
        }
    }
}
