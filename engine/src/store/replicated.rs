//! Cosmos DB as its clients see it: writes are linearizable, reads are not.
//!
//! A single-write-region account applies every write at one replica set, in one
//! order, and checks if-match there: [`Container`] is that order. Reads run at the
//! account's default consistency, which is Session unless the account says otherwise.
//! Session promises each client reads its own writes and never goes back in time on
//! what it has seen, and nothing about documents it has not: a replica that lags may
//! answer with an older version of them, or without a document created since. Its
//! session token covers one physical partition, and a container partitioned by `/id`
//! spreads documents over many, so two documents read in one query may come from two
//! moments.
//!
//! [`Replicated`] keeps that rule once, for every driver: a read may describe any
//! retained version of each document (or its absence) no older than the newest this
//! reader has seen of it, chosen per document by the driver: the model checker
//! enumerates the choices, the simulator draws them. It also plays the SDK's own
//! retry of a write that was applied but whose answer was lost: the retry runs again
//! and answers as the second attempt finds the store ([`Replicated::retried`]).
//!
//! The rule is per document, which is weaker than Cosmos DB's per physical partition
//! (where documents of one partition read in one request are mutually consistent), so
//! everything Cosmos DB can answer, this can too. Only the `depth` most recent older
//! versions of a document are retained; a driver chooses how far back it explores.
//!
//! ```
//! use leasehold_engine::store::{Container, Op, Reader, Replicated, Reply};
//! use leasehold_engine::lease::{LeaseDocument, Record};
//! use leasehold_engine::{LeaseToken, PartitionKey, WallTime};
//!
//! let (writer, reader) = (Reader(0), Reader(1));
//! let mut store = Replicated::new(Container::<Record>::new(), 1);
//! let doc = LeaseDocument::new("p", LeaseToken::from("0"), WallTime(0));
//! let (pk, id) = (PartitionKey::new(doc.id.as_str()), doc.id.clone());
//! store.fresh(writer, Op::Create(Record::Lease(doc)));
//!
//! // The writer reads its own write; another reader may still be shown the document
//! // as absent, the version before the create.
//! let read = Op::Read { pk, id };
//! assert!(store.options(writer, &read).is_empty());
//! assert_eq!(store.options(reader, &read).len(), 1);
//! let stale = store.execute(reader, read.clone(), &mut |_, _| 1);
//! assert!(stale.is_err());
//! // Once it has seen the document, it is never shown its absence again.
//! assert!(matches!(store.fresh(reader, read.clone()), Ok(Reply::Read(_))));
//! assert!(store.options(reader, &read).is_empty());
//! ```

use super::{BatchOp, Container, Document, Key, Op, Reply, StoreError, Stored};
use crate::ids::DocId;
use std::collections::BTreeMap;
use std::ops::Deref;

/// One client's session with the store: whatever a driver treats as one SDK client
/// (one life of one host). A new life is a new session, with nothing seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reader(pub u32);

/// What a lagging replica may still serve of one document.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Versions<D> {
    /// Older versions, newest first; `None` where the document did not exist.
    past: Vec<Option<Stored<D>>>,
    /// Readers that may not be shown every retained version: each may be shown the
    /// current one and the first `n` of `past`, having seen the one at `n`. Sorted by
    /// reader; a reader absent here may be shown any retained version.
    bound: Vec<(Reader, u8)>,
}

impl<D> Versions<D> {
    fn bound_of(&self, reader: Reader) -> usize {
        self.bound
            .iter()
            .find(|(r, _)| *r == reader)
            .map_or(self.past.len(), |(_, n)| usize::from(*n))
    }

    /// `reader` was shown the version `back` steps behind the current one.
    fn shown(&mut self, reader: Reader, back: usize) {
        let back = back.min(self.bound_of(reader));
        self.bound.retain(|(r, _)| *r != reader);
        if back < self.past.len() {
            let at = self.bound.partition_point(|(r, _)| *r < reader);
            self.bound.insert(at, (reader, back as u8));
        }
    }

    /// Nothing to remember: every reader may be shown the one version there is.
    fn is_empty(&self) -> bool {
        self.past.is_empty() && self.bound.is_empty()
    }
}

/// A container as Cosmos DB's clients see it at Session consistency (see the module
/// documentation). Dereferences to the current, linearizable [`Container`], which
/// is what the world truly holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Replicated<D> {
    current: Container<D>,
    /// Older versions retained per document; 0 makes every read fresh.
    depth: u8,
    /// Only documents with something to remember: with `depth` 0 this stays empty,
    /// and the store is its container alone.
    versions: BTreeMap<Key, Versions<D>>,
}

impl<D> Deref for Replicated<D> {
    type Target = Container<D>;

    fn deref(&self) -> &Container<D> {
        &self.current
    }
}

impl<D: Document> Replicated<D> {
    /// `current` as its clients see it, retaining `depth` older versions of each
    /// document for lagging replicas to serve (0: every read is fresh).
    pub fn new(current: Container<D>, depth: u8) -> Self {
        Replicated {
            current,
            depth,
            versions: BTreeMap::new(),
        }
    }

    /// How many older versions of a document are retained.
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// The documents `op` reads, with how many older versions each may be served at
    /// to `reader` (at least one), in id order. Empty for writes and fresh reads.
    pub fn options(&self, reader: Reader, op: &Op<D>) -> Vec<(DocId, usize)> {
        if self.depth == 0 || op.is_write() {
            return Vec::new();
        }
        self.scope(op)
            .into_iter()
            .filter_map(|key| {
                let versions = self.versions.get(&key)?;
                let n = versions.bound_of(reader);
                (n > 0).then(|| (key.0.clone(), n))
            })
            .collect()
    }

    /// Executes `op` for `reader`. A write goes to the current container. A read
    /// serves each document it covers at the version `pick(id, n)` chooses among the
    /// `n + 1` it may be shown: 0 the current one, `k` the one `k` writes older
    /// (`pick` is called only where `n > 0`).
    pub fn execute(
        &mut self,
        reader: Reader,
        op: Op<D>,
        pick: &mut dyn FnMut(&DocId, usize) -> usize,
    ) -> Result<Reply<D>, StoreError> {
        if op.is_write() {
            return self.write(Some(reader), op);
        }
        if self.depth == 0 {
            return self.current.execute(op);
        }
        let mut chosen = Vec::new();
        for key in self.scope(&op) {
            let Some(versions) = self.versions.get(&key) else {
                continue;
            };
            let n = versions.bound_of(reader);
            let back = if n > 0 { pick(&key.0, n).min(n) } else { 0 };
            chosen.push((key, back));
        }
        let result = if chosen.iter().all(|(_, back)| *back == 0) {
            self.current.execute(op)
        } else {
            let mut view = self.current.clone();
            for (key, back) in chosen.iter().filter(|(_, b)| *b > 0) {
                match self.versions[key].past[back - 1].clone() {
                    Some(stored) => view.items.insert(key.clone(), stored),
                    None => view.items.remove(key),
                };
            }
            view.execute(op)
        };
        let returned = returned_ids(&result);
        for (key, back) in chosen {
            // A document a read did not return is not counted as seen: fewer bounds
            // allow more answers, never fewer.
            if returned.as_ref().is_some_and(|ids| !ids.contains(&key.0)) {
                continue;
            }
            self.remember(key, |v| v.shown(reader, back));
        }
        result
    }

    /// Executes `op` with every document at its current version.
    pub fn fresh(&mut self, reader: Reader, op: Op<D>) -> Result<Reply<D>, StoreError> {
        self.execute(reader, op, &mut |_, _| 0)
    }

    /// Executes a write the way the SDK's own retry sees it when the first attempt
    /// was applied but its answer was lost: the attempt is applied, then sent again,
    /// and the caller hears the second answer (a create then finds its own document,
    /// 409; an if-match write finds its own etag, 412; a delete finds nothing, 404).
    /// Returns the first attempt's result too, for drivers that record what was
    /// applied. A read is simply executed fresh.
    pub fn retried(
        &mut self,
        reader: Reader,
        op: Op<D>,
    ) -> (Result<Reply<D>, StoreError>, Result<Reply<D>, StoreError>) {
        let first = self.fresh(reader, op.clone());
        let second = self.fresh(reader, op);
        (first, second)
    }

    /// Applies a write whose answer its sender never hears (its driver gave up on the
    /// request before it landed): the sender's session token never learns of it, so
    /// the sender may still be shown the versions before it, as any other reader may.
    /// Everything the sender saw before still bounds its reads. A read is simply
    /// executed fresh.
    pub fn unheard(&mut self, op: Op<D>) -> Result<Reply<D>, StoreError> {
        if op.is_write() {
            self.write(None, op)
        } else {
            self.current.execute(op)
        }
    }

    /// `reader`'s session is over (its host restarted): a new one has seen nothing.
    pub fn forget(&mut self, reader: Reader) {
        self.versions.retain(|_, v| {
            v.bound.retain(|(r, _)| *r != reader);
            !v.is_empty()
        });
    }

    /// Applies write `op`, crediting `writer` (if any) with having seen what it wrote.
    fn write(&mut self, writer: Option<Reader>, op: Op<D>) -> Result<Reply<D>, StoreError> {
        if self.depth == 0 {
            return self.current.execute(op);
        }
        let keys = written_keys(&op);
        let before: Vec<(Key, Option<Stored<D>>)> = keys
            .into_iter()
            .map(|key| {
                let stored = self.current.items.get(&key).cloned();
                (key, stored)
            })
            .collect();
        let result = self.current.execute(op);
        let depth = usize::from(self.depth);
        for (key, old) in before {
            let new = self.current.items.get(&key);
            if new.map(|s| &s.etag) == old.as_ref().map(|s| &s.etag) {
                continue;
            }
            self.remember(key, |v| {
                v.past.insert(0, old);
                v.past.truncate(depth);
                let len = v.past.len();
                for (_, n) in &mut v.bound {
                    *n = n.saturating_add(1);
                }
                v.bound
                    .retain(|(r, n)| usize::from(*n) < len && Some(*r) != writer);
                // The writer reads its own write.
                if let Some(writer) = writer {
                    let at = v.bound.partition_point(|(r, _)| *r < writer);
                    v.bound.insert(at, (writer, 0));
                }
            });
        }
        result
    }

    fn remember(&mut self, key: Key, change: impl FnOnce(&mut Versions<D>)) {
        let versions = self
            .versions
            .entry(key.clone())
            .or_insert_with(|| Versions {
                past: Vec::new(),
                bound: Vec::new(),
            });
        change(versions);
        // Kept canonical: states that allow the same answers are equal.
        if versions.is_empty() {
            self.versions.remove(&key);
        }
    }

    /// The documents a read covers: current ones and any with older versions retained.
    fn scope(&self, op: &Op<D>) -> Vec<Key> {
        let in_scope = |key: &Key| match op {
            Op::Read { pk, id } => key.0 == *id && key.1 == *pk,
            Op::ReadAll { prefix } => key.0.as_str().starts_with(prefix.as_str()),
            Op::Query(q) => {
                q.pk.as_ref().is_none_or(|pk| key.1 == *pk) && key.0.as_str().starts_with(&q.prefix)
            }
            _ => false,
        };
        let mut keys: Vec<Key> = self
            .versions
            .keys()
            .filter(|k| in_scope(k))
            .cloned()
            .collect();
        keys.sort();
        keys
    }
}

/// The documents a write may change.
fn written_keys<D: Document>(op: &Op<D>) -> Vec<Key> {
    match op {
        Op::Create(doc) | Op::Replace { doc, .. } => vec![(doc.id().clone(), doc.partition_key())],
        Op::Delete { pk, id, .. } => vec![(id.clone(), pk.clone())],
        Op::Batch { pk, ops } => ops
            .iter()
            .filter_map(|op| match op {
                BatchOp::Create(doc) | BatchOp::Upsert(doc) | BatchOp::Replace { doc, .. } => {
                    Some((doc.id().clone(), doc.partition_key()))
                }
                BatchOp::Delete { id, .. } => Some((id.clone(), pk.clone())),
                BatchOp::Read(_) => None,
            })
            .collect(),
        Op::Read { .. } | Op::ReadAll { .. } | Op::Query(_) => Vec::new(),
    }
}

/// The ids a multi-document read returned; `None` for a point read, which sees its
/// document (or its absence) either way.
fn returned_ids<D: Document>(result: &Result<Reply<D>, StoreError>) -> Option<Vec<DocId>> {
    match result {
        Ok(Reply::ReadAll(docs) | Reply::Query(docs)) => {
            Some(docs.iter().map(|s| s.doc.id().clone()).collect())
        }
        _ => None,
    }
}
