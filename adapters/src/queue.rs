//! The work-queue client: the engine's queue consumer on an async store.

use crate::clock::{Clock, fresh_incarnation};
use crate::exchange::{Checked, Exchange};
use crate::store::{ContainerError, Store};
use leasehold_engine::queue::{
    Consumer, ConsumerConfig, ConsumerConfigError, Delivery, Input, Message, MessageName,
    NameError, Output, QueueError, QueueIntent,
};
use leasehold_engine::store::Stored;
use leasehold_engine::{DocId, HostId};
use std::time::Duration;

/// Why a queue client refused to start or an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueClientError {
    /// The consumer settings cannot work.
    #[error("invalid queue settings: {0}")]
    Config(#[from] ConsumerConfigError),
    /// The store's container cannot hold the queue's messages safely (checked
    /// before the first request).
    #[error(transparent)]
    Container(#[from] ContainerError),
    /// The message name is not one the store can hold.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The operation failed; the message is as the store has it.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The consumer reported no outcome: a bug in leasehold, reported rather than
    /// panicked on.
    #[error("the queue consumer reported no outcome for {0:?}; please report this bug")]
    NoOutcome(QueueIntent),
}

impl From<Checked<QueueError>> for QueueClientError {
    fn from(failed: Checked<QueueError>) -> Self {
        match failed {
            Checked::Container(e) => QueueClientError::Container(e),
            Checked::Engine(e) => QueueClientError::Queue(e),
        }
    }
}

/// What an enqueue found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// The message is stored.
    Stored,
    /// A message of this name was already stored, typically by an earlier attempt of
    /// the same enqueue whose outcome was unknown; nothing was written.
    AlreadyPresent,
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Part-set heads read.
    pub read: usize,
    /// Part sets removed, parts and head.
    pub swept: usize,
}

/// What a dequeue achieved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dequeued {
    /// Messages now locked by this client, oldest visible first.
    pub deliveries: Vec<Delivery>,
    /// Poison messages (delivered `max_dequeue_count` times) moved to the dead
    /// letters instead of delivered again, with the reason written on them. They take
    /// no place among the `max` deliveries: the dequeue reads again for the room they
    /// left.
    pub dead_lettered: Vec<(DocId, String)>,
}

/// A consumer (and producer) of one queue, as DurableTask's Cosmos DB provider keeps
/// queues: enqueue, dequeue under a lock, then complete, abandon or dead-letter.
///
/// Every decision is the engine's [`Consumer`]; this client only carries its requests
/// to the store. Clones share one consumer. Each operation runs to the end even if
/// its future is dropped, so a cancelled call never leaves the consumer half-way.
///
/// ```
/// use leasehold_adapters::{MemoryStore, QueueClient};
/// use leasehold_engine::queue::{ConsumerConfig, QueueName};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::new();
/// let config = ConsumerConfig::new(QueueName::new("orders")?);
/// let queue = QueueClient::new(store, "worker-1", config)?;
/// queue.enqueue("order-17", "{\"qty\":3}", Duration::ZERO).await?;
/// let batch = queue.dequeue(10).await?;
/// for delivery in &batch.deliveries {
///     // ... act on delivery.payload while queue.has_authority(delivery) ...
///     queue.complete(delivery).await?;
/// }
/// # Ok(())
/// # }
/// ```
pub struct QueueClient<St> {
    exchange: Exchange<Consumer, St>,
    /// One dequeue at a time: the consumer refuses a second while one runs.
    dequeuing: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// One sweep at a time, likewise.
    sweeping: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl<St: Clone> Clone for QueueClient<St> {
    fn clone(&self) -> Self {
        QueueClient {
            exchange: self.exchange.clone(),
            dequeuing: self.dequeuing.clone(),
            sweeping: self.sweeping.clone(),
        }
    }
}

impl<St: Store<Message>> QueueClient<St> {
    /// A client named `consumer` of `config.queue` on `store`. The name must be
    /// unique among running consumers; each client is a new life of it.
    pub fn new(
        store: St,
        consumer: impl Into<HostId>,
        config: ConsumerConfig,
    ) -> Result<Self, QueueClientError> {
        let consumer = Consumer::new(consumer.into(), fresh_incarnation(), config)?;
        Ok(QueueClient {
            exchange: Exchange::new(consumer, store, Clock::system(), Duration::from_secs(10)),
            dequeuing: Default::default(),
            sweeping: Default::default(),
        })
    }

    /// Uses `clock` instead of the system's (for tests on tokio's paused clock). Call
    /// it before the first operation.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.exchange.clock = clock;
        self
    }

    /// Gives up on a store request after `timeout` (10 s by default). The outcome of
    /// a request given up on is unknown, and treated as such.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.exchange.timeout = timeout;
        self
    }

    /// Stores message `name`, visible after `delay`. The name is an idempotency key:
    /// enqueueing it again while it is stored writes nothing.
    ///
    /// A payload too large for one document (Cosmos DB's 2 MB) is written as a part
    /// set, one part per request, and the message last, up to the queue's
    /// `large.max_bytes` (64 MiB by default); a dequeue delivers it whole or not at
    /// all. An enqueue that fails half-way leaves parts that [`sweep`](Self::sweep)
    /// removes.
    pub async fn enqueue(
        &self,
        name: &str,
        payload: impl Into<String>,
        delay: Duration,
    ) -> Result<Enqueued, QueueClientError> {
        let name = MessageName::new(name)?;
        let input = Input::Enqueue {
            name,
            payload: payload.into(),
            delay: delay.into(),
        };
        for out in self.exchange.checked_call(input, None).await? {
            match out {
                Output::Enqueued {
                    already_present, ..
                } => {
                    return Ok(if already_present {
                        Enqueued::AlreadyPresent
                    } else {
                        Enqueued::Stored
                    });
                }
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(QueueClientError::NoOutcome(QueueIntent::Enqueue))
    }

    /// Locks and returns up to `max` deliverable messages, oldest visible first. A
    /// message another consumer locked is delivered only once its lock has been seen
    /// unchanged for the lock's duration plus the drift allowance, so calling this
    /// regularly is what lets a crashed consumer's messages come back.
    pub async fn dequeue(&self, max: usize) -> Result<Dequeued, QueueClientError> {
        let mut dequeued = Dequeued::default();
        let input = Input::Dequeue { max };
        let turn = Some(self.dequeuing.clone());
        for out in self.exchange.checked_call(input, turn).await? {
            match out {
                Output::Delivered(d) => dequeued.deliveries.push(d),
                Output::DeadLettered { message, reason } => {
                    dequeued.dead_lettered.push((message, reason));
                }
                Output::Failed {
                    intent: QueueIntent::Scan,
                    error,
                    ..
                } => return Err(error.into()),
                _ => {}
            }
        }
        Ok(dequeued)
    }

    /// Deletes a delivered message. `LockLost` means another consumer took it over
    /// (this one held it past its lock): nothing was changed. Retried after an
    /// unknown outcome, a completion that finds the message gone is confirmed while
    /// its lock still excludes every other consumer; later it answers `Gone`, for
    /// then its own earlier attempt and another consumer's are both possible.
    pub async fn complete(&self, delivery: &Delivery) -> Result<(), QueueClientError> {
        let input = Input::Complete(delivery.id.clone());
        self.settle(input, QueueIntent::Complete).await
    }

    /// Gives a delivered message back, visible again after `delay`.
    pub async fn abandon(
        &self,
        delivery: &Delivery,
        delay: Duration,
    ) -> Result<(), QueueClientError> {
        let input = Input::Abandon {
            message: delivery.id.clone(),
            delay: delay.into(),
        };
        self.settle(input, QueueIntent::Abandon).await
    }

    /// Gives up on a delivered message for good, keeping it with `reason` for
    /// inspection ([`dead_letters`](Self::dead_letters)).
    pub async fn dead_letter(
        &self,
        delivery: &Delivery,
        reason: impl Into<String>,
    ) -> Result<(), QueueClientError> {
        let input = Input::DeadLetter {
            message: delivery.id.clone(),
            reason: reason.into(),
        };
        self.settle(input, QueueIntent::DeadLetter).await
    }

    /// Extends the lock on a delivered message, and its authority with it.
    pub async fn renew(&self, delivery: &mut Delivery) -> Result<(), QueueClientError> {
        for out in self
            .exchange
            .call(Input::Renew(delivery.id.clone()))
            .await?
        {
            match out {
                Output::Renewed {
                    authority_until, ..
                } => {
                    delivery.authority_until = authority_until;
                    return Ok(());
                }
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(QueueClientError::NoOutcome(QueueIntent::Renew))
    }

    /// Whether this client may still act on `delivery`: its lock is held and has not
    /// run out by this client's clock. Act on a message only while this is true.
    pub fn has_authority(&self, delivery: &Delivery) -> bool {
        let now = self.exchange.clock.now().local;
        self.exchange
            .with_machine(|c| c.has_authority(&delivery.id, now))
    }

    /// Up to `max` of the queue's dead letters, ordered by id, each with the etag that
    /// [`requeue`](Self::requeue) needs. Dead letters live under their own ids, so
    /// listing them reads only them, and no dequeue ever reads them.
    pub async fn dead_letters(&self, max: usize) -> Result<Vec<Stored<Message>>, QueueClientError> {
        for out in self
            .exchange
            .checked_call(Input::ListDeadLetters { max }, None)
            .await?
        {
            match out {
                Output::DeadLetters(found) => return Ok(found),
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(QueueClientError::NoOutcome(QueueIntent::ListDeadLetters))
    }

    /// Moves a dead letter, as [`dead_letters`](Self::dead_letters) listed it, back
    /// into the queue as a new pending message, visible now, with its deliveries
    /// counted afresh. One transactional batch: nothing changes if the dead letter
    /// changed since it was listed ([`QueueError::DeadLetterChanged`]) or a live
    /// message has its name ([`QueueError::NameTaken`]). Returns the live message's id.
    pub async fn requeue(&self, dead_letter: &Stored<Message>) -> Result<DocId, QueueClientError> {
        for out in self
            .exchange
            .call(Input::Requeue(dead_letter.clone()))
            .await?
        {
            match out {
                Output::Requeued { message, .. } => return Ok(message),
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(QueueClientError::NoOutcome(QueueIntent::Requeue))
    }

    /// Removes part sets that large enqueues left behind (a producer stopped half-way,
    /// a completion cut short): reads up to `max` heads, after those the previous
    /// sweep read, and removes each that this client has seen unchanged for the
    /// queue's `large.orphan_after` (plus the drift allowance) and that no message or
    /// dead letter names. Call it on a cadence shorter than the bound, from one
    /// client or several; a set is removed by a client that watched it that long.
    ///
    /// ```
    /// use leasehold_adapters::{MemoryStore, QueueClient};
    /// use leasehold_engine::queue::{ConsumerConfig, QueueName};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let queue = QueueClient::new(MemoryStore::new(), "sweeper", ConsumerConfig::new(QueueName::new("orders")?))?;
    /// let swept = queue.sweep(100).await?;
    /// assert_eq!((swept.read, swept.swept), (0, 0));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn sweep(&self, max: usize) -> Result<Swept, QueueClientError> {
        let turn = Some(self.sweeping.clone());
        for out in self
            .exchange
            .checked_call(Input::Sweep { max }, turn)
            .await?
        {
            if let Output::SweepFinished { read, swept } = out {
                return Ok(Swept { read, swept });
            }
        }
        Err(QueueClientError::NoOutcome(QueueIntent::Sweep))
    }

    /// The store, for its request charges.
    pub fn store(&self) -> &St {
        &self.exchange.store
    }

    async fn settle(&self, input: Input, intent: QueueIntent) -> Result<(), QueueClientError> {
        for out in self.exchange.checked_call(input, None).await? {
            match out {
                Output::Completed(_) | Output::Abandoned(_) | Output::DeadLettered { .. } => {
                    return Ok(());
                }
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(QueueClientError::NoOutcome(intent))
    }
}
