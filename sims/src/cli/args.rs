//! The flags of `leasehold sim`, and the checks every scenario's runner applies to
//! them: the command line's shape, apart from what runs it ([`super::sim`] for the
//! partition scenarios and the swarm, [`super::queue`] for the queue's), so that
//! neither runner depends on the other for it.

use crate::sim::config::SimError;
use crate::sim::faults::Faults;
use crate::sim::flags::{self, opt_duration, opt_text};
use leasehold_engine::lease::Liveness;
use leasehold_engine::{ExpiryRule, Millis};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The flags of `leasehold sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// steady, scale-out, scale-in, rolling-restart, crash, flapping-host,
    /// skewed-clocks, throttled-store, hot-partition; queue, queue-crash,
    /// queue-poison (work-queue consumers); or swarm (many seeds, each a random
    /// scenario and fault mix).
    pub scenario: String,
    /// The seed every random choice comes from.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Swarm: the seeds to run, as A..B (B excluded); required. A swarm takes only
    /// this, --bug, --json and --quiet: each seed draws its own scenario, strategy,
    /// sizes, settings and faults.
    #[arg(long, value_name = "A..B")]
    pub seeds: Option<String>,
    /// Strategies to run on the same seed, side by side; an entry may name its
    /// liveness after a colon (`cfp,handoff:lease,handoff:session`).
    #[arg(long, default_value = "cfp,handoff", value_name = "LIST")]
    pub strategy: String,
    /// Settings of every scenario.
    #[command(flatten)]
    pub run: RunFlags,
    /// Settings of the partition-lease scenarios.
    #[command(flatten)]
    pub lease: LeaseFlags,
    /// Settings of the queue scenarios.
    #[command(flatten)]
    pub queue: QueueFlags,
    /// Print one JSON object with one run per strategy.
    #[arg(long)]
    pub json: bool,
    /// Partition-lease scenarios: draw the ownership timeline to this SVG file (one
    /// file per strategy when there are several: NAME-STRATEGY.svg).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Swarm: no progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Flags every scenario takes. Each names a setting of the run's configuration
/// ([`SimConfig`](crate::sim::SimConfig), [`QueueConfig`](crate::sim::queue::QueueConfig)) and is laid over the
/// scenario's default ([`flags::overlay`]).
#[derive(clap::Args, Clone, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunFlags {
    /// Hosts at full strength; queue scenarios: consumers.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<u32>,
    /// Time from the disturbance until faults heal and the source stops.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub duration: Option<Millis>,
    /// The liveness deadline after the heal.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub settle: Option<Millis>,
    /// Faults: `none`, or a list such as crash=4,pause=6,throttle=20 (kinds: crash,
    /// shutdown, pause, jump, timeout, partition per host per hour; throttle, spike
    /// windows per hour; skew seconds; drift ppm). Added to the scenario's own.
    #[arg(long, value_name = "LIST")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<String>,
    /// The clock drift the hosts allow for, in ppm (10000 is 1%).
    #[arg(long, value_name = "PPM")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_bound: Option<u32>,
    /// How much earlier than strictly needed a host or consumer gives up its authority.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub margin: Option<Millis>,
    /// How long an idle handler or consumer waits before polling again.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub poll: Option<Millis>,
    /// The most events in one batch; queue scenarios: the most messages one consumer
    /// holds.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u64>,
    /// Run a known-bad variant of the protocol (the model checker's; those of session
    /// liveness need handoff under it). With swarm, every seed runs the variant
    /// (lease or queue runs only).
    #[arg(long, value_name = "NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bug: Option<String>,
    /// Trace events shown before a violation.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<usize>,
}

/// Flags of the partition-lease scenarios only.
#[derive(clap::Args, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeaseFlags {
    /// Partitions.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    /// Scale-out: hosts before the disturbance.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// Scale-in and crash: hosts that leave.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affected: Option<u32>,
    /// Rolling restart: time between replacements; flapping host: between crashes.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub interval: Option<Millis>,
    /// Rolling restart: the lease expiration the new build runs with, so that old
    /// and new hosts with different settings meet mid-deploy.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub deploy_expiration: Option<Millis>,
    /// Handoff: how long a host told to shut down processes on after it marks its
    /// heartbeat as leaving, before it releases its leases (`0s`: at once).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub leave_notice: Option<Millis>,
    /// Write each lease's checkpoint at most once per this interval rather than after
    /// every batch (the default); a release or a handoff still writes the last one.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub checkpoint_every: Option<Millis>,
    /// Write each lease's checkpoint once the handler has finished this many events
    /// since the last one written, rather than after every batch.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_items: Option<u32>,
    /// Rolling restart: `new`, each new pod under a new name, started before the old
    /// one stops (a Deployment); or `reuse`, under the old pod's name once it has
    /// stopped (a StatefulSet).
    #[arg(long, value_name = "NEW|REUSE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<String>,
    /// Time before the disturbance.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Millis>,
    /// Where authority comes from, for every strategy listed: `lease` (each lease
    /// renewed) or `session` (one heartbeat per host; handoff only).
    #[arg(long, value_parser = flags::liveness_parser())]
    #[serde(with = "opt_text", skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// Under session liveness, how often the group reads the whole lease table.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub audit: Option<Millis>,
    /// The expiry rule.
    #[arg(long, value_parser = flags::expiry_parser())]
    #[serde(with = "opt_text", skip_serializing_if = "Option::is_none")]
    pub expiry: Option<ExpiryRule>,
    /// Lease expiration.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Millis>,
    /// Renew interval.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub renew: Option<Millis>,
    /// Acquire interval.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub acquire: Option<Millis>,
    /// Events per second per partition.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How many times the rate partition 0 gets.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_factor: Option<f64>,
}

/// Flags of the queue scenarios only.
#[derive(clap::Args, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct QueueFlags {
    /// Queue scenarios: messages enqueued over the duration.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<u32>,
    /// Queue scenarios: messages already waiting when the consumers start, besides
    /// those enqueued over the duration.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u32>,
    /// Queue scenarios: the lock duration of a delivery.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub lock: Option<Millis>,
    /// Queue scenarios: how often a dequeue reads the locked messages, besides when a
    /// watched lock is due (0s: at every dequeue).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    #[serde(with = "opt_duration", skip_serializing_if = "Option::is_none")]
    pub lock_watch: Option<Millis>,
    /// Queue scenarios: deliveries before a message is dead-lettered.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_dequeue: Option<u32>,
    /// Queue scenarios: every message whose number is a multiple of this is poison
    /// (0: none).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poison_every: Option<u32>,
    /// Queue scenarios: every message whose number is a multiple of this is larger
    /// than a document and kept in parts (0: none). Documents then hold 8 KiB, and
    /// these payloads 10 to 40 KiB, so that each takes several parts.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_every: Option<u32>,
    /// Queue scenarios: where large payloads are kept: `parts`, in the queue's
    /// partition, or `claims`, in a claim store through the queue's claim check (the
    /// run's own, in memory, failing one call in 20 until the heal).
    #[arg(long, value_name = "WHERE", value_parser = ["parts", "claims"])]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_kept: Option<String>,
    /// Queue scenarios: an operator deletes the dead letters of every message whose
    /// number is a multiple of this (0: none). Consumer 0 lists the dead letters as
    /// it polls, and deletes those with their large payloads.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_dead_letters_every: Option<u32>,
    /// Queue scenarios: one handler run in this many fails and abandons its message
    /// (0: none).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_one_in: Option<u32>,
}

pub use crate::sim::flags::parse_duration;

/// Refuses the flags of `group` given to a scenario they do not apply to.
pub(crate) fn refuse(group: &impl Serialize, scenario: &str) -> Result<(), SimError> {
    match flags::given(group).into_iter().next() {
        Some(flag) => Err(SimError::NotApplicable {
            flag: format!("--{flag}"),
            scenario: scenario.to_string(),
        }),
        None => Ok(()),
    }
}

/// The flags every scenario takes, ready to lay over a configuration: `--faults` is
/// added to the scenario's own faults rather than replacing them.
pub(crate) fn run_settings(
    run: &RunFlags,
    base_faults: Faults,
) -> Result<Map<String, Value>, SimError> {
    let mut settings = flags::of(run);
    if let Some(text) = &run.faults {
        let faults = base_faults
            .apply(text)
            .map_err(|e| SimError::Faults(e.to_string()))?;
        settings.insert("faults".into(), Value::String(faults.to_string()));
    }
    Ok(settings)
}
