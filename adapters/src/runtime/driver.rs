//! The processor's side of the driving loop: it owns the engine's host, starts a
//! worker for each lease the host starts, stops it when the host says so, and feeds
//! the workers' checkpoints and stops back in.

use super::metrics::Ended;
use super::worker::{self, Crew, Lease, Orders, Stopper};
use super::{Handler, Processor, RunError};
use crate::clock::{Clock, fresh_incarnation};
use crate::drive::{Hands, Link, drive};
use crate::source::PartitionSource;
use crate::store::Store;
use futures::stream;
use leasehold_engine::lease::{ConfigError, Input, Intent, LeaseHost, Output, Record, StopReason};
use leasehold_engine::store::StoreError;
use leasehold_engine::{LeaseToken, Session};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub(super) async fn run<S, St, H>(p: Processor<S, St, H>) -> Result<(), RunError>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    let span = tracing::info_span!("processor", instance = %p.me, group = %p.config.prefix);
    host(p).instrument(span).await
}

async fn host<S, St, H>(p: Processor<S, St, H>) -> Result<(), RunError>
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    let mut host = LeaseHost::new(p.me.clone(), p.config.clone(), fresh_incarnation())
        .map_err(RunError::Config)?;
    p.store.check().await.map_err(RunError::Container)?;
    // Everything the workers send back is one of the engine's inputs.
    let (tx, rx) = mpsc::unbounded_channel::<Input>();
    let cancel = p.cancel.clone();
    let shutdown = stream::once(async move {
        cancel.cancelled().await;
        tracing::info!("shutting down: finishing batches in flight, then releasing");
        Input::Shutdown
    });
    // The crew holds a sender, so the workers' stream never ends.
    let reports = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|i| (i, rx)) });
    let events = std::pin::pin!(stream::select(shutdown, reports));
    let link = Link {
        store: p.store.clone(),
        clock: p.clock.clone(),
        timeout: p.intake.request_timeout,
    };
    tracing::info!(partitions = p.config.partitions.len(), "processor started");
    let mut workers = Workers {
        crew: Crew {
            source: p.source,
            handler: p.handler,
            intake: p.intake,
            tx,
            metrics: p.metrics,
            poisoned: Arc::default(),
            shutdown: p.cancel.clone(),
        },
        running: HashMap::new(),
        life: CancellationToken::new(),
        refused: None,
        denied: None,
        fatal: CancellationToken::new(),
        clock: link.clock.clone(),
    };
    let fatal = workers.fatal.clone();
    // Without a first input nothing ends the drive with an error: later refusals (a
    // checkpoint racing a stop) go to the hands, which log them.
    let deadline = p.shutdown_deadline;
    let finished = {
        let driving = drive(&mut host, &link, None, events, &mut workers);
        let overdue = async {
            p.cancel.cancelled().await;
            tokio::time::sleep(deadline).await;
        };
        tokio::select! {
            _ = driving => Some(true),
            () = overdue => Some(false),
            () = fatal.cancelled() => None,
        }
    };
    let Some(finished) = finished else {
        // Dropping the workers (on return) aborts every call.
        let error = workers.denied.take().unwrap_or(StoreError::Unavailable);
        tracing::error!(%error, "the store refused this host; stopping");
        return Err(RunError::Denied(error));
    };
    if !finished {
        // Dropping the workers cancels every call; the next life, or another host,
        // takes over what is left once it expires.
        let held: Vec<LeaseToken> = host
            .leases()
            .filter(|l| l.owned.is_some())
            .map(|l| l.doc.token.clone())
            .collect();
        tracing::error!(?deadline, ?held, "the shutdown did not finish in time");
        return Err(RunError::ShutdownTimedOut {
            deadline,
            held,
            heartbeat_left: host.has_left(),
        });
    }
    if let Some((lease, attempts, error)) = workers
        .crew
        .poisoned
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
    {
        return Err(RunError::Poisoned {
            lease,
            attempts,
            error,
        });
    }
    match workers.refused.take() {
        Some(error) => Err(RunError::Refused(error)),
        None => Ok(()),
    }
}

/// The workers of the leases the host has started.
struct Workers<S, H> {
    crew: Crew<S, H>,
    /// By session: a stop names the session it ends, and a drain can be told a second
    /// time, as a loss, before its worker has stopped.
    running: HashMap<Session, Stopper>,
    /// Workers are children of this life: if the driver goes away without a shutdown
    /// (its task aborted, a panic), dropping it stops every worker too, so no handler
    /// keeps processing a lease nobody renews.
    life: CancellationToken,
    /// Why the host would not run in its group, if it would not.
    refused: Option<ConfigError>,
    /// The store's refusal of this host, if it refused it.
    denied: Option<StoreError>,
    /// Cancelled on such a refusal: the processor stops at once.
    fatal: CancellationToken,
    /// The engine's clock, which the calls judge their authority by.
    clock: Clock,
}

impl<S, H> Drop for Workers<S, H> {
    fn drop(&mut self) {
        self.life.cancel();
    }
}

impl<S, H> Hands<LeaseHost> for Workers<S, H>
where
    S: PartitionSource,
    H: Handler<S::Item>,
{
    fn output(&mut self, output: Output) {
        let metrics = &self.crew.metrics;
        match output {
            // The loop carries requests; nothing else asks for one.
            Output::Request(_) => {}
            Output::Start {
                lease,
                epoch,
                session,
                checkpoint,
            } => {
                tracing::info!(%lease, epoch = epoch.0, "lease started");
                metrics.started();
                let stopper = Stopper::new(lease.clone(), self.life.child_token());
                let orders = Orders {
                    stop: stopper.cancel.clone(),
                    reason: stopper.reason.subscribe(),
                    authority: stopper.authority.subscribe(),
                    clock: self.clock.clone(),
                };
                self.running.insert(session, stopper);
                let lease = Lease {
                    token: lease,
                    epoch,
                    session,
                    from: checkpoint,
                };
                let crew = self.crew.clone();
                tokio::spawn(worker::work(lease, orders, crew).in_current_span());
            }
            Output::Stop {
                lease,
                reason,
                epoch,
                session,
            } => {
                tracing::info!(%lease, epoch = epoch.0, %reason, "lease stopping");
                if let Some(stopper) = self.running.get(&session) {
                    if stopper.reason.borrow().is_none() {
                        metrics.stopped(match reason {
                            StopReason::Lost(_) => Ended::Lost,
                            StopReason::Split => Ended::Split,
                            StopReason::Released | StopReason::Shutdown => Ended::Released,
                        });
                    }
                    stopper.stop(reason);
                }
            }
            Output::Checkpointed { .. } => metrics.checkpointed(),
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
            Output::Refused(error) => {
                tracing::error!(%error, "this host cannot run in its group; stopping");
                self.refused = Some(error);
            }
        }
    }

    fn input(&mut self, input: &Input) {
        if let Input::Stopped { session, .. } = input {
            self.running.remove(session);
        }
    }

    fn answered(&mut self, intent: &Intent, charge: f64) {
        self.crew.metrics.request(*intent, charge);
    }

    fn denied(&mut self, error: &StoreError) {
        self.denied.get_or_insert_with(|| error.clone());
        self.fatal.cancel();
    }

    fn settled(&mut self, host: &LeaseHost, _clock: &Clock) {
        for (session, stopper) in &self.running {
            let until = host.authority_until(&stopper.token, *session);
            stopper.authority_until(until);
        }
    }

    // A checkpoint racing a stop is refused, and a refused input changes nothing but
    // the clock: the default (a debug line) is all it needs.
}
