//! The host's requests in flight: what each was sent to do, so that its answer can
//! be read, and how many this life has issued, which orders what it learns.

use super::heartbeat::BeatStep;
use super::{HostDocument, LeaseDocument, Liveness};
use crate::expiry::{Observation, Terms};
use crate::ids::{Checkpoint, Etag, HostId, Incarnation, LeaseToken, RequestId};
use crate::time::LocalTime;
use std::collections::BTreeMap;

/// The requests a host has in flight.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Wire {
    pending: BTreeMap<RequestId, Pending>,
    issued: u64,
}

impl Wire {
    /// Issues the next request of life `incarnation`, sent at `sent_at` to do `aim`.
    pub fn issue(&mut self, incarnation: Incarnation, sent_at: LocalTime, aim: Aim) -> RequestId {
        let id = RequestId {
            incarnation,
            seq: self.issued,
        };
        self.issued += 1;
        self.pending.insert(id, Pending { sent_at, aim });
        id
    }

    /// What request `id` was sent to do, now that it is answered; `None` if it is not
    /// in flight (answered already, or another life's).
    pub fn answered(&mut self, id: &RequestId) -> Option<Pending> {
        self.pending.remove(id)
    }

    /// How many requests are in flight.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// Whether an answer still to come could show that this host holds a lease: any
    /// request in flight but its own heartbeat's.
    pub fn may_gain_lease(&self) -> bool {
        self.pending
            .values()
            .any(|p| !matches!(p.aim, Aim::Beat(_) | Aim::Retire(..) | Aim::Watch(_)))
    }

    /// How many requests this life has issued: an answer to a request issued after
    /// this count was sent later than everything known now.
    pub fn issued(&self) -> u64 {
        self.issued
    }
}

/// A request in flight, and what its answer means.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Pending {
    pub sent_at: LocalTime,
    pub aim: Aim,
}

/// A write of a lease as it was sent: what its answer is read against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Written {
    pub doc: LeaseDocument,
    pub checkpoint: Option<Checkpoint>,
    pub release: bool,
    /// A release to the successor that answers no claim (a stuck call's lease), as
    /// it was when sent: the release may be called off while it is on the wire.
    pub gift: bool,
}

/// What a request in flight was sent to do, which says how its answer is read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Aim {
    /// A scan; `seq` is how many requests had been issued before it. `table`: the
    /// whole table, or (session liveness) the heartbeats alone.
    Scan {
        seq: u64,
        table: bool,
    },
    Create(LeaseDocument),
    Take {
        doc: LeaseDocument,
        fence: Option<Observation>,
    },
    Write(Written),
    Read(LeaseToken),
    /// Reads the heartbeat of the host a lease is about to be handed to.
    Confirm {
        token: LeaseToken,
        claimant: HostId,
    },
    Beat(BeatStep),
    /// Deletes a dead member's heartbeat at the version it was read at.
    Retire(HostId, Etag),
    /// Reads the heartbeat of a host that announced its leave.
    Watch(HostId),
    /// Ends another host's tenure (session liveness): the fenced heartbeat written,
    /// by the request issued after `seq` others.
    Fence {
        doc: HostDocument,
        seq: u64,
        /// The version it is conditional on (`None`: a create).
        etag: Option<Etag>,
    },
    /// Frees a lease its owner let expire (lease liveness).
    Free(LeaseDocument),
    /// Deletes a split lease; the known-bad order creates its children only then.
    DeleteParent {
        token: LeaseToken,
        then_create: Vec<LeaseDocument>,
    },
}

impl Aim {
    /// Stamps the documents this request writes, as [`super::LeaseHost`] stamps the
    /// request itself: the host's view of a write it made matches the store's.
    pub fn stamp(&mut self, terms: Terms, liveness: Liveness) {
        match self {
            Aim::Create(doc)
            | Aim::Take { doc, .. }
            | Aim::Write(Written { doc, .. })
            | Aim::Free(doc) => {
                doc.stamp(terms, liveness);
            }
            Aim::Fence { doc, .. } => doc.stamp(terms, liveness),
            Aim::DeleteParent { then_create, .. } => {
                then_create
                    .iter_mut()
                    .for_each(|d| d.stamp(terms, liveness));
            }
            Aim::Scan { .. }
            | Aim::Read(_)
            | Aim::Confirm { .. }
            | Aim::Beat(_)
            | Aim::Retire(..)
            | Aim::Watch(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_of_a_life_has_its_own_id_and_is_answered_once() {
        let mut wire = Wire::default();
        let life = Incarnation(3);
        let first = wire.issue(life, LocalTime(5), Aim::Read(LeaseToken::from("0")));
        let second = wire.issue(life, LocalTime(6), Aim::Read(LeaseToken::from("1")));
        assert_ne!(first, second);
        assert_eq!((first.incarnation, wire.issued()), (life, 2));
        assert_eq!(wire.outstanding(), 2);
        let pending = wire.answered(&first).expect("in flight");
        assert_eq!(pending.sent_at, LocalTime(5));
        assert!(
            wire.answered(&first).is_none(),
            "a second answer is unknown"
        );
        assert_eq!((wire.outstanding(), wire.issued()), (1, 2));
    }

    #[test]
    fn only_its_own_heartbeats_in_flight_cannot_give_a_host_a_lease() {
        let mut wire = Wire::default();
        let id = wire.issue(
            Incarnation(0),
            LocalTime(0),
            Aim::Retire(HostId::from("a"), Etag::opaque("1")),
        );
        assert!(!wire.may_gain_lease());
        wire.issue(
            Incarnation(0),
            LocalTime(0),
            Aim::Read(LeaseToken::from("0")),
        );
        assert!(wire.may_gain_lease());
        wire.answered(&id);
        assert!(wire.may_gain_lease());
    }
}
