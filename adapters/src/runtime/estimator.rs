//! How far behind each lease of a processor group is, as the .NET change feed
//! processor's estimator tells.

use super::BuildError;
use super::builder::ProcessorBuilder;
use super::lag::LeaseLag;
use crate::source::{Backlog, PartitionSource, SourceError};
use crate::store::Store;
use leasehold_engine::LeaseToken;
use leasehold_engine::lease::Record;
use leasehold_engine::store::{Op, Reply, StoreError};

/// One estimate of a whole processor group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Every lease of the group, in token order; a lease whose range split and
    /// whose children are being created is left out, as they cover its range.
    pub leases: Vec<LeaseLag>,
    /// What the estimate cost: the lease table's read and the source's estimates.
    pub request_units: f64,
}

impl Estimate {
    /// The group's whole backlog.
    pub fn total(&self) -> u64 {
        self.leases.iter().map(|l| l.items).sum()
    }
}

/// Why an estimate failed.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    /// The lease table could not be read.
    #[error("reading the lease table failed: {0}")]
    Store(StoreError),
    /// The source could not estimate a lease's backlog.
    #[error("estimating lease {lease}'s backlog failed: {error}")]
    Source {
        /// The lease.
        lease: LeaseToken,
        /// The source's error.
        error: SourceError,
    },
}

/// Estimates a processor group's lag: for each lease, its owner and the changes after
/// its stored checkpoint. Build it from the processor's own builder inputs with
/// [`ProcessorBuilder::build_estimator`]; it takes no lease and processes nothing.
///
/// Each call reads the lease table once and asks the source for each lease's
/// [`backlog`](PartitionSource::backlog): on the change feed, one page of at most one
/// change per lease.
///
/// ```
/// use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let feed = MemoryFeed::new(["0"]);
/// feed.push("0", "a");
/// let estimator = Processor::builder()
///     .processor_name("orders")
///     .source(feed)
///     .store(MemoryStore::new())
///     .build_estimator()
///     .unwrap();
/// // No host has created the leases yet: nothing to report.
/// assert!(estimator.estimate().await.unwrap().leases.is_empty());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Estimator<S, St> {
    /// The processor name: the group's lease prefix.
    name: String,
    source: S,
    store: St,
}

impl<S: PartitionSource, St: Store<Record>> Estimator<S, St> {
    /// Every lease's lag now.
    pub async fn estimate(&self) -> Result<Estimate, EstimateError> {
        let response = self
            .store
            .execute(Op::ReadAll {
                prefix: format!("{}..", self.name),
            })
            .await;
        let mut request_units = response.charge;
        let docs = match response.result {
            Ok(Reply::ReadAll(docs)) => docs,
            Ok(_) => return Err(EstimateError::Store(StoreError::Unavailable)),
            Err(e) => return Err(EstimateError::Store(e)),
        };
        let mut leases = Vec::new();
        for stored in docs {
            let Record::Lease(doc) = stored.doc else {
                continue;
            };
            // A lease marked as split is being replaced by its children, whose
            // ranges it overlaps: counting both would count its backlog twice.
            if !doc.has_own_id(&self.name) || !doc.split_into.is_empty() {
                continue;
            }
            let backlog: Backlog = self
                .source
                .backlog(&doc.token, doc.checkpoint.as_ref())
                .await
                .map_err(|error| EstimateError::Source {
                    lease: doc.token.clone(),
                    error,
                })?;
            request_units += backlog.request_units;
            leases.push(LeaseLag {
                lease: doc.token,
                owner: doc.owner,
                items: backlog.items,
                oldest: backlog.oldest,
            });
        }
        leases.sort_by(|a, b| a.lease.cmp(&b.lease));
        super::metrics::record_lag(&self.name, &leases);
        Ok(Estimate {
            leases,
            request_units,
        })
    }
}

impl<S: PartitionSource, St: Store<Record>, H> ProcessorBuilder<S, St, H> {
    /// An estimator of this processor group's lag, from the same processor name,
    /// source and store; the instance name, intervals and handler are not needed.
    pub fn build_estimator(self) -> Result<Estimator<S, St>, BuildError> {
        let (name, source, store) = self.into_estimator_parts()?;
        Ok(Estimator {
            name,
            source,
            store,
        })
    }
}
