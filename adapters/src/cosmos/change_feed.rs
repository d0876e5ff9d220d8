//! The Cosmos DB change feed as a partition source: one lease per feed range, the
//! continuation token checkpointed in the lease.

use crate::source::{Backlog, Batch, PartitionSource, SourceError};
use azure_data_cosmos::feed::{ContinuationToken, FeedRange};
use azure_data_cosmos::options::{ChangeFeedOptions, ChangeFeedStartFrom, MaxItemCountHint};
use azure_data_cosmos::{ContainerClient, FeedScope};
use futures::StreamExt;
use leasehold_engine::{Checkpoint, LeaseToken};
use serde_json::Value;

/// The change feed of a monitored container, read per feed range from the
/// beginning (or from the checkpoint), latest version of each item.
///
/// A lease token is the feed range itself (its string form), so a lease names exactly
/// what it covers. The set of ranges is read once, when the processor is built.
///
/// After a split of the monitored container, [`split_of`](PartitionSource::split_of)
/// names the parts of the lease's range that lie in each new physical partition, and
/// the processor replaces the lease with one lease per part, each resuming from the
/// lease's continuation (the SDK narrows a continuation to the range it is read
/// with). Until the SDK's routing map shows the split (it refreshes it when a read
/// meets the gone partition), the lease reads the children round-robin under its one
/// continuation, and [`read`](PartitionSource::read) counts them so that it reports
/// "caught up" only after every child came back empty. After a merge a lease keeps
/// its range and reads it from its own continuation.
#[derive(Clone)]
pub struct ChangeFeedSource {
    container: ContainerClient,
}

impl std::fmt::Debug for ChangeFeedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeedSource").finish_non_exhaustive()
    }
}

impl ChangeFeedSource {
    /// The change feed of `container`.
    pub fn new(container: ContainerClient) -> Self {
        ChangeFeedSource { container }
    }
}

impl ChangeFeedSource {
    /// How many physical partitions the SDK polls for `range`: one, or the children
    /// of a split. From the SDK's cached routing map, refreshed by the SDK when it
    /// meets a split.
    async fn physical_ranges_under(&self, range: &FeedRange) -> Result<usize, SourceError> {
        let ranges = self
            .container
            .read_feed_ranges(None)
            .await
            .map_err(SourceError::new)?;
        Ok(ranges.iter().filter(|r| r.overlaps(range)).count().max(1))
    }
}

/// The parts of `lease` that lie in each of `ranges` it overlaps.
fn parts_of(lease: &FeedRange, ranges: &[FeedRange]) -> Result<Vec<FeedRange>, SourceError> {
    ranges
        .iter()
        .filter(|r| r.overlaps(lease))
        .map(|r| {
            let min = r.min_inclusive().clone().max(lease.min_inclusive().clone());
            let max = r.max_exclusive().clone().min(lease.max_exclusive().clone());
            FeedRange::new(min, max).map_err(SourceError::new)
        })
        .collect()
}

/// The log sequence number a change feed page's etag names: the last change the
/// page returned. The service writes it as a quoted number; the in-memory emulator
/// writes a cursor whose `lsn` field carries it.
fn etag_lsn(etag: &str) -> Option<u64> {
    let bare = etag.trim_matches('"');
    bare.parse().ok().or_else(|| {
        let cursor: Value = serde_json::from_str(etag).ok()?;
        cursor["lsn"].as_u64()
    })
}

/// When a change was made, from its `_ts` (seconds since the Unix epoch).
fn made_at(change: &Value) -> Option<std::time::SystemTime> {
    let seconds = change["_ts"].as_u64()?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(seconds))
}

impl PartitionSource for ChangeFeedSource {
    type Item = Value;

    /// As the .NET estimator does: one page of at most one change from the
    /// checkpoint, per physical partition under the lease's range. The lag is the
    /// partition's latest log sequence number less the first unread change's, plus
    /// one (overwritten documents leave gaps, so it can overcount); the age is that
    /// change's `_ts`. An empty page means no lag.
    async fn backlog(
        &self,
        partition: &LeaseToken,
        from: Option<&Checkpoint>,
    ) -> Result<Backlog, SourceError> {
        let range: FeedRange = partition
            .as_str()
            .parse()
            .map_err(|e| SourceError::new(format!("lease {partition} is not a feed range: {e}")))?;
        let children = self.physical_ranges_under(&range).await?;
        let one = MaxItemCountHint::Limit(std::num::NonZeroU32::MIN);
        let mut options = ChangeFeedOptions::default().with_max_item_count(one);
        if let Some(c) = from {
            options = options
                .with_continuation_token(ContinuationToken::from_string(c.as_str().to_string()));
        }
        let mut pages = self
            .container
            .query_change_feed::<Value>(
                FeedScope::range(range),
                ChangeFeedStartFrom::Beginning,
                Some(options),
            )
            .await
            .map_err(SourceError::new)?;
        let mut backlog = Backlog::default();
        for _ in 0..children {
            let page = match pages.next().await {
                Some(Ok(page)) => page,
                Some(Err(e)) => return Err(SourceError::new(e)),
                None => break,
            };
            let headers = page.headers();
            backlog.request_units += headers.request_charge().map_or(0.0, |c| c.value());
            let Some(first) = page.items().first().and_then(|c| c.current()) else {
                continue;
            };
            let first_lsn = first["_lsn"]
                .as_u64()
                .or_else(|| headers.etag().and_then(|e| etag_lsn(e.as_ref())));
            backlog.items += match (headers.lsn(), first_lsn) {
                (Some(latest), Some(first)) => latest.saturating_sub(first) + 1,
                _ => page.items().len() as u64,
            };
            backlog.oldest = match (backlog.oldest, made_at(first)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(backlog)
    }

    /// From the SDK's cached routing map: no request unless the cache is empty.
    async fn split_of(
        &self,
        partition: &LeaseToken,
    ) -> Result<Option<Vec<LeaseToken>>, SourceError> {
        let lease: FeedRange = partition
            .as_str()
            .parse()
            .map_err(|e| SourceError::new(format!("lease {partition} is not a feed range: {e}")))?;
        let ranges = self
            .container
            .read_feed_ranges(None)
            .await
            .map_err(SourceError::new)?;
        let parts = parts_of(&lease, &ranges)?;
        if parts.len() < 2 {
            return Ok(None);
        }
        Ok(Some(
            parts
                .iter()
                .map(|r| LeaseToken::from(r.to_string()))
                .collect(),
        ))
    }

    async fn partitions(&self) -> Result<Vec<LeaseToken>, SourceError> {
        let ranges = self
            .container
            .read_feed_ranges(None)
            .await
            .map_err(SourceError::new)?;
        Ok(ranges
            .iter()
            .map(|r| LeaseToken::from(r.to_string()))
            .collect())
    }

    async fn read(
        &self,
        partition: &LeaseToken,
        from: Option<&Checkpoint>,
        max: usize,
    ) -> Result<Batch<Value>, SourceError> {
        let range: FeedRange = partition
            .as_str()
            .parse()
            .map_err(|e| SourceError::new(format!("lease {partition} is not a feed range: {e}")))?;
        let children = self.physical_ranges_under(&range).await?;
        let options = from.map(|c| {
            ChangeFeedOptions::default()
                .with_continuation_token(ContinuationToken::from_string(c.as_str().to_string()))
        });
        let mut pages = self
            .container
            .query_change_feed::<Value>(
                FeedScope::range(range),
                ChangeFeedStartFrom::Beginning,
                options,
            )
            .await
            .map_err(SourceError::new)?;
        // The stream never ends by itself, and it polls the physical partitions under
        // the lease's range in turn: only a whole round of empty pages means "caught
        // up". Stopping at the first empty page would starve every child of a split
        // range but the first (the split test found it).
        let mut items = Vec::new();
        let mut empty_in_a_row = 0;
        while items.len() < max && empty_in_a_row < children {
            match pages.next().await {
                Some(Ok(page)) => {
                    if page.items().is_empty() {
                        empty_in_a_row += 1;
                    } else {
                        empty_in_a_row = 0;
                        items.extend(page.items().iter().filter_map(|c| c.current().cloned()));
                    }
                }
                Some(Err(e)) => return Err(SourceError::new(e)),
                None => break,
            }
        }
        let token = pages.to_continuation_token().map_err(SourceError::new)?;
        Ok(Batch {
            items,
            checkpoint: Checkpoint::from(token.as_str().to_string()),
        })
    }
}
