//! What every model's bounds share: the error for bounds that cannot be checked, the
//! range rule, and the least bound a known-bad variant needs.

use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::{ConfigError, Liveness};

/// The bounds a variant's counterexample needs where they differ from the general
/// defaults: what `leasehold check --bug` runs for every bound not given on the
/// command line, so that each variant the model can find is found at its defaults.
/// The values are the bounds `model/tests` find each variant at, or, for a variant
/// out of reach, the least bound tried or shown by hand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeastBound {
    /// Hosts.
    pub hosts: Option<u8>,
    /// Partitions.
    pub partitions: Option<u8>,
    /// Crashes.
    pub crashes: Option<u8>,
    /// Graceful shutdowns.
    pub shutdowns: Option<u8>,
    /// Zombies.
    pub zombies: Option<u8>,
    /// A deploy half done.
    pub deploy: bool,
    /// Pauses.
    pub pauses: Option<u8>,
    /// Writes held on the wire.
    pub delays: Option<u8>,
    /// Stale reads.
    pub stale_reads: Option<u8>,
    /// How many writes back a stale read may go.
    pub stale_depth: Option<u8>,
    /// Lost replies.
    pub lost_replies: Option<u8>,
    /// Late replies.
    pub late_replies: Option<u8>,
    /// Retried writes.
    pub retries: Option<u8>,
    /// Bursts of throttled reads.
    pub throttled_reads: Option<u8>,
    /// Faults a host step may suffer.
    pub faults_per_step: Option<u8>,
    /// Slow drains.
    pub slow_drains: Option<u8>,
    /// Stuck calls.
    pub stuck_calls: Option<u8>,
    /// Wall-clock skew, in seconds.
    pub skew: Option<u8>,
    /// Splits.
    pub splits: Option<u8>,
    /// Checkpoints per lease.
    pub progress: Option<u8>,
    /// Queue and items: abandons or breaks clients may choose.
    pub give_backs: Option<u8>,
    /// Queue: deliveries after which a message is dead-lettered.
    pub max_dequeue: Option<u8>,
    /// Queue: dead letters an operator may ask to delete.
    pub dead_letter_deletes: Option<u8>,
    /// Queue: handlers that may overrun their delivery's authority.
    pub overruns: Option<u8>,
    /// Queue and items: how many seconds a lock or lease lasts.
    pub lock_ticks: Option<u8>,
    /// Seconds of true time explored.
    pub horizon: Option<u8>,
    /// Where authority comes from.
    pub liveness: Option<Liveness>,
    /// The balancing strategy, where the variant needs one that steals.
    pub strategy: Option<Strategy>,
    /// Search depth first: breadth first would hold every state up to the
    /// counterexample's depth in memory.
    pub depth_first: bool,
    /// Search by seeded random walks from this seed ([`crate::walk`]): the
    /// counterexample lies too deep for an exhaustive search to reach in seconds.
    pub walks: Option<u64>,
    /// The model does not show it in seconds: no bound that fits on these machines is known to
    /// (docs/model-checking.md, "The store production has"), or it breaks no property the model
    /// has; the engine's tests and the simulator keep it. `leasehold check` says so before it
    /// searches, and without a time or state limit given, searches for 10 minutes at most.
    pub out_of_reach: bool,
    /// A path, as `leasehold check --replay` and [`check::replay`](crate::check::replay)
    /// take it, that was built by hand, choice by choice, and breaks a property at this
    /// bound where no search tried found a counterexample (BENCHMARKS.md): the model can
    /// show the variant, though it does not find it. `leasehold check` prints its replay
    /// command beside the out-of-reach note.
    pub shown_by: Option<&'static str>,
}

/// Bounds that cannot be checked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    /// Too few or too many of something.
    #[error("{what} must be between {min} and {max}, not {value}")]
    OutOfRange {
        /// The setting.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The smallest accepted value.
        min: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A known-bad variant of the partition protocol that does not exist.
    #[error("unknown bug {name:?}: expected one of {expected}")]
    UnknownBug {
        /// The name given.
        name: String,
        /// The names the partition model knows.
        expected: String,
    },
    /// A known-bad variant that does not exist for this model.
    #[error("unknown bug {name:?} for this check: expected one of {expected}")]
    UnknownVariant {
        /// The name given.
        name: String,
        /// The names this check knows.
        expected: String,
    },
    /// The lock settings derived from the bounds are inconsistent.
    #[error("the lock settings are inconsistent: {0}")]
    LockSettings(String),
    /// The protocol settings derived from the bounds are inconsistent.
    #[error("the protocol settings are inconsistent: {0}")]
    Protocol(ConfigError),
    /// A variant of session liveness asked for under lease liveness.
    #[error("{0} breaks session liveness: it needs --strategy handoff and --liveness session")]
    BugNeedsSession(&'static str),
}

pub(crate) fn range(what: &'static str, value: u64, min: u64, max: u64) -> Result<(), BoundsError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(BoundsError::OutOfRange {
            what,
            value,
            min,
            max,
        })
    }
}
