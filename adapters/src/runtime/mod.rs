//! The tokio runtime: a [`Processor`] drives the engine's partition-lease host with
//! real monotonic time, a store, a partition source and your handler.
//!
//! One task owns the engine and runs the adapters' one driving loop (`drive`): store
//! requests run concurrently inside it and come back as inputs; each lease the engine
//! starts gets a worker task that reads the source, calls the handler and reports
//! checkpoints; the engine's wake-up time is a sleep.

mod builder;
mod context;
mod driver;
mod estimator;
mod lag;
mod metrics;
mod worker;

pub use builder::{BuildError, ProcessorBuilder, RuntimeBad};
pub use context::LeaseContext;
pub use estimator::{Estimate, EstimateError, Estimator};
pub use lag::LeaseLag;
pub use metrics::{METRIC_NAMES, Metrics, MetricsSnapshot};

use crate::source::{Batch, PartitionSource};
use crate::store::Store;
use leasehold_engine::lease::{LeaseConfig, Record};
use leasehold_engine::{Checkpoint, HostId};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What a handler may fail with; the batch is retried with backoff.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// Your code: processes one batch of a lease and says how far it got.
///
/// The [`LeaseContext`] names the lease, its epoch (a fencing token: it rises with
/// every change of the lease's owner, so a downstream system that remembers the
/// highest epoch it has seen per lease can refuse the writes of an owner that lost
/// it) and a cancellation token that fires when the lease stops. Any
/// `Fn(LeaseContext, Batch<T>) -> impl Future<Output = Result<Checkpoint, HandlerError>>`
/// is a handler.
pub trait Handler<T>: Send + Sync + 'static {
    /// Processes `batch`, returning the checkpoint to store (usually
    /// `batch.checkpoint`).
    fn handle(
        &self,
        context: LeaseContext,
        batch: Batch<T>,
    ) -> impl Future<Output = Result<Checkpoint, HandlerError>> + Send + 'static;
}

impl<T, F, Fut> Handler<T> for F
where
    F: Fn(LeaseContext, Batch<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Checkpoint, HandlerError>> + Send + 'static,
{
    fn handle(
        &self,
        context: LeaseContext,
        batch: Batch<T>,
    ) -> impl Future<Output = Result<Checkpoint, HandlerError>> + Send + 'static {
        self(context, batch)
    }
}

/// What the runtime does with a batch the handler failed on as many times in a row
/// as [`ProcessorBuilder::max_attempts`] allows. Without that setting a failed batch
/// is retried for ever, with backoff, as the change feed processor does: one poison
/// batch then holds its lease back for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhausted {
    /// Checkpoint past the batch, as if it had been handled, and read on. A handler
    /// that must keep such batches dead-letters them itself on its last attempt
    /// ([`LeaseContext::attempt`]).
    Skip,
    /// Stop the processor gracefully: every other lease finishes its batch and is
    /// released; this one is released at the checkpoint before the batch, so nothing
    /// is skipped, and [`Processor::run`] returns [`RunError::Poisoned`].
    Stop,
}

/// Why a processor stopped other than by its cancellation token.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine refused the settings (the builder checks them, so this is rare).
    #[error("invalid lease settings: {0}")]
    Config(leasehold_engine::lease::ConfigError),
    /// The host's first read of the lease container found its group written under
    /// settings that cannot run beside this host's (another liveness); it stopped
    /// without taking anything.
    #[error("this host cannot join its group: {0}")]
    Refused(leasehold_engine::lease::ConfigError),
    /// The store refused this host itself (401: a revoked or wrong key; 403: a
    /// missing data-plane role, an account that no longer exists). No retry mends
    /// it, so the processor stopped at once: every call was aborted, and its leases
    /// are left for the other hosts to take once they expire.
    #[error("the store refused this host: {0}")]
    Denied(leasehold_engine::store::StoreError),
    /// The lease container cannot hold the leases safely (another partition key
    /// path, or a default time to live); the host started nothing.
    #[error("{0}")]
    Container(crate::store::ContainerError),
    /// A graceful shutdown did not finish within the deadline (the store out of
    /// reach, say): every call was aborted, and what was not released is left for
    /// the other hosts to take once it expires.
    #[error(
        "the shutdown did not finish within {deadline:?}: {} lease(s) still held ({}), heartbeat {}",
        held.len(),
        held.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "),
        if *heartbeat_left { "deleted" } else { "still stored" }
    )]
    ShutdownTimedOut {
        /// The deadline.
        deadline: Duration,
        /// The leases this host still owned.
        held: Vec<leasehold_engine::LeaseToken>,
        /// Whether its heartbeat was deleted.
        heartbeat_left: bool,
    },
    /// The handler failed on one batch as many times in a row as
    /// [`ProcessorBuilder::max_attempts`] allows, with [`Exhausted::Stop`]: the
    /// processor shut down gracefully, leaving the lease at the checkpoint before it.
    #[error(
        "the handler failed {attempts} times in a row on a batch of lease {lease}; last error: {error}"
    )]
    Poisoned {
        /// The lease whose batch it was.
        lease: leasehold_engine::LeaseToken,
        /// The attempts made.
        attempts: u32,
        /// The last attempt's error (or panic).
        error: String,
    },
}

/// Settings of the per-lease workers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Intake {
    pub max_batch: usize,
    pub poll_interval: Duration,
    pub request_timeout: Duration,
    /// How long a call of a lost lease may run on after its cancellation before the
    /// worker aborts it.
    pub abort_grace: Duration,
    /// Known-bad: report a lost call's session stopped before its task has ended.
    pub stopped_before_the_call_ends: bool,
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// Attempts at one batch before `exhausted` applies; `None` retries for ever.
    pub max_attempts: Option<u32>,
    pub exhausted: Exhausted,
}

/// A host of a processor group. Build it with [`Processor::builder`], then
/// [`run`](Processor::run) it until its [`cancellation`](Processor::cancellation)
/// token is cancelled: it then stops taking new batches, lets the batches in flight
/// finish and checkpoint, and releases its leases.
pub struct Processor<S, St, H> {
    pub(crate) me: HostId,
    pub(crate) config: LeaseConfig,
    pub(crate) intake: Intake,
    pub(crate) source: S,
    pub(crate) store: St,
    pub(crate) handler: Arc<H>,
    pub(crate) cancel: CancellationToken,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) shutdown_deadline: Duration,
    pub(crate) clock: crate::clock::Clock,
}

impl Processor<(), (), ()> {
    /// A builder with the change feed processor's defaults: acquire every 13 s, renew
    /// every 17 s, leases expire after 60 s, the `handoff` strategy.
    pub fn builder() -> ProcessorBuilder<(), (), ()> {
        ProcessorBuilder::new()
    }
}

impl<S, St, H> Processor<S, St, H>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    /// The token that stops this processor gracefully.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Counters of leases and request units, live while the processor runs.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// This host's instance name.
    pub fn instance(&self) -> &HostId {
        &self.me
    }

    /// Runs until cancelled and every lease is released, or the shutdown deadline
    /// passes.
    pub async fn run(self) -> Result<(), RunError> {
        driver::run(self).await
    }
}
