//! What goes into a queue consumer and what comes out of it.

use super::{Claim, ClaimKey, Message, MessageName, PartSetId};
use crate::ids::{DocId, RequestId};
use crate::lock::LockToken;
use crate::store::{Op, Reply, StoreError, Stored};
use crate::time::{LocalTime, Millis};
use std::fmt;

/// A command or a store answer for a [`Consumer`](super::Consumer).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// Store a new message, visible after `delay`.
    Enqueue {
        /// The message's name: enqueueing a name twice stores one message.
        name: MessageName,
        /// The payload.
        payload: String,
        /// How long it stays invisible.
        delay: Millis,
    },
    /// Store a new message whose payload goes to the user's claim store
    /// ([`super::claim`]): its head is written, then [`Output::StoreClaim`] asks the
    /// driver to store the payload, then the message is written.
    EnqueueClaimed {
        /// The message's name: enqueueing a name twice stores one message.
        name: MessageName,
        /// The payload's length in bytes.
        bytes: u64,
        /// The payload's hash ([`payload_hash`](super::payload_hash)).
        hash: String,
        /// How long it stays invisible.
        delay: Millis,
    },
    /// The driver stored a claim-checked payload ([`Output::StoreClaim`]), or failed
    /// to (`stored: false`, which ends the enqueue with nothing of it visible and asks
    /// for the key's discard, in case the failed put lands after all).
    ClaimStored {
        /// The key it was asked to store.
        key: ClaimKey,
        /// Whether the claim store took the payload.
        stored: bool,
    },
    /// The driver deleted a claim-checked payload ([`Output::DropClaim`]), or failed
    /// to (`dropped: false`: the set's head stays, and a later sweep asks again).
    ClaimDropped {
        /// The key it was asked to delete.
        key: ClaimKey,
        /// Whether the claim store no longer holds it (deleted now, or absent).
        dropped: bool,
    },
    /// Lock and deliver up to `max` messages.
    Dequeue {
        /// The batch size.
        max: usize,
    },
    /// Delete a delivered message, only if this consumer's lock is still current.
    Complete(Handle),
    /// Extend the lock on a delivered message.
    Renew(Handle),
    /// Give a delivered message back, visible again after `delay`.
    Abandon {
        /// The delivery.
        delivery: Handle,
        /// How long it stays invisible.
        delay: Millis,
    },
    /// Give up on a delivered message for good: move it to the dead letters.
    DeadLetter {
        /// The delivery.
        delivery: Handle,
        /// Why, kept on the dead letter.
        reason: String,
    },
    /// List up to `max` of the queue's dead letters, ordered by id.
    ListDeadLetters {
        /// The most returned.
        max: usize,
    },
    /// Move a dead letter back into the queue as a new pending message, only if it is
    /// still as listed and its name is free.
    Requeue(Stored<Message>),
    /// Delete a dead letter for good, only if it is still as listed, with its large
    /// payload: one batch deletes the dead letter and rewrites its part set's head to
    /// name nobody, then the parts (or the claim-checked payload) go, as after a
    /// completion. A delete cut short leaves the set to the sweep.
    DeleteDeadLetter(Stored<Message>),
    /// Remove part sets left behind ([`super::parts`]): read up to `max` heads, after
    /// the last one the previous sweep read, and sweep those seen unchanged for
    /// `orphan_after` that no message names. Call it regularly: a set is swept by a
    /// consumer that has watched it that long.
    Sweep {
        /// The most heads read.
        max: usize,
    },
    /// The store answered request `id`.
    Response {
        /// The request answered.
        id: RequestId,
        /// What the store said.
        result: Result<Reply<Message>, StoreError>,
    },
}

/// Which delivery a handler acts on: the message and the lock it was delivered
/// under. Calls name both because one consumer may deliver a message again after
/// the lock of an earlier delivery ran out: a handler that overran its authority
/// must not complete, renew or give back the later delivery another handler works
/// on. A call whose lock this consumer no longer holds is refused `NotHeld`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Handle {
    /// The message's document id.
    pub message: DocId,
    /// The lock of this delivery.
    pub lock: LockToken,
}

/// A message handed to this consumer under a lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Delivery {
    /// The message's document id.
    pub id: DocId,
    /// The message's name.
    pub name: MessageName,
    /// The payload; empty for a claim check, whose payload the driver fetches.
    pub payload: String,
    /// Where the payload is, when it was claim-checked ([`super::claim`]).
    pub claim: Option<Claim>,
    /// How many times it has been delivered, this time included.
    pub dequeue_count: u32,
    /// The lock.
    pub lock: LockToken,
    /// Act on the message only before this local time, unless renewed.
    pub authority_until: LocalTime,
}

impl Delivery {
    /// What complete, renew, abandon and dead-letter name: this delivery, not
    /// whichever lock the consumer holds on the message when they come.
    ///
    /// ```
    /// # use leasehold_engine::queue::{Delivery, Handle};
    /// fn complete(delivery: &Delivery) -> leasehold_engine::queue::Input {
    ///     leasehold_engine::queue::Input::Complete(delivery.handle())
    /// }
    /// ```
    pub fn handle(&self) -> Handle {
        Handle {
            message: self.id.clone(),
            lock: self.lock.clone(),
        }
    }
}

/// What a consumer asks its driver to do, or tells it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// Send this request to the store and answer with [`Input::Response`].
    Request(QueueRequest),
    /// A message is stored. `already_present` means the name was taken, typically by
    /// an earlier attempt of this enqueue whose outcome was unknown.
    Enqueued {
        /// The message.
        name: MessageName,
        /// Whether the store already had a message of this name.
        already_present: bool,
    },
    /// Store this claim-checked payload in the claim store under `key`, then answer
    /// with [`Input::ClaimStored`]. The enqueue waits for that answer.
    StoreClaim(ClaimKey),
    /// Delete the payload under this key from the claim store (absent is fine), then
    /// answer with [`Input::ClaimDropped`]: its message is completed, or its set was
    /// swept. The set's head is deleted only after that answer.
    DropClaim(ClaimKey),
    /// Delete the payload under this key from the claim store, if it is there, and
    /// answer nothing: an enqueue's put failed (it may still land), was answered past
    /// its head's authority, or its message was refused because its set was swept, so
    /// no message will ever name the key.
    DiscardClaim(ClaimKey),
    /// A message is delivered under a lock.
    Delivered(Delivery),
    /// A dequeue has finished: every claim it sent was answered.
    DequeueFinished {
        /// Messages delivered.
        delivered: usize,
        /// Poison messages moved to the dead letters instead.
        dead_lettered: usize,
    },
    /// A message is completed (deleted).
    Completed(DocId),
    /// A lock is renewed.
    Renewed {
        /// The message.
        message: DocId,
        /// The new end of authority.
        authority_until: LocalTime,
    },
    /// A message is given back.
    Abandoned(DocId),
    /// A message is dead-lettered, by its holder or because it was delivered the
    /// maximum number of times.
    DeadLettered {
        /// The message.
        message: DocId,
        /// Why.
        reason: String,
    },
    /// The dead letters asked for, with the etags a requeue needs.
    DeadLetters(Vec<Stored<Message>>),
    /// A part set left behind is removed.
    Swept {
        /// The set.
        set: PartSetId,
        /// Its parts, now deleted.
        parts: u32,
    },
    /// A sweep has finished: every request it sent was answered.
    SweepFinished {
        /// Heads read.
        read: usize,
        /// Sets removed.
        swept: usize,
    },
    /// A dead letter is deleted for good. Its payload's parts are deleted next (or
    /// swept, if that is cut short).
    DeadLetterDeleted(DocId),
    /// A dead letter is back in the queue as a new pending message.
    Requeued {
        /// The dead letter, now deleted.
        dead_letter: DocId,
        /// The live message created.
        message: DocId,
    },
    /// An operation failed; the message is left as the store has it.
    Failed {
        /// The message (its document id, or its name for an enqueue).
        message: DocId,
        /// The operation.
        intent: QueueIntent,
        /// Why.
        error: QueueError,
    },
}

/// Why a consumer sends a store request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueIntent {
    /// Store a new message.
    Enqueue,
    /// Read the visible pending messages for a dequeue.
    Scan,
    /// Read the locked messages for a dequeue, to judge their locks.
    Watch,
    /// Lock a message for delivery.
    Claim,
    /// Move a message delivered too often to the dead letters.
    Poison,
    /// Delete a completed message.
    Complete,
    /// Extend a lock.
    Renew,
    /// Give a message back.
    Abandon,
    /// Dead-letter a message on its holder's request.
    DeadLetter,
    /// List the dead letters.
    ListDeadLetters,
    /// Move a dead letter back into the queue.
    Requeue,
    /// Delete a dead letter for good.
    DeleteDeadLetter,
    /// Write a large payload's part set: its head, a part, or the message that names it.
    WritePart,
    /// Read a part of a delivered message's payload.
    ReadPart,
    /// Delete a part set, after its message completed or in a sweep.
    DeletePart,
    /// Find part sets left behind, check that no message names them, mark them.
    Sweep,
}

impl QueueIntent {
    /// The intent's name in traces and reports (`claim`, `dead-letter`).
    pub fn name(self) -> &'static str {
        match self {
            QueueIntent::Enqueue => "enqueue",
            QueueIntent::Scan => "scan",
            QueueIntent::Watch => "watch",
            QueueIntent::Claim => "claim",
            QueueIntent::Poison => "poison",
            QueueIntent::Complete => "complete",
            QueueIntent::Renew => "renew",
            QueueIntent::Abandon => "abandon",
            QueueIntent::DeadLetter => "dead-letter",
            QueueIntent::ListDeadLetters => "list-dead-letters",
            QueueIntent::Requeue => "requeue",
            QueueIntent::DeleteDeadLetter => "delete-dead-letter",
            QueueIntent::WritePart => "write-part",
            QueueIntent::ReadPart => "read-part",
            QueueIntent::DeletePart => "delete-part",
            QueueIntent::Sweep => "sweep",
        }
    }
}

impl std::fmt::Display for QueueIntent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A store request from a consumer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueRequest {
    /// Echo this in the response.
    pub id: RequestId,
    /// Why it is sent.
    pub intent: QueueIntent,
    /// The lock the request acts under, for writes by a holder.
    pub lock: Option<LockToken>,
    /// The operation.
    pub op: Op<Message>,
}

/// Why a queue operation was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueueError {
    /// The message was re-locked, completed or dead-lettered by someone else since this
    /// consumer's lock: this write changed nothing.
    LockLost(DocId),
    /// A completion found the message gone after its lock stopped excluding other
    /// consumers: an earlier attempt of this completion whose answer was lost (or
    /// that the SDK sent again) may have deleted it, or another consumer's after this
    /// lock ran out. Either way the message needs no more work from this consumer.
    /// (Found gone while the lock still excluded everyone else, only this
    /// completion can have deleted it, and it is answered `Completed`.)
    Gone(DocId),
    /// This consumer holds no lock on the message under the delivery named: it never
    /// did, its lock was lost, or its authority ran out and a dequeue let the lock go
    /// (and may have taken the message again, under a new lock for a new delivery).
    NotHeld(DocId),
    /// The message would exceed the store's document size limit, and is not kept in
    /// parts (`large` is off), or its payload exceeds `large.max_bytes`.
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// An enqueue's part set was swept (or changed) before the message naming it was
    /// written, or, for a claim check, may have been: its writes paused past
    /// `orphan_after` (less the drift allowance and margin). Nothing was enqueued;
    /// enqueue again.
    PartsSwept(MessageName),
    /// A claim check was asked of a consumer without `large` settings: nothing
    /// would ever sweep a claim-checked payload left behind.
    NoSweep,
    /// A dequeue, or a sweep, is still running.
    Busy,
    /// A requeue, or a dead letter's delete, was given a document that is not one of
    /// this queue's dead letters.
    NotADeadLetter(DocId),
    /// A requeue found a live message of the same name, and this request changed
    /// nothing. The message may be the requeue's own, if an earlier attempt's outcome
    /// was unknown: list the dead letters to tell.
    NameTaken(MessageName),
    /// A requeue, or a dead letter's delete, found the dead letter changed or gone
    /// since it was listed: this request changed nothing.
    DeadLetterChanged(DocId),
    /// A dead letter's delete found it gone. An earlier attempt of this very delete
    /// may have removed it (its answer lost, or the SDK sending it again), or another
    /// delete, or a requeue: nobody can tell which. Either way it needs no more work
    /// here, and a payload it left is the sweep's.
    DeadLetterGone(DocId),
    /// No request with this id is outstanding.
    UnknownRequest(RequestId),
    /// The store failed; with an ambiguous error the write may have been applied.
    Store(StoreError),
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::LockLost(id) => write!(
                f,
                "the lock on message {id} is lost: another consumer re-locked, completed or \
                 dead-lettered it; nothing was changed"
            ),
            QueueError::NotHeld(id) => write!(
                f,
                "this consumer holds no lock on message {id} under this delivery's lock"
            ),
            QueueError::Gone(id) => write!(
                f,
                "message {id} is gone, deleted by this completion's earlier attempt or by \
                 another consumer after this lock ran out; it needs no more work here"
            ),
            QueueError::TooLarge { size, limit } => write!(
                f,
                "the message is {size} bytes, over the limit of {limit}; it was not enqueued"
            ),
            QueueError::PartsSwept(name) => write!(
                f,
                "the parts of message {name} were swept before it was written (its writes \
                 paused past the orphan bound); nothing was enqueued"
            ),
            QueueError::NoSweep => f.write_str(
                "claim checks need the queue's `large` settings, whose sweep removes \
                 payloads left behind; nothing was enqueued",
            ),
            QueueError::Busy => f.write_str("a dequeue or a sweep is still running"),
            QueueError::NotADeadLetter(id) => {
                write!(
                    f,
                    "{id} is not a dead letter of this queue; nothing was changed"
                )
            }
            QueueError::NameTaken(name) => write!(
                f,
                "a live message named {name} exists, so this requeue changed nothing (an \
                 earlier attempt whose outcome was unknown may have made it)"
            ),
            QueueError::DeadLetterGone(id) => write!(
                f,
                "dead letter {id} is gone: removed by an earlier attempt of this delete, by \
                 another delete or by a requeue; it needs no more work here"
            ),
            QueueError::DeadLetterChanged(id) => write!(
                f,
                "dead letter {id} changed or was removed since it was listed; nothing was changed"
            ),
            QueueError::UnknownRequest(id) => write!(f, "no request {id} is outstanding"),
            QueueError::Store(e) => write!(f, "store: {e}"),
        }
    }
}

impl std::error::Error for QueueError {}
