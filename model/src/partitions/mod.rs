//! The stateright model of partition leases: H hosts running the engine's
//! [`LeaseHost`](leasehold_engine::lease::LeaseHost) against the engine's reference
//! store.
//!
//! Its files stand in layers, each using only those below it: the state and the
//! bounds, then the cluster and the rules of its steps, then the properties and the
//! traces that read it, and on top the stateright model that puts them together.

mod cluster;
pub(crate) mod config;
mod model;
pub mod properties;
pub(crate) mod state;
mod trace;

pub use cluster::{PartitionModel, lease_before};
pub use model::PartitionReport;
