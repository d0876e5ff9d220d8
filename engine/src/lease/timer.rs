//! Why a host asks to be woken: its timers, by name, so that a trace can say what a
//! tick was for.

use crate::ids::LeaseToken;
use std::fmt;

/// One of a partition-lease host's timers. The order is the one
/// [`LeaseHost::poll_timer`](super::LeaseHost::poll_timer) names a tie in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Timer {
    /// The lease table is due to be read (under session liveness, the heartbeats at
    /// most intervals, and the whole table at an audit or when a plan needs it).
    TableRead,
    /// A member's heartbeat may have expired since the last plan: plan again.
    Replan,
    /// Another host announced its leave: read its heartbeat again.
    LeavePoll,
    /// This host's own heartbeat is due: a renewal, a retry, or the end of a wait for
    /// an earlier life's tenure.
    Heartbeat,
    /// The notice of this host's leave is over: it releases its leases.
    Leave,
    /// A lease needs a look: a renewal or checkpoint, the end of this host's
    /// authority, an expiry it waits out, or a handoff to recheck.
    Lease(LeaseToken),
}

impl fmt::Display for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Timer::TableRead => f.write_str("the table read"),
            Timer::Replan => f.write_str("a plan again"),
            Timer::LeavePoll => f.write_str("a leaving host's heartbeat"),
            Timer::Heartbeat => f.write_str("its heartbeat"),
            Timer::Leave => f.write_str("the end of its leave notice"),
            Timer::Lease(lease) => write!(f, "lease {lease}"),
        }
    }
}
