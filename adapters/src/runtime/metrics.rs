//! Counters a running processor keeps, for dashboards and tests, also emitted through
//! the `metrics` facade (names in [`METRIC_NAMES`]).

use super::lag::LeaseLag;
use leasehold_engine::lease::Intent;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every name the processor and the estimator emit through the `metrics` facade,
/// with its kind and labels. Every series carries `group` (the processor name); a
/// processor's also carry `instance`.
///
/// ```
/// use leasehold_adapters::runtime::METRIC_NAMES;
/// assert!(METRIC_NAMES.iter().all(|(name, ..)| name.starts_with("leasehold_")));
/// ```
pub const METRIC_NAMES: [(&str, &str, &str); 14] = [
    ("leasehold_leases_owned", "gauge", "leases being processed"),
    (
        "leasehold_lease_acquisitions_total",
        "counter",
        "leases started",
    ),
    ("leasehold_lease_losses_total", "counter", "leases lost"),
    (
        "leasehold_lease_releases_total",
        "counter",
        "leases released (handoff or shutdown)",
    ),
    (
        "leasehold_lease_splits_total",
        "counter",
        "leases whose range split",
    ),
    (
        "leasehold_handler_failures_total",
        "counter",
        "handler errors and panics",
    ),
    (
        "leasehold_batches_skipped_total",
        "counter",
        "batches skipped after the handler failed on them max_attempts times",
    ),
    (
        "leasehold_handler_cancellations_total",
        "counter",
        "calls whose lease stopped while they ran",
    ),
    (
        "leasehold_handler_aborts_total",
        "counter",
        "calls of a lost lease aborted after the grace",
    ),
    (
        "leasehold_checkpoints_total",
        "counter",
        "checkpoints the store confirmed",
    ),
    (
        "leasehold_requests_total",
        "counter",
        "store requests, by purpose and intent",
    ),
    (
        "leasehold_request_units",
        "histogram",
        "request units per store request, by purpose and intent",
    ),
    (
        "leasehold_lease_lag_items",
        "gauge",
        "the estimator's lag per lease, in changes",
    ),
    (
        "leasehold_lease_lag_oldest_seconds",
        "gauge",
        "age of a lease's oldest unprocessed change, where known",
    ),
];

/// Live counters of one processor.
#[derive(Debug, Default)]
pub struct Metrics {
    group: String,
    instance: String,
    owned: AtomicU64,
    acquisitions: AtomicU64,
    losses: AtomicU64,
    releases: AtomicU64,
    splits: AtomicU64,
    batches: AtomicU64,
    handler_failures: AtomicU64,
    skipped_batches: AtomicU64,
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
    /// Leases given up because their range split.
    pub splits: u64,
    /// Batches handled successfully.
    pub batches: u64,
    /// Handler errors and panics (each retried).
    pub handler_failures: u64,
    /// Batches skipped after the handler failed on them `max_attempts` times.
    pub skipped_batches: u64,
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

/// How a session ended, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    Lost,
    Released,
    Split,
}

impl Metrics {
    /// Counters of processor `instance` in group `group`.
    pub(crate) fn named(group: &str, instance: &str) -> Metrics {
        describe();
        Metrics {
            group: group.to_string(),
            instance: instance.to_string(),
            ..Metrics::default()
        }
    }

    fn count(&self, name: &'static str) {
        metrics::counter!(name, "group" => self.group.clone(), "instance" => self.instance.clone())
            .increment(1);
    }

    fn owned_now(&self, owned: u64) {
        metrics::gauge!("leasehold_leases_owned", "group" => self.group.clone(), "instance" => self.instance.clone())
            .set(owned as f64);
    }

    pub(crate) fn started(&self) {
        let owned = self.owned.fetch_add(1, Ordering::Relaxed) + 1;
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        self.owned_now(owned);
        self.count("leasehold_lease_acquisitions_total");
    }

    pub(crate) fn stopped(&self, ended: Ended) {
        let before = self
            .owned
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(1))
            })
            .unwrap_or(0);
        self.owned_now(before.saturating_sub(1));
        let (counter, name) = match ended {
            Ended::Lost => (&self.losses, "leasehold_lease_losses_total"),
            Ended::Released => (&self.releases, "leasehold_lease_releases_total"),
            Ended::Split => (&self.splits, "leasehold_lease_splits_total"),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.count(name);
    }

    pub(crate) fn batch(&self) {
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn batch_skipped(&self) {
        self.skipped_batches.fetch_add(1, Ordering::Relaxed);
        self.count("leasehold_batches_skipped_total");
    }

    pub(crate) fn handler_failed(&self) {
        self.handler_failures.fetch_add(1, Ordering::Relaxed);
        self.count("leasehold_handler_failures_total");
    }

    pub(crate) fn call_cancelled(&self) {
        self.cancelled_calls.fetch_add(1, Ordering::Relaxed);
        self.count("leasehold_handler_cancellations_total");
    }

    pub(crate) fn call_aborted(&self) {
        self.aborted_calls.fetch_add(1, Ordering::Relaxed);
        self.count("leasehold_handler_aborts_total");
    }

    pub(crate) fn checkpointed(&self) {
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.count("leasehold_checkpoints_total");
    }

    pub(crate) fn request(&self, intent: Intent, units: f64) {
        let labels = [
            ("group", self.group.clone()),
            ("instance", self.instance.clone()),
            ("purpose", intent.purpose().name().to_string()),
            // The variant's name (`CreateLease`), as released: label values are what
            // dashboards and alerts match on, so they keep that form rather than follow
            // the traces' `create-lease`.
            ("intent", format!("{intent:?}")),
        ];
        metrics::counter!("leasehold_requests_total", &labels).increment(1);
        metrics::histogram!("leasehold_request_units", &labels).record(units);
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
            splits: self.splits.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            handler_failures: self.handler_failures.load(Ordering::Relaxed),
            skipped_batches: self.skipped_batches.load(Ordering::Relaxed),
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            cancelled_calls: self.cancelled_calls.load(Ordering::Relaxed),
            aborted_calls: self.aborted_calls.load(Ordering::Relaxed),
            requests,
        }
    }
}

/// Emits the estimator's lag per lease of group `group`.
pub(crate) fn record_lag(group: &str, leases: &[LeaseLag]) {
    describe();
    let now = std::time::SystemTime::now();
    for lag in leases {
        let labels = [
            ("group", group.to_string()),
            ("lease", lag.lease.to_string()),
        ];
        metrics::gauge!("leasehold_lease_lag_items", &labels).set(lag.items as f64);
        // Caught up (or unknown): 0, not the age of a change processed since.
        let age = lag.oldest.and_then(|t| now.duration_since(t).ok());
        metrics::gauge!("leasehold_lease_lag_oldest_seconds", &labels)
            .set(age.map_or(0.0, |a| a.as_secs_f64()));
    }
}

/// Gives every name its help text, for exporters that print it.
pub(crate) fn describe() {
    for (name, kind, help) in METRIC_NAMES {
        match kind {
            "counter" => metrics::describe_counter!(name, help),
            "gauge" => metrics::describe_gauge!(name, help),
            _ => metrics::describe_histogram!(name, help),
        }
    }
}
