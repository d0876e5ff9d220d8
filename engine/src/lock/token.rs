//! Lock tokens.

use crate::ids::{HostId, Incarnation};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Names one lock taken by one life of one client. A client recognises its own locks
/// only within the same life: a restarted client must wait out its old locks like
/// anyone else, because it cannot know what its previous life left half-done.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LockToken {
    /// The client that took the lock.
    #[serde(rename = "Holder")]
    pub holder: HostId,
    /// Which life of the client.
    #[serde(rename = "Life")]
    pub incarnation: Incarnation,
    /// The lock's number within that life.
    #[serde(rename = "Seq")]
    pub seq: u64,
}

impl LockToken {
    /// Whether this lock was taken by `holder` in life `incarnation`.
    pub fn is_from(&self, holder: &HostId, incarnation: Incarnation) -> bool {
        self.holder == *holder && self.incarnation == incarnation
    }
}

impl fmt::Display for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}#{}", self.holder, self.incarnation.0, self.seq)
    }
}
