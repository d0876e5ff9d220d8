//! Runs one command of a sans-IO client (a queue consumer, an item leaser) to the
//! end against a store: the command goes in, its store requests go out concurrently,
//! their answers come back as inputs, until nothing is outstanding.

use crate::clock::Clock;
use crate::drive::{Hands, Link, Seat, drive};
use crate::store::{ContainerError, Store};
use leasehold_engine::store::StoreError;
use leasehold_engine::{StoreClient, item_lease, queue};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the exchange needs of an engine client besides what the loop needs.
pub(crate) trait Client: StoreClient {
    /// The error of a command whose task was cancelled (the runtime shutting down):
    /// its outcome is unknown.
    fn cancelled() -> Self::Error;
}

/// One engine client shared by every clone, with its store and clock.
pub(crate) struct Exchange<M, St> {
    machine: Arc<Mutex<M>>,
    pub(crate) store: St,
    /// Replace only before the first call: the machine's times are on this clock.
    pub(crate) clock: Clock,
    pub(crate) timeout: Duration,
    /// Set once the store's container passed its check: every clone checks it once,
    /// before its first request, as the processor does before it starts.
    checked: Arc<tokio::sync::OnceCell<()>>,
}

impl<M, St: Clone> Clone for Exchange<M, St> {
    fn clone(&self) -> Self {
        Exchange {
            machine: self.machine.clone(),
            store: self.store.clone(),
            clock: self.clock.clone(),
            timeout: self.timeout,
            checked: self.checked.clone(),
        }
    }
}

impl<M: Client, St: Store<M::Doc>> Exchange<M, St> {
    pub(crate) fn new(machine: M, store: St, clock: Clock, timeout: Duration) -> Self {
        Exchange {
            machine: Arc::new(Mutex::new(machine)),
            store,
            clock,
            timeout,
            checked: Default::default(),
        }
    }

    /// Checks the store's container before the first request. Only a pass is kept:
    /// a container that could not be read is checked again at the next call.
    pub(crate) async fn checked(&self) -> Result<(), ContainerError> {
        self.checked
            .get_or_try_init(|| self.store.check())
            .await
            .map(|_| ())
    }

    pub(crate) fn with_machine<R>(&self, f: impl FnOnce(&M) -> R) -> R {
        self.machine.clone().with(|m| f(m))
    }

    /// As [`call_alone`](Self::call_alone), once the store's container has passed
    /// its check ([`checked`](Self::checked)): what the clients run.
    pub(crate) async fn checked_call(
        &self,
        input: M::Input,
        turn: Option<Arc<tokio::sync::Mutex<()>>>,
    ) -> Result<Vec<M::Output>, Checked<M::Error>> {
        self.checked().await.map_err(Checked::Container)?;
        self.call_alone(input, turn).await.map_err(Checked::Engine)
    }

    /// Runs `input` to the end and returns every output it led to, requests aside.
    ///
    /// The work runs in its own task, so a caller that drops the future (a timeout, a
    /// `select!`) does not leave requests unanswered inside the client, which would
    /// wedge it (a dequeue that never finishes refuses every later one).
    pub(crate) async fn call(&self, input: M::Input) -> Result<Vec<M::Output>, M::Error> {
        self.call_alone(input, None).await
    }

    /// As [`call`](Self::call), holding `turn` until the work ends (not merely until
    /// the caller stops waiting), for commands the engine runs one at a time.
    pub(crate) async fn call_alone(
        &self,
        input: M::Input,
        turn: Option<Arc<tokio::sync::Mutex<()>>>,
    ) -> Result<Vec<M::Output>, M::Error> {
        let this = self.clone();
        let work = async move {
            let _turn = match turn {
                Some(turn) => Some(turn.lock_owned().await),
                None => None,
            };
            this.run(input).await
        };
        detach(work, M::cancelled).await
    }

    async fn run(&self, input: M::Input) -> Result<Vec<M::Output>, M::Error> {
        let link = Link {
            store: self.store.clone(),
            clock: self.clock.clone(),
            timeout: self.timeout,
        };
        let mut outputs = Collect(Vec::new());
        let (machine, none) = (self.machine.clone(), futures::stream::empty());
        drive(machine, &link, Some(input), none, &mut outputs).await?;
        Ok(outputs.0)
    }
}

/// Runs `work` in its own task, so that a caller that drops the future does not stop
/// it half-way; `cancelled` is its error if the runtime shuts down first.
pub(crate) async fn detach<T: Send + 'static, E: Send + 'static>(
    work: impl Future<Output = Result<T, E>> + Send + 'static,
    cancelled: impl FnOnce() -> E,
) -> Result<T, E> {
    match tokio::spawn(work).await {
        Ok(outcome) => outcome,
        // Nothing in the task unwraps, and stores never panic; if one did, the
        // panic is the caller's.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels it.
        Err(_) => Err(cancelled()),
    }
}

/// Why a client's command failed: its container, or the engine's answer.
pub(crate) enum Checked<E> {
    Container(ContainerError),
    Engine(E),
}

/// A command's outputs, requests aside.
struct Collect<O>(Vec<O>);

impl<M: StoreClient> Hands<M> for Collect<M::Output> {
    fn output(&mut self, output: M::Output) {
        self.0.push(output);
    }

    fn refused(&mut self, error: M::Error) {
        // Every answer fed here was to a request of this very command, so the engine
        // knows it; a refusal could only be a bug, and changes nothing.
        tracing::error!(%error, "the engine refused its own request's answer");
    }
}

impl Client for queue::Consumer {
    fn cancelled() -> queue::QueueError {
        queue::QueueError::Store(StoreError::Unavailable)
    }
}

impl Client for item_lease::Leaser {
    fn cancelled() -> item_lease::ItemError {
        item_lease::ItemError::Store(StoreError::Unavailable)
    }
}
