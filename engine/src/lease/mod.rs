//! Partition leases: one lease document per partition, a host state machine that
//! acquires, renews, checkpoints, balances and releases them.
//!
//! The host is sans-IO: see [`LeaseHost`] for the driving loop.

mod agenda;
mod audit;
mod config;
mod creates;
mod document;
mod heartbeat;
mod host;
mod io;
mod membership;
mod memo;
mod phase;
mod reads;
mod session;
mod slot;
mod timer;
mod wire;

pub use audit::{WriteFault, audit_write};
pub use config::{
    CheckpointPolicy, ConfigError, KnownBad, LEAVE_POLL, LeaseConfig, Liveness, UnknownLiveness,
};
pub use document::{HostDocument, LeaseDocument, Record};
pub use host::{LeaseHost, LeaseState};
pub use io::{Input, InputError, Intent, LossCause, Output, Purpose, StopReason, StoreRequest};
pub use memo::Plans;
pub use session::{Run, Stage};
pub use timer::Timer;
