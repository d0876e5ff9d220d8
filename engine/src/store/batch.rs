//! Transactional batches: several operations on one partition key, all or nothing.
//!
//! As in Cosmos DB, a batch that fails still returns a response (status 207): the
//! operation that failed carries its own status, and every other operation carries
//! 424 (failed dependency). Nothing of a failed batch is applied.

use super::{Container, Document, Key, Limits, StatusCode, StoreError, Stored, key_of};
use crate::ids::{DocId, Etag, PartitionKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One operation of a transactional batch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BatchOp<D> {
    /// Create if absent (409 otherwise).
    Create(D),
    /// Create or overwrite, unconditionally.
    Upsert(D),
    /// Read one document of the batch's partition key.
    Read(DocId),
    /// Replace, optionally only if the etag still matches.
    Replace {
        /// The new document.
        doc: D,
        /// The etag the current document must still have.
        if_match: Option<Etag>,
    },
    /// Delete, optionally only if the etag still matches.
    Delete {
        /// The document's id.
        id: DocId,
        /// The etag the current document must still have.
        if_match: Option<Etag>,
    },
}

/// The result of one operation of a batch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BatchOutcome<D> {
    /// This operation's status: 200, 201 or 204 on success; its own error status if
    /// it is the one that failed; 424 if another operation failed.
    pub status: StatusCode,
    /// The etag after a successful write or read.
    pub etag: Option<Etag>,
    /// The document a successful read returned.
    pub doc: Option<D>,
}

/// The response to a transactional batch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BatchResponse<D> {
    /// 200 if every operation was applied, 207 if none was.
    pub status: StatusCode,
    /// One outcome per operation, in order.
    pub outcomes: Vec<BatchOutcome<D>>,
}

impl<D> BatchResponse<D> {
    /// Whether the whole batch was applied.
    pub fn is_success(&self) -> bool {
        self.status == StatusCode::Ok
    }

    /// The index and status of the operation that made the batch fail.
    pub fn failure(&self) -> Option<(usize, StatusCode)> {
        self.outcomes
            .iter()
            .enumerate()
            .find(|(_, o)| !o.status.is_success() && o.status != StatusCode::FailedDependency)
            .map(|(i, o)| (i, o.status))
    }
}

impl<D: Document> Container<D> {
    /// Executes `ops` atomically on partition key `pk`.
    ///
    /// A malformed batch (empty, too many operations, or an operation on another
    /// partition key) is rejected whole with 400 and never reaches execution.
    pub fn batch(
        &mut self,
        pk: &PartitionKey,
        ops: Vec<BatchOp<D>>,
    ) -> Result<BatchResponse<D>, StoreError> {
        self.validate_batch(pk, &ops)?;
        let total = ops.len();
        let mut staged = Staged::default();
        let mut outcomes = Vec::with_capacity(total);
        for (index, op) in ops.into_iter().enumerate() {
            match self.stage(pk, op, &mut staged) {
                Ok(outcome) => outcomes.push(outcome),
                // Nothing staged was ever visible, etags included.
                Err(error) => return Ok(failed(total, index, &error)),
            }
        }
        self.versions.extend(staged.versions);
        for (key, value) in staged.items {
            match value {
                Some(stored) => {
                    self.items.insert(key, stored);
                }
                None => {
                    self.items.remove(&key);
                }
            }
        }
        Ok(BatchResponse {
            status: StatusCode::Ok,
            outcomes,
        })
    }

    fn validate_batch(&self, pk: &PartitionKey, ops: &[BatchOp<D>]) -> Result<(), StoreError> {
        check_batch(&self.limits, pk, ops)
    }

    /// Applies one operation to the staging area, seeing earlier staged operations.
    fn stage(
        &self,
        pk: &PartitionKey,
        op: BatchOp<D>,
        staged: &mut Staged<D>,
    ) -> Result<BatchOutcome<D>, StoreError> {
        let current = |key: &Key, staged: &Staged<D>| match staged.items.get(key) {
            Some(value) => value.clone(),
            None => self.items.get(key).cloned(),
        };
        match op {
            BatchOp::Read(id) => {
                let stored = current(&(id, pk.clone()), staged).ok_or(StoreError::NotFound)?;
                Ok(outcome(StatusCode::Ok, Some(stored.etag), Some(stored.doc)))
            }
            BatchOp::Create(doc) => {
                self.check_size(&doc)?;
                let key = key_of(&doc);
                if current(&key, staged).is_some() {
                    return Err(StoreError::Conflict);
                }
                Ok(self.write(key, doc, staged, StatusCode::Created))
            }
            BatchOp::Upsert(doc) => {
                self.check_size(&doc)?;
                let key = key_of(&doc);
                let status = if current(&key, staged).is_some() {
                    StatusCode::Ok
                } else {
                    StatusCode::Created
                };
                Ok(self.write(key, doc, staged, status))
            }
            BatchOp::Replace { doc, if_match } => {
                self.check_size(&doc)?;
                let key = key_of(&doc);
                let existing = current(&key, staged).ok_or(StoreError::NotFound)?;
                if if_match.is_some_and(|e| e != existing.etag) {
                    return Err(StoreError::PreconditionFailed);
                }
                Ok(self.write(key, doc, staged, StatusCode::Ok))
            }
            BatchOp::Delete { id, if_match } => {
                let key = (id, pk.clone());
                let existing = current(&key, staged).ok_or(StoreError::NotFound)?;
                if if_match.is_some_and(|e| e != existing.etag) {
                    return Err(StoreError::PreconditionFailed);
                }
                staged.items.insert(key, None);
                Ok(outcome(StatusCode::NoContent, None, None))
            }
        }
    }

    fn write(
        &self,
        key: Key,
        doc: D,
        staged: &mut Staged<D>,
        status: StatusCode,
    ) -> BatchOutcome<D> {
        let written = staged
            .versions
            .get(&key)
            .or_else(|| self.versions.get(&key))
            .copied()
            .unwrap_or(0);
        let etag = Etag::seq(written + 1);
        staged.versions.insert(key.clone(), written + 1);
        let stored = Stored {
            doc,
            etag: etag.clone(),
        };
        staged.items.insert(key, Some(stored));
        outcome(status, Some(etag), None)
    }
}

/// What a batch has done so far, visible only to itself until it commits.
struct Staged<D> {
    items: BTreeMap<Key, Option<Stored<D>>>,
    versions: BTreeMap<Key, u64>,
}

impl<D> Default for Staged<D> {
    fn default() -> Self {
        Staged {
            items: BTreeMap::new(),
            versions: BTreeMap::new(),
        }
    }
}

fn failed<D>(total: usize, index: usize, error: &StoreError) -> BatchResponse<D> {
    let outcomes = (0..total)
        .map(|i| {
            let status = if i == index {
                error.status()
            } else {
                StatusCode::FailedDependency
            };
            outcome(status, None, None)
        })
        .collect();
    BatchResponse {
        status: StatusCode::MultiStatus,
        outcomes,
    }
}

fn outcome<D>(status: StatusCode, etag: Option<Etag>, doc: Option<D>) -> BatchOutcome<D> {
    BatchOutcome { status, etag, doc }
}

/// Checks a transactional batch the way the store does before executing it: 400 if it
/// is empty, longer than `limits` allow, or writes under another partition key. A
/// store adapter calls it so that every store rejects the same batches alike.
pub fn check_batch<D: Document>(
    limits: &Limits,
    pk: &PartitionKey,
    ops: &[BatchOp<D>],
) -> Result<(), StoreError> {
    use super::BadRequest;
    if ops.is_empty() {
        return Err(StoreError::BadRequest(BadRequest::EmptyBatch));
    }
    if ops.len() > limits.max_batch_operations {
        return Err(StoreError::BadRequest(BadRequest::BatchTooLarge {
            operations: ops.len(),
            limit: limits.max_batch_operations,
        }));
    }
    // Cosmos DB caps a batch's request, like a document, at 2 MB.
    let size: usize = ops
        .iter()
        .map(|op| match op {
            BatchOp::Create(doc) | BatchOp::Upsert(doc) | BatchOp::Replace { doc, .. } => {
                doc.stored_size()
            }
            BatchOp::Read(_) | BatchOp::Delete { .. } => 0,
        })
        .fold(0, usize::saturating_add);
    if size > limits.max_document_bytes {
        return Err(StoreError::TooLarge {
            size,
            limit: limits.max_document_bytes,
        });
    }
    for (index, op) in ops.iter().enumerate() {
        let doc_pk = match op {
            BatchOp::Create(doc) | BatchOp::Upsert(doc) | BatchOp::Replace { doc, .. } => {
                Some(doc.partition_key())
            }
            BatchOp::Read(_) | BatchOp::Delete { .. } => None,
        };
        if doc_pk.is_some_and(|p| p != *pk) {
            return Err(StoreError::BadRequest(BadRequest::CrossPartitionBatch {
                index,
            }));
        }
    }
    Ok(())
}
