//! What a handler call knows of its lease: which one, under which fencing token, and
//! whether it has been told to stop.

use crate::clock::Clock;
use leasehold_engine::lease::StopReason;
use leasehold_engine::{Epoch, LeaseToken, LocalTime, Session};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The lease a handler call processes, handed to every call, as the .NET change feed
/// processor hands its delegate a context and a cancellation token.
///
/// When the engine stops the lease, [`cancellation`](Self::cancellation) is cancelled
/// and [`stop_reason`](Self::stop_reason) says why:
/// - after a release or a shutdown the call may finish its batch, and its checkpoint
///   is stored;
/// - after [`StopReason::Lost`] the call has no authority any more: it should return
///   at once. Its checkpoint is refused, its writes carry an epoch that a later
///   session of the lease exceeds, and after the processor's
///   [`abort_grace`](super::ProcessorBuilder::abort_grace) the runtime aborts it.
///
/// [`deadline`](Self::deadline) says until when the host's authority runs, as far as
/// it knows: an effect that must never overlap another owner's (a write that no
/// downstream epoch check guards) is made only while
/// [`has_authority`](Self::has_authority) holds, with the effect's own duration to
/// spare. That is the rule the simulator's handlers follow before each commit.
///
/// ```
/// use leasehold_adapters::runtime::LeaseContext;
/// use leasehold_adapters::{Batch, HandlerError};
/// use leasehold_engine::Checkpoint;
///
/// async fn handle(ctx: LeaseContext, batch: Batch<String>) -> Result<Checkpoint, HandlerError> {
///     for item in &batch.items {
///         if ctx.cancellation().is_cancelled() {
///             return Err(format!("stopped: {:?}", ctx.stop_reason()).into());
///         }
///         // Write `item` downstream, fenced by `ctx.epoch()`.
///         let _ = (item, ctx.epoch());
///     }
///     Ok(batch.checkpoint)
/// }
/// ```
#[derive(Clone, Debug)]
pub struct LeaseContext {
    lease: LeaseToken,
    epoch: Epoch,
    session: Session,
    cancel: CancellationToken,
    reason: watch::Receiver<Option<StopReason>>,
    authority: watch::Receiver<Option<LocalTime>>,
    clock: Clock,
    attempt: u32,
}

impl LeaseContext {
    pub(super) fn new(
        lease: LeaseToken,
        epoch: Epoch,
        session: Session,
        cancel: CancellationToken,
        reason: watch::Receiver<Option<StopReason>>,
        authority: watch::Receiver<Option<LocalTime>>,
        clock: Clock,
    ) -> LeaseContext {
        LeaseContext {
            lease,
            epoch,
            session,
            cancel,
            reason,
            authority,
            clock,
            attempt: 1,
        }
    }

    /// When the host's authority over this lease runs out, on tokio's clock, as the
    /// engine knows it now: each renewal moves it later. `None` once the lease is
    /// lost or released (or before the engine has said). Past it, another host may
    /// soon process the lease.
    ///
    /// ```
    /// use leasehold_adapters::runtime::LeaseContext;
    /// use std::time::Duration;
    ///
    /// // Writes an effect no downstream fences by epoch, only with 3 s to spare.
    /// fn may_write(ctx: &LeaseContext) -> bool {
    ///     ctx.deadline()
    ///         .is_some_and(|d| tokio::time::Instant::now() + Duration::from_secs(3) < d)
    /// }
    /// ```
    ///
    /// The engine's clock counts time the machine spent suspended (a VM saved and
    /// restored, a laptop asleep), which tokio's does not: the instant is computed
    /// afresh at each call, so after a suspend it may already have passed.
    pub fn deadline(&self) -> Option<Instant> {
        self.authority.borrow().map(|t| self.clock.instant_of(t))
    }

    /// Whether the host still has authority over this lease now: the deadline has
    /// not passed on the engine's clock (which counts a suspend) and the lease has not
    /// been lost.
    pub fn has_authority(&self) -> bool {
        let until = *self.authority.borrow();
        !self.is_lost() && until.is_some_and(|d| self.clock.now().local < d)
    }

    /// Which attempt at this batch the call is: 1 for the first, one more after each
    /// failure (error or panic) of the handler on the same batch. With
    /// [`max_attempts`](super::ProcessorBuilder::max_attempts) set, the call whose
    /// attempt equals it is the last before the batch is skipped or the processor
    /// stops: the place to dead-letter the batch.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// This context, for attempt `attempt` at a batch.
    pub(super) fn for_attempt(&self, attempt: u32) -> LeaseContext {
        LeaseContext {
            attempt,
            ..self.clone()
        }
    }

    /// The partition.
    pub fn lease(&self) -> &LeaseToken {
        &self.lease
    }

    /// The lease's epoch: a fencing token that rises with every change of owner and
    /// every restart after a lost authority, so a downstream system that remembers
    /// the highest epoch it has seen per lease can refuse the writes of a call that
    /// lost the lease.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// This processing session of the lease on this host.
    pub fn session(&self) -> Session {
        self.session
    }

    /// Cancelled when the lease stops, for whatever reason.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Why the lease stopped, once it has. A release or a shutdown can become a loss
    /// if the drain outlives the authority.
    pub fn stop_reason(&self) -> Option<StopReason> {
        *self.reason.borrow()
    }

    /// Whether the lease was lost: the call must end at once.
    pub fn is_lost(&self) -> bool {
        matches!(self.stop_reason(), Some(StopReason::Lost(_)))
    }
}
