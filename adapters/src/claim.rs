//! The claim-check hook: where a [`QueueClient`](crate::QueueClient) keeps payloads it
//! does not write into Cosmos DB (a blob container, a file share), as DurableTask's
//! Azure Storage provider keeps large messages in blobs.
//!
//! The queue decides when a payload is stored, fetched and deleted
//! ([`leasehold_engine::queue::claim`]); a claim store only keeps strings under keys.

use futures::future::BoxFuture;
use leasehold_engine::queue::ClaimKey;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A claim store failed: the operation's outcome is unknown.
#[derive(Debug, thiserror::Error)]
#[error("claim store: {0}")]
pub struct ClaimError(#[source] Box<dyn std::error::Error + Send + Sync>);

impl ClaimError {
    /// Wraps the claim store's own error.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ClaimError(error.into())
    }
}

/// A store of claim-checked payloads, one per [`ClaimKey`]. It must read its own
/// writes: a `get` after a `put` returned sees the payload (Azure Blob Storage does).
///
/// A key is never written twice with different payloads, so `put` may overwrite.
pub trait ClaimStore: Send + Sync + 'static {
    /// Stores `payload` under `key`.
    fn put(&self, key: ClaimKey, payload: String) -> BoxFuture<'_, Result<(), ClaimError>>;
    /// The payload under `key`; `None` if there is none.
    fn get(&self, key: ClaimKey) -> BoxFuture<'_, Result<Option<String>, ClaimError>>;
    /// Deletes the payload under `key`; deleting an absent key succeeds.
    fn delete(&self, key: ClaimKey) -> BoxFuture<'_, Result<(), ClaimError>>;
}

/// A claim store in memory, for tests and single-process use. Clones share the
/// payloads.
///
/// ```
/// use leasehold_adapters::{ClaimStore, MemoryClaims};
/// use leasehold_engine::lock::LockToken;
/// use leasehold_engine::queue::{ClaimKey, MessageName, PartSetId, QueueName};
/// use leasehold_engine::{HostId, Incarnation};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let claims = MemoryClaims::default();
/// let token = LockToken { holder: HostId::from("p"), incarnation: Incarnation(1), seq: 1 };
/// let key = ClaimKey { queue: QueueName::new("q")?, name: MessageName::new("m")?, set: PartSetId::of(&token) };
/// claims.put(key.clone(), "payload".into()).await?;
/// assert_eq!(claims.get(key.clone()).await?.as_deref(), Some("payload"));
/// claims.delete(key.clone()).await?;
/// assert!(claims.keys().is_empty());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryClaims {
    payloads: Arc<Mutex<BTreeMap<ClaimKey, String>>>,
}

impl MemoryClaims {
    /// The keys stored, in order.
    pub fn keys(&self) -> Vec<ClaimKey> {
        self.with(|p| p.keys().cloned().collect())
    }

    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<ClaimKey, String>) -> R) -> R {
        // A poisoned lock only means another thread panicked mid-call; the map is
        // still whole, for each call changes it in one step.
        let mut payloads = self
            .payloads
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut payloads)
    }
}

impl ClaimStore for MemoryClaims {
    fn put(&self, key: ClaimKey, payload: String) -> BoxFuture<'_, Result<(), ClaimError>> {
        self.with(|p| p.insert(key, payload));
        Box::pin(async { Ok(()) })
    }

    fn get(&self, key: ClaimKey) -> BoxFuture<'_, Result<Option<String>, ClaimError>> {
        let found = self.with(|p| p.get(&key).cloned());
        Box::pin(async { Ok(found) })
    }

    fn delete(&self, key: ClaimKey) -> BoxFuture<'_, Result<(), ClaimError>> {
        self.with(|p| p.remove(&key));
        Box::pin(async { Ok(()) })
    }
}
