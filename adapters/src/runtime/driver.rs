//! The task that owns the engine: turns its outputs into tasks and everything that
//! comes back into its inputs.

use super::worker::{self, Lease};
use super::{Handler, Processor, RunError};
use crate::clock::{Clock, fresh_incarnation};
use crate::source::PartitionSource;
use crate::store::{Response, Store};
use leasehold_engine::lease::{Input, LeaseHost, Output, Record, StopReason};
use leasehold_engine::store::StoreError;
use leasehold_engine::{Checkpoint, LeaseToken, RequestId, Session};
use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the tasks around the engine send back to it.
pub(super) enum Event {
    Reply {
        id: RequestId,
        result: Result<leasehold_engine::store::Reply<Record>, StoreError>,
    },
    Checkpoint {
        lease: LeaseToken,
        session: Session,
        checkpoint: Checkpoint,
    },
    Stopped {
        lease: LeaseToken,
        session: Session,
    },
}

pub(super) async fn run<S, St, H>(p: Processor<S, St, H>) -> Result<(), RunError>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    let clock = Clock::system();
    let mut host = LeaseHost::new(p.me.clone(), p.config.clone(), fresh_incarnation())
        .map_err(RunError::Config)?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let mut workers: HashMap<LeaseToken, CancellationToken> = HashMap::new();
    // Workers are children of this life: if the driver goes away without a shutdown
    // (its task aborted, a panic), dropping the guard stops every worker too, so no
    // handler keeps processing a lease nobody renews.
    let life = CancellationToken::new();
    let _life_guard = life.clone().drop_guard();
    let mut shutting_down = false;
    let span = tracing::info_span!("processor", instance = %p.me, group = %p.config.prefix);
    let _entered = span.enter();
    tracing::info!(partitions = p.config.partitions.len(), "processor started");

    loop {
        while let Some(output) = host.poll_output() {
            match output {
                Output::Request(request) => {
                    let store = p.store.clone();
                    let tx = tx.clone();
                    let metrics = p.metrics.clone();
                    let timeout = p.intake.request_timeout;
                    tokio::spawn(async move {
                        let response = tokio::time::timeout(timeout, store.execute(request.op))
                            .await
                            .unwrap_or(Response {
                                result: Err(StoreError::Timeout),
                                charge: 0.0,
                            });
                        metrics.request(request.intent, response.charge);
                        // The engine has stopped only if the processor is gone.
                        let _ = tx.send(Event::Reply {
                            id: request.id,
                            result: response.result,
                        });
                    });
                }
                Output::Start {
                    lease,
                    epoch,
                    session,
                    checkpoint,
                } => {
                    tracing::info!(%lease, epoch = epoch.0, "lease started");
                    p.metrics.started();
                    let stop = life.child_token();
                    workers.insert(lease.clone(), stop.clone());
                    tokio::spawn(worker::work(
                        Lease {
                            token: lease,
                            epoch,
                            session,
                            from: checkpoint,
                        },
                        stop,
                        p.source.clone(),
                        p.handler.clone(),
                        p.intake,
                        tx.clone(),
                        p.metrics.clone(),
                    ));
                }
                Output::Stop {
                    lease,
                    reason,
                    epoch,
                    ..
                } => {
                    tracing::info!(%lease, epoch = epoch.0, %reason, "lease stopping");
                    p.metrics.stopped(matches!(reason, StopReason::Lost(_)));
                    if let Some(stop) = workers.remove(&lease) {
                        stop.cancel();
                    }
                }
                Output::Checkpointed { .. } => p.metrics.checkpointed(),
                Output::CheckpointRejected {
                    lease,
                    checkpoint,
                    error,
                    ..
                } => {
                    tracing::warn!(%lease, %checkpoint, ?error, "checkpoint rejected");
                }
                Output::ShutdownComplete => {
                    tracing::info!("every lease released; processor stopped");
                }
            }
        }
        if host.is_finished() {
            return Ok(());
        }
        let wake = host.poll_timeout().map(|at| clock.instant_of(at));
        let input = tokio::select! {
            biased;
            () = p.cancel.cancelled(), if !shutting_down => {
                shutting_down = true;
                tracing::info!("shutting down: finishing batches in flight, then releasing");
                Input::Shutdown
            }
            event = rx.recv() => match event {
                Some(Event::Reply { id, result }) => Input::Response { id, result },
                Some(Event::Checkpoint { lease, session, checkpoint }) => {
                    Input::Checkpoint { lease, session, checkpoint }
                }
                Some(Event::Stopped { lease, session }) => Input::Stopped { lease, session },
                // The driver holds a sender, so the channel never closes.
                None => Input::Tick,
            },
            () = sleep_until(wake) => Input::Tick,
        };
        if let Err(e) = host.handle_input(clock.now(), input) {
            // A checkpoint racing a stop is refused, and the engine's state is
            // unchanged by a refused input: log it and go on.
            tracing::debug!(%e, "input refused");
        }
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
