//! The contract between every state machine of the engine and the drivers around it
//! (the model checker, the simulator, the async runtime), in the manner of
//! quinn-proto's `Connection`: inputs in, outputs out, and when to wake it next.

use crate::ids::RequestId;
use crate::lock::LockToken;
use crate::store::{Document, Op, Reply, StoreError};
use crate::time::{LocalTime, Now};
use std::fmt::Debug;

/// A sans-IO state machine.
///
/// A driver feeds it inputs with [`handle_input`](Self::handle_input), each with the
/// time it happened, then drains [`poll_output`](Self::poll_output) and, if it has
/// nothing else to feed, waits until [`poll_timeout`](Self::poll_timeout) and feeds
/// the machine's tick input. The partition-lease host, the queue consumer and the
/// item leaser all implement it.
///
/// ```
/// use leasehold_engine::lease::{Input, LeaseConfig, LeaseHost};
/// use leasehold_engine::{HostId, Incarnation, LeaseToken, LocalTime, Machine, Now, WallTime};
///
/// fn outputs<M: Machine>(machine: &mut M, now: Now, input: M::Input) -> Vec<M::Output> {
///     let _refused = machine.handle_input(now, input);
///     std::iter::from_fn(|| machine.poll_output()).collect()
/// }
///
/// let config = LeaseConfig { partitions: vec![LeaseToken::from("0")], ..LeaseConfig::default() };
/// let mut host = LeaseHost::new(HostId::from("a"), config, Incarnation(0)).unwrap();
/// let now = Now::new(LocalTime::ZERO, WallTime(0));
/// assert!(!outputs(&mut host, now, Input::Tick).is_empty()); // a scan, a heartbeat
/// // Nothing is due until the store answers what is in flight.
/// assert_eq!(Machine::poll_timeout(&host), None);
/// ```
///
/// A machine and everything it exchanges with its driver are plain data that can
/// cross threads, so that any driver may carry them between tasks (the async runtime
/// does) without a bound of its own.
pub trait Machine: Send + 'static {
    /// What happens to it.
    type Input: Send + 'static;
    /// What it asks its driver to do, or tells it.
    type Output: Send + 'static;
    /// Why it refuses an input; a refused input changes nothing but the clock.
    type Error: std::error::Error + Send + 'static;

    /// Handles one input at time `now`.
    fn handle_input(&mut self, now: Now, input: Self::Input) -> Result<(), Self::Error>;

    /// The next output, if any.
    fn poll_output(&mut self) -> Option<Self::Output>;

    /// When it next needs a tick, on its local clock; `None` if only an input can
    /// give it something to do.
    fn poll_timeout(&self) -> Option<LocalTime>;

    /// The input that tells it time has passed, if it keeps timers; a machine that
    /// acts only when asked has none, and its `poll_timeout` is always `None`.
    fn tick() -> Option<Self::Input>
    where
        Self: Sized,
    {
        None
    }

    /// Whether it has nothing more to do, ever (a host that has shut down): its
    /// driver may stop once the requests it has in flight are answered.
    fn is_finished(&self) -> bool {
        false
    }

    /// Why it asks for the tick `poll_timeout` gives, in words, where it names its
    /// timers, so that a driver's trace can say why it woke the machine.
    fn wake_reason(&self) -> Option<String> {
        None
    }
}

/// A store request, whatever the machine that sends it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request<D, I> {
    /// Echo this in the answer.
    pub id: RequestId,
    /// Why it is sent.
    pub intent: I,
    /// The lock it acts under, for writes by a lock holder.
    pub lock: Option<LockToken>,
    /// The operation.
    pub op: Op<D>,
}

/// A [`Machine`] whose effects are store requests: which of its outputs are requests,
/// and the input that carries a store's answer back. The model checker's world and
/// the adapters' driving loop route requests through this rather than restating it.
///
/// ```
/// use leasehold_engine::queue::{Consumer, ConsumerConfig, Input, QueueName};
/// use leasehold_engine::store::Container;
/// use leasehold_engine::{HostId, Incarnation, LocalTime, Machine, Now, StoreClient, WallTime};
///
/// let config = ConsumerConfig::new(QueueName::new("orders").unwrap());
/// let mut consumer = Consumer::new(HostId::from("c"), Incarnation(0), config).unwrap();
/// let mut store = Container::new();
/// let now = Now::new(LocalTime::ZERO, WallTime(0));
/// let mut input = Some(Input::Dequeue { max: 10 });
/// let mut requests = 0;
/// while let Some(next) = input.take() {
///     consumer.handle_input(now, next).unwrap();
///     while let Some(output) = consumer.poll_output() {
///         if let Ok(request) = Consumer::request(output) {
///             requests += 1;
///             input = Some(Consumer::response(request.id, store.execute(request.op)));
///         }
///     }
/// }
/// assert!(requests > 0);
/// ```
pub trait StoreClient: Machine {
    /// The documents it works on.
    type Doc: Document + Send + Sync + 'static;
    /// Why it sends a request.
    type Intent: Debug + Send + 'static;

    /// The request `output` carries, or the output back if it is something else.
    fn request(output: Self::Output) -> Result<Request<Self::Doc, Self::Intent>, Self::Output>;

    /// The input that carries the store's answer to request `id`.
    fn response(id: RequestId, result: Result<Reply<Self::Doc>, StoreError>) -> Self::Input;
}

/// Every machine of the engine keeps the contract the same way: its own methods do
/// the work, one output variant carries its requests and one input variant their
/// answers.
macro_rules! machine {
    (
        $machine:ty, $module:ident, doc: $doc:ty, intent: $intent:ty, error: $error:ty,
        timeout: |$me:pat_param| $timeout:expr, lock: |$request:ident| $lock:expr
        $(, tick: $tick:expr, finished: |$fme:pat_param| $finished:expr,
        reason: |$rme:pat_param| $reason:expr)? $(,)?
    ) => {
        impl Machine for $machine {
            type Input = crate::$module::Input;
            type Output = crate::$module::Output;
            type Error = $error;

            fn handle_input(&mut self, now: Now, input: Self::Input) -> Result<(), Self::Error> {
                <$machine>::handle_input(self, now, input)
            }

            fn poll_output(&mut self) -> Option<Self::Output> {
                <$machine>::poll_output(self)
            }

            fn poll_timeout(&self) -> Option<LocalTime> {
                let $me = self;
                $timeout
            }

            $(
                fn tick() -> Option<Self::Input> {
                    $tick
                }

                fn is_finished(&self) -> bool {
                    let $fme = self;
                    $finished
                }

                fn wake_reason(&self) -> Option<String> {
                    let $rme = self;
                    $reason
                }
            )?
        }

        impl StoreClient for $machine {
            type Doc = $doc;
            type Intent = $intent;

            fn request(
                output: Self::Output,
            ) -> Result<Request<Self::Doc, Self::Intent>, Self::Output> {
                match output {
                    crate::$module::Output::Request($request) => Ok(Request {
                        id: $request.id,
                        intent: $request.intent,
                        lock: $lock,
                        op: $request.op,
                    }),
                    other => Err(other),
                }
            }

            fn response(
                id: RequestId,
                result: Result<Reply<Self::Doc>, StoreError>,
            ) -> Self::Input {
                crate::$module::Input::Response { id, result }
            }
        }
    };
}

machine!(
    crate::lease::LeaseHost, lease,
    doc: crate::lease::Record, intent: crate::lease::Intent, error: crate::lease::InputError,
    timeout: |host| host.poll_timeout(),
    // Leases are fenced by etag and epoch, not by a lock.
    lock: |request| None,
    tick: Some(crate::lease::Input::Tick),
    finished: |host| crate::lease::LeaseHost::is_finished(host),
    reason: |host| host.poll_timer().map(|(_, timer)| timer.to_string()),
);

machine!(
    crate::queue::Consumer, queue,
    doc: crate::queue::Message, intent: crate::queue::QueueIntent, error: crate::queue::QueueError,
    // The consumer acts only when asked: locks are renewed by explicit commands.
    timeout: |_| None,
    lock: |request| request.lock,
);

machine!(
    crate::item_lease::Leaser, item_lease,
    doc: crate::item_lease::Item, intent: crate::item_lease::ItemIntent,
    error: crate::item_lease::ItemError,
    // The leaser acts only when asked.
    timeout: |_| None,
    lock: |request| request.lock,
);

#[cfg(test)]
mod tests {
    use super::Machine;
    use crate::item_lease::Leaser;
    use crate::lease::{Input, LeaseHost};
    use crate::queue::Consumer;

    #[test]
    fn only_the_partition_lease_host_keeps_timers() {
        assert_eq!(<LeaseHost as Machine>::tick(), Some(Input::Tick));
        assert!(<Consumer as Machine>::tick().is_none());
        assert!(<Leaser as Machine>::tick().is_none());
    }
}
