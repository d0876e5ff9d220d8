//! The async store trait: the engine's store operations, carried to a store.

use crate::charge::Charges;
use leasehold_engine::store::{Document, Op, Reply, StoreError};
use std::future::Future;

/// What a store answered, with what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Response<D> {
    /// The engine's view of the answer.
    pub result: Result<Reply<D>, StoreError>,
    /// The request charge in request units (0 for stores that do not charge).
    pub charge: f64,
}

/// A container that executes the engine's store operations.
///
/// Both implementations give the same statuses and document states for the same
/// operations (`tests/cosmos_store.rs` checks it on random operations against the
/// emulator): the in-memory store is the engine's
/// reference semantics, and the Cosmos DB store maps the service onto them.
pub trait Store<D: Document>: Clone + Send + Sync + 'static {
    /// Executes one operation. Never panics: every failure is a [`StoreError`], and an
    /// outcome the store cannot know (a lost reply) is `Timeout` or `Unavailable`.
    fn execute(&self, op: Op<D>) -> impl Future<Output = Response<D>> + Send;

    /// Calls and request units so far, by kind of operation.
    fn charges(&self) -> &Charges;

    /// Checks, before use, that the container can hold these documents safely: its
    /// partition key path is the documents' own ([`Document::PARTITION_KEY_PATH`])
    /// and it deletes nothing by a default time to live. A store with no container
    /// to check (the in-memory one) is always fit.
    fn check(&self) -> impl Future<Output = Result<(), ContainerError>> + Send {
        async { Ok(()) }
    }
}

/// Why a container is unfit for the documents a store would keep in it.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ContainerError {
    /// The container is partitioned by another path: writes would land in the wrong
    /// logical partitions, or be refused.
    #[error(
        "container {container} is partitioned by {found:?}, but these documents need {expected:?}; \
         create the container with partition key path {expected}"
    )]
    PartitionKey {
        /// The container's id.
        container: String,
        /// The path the documents need.
        expected: &'static str,
        /// The container's paths.
        found: Vec<String>,
    },
    /// The container deletes items a time after their last write: leases, heartbeats
    /// or messages would vanish, and be created again and read from the beginning.
    #[error(
        "container {container} deletes items {seconds} s after their last write (default time to \
         live); turn its default TTL off, or set it to no default"
    )]
    DefaultTtl {
        /// The container's id.
        container: String,
        /// Its default time to live.
        seconds: u32,
    },
    /// The container's settings could not be read.
    #[error("the container's settings could not be read: {0}")]
    Unreadable(StoreError),
    /// The account the container lives in is one the proof does not cover, or it
    /// could not be read ([`CosmosStore::with_account_check`](crate::CosmosStore::with_account_check)).
    #[error(transparent)]
    Account(#[from] crate::cosmos::AccountError),
}

/// How long a request may take before its outcome counts as unknown, unless the
/// processor is told otherwise (`ProcessorBuilder::request_timeout`); the queue and
/// item clients and the account read use it too.
pub(crate) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Executes `op` on `store`, giving up after `timeout`: the outcome is then unknown to
/// the engine (a [`StoreError::Timeout`]), as for any reply that never comes. Every
/// driver sends its requests through here.
pub(crate) async fn execute_within<D: Document, St: Store<D>>(
    store: &St,
    op: Op<D>,
    timeout: std::time::Duration,
) -> Response<D> {
    tokio::time::timeout(timeout, store.execute(op))
        .await
        .unwrap_or(Response {
            result: Err(StoreError::Timeout),
            charge: 0.0,
        })
}
