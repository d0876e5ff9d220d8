//! The task that owns the engine: turns its outputs into tasks and everything that
//! comes back into its inputs.

use super::worker::{self, Crew, Lease, Stopper};
use super::{Handler, Processor, RunError};
use crate::clock::{Clock, fresh_incarnation};
use crate::source::PartitionSource;
use crate::store::{Store, execute_within};
use leasehold_engine::Session;
use leasehold_engine::lease::{Input, LeaseHost, Output, Record, StopReason};
use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub(super) async fn run<S, St, H>(p: Processor<S, St, H>) -> Result<(), RunError>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    let span = tracing::info_span!("processor", instance = %p.me, group = %p.config.prefix);
    drive(p).instrument(span).await
}

async fn drive<S, St, H>(p: Processor<S, St, H>) -> Result<(), RunError>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    let clock = Clock::system();
    let mut host = LeaseHost::new(p.me.clone(), p.config.clone(), fresh_incarnation())
        .map_err(RunError::Config)?;
    // Everything the tasks around the engine send back is one of its inputs.
    let (tx, mut rx) = mpsc::unbounded_channel::<Input>();
    // By session: a stop names the session it ends, and a drain can be told a second
    // time, as a loss, before its worker has stopped.
    let mut workers: HashMap<Session, Stopper> = HashMap::new();
    // Workers are children of this life: if the driver goes away without a shutdown
    // (its task aborted, a panic), dropping the guard stops every worker too, so no
    // handler keeps processing a lease nobody renews.
    let life = CancellationToken::new();
    let _life_guard = life.clone().drop_guard();
    let mut shutting_down = false;
    tracing::info!(partitions = p.config.partitions.len(), "processor started");

    loop {
        while let Some(output) = host.poll_output() {
            match output {
                Output::Request(request) => {
                    let store = p.store.clone();
                    let tx = tx.clone();
                    let metrics = p.metrics.clone();
                    let timeout = p.intake.request_timeout;
                    let span =
                        tracing::debug_span!("request", intent = ?request.intent, id = %request.id);
                    tokio::spawn(
                        async move {
                            let response = execute_within(&store, request.op, timeout).await;
                            metrics.request(request.intent, response.charge);
                            // The engine has stopped only if the processor is gone.
                            let _ = tx.send(Input::Response {
                                id: request.id,
                                result: response.result,
                            });
                        }
                        .instrument(span),
                    );
                }
                Output::Start {
                    lease,
                    epoch,
                    session,
                    checkpoint,
                } => {
                    tracing::info!(%lease, epoch = epoch.0, "lease started");
                    p.metrics.started();
                    let stopper = Stopper::new(life.child_token());
                    let (stop, reason) = (stopper.cancel.clone(), stopper.reason.subscribe());
                    workers.insert(session, stopper);
                    let crew = Crew {
                        source: p.source.clone(),
                        handler: p.handler.clone(),
                        intake: p.intake,
                        tx: tx.clone(),
                        metrics: p.metrics.clone(),
                    };
                    let lease = Lease {
                        token: lease,
                        epoch,
                        session,
                        from: checkpoint,
                    };
                    tokio::spawn(worker::work(lease, stop, reason, crew).in_current_span());
                }
                Output::Stop {
                    lease,
                    reason,
                    epoch,
                    session,
                } => {
                    tracing::info!(%lease, epoch = epoch.0, %reason, "lease stopping");
                    if let Some(stopper) = workers.get(&session) {
                        let first = stopper.reason.borrow().is_none();
                        if first {
                            p.metrics.stopped(matches!(reason, StopReason::Lost(_)));
                        }
                        stopper.stop(reason);
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
            // The driver holds a sender, so the channel never closes.
            input = rx.recv() => input.unwrap_or(Input::Tick),
            () = sleep_until(wake) => Input::Tick,
        };
        if let Input::Stopped { session, .. } = &input {
            workers.remove(session);
        }
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
