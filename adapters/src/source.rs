//! Partitioned sources of work: what a processor's leases cover.

use leasehold_engine::{Checkpoint, LeaseToken};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

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

/// How much of a partition lies after a checkpoint: what a lag estimate reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Backlog {
    /// Changes not yet processed (an estimate where the source counts positions, as
    /// the change feed's log sequence numbers, which overwrites leave gaps in).
    pub items: u64,
    /// When the oldest unprocessed change was made, where the source can tell.
    pub oldest: Option<SystemTime>,
    /// Request units the estimate cost, where the source charges them.
    pub request_units: f64,
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

    /// How much of `partition` lies after `from`. The default reads it through and
    /// counts, in batches of 1,000, up to 1,000,000 items: exact, and as costly as
    /// processing the backlog; sources that can estimate cheaply override it.
    fn backlog(
        &self,
        partition: &LeaseToken,
        from: Option<&Checkpoint>,
    ) -> impl Future<Output = Result<Backlog, SourceError>> + Send {
        async move {
            let mut at = from.cloned();
            let mut items = 0u64;
            while items < 1_000_000 {
                let batch = self.read(partition, at.as_ref(), 1_000).await?;
                if batch.items.is_empty() {
                    break;
                }
                items += batch.items.len() as u64;
                at = Some(batch.checkpoint);
            }
            Ok(Backlog {
                items,
                ..Backlog::default()
            })
        }
    }

    /// The ranges `partition` split into, if it split (the change feed's "partition
    /// gone"). Each child must read on from `partition`'s checkpoints: the processor
    /// replaces the lease with one lease per child, each from the last checkpoint.
    /// Asked before every read, so it should be cheap. The default: never.
    fn split_of(
        &self,
        partition: &LeaseToken,
    ) -> impl Future<Output = Result<Option<Vec<LeaseToken>>, SourceError>> + Send {
        let _ = partition;
        async { Ok(None) }
    }
}

/// An in-memory partitioned feed of strings, for the quickstart and the tests. A
/// checkpoint is a position in the partition's log.
///
/// A partition can [`split`](Self::split): its children start with its log, each
/// keeping the items that hash to it, so that a child reads on from the parent's
/// checkpoint; items pushed to the parent afterwards go to the child they hash to.
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
    partitions: Arc<Mutex<BTreeMap<LeaseToken, Range>>>,
}

/// One partition's log. A position holds `None` where a split routed the parent's
/// item to a sibling: positions stay those of the parent, so its checkpoints hold.
#[derive(Clone, Debug, Default)]
struct Range {
    items: Vec<Option<String>>,
    children: Option<Vec<LeaseToken>>,
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
            .map(|p| (p.into(), Range::default()))
            .collect();
        MemoryFeed {
            partitions: Arc::new(Mutex::new(map)),
        }
    }

    /// Appends `item` to `partition` (created if new; a processor only leases the
    /// partitions it saw when it was built, and the children of their splits).
    pub fn push(&self, partition: impl Into<LeaseToken>, item: impl Into<String>) {
        let mut map = self.lock();
        let item = item.into();
        let mut at = partition.into();
        while let Some(children) = map.get(&at).and_then(|r| r.children.clone()) {
            at = children[route(&item, children.len())].clone();
        }
        map.entry(at).or_default().items.push(Some(item));
    }

    /// Splits `partition` into `children`, which must be new. Each child starts with
    /// the parent's log, keeping the items that hash to it.
    ///
    /// ```
    /// use leasehold_adapters::{MemoryFeed, PartitionSource};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let feed = MemoryFeed::new(["0"]);
    /// for i in 0..10 {
    ///     feed.push("0", format!("item-{i}"));
    /// }
    /// feed.split("0", ["0a", "0b"]).unwrap();
    /// assert_eq!(feed.split_of(&"0".into()).await.unwrap().unwrap().len(), 2);
    /// // Each child reads on from the parent's checkpoint 4: together, items 4 to 9.
    /// let from = leasehold_engine::Checkpoint::from("4");
    /// let a = feed.read(&"0a".into(), Some(&from), 100).await.unwrap();
    /// let b = feed.read(&"0b".into(), Some(&from), 100).await.unwrap();
    /// assert_eq!(a.items.len() + b.items.len(), 6);
    /// # }
    /// ```
    pub fn split<I, S>(
        &self,
        partition: impl Into<LeaseToken>,
        children: I,
    ) -> Result<(), SourceError>
    where
        I: IntoIterator<Item = S>,
        S: Into<LeaseToken>,
    {
        let partition = partition.into();
        let children: Vec<LeaseToken> = children.into_iter().map(Into::into).collect();
        let mut map = self.lock();
        let Some(parent) = map.get(&partition) else {
            return Err(SourceError::new(format!("no partition {partition}")));
        };
        if parent.children.is_some() {
            return Err(SourceError::new(format!(
                "partition {partition} split already"
            )));
        }
        let mut distinct = children.clone();
        distinct.sort();
        distinct.dedup();
        if children.len() < 2
            || distinct.len() != children.len()
            || children.iter().any(|c| map.contains_key(c))
        {
            return Err(SourceError::new(format!(
                "partition {partition} cannot split into {children:?}: at least two new, distinct children"
            )));
        }
        let log = parent.items.clone();
        for (i, child) in children.iter().enumerate() {
            let items = log
                .iter()
                .map(|item| item.clone().filter(|it| route(it, children.len()) == i))
                .collect();
            map.insert(
                child.clone(),
                Range {
                    items,
                    children: None,
                },
            );
        }
        if let Some(parent) = map.get_mut(&partition) {
            parent.children = Some(children);
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<LeaseToken, Range>> {
        self.partitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Which of `n` children an item goes to: a stable hash, as a partition key's.
fn route(item: &str, n: usize) -> usize {
    let hash = item.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % n as u64) as usize
}

impl PartitionSource for MemoryFeed {
    type Item = String;

    /// The partitions that have not split.
    async fn partitions(&self) -> Result<Vec<LeaseToken>, SourceError> {
        Ok(self
            .lock()
            .iter()
            .filter(|(_, r)| r.children.is_none())
            .map(|(t, _)| t.clone())
            .collect())
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
        let log = map.get(partition).map_or(&[][..], |r| r.items.as_slice());
        let mut end = start.min(log.len());
        let mut items = Vec::new();
        // Positions a split gave to a sibling are skipped, however many.
        while end < log.len() && items.len() < max {
            if let Some(item) = &log[end] {
                items.push(item.clone());
            }
            end += 1;
        }
        Ok(Batch {
            items,
            checkpoint: Checkpoint::from(end.to_string()),
        })
    }

    async fn split_of(
        &self,
        partition: &LeaseToken,
    ) -> Result<Option<Vec<LeaseToken>>, SourceError> {
        Ok(self.lock().get(partition).and_then(|r| r.children.clone()))
    }
}
