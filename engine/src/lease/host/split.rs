//! A partition whose range splits: its lease is replaced by one lease per child.
//!
//! The order keeps every range covered and never lets two handlers read one range:
//! 1. The handler reports the split ([`Input::Split`](crate::lease::Input::Split)); the
//!    session stops.
//! 2. Once the call has ended, the owner marks the lease with its children (a
//!    conditional owner write). A marked lease is never started again, by anyone.
//! 3. Whoever owns the marked lease creates each child's lease, owned by itself (as
//!    the change feed processor does), from the marked checkpoint; a child that
//!    exists already is left as it is. Owned at once, the children need no other
//!    host to find them; balancing spreads them later.
//! 4. Once every child's lease exists, the owner gives the marked lease up (a
//!    conditional owner write): a marked lease that nobody owns is a finished split.
//!    It stays in the table for good, and is no lease to plan, take or process.
//!
//! A crash anywhere leaves a marked lease, owned, whose next owner picks up at step 3.
//! Children exist only after the mark, so nobody processes a child while anybody
//! processes the parent, and the parent's checkpoint is frozen by the mark, so no child
//! starts behind it.
//!
//! The finished split is kept, not deleted, because a create only asks whether the id
//! is free. Deleted, the range's lease could be created again: by a child's create
//! held on the wire past the child's own split, by the owner of its parent's marked
//! lease retrying a create whose answer was lost, by a host whose (late or stale)
//! view of the table lacks the lineage; and a late read could bring the deleted lease
//! back into a host's view, where nothing newer says it is gone. The swarm found the
//! first and the last (`DeleteSplitLease` keeps that behaviour as a known-bad variant).
//! An id that is never freed is never reused: the cost is one small document per split.

use super::LeaseHost;
use crate::ids::{LeaseToken, PartitionKey, RequestId, Session};
use crate::lease::slot::Slot;
use crate::lease::wire::Aim;
use crate::lease::{InputError, Intent, KnownBad, LeaseDocument, LossCause, Record, StopReason};
use crate::store::{Op, Reply, StoreError};
use crate::time::Now;
use std::collections::BTreeSet;

/// What a split lease needs next.
pub(super) enum SplitStep {
    /// Write the children into the lease.
    Mark,
    /// Create the children's leases not yet known to exist.
    CreateChildren,
    /// Give the marked lease up: the split is finished.
    Finish,
    /// Delete the marked lease (the known-bad variants).
    DeleteParent,
    /// Wait for creates in flight.
    Wait,
}

impl LeaseHost {
    /// The handler reports that `lease` split into `children`.
    pub(super) fn on_split(
        &mut self,
        lease: LeaseToken,
        session: Session,
        children: Vec<LeaseToken>,
    ) -> Result<(), InputError> {
        let distinct: BTreeSet<&LeaseToken> = children.iter().collect();
        if children.is_empty() || distinct.len() != children.len() || distinct.contains(&lease) {
            return Err(InputError::InvalidSplit { lease });
        }
        self.processing(&lease, session)?.split = Some(children);
        let stop = self
            .sessions
            .stop(&lease, StopReason::Split, self.now.local);
        self.touch(&lease);
        if let Some(stop) = stop {
            self.emit(stop);
        }
        Ok(())
    }

    /// What an owned lease needs for its split, if it is splitting. `None` also while
    /// the split's session is still stopping.
    pub(super) fn split_step(&self, token: &LeaseToken, slot: &Slot) -> Option<SplitStep> {
        let own = slot.own()?;
        let children = &slot.doc().split_into;
        if children.is_empty() {
            let stopped = self.sessions.get(token).is_none();
            return (own.split.is_some() && stopped).then_some(SplitStep::Mark);
        }
        if self.config.known_bad == Some(KnownBad::DeleteParentFirst) {
            return Some(SplitStep::DeleteParent);
        }
        let split_away = self.split_away();
        let missing = children
            .iter()
            .filter(|c| !own.children_made.contains(c) && !split_away.contains(c))
            .collect::<Vec<_>>();
        if missing.is_empty() {
            Some(
                if self.config.known_bad == Some(KnownBad::DeleteSplitLease) {
                    SplitStep::DeleteParent
                } else {
                    SplitStep::Finish
                },
            )
        } else if missing.iter().any(|c| !self.creates.is_creating(c)) {
            Some(SplitStep::CreateChildren)
        } else {
            Some(SplitStep::Wait)
        }
    }

    /// Sends a create for every child of marked lease `token` that is neither known
    /// to exist nor being created.
    pub(super) fn create_children(&mut self, now: Now, token: &LeaseToken) {
        let Some(slot) = self.slots.get(token) else {
            return;
        };
        let made = slot
            .own()
            .map(|o| o.children_made.clone())
            .unwrap_or_default();
        let split_away = self.split_away();
        let docs: Vec<LeaseDocument> = slot
            .doc()
            .split_into
            .iter()
            .filter(|c| {
                !made.contains(c) && !split_away.contains(c) && !self.creates.is_creating(c)
            })
            .map(|c| self.child_doc(slot.doc(), c, now))
            .collect();
        for doc in docs {
            self.send_child(now, doc);
        }
    }

    /// The lease of `child` of `parent`, owned by this host: under session liveness in
    /// its current tenure, or by nobody between tenures.
    fn child_doc(&self, parent: &LeaseDocument, child: &LeaseToken, now: Now) -> LeaseDocument {
        let mut doc = parent.child(child.clone(), now.wall);
        let tenure = self.membership.beat.tenure();
        if !self.session_liveness() || tenure.is_some() {
            doc.owner = Some(self.me.clone());
            doc.owner_life = Some(self.incarnation());
            doc.epoch = doc.epoch.next();
            doc.owner_tenure = tenure.filter(|_| self.session_liveness());
        }
        doc
    }

    fn send_child(&mut self, now: Now, doc: LeaseDocument) {
        self.creates.sent(doc.token.clone());
        let op = Op::Create(Record::Lease(doc.clone()));
        self.send(now, Intent::CreateChild, op, Aim::Create(doc));
    }

    /// Deletes marked lease `token`, if it is still the version this host last saw.
    pub(super) fn delete_parent(&mut self, now: Now, token: &LeaseToken) -> Option<RequestId> {
        let slot = self.slots.get(token)?;
        // The known-bad order creates the children only after the delete.
        let then_create = if self.config.known_bad == Some(KnownBad::DeleteParentFirst) {
            let made = &slot.own()?.children_made;
            slot.doc()
                .split_into
                .iter()
                .filter(|c| !made.contains(c))
                .map(|c| self.child_doc(slot.doc(), c, now))
                .collect()
        } else {
            Vec::new()
        };
        let op = Op::Delete {
            pk: PartitionKey::new(slot.doc().id.as_str()),
            id: slot.doc().id.clone(),
            if_match: Some(slot.etag().clone()),
        };
        let aim = Aim::DeleteParent {
            token: token.clone(),
            then_create,
        };
        Some(self.send(now, Intent::DeleteParent, op, aim))
    }

    /// A create of `child`'s lease was answered: if it exists now, its parent's
    /// owner moves on; if not, it tries again after a backoff.
    pub(super) fn on_child_answer(
        &mut self,
        now: Now,
        child: &LeaseDocument,
        result: &Result<Reply<Record>, StoreError>,
    ) {
        let Some(parent) = child.split_from.last().cloned() else {
            return;
        };
        let retry_at = match result {
            Ok(Reply::Created(_)) | Err(StoreError::Conflict) => None,
            Err(StoreError::Throttled { retry_after }) => Some(now.local + *retry_after),
            _ => Some(now.local + self.backoff()),
        };
        let Some(slot) = self.slots.get_mut(&parent) else {
            return;
        };
        let Some(own) = slot.own_mut() else {
            return;
        };
        match retry_at {
            None if !own.children_made.contains(&child.token) => {
                own.children_made.push(child.token.clone());
            }
            None => {}
            Some(t) => slot.retry_after(t),
        }
        self.touch(&parent);
    }

    pub(super) fn on_parent_deleted(
        &mut self,
        now: Now,
        token: LeaseToken,
        then_create: Vec<LeaseDocument>,
        result: Result<Reply<Record>, StoreError>,
    ) {
        let backoff = self.backoff();
        self.touch(&token);
        let Some(slot) = self.slots.get_mut(&token) else {
            return;
        };
        slot.answered();
        match result {
            Ok(Reply::Deleted) | Err(StoreError::NotFound) => {
                self.split_finished(now);
                self.slots.remove(&token);
                self.touch(&token);
                for doc in then_create {
                    self.send_child(now, doc);
                }
            }
            Err(StoreError::PreconditionFailed) => {
                slot.refuse(backoff, self.config.known_bad);
                slot.distrust(self.wire.issued(), self.config.known_bad);
                self.lose(&token, LossCause::TakenOver);
            }
            Err(StoreError::Throttled { retry_after }) => {
                slot.retry_after(now.local + retry_after);
            }
            Err(_) | Ok(_) => slot.distrust(self.wire.issued(), self.config.known_bad),
        }
        self.touch(&token);
    }

    /// Leases that existed and split in turn: some lease names them in its lineage.
    /// A child of a split that is among them was made, and must not be made again
    /// (its own children carry on its range).
    fn split_away(&self) -> BTreeSet<&LeaseToken> {
        self.slots
            .values()
            .flat_map(|s| s.doc().split_from.iter())
            .collect()
    }

    /// A marked lease is gone: its split is done, whoever finished it. Plan again
    /// now, and tell the other hosts through the heartbeat to read the table.
    pub(super) fn split_finished(&mut self, now: Now) {
        // The plan that gave this host its share counted the parent: plan again
        // now, or the children may wait a whole interval for an owner.
        self.table.unsettle();
        self.table.read_by(now.local);
        self.membership.beat.split_done();
    }

    /// Configured partitions that splits replaced: named in some lease's lineage or
    /// in a marked lease's children. They are not created again when absent.
    pub(super) fn replaced_by_splits(&self) -> BTreeSet<&LeaseToken> {
        let mut replaced = self.split_away();
        replaced.extend(self.slots.values().flat_map(|s| &s.doc().split_into));
        replaced
    }
}
