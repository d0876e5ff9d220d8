//! The processor builder, with the change feed processor's defaults.

use super::LeaseContext;
use super::{Exhausted, Handler, Intake, Metrics, Processor};
use crate::clock::Clock;
use crate::source::Batch;
use crate::source::{PartitionSource, SourceError};
use crate::store::Store;
use leasehold_engine::Checkpoint;
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::{
    CheckpointPolicy, ConfigError, KnownBad, LeaseConfig, Liveness, Record,
};
use leasehold_engine::{ExpiryPolicy, HostId, Millis};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Why a processor could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No instance name was given, or it is blank.
    #[error("the instance name is missing or blank: every host needs a unique name")]
    MissingInstance,
    /// No processor name was given, or it is blank.
    #[error("the processor name (the lease prefix) is missing or blank")]
    MissingProcessorName,
    /// A name holds a character Cosmos DB refuses in ids, or `..` (the separator).
    #[error("{which} {name:?} may not contain '/', '\\', '?', '#' or \"..\"")]
    BadName {
        /// Which name.
        which: &'static str,
        /// The name given.
        name: String,
    },
    /// The intervals or the strategy do not work together.
    #[error("invalid lease settings: {0}")]
    Config(#[from] ConfigError),
    /// The abort grace is not shorter than the safety margin: a lost call could
    /// still run when another host starts the lease.
    #[error(
        "abort_grace ({grace:?}) must be shorter than the holder's safety margin ({margin:?}), \
         or a lost call may run beside the lease's next owner"
    )]
    AbortGrace {
        /// The grace given.
        grace: Duration,
        /// The safety margin: how long before any rival may act a holder's authority ends.
        margin: Duration,
    },
    /// The leave notice is not shorter than the shutdown deadline: the deadline
    /// would pass before a single lease was released.
    #[error(
        "leave_notice ({notice:?}) must be shorter than the shutdown deadline ({deadline:?}), \
         or a shutdown times out before it releases anything"
    )]
    LeaveNotice {
        /// The notice given.
        notice: Duration,
        /// The shutdown deadline.
        deadline: Duration,
    },
    /// `max_batch`, `max_attempts` or a duration is zero.
    #[error("{0} must be above zero")]
    Zero(&'static str),
    /// The source could not list its partitions.
    #[error("listing the source's partitions failed: {0}")]
    Source(#[from] SourceError),
    /// The source has no partitions.
    #[error("the source has no partitions to lease")]
    NoPartitions,
}

/// Earlier behaviours of the runtime, kept only so that tests can show what they
/// broke. Never set one in production.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeBad {
    /// The old default grace: a lost call is aborted 5 s after its loss, unchecked
    /// against the safety margin, so it may run beside the lease's next owner.
    LongGrace,
    /// A lost call's session is reported stopped as soon as its abort is asked, before
    /// its task has ended: on a multi-threaded runtime the lease can start again on
    /// this host while the old call still runs.
    StoppedBeforeTheCallEnds,
}

/// Builds a [`Processor`]: the source, store and handler, plus names and intervals.
/// Start from [`Processor::builder`].
pub struct ProcessorBuilder<S, St, H> {
    settings: Settings,
    source: S,
    store: St,
    handler: H,
}

/// Everything but the three parts whose types the builder changes as they are set.
struct Settings {
    instance: Option<String>,
    name: Option<String>,
    strategy: Strategy,
    liveness: Option<Liveness>,
    audit: Duration,
    checkpoint: CheckpointPolicy,
    acquire: Duration,
    renew: Duration,
    expiration: Duration,
    intake: Intake,
    cancel: CancellationToken,
    known_bad: Option<KnownBad>,
    shutdown_deadline: Option<Duration>,
    leave_notice: Option<Duration>,
    abort_grace: Option<Duration>,
    runtime_bad: Option<RuntimeBad>,
    clock: Option<Clock>,
}

impl ProcessorBuilder<(), (), ()> {
    pub(super) fn new() -> Self {
        ProcessorBuilder {
            settings: Settings {
                instance: None,
                name: None,
                strategy: Strategy::Handoff,
                liveness: None,
                audit: Duration::from_secs(300),
                checkpoint: CheckpointPolicy::EveryBatch,
                acquire: Duration::from_secs(13),
                renew: Duration::from_secs(17),
                expiration: Duration::from_secs(60),
                intake: Intake {
                    max_batch: 100,
                    poll_interval: Duration::from_secs(5),
                    request_timeout: crate::store::REQUEST_TIMEOUT,
                    // Set by `build`, from the lease settings.
                    abort_grace: Duration::ZERO,
                    stopped_before_the_call_ends: false,
                    retry_min: Duration::from_millis(100),
                    retry_max: Duration::from_secs(30),
                    max_attempts: None,
                    exhausted: Exhausted::Skip,
                },
                cancel: CancellationToken::new(),
                known_bad: None,
                shutdown_deadline: None,
                leave_notice: None,
                abort_grace: None,
                runtime_bad: None,
                clock: None,
            },
            source: (),
            store: (),
            handler: (),
        }
    }
}

impl<S, St, H> ProcessorBuilder<S, St, H> {
    /// This host's unique name (CFP's instance name).
    pub fn instance(mut self, name: impl Into<String>) -> Self {
        self.settings.instance = Some(name.into());
        self
    }

    /// The processor group's name, the prefix of every lease id (CFP's processor name).
    pub fn processor_name(mut self, name: impl Into<String>) -> Self {
        self.settings.name = Some(name.into());
        self
    }

    /// The balancing strategy (default `handoff`).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.settings.strategy = strategy;
        self
    }

    /// Where a host's authority over its leases comes from (default: session for
    /// `handoff`, one heartbeat renewing them all; lease, each lease renewed, for
    /// every other strategy). Every host of a processor group must use the same.
    pub fn liveness(mut self, liveness: Liveness) -> Self {
        self.settings.liveness = Some(liveness);
        self
    }

    /// Under session liveness, how often the group as a whole reads the entire
    /// lease table to catch what the heartbeats did not tell (default 5 min).
    pub fn audit_interval(mut self, every: Duration) -> Self {
        self.settings.audit = every;
        self
    }

    /// Writes a lease's checkpoint at most once per `every` rather than after every
    /// batch (the default), the newest one reported winning: fewer writes, for up to
    /// `every` of finished items delivered again to the next owner after a crash or
    /// a lost lease. A release or a handoff still writes the last one at once. Zero
    /// is refused by `build` ([`ConfigError::ZeroCheckpointInterval`]).
    pub fn checkpoint_at_most_every(mut self, every: Duration) -> Self {
        self.settings.checkpoint = CheckpointPolicy::AtMostEvery(millis(every));
        self
    }

    /// Writes a lease's checkpoint once the handler has finished `n` items since the
    /// last one written (the items of the batches it returned) rather than after every
    /// batch: fewer writes, for fewer than `n` finished items delivered again to the
    /// next owner after a crash or a lost lease, beside what a write in flight carried
    /// ([`CheckpointPolicy`] states the bound). A release or a handoff still writes the
    /// last one at once. Zero is refused by `build`
    /// ([`ConfigError::ZeroCheckpointItems`]).
    pub fn checkpoint_every_items(mut self, n: u32) -> Self {
        self.settings.checkpoint = CheckpointPolicy::AtMostEveryItems(n);
        self
    }

    /// How often the host reads the lease table and rebalances (default 13 s).
    pub fn acquire_interval(mut self, every: Duration) -> Self {
        self.settings.acquire = every;
        self
    }

    /// How often an owner renews its leases (default 17 s).
    pub fn renew_interval(mut self, every: Duration) -> Self {
        self.settings.renew = every;
        self
    }

    /// How long an unrenewed lease lasts (default 60 s).
    pub fn expiration_interval(mut self, after: Duration) -> Self {
        self.settings.expiration = after;
        self
    }

    /// The most items handed to one handler call (default 100).
    pub fn max_batch(mut self, items: usize) -> Self {
        self.settings.intake.max_batch = items;
        self
    }

    /// How long a worker waits after an empty read (default 5 s).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.settings.intake.poll_interval = every;
        self
    }

    /// How long a store request may take before its outcome counts as unknown
    /// (default 10 s).
    pub fn request_timeout(mut self, after: Duration) -> Self {
        self.settings.intake.request_timeout = after;
        self
    }

    /// How long a handler call may run on after its lease was lost and its token
    /// cancelled, before the worker aborts it (default: half the 2 s safety margin,
    /// [`ExpiryPolicy::abort_grace`], which the simulator uses too). It must be
    /// shorter than the margin, or [`build`](Self::build) fails with
    /// [`BuildError::AbortGrace`]: no rival starts the lease until the margin has
    /// passed after this host's authority ended. The lease does not start again on
    /// this host until the call has ended; an abort takes effect at the call's next
    /// `.await`, so a call blocked in synchronous code outlives it.
    pub fn abort_grace(mut self, after: Duration) -> Self {
        self.settings.abort_grace = Some(after);
        self
    }

    /// How long a graceful shutdown may take, from the cancellation to the last
    /// lease released and the heartbeat deleted (default: the expiration interval,
    /// after which the leases would have expired anyway). Past it, every call is
    /// aborted and [`run`](super::Processor::run) returns
    /// [`RunError::ShutdownTimedOut`](super::RunError::ShutdownTimedOut), naming what
    /// was left.
    pub fn shutdown_deadline(mut self, after: Duration) -> Self {
        self.settings.shutdown_deadline = Some(after);
        self
    }

    /// How long a host told to stop keeps processing after it marks its heartbeat as
    /// leaving, before it releases its leases (`handoff` only). The other hosts read
    /// its heartbeat every [`LEAVE_POLL`](leasehold_engine::lease::LEAVE_POLL)
    /// meanwhile, so they take its leases within about one poll of their release,
    /// where without the notice they learn of it at their next acquire interval. The
    /// default is the engine's, one acquire interval and `LEAVE_POLL`, but at most
    /// half the [shutdown deadline](Self::shutdown_deadline); `Duration::ZERO`
    /// releases at once. A notice not shorter than the shutdown deadline fails
    /// [`build`](Self::build) with [`BuildError::LeaveNotice`].
    pub fn leave_notice(mut self, notice: Duration) -> Self {
        self.settings.leave_notice = Some(notice);
        self
    }

    /// Runs a known-bad engine lifecycle, for tests that show what it breaks.
    #[doc(hidden)]
    pub fn known_bad(mut self, bad: KnownBad) -> Self {
        self.settings.known_bad = Some(bad);
        self
    }

    /// Runs a known-bad runtime behaviour, for tests that show what it breaks.
    #[doc(hidden)]
    pub fn runtime_bad(mut self, bad: RuntimeBad) -> Self {
        self.settings.runtime_bad = Some(bad);
        self
    }

    /// Runs on `clock` instead of the system's (for tests on tokio's paused clock,
    /// and of a suspend: [`Clock::suspend`]).
    #[doc(hidden)]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.settings.clock = Some(clock);
        self
    }

    /// After `attempts` failures in a row of the handler on one batch (errors and
    /// panics alike), do what `then` says instead of retrying again: skip the batch,
    /// or stop the processor. Not set, a failed batch is retried for ever, with
    /// backoff (the default, as the change feed processor does). Each skipped batch
    /// counts in `leasehold_batches_skipped_total`.
    ///
    /// ```
    /// use leasehold_adapters::runtime::Exhausted;
    /// use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let processor = Processor::builder()
    ///     .instance("host-1")
    ///     .processor_name("orders")
    ///     .max_attempts(5, Exhausted::Skip)
    ///     .source(MemoryFeed::new(["0"]))
    ///     .store(MemoryStore::new())
    ///     .handler(|ctx, batch| async move {
    ///         if ctx.attempt() == 5 {
    ///             // The last attempt: keep the batch somewhere before it is skipped.
    ///         }
    ///         Ok(batch.checkpoint)
    ///     })
    ///     .build()
    ///     .await;
    /// assert!(processor.is_ok());
    /// # }
    /// ```
    pub fn max_attempts(mut self, attempts: u32, then: Exhausted) -> Self {
        self.settings.intake.max_attempts = Some(attempts);
        self.settings.intake.exhausted = then;
        self
    }

    /// Stop with this token instead of a fresh one.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.settings.cancel = token;
        self
    }

    /// What the leases cover.
    pub fn source<S2: PartitionSource>(self, source: S2) -> ProcessorBuilder<S2, St, H> {
        ProcessorBuilder {
            settings: self.settings,
            source,
            store: self.store,
            handler: self.handler,
        }
    }

    /// Where the leases live.
    pub fn store<St2: Store<Record>>(self, store: St2) -> ProcessorBuilder<S, St2, H> {
        ProcessorBuilder {
            settings: self.settings,
            source: self.source,
            store,
            handler: self.handler,
        }
    }

    /// Your code, as a type that implements [`Handler`](super::Handler). A closure
    /// is simpler: see [`handler`](Self::handler).
    pub fn handler_impl<H2>(self, handler: H2) -> ProcessorBuilder<S, St, H2> {
        ProcessorBuilder {
            settings: self.settings,
            source: self.source,
            store: self.store,
            handler,
        }
    }
}

impl<S: PartitionSource, St, H> ProcessorBuilder<S, St, H> {
    /// Your code, as a closure; its argument types are inferred from the source, so
    /// set the source first.
    ///
    /// ```
    /// # use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
    /// let builder = Processor::builder()
    ///     .source(MemoryFeed::new(["0"]))
    ///     .store(MemoryStore::new())
    ///     .handler(|ctx, batch| async move {
    ///         println!("{} items of {} at epoch {:?}", batch.items.len(), ctx.lease(), ctx.epoch());
    ///         Ok(batch.checkpoint)
    ///     });
    /// ```
    pub fn handler<F, Fut>(self, handler: F) -> ProcessorBuilder<S, St, F>
    where
        F: Fn(LeaseContext, Batch<S::Item>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Checkpoint, super::HandlerError>> + Send + 'static,
    {
        self.handler_impl(handler)
    }
}

fn checked_name(which: &'static str, name: String) -> Result<String, BuildError> {
    let bad = name.contains(['/', '\\', '?', '#']) || name.contains("..");
    if bad {
        return Err(BuildError::BadName { which, name });
    }
    Ok(name)
}

impl<S, St, H> ProcessorBuilder<S, St, H> {
    /// The checked processor name, the source and the store.
    pub(super) fn into_estimator_parts(self) -> Result<(String, S, St), BuildError> {
        let name = self
            .settings
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or(BuildError::MissingProcessorName)?;
        Ok((
            checked_name("processor name", name)?,
            self.source,
            self.store,
        ))
    }
}

fn millis(d: Duration) -> Millis {
    Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl<S, St, H> ProcessorBuilder<S, St, H>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    /// Checks the settings, lists the source's partitions and builds the processor.
    ///
    /// ```
    /// use leasehold_adapters::{BuildError, MemoryFeed, MemoryStore, Processor};
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let built = Processor::builder()
    ///     .instance("a")
    ///     .processor_name("p")
    ///     .renew_interval(Duration::from_secs(90)) // not below the 60 s expiration
    ///     .source(MemoryFeed::new(["0"]))
    ///     .store(MemoryStore::new())
    ///     .handler(|_, b| async move { Ok(b.checkpoint) })
    ///     .build()
    ///     .await;
    /// assert!(matches!(built, Err(BuildError::Config(_))));
    /// # }
    /// ```
    pub async fn build(self) -> Result<Processor<S, St, H>, BuildError> {
        let settings = self.settings;
        let instance = settings
            .instance
            .filter(|n| !n.trim().is_empty())
            .ok_or(BuildError::MissingInstance)?;
        let instance = checked_name("instance name", instance)?;
        let name = settings
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or(BuildError::MissingProcessorName)?;
        let name = checked_name("processor name", name)?;
        if settings.intake.max_batch == 0 {
            return Err(BuildError::Zero("max_batch"));
        }
        if settings.intake.max_attempts == Some(0) {
            return Err(BuildError::Zero("max_attempts"));
        }
        let shutdown_deadline = settings.shutdown_deadline.unwrap_or(settings.expiration);
        for (what, d) in [
            ("poll_interval", settings.intake.poll_interval),
            ("request_timeout", settings.intake.request_timeout),
            ("shutdown_deadline", shutdown_deadline),
        ] {
            if d.is_zero() {
                return Err(BuildError::Zero(what));
            }
        }
        let mut config = LeaseConfig {
            prefix: name,
            partitions: Vec::new(),
            expiry: ExpiryPolicy {
                duration: millis(settings.expiration),
                ..ExpiryPolicy::default()
            },
            renew_interval: millis(settings.renew),
            acquire_interval: millis(settings.acquire),
            strategy: settings.strategy,
            liveness: settings.liveness,
            audit_interval: millis(settings.audit),
            stop_timeout: millis(settings.expiration),
            leave_notice: settings.leave_notice.map(millis),
            checkpoint: settings.checkpoint,
            known_bad: settings.known_bad,
        };
        config.validate()?;
        match settings.leave_notice {
            Some(notice) if notice >= shutdown_deadline => {
                return Err(BuildError::LeaveNotice {
                    notice,
                    deadline: shutdown_deadline,
                });
            }
            Some(_) => {}
            // The engine's default, but never more than half the deadline: the rest
            // is for draining, the last checkpoints, the releases and the leave.
            None => {
                let half = millis(shutdown_deadline / 2);
                if config.leave_notice() > half {
                    config.leave_notice = Some(half);
                }
            }
        }
        let margin = Duration::from_millis(config.expiry.safety_margin.as_millis());
        let mut intake = settings.intake;
        intake.stopped_before_the_call_ends =
            settings.runtime_bad == Some(RuntimeBad::StoppedBeforeTheCallEnds);
        intake.abort_grace = match settings.abort_grace {
            _ if settings.runtime_bad == Some(RuntimeBad::LongGrace) => Duration::from_secs(5),
            Some(grace) if grace >= margin => {
                return Err(BuildError::AbortGrace { grace, margin });
            }
            Some(grace) => grace,
            None => Duration::from_millis(config.expiry.abort_grace().as_millis()),
        };
        config.partitions = self.source.partitions().await?;
        if config.partitions.is_empty() {
            return Err(BuildError::NoPartitions);
        }
        let metrics = Arc::new(Metrics::named(&config.prefix, &instance));
        Ok(Processor {
            me: HostId::from(instance),
            config,
            intake,
            source: self.source,
            store: self.store,
            handler: Arc::new(self.handler),
            cancel: settings.cancel,
            metrics,
            shutdown_deadline,
            clock: settings.clock.unwrap_or_else(Clock::system),
        })
    }
}
