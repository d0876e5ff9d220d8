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
}

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
