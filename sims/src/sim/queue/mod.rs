//! Queue runs: the engine's work-queue consumers competing for messages under the
//! same seeded faults as the partition-lease runs, checked against ground truth.
//!
//! - exclusivity: no two consumers (or lives) process one message at the same
//!   instant while both hold authority (handlers act only with authority, checked at
//!   their start and end);
//! - nothing lost: a message is deleted only after its effect was committed, is
//!   dead-lettered only after `max_dequeue` deliveries, and at the deadline every
//!   message is stored or settled;
//! - liveness, judged after the heal on what the protocol controls: no message waits
//!   (visible, or locked past its lock's expiry) while a consumer has room for it,
//!   and no delivery holds a consumer's slot for good. Messages unfinished at the
//!   deadline because the consumers were full are reported, not a violation;
//! - answers: a consumer is never told its completion was lost when that very
//!   completion deleted the message.
//!
//! ```
//! use leasehold_sims::sim::queue::{QueueConfig, QueueScenario, simulate_queue};
//! use leasehold_engine::Millis;
//!
//! let mut config = QueueConfig::scenario(QueueScenario::QueueCrash, 3);
//! config.messages = 40;
//! config.duration = Millis::from_secs(120);
//! let run = simulate_queue(&config).unwrap();
//! assert!(run.report.passed(), "{:?}", run.report.violations);
//! assert_eq!(run.report.measures.enqueued, 40);
//! ```

mod config;
mod truth;
mod world;

pub use config::{CLAIM_FAIL_ONE_IN, LargeKept, QueueConfig, QueueConfigError, QueueScenario};
pub use truth::{Holder, QueueMeasures, Truth};
pub use world::{QueueEvent, QueueFinished, QueueWorld};

use super::checker::{Violation, ViolationKind};
use super::report::round2;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// The report of one queue run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueReport {
    /// The scenario's name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// Consumers.
    pub consumers: u32,
    /// What became of the messages.
    #[serde(flatten)]
    pub measures: QueueMeasures,
    /// Store requests per consumer per minute of virtual time.
    pub store_requests_per_consumer_min: f64,
    /// Estimated request units per consumer per minute.
    pub ru_per_consumer_min: f64,
    /// Estimated request units per delivery: what handing out one message costs.
    pub ru_per_delivery: f64,
    /// Dequeues that read the store.
    pub dequeues: u64,
    /// The mean number of documents the store returned per dequeue (both its reads).
    pub docs_read_per_dequeue: f64,
    /// The most documents one dequeue's reads returned.
    pub max_docs_read_per_dequeue: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Violations by kind.
    pub violation_counts: BTreeMap<String, u64>,
    /// The first violations.
    pub violations: Vec<Violation>,
    /// Virtual seconds simulated.
    pub virtual_s: f64,
    /// Wall seconds the run took (not part of the trace).
    pub wall_s: f64,
    /// Events handled.
    pub steps: u64,
    /// The hash of the trace: equal seeds, equal hashes.
    pub trace_hash: String,
}

impl QueueReport {
    /// Whether every property held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The kinds of property broken.
    pub fn violated_kinds(&self) -> Vec<ViolationKind> {
        let mut kinds: Vec<ViolationKind> = self.violations.iter().map(|v| v.kind).collect();
        kinds.dedup();
        kinds
    }
}

/// A finished queue run.
#[derive(Clone, Debug)]
pub struct QueueRun {
    /// The measures and violations.
    pub report: QueueReport,
    /// The last trace events before the first violation.
    pub tail: Vec<String>,
}

/// Runs `config`.
pub fn simulate_queue(config: &QueueConfig) -> Result<QueueRun, QueueConfigError> {
    let started = Instant::now();
    let finished = QueueWorld::new(config)?.run();
    let wall_s = started.elapsed().as_secs_f64();
    let minutes = (finished.end as f64 / 60_000.0).max(1e-9) * f64::from(config.consumers);
    let truth = &finished.truth;
    // Figures to two decimals, as the lease report's: `228.3100000000025` is noise.
    let mut measures = truth.measures();
    for x in [
        &mut measures.max_latency_s,
        &mut measures.mean_latency_s,
        &mut measures.drained_after_heal_s,
        &mut measures.room_after_heal,
    ] {
        *x = round2(*x);
    }
    let deliveries = measures.deliveries;
    let report = QueueReport {
        scenario: config.scenario.name().to_string(),
        seed: config.seed,
        consumers: config.consumers,
        measures,
        store_requests_per_consumer_min: round2(finished.requests as f64 / minutes),
        ru_per_consumer_min: round2(finished.ru / minutes),
        ru_per_delivery: round2(finished.ru / (deliveries.max(1) as f64)),
        dequeues: finished.dequeues,
        docs_read_per_dequeue: round2(
            finished.docs_read as f64 / (finished.dequeues.max(1) as f64),
        ),
        max_docs_read_per_dequeue: finished.max_docs_read,
        faults: finished
            .faults
            .iter()
            .map(|(k, n)| (k.name().to_string(), *n))
            .collect(),
        violation_counts: truth
            .violation_counts()
            .iter()
            .map(|(k, n)| (k.name().to_string(), *n))
            .collect(),
        violations: truth.violations().to_vec(),
        virtual_s: round2(finished.end as f64 / 1e3),
        wall_s: round2(wall_s),
        steps: finished.steps,
        trace_hash: format!("{:016x}", finished.trace_hash),
    };
    Ok(QueueRun {
        report,
        tail: finished.tail,
    })
}

/// The command that replays `config` exactly: every setting that differs from its
/// scenario's defaults, as a flag.
pub fn replay_command(config: &QueueConfig) -> String {
    crate::sim::flags::command(
        format!("leasehold sim {} --seed {}", config.scenario, config.seed),
        config,
        &QueueConfig::scenario(config.scenario, config.seed),
        &[],
        &["scenario", "seed"],
    )
}

/// The human-readable report.
pub fn table(report: &QueueReport) -> String {
    let m = &report.measures;
    let rows = [
        ("enqueued", m.enqueued.to_string()),
        ("completed", m.completed.to_string()),
        ("dead-lettered (poison)", m.dead_lettered_poison.to_string()),
        (
            "dead-lettered (healthy, by faults)",
            m.dead_lettered_healthy.to_string(),
        ),
        (
            "dead letters deleted (operator)",
            m.dead_letters_deleted.to_string(),
        ),
        ("deliveries", m.deliveries.to_string()),
        ("committed more than once", m.duplicate_commits.to_string()),
        ("lock lost at complete/abandon", m.lock_lost.to_string()),
        ("results dropped (no authority)", m.dropped.to_string()),
        ("max latency (s)", format!("{:.1}", m.max_latency_s)),
        ("mean latency (s)", format!("{:.1}", m.mean_latency_s)),
        (
            "drained after heal (s)",
            format!("{:.1}", m.drained_after_heal_s),
        ),
        (
            "unfinished at the deadline",
            m.unfinished_at_deadline.to_string(),
        ),
        (
            "consumer time with room after heal",
            format!("{:.0} %", 100.0 * m.room_after_heal),
        ),
        (
            "store requests / consumer / min",
            format!("{:.1}", report.store_requests_per_consumer_min),
        ),
        (
            "RU / consumer / min (est.)",
            format!("{:.0}", report.ru_per_consumer_min),
        ),
        (
            "RU / delivery (est.)",
            format!("{:.2}", report.ru_per_delivery),
        ),
        (
            "documents read / dequeue",
            format!("{:.2}", report.docs_read_per_dequeue),
        ),
        (
            "documents read by one dequeue, most",
            report.max_docs_read_per_dequeue.to_string(),
        ),
        (
            "violations",
            report.violation_counts.values().sum::<u64>().to_string(),
        ),
    ];
    let mut out = String::new();
    for (name, value) in rows {
        out.push_str(&format!("{name:<36} {value:>10}\n"));
    }
    if let Some(note) = capacity_note(m) {
        out.push_str(&note);
        out.push('\n');
    }
    out
}

/// What unfinished messages at the deadline mean, when there are some: with no
/// liveness violation, no message waited while a consumer had room for it, so the
/// run offered more work than its consumers drained in its time.
pub fn capacity_note(m: &QueueMeasures) -> Option<String> {
    (m.unfinished_at_deadline > 0).then(|| {
        format!(
            "note: {} messages were unfinished at the deadline: the offered load exceeded what \
             the consumers drained in the run, which is not a violation (free slots {:.0} % of \
             consumer time after the heal, between dequeues; a message that waits while one \
             consumer keeps room for it is a violation)",
            m.unfinished_at_deadline,
            100.0 * m.room_after_heal
        )
    })
}
