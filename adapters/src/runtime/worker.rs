//! One lease's worker: reads the source, calls the handler, reports checkpoints.

use super::driver::Event;
use super::{Handler, Intake, Metrics};
use crate::source::PartitionSource;
use leasehold_engine::{Checkpoint, Epoch, LeaseToken, Session};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The lease a worker processes, as the engine started it.
pub(super) struct Lease {
    pub token: LeaseToken,
    pub epoch: Epoch,
    pub session: Session,
    pub from: Option<Checkpoint>,
}

/// Waits `d`, or less if `stop` fires; says whether it fired.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}

pub(super) async fn work<S, H>(
    lease: Lease,
    stop: CancellationToken,
    source: S,
    handler: Arc<H>,
    intake: Intake,
    tx: UnboundedSender<Event>,
    metrics: Arc<Metrics>,
) where
    S: PartitionSource,
    H: Handler<S::Item>,
{
    let span = tracing::info_span!("lease", lease = %lease.token, epoch = lease.epoch.0);
    let Lease {
        token,
        epoch,
        session,
        mut from,
    } = lease;
    async move {
        let mut backoff = intake.retry_min;
        'intake: while !stop.is_cancelled() {
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
            // The handler runs as its own task so that a panic stays there. A stop
            // does not interrupt it: the batch in flight finishes and checkpoints.
            loop {
                let call = handler.handle(token.clone(), epoch, batch.clone());
                match tokio::spawn(call).await {
                    Ok(Ok(checkpoint)) => {
                        metrics.batch();
                        backoff = intake.retry_min;
                        from = Some(checkpoint.clone());
                        let _ = tx.send(Event::Checkpoint {
                            lease: token.clone(),
                            session,
                            checkpoint,
                        });
                        break;
                    }
                    Ok(Err(e)) => {
                        metrics.handler_failed();
                        tracing::warn!(%e, retry_in = ?backoff, "the handler failed; retrying the batch");
                    }
                    Err(join) => {
                        metrics.handler_failed();
                        tracing::error!(%join, retry_in = ?backoff, "the handler panicked; retrying the batch");
                    }
                }
                if pause(&stop, backoff).await {
                    break 'intake;
                }
                backoff = (backoff * 2).min(intake.retry_max);
            }
        }
        let _ = tx.send(Event::Stopped {
            lease: token,
            session,
        });
    }
    .instrument(span)
    .await
}
