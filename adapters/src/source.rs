//! Partitioned sources of work: what a processor's leases cover.

use leasehold_engine::{Checkpoint, LeaseToken};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

/// Why a source could not be read. The processor retries with backoff.
#[derive(Debug, thiserror::Error)]
#[error("source: {0}")]
pub struct SourceError(pub Box<dyn std::error::Error + Send + Sync>);

impl SourceError {
    /// A source error from any error.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SourceError {
        SourceError(e.into())
    }
}

/// Items of one partition, and the checkpoint that follows them.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch<T> {
    /// The items, in the partition's order.
    pub items: Vec<T>,
    /// Where to resume after every item of this batch.
    pub checkpoint: Checkpoint,
}

/// Any partitioned stream: a fixed set of partitions, each read from a checkpoint.
pub trait PartitionSource: Clone + Send + Sync + 'static {
    /// An item of the stream (cloned when a failed batch is retried).
    type Item: Clone + Send + Sync + 'static;

    /// The partitions to lease, one lease each.
    fn partitions(&self) -> impl Future<Output = Result<Vec<LeaseToken>, SourceError>> + Send;

    /// Up to `max` items of `partition` after `from` (from the start when `None`).
    /// An empty batch means "nothing new yet"; its checkpoint must not go back.
    fn read(
        &self,
        partition: &LeaseToken,
        from: Option<&Checkpoint>,
        max: usize,
    ) -> impl Future<Output = Result<Batch<Self::Item>, SourceError>> + Send;
}

/// An in-memory partitioned feed of strings, for the quickstart and the tests. A
/// checkpoint is the count of items consumed.
///
/// ```
/// use leasehold_adapters::{MemoryFeed, PartitionSource};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let feed = MemoryFeed::new(["0"]);
/// feed.push("0", "a");
/// feed.push("0", "b");
/// let batch = feed.read(&"0".into(), None, 10).await.unwrap();
/// assert_eq!(batch.items, ["a", "b"]);
/// assert_eq!(batch.checkpoint.as_str(), "2");
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryFeed {
    partitions: Arc<Mutex<BTreeMap<LeaseToken, Vec<String>>>>,
}

impl MemoryFeed {
    /// A feed with these partitions, all empty.
    pub fn new<I, S>(partitions: I) -> MemoryFeed
    where
        I: IntoIterator<Item = S>,
        S: Into<LeaseToken>,
    {
        let map = partitions
            .into_iter()
            .map(|p| (p.into(), Vec::new()))
            .collect();
        MemoryFeed {
            partitions: Arc::new(Mutex::new(map)),
        }
    }

    /// Appends `item` to `partition` (created if new; a processor only leases the
    /// partitions it saw when it was built).
    pub fn push(&self, partition: impl Into<LeaseToken>, item: impl Into<String>) {
        self.lock()
            .entry(partition.into())
            .or_default()
            .push(item.into());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<LeaseToken, Vec<String>>> {
        self.partitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl PartitionSource for MemoryFeed {
    type Item = String;

    async fn partitions(&self) -> Result<Vec<LeaseToken>, SourceError> {
        Ok(self.lock().keys().cloned().collect())
    }

    async fn read(
        &self,
        partition: &LeaseToken,
        from: Option<&Checkpoint>,
        max: usize,
    ) -> Result<Batch<String>, SourceError> {
        let start = match from {
            None => 0,
            Some(c) => c
                .as_str()
                .parse::<usize>()
                .map_err(|_| SourceError::new(format!("not a memory-feed checkpoint: {c:?}")))?,
        };
        let map = self.lock();
        let items = map.get(partition).map_or(&[][..], Vec::as_slice);
        let start = start.min(items.len());
        let end = (start + max).min(items.len());
        Ok(Batch {
            items: items[start..end].to_vec(),
            checkpoint: Checkpoint::from(end.to_string()),
        })
    }
}
