//! The Cosmos DB change feed as a partition source: one lease per feed range, the
//! continuation token checkpointed in the lease.

use crate::source::{Batch, PartitionSource, SourceError};
use azure_data_cosmos::feed::{ContinuationToken, FeedRange};
use azure_data_cosmos::options::{ChangeFeedOptions, ChangeFeedStartFrom};
use azure_data_cosmos::{ContainerClient, FeedScope};
use futures::StreamExt;
use leasehold_engine::{Checkpoint, LeaseToken};
use serde_json::Value;

/// The change feed of a monitored container, read per feed range from the
/// beginning (or from the checkpoint), latest version of each item.
///
/// A lease token is the feed range itself (its string form), so a lease names exactly
/// what it covers. The set of ranges is read once, when the processor is built; a
/// split of the monitored container is not followed (see the README's limits).
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

impl PartitionSource for ChangeFeedSource {
    type Item = Value;

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
        let mut items = Vec::new();
        // One range: the first empty page means "caught up". The stream never ends
        // by itself.
        while items.len() < max {
            match pages.next().await {
                Some(Ok(page)) => {
                    if page.items().is_empty() {
                        break;
                    }
                    items.extend(page.items().iter().filter_map(|c| c.current().cloned()));
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
