//! The one loop that drives an engine machine on tokio, for the processor and the
//! clients alike: inputs go in with the time they happened, the machine's store
//! requests go out concurrently (each within the request timeout), their answers come
//! back as inputs, other outputs go to the driver's [`Hands`], and the machine is
//! ticked at its [`poll_timeout`](leasehold_engine::Machine::poll_timeout).

use crate::clock::Clock;
use crate::store::{Response, Store, execute_within};
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use leasehold_engine::drive::{self, Driver, Halt, Stepped};
use leasehold_engine::store::StoreError;
use leasehold_engine::{Request, RequestId, StoreClient};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

/// Where the driven machine lives: owned by the loop's caller, or shared by the
/// clones of a client.
pub(crate) trait Seat<M> {
    /// Runs `f` on the machine.
    fn with<R>(&mut self, f: impl FnOnce(&mut M) -> R) -> R;
}

impl<M> Seat<M> for &mut M {
    fn with<R>(&mut self, f: impl FnOnce(&mut M) -> R) -> R {
        f(self)
    }
}

impl<M> Seat<M> for Arc<Mutex<M>> {
    fn with<R>(&mut self, f: impl FnOnce(&mut M) -> R) -> R {
        // The engine's handle_input changes nothing when it refuses, and never panics
        // half-way, so a poisoned lock still guards a consistent machine.
        f(&mut self.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What a driver does besides carrying store requests.
pub(crate) trait Hands<M: StoreClient> {
    /// Acts on an output that is not a store request.
    fn output(&mut self, output: M::Output);
    /// Sees an input before the machine does.
    fn input(&mut self, _input: &M::Input) {}
    /// Counts what an answered request cost.
    fn answered(&mut self, _intent: &M::Intent, _charge: f64) {}
    /// Hears that the machine refused an input, which changed nothing.
    fn refused(&mut self, error: M::Error) {
        tracing::debug!(%error, "input refused");
    }
    /// Sees the machine once an input and its outputs are handled, with the clock
    /// its times are on.
    fn settled(&mut self, _machine: &M, _clock: &Clock) {}
    /// Hears that the store refused the caller itself (401, 403): no retry mends it.
    fn denied(&mut self, _error: &StoreError) {}
}

/// The store the loop sends requests to, and how it tells time.
pub(crate) struct Link<St> {
    pub store: St,
    pub clock: Clock,
    /// How long a request may take before its outcome counts as unknown.
    pub timeout: Duration,
}

type Answered<M> = (
    RequestId,
    <M as StoreClient>::Intent,
    Response<<M as StoreClient>::Doc>,
);
type InFlight<M> = Pin<Box<dyn Future<Output = Answered<M>> + Send>>;

/// Drives the machine in `seat` until nothing can wake it again or it has finished:
/// `first` goes in (a client's command), whatever the machine has to say goes out,
/// then each input from `events`, each answer and each due tick goes in.
///
/// A refusal of `first` ends the drive at once with its error, having changed
/// nothing; later refusals go to the hands. Nothing can wake the machine again when
/// no request is in flight, `events` has ended and it keeps no timer: that is how a
/// client's command ends. A processor's events never end, so it runs until its host
/// has finished and the requests still in flight have been answered.
///
/// Each input and the outputs it leads to are handled under one hold of the seat,
/// so that clones of a client running commands at once never take each other's.
pub(crate) async fn drive<M, St, H>(
    mut seat: impl Seat<M>,
    link: &Link<St>,
    mut first: Option<M::Input>,
    mut events: impl Stream<Item = M::Input> + Unpin,
    hands: &mut H,
) -> Result<(), M::Error>
where
    M: StoreClient,
    St: Store<M::Doc>,
    H: Hands<M>,
{
    let mut wire: FuturesUnordered<InFlight<M>> = FuturesUnordered::new();
    let mut events_open = true;
    let mut input: Option<M::Input> = None;
    loop {
        let step = seat.with(|machine| {
            let mut feeding = Feeding {
                machine: &mut *machine,
                link,
                wire: &mut wire,
                hands: &mut *hands,
            };
            if let Some(first) = first.take()
                && let Err(halt) = drive::feed(&mut feeding, [first])
            {
                return Err(halt);
            }
            if let Some(input) = input.take()
                && let Err(Halt::Refused(error)) = drive::feed(&mut feeding, [input])
            {
                hands.refused(error);
            }
            hands.settled(machine, &link.clock);
            let wake = M::tick().and(machine.poll_timeout());
            if wake.is_some()
                && tracing::enabled!(tracing::Level::TRACE)
                && let Some(reason) = machine.wake_reason()
            {
                tracing::trace!(at = ?wake, %reason, "next wake-up");
            }
            Ok((machine.is_finished(), wake))
        });
        let (finished, wake) = match step {
            Ok(step) => step,
            Err(Halt::Refused(error)) => return Err(error),
            // The seat always holds the machine.
            Err(Halt::Gone) => return Ok(()),
        };
        // A finished host ignores its answers, but the requests run to the end.
        if wire.is_empty() && (finished || (!events_open && wake.is_none())) {
            return Ok(());
        }
        let wake = wake.map(|at| link.clock.instant_of(at));
        input = tokio::select! {
            Some((id, intent, response)) = wire.next(), if !wire.is_empty() => {
                hands.answered(&intent, response.charge);
                if let Err(error) = &response.result
                    && error.is_denied()
                {
                    hands.denied(error);
                }
                Some(M::response(id, response.result))
            }
            event = events.next(), if events_open => {
                events_open = event.is_some();
                event
            }
            () = sleep_until(wake) => M::tick(),
        };
    }
}

/// The machine under one hold of its seat, as the engine's synchronous loop drives
/// it: its requests go on the wire, the rest to the hands.
struct Feeding<'a, M: StoreClient, St, H> {
    machine: &'a mut M,
    link: &'a Link<St>,
    wire: &'a mut FuturesUnordered<InFlight<M>>,
    hands: &'a mut H,
}

impl<M, St, H> Driver<M> for Feeding<'_, M, St, H>
where
    M: StoreClient,
    St: Store<M::Doc>,
    H: Hands<M>,
{
    fn step(&mut self, input: M::Input) -> Option<Stepped<M>> {
        self.hands.input(&input);
        Some(drive::step(self.machine, self.link.clock.now(), input))
    }

    fn send(&mut self, request: Request<M::Doc, M::Intent>, _next: &mut VecDeque<M::Input>) {
        self.wire.push(send::<M, St>(self.link, request));
    }

    fn output(&mut self, output: M::Output, _next: &mut VecDeque<M::Input>) {
        self.hands.output(output);
    }

    fn refused(&mut self, error: M::Error) {
        self.hands.refused(error);
    }
}

/// One request on its way to the store, within the request timeout.
fn send<M: StoreClient, St: Store<M::Doc>>(
    link: &Link<St>,
    request: Request<M::Doc, M::Intent>,
) -> InFlight<M> {
    let Request { id, intent, op, .. } = request;
    let store = link.store.clone();
    let timeout = link.timeout;
    let span = tracing::debug_span!("request", ?intent, %id);
    Box::pin(
        async move {
            let response = execute_within(&store, op, timeout).await;
            (id, intent, response)
        }
        .instrument(span),
    )
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
