//! The one loop that runs a [`StoreClient`] for every driver: the model checker,
//! both simulator worlds and the benchmarks, and the async runtime, which feeds each
//! input, answer and tick through it between its awaits. What they
//! differ in (where requests go, what a handler answers, the clock, a memo of
//! transitions) is the [`Driver`] they hand it; the order in which inputs go in and
//! outputs come out is the loop's, so that no two drivers feed a machine differently.

use crate::machine::{Machine, Request, StoreClient};
use crate::time::Now;
use std::collections::VecDeque;

/// What a machine did with one input.
#[derive(Debug)]
pub struct Stepped<M: Machine> {
    /// Its outputs, in the order it gave them.
    pub outputs: Vec<M::Output>,
    /// Why it refused the input, if it did; a refused input changes nothing but the
    /// clock.
    pub refused: Option<M::Error>,
}

/// Hands `machine` one input at `now` and collects every output it then has.
///
/// ```
/// use leasehold_engine::drive::step;
/// use leasehold_engine::lease::{Input, LeaseConfig, LeaseHost};
/// use leasehold_engine::{HostId, Incarnation, LeaseToken, LocalTime, Now, WallTime};
///
/// let config = LeaseConfig { partitions: vec![LeaseToken::from("0")], ..LeaseConfig::default() };
/// let mut host = LeaseHost::new(HostId::from("a"), config, Incarnation(0)).unwrap();
/// let stepped = step(&mut host, Now::new(LocalTime::ZERO, WallTime(0)), Input::Tick);
/// assert!(stepped.refused.is_none());
/// assert!(!stepped.outputs.is_empty()); // a scan of the table, a heartbeat
/// ```
pub fn step<M: Machine>(machine: &mut M, now: Now, input: M::Input) -> Stepped<M> {
    let refused = machine.handle_input(now, input).err();
    let outputs = std::iter::from_fn(|| machine.poll_output()).collect();
    Stepped { outputs, refused }
}

/// What a synchronous driver does around the loop of [`feed`].
pub trait Driver<M: StoreClient> {
    /// Hands `input` to the machine at the driver's time, usually with [`step`];
    /// `None` if the machine is gone (its host crashed while it was being fed).
    fn step(&mut self, input: M::Input) -> Option<Stepped<M>>;

    /// Carries a store request. An answer known at once goes into `next`.
    fn send(&mut self, request: Request<M::Doc, M::Intent>, next: &mut VecDeque<M::Input>);

    /// Acts on an output that is not a store request (a handler to start or stop, a
    /// delivery); an input it answers with at once goes into `next`.
    fn output(&mut self, output: M::Output, next: &mut VecDeque<M::Input>);

    /// Hears that the machine refused an input the driver answered with.
    fn refused(&mut self, _error: M::Error) {}

    /// Runs once every output of one input has been routed: a driver that serves
    /// requests only after reacting to every other output does it here.
    fn routed(&mut self, _next: &mut VecDeque<M::Input>) {}
}

/// Why [`feed`] stopped before every input was handled.
#[derive(Debug, PartialEq, Eq)]
pub enum Halt<E> {
    /// The machine refused an input the caller gave; nothing after it went in.
    Refused(E),
    /// The machine is gone.
    Gone,
}

/// Feeds the machine `first`, routes what it outputs, and feeds every input the
/// driver answers with, oldest first, until none is left.
///
/// If the machine refuses one of the caller's inputs, the caller's inputs after it do
/// not go in, but the answers already on their way still do, and the feed then ends
/// with the refusal. Refusals of the driver's own answers go to [`Driver::refused`].
///
/// ```
/// use leasehold_engine::drive::{Driver, Stepped, feed, step};
/// use leasehold_engine::queue::{Consumer, ConsumerConfig, Input, Message, Output, QueueName};
/// use leasehold_engine::store::Container;
/// use leasehold_engine::{HostId, Incarnation, LocalTime, Now, Request, StoreClient, WallTime};
/// use std::collections::VecDeque;
///
/// struct Alone {
///     consumer: Consumer,
///     store: Container<Message>,
///     sent: usize,
/// }
///
/// type Intent = <Consumer as StoreClient>::Intent;
///
/// impl Driver<Consumer> for Alone {
///     fn step(&mut self, input: Input) -> Option<Stepped<Consumer>> {
///         Some(step(&mut self.consumer, Now::new(LocalTime::ZERO, WallTime(0)), input))
///     }
///     fn send(&mut self, request: Request<Message, Intent>, next: &mut VecDeque<Input>) {
///         self.sent += 1;
///         next.push_back(Consumer::response(request.id, self.store.execute(request.op)));
///     }
///     fn output(&mut self, _output: Output, _next: &mut VecDeque<Input>) {}
/// }
///
/// let config = ConsumerConfig::new(QueueName::new("orders").unwrap());
/// let consumer = Consumer::new(HostId::from("c"), Incarnation(0), config).unwrap();
/// let mut alone = Alone { consumer, store: Container::new(), sent: 0 };
/// feed(&mut alone, [Input::Dequeue { max: 10 }]).unwrap();
/// assert!(alone.sent > 0);
/// ```
pub fn feed<M, D>(
    driver: &mut D,
    first: impl IntoIterator<Item = M::Input>,
) -> Result<(), Halt<M::Error>>
where
    M: StoreClient,
    D: Driver<M>,
{
    let mut inputs: VecDeque<M::Input> = first.into_iter().collect();
    // The caller's inputs stay at the front: answers join at the back.
    let mut from_caller = inputs.len();
    let mut refusal = None;
    while let Some(input) = inputs.pop_front() {
        let own = from_caller > 0;
        from_caller = from_caller.saturating_sub(1);
        let stepped = driver.step(input).ok_or(Halt::Gone)?;
        for output in stepped.outputs {
            match M::request(output) {
                Ok(request) => driver.send(request, &mut inputs),
                Err(output) => driver.output(output, &mut inputs),
            }
        }
        driver.routed(&mut inputs);
        match stepped.refused {
            Some(error) if own => {
                inputs.drain(..from_caller);
                from_caller = 0;
                refusal = Some(error);
            }
            Some(error) => driver.refused(error),
            None => {}
        }
    }
    refusal.map_or(Ok(()), |error| Err(Halt::Refused(error)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Message;
    use crate::queue::{Consumer, ConsumerConfig, Input, Output, QueueName};
    use crate::store::Container;
    use crate::{HostId, Incarnation, LocalTime, WallTime};

    type Intent = <Consumer as StoreClient>::Intent;

    /// A consumer whose store answers at once, with a log of what went in.
    struct Logged {
        consumer: Option<Consumer>,
        store: Container<Message>,
        fed: Vec<String>,
        refused: usize,
        crash_after: Option<usize>,
    }

    impl Logged {
        fn new() -> Logged {
            let config = ConsumerConfig::new(QueueName::new("orders").unwrap());
            let consumer = Consumer::new(HostId::from("c"), Incarnation(0), config).unwrap();
            Logged {
                consumer: Some(consumer),
                store: Container::new(),
                fed: Vec::new(),
                refused: 0,
                crash_after: None,
            }
        }
    }

    impl Driver<Consumer> for Logged {
        fn step(&mut self, input: Input) -> Option<Stepped<Consumer>> {
            if self.crash_after == Some(self.fed.len()) {
                self.consumer = None;
            }
            let consumer = self.consumer.as_mut()?;
            self.fed.push(match &input {
                Input::Response { .. } => "answer".into(),
                other => format!("{other:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .into(),
            });
            Some(step(
                consumer,
                Now::new(LocalTime::ZERO, WallTime(0)),
                input,
            ))
        }

        fn send(&mut self, request: Request<Message, Intent>, next: &mut VecDeque<Input>) {
            next.push_back(Consumer::response(
                request.id,
                self.store.execute(request.op),
            ));
        }

        fn output(&mut self, _output: Output, _next: &mut VecDeque<Input>) {}

        fn refused(&mut self, _error: crate::queue::QueueError) {
            self.refused += 1;
        }
    }

    #[test]
    fn the_callers_inputs_go_in_before_the_answers_they_lead_to() {
        let mut driver = Logged::new();
        feed(
            &mut driver,
            [Input::Dequeue { max: 1 }, Input::Sweep { max: 1 }],
        )
        .unwrap();
        assert_eq!(driver.fed[..2], ["Dequeue", "Sweep"]);
        assert!(driver.fed[2..].iter().all(|f| f == "answer"));
        assert!(driver.fed.len() > 2);
    }

    #[test]
    fn a_refused_input_of_the_caller_keeps_the_rest_of_the_callers_out_but_not_the_answers() {
        let mut driver = Logged::new();
        // A second dequeue while the first runs is refused.
        let fed = feed(
            &mut driver,
            [
                Input::Dequeue { max: 1 },
                Input::Dequeue { max: 1 },
                Input::Sweep { max: 1 },
            ],
        );
        assert!(matches!(fed, Err(Halt::Refused(_))), "{fed:?}");
        assert_eq!(driver.fed[..2], ["Dequeue", "Dequeue"]);
        assert!(!driver.fed.iter().any(|f| f == "Sweep"));
        assert!(driver.fed[2..].iter().all(|f| f == "answer"));
        assert!(
            driver.fed.len() > 2,
            "the first dequeue's answers still went in"
        );
        assert_eq!(driver.refused, 0);
    }

    #[test]
    fn a_machine_gone_mid_feed_ends_it() {
        let mut driver = Logged::new();
        driver.crash_after = Some(1);
        let fed = feed(&mut driver, [Input::Dequeue { max: 1 }]);
        assert_eq!(fed.err().map(|h| matches!(h, Halt::Gone)), Some(true));
        assert_eq!(driver.fed, ["Dequeue"]);
    }
}
