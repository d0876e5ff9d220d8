//! What goes into an item leaser and what comes out of it.

use super::{Item, ItemKey, ItemState};
use crate::ids::{DocId, HostId, PartitionKey, RequestId};
use crate::lock::LockToken;
use crate::store::{Op, Reply, StoreError};
use crate::time::{LocalTime, Millis, WallTime};
use std::fmt;

/// A command or a store answer for a [`Leaser`](super::Leaser).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// Lease one item for `duration`.
    Acquire {
        /// The item.
        item: ItemKey,
        /// How long the lease lasts.
        duration: Millis,
    },
    /// Extend a lease this leaser holds.
    Renew(ItemHandle),
    /// Give a lease up; only its holder may.
    Break(ItemHandle),
    /// Lease up to `limit` items in `state` that have no lease, an expired one, or
    /// one this leaser holds, oldest state timestamp first.
    NextForState {
        /// The state wanted.
        state: ItemState,
        /// At most this many.
        limit: usize,
        /// How long each lease lasts.
        duration: Millis,
    },
    /// Move a held item to a new state, under the lease, and give the lease up if
    /// `release`.
    Save {
        /// The item and the lease the save is written under.
        lease: ItemHandle,
        /// Its new state.
        state: ItemState,
        /// Whether to give the lease up in the same write.
        release: bool,
    },
    /// The store answered request `id`.
    Response {
        /// The request answered.
        id: RequestId,
        /// What the store said.
        result: Result<Reply<Item>, StoreError>,
    },
}

/// One lease of one item, as the task it was granted to names it: the item, and
/// the token of that lease. Calls name both because one leaser may lease an item
/// again while an earlier lease's task still runs (`next_for_state` takes this
/// leaser's own items, and so does `acquire`): a task that overran its authority
/// must not renew, save or break the later lease another task works under. A renewal
/// or save under a lease this leaser no longer holds, and a break while it holds the
/// item under a later lease, are refused with [`ItemError::NotHeld`] and change
/// nothing; a break while it holds nothing reads the item and gives up only the lease
/// named.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemHandle {
    /// Where the item lives.
    pub item: ItemKey,
    /// The lease's token.
    pub token: LockToken,
}

/// A lease granted to this leaser.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    /// The item.
    pub item: DocId,
    /// The item's partition key value.
    pub pk: PartitionKey,
    /// The lease's token.
    pub token: LockToken,
    /// The end of the lease by this leaser's wall clock (informational).
    pub until: WallTime,
    /// Act on the item only before this local time, unless renewed.
    pub authority_until: LocalTime,
}

impl Grant {
    /// Where the item lives.
    pub fn key(&self) -> ItemKey {
        ItemKey {
            pk: self.pk.clone(),
            id: self.item.clone(),
        }
    }

    /// The name of this lease that renewals, saves and breaks take.
    pub fn handle(&self) -> ItemHandle {
        ItemHandle {
            item: self.key(),
            token: self.token.clone(),
        }
    }
}

/// What a leaser asks its driver to do, or tells it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// Send this request to the store and answer with [`Input::Response`].
    Request(ItemRequest),
    /// An item is leased.
    Acquired(Grant),
    /// A `next_for_state` finished with these leases (possibly none).
    Leased(Vec<Grant>),
    /// A lease is renewed.
    Renewed {
        /// The item.
        item: DocId,
        /// The new end of authority.
        authority_until: LocalTime,
    },
    /// A lease is given up.
    Broken(DocId),
    /// A held item moved to a new state.
    Saved(DocId),
    /// An operation failed; the item is left as the store has it.
    Failed {
        /// The item.
        item: DocId,
        /// The operation.
        intent: ItemIntent,
        /// Why.
        error: ItemError,
    },
}

/// Why a leaser sends a store request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ItemIntent {
    /// Read one item before leasing or breaking it.
    Read,
    /// Lease one item.
    Acquire,
    /// Extend a lease.
    Renew,
    /// Give a lease up.
    Break,
    /// Move a held item to a new state.
    Save,
    /// Read the items for a `next_for_state`.
    Scan,
    /// Lease one item for a `next_for_state`.
    Lease,
}

impl ItemIntent {
    /// The intent's name in traces and reports (`acquire`, `break`).
    pub fn name(self) -> &'static str {
        match self {
            ItemIntent::Read => "read",
            ItemIntent::Acquire => "acquire",
            ItemIntent::Renew => "renew",
            ItemIntent::Break => "break",
            ItemIntent::Save => "save",
            ItemIntent::Scan => "scan",
            ItemIntent::Lease => "lease",
        }
    }
}

impl std::fmt::Display for ItemIntent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A store request from a leaser.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ItemRequest {
    /// Echo this in the response.
    pub id: RequestId,
    /// Why it is sent.
    pub intent: ItemIntent,
    /// The lease the request acts under, for writes by a holder.
    pub lock: Option<LockToken>,
    /// The operation.
    pub op: Op<Item>,
}

/// Why an item-lease operation was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ItemError {
    /// Another holder's lease is still valid.
    LeaseHeld {
        /// The holder.
        holder: HostId,
        /// The end of its lease by its own wall clock.
        until: WallTime,
    },
    /// Only the lease's holder may break it.
    NotHolder {
        /// The actual holder, if any.
        holder: Option<HostId>,
    },
    /// This leaser's lease was taken over or the item changed: nothing was changed.
    LockLost,
    /// This leaser does not hold the item under the lease named: it holds no lease
    /// on it (never, or let go), or a later one (it leased the item again).
    NotHeld,
    /// No such item.
    NotFound,
    /// A `next_for_state` is still running.
    Busy,
    /// No request with this id is outstanding.
    UnknownRequest(RequestId),
    /// The store failed; with an ambiguous error the write may have been applied.
    Store(StoreError),
}

impl fmt::Display for ItemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ItemError::LeaseHeld { holder, until } => write!(
                f,
                "the item is leased by {holder} until {} (its clock)",
                until.as_unix_millis()
            ),
            ItemError::NotHolder { holder: Some(h) } => {
                write!(f, "only the holder ({h}) may break the lease")
            }
            ItemError::NotHolder { holder: None } => f.write_str("the item has no lease to break"),
            ItemError::LockLost => {
                f.write_str("the lease was lost: the item changed since it was leased")
            }
            ItemError::NotHeld => f.write_str("this leaser holds no lease on the item"),
            ItemError::NotFound => f.write_str("no such item"),
            ItemError::Busy => f.write_str("a next_for_state is still running"),
            ItemError::UnknownRequest(id) => write!(f, "no request {id} is outstanding"),
            ItemError::Store(e) => write!(f, "store: {e}"),
        }
    }
}

impl std::error::Error for ItemError {}
