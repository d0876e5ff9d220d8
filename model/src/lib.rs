//! Stateright models of the leasehold engine.
//!
//! The model of partition leases runs H hosts, each the engine's own
//! [`LeaseHost`](leasehold_engine::lease::LeaseHost), against the engine's reference
//! store. There is no second implementation of the protocol here: the model is the
//! world around the engine.
//!
//! It covers:
//! - every interleaving of request delivery and reply; requests of a crashed host may
//!   be served at any later time, and a write may be applied with its reply lost;
//! - crashes (volatile state lost) and restarts as a new incarnation;
//! - true time in ticks of one second up to a horizon;
//! - per-host clocks: each runs slow or fast by the drift bound for the whole run,
//!   and each wall clock is off true time by up to the skew;
//! - pauses: a tick may pass while a host still has due work or messages are late.
//!
//! ```
//! use leasehold_model::{Bounds, PartitionModel, check, properties};
//! use std::time::Duration;
//!
//! let bounds = Bounds { hosts: 1, partitions: 1, crashes: 0, horizon: 3, ..Bounds::default() };
//! let model = PartitionModel::new(bounds).unwrap();
//! let report = check::check(&model, &check::Options::default(), Duration::from_secs(1), |_| {});
//! assert!(report.complete());
//! assert_eq!(report.verdict(properties::EXCLUSIVITY).outcome, check::Outcome::Holds);
//! ```

pub mod check;
mod clocks;
pub mod explore;
mod first_discovery;
pub mod items;
mod limits;
mod lock_config;
mod partitions;
pub mod queue;
mod sealed;
mod svg;
pub mod trace;
pub mod transitions;
pub mod walk;
pub mod world;

pub use clocks::{Rate, TICK_MS};
pub use items::ItemModel;
/// The engine's switches for its earlier behaviours, which [`Bug::Engine`] and
/// [`LockBug::Engine`] name.
pub use leasehold_engine::{item_lease::ItemKnownBad, lease::KnownBad, queue::QueueKnownBad};
pub use limits::{BoundsError, LeastBound};
pub use lock_config::{LockBounds, LockBug, LockKind};
pub use partitions::config::{Bounds, Bug};
pub use partitions::properties;
pub use partitions::state::{Action, Events, Ghost, Host, State, Work};
pub use partitions::{PartitionModel, PartitionReport, lease_before};
pub use queue::QueueModel;
pub use svg::sequence_diagram;
pub use world::Fault;
