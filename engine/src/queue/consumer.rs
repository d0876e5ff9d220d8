//! The queue consumer state machine.

mod claim;
mod large;

use super::config::{Candidate, QueueKnownBad};
use super::dead_letter::{self, Failure};
use super::{
    Claim, ClaimKey, ConsumerConfig, ConsumerConfigError, Delivery, Handle, Input, Message,
    MessageLock, MessageName, MessageState, Output, PartSetId, QueueError, QueueIntent,
    QueueRequest,
};
use crate::ids::{DocId, Etag, HostId, Incarnation, PartitionKey, RequestId};
use crate::lock::{Client, Held, LockToken, Locks};
use crate::store::{Compare, Condition, Document, Op, Query, Reply, StoreError, Stored, Value};
use crate::time::{LocalTime, Millis, Now};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// One consumer of one queue, as a sans-IO state machine: feed it [`Input`]s with
/// [`handle_input`](Self::handle_input) and drain [`poll_output`](Self::poll_output).
///
/// Rules it keeps:
/// - Every change to a message is conditional on the etag this consumer last saw,
///   so a consumer whose lock was taken over changes nothing (`LockLost`).
/// - It delivers a message locked by someone else only after seeing the same version
///   for the lock's duration plus the drift allowance (see [`crate::lock`]), and
///   its own authority over a delivery ends before anyone else may take it.
/// - A message delivered `max_dequeue_count` times is dead-lettered, not delivered,
///   and takes no place in the batch: a dequeue that moved poison messages reads
///   again for the room they left, so a backlog of them never starves the healthy
///   messages behind it.
///
/// ```
/// use leasehold_engine::queue::{Consumer, ConsumerConfig, Input, MessageName, Output, QueueName};
/// use leasehold_engine::store::Container;
/// use leasehold_engine::{HostId, Incarnation, LocalTime, Millis, Now, WallTime};
///
/// let config = ConsumerConfig::new(QueueName::new("orders").unwrap());
/// let mut consumer = Consumer::new(HostId::from("c1"), Incarnation(0), config).unwrap();
/// let mut store = Container::new();
/// let now = Now::new(LocalTime::ZERO, WallTime(1_700_000_000_000));
/// let mut run = |consumer: &mut Consumer, input| {
///     let mut inputs = vec![input];
///     let mut seen = Vec::new();
///     while let Some(input) = inputs.pop() {
///         consumer.handle_input(now, input).unwrap();
///         while let Some(out) = consumer.poll_output() {
///             match out {
///                 Output::Request(req) => inputs.push(Input::Response {
///                     id: req.id,
///                     result: store.execute(req.op),
///                 }),
///                 other => seen.push(other),
///             }
///         }
///     }
///     seen
/// };
/// let name = MessageName::new("m1").unwrap();
/// run(&mut consumer, Input::Enqueue { name, payload: "hello".into(), delay: Millis::ZERO });
/// let out = run(&mut consumer, Input::Dequeue { max: 10 });
/// let Some(Output::Delivered(delivery)) = out.first() else { panic!("{out:?}") };
/// assert_eq!(delivery.payload, "hello");
/// let out = run(&mut consumer, Input::Complete(delivery.handle()));
/// assert!(matches!(out[..], [Output::Completed(_)]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Consumer {
    client: Client,
    /// Shared, not copied: model checkers clone consumers with every state.
    config: Arc<ConsumerConfig>,
    locks: Locks,
    /// The version of each held message this consumer last wrote.
    held_docs: BTreeMap<DocId, Message>,
    pending: BTreeMap<RequestId, Pending>,
    /// The running dequeue: its reads, its claims still unanswered, and what it
    /// achieved so far.
    dequeue: Option<DequeueRun>,
    /// From when a dequeue reads the locked messages again; `None`: the next one.
    watch_at: Option<LocalTime>,
    /// Enqueues whose parts are being written.
    staging: BTreeMap<PartSetId, large::Staging>,
    /// Deliveries whose parts are being read.
    assembling: BTreeMap<DocId, large::Assembly>,
    /// Part sets being deleted.
    cleanups: BTreeMap<PartSetId, large::Cleanup>,
    /// The running sweep, and where the next one reads from.
    sweep: Option<large::SweepRun>,
    sweep_after: Option<DocId>,
    /// When this consumer first saw each version of the part sets' heads.
    part_sets: Locks,
    now: Now,
    out: VecDeque<Output>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct DequeueRun {
    /// The batch size asked for.
    max: usize,
    /// The two reads a dequeue makes, once answered; a failed read leaves `None`
    /// and ends the dequeue empty.
    visible: Option<Vec<Stored<Message>>>,
    locked: Option<Vec<Stored<Message>>>,
    /// When the locked messages' read was answered: a lock first seen in it counts
    /// from then, not from the other read's answer, which may come later.
    locked_seen_at: LocalTime,
    /// Whether this dequeue reads the locked messages.
    watching: bool,
    reads_pending: u8,
    read_failed: bool,
    claims: usize,
    delivered: usize,
    dead_lettered: usize,
    /// Poison messages this round of reads moved: each round that moved one reads
    /// again for the room left, and the rounds end because each removes a message.
    moved_this_round: usize,
    /// Claims and poison moves of this round another consumer won (refused 412, or
    /// the message gone): a round that lost one reads again for the room left. The
    /// rounds end because each loss is another consumer's progress and a version
    /// refused is never claimed or moved again in this dequeue, whatever a lagging
    /// replica shows.
    lost_this_round: usize,
    /// Whether this round's read of the visible messages came back full: only then
    /// may more wait behind what it read. A read that came back short saw every
    /// visible message, so a loser reading again would mostly pay for an empty read.
    full_this_round: bool,
    /// The versions this dequeue's claims and moves were refused at.
    refused: Vec<(DocId, Etag)>,
}

/// Which of a dequeue's two reads a reply answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum DequeueRead {
    /// Pending messages visible now, in visibility order, at most the batch size.
    Visible,
    /// Every locked message: as many as deliveries in flight, never the backlog.
    Locked,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Pending {
    Enqueue(MessageName, DocId),
    Read(DequeueRead),
    Claim {
        message: Message,
        /// The version claimed.
        etag: Etag,
        sent_at: LocalTime,
    },
    Poison {
        id: DocId,
        /// The version moved.
        etag: Etag,
        reason: String,
    },
    Complete {
        id: DocId,
        /// The delivery completed: the message may have been delivered again, under
        /// another lock, by the time the answer comes.
        token: LockToken,
        /// Its payload's set, as the message completed named it.
        parts: Option<(MessageName, PartSetId, u32)>,
    },
    Renew {
        id: DocId,
        /// The delivery renewed, as for a completion.
        token: LockToken,
        sent_at: LocalTime,
    },
    Abandon {
        id: DocId,
        /// The delivery given back, as for a completion.
        token: LockToken,
    },
    DeadLetter {
        id: DocId,
        /// The delivery moved, as for a completion.
        token: LockToken,
        reason: String,
    },
    ListDeadLetters,
    Requeue {
        dead_letter: DocId,
        name: MessageName,
    },
    DeleteDeadLetter {
        dead_letter: DocId,
        /// Its payload's set, to delete once the dead letter is gone.
        parts: Option<(MessageName, PartSetId, u32)>,
    },
    /// A set's head created, or read for its etag.
    PartHead(PartSetId),
    PartWrite {
        set: PartSetId,
        index: u32,
    },
    Manifest {
        name: MessageName,
        set: PartSetId,
    },
    ReadPart {
        message: DocId,
        index: u32,
    },
    DeletePart {
        set: PartSetId,
    },
    DeleteHead {
        set: PartSetId,
    },
    /// `HeadFirst`'s head delete, before the parts.
    DeleteHeadFirst {
        name: MessageName,
        set: PartSetId,
        count: u32,
    },
    SweepScan {
        after: Option<DocId>,
        max: usize,
    },
    SweepCheck(Stored<Message>),
    SweepMark(Message),
}

impl Consumer {
    /// A consumer named `me`, in life `incarnation` (which must differ from every
    /// earlier life of the same name).
    pub fn new(
        me: HostId,
        incarnation: Incarnation,
        config: ConsumerConfig,
    ) -> Result<Consumer, ConsumerConfigError> {
        config.validate()?;
        Ok(Consumer {
            client: Client::new(me, incarnation),
            config: Arc::new(config),
            locks: Locks::default(),
            held_docs: BTreeMap::new(),
            pending: BTreeMap::new(),
            dequeue: None,
            watch_at: None,
            staging: BTreeMap::new(),
            assembling: BTreeMap::new(),
            cleanups: BTreeMap::new(),
            sweep: None,
            sweep_after: None,
            part_sets: Locks::default(),
            now: Now::default(),
            out: VecDeque::new(),
        })
    }

    /// The consumer's settings.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The locks this consumer holds, and what it watches.
    pub fn locks(&self) -> &Locks {
        &self.locks
    }

    /// Whether a handler may still act on `delivery` at `now`: its lock is the one
    /// held on the message, and its authority has not run out.
    pub fn has_authority(&self, delivery: &Handle, now: LocalTime) -> bool {
        self.held_for(delivery).is_ok() && self.locks.has_authority(&delivery.message, now)
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// Takes one input at `now`. A refused input changes nothing.
    pub fn handle_input(&mut self, now: Now, input: Input) -> Result<(), QueueError> {
        if now.local >= self.now.local {
            self.now = now;
        }
        match input {
            Input::Enqueue {
                name,
                payload,
                delay,
            } => self.enqueue(name, payload, delay),
            Input::EnqueueClaimed {
                name,
                bytes,
                hash,
                delay,
            } => self.enqueue_claimed(name, bytes, hash, delay),
            Input::ClaimStored { key, stored } => {
                self.claim_stored(key, stored);
                Ok(())
            }
            Input::ClaimDropped { key, dropped } => {
                self.claim_dropped(key, dropped);
                Ok(())
            }
            Input::Dequeue { max } => self.start_dequeue(max),
            Input::Complete(delivery) => {
                let held = self.held_for(&delivery)?;
                let id = delivery.message;
                // The held document says whether a head must be rewritten with it.
                let Some(doc) = self.held_docs.get(&id) else {
                    return Err(QueueError::NotHeld(id));
                };
                let op = dead_letter::delete_op(self.pk(), doc, held.etag, self.records_heads());
                let parts = named_set(doc);
                self.locks.give_up_authority(&id, self.now.local);
                let pending = Pending::Complete {
                    id,
                    token: held.token.clone(),
                    parts,
                };
                self.send(QueueIntent::Complete, Some(held.token), op, pending);
                Ok(())
            }
            Input::Renew(delivery) => self.renew(delivery),
            Input::Abandon { delivery, delay } => {
                let held = self.held_for(&delivery)?;
                let message = delivery.message;
                let wall = self.now.wall;
                let pending = Pending::Abandon {
                    id: message.clone(),
                    token: held.token.clone(),
                };
                self.rewrite_as(&message, held, QueueIntent::Abandon, pending, |m| {
                    m.state = MessageState::Pending;
                    m.next_visible_at = wall + delay;
                })
            }
            Input::DeadLetter { delivery, reason } => {
                let held = self.held_for(&delivery)?;
                let message = delivery.message;
                let Some(doc) = self.held_docs.get(&message).cloned() else {
                    return Err(QueueError::NotHeld(message));
                };
                self.locks.release_exclusion(&message, self.now.local);
                let op = self.move_op(doc, &held.token, held.etag, reason.clone());
                let pending = Pending::DeadLetter {
                    id: message,
                    token: held.token.clone(),
                    reason,
                };
                self.send(QueueIntent::DeadLetter, Some(held.token), op, pending);
                Ok(())
            }
            Input::ListDeadLetters { max } => {
                let query = Query {
                    filter: vec![Condition::new(
                        Message::STATUS,
                        Compare::Eq,
                        Value::String("DeadLettered".into()),
                    )],
                    order_by: None,
                    limit: Some(max),
                    ..self.query()
                };
                let intent = QueueIntent::ListDeadLetters;
                self.send(intent, None, Op::Query(query), Pending::ListDeadLetters);
                Ok(())
            }
            Input::Requeue(dead_letter) => self.requeue(dead_letter),
            Input::DeleteDeadLetter(dead_letter) => self.delete_dead_letter(dead_letter),
            Input::Sweep { max } => self.start_sweep(max),
            Input::Response { id, result } => {
                let pending = self
                    .pending
                    .remove(&id)
                    .ok_or(QueueError::UnknownRequest(id))?;
                self.answer(pending, result);
                Ok(())
            }
        }
    }

    /// Whether this consumer keeps a head's naming document in every batch that
    /// moves it: always, but under `UnrecordedHeads`.
    fn records_heads(&self) -> bool {
        self.config.known_bad != Some(QueueKnownBad::UnrecordedHeads)
    }

    /// The batch that moves `message`, at `etag`, to the dead letters as `delivery`'s,
    /// its head rewritten with it.
    fn move_op(
        &self,
        message: Message,
        delivery: &LockToken,
        etag: Etag,
        reason: String,
    ) -> Op<Message> {
        let record = self.records_heads();
        dead_letter::move_op(self.pk(), message, delivery, etag, reason, record)
    }

    fn pk(&self) -> PartitionKey {
        PartitionKey::new(self.config.queue.as_str())
    }

    /// A query of this queue's documents, live messages and dead letters alike.
    fn query(&self) -> Query {
        Query {
            pk: Some(self.pk()),
            prefix: self.config.queue.prefix(),
            filter: Vec::new(),
            order_by: None,
            limit: None,
        }
    }

    fn requeue(&mut self, dead_letter: Stored<Message>) -> Result<(), QueueError> {
        let doc = &dead_letter.doc;
        if !doc.is_dead_lettered() || doc.queue != self.config.queue {
            return Err(QueueError::NotADeadLetter(doc.id.clone()));
        }
        let pending = Pending::Requeue {
            dead_letter: doc.id.clone(),
            name: doc.name.clone(),
        };
        let op =
            dead_letter::requeue_op(self.pk(), dead_letter, self.now.wall, self.records_heads());
        self.send(QueueIntent::Requeue, None, op, pending);
        Ok(())
    }

    fn delete_dead_letter(&mut self, dead_letter: Stored<Message>) -> Result<(), QueueError> {
        let Stored { doc, etag } = dead_letter;
        if !doc.is_dead_lettered() || doc.queue != self.config.queue {
            return Err(QueueError::NotADeadLetter(doc.id));
        }
        // The head must stop naming the dead letter in the same batch: once the dead
        // letter is gone, nothing else would ever tell a sweep the set is free.
        let record =
            self.records_heads() && self.config.known_bad != Some(QueueKnownBad::DiscardKeepsHead);
        let op = dead_letter::delete_op(self.pk(), &doc, etag, record);
        let pending = Pending::DeleteDeadLetter {
            parts: named_set(&doc),
            dead_letter: doc.id,
        };
        self.send(QueueIntent::DeleteDeadLetter, None, op, pending);
        Ok(())
    }

    /// The lock held for `delivery`: the one it was delivered under, not a later
    /// one this consumer took on the message after that lock was let go.
    fn held_for(&self, delivery: &Handle) -> Result<Held, QueueError> {
        let by_name = self.config.known_bad == Some(QueueKnownBad::HandleNamesMessage);
        self.locks
            .held(&delivery.message)
            .filter(|h| by_name || h.token == delivery.lock)
            .cloned()
            .ok_or_else(|| QueueError::NotHeld(delivery.message.clone()))
    }

    fn send(
        &mut self,
        intent: QueueIntent,
        lock: Option<LockToken>,
        op: Op<Message>,
        pending: Pending,
    ) {
        let id = self.client.next_request();
        self.pending.insert(id, pending);
        self.out.push_back(Output::Request(QueueRequest {
            id,
            intent,
            lock,
            op,
        }));
    }

    fn enqueue(
        &mut self,
        name: MessageName,
        payload: String,
        delay: Millis,
    ) -> Result<(), QueueError> {
        let queue = self.config.queue.clone();
        let message = Message::new(queue, name.clone(), payload, self.now.wall, delay);
        if message.stored_size() > self.config.limits.max_document_bytes {
            return self.enqueue_in_parts(message);
        }
        let id = message.id.clone();
        self.send(
            QueueIntent::Enqueue,
            None,
            Op::Create(message),
            Pending::Enqueue(name, id),
        );
        Ok(())
    }

    fn start_dequeue(&mut self, max: usize) -> Result<(), QueueError> {
        if self.dequeue.is_some() {
            return Err(QueueError::Busy);
        }
        let watch = self.watch_at.is_none_or(|at| self.now.local >= at);
        self.dequeue = Some(DequeueRun {
            max,
            visible: None,
            locked: None,
            locked_seen_at: self.now.local,
            watching: watch,
            reads_pending: 1 + u8::from(watch),
            read_failed: false,
            claims: 0,
            delivered: 0,
            dead_lettered: 0,
            moved_this_round: 0,
            lost_this_round: 0,
            full_this_round: false,
            refused: Vec::new(),
        });
        self.read_visible(max);
        // Every lock, expired or not: the observed rule judges a lock expired only by
        // watching its version stay unchanged. Read when a watched lock is due, and
        // on a cadence to see new ones; not on every dequeue, which doubled the cost
        // of an idle poll.
        if watch {
            let locked = Query {
                filter: vec![status_is("InProgress")],
                ..self.query()
            };
            self.send(
                QueueIntent::Watch,
                None,
                Op::Query(locked),
                Pending::Read(DequeueRead::Locked),
            );
        }
        Ok(())
    }

    /// Reads the pending messages visible now, oldest visibility first, no more than
    /// `limit`: what this read returns does not grow with the backlog.
    fn read_visible(&mut self, limit: usize) {
        let visible = Query {
            filter: vec![
                status_is("Pending"),
                Condition::new(
                    Message::NEXT_VISIBLE,
                    Compare::Le,
                    Value::Number(self.now.wall.0),
                ),
            ],
            order_by: Some(Message::NEXT_VISIBLE),
            limit: Some(limit),
            ..self.query()
        };
        self.send(
            QueueIntent::Scan,
            None,
            Op::Query(visible),
            Pending::Read(DequeueRead::Visible),
        );
    }

    /// Settles one of a dequeue's reads; once both are in, claims from them.
    fn read_answered(&mut self, read: DequeueRead, result: Result<Reply<Message>, StoreError>) {
        let Some(run) = &mut self.dequeue else { return };
        run.reads_pending = run.reads_pending.saturating_sub(1);
        let failure = match result {
            Ok(Reply::Query(found)) => {
                match read {
                    DequeueRead::Visible => run.visible = Some(found),
                    DequeueRead::Locked => {
                        run.locked = Some(found);
                        run.locked_seen_at = self.now.local;
                    }
                }
                None
            }
            Ok(_) => Some(None),
            Err(e) => Some(Some(e)),
        };
        if let Some(error) = failure {
            run.read_failed = true;
            if let Some(e) = error {
                let prefix = DocId::from(self.config.queue.prefix());
                let intent = match read {
                    DequeueRead::Visible => QueueIntent::Scan,
                    DequeueRead::Locked => QueueIntent::Watch,
                };
                self.fail(prefix, intent, QueueError::Store(e));
            }
        }
        let Some(run) = &mut self.dequeue else { return };
        if run.reads_pending > 0 {
            return;
        }
        let (visible, locked, seen_at) =
            (run.visible.take(), run.locked.take(), run.locked_seen_at);
        match (visible, locked, run.watching) {
            (Some(visible), locked @ Some(_), true) | (Some(visible), locked @ None, false)
                if !run.read_failed =>
            {
                self.claim_from(visible, locked, seen_at);
            }
            _ => self.finish_dequeue_if_done(),
        }
    }

    /// Picks and claims messages from a dequeue's reads; the locks, if this dequeue
    /// read them, were read by `seen_at`.
    fn claim_from(
        &mut self,
        visible: Vec<Stored<Message>>,
        locked: Option<Vec<Stored<Message>>>,
        seen_at: LocalTime,
    ) {
        let now = self.now;
        let room = self
            .dequeue
            .as_ref()
            .map_or(0, |d| d.max.saturating_sub(d.delivered));
        let watched = locked.is_some();
        let locked = locked.unwrap_or_default();
        let locked_ids: Vec<&DocId> = locked.iter().map(|s| &s.doc.id).collect();
        if watched {
            self.locks.forget_sightings_except(&locked_ids);
        }
        let mut watch_at = seen_at + self.config.lock_watch_interval();
        let refused = match &mut self.dequeue {
            Some(run) => {
                run.full_this_round = visible.len() >= room;
                run.refused.clone()
            }
            None => Vec::new(),
        };
        // The two reads are two snapshots: a message claimed between them shows in
        // both, and only the locked copy may be current.
        let visible = visible.iter().filter(|v| !locked_ids.contains(&&v.doc.id));
        let mut chosen = Vec::new();
        for stored in visible.chain(&locked) {
            let message = &stored.doc;
            if refused
                .iter()
                .any(|(id, etag)| *id == message.id && *etag == stored.etag)
            {
                continue;
            }
            if self.locks.held(&message.id).is_some() {
                // A lock whose authority a completion gave up is still this
                // consumer's while it excludes everyone else: let go of here, a
                // retry of that completion would be refused `NotHeld` although the
                // first attempt may have landed.
                let ours = if self.config.known_bad == Some(QueueKnownBad::GoneMeansLost) {
                    self.locks.has_authority(&message.id, now.local)
                } else {
                    self.locks.excludes_others(&message.id, now.local)
                };
                if ours {
                    continue;
                }
                // A delivery whose authority ran out without a complete or abandon
                // (its handler overran, the process stalled) is no longer ours to
                // skip: forgotten here, it is judged like anyone's lock, so it comes
                // back after its lock expires. Skipped forever instead, it was
                // stranded once every consumer had lost it so (the simulator found
                // it).
                self.locks.drop_lock(&message.id);
                self.held_docs.remove(&message.id);
            }
            let lock_expired = match message.lock() {
                Some(lock) => {
                    let policy = &self.config.policy;
                    let first = self.locks.sight(&message.id, &stored.etag, seen_at);
                    // Under the timestamp rule no due time is known: watch every time.
                    let due = policy.expires_at(lock.duration, first).unwrap_or(now.local);
                    watch_at = watch_at.min(due);
                    policy.is_expired(lock.duration, first, lock.until, now)
                }
                None => false,
            };
            let candidate = Candidate {
                message,
                lock_expired,
                now,
                lock_duration: self.config.lock_duration,
            };
            if (self.config.select.pick)(&candidate) {
                chosen.push(stored);
            }
        }
        chosen.sort_by(|a, b| {
            (a.doc.next_visible_at, a.doc.created, &a.doc.id).cmp(&(
                b.doc.next_visible_at,
                b.doc.created,
                &b.doc.id,
            ))
        });
        chosen.truncate(room);
        if watched {
            self.watch_at = Some(watch_at);
        }
        let mut sent = 0;
        for stored in chosen {
            let mut message = stored.doc.clone();
            let if_match = Some(stored.etag.clone());
            if message.dequeue_count >= self.config.max_dequeue_count {
                let reason = format!(
                    "delivered {} times without completing, the maximum",
                    message.dequeue_count
                );
                let id = message.id.clone();
                let token = self.client.next_token();
                let op = self.move_op(message, &token, stored.etag.clone(), reason.clone());
                // Not a holder's write: the token only names the dead letter.
                self.send(
                    QueueIntent::Poison,
                    None,
                    op,
                    Pending::Poison {
                        id,
                        etag: stored.etag.clone(),
                        reason,
                    },
                );
            } else {
                let token = self.client.next_token();
                let duration = self.config.lock_duration;
                message.state = MessageState::InProgress {
                    lock: MessageLock {
                        token: token.clone(),
                        until: now.wall + duration,
                        duration,
                    },
                };
                message.dequeue_count += 1;
                let pending = Pending::Claim {
                    message: message.clone(),
                    etag: stored.etag.clone(),
                    sent_at: now.local,
                };
                let op = Op::Replace {
                    doc: message,
                    if_match,
                };
                self.send(QueueIntent::Claim, Some(token), op, pending);
            }
            sent += 1;
        }
        if let Some(run) = &mut self.dequeue {
            run.claims = sent;
        }
        self.finish_dequeue_if_done();
    }

    fn finish_dequeue_if_done(&mut self) {
        let spent_on_poison = self.config.known_bad == Some(QueueKnownBad::PoisonSpendsBatch);
        let waits_poll = self.config.known_bad == Some(QueueKnownBad::LostClaimWaitsPoll);
        let Some(run) = &mut self.dequeue else { return };
        if run.reads_pending > 0 || run.claims > 0 {
            return;
        }
        let room = run.max.saturating_sub(run.delivered);
        let moved = run.moved_this_round > 0 && !spent_on_poison;
        let lost = run.lost_this_round > 0 && run.full_this_round && !waits_poll;
        if (moved || lost) && room > 0 && !run.read_failed {
            // The poison moves and the claims lost took places a message behind them
            // may fill.
            run.moved_this_round = 0;
            run.lost_this_round = 0;
            run.reads_pending = 1;
            run.watching = false;
            self.read_visible(room);
            return;
        }
        let run = self.dequeue.take().expect("checked above");
        self.out.push_back(Output::DequeueFinished {
            delivered: run.delivered,
            dead_lettered: run.dead_lettered,
        });
    }

    fn claim_answered(&mut self, delivered: bool, dead_lettered: bool) {
        if let Some(run) = &mut self.dequeue {
            run.claims = run.claims.saturating_sub(1);
            run.delivered += usize::from(delivered);
            run.dead_lettered += usize::from(dead_lettered);
            run.moved_this_round += usize::from(dead_lettered);
        }
        self.finish_dequeue_if_done();
    }

    fn renew(&mut self, delivery: Handle) -> Result<(), QueueError> {
        let held = self.held_for(&delivery)?;
        let id = delivery.message;
        let (wall, local) = (self.now.wall, self.now.local);
        let pending = Pending::Renew {
            id: id.clone(),
            token: held.token.clone(),
            sent_at: local,
        };
        let duration = held.duration;
        let token = held.token.clone();
        self.rewrite_as(&id, held, QueueIntent::Renew, pending, move |m| {
            m.state = MessageState::InProgress {
                lock: MessageLock {
                    token,
                    until: wall + duration,
                    duration,
                },
            };
        })
    }

    /// Writes a new version of a held message, built from the version this consumer
    /// locked. Holders are the only writers of a locked message, so that version is
    /// the current one unless the lock is lost, which the if-match detects.
    fn rewrite_as(
        &mut self,
        id: &DocId,
        held: Held,
        intent: QueueIntent,
        pending: Pending,
        change: impl FnOnce(&mut Message),
    ) -> Result<(), QueueError> {
        let Some(mut message) = self.held_docs.get(id).cloned() else {
            return Err(QueueError::NotHeld(id.clone()));
        };
        change(&mut message);
        match intent {
            QueueIntent::Renew => {}
            // The message is pending again once this lands: others may take it, and
            // complete it, at once.
            QueueIntent::Abandon => self.locks.release_exclusion(id, self.now.local),
            _ => self.locks.give_up_authority(id, self.now.local),
        }
        let op = Op::Replace {
            doc: message,
            if_match: Some(held.etag),
        };
        self.send(intent, Some(held.token), op, pending);
        Ok(())
    }

    fn answer(&mut self, pending: Pending, result: Result<Reply<Message>, StoreError>) {
        match pending {
            Pending::Enqueue(name, id) => match result {
                Ok(_) => self.out.push_back(Output::Enqueued {
                    name,
                    already_present: false,
                }),
                Err(StoreError::Conflict) => self.out.push_back(Output::Enqueued {
                    name,
                    already_present: true,
                }),
                Err(e) => self.fail(id, QueueIntent::Enqueue, QueueError::Store(e)),
            },
            Pending::Read(read) => self.read_answered(read, result),
            Pending::Claim {
                message,
                etag,
                sent_at,
            } => {
                if claim_lost(&result)
                    && let Some(run) = &mut self.dequeue
                {
                    run.lost_this_round += 1;
                    run.refused.push((message.id.clone(), etag));
                }
                let delivered = match (result, message.lock()) {
                    (Ok(Reply::Replaced(etag)), Some(lock)) => {
                        let authority_until =
                            sent_at + self.config.policy.authority_span(lock.duration);
                        self.locks.hold(
                            message.id.clone(),
                            Held {
                                etag,
                                token: lock.token.clone(),
                                duration: lock.duration,
                                authority_until,
                                excludes_until: authority_until,
                            },
                        );
                        let claim = ClaimKey::of(&message).zip(message.parts.as_ref()).map(
                            |(key, parts)| Claim {
                                key,
                                bytes: parts.bytes,
                                hash: parts.hash.clone(),
                            },
                        );
                        let delivery = Delivery {
                            id: message.id.clone(),
                            name: message.name.clone(),
                            payload: message.payload.clone(),
                            claim,
                            dequeue_count: message.dequeue_count,
                            lock: lock.token.clone(),
                            authority_until,
                        };
                        let parts = message.parts.clone().filter(|p| !p.is_claim());
                        self.held_docs.insert(message.id.clone(), message);
                        if let Some(parts) = parts {
                            // Delivered, or not, once its parts are read.
                            self.read_parts(delivery, parts);
                            return;
                        }
                        self.out.push_back(Output::Delivered(delivery));
                        true
                    }
                    // Someone else got it first, or the outcome is unknown: an
                    // unknown claim is left to expire like a crashed consumer's.
                    _ => false,
                };
                self.claim_answered(delivered, false);
            }
            Pending::Poison { id, etag, reason } => {
                let outcome = dead_letter::outcome(&result);
                let lost_move = self.config.known_bad != Some(QueueKnownBad::LostMoveWaitsPoll);
                if let (Err(Failure::Target(_)), true, Some(run)) =
                    (&outcome, lost_move, &mut self.dequeue)
                {
                    // Another consumer moved or claimed it first: a loss like a
                    // refused claim's, whose place a message behind it may fill.
                    run.lost_this_round += 1;
                    run.refused.push((id.clone(), etag));
                }
                let done = matches!(outcome, Ok(()) | Err(Failure::Created));
                if done {
                    self.out.push_back(Output::DeadLettered {
                        message: id,
                        reason,
                    });
                }
                self.claim_answered(false, done);
            }
            Pending::Complete { id, token, parts } => {
                let result = dead_letter::delete_result(result);
                let by_token = self.config.known_bad != Some(QueueKnownBad::CompletionReadsHeld);
                if by_token && self.holds_another(&id, &token) {
                    // The answer is about an earlier delivery of the message: the lock
                    // this consumer holds now, and its document, are another's.
                    self.earlier_completion_answered(id, parts, result);
                    return;
                }
                let gone = matches!(result, Err(StoreError::NotFound))
                    && self.config.known_bad != Some(QueueKnownBad::GoneMeansLost);
                if gone && !self.locks.excludes_others(&id, self.now.local) {
                    // An attempt of this completion may have landed unseen (its reply
                    // lost, or the SDK sending it again), and so may another
                    // consumer's since this lock ran out: which one, nobody can tell.
                    self.locks.drop_lock(&id);
                    self.held_docs.remove(&id);
                    self.fail(id.clone(), QueueIntent::Complete, QueueError::Gone(id));
                    return;
                }
                // Gone while no one else could have taken it: an earlier attempt of
                // this completion deleted it.
                let result = if gone { Ok(Reply::Deleted) } else { result };
                let parts = if by_token {
                    parts.filter(|_| result.is_ok())
                } else {
                    self.held_docs
                        .get(&id)
                        .filter(|_| result.is_ok())
                        .and_then(named_set)
                };
                self.after_holder_write(id, QueueIntent::Complete, result, |id| {
                    Output::Completed(id)
                });
                // The message is gone, so nothing names its parts any more.
                if let Some((name, set, count)) = parts {
                    self.delete_parts(&name, &set, count, None, false);
                }
            }
            Pending::Abandon { id, token } => {
                if self.answers_earlier(&id, &token) {
                    let done = Output::Abandoned(id.clone());
                    self.earlier_delivery_answered(id, QueueIntent::Abandon, result, done);
                    return;
                }
                self.after_holder_write(id, QueueIntent::Abandon, result, Output::Abandoned)
            }
            Pending::DeadLetter { id, token, reason } => {
                let result = match dead_letter::outcome(&result) {
                    // The dead letter's id is this delivery's own: it exists only if an
                    // earlier attempt of this very move was applied.
                    Ok(()) | Err(Failure::Created) => Ok(Reply::Deleted),
                    Err(Failure::Target(e) | Failure::Request(e)) => Err(e),
                };
                if self.answers_earlier(&id, &token) {
                    let done = Output::DeadLettered {
                        message: id.clone(),
                        reason,
                    };
                    self.earlier_delivery_answered(id, QueueIntent::DeadLetter, result, done);
                    return;
                }
                self.after_holder_write(id, QueueIntent::DeadLetter, result, |message| {
                    Output::DeadLettered { message, reason }
                })
            }
            Pending::ListDeadLetters => match result {
                Ok(Reply::Query(found)) => self.out.push_back(Output::DeadLetters(found)),
                Ok(_) => self.out.push_back(Output::DeadLetters(Vec::new())),
                Err(e) => {
                    let prefix = DocId::from(self.config.queue.prefix());
                    self.fail(prefix, QueueIntent::ListDeadLetters, QueueError::Store(e));
                }
            },
            Pending::Requeue { dead_letter, name } => match dead_letter::outcome(&result) {
                Ok(()) => self.out.push_back(Output::Requeued {
                    dead_letter,
                    message: Message::id_for(&self.config.queue, &name),
                }),
                Err(Failure::Created) => {
                    self.fail(
                        dead_letter,
                        QueueIntent::Requeue,
                        QueueError::NameTaken(name),
                    );
                }
                Err(Failure::Target(StoreError::PreconditionFailed | StoreError::NotFound)) => {
                    let error = QueueError::DeadLetterChanged(dead_letter.clone());
                    self.fail(dead_letter, QueueIntent::Requeue, error);
                }
                Err(Failure::Target(e) | Failure::Request(e)) => {
                    self.fail(dead_letter, QueueIntent::Requeue, QueueError::Store(e));
                }
            },
            Pending::DeleteDeadLetter { dead_letter, parts } => {
                match dead_letter::delete_result(result) {
                    Ok(_) => {
                        self.out.push_back(Output::DeadLetterDeleted(dead_letter));
                        if let Some((name, set, count)) = parts {
                            self.delete_parts(&name, &set, count, None, false);
                        }
                    }
                    Err(StoreError::PreconditionFailed) => {
                        let error = QueueError::DeadLetterChanged(dead_letter.clone());
                        self.fail(dead_letter, QueueIntent::DeleteDeadLetter, error);
                    }
                    // Perhaps by this very delete's earlier attempt, whose batch left
                    // the set to the sweep: the parts are not this answer's to delete.
                    Err(StoreError::NotFound) => {
                        let error = QueueError::DeadLetterGone(dead_letter.clone());
                        self.fail(dead_letter, QueueIntent::DeleteDeadLetter, error);
                    }
                    Err(e) => {
                        let error = QueueError::Store(e);
                        self.fail(dead_letter, QueueIntent::DeleteDeadLetter, error);
                    }
                }
            }
            Pending::PartHead(set) => self.head_answered(set, result),
            Pending::PartWrite { set, .. } => self.part_written(set, result),
            Pending::Manifest { name, set } => self.manifest_written(name, set, result),
            Pending::ReadPart { message, index } => self.part_read(message, index, result),
            Pending::DeletePart { set } => self.part_deleted(set, false, result),
            Pending::DeleteHead { set } => self.part_deleted(set, true, result),
            Pending::DeleteHeadFirst { name, set, count } => {
                self.head_deleted_first(name, set, count)
            }
            Pending::SweepScan { after, max } => self.heads_read(after, max, result),
            Pending::SweepCheck(head) => self.references_read(head, result),
            Pending::SweepMark(head) => self.mark_answered(head, result),
            Pending::Renew { id, token, .. } if self.answers_earlier(&id, &token) => {
                // Renewed or not, that delivery ended when this consumer took the
                // message again: its handler has lost it.
                self.fail(id.clone(), QueueIntent::Renew, QueueError::LockLost(id));
            }
            Pending::Renew { id, sent_at, .. } => match result {
                Ok(Reply::Replaced(etag)) => {
                    let Some(mut held) = self.locks.held(&id).cloned() else {
                        // Forgotten by a dequeue meanwhile: its authority had run out.
                        self.fail(id.clone(), QueueIntent::Renew, QueueError::LockLost(id));
                        return;
                    };
                    held.etag = etag;
                    held.authority_until =
                        sent_at + self.config.policy.authority_span(held.duration);
                    held.excludes_until = held.authority_until;
                    let authority_until = held.authority_until;
                    if let Some(doc) = self.held_docs.get_mut(&id)
                        && let MessageState::InProgress { lock } = &mut doc.state
                    {
                        lock.until = self.now.wall + held.duration;
                    }
                    self.locks.hold(id.clone(), held);
                    self.out.push_back(Output::Renewed {
                        message: id,
                        authority_until,
                    });
                }
                Ok(_) => {}
                Err(e) => self.holder_write_failed(id, QueueIntent::Renew, e),
            },
        }
    }

    /// Settles a write by a holder: success ends the lock; 412 or 404 means the lock
    /// was lost; an ambiguous error keeps the lock so that the caller may retry.
    fn after_holder_write(
        &mut self,
        id: DocId,
        intent: QueueIntent,
        result: Result<Reply<Message>, StoreError>,
        done: impl FnOnce(DocId) -> Output,
    ) {
        match result {
            Ok(_) => {
                self.locks.drop_lock(&id);
                self.held_docs.remove(&id);
                self.out.push_back(done(id));
            }
            Err(e) => self.holder_write_failed(id, intent, e),
        }
    }

    /// A completion's answer that came after the message was delivered again (its
    /// reply held, and an enqueue of the same name stored it anew): it says nothing of
    /// the lock held now, and the parts it frees are those of the message it deleted.
    fn earlier_completion_answered(
        &mut self,
        id: DocId,
        parts: Option<(MessageName, PartSetId, u32)>,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let intent = QueueIntent::Complete;
        match result {
            Ok(_) => {
                self.out.push_back(Output::Completed(id));
                if let Some((name, set, count)) = parts {
                    self.delete_parts(&name, &set, count, None, false);
                }
            }
            Err(StoreError::NotFound) => self.fail(id.clone(), intent, QueueError::Gone(id)),
            Err(StoreError::PreconditionFailed) => {
                self.fail(id.clone(), intent, QueueError::LockLost(id))
            }
            Err(e) => self.fail(id, intent, QueueError::Store(e)),
        }
    }

    /// Whether this consumer holds `id` under a lock it took after `token`'s (tokens
    /// of one life count up): it took the message again, so an answer to a write
    /// under `token` is about a delivery that is over.
    fn holds_another(&self, id: &DocId, token: &LockToken) -> bool {
        self.locks.held(id).is_some_and(|h| h.token > *token)
    }

    /// [`Self::holds_another`], for the answers to an abandon, a dead-letter move
    /// and a renewal.
    fn answers_earlier(&self, id: &DocId, token: &LockToken) -> bool {
        self.config.known_bad != Some(QueueKnownBad::HolderAnswersReadHeld)
            && self.holds_another(id, token)
    }

    /// An abandon's or a dead-letter move's answer that came after this
    /// consumer took the message again (the reply was held while the message came
    /// back, or was enqueued anew): it reports on the delivery it was about, and
    /// leaves the lock held now to the delivery that holds it. Acted on as the lock
    /// held now, a held give-back's reply dropped the new delivery, whose completion
    /// was then refused, and the message was delivered once more than its handlers
    /// failed; a held renewal's reply (answered above) gave the new delivery the old
    /// version's etag, so its next write was refused, with the same outcome.
    fn earlier_delivery_answered(
        &mut self,
        id: DocId,
        intent: QueueIntent,
        result: Result<Reply<Message>, StoreError>,
        done: Output,
    ) {
        match result {
            Ok(_) => self.out.push_back(done),
            Err(StoreError::PreconditionFailed | StoreError::NotFound) => {
                self.fail(id.clone(), intent, QueueError::LockLost(id))
            }
            Err(e) => self.fail(id, intent, QueueError::Store(e)),
        }
    }

    fn holder_write_failed(&mut self, id: DocId, intent: QueueIntent, error: StoreError) {
        match error {
            StoreError::PreconditionFailed | StoreError::NotFound => {
                self.locks.drop_lock(&id);
                self.held_docs.remove(&id);
                self.fail(id.clone(), intent, QueueError::LockLost(id));
            }
            e => self.fail(id, intent, QueueError::Store(e)),
        }
    }

    fn fail(&mut self, message: DocId, intent: QueueIntent, error: QueueError) {
        self.out.push_back(Output::Failed {
            message,
            intent,
            error,
        });
    }
}

/// The part set `doc` names, as its deletes need it: the name, the set, its parts.
fn named_set(doc: &Message) -> Option<(MessageName, PartSetId, u32)> {
    doc.parts
        .as_ref()
        .map(|p| (doc.name.clone(), p.set.clone(), p.count))
}

/// A query condition on a message's status.
fn status_is(status: &str) -> Condition {
    Condition::new(Message::STATUS, Compare::Eq, Value::String(status.into()))
}

/// Whether `result`, the answer to a dequeue's claim of a message (its locking
/// write, [`QueueIntent::Claim`]), says that another consumer got to the message
/// first: it was claimed, changed, completed or moved since the version claimed. The
/// dequeue counts such a claim lost and reads again for the room it left; the
/// checkers judge it by this same rule.
///
/// ```
/// use leasehold_engine::queue::claim_lost;
/// use leasehold_engine::store::StoreError;
///
/// assert!(claim_lost(&Err(StoreError::PreconditionFailed)));
/// assert!(claim_lost(&Err(StoreError::NotFound)));
/// // An outcome nobody knows is not a loss: the claim may have landed.
/// assert!(!claim_lost(&Err(StoreError::Timeout)));
/// ```
pub fn claim_lost(result: &Result<Reply<Message>, StoreError>) -> bool {
    matches!(
        result,
        Err(StoreError::PreconditionFailed | StoreError::NotFound)
    )
}
