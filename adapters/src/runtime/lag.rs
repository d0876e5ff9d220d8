//! One lease's lag: what the estimator measures and the metrics emit. Its own
//! module, so that the estimator and the metrics both depend on it and not on
//! each other.

use leasehold_engine::{HostId, LeaseToken};
use std::time::SystemTime;

/// One lease's lag.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseLag {
    /// The partition.
    pub lease: LeaseToken,
    /// Who owns the lease, if anyone.
    pub owner: Option<HostId>,
    /// Changes after the lease's stored checkpoint.
    pub items: u64,
    /// When the oldest of them was made, where the source can tell.
    pub oldest: Option<SystemTime>,
}
