//! The leasehold engine: pure state machines for hosts that share work through Azure
//! Cosmos DB, and the reference semantics of the store they share.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread or draws a random
//! number. Time comes in with every input; store requests and processing decisions
//! go out as outputs. The same code is driven by a model checker, a simulator and a
//! production runtime.
//!
//! - [`store`]: the reference store, the specification every real store must match.
//! - [`lease`]: partition leases and the host state machine.
//! - [`queue`]: a work queue of message documents with locks and dead letters.
//! - [`item_lease`]: leases on single documents, and "lease the next N in state S".
//! - [`lock`]: the expiry rule queue locks and item leases share.
//! - [`balance`]: balancing strategies, pure functions of a lease table.
//! - [`expiry`]: when a lease counts as expired, and how long a holder may act.

#![forbid(unsafe_code)]

pub mod balance;
pub mod drive;
pub mod expiry;
pub mod feed;
mod ids;
pub mod item_lease;
pub mod lease;
pub mod lock;
mod machine;
pub mod queue;
pub mod store;
mod text;
mod time;

pub use expiry::{ExpiryPolicy, ExpiryRule, Observation, Terms, UnknownExpiryRule};
pub use ids::{
    Checkpoint, DocId, Epoch, Etag, HostId, Incarnation, LeaseToken, PartitionKey, RequestId,
    Session, Tenure,
};
pub use machine::{Machine, Request, StoreClient};
pub use time::{Drift, LocalTime, Millis, Now, WallTime};
