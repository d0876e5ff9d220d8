//! The work-queue client: the engine's queue consumer on an async store.

use crate::claim::{ClaimError, ClaimStore};
use crate::clock::{Clock, fresh_incarnation};
use crate::exchange::{Checked, Client, Exchange, detach};
use crate::store::{ContainerError, Store};
use leasehold_engine::queue::{
    ClaimKey, Consumer, ConsumerConfig, ConsumerConfigError, Delivery, Input, Message, MessageName,
    NameError, Output, QueueError, QueueIntent, payload_hash,
};
use leasehold_engine::store::Stored;
use leasehold_engine::{DocId, HostId};
use std::sync::Arc;
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
    /// The claim store failed: the enqueue stored nothing that a dequeue sees, and
    /// what the claim store may hold of it is swept.
    #[error(transparent)]
    Claim(#[from] ClaimError),
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
    dequeuing: Arc<tokio::sync::Mutex<()>>,
    /// One sweep at a time, likewise.
    sweeping: Arc<tokio::sync::Mutex<()>>,
    claims: Option<ClaimCheck>,
}

/// Where payloads past `above` bytes go.
#[derive(Clone)]
struct ClaimCheck {
    store: Arc<dyn ClaimStore>,
    above: usize,
}

impl<St: Clone> Clone for QueueClient<St> {
    fn clone(&self) -> Self {
        QueueClient {
            exchange: self.exchange.clone(),
            dequeuing: self.dequeuing.clone(),
            sweeping: self.sweeping.clone(),
            claims: self.claims.clone(),
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
            exchange: Exchange::new(
                consumer,
                store,
                Clock::system(),
                crate::store::REQUEST_TIMEOUT,
            ),
            dequeuing: Default::default(),
            sweeping: Default::default(),
            claims: None,
        })
    }

    /// Keeps payloads longer than `above` bytes in `store` instead of Cosmos DB, the
    /// message carrying only their key, length and hash ([`leasehold_engine::queue::claim`]):
    /// an enqueue stores the payload before the message exists, a dequeue fetches and
    /// checks it before delivering, a completion deletes it, and
    /// [`sweep`](Self::sweep) deletes what enqueues and completions cut short left
    /// behind. Needs the queue's `large` settings, whose `orphan_after` bounds that.
    ///
    /// Every client of the queue that dequeues needs the claim store: one without it
    /// gives a claim-checked message back at once, undelivered, as it does when the
    /// claim store fails to answer. Each such give-back counts as a delivery, so a
    /// message given back `max_dequeue_count` times goes to the dead letters as poison
    /// ([`requeue`](Self::requeue) it once the claim store is back). Calls to the
    /// claim store are given up on after the request timeout.
    ///
    /// ```
    /// use leasehold_adapters::{MemoryClaims, MemoryStore, QueueClient};
    /// use leasehold_engine::queue::{ConsumerConfig, QueueName};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let claims = MemoryClaims::default();
    /// let config = ConsumerConfig::new(QueueName::new("orders")?);
    /// let queue = QueueClient::new(MemoryStore::new(), "worker-1", config)?
    ///     .with_claim_check(claims.clone(), 64 * 1024)?;
    /// queue.enqueue("order-17", "x".repeat(100_000), Duration::ZERO).await?;
    /// assert_eq!(claims.keys().len(), 1);
    /// let batch = queue.dequeue(1).await?;
    /// assert_eq!(batch.deliveries[0].payload.len(), 100_000);
    /// queue.complete(&batch.deliveries[0]).await?;
    /// assert!(claims.keys().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_claim_check(
        mut self,
        store: impl ClaimStore,
        above: usize,
    ) -> Result<Self, QueueClientError> {
        if self.exchange.with_machine(|c| c.config().large.is_none()) {
            return Err(QueueError::NoSweep.into());
        }
        self.claims = Some(ClaimCheck {
            store: Arc::new(store),
            above,
        });
        Ok(self)
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
    /// removes. With a [claim check](Self::with_claim_check), a payload past its bound
    /// goes to the claim store instead.
    pub async fn enqueue(
        &self,
        name: &str,
        payload: impl Into<String>,
        delay: Duration,
    ) -> Result<Enqueued, QueueClientError> {
        let name = MessageName::new(name)?;
        let payload = payload.into();
        if let Some(claims) = self.claims.clone().filter(|c| payload.len() > c.above) {
            let this = self.clone();
            let work = async move { this.enqueue_claimed(claims, name, payload, delay).await };
            return detach(work, cancelled).await;
        }
        let input = Input::Enqueue {
            name,
            payload,
            delay: delay.into(),
        };
        enqueued(self.exchange.checked_call(input, None).await?)
    }

    /// The head, then the payload in the claim store, then the message.
    async fn enqueue_claimed(
        &self,
        claims: ClaimCheck,
        name: MessageName,
        payload: String,
        delay: Duration,
    ) -> Result<Enqueued, QueueClientError> {
        let input = Input::EnqueueClaimed {
            name,
            bytes: payload.len() as u64,
            hash: payload_hash(payload.as_bytes()),
            delay: delay.into(),
        };
        let mut key = None;
        for out in self.exchange.checked_call(input, None).await? {
            match out {
                Output::StoreClaim(k) => key = Some(k),
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        let key = key.ok_or(QueueClientError::NoOutcome(QueueIntent::Enqueue))?;
        let put = self.within(claims.store.put(key.clone(), payload)).await;
        let stored = Input::ClaimStored {
            key: key.clone(),
            stored: put.is_ok(),
        };
        let outs = self.exchange.call(stored).await?;
        // A failed put (which may still land), one answered past the head's
        // authority, or a set swept meanwhile: the key is named by nothing, and never
        // will be.
        for out in &outs {
            if let Output::DiscardClaim(key) = out {
                self.discard(key.clone()).await;
            }
        }
        put?;
        enqueued(outs)
    }

    /// A call to the claim store, given up on after the request timeout (its outcome
    /// then unknown, as a store request's).
    async fn within<T>(
        &self,
        call: futures::future::BoxFuture<'_, Result<T, ClaimError>>,
    ) -> Result<T, ClaimError> {
        match tokio::time::timeout(self.exchange.timeout, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ClaimError::new(
                "the claim store did not answer within the request timeout",
            )),
        }
    }

    /// Deletes a key no message will name, if this client has a claim store; a
    /// failure is only logged, for nothing else would remove it.
    async fn discard(&self, key: ClaimKey) {
        let Some(claims) = &self.claims else { return };
        if let Err(e) = self.within(claims.store.delete(key.clone())).await {
            tracing::warn!(%key, error = %e, "a claim-checked payload named by nothing is left in the claim store");
        }
    }

    /// Locks and returns up to `max` deliverable messages, oldest visible first. A
    /// message another consumer locked is delivered only once its lock has been seen
    /// unchanged for the lock's duration plus the drift allowance, so calling this
    /// regularly is what lets a crashed consumer's messages come back.
    pub async fn dequeue(&self, max: usize) -> Result<Dequeued, QueueClientError> {
        let dequeued = self.dequeue_locked(max).await?;
        if dequeued.deliveries.iter().all(|d| d.claim.is_none()) {
            return Ok(dequeued);
        }
        let this = self.clone();
        detach(
            async move { Ok(this.fetch_claims(dequeued).await) },
            cancelled,
        )
        .await
    }

    async fn dequeue_locked(&self, max: usize) -> Result<Dequeued, QueueClientError> {
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

    /// Fetches the claim-checked payloads of `dequeued`'s deliveries. A payload
    /// missing or not as its message says is dead-lettered with the reason, never
    /// delivered; one the claim store could not read is given back, undelivered.
    async fn fetch_claims(&self, dequeued: Dequeued) -> Dequeued {
        let Dequeued {
            deliveries,
            mut dead_lettered,
        } = dequeued;
        let fetches = deliveries.into_iter().map(|d| async move {
            let fetched = match (&d.claim, &self.claims) {
                (None, _) => Ok(Ok(d.payload.clone())),
                (Some(claim), Some(claims)) => self
                    .within(claims.store.get(claim.key.clone()))
                    .await
                    .map(|found| claim.check(found)),
                (Some(_), None) => Err(ClaimError::new("this client has no claim store")),
            };
            (d, fetched)
        });
        let mut out = Vec::new();
        for (mut delivery, fetched) in futures::future::join_all(fetches).await {
            match fetched {
                Ok(Ok(payload)) => {
                    delivery.payload = payload;
                    out.push(delivery);
                }
                Ok(Err(problem)) => {
                    let reason = problem.to_string();
                    match self.dead_letter(&delivery, reason.clone()).await {
                        Ok(()) => dead_lettered.push((delivery.id, reason)),
                        Err(e) => {
                            tracing::warn!(message = %delivery.id, %reason, error = %e, "a message refused for its claim-checked payload could not be dead-lettered")
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(message = %delivery.id, error = %e, "a claim-checked payload could not be fetched; the message is given back");
                    if let Err(e) = self.abandon(&delivery, Duration::ZERO).await {
                        tracing::warn!(message = %delivery.id, error = %e, "could not give the message back; it returns when its lock runs out");
                    }
                }
            }
        }
        Dequeued {
            deliveries: out,
            dead_lettered,
        }
    }

    /// Deletes a delivered message. `LockLost` means another consumer took it over
    /// (this one held it past its lock): nothing was changed. Retried after an
    /// unknown outcome, a completion that finds the message gone is confirmed while
    /// its lock still excludes every other consumer; later it answers `Gone`, for
    /// then its own earlier attempt and another consumer's are both possible.
    /// `NotHeld` means this client no longer holds the delivery's lock (settled,
    /// lost, or let go after its authority ran out, perhaps with the message delivered
    /// again since): this call changed nothing, and a later delivery is left to its
    /// own handler (an earlier attempt whose outcome was unknown may have landed).
    pub async fn complete(&self, delivery: &Delivery) -> Result<(), QueueClientError> {
        let input = Input::Complete(delivery.handle());
        if delivery.claim.is_none() {
            return self.settle(input, QueueIntent::Complete).await;
        }
        // The claim-checked payload is deleted after the message: run both to the end.
        let this = self.clone();
        let work = async move { this.settle(input, QueueIntent::Complete).await };
        detach(work, cancelled).await
    }

    /// Gives a delivered message back, visible again after `delay`.
    pub async fn abandon(
        &self,
        delivery: &Delivery,
        delay: Duration,
    ) -> Result<(), QueueClientError> {
        let input = Input::Abandon {
            delivery: delivery.handle(),
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
            delivery: delivery.handle(),
            reason: reason.into(),
        };
        self.settle(input, QueueIntent::DeadLetter).await
    }

    /// Extends the lock on a delivered message, and its authority with it.
    pub async fn renew(&self, delivery: &mut Delivery) -> Result<(), QueueClientError> {
        for out in self.exchange.call(Input::Renew(delivery.handle())).await? {
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

    /// Whether this client may still act on `delivery`: this delivery's lock is held
    /// (not a later delivery's of the same message) and has not run out by this
    /// client's clock. Act on a message only while this is true.
    pub fn has_authority(&self, delivery: &Delivery) -> bool {
        let now = self.exchange.clock.now().local;
        self.exchange
            .with_machine(|c| c.has_authority(&delivery.handle(), now))
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

    /// Deletes a dead letter for good, as [`dead_letters`](Self::dead_letters) listed
    /// it, with its payload: one transactional batch deletes the dead letter and
    /// frees its large payload's part set, then the parts (or the claim-checked
    /// payload) are deleted. Nothing changes if the dead letter changed since it was
    /// listed ([`QueueError::DeadLetterChanged`]); one found gone
    /// ([`QueueError::DeadLetterGone`]) may have been deleted by an earlier attempt
    /// of this call whose answer was lost, and what it left is the sweep's. Delete
    /// dead letters this way, not by hand: a dead letter deleted by hand leaves its
    /// large payload for good.
    ///
    /// ```
    /// use leasehold_adapters::{MemoryStore, QueueClient};
    /// use leasehold_engine::queue::{ConsumerConfig, QueueName};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let queue = QueueClient::new(MemoryStore::new(), "ops", ConsumerConfig::new(QueueName::new("orders")?))?;
    /// queue.enqueue("bad", "{", Duration::ZERO).await?;
    /// let delivery = queue.dequeue(1).await?.deliveries.remove(0);
    /// queue.dead_letter(&delivery, "unparseable payload").await?;
    /// for letter in queue.dead_letters(10).await? {
    ///     queue.delete_dead_letter(&letter).await?;
    /// }
    /// assert!(queue.dead_letters(10).await?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete_dead_letter(
        &self,
        dead_letter: &Stored<Message>,
    ) -> Result<(), QueueClientError> {
        let input = Input::DeleteDeadLetter(dead_letter.clone());
        let intent = QueueIntent::DeleteDeadLetter;
        if dead_letter.doc.parts.is_none() {
            return self.settle(input, intent).await;
        }
        // Its parts, or its claim-checked payload, go after it: run both to the end.
        let this = self.clone();
        detach(async move { this.settle(input, intent).await }, cancelled).await
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
        let this = self.clone();
        detach(async move { this.sweep_to_end(max).await }, cancelled).await
    }

    /// A sweep, with the claim-checked payloads it drops, holding the sweep's turn
    /// throughout.
    async fn sweep_to_end(&self, max: usize) -> Result<Swept, QueueClientError> {
        let _turn = self.sweeping.clone().lock_owned().await;
        let mut outs = self
            .exchange
            .checked_call(Input::Sweep { max }, None)
            .await?;
        loop {
            let mut drops = Vec::new();
            for out in outs {
                match out {
                    Output::SweepFinished { read, swept } => return Ok(Swept { read, swept }),
                    Output::DropClaim(key) => drops.push(key),
                    _ => {}
                }
            }
            if drops.is_empty() {
                return Err(QueueClientError::NoOutcome(QueueIntent::Sweep));
            }
            outs = self.drop_claims(drops).await?;
        }
    }

    /// Deletes claim-checked payloads as the consumer asked, and tells it how that
    /// went; returns what it did next.
    async fn drop_claims(&self, keys: Vec<ClaimKey>) -> Result<Vec<Output>, QueueClientError> {
        let deletes = keys.into_iter().map(|key| async move {
            let dropped = match &self.claims {
                Some(claims) => match self.within(claims.store.delete(key.clone())).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(%key, error = %e, "a claim-checked payload could not be deleted; a sweep tries again");
                        false
                    }
                },
                None => false,
            };
            Input::ClaimDropped { key, dropped }
        });
        let mut outs = Vec::new();
        for answer in futures::future::join_all(deletes).await {
            outs.extend(self.exchange.call(answer).await?);
        }
        Ok(outs)
    }

    /// The store, for its request charges.
    pub fn store(&self) -> &St {
        &self.exchange.store
    }

    async fn settle(&self, input: Input, intent: QueueIntent) -> Result<(), QueueClientError> {
        let mut outcome = Err(QueueClientError::NoOutcome(intent));
        let mut drops = Vec::new();
        for out in self.exchange.checked_call(input, None).await? {
            match out {
                Output::Completed(_)
                | Output::Abandoned(_)
                | Output::DeadLettered { .. }
                | Output::DeadLetterDeleted(_) => {
                    outcome = Ok(());
                }
                Output::DropClaim(key) => drops.push(key),
                Output::Failed { error, .. } => outcome = Err(error.into()),
                _ => {}
            }
        }
        if !drops.is_empty() {
            // The message is done whether or not its payload is deleted now: a
            // payload left is the sweep's.
            if let Err(e) = self.drop_claims(drops).await {
                tracing::warn!(error = %e, "a claim-checked payload of a message completed, or of a dead letter deleted, is left for the sweep");
            }
        }
        outcome
    }
}

/// An enqueue's outcome among its outputs.
fn enqueued(outs: Vec<Output>) -> Result<Enqueued, QueueClientError> {
    for out in outs {
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

/// The error of a command whose task the runtime cancelled while shutting down.
fn cancelled() -> QueueClientError {
    QueueClientError::Queue(<Consumer as Client>::cancelled())
}
