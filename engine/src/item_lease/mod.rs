//! Leases on single documents, as Eclipse EDC's Cosmos DB stores take them, with the
//! early `nextForState` bug left out.
//!
//! - `acquire` leases one item, or fails with `LeaseHeld { holder, until }` while
//!   another holder's lease is valid;
//! - `renew` extends a held lease; `break` gives it up, and only its holder may;
//!   both, and `save`, name the lease ([`ItemHandle`]), not the item alone, so that
//!   a task that overran its lease cannot act under a later one;
//! - `next_for_state` leases up to `limit` items in a state that have no lease, an
//!   expired lease, or this leaser's own, oldest state timestamp first. Each item is
//!   leased by its own conditional write, so two callers never get the same item.
//!
//! Expiry follows [`crate::lock`]: a lease counts as expired only after its version
//! was seen unchanged for its duration plus the drift allowance, so under that rule a
//! lease is never reported expired on first sight. Holder names must be unique per
//! running process; a restarted process is a new life and waits out its old leases.

mod config;
mod document;
mod io;
mod leaser;

pub use config::{Candidate, ItemKnownBad, LeaserConfig, Selector, available};
pub use document::{Item, ItemKey, ItemLease, ItemState};
pub use io::{Grant, Input, ItemError, ItemHandle, ItemIntent, ItemRequest, Output};
pub use leaser::Leaser;
