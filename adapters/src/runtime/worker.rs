//! One lease's worker: reads the source, calls the handler, reports checkpoints, and
//! reports the session stopped only once its call has ended or been aborted.

use super::{Exhausted, Handler, Intake, LeaseContext, Metrics};
use crate::clock::Clock;
use crate::source::PartitionSource;
use leasehold_engine::lease::{Input, StopReason};
use leasehold_engine::{Checkpoint, Epoch, LeaseToken, LocalTime, Session};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

/// The lease a worker processes, as the engine started it.
pub(super) struct Lease {
    pub token: LeaseToken,
    pub epoch: Epoch,
    pub session: Session,
    pub from: Option<Checkpoint>,
}

/// How the driver stops a worker: the token cancels, the reason says why. It also
/// tells the worker's calls how long the host's authority over the lease lasts.
pub(super) struct Stopper {
    pub token: LeaseToken,
    pub cancel: CancellationToken,
    pub reason: watch::Sender<Option<StopReason>>,
    pub authority: watch::Sender<Option<LocalTime>>,
}

impl Stopper {
    pub fn new(token: LeaseToken, cancel: CancellationToken) -> Stopper {
        Stopper {
            token,
            cancel,
            reason: watch::Sender::new(None),
            authority: watch::Sender::new(None),
        }
    }

    /// Publishes the authority's end as the engine knows it now.
    pub fn authority_until(&self, until: Option<LocalTime>) {
        self.authority.send_if_modified(|known| {
            let changed = *known != until;
            *known = until;
            changed
        });
    }

    /// Tells the worker to stop for `reason`; a loss overrides a drain.
    pub fn stop(&self, reason: StopReason) {
        self.reason.send_replace(Some(reason));
        self.cancel.cancel();
    }
}

/// Waits `d`, or less if `stop` fires; says whether it fired.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}

/// Resolves `grace` after the lease is lost, or after the driver went away (the
/// processor's future dropped: nothing renews the lease any more); never otherwise.
async fn lost_then(mut reason: watch::Receiver<Option<StopReason>>, grace: Duration) {
    // An error is the sender dropped with the driver.
    let _ = reason
        .wait_for(|r| matches!(r, Some(StopReason::Lost(_))))
        .await;
    tokio::time::sleep(grace).await;
}

/// Everything a worker needs besides its lease.
pub(super) struct Crew<S, H> {
    pub source: S,
    pub handler: Arc<H>,
    pub intake: Intake,
    pub tx: UnboundedSender<Input>,
    pub metrics: Arc<Metrics>,
    /// The first batch the handler exhausted its attempts on, under
    /// [`Exhausted::Stop`](super::Exhausted::Stop): its lease, attempts and last error.
    pub poisoned: Arc<std::sync::Mutex<Option<(LeaseToken, u32, String)>>>,
    /// The processor's own cancellation: a poison batch under `Stop` shuts it down.
    pub shutdown: CancellationToken,
}

impl<S: Clone, H> Clone for Crew<S, H> {
    fn clone(&self) -> Self {
        Crew {
            source: self.source.clone(),
            handler: Arc::clone(&self.handler),
            intake: self.intake,
            tx: self.tx.clone(),
            metrics: self.metrics.clone(),
            poisoned: self.poisoned.clone(),
            shutdown: self.shutdown.clone(),
        }
    }
}

/// Whether `children` can replace `partition`: at least one, each once, none the
/// partition itself. The engine refuses anything else, and the lease would hang.
fn real_split(partition: &LeaseToken, children: &[LeaseToken]) -> bool {
    let distinct: std::collections::BTreeSet<&LeaseToken> = children.iter().collect();
    !children.is_empty() && distinct.len() == children.len() && !distinct.contains(partition)
}

/// The partition split: tells the engine, which stops the session (the children's
/// leases take over), and waits for that stop. The report is repeated each poll
/// interval until the stop comes: a report the engine refused (the lease was being
/// lost meanwhile) is followed by that loss's stop anyway.
async fn report_split(
    token: &LeaseToken,
    session: Session,
    children: Vec<LeaseToken>,
    stop: &CancellationToken,
    tx: &UnboundedSender<Input>,
    every: Duration,
) {
    tracing::info!(
        ?children,
        "the partition split; handing over to its children"
    );
    loop {
        let split = Input::Split {
            lease: token.clone(),
            session,
            children: children.clone(),
        };
        if tx.send(split).is_err() || pause(stop, every).await {
            return;
        }
    }
}

/// What a worker hears from its [`Stopper`].
pub(super) struct Orders {
    pub stop: CancellationToken,
    pub reason: watch::Receiver<Option<StopReason>>,
    pub authority: watch::Receiver<Option<LocalTime>>,
    /// The clock the authority's end is on.
    pub clock: Clock,
}

pub(super) async fn work<S, H>(lease: Lease, orders: Orders, crew: Crew<S, H>)
where
    S: PartitionSource,
    H: Handler<S::Item>,
{
    let span = tracing::info_span!("lease", lease = %lease.token, epoch = lease.epoch.0);
    let Crew {
        source,
        handler,
        intake,
        tx,
        metrics,
        poisoned,
        shutdown,
    } = crew;
    let Lease {
        token,
        epoch,
        session,
        mut from,
    } = lease;
    let Orders {
        stop,
        reason,
        authority,
        clock,
    } = orders;
    let context = LeaseContext::new(
        token.clone(),
        epoch,
        session,
        stop.clone(),
        reason.clone(),
        authority,
        clock,
    );
    async move {
        let mut backoff = intake.retry_min;
        'intake: while !stop.is_cancelled() {
            match source.split_of(&token).await {
                Ok(Some(children)) if real_split(&token, &children) => {
                    report_split(&token, session, children, &stop, &tx, intake.poll_interval).await;
                    break;
                }
                // The engine would refuse it, and the lease would hang: read on.
                Ok(Some(children)) => tracing::error!(
                    ?children,
                    "the source named impossible children for a split (none, a repeat, or the partition itself); reading on"
                ),
                Ok(None) => {}
                Err(e) => tracing::warn!(%e, "asking the source whether the partition split failed"),
            }
            let read = tokio::select! {
                () = stop.cancelled() => break,
                read = source.read(&token, from.as_ref(), intake.max_batch) => read,
            };
            let batch = match read {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(%e, retry_in = ?backoff, "reading the source failed");
                    if pause(&stop, backoff).await {
                        break;
                    }
                    backoff = (backoff * 2).min(intake.retry_max);
                    continue;
                }
            };
            if batch.items.is_empty() {
                if pause(&stop, intake.poll_interval).await {
                    break;
                }
                continue;
            }
            // The handler runs as its own task so that a panic stays there, and so
            // that a call of a lost lease can be aborted once its grace is over. A
            // release or a shutdown lets the batch in flight finish and checkpoint.
            let mut attempt: u32 = 1;
            let mut last_error: String;
            loop {
                // Aborted if this worker is dropped (the processor's future dropped):
                // no call outlives the driver that would report it stopped.
                let mut call = AbortOnDropHandle::new(tokio::spawn(
                    handler
                        .handle(context.for_attempt(attempt), batch.clone())
                        .in_current_span(),
                ));
                let outcome = tokio::select! {
                    outcome = &mut call => Some(outcome),
                    () = lost_then(reason.clone(), intake.abort_grace) => None,
                };
                if stop.is_cancelled() {
                    metrics.call_cancelled();
                }
                let Some(outcome) = outcome else {
                    // Aborting takes effect at the call's next await. The session is
                    // reported stopped only once the call has ended: until then the
                    // engine does not start the lease again here. A call stuck in
                    // blocking code never ends; the engine gives the lease up after
                    // its stop timeout, at a new epoch.
                    call.abort();
                    metrics.call_aborted();
                    tracing::warn!(grace = ?intake.abort_grace, "a call of a lost lease outlived its grace; aborting");
                    if intake.stopped_before_the_call_ends {
                        // Known-bad: the task is left to end on its own.
                        call.detach();
                    } else {
                        let _ = (&mut call).await;
                    }
                    break 'intake;
                };
                match outcome {
                    Ok(Ok(checkpoint)) => {
                        metrics.batch();
                        backoff = intake.retry_min;
                        from = Some(checkpoint.clone());
                        let _ = tx.send(Input::Checkpoint {
                            lease: token.clone(),
                            session,
                            checkpoint,
                            items: batch_items(&batch),
                        });
                        break;
                    }
                    Ok(Err(e)) => {
                        metrics.handler_failed();
                        last_error = e.to_string();
                        tracing::warn!(%e, attempt, retry_in = ?backoff, "the handler failed");
                    }
                    Err(join) => {
                        metrics.handler_failed();
                        last_error = format!("the handler panicked: {join}");
                        tracing::error!(%join, attempt, retry_in = ?backoff, "the handler panicked");
                    }
                }
                if intake.max_attempts.is_some_and(|max| attempt >= max) {
                    match intake.exhausted {
                        Exhausted::Skip => {
                            metrics.batch_skipped();
                            tracing::error!(attempt, error = %last_error, "skipping the batch: the handler failed on it too often");
                            backoff = intake.retry_min;
                            from = Some(batch.checkpoint.clone());
                            let _ = tx.send(Input::Checkpoint {
                                lease: token.clone(),
                                session,
                                checkpoint: batch.checkpoint.clone(),
                                items: batch_items(&batch),
                            });
                            break;
                        }
                        Exhausted::Stop => {
                            tracing::error!(attempt, error = %last_error, "stopping the processor: the handler failed on a batch too often");
                            poisoned
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .get_or_insert_with(|| (token.clone(), attempt, last_error.clone()));
                            shutdown.cancel();
                            break 'intake;
                        }
                    }
                }
                attempt += 1;
                if pause(&stop, backoff).await {
                    break 'intake;
                }
                backoff = (backoff * 2).min(intake.retry_max);
            }
        }
        // Only now: the engine starts this lease again here only after this.
        let _ = tx.send(Input::Stopped {
            lease: token,
            session,
        });
    }
    .instrument(span)
    .await
}

/// The items a batch reports to the checkpoint policy (a skipped batch counts as
/// finished: a new owner must not deliver it again any more than a handled one).
fn batch_items<T>(batch: &crate::source::Batch<T>) -> u32 {
    u32::try_from(batch.items.len()).unwrap_or(u32::MAX)
}
