//! Partition leases: one lease document per partition, a host state machine that
//! acquires, renews, checkpoints, balances and releases them.
//!
//! The host is sans-IO: see [`LeaseHost`] for the driving loop.

mod agenda;
mod config;
mod document;
mod host;
mod io;
mod membership;
mod reads;
mod respond;
mod session;
mod slot;
mod table;
mod tenure;
mod write;

pub use config::{ConfigError, KnownBad, LeaseConfig, Liveness, UnknownLiveness};
pub use document::{HostDocument, LeaseDocument, Record};
pub use host::{LeaseHost, LeaseState};
pub use io::{Input, InputError, Intent, LossCause, Output, Purpose, StopReason, StoreRequest};
pub use session::{Run, Stage};
