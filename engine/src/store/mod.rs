//! The reference semantics of the store: a deterministic in-memory container with the
//! Cosmos DB operations the engine relies on.
//!
//! This module is the specification. The model checker and the simulator run against
//! it, and the Cosmos DB adapter is differential-tested against it. Every write issues
//! a fresh etag; conditional writes compare etags for equality only.
//!
//! Etags are fresh *per document*: each id counts its own versions, and the count
//! survives a delete, so a recreated document never repeats an etag a reader may still
//! hold. Etags are never compared across documents, so nothing needs them globally
//! unique; in exchange, writes to different documents commute exactly, which keeps
//! model checking small.
//!
//! ```
//! use leasehold_engine::store::{Container, StoreError};
//! use leasehold_engine::lease::{LeaseDocument, Record};
//! use leasehold_engine::{LeaseToken, WallTime};
//!
//! let mut leases = Container::<Record>::new();
//! let doc = Record::Lease(LeaseDocument::new("cfp.", LeaseToken::from("0"), WallTime(0)));
//! let etag = leases.create(doc.clone())?;
//! assert_eq!(leases.create(doc.clone()), Err(StoreError::Conflict));
//!
//! let fresh = leases.replace(doc.clone(), Some(&etag))?;
//! // The old etag is stale now: a second writer holding it is refused.
//! assert_eq!(leases.replace(doc, Some(&etag)), Err(StoreError::PreconditionFailed));
//! assert_ne!(fresh, etag);
//! # Ok::<(), StoreError>(())
//! ```

mod batch;
mod error;
mod op;
mod query;
mod replicated;

pub use batch::{BatchOp, BatchOutcome, BatchResponse, check_batch};
pub use error::{BadRequest, Denial, StatusCode, StoreError};
pub use op::{Op, Reply, StoreResult};
pub use query::{Compare, Condition, FieldPath, FieldPathError, Query, Value, json_field};
pub use replicated::{Reader, Replicated};

use crate::ids::{DocId, Etag, PartitionKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;

/// A document the store can hold.
pub trait Document: Clone + Eq + Hash + Debug {
    /// The path of the partition key in the stored document, as a Cosmos DB
    /// container declares it (`/id`): a container partitioned otherwise cannot hold
    /// these documents, and a store checks it before use.
    const PARTITION_KEY_PATH: &'static str;

    /// The document's `id`.
    fn id(&self) -> &DocId;
    /// The document's partition key value.
    fn partition_key(&self) -> PartitionKey;
    /// The document's size as stored, in bytes, for the store's size limit.
    fn stored_size(&self) -> usize;
    /// The comparable value at `path` of the document as stored (its JSON form), for
    /// [`Query`] filters and ordering; `None` if absent or not comparable.
    /// [`json_field`] implements it for any serializable document.
    fn field(&self, path: &FieldPath) -> Option<Value>;
}

/// A document together with the etag of the write that produced it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stored<D> {
    /// The document.
    pub doc: D,
    /// Its current etag.
    pub etag: Etag,
}

/// Limits a store enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The largest document accepted, in bytes (Cosmos DB: 2 MB).
    pub max_document_bytes: usize,
    /// The most operations in one transactional batch (Cosmos DB: 100).
    pub max_batch_operations: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_document_bytes: 2 * 1024 * 1024,
            max_batch_operations: 100,
        }
    }
}

impl Limits {
    /// 413 if `doc` is larger than these limits allow. A store adapter calls it so
    /// that every store refuses the same documents alike.
    pub fn check_size<D: Document>(&self, doc: &D) -> Result<(), StoreError> {
        let size = doc.stored_size();
        if size > self.max_document_bytes {
            return Err(StoreError::TooLarge {
                size,
                limit: self.max_document_bytes,
            });
        }
        Ok(())
    }
}

/// Documents are keyed by id first so that "read all by id prefix" is a range scan.
type Key = (DocId, PartitionKey);

/// A deterministic in-memory container.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Container<D> {
    items: BTreeMap<Key, Stored<D>>,
    /// Versions written per key, kept after a delete.
    versions: BTreeMap<Key, u64>,
    limits: Limits,
}

impl<D: Document> Default for Container<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Document> Container<D> {
    /// An empty container with Cosmos DB's limits.
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    /// An empty container with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        Container {
            items: BTreeMap::new(),
            versions: BTreeMap::new(),
            limits,
        }
    }

    /// The limits this container enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// How many documents the container holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the container holds no documents.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every document, ordered by id.
    pub fn iter(&self) -> impl Iterator<Item = &Stored<D>> {
        self.items.values()
    }

    /// Creates `doc` if no document with its id and partition key exists (409 otherwise).
    pub fn create(&mut self, doc: D) -> Result<Etag, StoreError> {
        self.check_size(&doc)?;
        let key = key_of(&doc);
        if self.items.contains_key(&key) {
            return Err(StoreError::Conflict);
        }
        Ok(self.put(key, doc))
    }

    /// Reads one document (404 if missing).
    pub fn read(&self, pk: &PartitionKey, id: &DocId) -> Result<Stored<D>, StoreError> {
        self.items
            .get(&(id.clone(), pk.clone()))
            .cloned()
            .ok_or(StoreError::NotFound)
    }

    /// Reads every document whose id starts with `prefix`, across partition keys,
    /// ordered by id.
    pub fn read_all(&self, prefix: &str) -> Vec<Stored<D>> {
        // Counting first sizes the reply once: growing it by doubling copied a large
        // table's documents about twice over.
        let mut out = Vec::with_capacity(self.iter_from(prefix).count());
        out.extend(self.iter_from(prefix).cloned());
        out
    }

    /// The documents whose id starts with `prefix`, ordered by id.
    fn iter_from<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Stored<D>> + 'a {
        let start = (DocId::from(prefix), PartitionKey::from(""));
        self.items
            .range(start..)
            .take_while(move |((id, _), _)| id.as_str().starts_with(prefix))
            .map(|(_, stored)| stored)
    }

    /// Replaces an existing document. With `if_match`, only if its etag is still the
    /// given one (412 otherwise); without, unconditionally. 404 if missing.
    pub fn replace(&mut self, doc: D, if_match: Option<&Etag>) -> Result<Etag, StoreError> {
        self.check_size(&doc)?;
        let key = key_of(&doc);
        let current = self.items.get(&key).ok_or(StoreError::NotFound)?;
        if if_match.is_some_and(|expected| *expected != current.etag) {
            return Err(StoreError::PreconditionFailed);
        }
        Ok(self.put(key, doc))
    }

    /// Deletes a document. With `if_match`, only if its etag is still the given one
    /// (412 otherwise). 404 if missing.
    pub fn delete(
        &mut self,
        pk: &PartitionKey,
        id: &DocId,
        if_match: Option<&Etag>,
    ) -> Result<(), StoreError> {
        let key = (id.clone(), pk.clone());
        let current = self.items.get(&key).ok_or(StoreError::NotFound)?;
        if if_match.is_some_and(|expected| *expected != current.etag) {
            return Err(StoreError::PreconditionFailed);
        }
        self.items.remove(&key);
        Ok(())
    }

    fn check_size(&self, doc: &D) -> Result<(), StoreError> {
        self.limits.check_size(doc)
    }

    /// Stores `doc` under a fresh etag.
    fn put(&mut self, key: Key, doc: D) -> Etag {
        let version = self.versions.entry(key.clone()).or_insert(0);
        *version += 1;
        let etag = Etag::seq(*version);
        let stored = Stored {
            doc,
            etag: etag.clone(),
        };
        self.items.insert(key, stored);
        etag
    }
}

/// The length of `value` as JSON, the way the store measures a document.
pub fn json_size<T: Serialize>(value: &T) -> usize {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        // Serializing plain strings and integers cannot fail; refuse rather than guess.
        Err(_) => usize::MAX,
    }
}

/// Counts bytes instead of storing them.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn key_of<D: Document>(doc: &D) -> Key {
    (doc.id().clone(), doc.partition_key())
}
