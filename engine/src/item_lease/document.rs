//! An item document with a lease, as Eclipse EDC's Cosmos DB stores keep them.

use crate::ids::{DocId, HostId, PartitionKey};
use crate::lock::LockToken;
use crate::store::{Document, FieldPath, Value, json_field, json_size};
use crate::time::{Millis, WallTime};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The processing state of an item, such as `"REQUESTED"` or `"STARTED"`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ItemState(pub String);

impl From<&str> for ItemState {
    fn from(s: &str) -> Self {
        ItemState(s.to_string())
    }
}

impl fmt::Display for ItemState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A lease on one item.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ItemLease {
    /// Who holds it (the holder's name is `token.holder`).
    #[serde(rename = "token")]
    pub token: LockToken,
    /// The holder's wall clock when it took or last renewed the lease.
    #[serde(rename = "leasedAt")]
    pub at: WallTime,
    /// The lease duration, which readers wait out (plus drift) before taking over.
    #[serde(rename = "leaseDuration")]
    pub duration: Millis,
}

impl ItemLease {
    /// The holder's name.
    pub fn holder(&self) -> &HostId {
        &self.token.holder
    }

    /// When the lease ends by the holder's wall clock.
    pub fn until(&self) -> WallTime {
        self.at + self.duration
    }
}

/// A document whose processing is coordinated by item leases.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Item {
    /// The document id.
    pub id: DocId,
    /// The partition key value.
    #[serde(rename = "partitionKey")]
    pub pk: PartitionKey,
    /// The processing state.
    pub state: ItemState,
    /// When the item entered its state; `next_for_state` takes the oldest first.
    #[serde(rename = "stateTimestamp")]
    pub state_timestamp: WallTime,
    /// The lease, if any (it may have expired).
    #[serde(default)]
    pub lease: Option<ItemLease>,
    /// The rest of the document, as JSON text, kept as is.
    pub body: String,
}

impl Item {
    /// The stored path of the state.
    pub const STATE: FieldPath = FieldPath::from_static("state");
    /// The stored path of the state's timestamp, which `next_for_state` orders by.
    pub const STATE_TIMESTAMP: FieldPath = FieldPath::from_static("stateTimestamp");
    /// The stored path of a lease's duration: present on every leased item.
    pub const LEASE_DURATION: FieldPath = FieldPath::from_static("lease.leaseDuration");

    /// A new unleased item.
    pub fn new(id: DocId, pk: PartitionKey, state: ItemState, at: WallTime) -> Item {
        Item {
            id,
            pk,
            state,
            state_timestamp: at,
            lease: None,
            body: "{}".into(),
        }
    }
}

impl Document for Item {
    const PARTITION_KEY_PATH: &'static str = "/partitionKey";

    fn id(&self) -> &DocId {
        &self.id
    }

    fn partition_key(&self) -> PartitionKey {
        self.pk.clone()
    }

    fn stored_size(&self) -> usize {
        json_size(self)
    }

    fn field(&self, path: &FieldPath) -> Option<Value> {
        json_field(self, path)
    }
}

/// Where an item lives.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemKey {
    /// Partition key value.
    pub pk: PartitionKey,
    /// Document id.
    pub id: DocId,
}

impl ItemKey {
    /// The key of `item`.
    pub fn of(item: &Item) -> ItemKey {
        ItemKey {
            pk: item.pk.clone(),
            id: item.id.clone(),
        }
    }
}
