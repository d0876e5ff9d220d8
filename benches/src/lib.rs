//! Criterion benchmarks of the leasehold engine live in `benches/`; this library
//! holds the lease tables they share.

use leasehold_engine::balance::{LeaseStatus, LeaseView, TableView};
use leasehold_engine::{HostId, LeaseToken, Now};

/// A lease table of `partitions` leases spread round-robin over `owners` hosts named
/// `host-0`, `host-1`, …, as a steady state; `members` lists every live host,
/// including any that own nothing yet (a scale-out).
///
/// ```
/// let view = leasehold_benches::table(10, 2, 3);
/// assert_eq!(view.leases.len(), 10);
/// assert_eq!(view.members.len(), 3);
/// ```
pub fn table(partitions: usize, owners: usize, members: usize) -> TableView {
    let leases = (0..partitions)
        .map(|p| LeaseView {
            token: LeaseToken::from(format!("{p:06}")),
            owner: Some(HostId::from(format!("host-{}", p % owners.max(1)))),
            status: LeaseStatus::Held,
            claimants: Vec::new(),
        })
        .collect();
    TableView {
        leases,
        members: (0..members)
            .map(|h| HostId::from(format!("host-{h}")))
            .collect(),
        now: Now::default(),
    }
}

pub mod lone_host;
pub mod rebalance;
