//! Store operations as data, so that a state machine can emit them and a driver can
//! carry them to any store, real or simulated.

use super::{BatchOp, BatchResponse, Container, Document, Query, StoreError, Stored};
use crate::ids::{DocId, Etag, PartitionKey};
use serde::{Deserialize, Serialize};

/// One store operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op<D> {
    /// Create if absent.
    Create(D),
    /// Read one document.
    Read {
        /// Partition key.
        pk: PartitionKey,
        /// Document id.
        id: DocId,
    },
    /// Read every document whose id starts with `prefix`.
    ReadAll {
        /// The id prefix.
        prefix: String,
    },
    /// A selective read of one partition key.
    Query(Query),
    /// Replace, optionally only if the etag still matches.
    Replace {
        /// The new document.
        doc: D,
        /// The etag the current document must still have; `None` writes blindly.
        if_match: Option<Etag>,
    },
    /// Delete, optionally only if the etag still matches.
    Delete {
        /// Partition key.
        pk: PartitionKey,
        /// Document id.
        id: DocId,
        /// The etag the current document must still have.
        if_match: Option<Etag>,
    },
    /// A transactional batch on one partition key.
    Batch {
        /// Partition key shared by every operation.
        pk: PartitionKey,
        /// The operations, applied in order, all or nothing.
        ops: Vec<BatchOp<D>>,
    },
}

impl<D> Op<D> {
    /// Whether the operation may change the store.
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Read { .. } | Op::ReadAll { .. } | Op::Query(_))
    }

    /// The etag this operation is conditional on, if it is a single conditional write.
    pub fn if_match(&self) -> Option<&Etag> {
        match self {
            Op::Replace { if_match, .. } | Op::Delete { if_match, .. } => if_match.as_ref(),
            _ => None,
        }
    }
}

impl<D: Document> Op<D> {
    /// The document and etag this operation is conditional on, if it is a single
    /// conditional write: what a 412 to it refuses.
    pub fn conditional_on(&self) -> Option<(DocId, &Etag)> {
        let id = match self {
            Op::Replace { doc, .. } => doc.id().clone(),
            Op::Delete { id, .. } => id.clone(),
            _ => return None,
        };
        self.if_match().map(|etag| (id, etag))
    }
}

/// What the store answers an [`Op`]: its reply, or why it refused or failed.
pub type StoreResult<D> = Result<Reply<D>, StoreError>;

/// The successful reply to an [`Op`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reply<D> {
    /// 201: created with this etag.
    Created(Etag),
    /// 200: the document read.
    Read(Stored<D>),
    /// 200: the documents read, ordered by id.
    ReadAll(Vec<Stored<D>>),
    /// 200: the documents a query selected, in its order.
    Query(Vec<Stored<D>>),
    /// 200: replaced; the new etag.
    Replaced(Etag),
    /// 204: deleted.
    Deleted,
    /// 200 or 207: see the batch response.
    Batch(BatchResponse<D>),
}

impl<D: Document> Container<D> {
    /// Executes one operation.
    ///
    /// ```
    /// use leasehold_engine::store::{Container, Op, Reply};
    /// use leasehold_engine::lease::{LeaseDocument, Record};
    /// use leasehold_engine::{LeaseToken, WallTime};
    ///
    /// let mut store = Container::<Record>::new();
    /// let doc = Record::Lease(LeaseDocument::new("p.", LeaseToken::from("7"), WallTime(0)));
    /// assert!(matches!(store.execute(Op::Create(doc)), Ok(Reply::Created(_))));
    /// let Ok(Reply::ReadAll(found)) = store.execute(Op::ReadAll { prefix: "p.".into() }) else {
    ///     unreachable!()
    /// };
    /// assert_eq!(found.len(), 1);
    /// ```
    pub fn execute(&mut self, op: Op<D>) -> Result<Reply<D>, StoreError> {
        match op {
            Op::Create(doc) => self.create(doc).map(Reply::Created),
            Op::Read { pk, id } => self.read(&pk, &id).map(Reply::Read),
            Op::ReadAll { prefix } => Ok(Reply::ReadAll(self.read_all(&prefix))),
            Op::Query(query) => Ok(Reply::Query(self.query(&query))),
            Op::Replace { doc, if_match } => {
                self.replace(doc, if_match.as_ref()).map(Reply::Replaced)
            }
            Op::Delete { pk, id, if_match } => self
                .delete(&pk, &id, if_match.as_ref())
                .map(|()| Reply::Deleted),
            Op::Batch { pk, ops } => self.batch(&pk, ops).map(Reply::Batch),
        }
    }
}
