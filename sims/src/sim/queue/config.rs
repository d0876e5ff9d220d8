//! The settings of a queue run.

use crate::sim::config::Network;
use crate::sim::faults::{FaultKind, Faults};
use crate::sim::flags::{duration, opt_duration, text};
use leasehold_engine::Millis;
use leasehold_model::LockBug;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How long a failed handler's message stays invisible after its abandon.
pub(super) const ABANDON_DELAY: Millis = Millis::from_secs(1);

/// The most bytes a document holds in a run with large payloads: small, so that a
/// payload of tens of KiB takes several parts.
pub const LARGE_RUN_DOCUMENT_BYTES: usize = 8 * 1024;

/// A named queue scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueScenario {
    /// Competing consumers drain a steady stream of messages; one in 20 handler runs
    /// fails and abandons its message with a delay.
    Queue,
    /// The same, while consumers crash holding messages and restart, and pause.
    QueueCrash,
    /// One message in ten is poison: its handler always fails, so it must end in
    /// the dead letters after `max_dequeue` deliveries, and nothing else may.
    QueuePoison,
}

impl QueueScenario {
    /// Every queue scenario.
    pub const ALL: [QueueScenario; 3] = [
        QueueScenario::Queue,
        QueueScenario::QueueCrash,
        QueueScenario::QueuePoison,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            QueueScenario::Queue => "queue",
            QueueScenario::QueueCrash => "queue-crash",
            QueueScenario::QueuePoison => "queue-poison",
        }
    }
}

impl fmt::Display for QueueScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QueueScenario {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        QueueScenario::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or(())
    }
}

/// One queue run: a producer enqueues `messages` over `duration` while `consumers`
/// compete for them under `faults`; then every fault heals and the queue must drain
/// by `settle` later.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct QueueConfig {
    /// The scenario.
    pub scenario: QueueScenario,
    /// Every random choice comes from it.
    pub seed: u64,
    /// Competing consumers (`--hosts`).
    #[serde(rename = "hosts")]
    pub consumers: u32,
    /// Messages enqueued, spread over `duration`.
    pub messages: u32,
    /// Messages already waiting when the consumers start.
    pub backlog: u32,
    /// The time faults run; the heal comes at its end.
    #[serde(with = "duration")]
    pub duration: Millis,
    /// How long after the heal every message must be completed or dead-lettered.
    #[serde(with = "duration")]
    pub settle: Millis,
    /// The lock duration of a delivery.
    #[serde(with = "duration")]
    pub lock: Millis,
    /// How often a dequeue reads the locked messages; `None`: the engine's default, a
    /// quarter of the lock.
    #[serde(with = "opt_duration")]
    pub lock_watch: Option<Millis>,
    /// Deliveries before a message is dead-lettered.
    pub max_dequeue: u32,
    /// The most messages one consumer holds at once (`--max-batch`).
    #[serde(rename = "max-batch")]
    pub batch: u32,
    /// How long an idle consumer waits before its next dequeue.
    #[serde(with = "duration")]
    pub poll: Millis,
    /// A handler run takes this long, drawn uniformly (ms).
    pub work_ms: (u64, u64),
    /// One handler run in this many fails and abandons its message (0: none).
    pub fail_one_in: u32,
    /// Every message whose number is a multiple of this is poison (0: none).
    pub poison_every: u32,
    /// Every message whose number is a multiple of this is a large payload, kept in
    /// parts (0: none; then documents hold Cosmos DB's 2 MB, else 8 KiB).
    #[serde(default)]
    pub large_every: u32,
    /// Where large payloads are kept: `parts`, in the queue's partition, or `claims`,
    /// in the run's claim store (in memory; until the heal, one call in
    /// [`CLAIM_FAIL_ONE_IN`] fails) through the queue's claim check.
    #[serde(default, with = "text")]
    pub large_kept: LargeKept,
    /// An operator deletes the dead letters of every message whose number is a
    /// multiple of this (0: none): consumer 0 lists the dead letters as it polls,
    /// and deletes those, with their large payloads.
    #[serde(default)]
    pub delete_dead_letters_every: u32,
    /// The faults and their rates.
    #[serde(with = "text")]
    pub faults: Faults,
    /// The clock drift the consumers allow for, in ppm.
    #[serde(rename = "drift-bound")]
    pub drift_bound_ppm: u32,
    /// How much earlier than strictly needed a consumer gives up its authority.
    #[serde(with = "duration")]
    pub margin: Millis,
    /// A known-bad variant of the queue (the model checker's).
    #[serde(with = "queue_bug")]
    pub bug: Option<LockBug>,
    /// Latencies and the request timeout; no flag sets them.
    #[serde(skip)]
    pub network: Network,
    /// Trace events kept for a violation report.
    #[serde(rename = "trace")]
    pub trace_keep: usize,
}

/// Serde for a queue's known-bad variant: its name, parsed among the queue's.
mod queue_bug {
    use leasehold_model::{LockBug, LockKind};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bug: &Option<LockBug>, s: S) -> Result<S::Ok, S::Error> {
        match bug {
            Some(b) => s.serialize_str(b.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LockBug>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(name) => LockBug::parse(&name, LockKind::Queue)
                .map(Some)
                .map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

/// Settings a queue run refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueConfigError {
    /// A count or a duration that leaves nothing to run.
    #[error("invalid queue run: {0}")]
    Invalid(&'static str),
    /// The consumer settings cannot work.
    #[error("invalid consumer settings: {0}")]
    Consumer(String),
}

impl QueueConfig {
    /// The defaults of `scenario`.
    pub fn scenario(scenario: QueueScenario, seed: u64) -> QueueConfig {
        let mut faults = Faults::default();
        let mut poison_every = 0;
        match scenario {
            QueueScenario::Queue => {}
            QueueScenario::QueueCrash => {
                faults = faults
                    .with(FaultKind::Crash, 20.0)
                    .with(FaultKind::Pause, 20.0);
            }
            QueueScenario::QueuePoison => poison_every = 10,
        }
        QueueConfig {
            scenario,
            seed,
            consumers: 4,
            messages: 300,
            backlog: 0,
            duration: Millis::from_secs(600),
            settle: Millis::from_secs(600),
            lock: Millis::from_secs(30),
            lock_watch: None,
            max_dequeue: 5,
            batch: 8,
            poll: Millis::from_secs(2),
            work_ms: (200, 3_000),
            fail_one_in: 20,
            poison_every,
            large_every: 0,
            large_kept: LargeKept::Parts,
            delete_dead_letters_every: 0,
            faults,
            drift_bound_ppm: 10_000,
            margin: leasehold_engine::lock::LockPolicy::default().safety_margin,
            bug: None,
            network: Network::default(),
            trace_keep: 40,
        }
    }

    /// Checks that the run can work.
    pub fn validate(&self) -> Result<(), QueueConfigError> {
        if self.faults.get(FaultKind::Split) > 0.0 {
            return Err(QueueConfigError::Invalid(
                "a queue has no ranges to split: the split fault is for lease runs",
            ));
        }
        if self.consumers == 0 || self.consumers > 1_000 {
            return Err(QueueConfigError::Invalid("consumers must be 1 to 1000"));
        }
        if self.messages == 0 || self.messages > 1_000_000 {
            return Err(QueueConfigError::Invalid("messages must be 1 to 1,000,000"));
        }
        if self.backlog > 1_000_000 {
            return Err(QueueConfigError::Invalid(
                "the backlog must be 0 to 1,000,000",
            ));
        }
        if self.batch == 0 {
            return Err(QueueConfigError::Invalid("the batch must hold a message"));
        }
        if self.duration == Millis::ZERO || self.poll == Millis::ZERO {
            return Err(QueueConfigError::Invalid(
                "duration and poll must be positive",
            ));
        }
        if self.large_kept == LargeKept::Claims && self.large_every == 0 {
            return Err(QueueConfigError::Invalid(
                "--large-kept claims keeps large payloads: it needs --large-every",
            ));
        }
        if self.work_ms.0 > self.work_ms.1 {
            return Err(QueueConfigError::Invalid(
                "work time: the low end is above the high",
            ));
        }
        self.consumer_config()
            .validate()
            .map_err(|e| QueueConfigError::Consumer(e.to_string()))
    }

    /// The engine settings every consumer runs.
    pub fn consumer_config(&self) -> leasehold_engine::queue::ConsumerConfig {
        use leasehold_engine::queue::{ConsumerConfig, QueueName};
        let mut policy = leasehold_engine::lock::LockPolicy {
            drift: leasehold_engine::Drift::ppm(self.drift_bound_ppm),
            safety_margin: self.margin,
            ..Default::default()
        };
        if self.bug == Some(LockBug::LockNoDrift) {
            policy.drift = leasehold_engine::Drift::ppm(0);
            policy.safety_margin = Millis::ZERO;
        }
        ConsumerConfig {
            lock_duration: self.lock,
            policy,
            max_dequeue_count: self.max_dequeue,
            select: leasehold_model::queue::selector(self.bug),
            lock_watch: self.lock_watch,
            known_bad: leasehold_model::queue::known_bad(self.bug),
            limits: leasehold_engine::store::Limits {
                max_document_bytes: if self.large_every > 0 {
                    LARGE_RUN_DOCUMENT_BYTES
                } else {
                    leasehold_engine::store::Limits::default().max_document_bytes
                },
                ..Default::default()
            },
            large: Some(leasehold_engine::queue::LargeMessages {
                orphan_after: self.lock,
                ..Default::default()
            }),
            ..ConsumerConfig::new(QueueName::new("work").expect("a valid name"))
        }
    }

    /// The payload message `number` is enqueued with: its number, or, for a large
    /// one, 10 to 40 KiB spelling it out, each byte placed so that parts out of place
    /// or missing change it.
    pub fn payload(&self, number: u32) -> String {
        if self.large_every == 0 || !number.is_multiple_of(self.large_every) {
            return format!("{number}");
        }
        let bytes = 10 * 1024 + (number as usize * 7_919) % (30 * 1024);
        let mut out = String::with_capacity(bytes);
        let mut i = 0usize;
        while out.len() < bytes {
            out.push_str(&format!("{number}:{i};"));
            i += 1;
        }
        out.truncate(bytes);
        out
    }

    /// When the faults heal.
    pub fn heal_at(&self) -> u64 {
        self.duration.as_millis()
    }

    /// The liveness deadline.
    pub fn deadline(&self) -> u64 {
        self.duration.as_millis() + self.settle.as_millis()
    }
}

/// Until the heal, one call to the claim store in this many fails.
pub const CLAIM_FAIL_ONE_IN: u32 = 20;

/// Where a queue run keeps its large payloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LargeKept {
    /// In parts, in the queue's partition.
    #[default]
    Parts,
    /// In the run's claim store, through the queue's claim check.
    Claims,
}

impl fmt::Display for LargeKept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LargeKept::Parts => "parts",
            LargeKept::Claims => "claims",
        })
    }
}

impl FromStr for LargeKept {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "parts" => Ok(LargeKept::Parts),
            "claims" => Ok(LargeKept::Claims),
            other => Err(format!("{other:?} is neither `parts` nor `claims`")),
        }
    }
}
