//! The item-lease client: the engine's item leaser on an async store.

use crate::clock::{Clock, fresh_incarnation};
use crate::exchange::{Checked, Exchange};
use crate::store::{ContainerError, Store};
use leasehold_engine::HostId;
use leasehold_engine::item_lease::{
    Grant, Input, Item, ItemError, ItemIntent, ItemKey, ItemState, Leaser, LeaserConfig, Output,
};
use std::time::Duration;

/// Why an item-lease operation failed; the item is as the store has it.
#[derive(Debug, thiserror::Error)]
pub enum ItemLeaseClientError {
    /// The operation failed: another holder's lease, a lost lease, a store error.
    #[error(transparent)]
    Item(#[from] ItemError),
    /// The store's container cannot hold the items safely (checked before the
    /// first request).
    #[error(transparent)]
    Container(#[from] ContainerError),
    /// The leaser reported no outcome: a bug in leasehold, reported rather than
    /// panicked on.
    #[error("the item leaser reported no outcome for {0:?}; please report this bug")]
    NoOutcome(ItemIntent),
}

impl From<Checked<ItemError>> for ItemLeaseClientError {
    fn from(failed: Checked<ItemError>) -> Self {
        match failed {
            Checked::Container(e) => ItemLeaseClientError::Container(e),
            Checked::Engine(e) => ItemLeaseClientError::Item(e),
        }
    }
}

/// A holder of leases on single documents, as Eclipse EDC's Cosmos DB stores take
/// them: acquire, renew, break, save under the lease, and "lease the next N items
/// in state S".
///
/// Every decision is the engine's [`Leaser`]; this client only carries its requests
/// to the store. Clones share one leaser. Each operation runs to the end even if its
/// future is dropped.
///
/// Renewals, saves and breaks name the [`Grant`] they act under, not the item: the
/// leaser may lease an item again while an earlier grant's task still runs
/// (`next_for_state` and `acquire` take the leaser's own items), and a task that
/// overran its grant must not act under the later one. Its renewals and saves are
/// refused with `NotHeld` and change nothing, and so is its break while this client
/// holds the later lease (see [`break_lease`](Self::break_lease)).
///
/// ```
/// use leasehold_adapters::{ItemLeaseClient, MemoryStore, Store};
/// use leasehold_engine::item_lease::{Item, ItemKey, ItemState, LeaserConfig};
/// use leasehold_engine::store::Op;
/// use leasehold_engine::{DocId, PartitionKey, WallTime};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::new();
/// let item = Item::new(DocId::from("tp-1"), PartitionKey::from("tp-1"), ItemState::from("REQUESTED"), WallTime(0));
/// store.execute(Op::Create(item)).await.result?;
/// let leaser = ItemLeaseClient::new(store, "connector-a", LeaserConfig::new("tp-"));
/// let grants = leaser
///     .next_for_state(ItemState::from("REQUESTED"), 10, Duration::from_secs(60))
///     .await?;
/// for grant in &grants {
///     assert!(leaser.has_authority(grant));
///     leaser.save(grant, ItemState::from("STARTED"), true).await?;
/// }
/// # Ok(())
/// # }
/// ```
pub struct ItemLeaseClient<St> {
    exchange: Exchange<Leaser, St>,
    /// One `next_for_state` at a time: the leaser refuses a second while one runs.
    scanning: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl<St: Clone> Clone for ItemLeaseClient<St> {
    fn clone(&self) -> Self {
        ItemLeaseClient {
            exchange: self.exchange.clone(),
            scanning: self.scanning.clone(),
        }
    }
}

impl<St: Store<Item>> ItemLeaseClient<St> {
    /// A leaser named `holder` on `store`. The name must be unique among running
    /// leasers; each client is a new life of it, which waits out its old leases.
    pub fn new(store: St, holder: impl Into<HostId>, config: LeaserConfig) -> Self {
        let leaser = Leaser::new(holder.into(), fresh_incarnation(), config);
        ItemLeaseClient {
            exchange: Exchange::new(
                leaser,
                store,
                Clock::system(),
                crate::store::REQUEST_TIMEOUT,
            ),
            scanning: Default::default(),
        }
    }

    /// Uses `clock` instead of the system's (for tests on tokio's paused clock). Call
    /// it before the first operation.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.exchange.clock = clock;
        self
    }

    /// Gives up on a store request after `timeout` (10 s by default). The outcome of
    /// a request given up on is unknown, and treated as such.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.exchange.timeout = timeout;
        self
    }

    /// Leases `item` for `duration`. Fails with `LeaseHeld` while another holder's
    /// lease counts as valid: a lease counts as expired only once this leaser has
    /// seen it unchanged for its duration plus the drift allowance, so retry later.
    pub async fn acquire(
        &self,
        item: &ItemKey,
        duration: Duration,
    ) -> Result<Grant, ItemLeaseClientError> {
        let input = Input::Acquire {
            item: item.clone(),
            duration: duration.into(),
        };
        for out in self.exchange.checked_call(input, None).await? {
            match out {
                Output::Acquired(grant) => return Ok(grant),
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(ItemLeaseClientError::NoOutcome(ItemIntent::Acquire))
    }

    /// Extends the lease of `grant`, and with it the authority that
    /// [`has_authority`](Self::has_authority) reports. `NotHeld` if this client no
    /// longer holds the item under that lease.
    pub async fn renew(&self, grant: &Grant) -> Result<(), ItemLeaseClientError> {
        self.settle(Input::Renew(grant.handle()), ItemIntent::Renew)
            .await
    }

    /// Gives the lease of `grant` up. Only its holder may: anyone else gets
    /// `NotHolder`, and a grant whose item this client holds under a later lease gets
    /// `NotHeld`. If this client holds nothing on the item it reads it first and gives
    /// up only that very lease (`LockLost` if another lease of its own is stored).
    pub async fn break_lease(&self, grant: &Grant) -> Result<(), ItemLeaseClientError> {
        self.settle(Input::Break(grant.handle()), ItemIntent::Break)
            .await
    }

    /// Moves the item of `grant` to `state` under its lease, giving the lease up in
    /// the same write if `release`. `NotHeld` if this client no longer holds the item
    /// under that lease.
    pub async fn save(
        &self,
        grant: &Grant,
        state: ItemState,
        release: bool,
    ) -> Result<(), ItemLeaseClientError> {
        let input = Input::Save {
            lease: grant.handle(),
            state,
            release,
        };
        self.settle(input, ItemIntent::Save).await
    }

    /// Leases up to `limit` items in `state` that have no lease, an expired one or
    /// this client's own, oldest state timestamp first. Two clients never get the
    /// same item: each is leased by its own conditional write.
    pub async fn next_for_state(
        &self,
        state: ItemState,
        limit: usize,
        duration: Duration,
    ) -> Result<Vec<Grant>, ItemLeaseClientError> {
        let input = Input::NextForState {
            state,
            limit,
            duration: duration.into(),
        };
        let mut leased = None;
        let turn = Some(self.scanning.clone());
        for out in self.exchange.checked_call(input, turn).await? {
            match out {
                Output::Leased(grants) => leased = Some(grants),
                // A failed scan still ends the run, with nothing leased.
                Output::Failed {
                    intent: ItemIntent::Scan,
                    error,
                    ..
                } => return Err(error.into()),
                _ => {}
            }
        }
        leased.ok_or(ItemLeaseClientError::NoOutcome(ItemIntent::Scan))
    }

    /// Whether the task holding `grant` may still act on its item: this client holds
    /// the item under that lease, and it has not run out by this client's clock.
    pub fn has_authority(&self, grant: &Grant) -> bool {
        let now = self.exchange.clock.now().local;
        let lease = grant.handle();
        self.exchange.with_machine(|l| l.has_authority(&lease, now))
    }

    /// The store, for its request charges.
    pub fn store(&self) -> &St {
        &self.exchange.store
    }

    async fn settle(&self, input: Input, intent: ItemIntent) -> Result<(), ItemLeaseClientError> {
        for out in self.exchange.checked_call(input, None).await? {
            match out {
                Output::Renewed { .. } | Output::Broken(_) | Output::Saved(_) => return Ok(()),
                Output::Failed { error, .. } => return Err(error.into()),
                _ => {}
            }
        }
        Err(ItemLeaseClientError::NoOutcome(intent))
    }
}
