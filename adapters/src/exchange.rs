//! Runs one command of a sans-IO client (a queue consumer, an item leaser) to the
//! end against a store: the command goes in, its store requests go out concurrently,
//! their answers come back as inputs, until nothing is outstanding.

use crate::clock::Clock;
use crate::store::{Store, execute_within};
use futures::stream::{FuturesUnordered, StreamExt};
use leasehold_engine::store::{Document, Op, Reply, StoreError};
use leasehold_engine::{RequestId, item_lease, queue};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What the exchange needs of an engine client.
pub(crate) trait Machine:
    leasehold_engine::Machine<Input: Send + 'static, Output: Send + 'static, Error: Send + 'static>
    + Send
    + 'static
{
    type Doc: Document + Send + Sync + 'static;

    /// The request an output carries, or the output itself if it is not one.
    fn request(output: Self::Output) -> Result<(RequestId, Op<Self::Doc>), Self::Output>;
    fn response(id: RequestId, result: Result<Reply<Self::Doc>, StoreError>) -> Self::Input;
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
}

impl<M, St: Clone> Clone for Exchange<M, St> {
    fn clone(&self) -> Self {
        Exchange {
            machine: self.machine.clone(),
            store: self.store.clone(),
            clock: self.clock,
            timeout: self.timeout,
        }
    }
}

impl<M: Machine, St: Store<M::Doc>> Exchange<M, St> {
    pub(crate) fn new(machine: M, store: St, clock: Clock, timeout: Duration) -> Self {
        Exchange {
            machine: Arc::new(Mutex::new(machine)),
            store,
            clock,
            timeout,
        }
    }

    pub(crate) fn with_machine<R>(&self, f: impl FnOnce(&M) -> R) -> R {
        f(&self.lock())
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
        match tokio::spawn(work).await {
            Ok(outcome) => outcome,
            // Nothing in the task unwraps, and stores never panic; if one did, the
            // panic is the caller's.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only a runtime shutting down cancels it.
            Err(_) => Err(M::cancelled()),
        }
    }

    async fn run(&self, input: M::Input) -> Result<Vec<M::Output>, M::Error> {
        let mut outputs = Vec::new();
        let mut requests = Vec::new();
        {
            let mut machine = self.lock();
            machine.handle_input(self.clock.now(), input)?;
            drain(&mut *machine, &mut outputs, &mut requests);
        }
        let mut in_flight = FuturesUnordered::new();
        loop {
            for (id, op) in requests.drain(..) {
                let store = self.store.clone();
                let timeout = self.timeout;
                in_flight.push(async move {
                    let response = execute_within(&store, op, timeout).await;
                    (id, response.result)
                });
            }
            let Some((id, result)) = in_flight.next().await else {
                return Ok(outputs);
            };
            let mut machine = self.lock();
            // Every id answered here was issued by this very call, so the engine
            // knows it; a refusal could only be a bug, and changes nothing.
            if machine
                .handle_input(self.clock.now(), M::response(id, result))
                .is_err()
            {
                tracing::error!(%id, "the engine refused its own request's answer");
            }
            drain(&mut *machine, &mut outputs, &mut requests);
        }
    }

    fn lock(&self) -> MutexGuard<'_, M> {
        // The engine's handle_input changes nothing when it refuses, and never panics
        // half-way, so a poisoned lock still guards a consistent machine.
        self.machine.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn drain<M: Machine>(
    machine: &mut M,
    outputs: &mut Vec<M::Output>,
    requests: &mut Vec<(RequestId, Op<M::Doc>)>,
) {
    while let Some(out) = machine.poll_output() {
        match M::request(out) {
            Ok(request) => requests.push(request),
            Err(out) => outputs.push(out),
        }
    }
}

impl Machine for queue::Consumer {
    type Doc = queue::Message;
    fn request(output: queue::Output) -> Result<(RequestId, Op<queue::Message>), queue::Output> {
        match output {
            queue::Output::Request(r) => Ok((r.id, r.op)),
            other => Err(other),
        }
    }

    fn response(id: RequestId, result: Result<Reply<queue::Message>, StoreError>) -> queue::Input {
        queue::Input::Response { id, result }
    }

    fn cancelled() -> queue::QueueError {
        queue::QueueError::Store(StoreError::Unavailable)
    }
}

impl Machine for item_lease::Leaser {
    type Doc = item_lease::Item;
    fn request(
        output: item_lease::Output,
    ) -> Result<(RequestId, Op<item_lease::Item>), item_lease::Output> {
        match output {
            item_lease::Output::Request(r) => Ok((r.id, r.op)),
            other => Err(other),
        }
    }

    fn response(
        id: RequestId,
        result: Result<Reply<item_lease::Item>, StoreError>,
    ) -> item_lease::Input {
        item_lease::Input::Response { id, result }
    }

    fn cancelled() -> item_lease::ItemError {
        item_lease::ItemError::Store(StoreError::Unavailable)
    }
}
