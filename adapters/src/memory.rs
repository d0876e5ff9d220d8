//! The in-memory store: the engine's reference semantics behind the async trait.

use crate::charge::{Charges, OpKind};
use crate::store::{Response, Store};
use leasehold_engine::store::{Container, Document, Limits, Op};
use std::sync::{Arc, Mutex, PoisonError};

/// An in-process container, shared by every clone; the embedded default, and the
/// store of the quickstart and the tests. It charges nothing.
///
/// ```
/// use leasehold_adapters::{MemoryStore, Store};
/// use leasehold_engine::lease::{LeaseDocument, Record};
/// use leasehold_engine::store::{Op, Reply};
/// use leasehold_engine::{LeaseToken, WallTime};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = MemoryStore::new();
/// let doc = Record::Lease(LeaseDocument::new("g", LeaseToken::from("0"), WallTime(0)));
/// let created = store.execute(Op::Create(doc.clone())).await.result;
/// assert!(matches!(created, Ok(Reply::Created(_))));
/// assert!(store.execute(Op::Create(doc)).await.result.is_err()); // 409
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct MemoryStore<D> {
    container: Arc<Mutex<Container<D>>>,
    charges: Arc<Charges>,
}

impl<D: Document> MemoryStore<D> {
    /// An empty store with Cosmos DB's limits.
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    /// An empty store with other limits (a smaller document size, say).
    pub fn with_limits(limits: Limits) -> Self {
        MemoryStore {
            container: Arc::new(Mutex::new(Container::with_limits(limits))),
            charges: Arc::default(),
        }
    }

    /// A copy of every document whose id starts with `prefix`, for inspection.
    pub fn snapshot(&self, prefix: &str) -> Vec<leasehold_engine::store::Stored<D>> {
        self.lock().read_all(prefix)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Container<D>> {
        // A panic elsewhere while holding the lock cannot leave the container half
        // written: every operation is applied whole or not at all.
        self.container
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<D: Document> Default for MemoryStore<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Document + Send + Sync + 'static> Store<D> for MemoryStore<D> {
    async fn execute(&self, op: Op<D>) -> Response<D> {
        let kind = OpKind::of(&op);
        let result = self.lock().execute(op);
        self.charges.record(kind, 0.0);
        Response {
            result,
            charge: 0.0,
        }
    }

    fn charges(&self) -> &Charges {
        &self.charges
    }
}
