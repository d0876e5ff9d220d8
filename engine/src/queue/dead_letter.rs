//! Moving a message to the dead letters and back: each one transactional batch of a
//! create and a conditional delete, and how to read its reply.

use super::Message;
use super::parts::{Naming, head_of};
use crate::ids::{Etag, PartitionKey};
use crate::lock::LockToken;
use crate::store::{BadRequest, BatchOp, Op, Reply, StatusCode, StoreError, Stored};
use crate::time::{Millis, WallTime};

/// One batch that creates `message`'s dead letter under its own id and deletes the
/// message if it is still at `etag`: the dead letter leaves the messages a dequeue
/// reads, and its name is free for a new message. A large payload's head is
/// rewritten in the same batch to name the dead letter (`record_head`: unless the
/// consumer writes as versions before the record did).
pub(super) fn move_op(
    pk: PartitionKey,
    message: Message,
    delivery: &LockToken,
    etag: Etag,
    reason: String,
    record_head: bool,
) -> Op<Message> {
    let id = message.id.clone();
    let dead = message.into_dead_letter(delivery, reason);
    let head = head_upsert(&dead, record_head);
    let mut ops = vec![
        BatchOp::Create(dead),
        BatchOp::Delete {
            id,
            if_match: Some(etag),
        },
    ];
    ops.extend(head);
    Op::Batch { pk, ops }
}

/// The rewrite of `named`'s part-set head that names `named`, if it has parts.
///
/// An upsert rather than an if-match replace: the mover has not read the head, and
/// needs not. While a document names the set, only the batch that moves that
/// document writes the head (its producer is done, and a sweep marks only a head
/// that names nobody), and that batch is itself conditional on the document.
pub(super) fn head_upsert(named: &Message, record_head: bool) -> Option<BatchOp<Message>> {
    if !record_head {
        return None;
    }
    head_of(named, Naming::By(named.id.clone())).map(BatchOp::Upsert)
}

/// The write that puts `dead_letter` back as a live message visible at `now`: a batch
/// that creates the message and deletes the dead letter if unchanged. A dead letter
/// kept under the live id, as versions before dead letters had ids of their own left
/// them, is rewritten in place instead: a create would always find it there.
pub(super) fn requeue_op(
    pk: PartitionKey,
    dead_letter: Stored<Message>,
    now: WallTime,
    record_head: bool,
) -> Op<Message> {
    let Stored { doc, etag } = dead_letter;
    let live = doc.requeued(now);
    if live.id == doc.id {
        return Op::Replace {
            doc: live,
            if_match: Some(etag),
        };
    }
    let head = head_upsert(&live, record_head);
    let mut ops = vec![
        BatchOp::Create(live),
        BatchOp::Delete {
            id: doc.id,
            if_match: Some(etag),
        },
    ];
    ops.extend(head);
    Op::Batch { pk, ops }
}

/// A completion's write, or a dead letter's delete: the delete of `message` if it is
/// still at `etag`, in one batch with its part-set head rewritten to name nobody if
/// it has one (and `record_head`), so that a sweep may take the set once the delete
/// is cut short.
pub(super) fn delete_op(
    pk: PartitionKey,
    message: &Message,
    etag: Etag,
    record_head: bool,
) -> Op<Message> {
    let id = message.id.clone();
    let head = record_head
        .then(|| head_of(message, Naming::Nobody))
        .flatten();
    let Some(head) = head else {
        return Op::Delete {
            pk,
            id,
            if_match: Some(etag),
        };
    };
    Op::Batch {
        pk,
        ops: vec![
            BatchOp::Delete {
                id,
                if_match: Some(etag),
            },
            BatchOp::Upsert(head),
        ],
    }
}

/// The reply to [`delete_op`] as the reply of its delete: a batch's, read from its
/// first operation, or the delete's own as it is.
pub(super) fn delete_result(
    result: Result<Reply<Message>, StoreError>,
) -> Result<Reply<Message>, StoreError> {
    if !matches!(result, Ok(Reply::Batch(_))) {
        return result;
    }
    match outcome(&result) {
        Ok(()) => Ok(Reply::Deleted),
        Err(Failure::Created) => Err(StoreError::Conflict),
        Err(Failure::Target(e) | Failure::Request(e)) => Err(e),
    }
}

/// How a move failed.
pub(super) enum Failure {
    /// The create found its id taken (409).
    Created,
    /// The delete's or rewrite's target had changed (412) or was gone (404).
    Target(StoreError),
    /// The request as a whole failed, or its outcome is unknown.
    Request(StoreError),
}

/// Reads the reply to a move: a batch of a create and a conditional delete, or the
/// in-place rewrite of [`requeue_op`].
pub(super) fn outcome(result: &Result<Reply<Message>, StoreError>) -> Result<(), Failure> {
    let response = match result {
        Ok(Reply::Batch(response)) => response,
        Ok(Reply::Replaced(_)) => return Ok(()),
        Ok(_) => return Err(Failure::Request(StoreError::Unavailable)),
        Err(e @ (StoreError::PreconditionFailed | StoreError::NotFound)) => {
            return Err(Failure::Target(e.clone()));
        }
        Err(e) => return Err(Failure::Request(e.clone())),
    };
    if response.is_success() {
        return Ok(());
    }
    match response.failure() {
        Some((0, StatusCode::Conflict)) => Err(Failure::Created),
        Some((_, StatusCode::PreconditionFailed)) => {
            Err(Failure::Target(StoreError::PreconditionFailed))
        }
        Some((_, StatusCode::NotFound)) => Err(Failure::Target(StoreError::NotFound)),
        Some((_, status)) => Err(Failure::Request(error_of(status))),
        // Refused without saying which operation failed: nothing is known applied.
        None => Err(Failure::Request(StoreError::Unavailable)),
    }
}

/// Whether `result`, the answer to a move of a message to the dead letters, says
/// that another consumer got to the message first (it was claimed, changed or moved
/// since the version moved): the checkers count such a move lost, as the consumer
/// does.
///
/// ```
/// use leasehold_engine::queue::move_lost;
/// use leasehold_engine::store::StoreError;
///
/// assert!(move_lost(&Err(StoreError::NotFound)));
/// assert!(!move_lost(&Err(StoreError::Timeout)));
/// ```
pub fn move_lost(result: &Result<Reply<Message>, StoreError>) -> bool {
    matches!(outcome(result), Err(Failure::Target(_)))
}

/// The error a failed operation's status stands for, keeping whether a retry may help.
fn error_of(status: StatusCode) -> StoreError {
    match status {
        StatusCode::TooManyRequests => StoreError::Throttled {
            retry_after: Millis::ZERO,
        },
        StatusCode::RequestTimeout => StoreError::Timeout,
        StatusCode::ServiceUnavailable => StoreError::Unavailable,
        other => StoreError::BadRequest(BadRequest::Rejected(format!(
            "batch operation failed with {}",
            other.code()
        ))),
    }
}
