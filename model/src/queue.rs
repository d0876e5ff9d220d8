//! The stateright model of the work queue: consumers running the engine's
//! [`Consumer`] against the reference store, under crashes, pauses, clock skew and
//! drift, lost replies and delayed writes.

use crate::clocks::WALL_BASE;
use crate::limits::BoundsError;
use crate::lock_config::{LockBounds, LockBug, LockKind};
use crate::transitions::Transitions;
use crate::world::Fault;
use crate::world::{self, Action, Budget, Locking, Request, Rules, World, note};
use leasehold_engine::lock::Locks;
use leasehold_engine::queue::{
    Candidate, ClaimKey, Consumer, ConsumerConfig, Handle, Input, LargeMessages, Message,
    MessageName, MessageState, Naming, Output, PartsProblem, QueueError, QueueIntent,
    QueueKnownBad, QueueName, Selector, payload_hash,
};
use leasehold_engine::store::{BatchOp, Container, Document, Op, Reply};
use leasehold_engine::store::{StoreError, StoreResult};
use leasehold_engine::{DocId, HostId, Incarnation, Millis, WallTime};
use stateright::Property;
use std::collections::BTreeMap;
use std::sync::Arc;

impl world::Modelled for Consumer {}

impl Locking for Consumer {
    fn locks(&self) -> &Locks {
        Consumer::locks(self)
    }
}

/// What a consumer does when it polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueChoice {
    /// Dequeue a batch (when it holds nothing); in the large-payload mode, sweep too.
    Dequeue,
    /// Enqueue the large payload (consumer 0, until it is stored).
    Produce,
    /// Complete everything it holds.
    Complete,
    /// Abandon everything it holds.
    Abandon,
    /// Renew everything it holds.
    Renew,
    /// Delete a dead letter for good, as an operator who listed it asks (consumer 0,
    /// holding nothing, while a dead letter is stored and the bound allows).
    DeleteDeadLetter,
    /// Dequeue while the handler of a delivery it holds works on, as long as it
    /// likes, past the delivery's authority (while the bound allows): the handler
    /// keeps the delivery, and the consumer may let its lock go and deliver the
    /// message again.
    Overrun,
    /// The overrun handler is done and completes the delivery it kept.
    CompleteKept,
    /// The overrun handler fails and gives back the delivery it kept.
    AbandonKept,
    /// The overrun handler asks for more time under the delivery it kept (a
    /// renewal, within the renewals' budget). Granted, the handler is back within its
    /// authority and its consumer completes the delivery as any other it holds;
    /// refused, the handler knows its delivery is gone.
    RenewKept,
}

/// What runs beside a consumer's engine: the delivery a handler that overran its
/// authority keeps working on, named as the handler names it.
pub type Kept = Option<Handle>;

/// History the queue properties need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueGhost {
    /// Per message: claims applied.
    pub deliveries: Vec<u8>,
    /// Per message: the consumer whose completion deleted it.
    pub completed_by: Vec<Option<u8>>,
    /// The large payload's message (bit `c`): consumers whose completion deleted an
    /// earlier message of its name, before an enqueue stored it again. Such a
    /// completion's late answer is a true confirmation, of the message it deleted.
    pub earlier_completers: u8,
    /// A consumer was told its completion was lost although it landed, or that it
    /// completed a message someone else's completion deleted.
    pub misreported: bool,
    /// A completion applied although the completer's lock was not the current one.
    pub stale_completion: bool,
    /// A message's stored dequeue count differed from its deliveries.
    pub count_mismatch: bool,
    /// Per consumer (bit `c`): its last request the store answered was a claim, or a
    /// poison message's move, another consumer had won (refused 412, or the message
    /// gone).
    pub lost_claim: u8,
    /// Per consumer (bit `c`): its running dequeue lost a claim or a move.
    pub lost_in_dequeue: u8,
    /// Per consumer (bit `c`): its last read of the visible messages came back with
    /// as many as it asked for, so more may wait behind them.
    pub full_scan: u8,
    /// Abandons and renewals chosen so far.
    pub give_backs: u8,
    /// Renewals chosen so far.
    pub renewals: u8,
    /// Dead-letter deletes chosen so far.
    pub dead_letter_deletes: u8,
    /// Handler overruns chosen so far.
    pub overruns: u8,
    /// An overrun handler's call changed a lock its consumer held under another
    /// token: it acted on a later delivery of the message, another handler's.
    pub handler_crossed: bool,
    /// Per message (bit `m`): its dead letter was deleted, by a delete the store
    /// applied: done, as a completed message is.
    pub discarded: u8,
    /// An answer to a holder's write, arriving late (its reply held, or its request
    /// held on the wire), changed a lock its consumer held under another token.
    pub crossed_answer: bool,
    /// What the step into this state did, for the `sometimes` properties.
    pub events: QueueEvents,
    /// The large payload's enqueue was answered: its producer stops producing.
    pub produced: bool,
    /// The large payload's message was written (answered or not).
    pub stored: bool,
    /// A delivery carried a payload no producer enqueued: partial, or mixed.
    pub partial: bool,
    /// A consumer found a message whose parts were missing from the store, or
    /// damaged, or a delivery's claim-checked payload missing or changed.
    pub damaged: bool,
    /// A message was dead-lettered for a part missing though every part of its
    /// payload was in the store (a replica that lags served the read).
    pub healthy_dead_lettered: bool,
    /// The claim store (in the claim-check mode): each key's payload, by the life of
    /// the producer that stored it.
    pub claims: BTreeMap<ClaimKey, u8>,
}

/// What one step did that a queue `sometimes` property looks for; each step starts
/// with none (see [`crate::Events`] for why).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueueEvents {
    /// A message locked by a crashed consumer was delivered again.
    pub redelivered_after_crash: bool,
    /// A stale holder's completion was refused.
    pub stale_refused: bool,
    /// A message was dead-lettered.
    pub dead_lettered: bool,
    /// A completion found the message gone, deleted by its own earlier attempt.
    pub found_own_completion: bool,
    /// One dequeue moved a poison message and delivered a healthy one.
    pub poison_then_delivered: bool,
    /// A dequeue that moved poison messages ended with room in its batch while a
    /// healthy message was pending and visible to it. An event, not a lasting flag:
    /// a counterexample then ends at the dequeue that did it.
    pub batch_spent_on_poison: bool,
    /// A dequeue whose read came back full ended with room in its batch right after
    /// losing a claim (or a poison message's move), while a message was pending and
    /// visible to it: it waits a poll beside the backlog.
    pub batch_spent_on_lost_claim: bool,
    /// A dequeue lost a claim and delivered another message.
    pub lost_then_delivered: bool,
    /// A part set left behind was swept.
    pub swept: bool,
    /// A large payload was delivered.
    pub delivered_large: bool,
    /// An overrun handler's completion or give-back came while its consumer held a
    /// later delivery of the message, and left that delivery's lock as it was.
    pub kept_refused: bool,
}

/// The queue model.
#[derive(Clone, Debug)]
pub struct QueueModel {
    /// The bounds.
    pub bounds: LockBounds,
    /// The consumers' settings.
    pub config: ConsumerConfig,
    /// Ticks after the last fault from which every message must be done.
    pub liveness_ticks: u8,
    /// The engine transitions its checks computed, shared by its clones and reused
    /// across states ([`Transitions`]).
    pub transitions: Arc<Transitions<Consumer>>,
}

/// The seed's predicate (seed 001): pending, or in progress with more than half the
/// lock duration left, by the reader's wall clock; no regard for who holds the lock.
fn seed_predicate(c: &Candidate<'_>) -> bool {
    let m = c.message;
    m.next_visible_at <= c.now.wall
        && match &m.state {
            MessageState::Pending => true,
            MessageState::InProgress { lock } => {
                let half = Millis(c.lock_duration.as_millis() / 2);
                lock.until > c.now.wall + half
            }
            MessageState::DeadLettered { .. }
            | MessageState::PartSet { .. }
            | MessageState::Part { .. } => false,
        }
}

/// The provider's known issue: expired locks are never returned.
fn pending_only(c: &Candidate<'_>) -> bool {
    c.message.next_visible_at <= c.now.wall && matches!(c.message.state, MessageState::Pending)
}

/// The dequeue rule of `bug`: the seed's predicate, the provider's known issue, or
/// leasehold's own. Shared with the simulator, so both run the same variants.
pub fn selector(bug: Option<LockBug>) -> Selector {
    match bug {
        Some(LockBug::DequeueSeed) => Selector {
            name: "seed-001",
            pick: seed_predicate,
        },
        Some(LockBug::DequeueNoExpired) => Selector {
            name: "pending-only",
            pick: pending_only,
        },
        _ => Selector::DELIVERABLE,
    }
}

/// The consumer's earlier behaviour a variant runs, if it is one.
pub fn known_bad(bug: Option<LockBug>) -> Option<QueueKnownBad> {
    match bug {
        Some(LockBug::Engine(bad)) => Some(bad),
        _ => None,
    }
}

/// The heads and parts among `docs` that no message or dead letter among them names:
/// what a sweep must leave none of once faults stop. Shared with the simulator, so
/// both judge leftovers alike.
pub fn orphaned_parts<'a>(docs: &[&'a Message]) -> Vec<&'a DocId> {
    let named = |set: &leasehold_engine::queue::PartSetId| {
        docs.iter()
            .any(|m| m.parts.as_ref().is_some_and(|p| p.set == *set))
    };
    docs.iter()
        .filter(|d| match &d.state {
            MessageState::PartSet { set, .. } | MessageState::Part { set, .. } => !named(set),
            _ => false,
        })
        .map(|d| &d.id)
        .collect()
}

/// Whether every part of every payload a message or dead letter among `docs` names
/// is among them: what the producer's order (parts first, the message last) and the
/// completion's (the message first, its parts after) keep true. Shared with the
/// simulator.
pub fn payloads_whole(docs: &[&Message]) -> bool {
    docs.iter()
        .filter(|d| {
            matches!(
                d.state,
                MessageState::Pending
                    | MessageState::InProgress { .. }
                    | MessageState::DeadLettered { .. }
            )
        })
        .filter_map(|d| d.parts.as_ref())
        .all(|named| {
            (0..named.count).all(|i| {
                docs.iter().any(|p| {
                    matches!(&p.state, MessageState::Part { set, index } if *set == named.set && *index == i)
                })
            })
        })
}

/// Whether every payload that a message or dead letter among `docs` names is still
/// kept: its parts among `docs`, its claim-checked payload where `stored` says. A
/// payload goes only after the last document that names it. Shared with the
/// simulator.
pub fn payloads_kept(docs: &[&Message], stored: impl Fn(&ClaimKey) -> bool) -> bool {
    payloads_whole(docs)
        && docs
            .iter()
            .filter_map(|d| ClaimKey::of(d))
            .all(|key| stored(&key))
}

/// The claim-checked payloads among `keys` that no head, message or dead letter among
/// `docs` names: nothing would ever remove them. Shared with the simulator.
pub fn orphaned_claims<'a>(
    docs: &[&Message],
    keys: impl IntoIterator<Item = &'a ClaimKey>,
) -> Vec<&'a ClaimKey> {
    keys.into_iter()
        .filter(|key| {
            !docs.iter().any(|d| {
                matches!(&d.state, MessageState::PartSet { set, .. } if *set == key.set)
                    || ClaimKey::of(d).as_ref() == Some(*key)
            })
        })
        .collect()
}

/// Strips the if-match of a request as the `blind-claim` and `blind-complete`
/// variants do, or the order of a dequeue's read as `dequeue-unordered` does; shared
/// with the simulator.
pub fn tamper(bug: Option<LockBug>, intent: QueueIntent, op: &mut Op<Message>) {
    if bug == Some(LockBug::DequeueUnordered)
        && intent == QueueIntent::Scan
        && let Op::Query(query) = op
    {
        query.order_by = None;
    }
    let strip = match bug {
        Some(LockBug::BlindClaim) => intent == QueueIntent::Claim,
        Some(LockBug::BlindComplete) => intent == QueueIntent::Complete,
        _ => false,
    };
    if strip {
        match op {
            Op::Replace { if_match, .. } | Op::Delete { if_match, .. } => *if_match = None,
            // A large payload's completion: its message's delete, with its head.
            Op::Batch { ops, .. } => {
                for op in ops {
                    if let BatchOp::Delete { if_match, .. } = op {
                        *if_match = None;
                    }
                }
            }
            _ => {}
        }
    }
}

impl QueueModel {
    /// A model of `bounds`.
    pub fn new(bounds: LockBounds) -> Result<QueueModel, BoundsError> {
        bounds.validate(LockKind::Queue)?;
        let select = selector(bounds.bug);
        let mut config = ConsumerConfig {
            lock_duration: bounds.lock_duration(),
            policy: bounds.policy(),
            max_dequeue_count: u32::from(bounds.max_dequeue),
            select,
            known_bad: known_bad(bounds.bug),
            ..ConsumerConfig::new(Self::queue())
        };
        if bounds.is_large() {
            config.limits.max_document_bytes = LARGE_DOCUMENT_BYTES;
            config.large = Some(LargeMessages {
                max_bytes: 2 * LARGE_DOCUMENT_BYTES,
                orphan_after: bounds.lock_duration(),
            });
        }
        config
            .validate()
            .map_err(|e| BoundsError::LockSettings(e.to_string()))?;
        Ok(QueueModel {
            liveness_ticks: bounds.liveness_ticks(LockKind::Queue),
            bounds,
            config,
            // The memo only pays where the engine's step is the cost (BENCHMARKS.md).
            transitions: Arc::new(Transitions::with_capacity(0)),
        })
    }

    fn queue() -> QueueName {
        QueueName::new("q").expect("a valid name")
    }

    /// The document id of message `m`.
    pub fn message_id(m: u8) -> DocId {
        Message::id_for(&Self::queue(), &Self::message_name(m))
    }

    fn message_name(m: u8) -> MessageName {
        MessageName::new(format!("m{m}")).expect("a valid name")
    }

    fn index(id: &DocId) -> usize {
        id.as_str()
            .rsplit('m')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// The payload life `life` of the producer enqueues in the large-payload mode:
    /// a document's worth, so that it takes two parts, and another for each life, so
    /// that parts mixed from two attempts would show.
    pub fn large_payload(life: u8) -> String {
        char::from(b'a' + life % 26)
            .to_string()
            .repeat(LARGE_DOCUMENT_BYTES)
    }

    /// Whether a part set (head or part) no message or dead letter names is stored,
    /// or a claim-checked payload that no head names.
    pub fn has_orphan(state: &QueueState) -> bool {
        let docs: Vec<&Message> = state.store.iter().map(|s| &s.doc).collect();
        !orphaned_claims(&docs, state.ghost.claims.keys()).is_empty()
            || !orphaned_parts(&docs).is_empty()
    }

    fn engine(&self, c: u8, life: u8) -> Consumer {
        Consumer::new(
            HostId::from(format!("c{c}")),
            Incarnation(u64::from(life)),
            self.config.clone(),
        )
        .expect("validated in new")
    }

    /// Whether a healthy message waits, pending and visible by consumer `c`'s clock,
    /// for a dequeue that just ended with room.
    fn one_waits_for(&self, world: &QueueState, c: u8) -> bool {
        let wall = world::now(&self.bounds.budget(), world, c).wall;
        let max = self.config.max_dequeue_count;
        world.store.iter().any(|s| {
            matches!(s.doc.state, MessageState::Pending)
                && s.doc.next_visible_at <= wall
                && s.doc.dequeue_count < max
        })
    }

    /// The places in consumer `c`'s batch that its claims still on the wire took: a
    /// dequeue ends once its driver gives such a claim up, which may yet land, so the
    /// place is spent, not free.
    fn claims_on_the_wire(world: &QueueState, c: u8) -> usize {
        world
            .net
            .iter()
            .filter(|((sender, _), req)| *sender == c && req.intent == QueueIntent::Claim)
            .count()
    }

    /// How many up consumers hold authority over message `m` by their own clocks.
    pub fn holders(&self, state: &QueueState, m: u8) -> usize {
        world::holders(&self.bounds.budget(), state, &Self::message_id(m), None)
    }

    fn step(
        &self,
        last: &QueueState,
        action: &QueueAction,
        journal: &mut Option<Vec<String>>,
    ) -> Option<QueueState> {
        let mut next = world::step(
            self,
            last,
            action,
            journal,
            |state, c, choice, fault, journal| self.poll(state, c, choice, fault, journal),
            |c, life| self.engine(c, life),
        )?;
        next.ghost.crossed_answer |= world::answer_crossed(last, &next, action);
        if let Action::Step(
            c,
            QueueChoice::CompleteKept | QueueChoice::AbandonKept | QueueChoice::RenewKept,
            _,
        ) = *action
        {
            // A handler calls on its own thread: its consumer still polls this tick.
            let c = usize::from(c);
            next.clients[c].acted = last.clients[c].acted;
        }
        Some(next)
    }

    fn poll(
        &self,
        state: &mut QueueState,
        c: u8,
        choice: QueueChoice,
        fault: Option<Fault>,
        journal: &mut Option<Vec<String>>,
    ) -> Option<()> {
        state.clients[usize::from(c)].engine.as_ref()?;
        // The overrun handler's delivery is its own to complete or give back.
        let kept = state.clients[usize::from(c)].handler.clone();
        let mut held = Self::handles(state, c);
        held.retain(|h| Some(h) != kept.as_ref());
        let inputs = match choice {
            QueueChoice::Dequeue if self.bounds.is_large() => vec![
                Input::Dequeue {
                    max: usize::from(self.bounds.batch),
                },
                Input::Sweep { max: SWEEP_BATCH },
            ],
            QueueChoice::Dequeue => vec![Input::Dequeue {
                max: usize::from(self.bounds.batch),
            }],
            QueueChoice::Produce => {
                let payload = Self::large_payload(state.clients[usize::from(c)].incarnation);
                let input = if self.bounds.is_claims() {
                    Input::EnqueueClaimed {
                        name: Self::message_name(0),
                        bytes: payload.len() as u64,
                        hash: payload_hash(payload.as_bytes()),
                        delay: Millis::ZERO,
                    }
                } else {
                    Input::Enqueue {
                        name: Self::message_name(0),
                        payload,
                        delay: Millis::ZERO,
                    }
                };
                vec![input]
            }
            QueueChoice::Complete => held.into_iter().map(Input::Complete).collect(),
            QueueChoice::Overrun => {
                // The handler works on past its authority: the message waits out the
                // lock, so liveness is measured from it.
                state.ghost.overruns += 1;
                state.last_fault = state.time;
                state.clients[usize::from(c)].handler = held.into_iter().next();
                vec![Input::Dequeue {
                    max: usize::from(self.bounds.batch),
                }]
            }
            QueueChoice::CompleteKept | QueueChoice::AbandonKept | QueueChoice::RenewKept => {
                let kept = state.clients[usize::from(c)].handler.take()?;
                let call = match choice {
                    QueueChoice::CompleteKept => Input::Complete(kept.clone()),
                    QueueChoice::AbandonKept => {
                        // A handler failure: liveness is measured from it, as from an
                        // abandon.
                        state.last_fault = state.time;
                        let delay = Millis(u64::from(self.bounds.abandon_delay) * crate::TICK_MS);
                        Input::Abandon {
                            delivery: kept.clone(),
                            delay,
                        }
                    }
                    _ => {
                        // More time asked for puts the work off, as a renewal does.
                        state.ghost.renewals += 1;
                        state.last_fault = state.time;
                        Input::Renew(kept.clone())
                    }
                };
                let lock = (&kept.message, &kept.lock);
                let verdict = world::run_kept(self, state, c, call, lock, fault, journal)?;
                state.ghost.handler_crossed |= verdict.crossed;
                state.ghost.events.kept_refused = verdict.later && !verdict.crossed;
                return Some(());
            }
            QueueChoice::Abandon => {
                // An abandon is a handler failure: liveness is measured from it.
                state.ghost.give_backs += 1;
                state.last_fault = state.time;
                let delay = Millis(u64::from(self.bounds.abandon_delay) * crate::TICK_MS);
                held.into_iter()
                    .map(|delivery| Input::Abandon { delivery, delay })
                    .collect()
            }
            QueueChoice::Renew => {
                // A renewal is the handler asking for more time: like an abandon, it
                // puts the work off, so liveness is measured from it.
                state.ghost.renewals += 1;
                state.last_fault = state.time;
                held.into_iter().map(Input::Renew).collect()
            }
            QueueChoice::DeleteDeadLetter => {
                // The operator's listing is the store's latest version: a stale one
                // only makes the delete refused.
                state.ghost.dead_letter_deletes += 1;
                let letter = Self::dead_letter(state)?;
                vec![Input::DeleteDeadLetter(letter)]
            }
        };
        world::run(self, state, c, inputs, fault, journal)
    }

    /// What an overrun handler may call under the delivery it kept.
    fn kept_calls(&self, state: &QueueState) -> Vec<QueueChoice> {
        let mut calls = vec![QueueChoice::CompleteKept, QueueChoice::AbandonKept];
        if state.ghost.renewals < self.bounds.renewals {
            calls.push(QueueChoice::RenewKept);
        }
        calls
    }

    /// The deliveries consumer `c` holds locks for, as their handlers name them.
    fn handles(state: &QueueState, c: u8) -> Vec<Handle> {
        world::held(state, c)
            .into_iter()
            .map(|(message, lock)| Handle { message, lock })
            .collect()
    }

    /// The first dead letter stored, as a listing returns it.
    fn dead_letter(state: &QueueState) -> Option<leasehold_engine::store::Stored<Message>> {
        state
            .store
            .iter()
            .find(|s| s.doc.is_dead_lettered())
            .cloned()
    }

    /// Takes `action` from `state`, telling what happened inside the step.
    pub fn explain(
        &self,
        state: &QueueState,
        action: &QueueAction,
    ) -> (Option<QueueState>, Vec<String>) {
        let mut journal = Some(Vec::new());
        let next = self.step(state, action, &mut journal);
        (next, journal.unwrap_or_default())
    }
}

/// A state of the queue model.
pub type QueueState = World<Consumer, QueueGhost, Kept>;
/// An action of the queue model.
pub type QueueAction = Action<QueueChoice>;

impl Rules for QueueModel {
    type M = Consumer;
    type Ghost = QueueGhost;
    type Handler = Kept;

    fn budget(&self) -> Budget {
        self.bounds.budget()
    }

    fn transitions(&self) -> &Transitions<Consumer> {
        &self.transitions
    }

    fn forget_events(&self, ghost: &mut QueueGhost) {
        ghost.events = QueueEvents::default();
    }

    fn tamper(&self, req: &mut Request<Message, QueueIntent>, _: Option<&Message>) {
        tamper(self.bounds.bug, req.intent, &mut req.op);
    }

    fn record(
        &self,
        world: &mut QueueState,
        client: u8,
        req: &Request<Message, QueueIntent>,
        before: Option<Message>,
        result: &StoreResult<Message>,
    ) {
        let ghost = &mut world.ghost;
        // A poison message's move that another consumer beat is a loss as a claim's
        // is: the dequeue read it in place of a message behind it.
        let lost = match req.intent {
            QueueIntent::Claim => leasehold_engine::queue::claim_lost(result),
            QueueIntent::Poison => leasehold_engine::queue::move_lost(result),
            _ => false,
        };
        if let (QueueIntent::Scan, Op::Query(q), Ok(Reply::Query(found))) =
            (req.intent, &req.op, result)
        {
            if q.limit.is_none_or(|limit| found.len() >= limit) {
                ghost.full_scan |= 1 << client;
            } else {
                ghost.full_scan &= !(1 << client);
            }
        }
        if lost {
            ghost.lost_claim |= 1 << client;
            ghost.lost_in_dequeue |= 1 << client;
        } else {
            ghost.lost_claim &= !(1 << client);
        }
        if req.intent == QueueIntent::Enqueue
            && matches!(result, Ok(Reply::Batch(r)) if r.is_success())
        {
            // A new message of the name: an enqueue is deduplicated by name only
            // while its message is stored, so an attempt that lands after the first
            // was completed (its reply was held, or it was retried) stores another,
            // with its own deliveries.
            ghost.stored = true;
            ghost.deliveries[0] = 0;
            if let Some(earlier) = ghost.completed_by[0].take() {
                ghost.earlier_completers |= 1 << earlier;
            }
            ghost.discarded &= !1;
        }
        if req.intent == QueueIntent::DeleteDeadLetter {
            let applied = match result {
                Ok(Reply::Batch(response)) => response.is_success(),
                other => other.is_ok(),
            };
            if let (true, Some(letter)) = (applied, &before) {
                let m = Self::index(&Message::id_for(&letter.queue, &letter.name));
                ghost.discarded |= 1 << m;
            }
            return;
        }
        let target = match &req.op {
            Op::Replace { doc, .. } => Some(doc.id().clone()),
            Op::Delete { id, .. } => Some(id.clone()),
            // A move to the dead letters (a create, then the message's delete) or a
            // completion of a large payload's message (its delete): the message is
            // the one the batch deletes.
            Op::Batch { ops, .. } => ops.iter().find_map(|op| match op {
                BatchOp::Delete { id, .. } => Some(id.clone()),
                _ => None,
            }),
            _ => None,
        };
        let Some(id) = target else { return };
        let m = Self::index(&id);
        let applied = match result {
            Ok(Reply::Batch(response)) => response.is_success(),
            other => other.is_ok(),
        };
        match req.intent {
            QueueIntent::Claim if applied => {
                ghost.deliveries[m] += 1;
                if let Op::Replace { doc, .. } = &req.op
                    && doc.dequeue_count != u32::from(ghost.deliveries[m])
                {
                    ghost.count_mismatch = true;
                }
                let previous = before
                    .as_ref()
                    .and_then(|b| b.lock().map(|l| l.token.holder.clone()));
                if let Some(holder) = previous {
                    let k: u8 = holder.as_str()[1..].parse().unwrap_or(0);
                    if world.crashed & (1 << k) != 0 {
                        ghost.events.redelivered_after_crash = true;
                    }
                }
            }
            QueueIntent::Complete if applied => {
                ghost.completed_by[m] = Some(client);
                let current = before
                    .as_ref()
                    .and_then(|b| b.lock().map(|l| l.token.clone()));
                if current != req.lock {
                    ghost.stale_completion = true;
                }
            }
            QueueIntent::Complete if ghost.completed_by[m] == Some(client) => {
                ghost.events.found_own_completion = true
            }
            QueueIntent::Complete => ghost.events.stale_refused = true,
            QueueIntent::Poison | QueueIntent::DeadLetter if applied => {
                ghost.events.dead_lettered = true
            }
            _ => {}
        }
    }

    fn output(
        &self,
        world: &mut QueueState,
        c: u8,
        output: Output,
        fails: bool,
        journal: &mut Option<Vec<String>>,
    ) -> Option<Input> {
        let completer = |id: &DocId| world.ghost.completed_by[Self::index(id)];
        let misreported = match &output {
            Output::Completed(id) => {
                let earlier =
                    Self::index(id) == 0 && world.ghost.earlier_completers & (1 << c) != 0;
                completer(id) != Some(c) && !earlier
            }
            Output::Failed {
                intent: QueueIntent::Complete,
                error: QueueError::LockLost(id),
                ..
            } => completer(id) == Some(c),
            _ => false,
        };
        world.ghost.misreported |= misreported;
        let mut answer = None;
        if self.bounds.is_large() {
            match &output {
                Output::Enqueued { .. } => world.ghost.produced = true,
                // The driver answers at once: a put or a delete is one atomic call
                // of a linearizable claim store, which may fail (`fails`): a failed
                // put has landed all the same, a failed delete has not.
                Output::StoreClaim(key) => {
                    let life = world.clients[usize::from(c)].incarnation;
                    world.ghost.claims.insert(key.clone(), life);
                    let key = key.clone();
                    answer = Some(Input::ClaimStored {
                        key,
                        stored: !fails,
                    });
                }
                Output::DropClaim(key) => {
                    if !fails {
                        world.ghost.claims.remove(key);
                    }
                    let key = key.clone();
                    answer = Some(Input::ClaimDropped {
                        key,
                        dropped: !fails,
                    });
                }
                Output::DiscardClaim(key) if !fails => {
                    world.ghost.claims.remove(key);
                }
                Output::Delivered(d) => {
                    // As the client does: a claim-checked payload is fetched and
                    // checked, and one missing or changed sends its message to the
                    // dead letters (which the lock refuses if it was lost meanwhile).
                    let payload = match &d.claim {
                        Some(claim) => {
                            let stored = world.ghost.claims.get(&claim.key);
                            match claim.check(stored.map(|l| Self::large_payload(*l))) {
                                Ok(payload) => Some(payload),
                                Err(problem) => {
                                    answer = Some(Input::DeadLetter {
                                        delivery: d.handle(),
                                        reason: problem.to_string(),
                                    });
                                    None
                                }
                            }
                        }
                        None => Some(d.payload.clone()),
                    };
                    let lives = 0..=world.crashes;
                    world.ghost.events.delivered_large |= payload.is_some();
                    world.ghost.partial |= payload
                        .is_some_and(|p| !lives.into_iter().any(|l| p == Self::large_payload(l)));
                }
                Output::DeadLettered { reason, .. } if reason.contains("payload") => {
                    // A part a read found missing that the store holds was one a
                    // replica that lags had not received: the message was healthy.
                    let docs: Vec<&Message> = world.store.iter().map(|s| &s.doc).collect();
                    let missing_part =
                        (0..LARGE_PARTS).any(|i| *reason == PartsProblem::Missing(i).to_string());
                    if missing_part && !self.bounds.is_claims() && payloads_whole(&docs) {
                        world.ghost.healthy_dead_lettered = true;
                    } else {
                        world.ghost.damaged = true;
                    }
                }
                // A delivery failed on a part not found: damage only if the store
                // lacks it too.
                Output::Failed {
                    intent: QueueIntent::ReadPart,
                    error: QueueError::Store(StoreError::NotFound),
                    ..
                } => {
                    let docs: Vec<&Message> = world.store.iter().map(|s| &s.doc).collect();
                    world.ghost.damaged |= !payloads_whole(&docs);
                }
                Output::Swept { .. } => world.ghost.events.swept = true,
                _ => {}
            }
        }
        if let Output::DequeueFinished { delivered, .. } = output {
            let lost = world.ghost.lost_claim & world.ghost.full_scan & (1 << c) != 0;
            // Forgotten between dequeues, so that they tell no states apart.
            world.ghost.lost_claim &= !(1 << c);
            world.ghost.full_scan &= !(1 << c);
            world.ghost.events.lost_then_delivered |=
                world.ghost.lost_in_dequeue & (1 << c) != 0 && delivered > 0;
            world.ghost.lost_in_dequeue &= !(1 << c);
            // The claim's refusal was the dequeue's last answer, and the store has
            // not moved since: what it holds now is what a read again would see. A
            // read that came back short saw every visible message: one visible now
            // came after it, and is the next poll's.
            let used = delivered + Self::claims_on_the_wire(world, c);
            if lost && used < usize::from(self.bounds.batch) {
                world.ghost.events.batch_spent_on_lost_claim |= self.one_waits_for(world, c);
            }
        }
        if let Output::DequeueFinished {
            delivered,
            dead_lettered,
        } = output
            && dead_lettered > 0
        {
            world.ghost.events.poison_then_delivered |= delivered > 0;
            // Everything this dequeue read and wrote happened in this step, with no
            // other consumer between, but for a claim held on the wire and given up:
            // what the store holds now is what it saw.
            if delivered + Self::claims_on_the_wire(world, c) < usize::from(self.bounds.batch) {
                world.ghost.events.batch_spent_on_poison |= self.one_waits_for(world, c);
            }
        }
        note(journal, || match &output {
            Output::Delivered(d) => format!(
                "c{c} gets {} (delivery {}) under lock {}{}",
                d.name,
                d.dequeue_count,
                d.lock,
                match &d.claim {
                    Some(claim) =>
                        format!(", its payload fetched from the claim store ({})", claim.key),
                    None => String::new(),
                }
            ),
            Output::Failed {
                message,
                intent,
                error,
            } => {
                format!("c{c}: {intent} of {message} failed: {error}")
            }
            Output::Enqueued {
                name,
                already_present,
            } => format!(
                "c{c} enqueued {name}{}",
                if *already_present {
                    " (already stored)"
                } else {
                    ""
                }
            ),
            Output::DequeueFinished {
                delivered,
                dead_lettered,
            } => format!(
                "c{c}'s dequeue is done: {delivered} delivered, {dead_lettered} dead-lettered"
            ),
            Output::Completed(m) => format!("c{c} completed {m}"),
            Output::Renewed {
                message,
                authority_until,
            } => format!(
                "c{c} renewed the lock on {message}, authority until {}",
                crate::trace::seconds(*authority_until)
            ),
            Output::Abandoned(m) => format!("c{c} gave {m} back"),
            Output::DeadLettered { message, reason } => {
                format!("c{c} dead-lettered {message}: {reason}")
            }
            Output::Requeued {
                dead_letter,
                message,
            } => format!("c{c} requeued {dead_letter} as {message}"),
            Output::DeadLetterDeleted(letter) => format!("c{c} deleted dead letter {letter}"),
            Output::DeadLetters(letters) => format!("c{c} listed {} dead letters", letters.len()),
            Output::Swept { set, parts } => format!("c{c} swept part set {set} ({parts} parts)"),
            Output::SweepFinished { read, swept } => {
                format!("c{c}'s sweep is done: {read} heads read, {swept} swept")
            }
            Output::StoreClaim(key) if fails => format!(
                "c{c}'s driver stores the payload in the claim store under {key}: it lands, \
                 but the put FAILS"
            ),
            Output::StoreClaim(key) => {
                format!("c{c}'s driver stores the payload in the claim store under {key}")
            }
            Output::DropClaim(key) | Output::DiscardClaim(key) if fails => {
                format!("c{c}'s driver deletes {key} from the claim store: the delete FAILS")
            }
            Output::DropClaim(key) | Output::DiscardClaim(key) => {
                format!("c{c}'s driver deletes {key} from the claim store")
            }
            Output::Request(req) => format!("c{c} asks to {} (sent by the driver)", req.intent),
        });
        answer
    }

    fn fallible(&self, output: &Output) -> bool {
        matches!(
            output,
            Output::StoreClaim(_) | Output::DropClaim(_) | Output::DiscardClaim(_)
        )
    }

    fn describe(&self, req: &Request<Message, QueueIntent>) -> String {
        let target = match &req.op {
            Op::Replace { doc, if_match } => match if_match {
                Some(e) => format!("{} if-match {e:?}", doc.id()),
                None => format!("{} BLIND (no if-match)", doc.id()),
            },
            Op::Delete { id, if_match, .. } => match if_match {
                Some(e) => format!("{id} if-match {e:?}"),
                None => format!("{id} BLIND (no if-match)"),
            },
            Op::ReadAll { .. } => "the queue".into(),
            Op::Query(q) if q.filter.iter().any(|c| c.field == Message::PARTS_SET) => {
                "the messages and dead letters naming the set".into()
            }
            Op::Query(_) if req.intent == QueueIntent::Sweep => "the part-set heads".into(),
            Op::Query(q) if q.limit.is_some() => "the visible messages".into(),
            Op::Query(_) => "the locked messages".into(),
            Op::Create(doc) => doc.id().to_string(),
            Op::Read { id, .. } => id.to_string(),
            Op::Batch { ops, .. } => match ops
                .iter()
                .find(|op| matches!(op, BatchOp::Delete { .. }))
                .or(ops.last())
            {
                Some(BatchOp::Delete { id, if_match })
                    if matches!(
                        req.intent,
                        QueueIntent::Complete | QueueIntent::DeleteDeadLetter
                    ) =>
                {
                    match if_match {
                        Some(e) => format!("{id} if-match {e:?}, its head naming nobody"),
                        None => format!("{id} BLIND (no if-match), its head naming nobody"),
                    }
                }
                Some(BatchOp::Delete {
                    id,
                    if_match: Some(e),
                }) => format!("{id} to the dead letters if-match {e:?}"),
                Some(BatchOp::Replace {
                    doc: head,
                    if_match: Some(e),
                }) => match ops.first() {
                    Some(BatchOp::Create(doc)) => {
                        format!("{} with {} if-match {e:?}", doc.id(), head.id())
                    }
                    _ => "a batch".into(),
                },
                _ => "a batch".into(),
            },
        };
        format!("{} {target}", req.intent)
    }
}

impl crate::check::Checkable for QueueModel {
    fn is_fault(&self, action: &Self::Action) -> bool {
        action.is_fault()
    }
}

impl stateright::Model for QueueModel {
    type State = QueueState;
    type Action = QueueAction;

    fn init_states(&self) -> Vec<QueueState> {
        let docs = usize::from(self.bounds.docs);
        let mut store = Container::new();
        // In the large-payload mode the one message is produced by consumer 0.
        let stored = if self.bounds.is_large() {
            0
        } else {
            self.bounds.docs
        };
        for m in 0..stored {
            let msg = Message::new(
                Self::queue(),
                Self::message_name(m),
                format!("payload {m}"),
                WallTime(WALL_BASE - 10_000 + i64::from(m)),
                Millis::ZERO,
            );
            store.create(msg).expect("room for every message");
        }
        let ghost = QueueGhost {
            deliveries: vec![0; docs],
            completed_by: vec![None; docs],
            ..QueueGhost::default()
        };
        let budget = self.bounds.budget();
        world::initial(
            self.bounds.clients,
            self.bounds.skew,
            &budget,
            &store,
            &ghost,
            |c| self.engine(c, 0),
        )
    }

    fn actions(&self, state: &QueueState, actions: &mut Vec<QueueAction>) {
        let budget = self.bounds.budget();
        // A large payload's steps write and read more: the producer's head, parts
        // and message; a poll's scans, claim and part reads.
        let faulted = if self.bounds.is_large() {
            LARGE_FAULTED_REQUESTS
        } else {
            world::FAULTED_WRITES
        };
        world::actions(
            &budget,
            state,
            faulted,
            |c| {
                if c == 0 && self.bounds.is_large() && !state.ghost.produced {
                    return vec![QueueChoice::Produce];
                }
                let kept = &state.clients[usize::from(c)].handler;
                if !world::holds_any(state, c) {
                    let mut choices = vec![QueueChoice::Dequeue];
                    if kept.is_some() {
                        choices.extend(self.kept_calls(state));
                    }
                    if c == 0
                        && state.ghost.dead_letter_deletes < self.bounds.dead_letter_deletes
                        && Self::dead_letter(state).is_some()
                    {
                        choices.push(QueueChoice::DeleteDeadLetter);
                    }
                    return choices;
                }
                if let Some(kept) = kept {
                    // The overrun handler works on while its consumer polls on its
                    // own cadence, until it lets the lock go and may deliver the
                    // message again, to a handler that does not overrun.
                    let next = if Self::handles(state, c).iter().all(|h| h == kept) {
                        QueueChoice::Dequeue
                    } else {
                        QueueChoice::Complete
                    };
                    let mut choices = vec![next];
                    choices.extend(self.kept_calls(state));
                    return choices;
                }
                let mut choices = vec![QueueChoice::Complete];
                // A consumer polls on its own cadence, not after its handlers' calls
                // are answered; the model lets one that holds a lock poll only while
                // an answer to it is held and no lock it holds has authority left, so
                // that a late answer may meet a new delivery of the same message.
                if world::polls_beside_held_reply(&self.bounds.budget(), state, c) {
                    choices.push(QueueChoice::Dequeue);
                }
                if state.ghost.give_backs < self.bounds.give_backs {
                    choices.push(QueueChoice::Abandon);
                }
                if state.ghost.renewals < self.bounds.renewals {
                    choices.push(QueueChoice::Renew);
                }
                if state.ghost.overruns < self.bounds.overruns {
                    choices.push(QueueChoice::Overrun);
                }
                choices
            },
            actions,
        );
    }

    fn next_state(&self, last: &QueueState, action: QueueAction) -> Option<QueueState> {
        self.step(last, &action, &mut None)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(EXCLUSIVE, |m: &QueueModel, s| {
                (0..m.bounds.docs).all(|i| m.holders(s, i) <= 1)
            }),
            Property::always(NO_LOSS, |m: &QueueModel, s| !m.calm(s) || m.all_done(s)),
            Property::always(STALE_COMPLETION, |_, s: &QueueState| {
                !s.ghost.stale_completion
            }),
            Property::always(DEQUEUE_COUNT, |_, s: &QueueState| !s.ghost.count_mismatch),
            Property::always(ANSWER_OWN_DELIVERY, |_, s: &QueueState| {
                !s.ghost.crossed_answer
            }),
            Property::always(COMPLETION_ANSWERED, |_, s: &QueueState| {
                !s.ghost.misreported
            }),
            Property::always(POISON_TAKES_NO_PLACE, |_, s: &QueueState| {
                !s.ghost.events.batch_spent_on_poison
            }),
            Property::always(LOST_CLAIM_TAKES_NO_PLACE, |_, s: &QueueState| {
                !s.ghost.events.batch_spent_on_lost_claim
            }),
            Property::sometimes(LOST_THEN_DELIVERED, |_, s: &QueueState| {
                s.ghost.events.lost_then_delivered
            }),
            Property::sometimes(REDELIVERED_AFTER_CRASH, |_, s: &QueueState| {
                s.ghost.events.redelivered_after_crash
            }),
            Property::sometimes(CALM_AFTER_CRASH, |m: &QueueModel, s: &QueueState| {
                s.crashes > 0 && m.calm(s)
            }),
            Property::sometimes(STALE_REFUSED, |_, s: &QueueState| {
                s.ghost.events.stale_refused
            }),
            Property::sometimes(OWN_COMPLETION_FOUND, |_, s: &QueueState| {
                s.ghost.events.found_own_completion
            }),
            Property::sometimes(DELIVERED_TWICE, |_, s: &QueueState| {
                s.ghost.deliveries.iter().any(|&d| d >= 2)
            }),
            Property::sometimes(DEAD_LETTERED, |_, s: &QueueState| {
                s.ghost.events.dead_lettered
            }),
            Property::sometimes(POISON_THEN_DELIVERED, |_, s: &QueueState| {
                s.ghost.events.poison_then_delivered
            }),
        ];
        // Only where handlers overrun: elsewhere they would hold vacuously and never
        // be reached.
        if self.bounds.overruns > 0 {
            properties.extend([
                Property::always(HANDLER_OWN_DELIVERY, |_, s: &QueueState| {
                    !s.ghost.handler_crossed
                }),
                Property::sometimes(KEPT_REFUSED, |_, s: &QueueState| {
                    s.ghost.events.kept_refused
                }),
            ]);
        }
        // Only where there is a large payload: elsewhere they would hold vacuously
        // and never be reached.
        if self.bounds.is_large() {
            properties.extend([
                Property::always(WHOLE_PAYLOAD, |_, s: &QueueState| !s.ghost.partial),
                Property::always(PAYLOAD_INTACT, |_, s: &QueueState| !s.ghost.damaged),
                Property::always(PAYLOAD_KEPT, |_, s: &QueueState| {
                    let docs: Vec<&Message> = s.store.iter().map(|st| &st.doc).collect();
                    payloads_kept(&docs, |key| s.ghost.claims.contains_key(key))
                }),
                Property::always(HEALTHY_KEPT, |_, s: &QueueState| {
                    !s.ghost.healthy_dead_lettered
                }),
                Property::always(ORPHANS_SWEPT, |m: &QueueModel, s: &QueueState| {
                    !m.calm(s) || !Self::has_orphan(s)
                }),
                Property::sometimes(LARGE_DELIVERED, |_, s: &QueueState| {
                    s.ghost.events.delivered_large
                }),
                Property::sometimes(PARTS_SWEPT, |_, s: &QueueState| s.ghost.events.swept),
            ]);
        }
        properties
    }

    fn within_boundary(&self, state: &QueueState) -> bool {
        state.time <= self.bounds.horizon
    }

    fn as_svg(&self, path: stateright::Path<QueueState, QueueAction>) -> Option<String> {
        Some(crate::svg::sequence_diagram(self, path))
    }

    fn format_action(&self, action: &QueueAction) -> String {
        world::describe_action(action, |choice| match choice {
            QueueChoice::Dequeue if self.bounds.is_large() => "polls: dequeue, then sweep".into(),
            QueueChoice::Dequeue => "polls: dequeue".into(),
            QueueChoice::Produce => "enqueues the large payload".into(),
            QueueChoice::Complete => "polls: complete what it holds".into(),
            QueueChoice::Abandon => "polls: ABANDON what it holds".into(),
            QueueChoice::Renew => "polls: renew what it holds".into(),
            QueueChoice::DeleteDeadLetter => {
                "is asked by the operator to DELETE the dead letter".into()
            }
            QueueChoice::Overrun => "polls: dequeue while its handler OVERRUNS".into(),
            QueueChoice::CompleteKept => {
                "hears from its overrun handler: complete the delivery it kept".into()
            }
            QueueChoice::AbandonKept => {
                "hears from its overrun handler: give back the delivery it kept".into()
            }
            QueueChoice::RenewKept => {
                "hears from its overrun handler: renew the delivery it kept".into()
            }
        })
    }
}

impl QueueModel {
    /// Whether the liveness guard applies: long enough since the last fault, a
    /// consumer up, nothing on the wire.
    pub fn calm(&self, s: &QueueState) -> bool {
        world::calm(s, self.liveness_ticks)
    }

    fn all_done(&self, s: &QueueState) -> bool {
        // A large payload whose producer never wrote its message (it crashed first,
        // and stays down) is not the queue's to lose.
        let never_stored = self.bounds.is_large() && !s.ghost.stored;
        (0..self.bounds.docs).all(|m| {
            never_stored
                || s.ghost.completed_by[usize::from(m)].is_some()
                || s.ghost.discarded & (1 << m) != 0
                || s.store
                    .iter()
                    .any(|st| st.doc.name == Self::message_name(m) && st.doc.is_dead_lettered())
        })
    }
}

/// Documents hold at most this many bytes in the large-payload mode, and the payload
/// is as long: it takes two parts.
pub const LARGE_DOCUMENT_BYTES: usize = 2_000;
/// The parts the large payload takes.
const LARGE_PARTS: u32 = 2;
/// The requests of a step that faults may hit in the large-payload mode: every write
/// of an enqueue in parts (head, two parts, message), and a poll's requests up to its
/// part reads (two scans, the sweep's, the claim, two parts).
const LARGE_FAULTED_REQUESTS: u8 = 6;
/// The most heads a sweep reads in the model.
const SWEEP_BATCH: usize = 4;

/// A delivery carries a payload exactly as one producer enqueued it.
pub const WHOLE_PAYLOAD: &str = "queue: a large payload is delivered whole, never partial or mixed";
/// No message loses its payload's parts.
pub const PAYLOAD_INTACT: &str =
    "queue: no message is found with its payload's parts missing or damaged";
/// No payload's parts, nor its claim-checked payload, go while a message or a dead
/// letter names them.
pub const PAYLOAD_KEPT: &str =
    "queue: every payload that a message or dead letter names is in the store";
/// A message is never dead-lettered for a part a read did not find while the store
/// holds every part of its payload.
pub const HEALTHY_KEPT: &str =
    "queue: no message is dead-lettered for a missing part while the store holds every part";
/// Part sets no message names are swept once faults stop.
pub const ORPHANS_SWEPT: &str = "queue: every part set left behind is swept once faults stop";
/// Non-vacuity of the payload properties.
pub const LARGE_DELIVERED: &str = "sometimes: a large payload is delivered";
/// Non-vacuity of the sweep property.
pub const PARTS_SWEPT: &str = "sometimes: a part set left behind is swept";

/// No message is held by two consumers with valid locks at the same true time.
pub const EXCLUSIVE: &str = "queue: no message held by two consumers with valid locks";
/// No message is lost.
pub const NO_LOSS: &str = "queue: every message completed or dead-lettered once faults stop";
/// A completion by a stale lock holder never succeeds.
pub const STALE_COMPLETION: &str = "queue: no completion by a stale lock holder succeeds";
/// A message's dequeue count equals its deliveries.
pub const DEQUEUE_COUNT: &str = "queue: a message's dequeue count equals its deliveries";
/// A completion's answer says whether it was the one that deleted the message.
pub const COMPLETION_ANSWERED: &str =
    "queue: a completion is confirmed only if it deleted the message, reported lost only if not";
/// A holder's answer that comes late is about the delivery it was sent for.
pub const ANSWER_OWN_DELIVERY: &str =
    "queue: a late answer to a holder's write leaves the consumer's other locks as they were";
/// A handler's call is about the delivery it was handed.
pub const HANDLER_OWN_DELIVERY: &str = "queue: an overrun handler's completion, renewal or \
     give-back leaves a later delivery of its message, another handler's, as it was";
/// A poison message moved to the dead letters takes no place in the batch.
pub const POISON_TAKES_NO_PLACE: &str = "queue: a dequeue that moves poison messages still \
     delivers the healthy visible ones it has room for";
/// A claim another consumer won takes no place in the batch; nor does a poison
/// message's move another consumer beat, which counts as a claim lost here.
pub const LOST_CLAIM_TAKES_NO_PLACE: &str = "queue: a dequeue that loses a claim to another \
     consumer after a full read reads again for the visible messages it still has room for";
/// Non-vacuity of the lost claim's property.
pub const LOST_THEN_DELIVERED: &str =
    "sometimes: one dequeue loses a claim to another consumer and delivers another message";
/// Non-vacuity of the poison property.
pub const POISON_THEN_DELIVERED: &str =
    "sometimes: one dequeue moves a poison message and delivers a healthy one";
/// Non-vacuity of the completion's answer.
pub const OWN_COMPLETION_FOUND: &str =
    "sometimes: a retried completion finds its own earlier attempt landed";
/// Non-vacuity of exclusivity.
pub const REDELIVERED_AFTER_CRASH: &str = "sometimes: a crashed consumer's message is redelivered";
/// Non-vacuity of the liveness guard.
pub const CALM_AFTER_CRASH: &str = "sometimes: no-loss is checked after a crash";
/// Non-vacuity of the stale-completion property.
pub const STALE_REFUSED: &str = "sometimes: a stale holder's completion is refused";
/// Non-vacuity of the dequeue-count property.
pub const DELIVERED_TWICE: &str = "sometimes: a message is delivered twice";
/// Non-vacuity of the handler's own delivery.
pub const KEPT_REFUSED: &str = "sometimes: an overrun handler completes, renews or gives back \
     while its consumer holds a later delivery of the message";
/// Non-vacuity of dead-lettering.
pub const DEAD_LETTERED: &str = "sometimes: a message is dead-lettered";

impl crate::trace::Explain for QueueModel {
    fn explain(
        &self,
        state: &QueueState,
        action: &QueueAction,
    ) -> (Option<QueueState>, Vec<String>) {
        QueueModel::explain(self, state, action)
    }

    fn lanes(&self) -> Vec<String> {
        world::lanes(self.bounds.clients, Self::ACTOR)
    }

    fn lane(&self, action: &QueueAction) -> crate::trace::Lane {
        world::lane(action)
    }

    fn facts(&self, state: &QueueState) -> BTreeMap<String, String> {
        let mut facts = world::lock_facts(&self.bounds.budget(), state);
        facts.extend(world::wire_facts(state, Self::ACTOR, |req| {
            self.describe(req)
        }));
        for m in 0..self.bounds.docs {
            let id = Self::message_id(m);
            let dead = state
                .store
                .iter()
                .find(|s| s.doc.name == Self::message_name(m) && s.doc.is_dead_lettered());
            let line = match state.store.iter().find(|s| s.doc.id == id) {
                None => match dead.map(|s| &s.doc.state) {
                    Some(MessageState::DeadLettered { reason }) => {
                        format!(
                            "DEAD-LETTERED as {} ({reason})",
                            dead.map_or("", |d| d.doc.id.as_str())
                        )
                    }
                    _ if state.ghost.discarded & (1 << m) != 0 => {
                        "its dead letter DELETED by the operator".to_string()
                    }
                    _ => "completed (deleted)".to_string(),
                },
                Some(stored) => {
                    let status = match &stored.doc.state {
                        MessageState::Pending => "pending".to_string(),
                        MessageState::InProgress { lock } => format!("locked by {}", lock.token),
                        MessageState::DeadLettered { reason } => {
                            format!("DEAD-LETTERED ({reason})")
                        }
                        MessageState::PartSet {
                            count,
                            sweeping,
                            named_by,
                            ..
                        } => format!(
                            "head of {count} parts{}{}",
                            match named_by {
                                Naming::Unrecorded => String::new(),
                                Naming::Nobody => ", named by nobody".to_string(),
                                Naming::By(doc) => format!(", named by {doc}"),
                            },
                            if *sweeping { ", SWEEPING" } else { "" }
                        ),
                        MessageState::Part { index, .. } => format!("part {index}"),
                    };
                    format!(
                        "{status}, {:?}, dequeue count {}",
                        stored.etag, stored.doc.dequeue_count
                    )
                }
            };
            facts.insert(format!("message {id}"), line);
        }
        facts
    }
}
