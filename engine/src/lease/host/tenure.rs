//! Session liveness: a host's tenure, vouched for by its heartbeat, holds every lease
//! it owns, and a taker ends (fences) a dead host's tenure before taking its leases.
//!
//! Each successful heartbeat write, in the current tenure, renews every lease held in
//! it. A fence is a conditional write to the dead host's heartbeat: the dead host's
//! next renewal then fails on the changed etag, and it stops everything at once.

use super::LeaseHost;
use crate::ids::{Etag, HostId, LeaseToken, Tenure};
use crate::lease::membership::Member;
use crate::lease::phase::Phase;
use crate::lease::slot::Slot;
use crate::lease::wire::Aim;
use crate::lease::{HostDocument, Intent, KnownBad, LeaseDocument, Liveness, Record};
use crate::store::{Op, Reply, StoreError};
use crate::time::{LocalTime, Now};

/// Under session liveness, what a taker must do about the tenure a lease hangs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum TenureVerdict {
    /// The tenure's heartbeat is live: the lease is held.
    Live,
    /// The heartbeat has stood unchanged past expiry, but nobody has ended the
    /// tenure: fence it first, with if-match on this etag (or, if no heartbeat of the
    /// host is known, by creating a fenced one).
    Expired(Option<Etag>),
    /// The tenure is over (fenced, replaced by a newer one): the lease is free.
    Over,
    /// The heartbeat shows an earlier tenure than the lease names: it was read from
    /// before that tenure began. Held until a later read of the heartbeat tells.
    Unknown,
}

impl LeaseHost {
    /// Whether authority comes from the heartbeat rather than from each lease.
    pub(super) fn session_liveness(&self) -> bool {
        self.config.liveness() == Liveness::Session
    }

    /// Whether `doc` is held by this host in its current tenure.
    pub(super) fn held_in_tenure(&self, doc: &LeaseDocument) -> bool {
        doc.is_owned_by(&self.me)
            && doc.owner_tenure.is_some()
            && doc.owner_tenure == self.membership.beat.tenure()
    }

    /// Under session liveness, the state of the tenure `slot`'s owner holds it under,
    /// as this host knows it at `now`. `None` for a lease no tenure holds.
    pub(super) fn tenure_verdict(&self, slot: &Slot, now: Now) -> Option<TenureVerdict> {
        let doc = slot.doc();
        let owner = doc.owner.as_ref()?;
        if *owner == self.me {
            // Only this life's current tenure holds a lease for this host; one named
            // after it otherwise comes from an earlier life or tenure, which is over.
            return Some(if self.held_in_tenure(doc) {
                TenureVerdict::Live
            } else {
                TenureVerdict::Over
            });
        }
        let tenure = doc.owner_tenure?;
        let by_read_order = self.config.known_bad == Some(KnownBad::TenureByReadOrder);
        Some(match self.membership.member(owner) {
            None => TenureVerdict::Expired(None),
            // The known-bad rule: a heartbeat read after this version of the lease
            // that shows another tenure proves this one over. At Session consistency
            // that read may come from a replica behind the one that served the lease.
            Some(m) if by_read_order && m.doc.tenure != Some(tenure) => {
                if m.read >= slot.etag_learned() {
                    TenureVerdict::Over
                } else {
                    TenureVerdict::Unknown
                }
            }
            // A tenure's heartbeat is written before any lease names it, and its
            // holder's own writes only ever raise it. So a heartbeat showing a later
            // tenure proves this one over, however old the replica that served it;
            // one showing an earlier tenure (or none) may be an old read, and proves
            // nothing at once.
            Some(m) if m.doc.tenure != Some(tenure) => match m.doc.tenure {
                Some(theirs) if theirs > tenure => TenureVerdict::Over,
                _ if self.earlier_tenure_stood(m, slot, now)
                    && self.config.known_bad != Some(KnownBad::EarlierTenureWaits) =>
                {
                    TenureVerdict::Expired(Some(m.etag.clone()))
                }
                _ => TenureVerdict::Unknown,
            },
            Some(m) if m.is_fenced() => TenureVerdict::Over,
            Some(m) if self.is_alive(m, now) => TenureVerdict::Live,
            Some(m) => TenureVerdict::Expired(Some(m.etag.clone())),
        })
    }

    /// Whether `member`'s heartbeat, which shows an earlier tenure than a lease names,
    /// has stood unchanged for a whole expiry on this host's clock.
    ///
    /// A fencer whose view of a lease was old can re-create a deleted heartbeat with
    /// an earlier tenure than the lease names (the swarm's seed 951625: a host left
    /// while a handoff to its new life landed, and a peer partitioned meanwhile fenced
    /// the tenure of its first life). No later write of the heartbeat will ever come,
    /// so waiting for one strands the lease. If this version is current, the lease's
    /// tenure has written nothing since it was written, which is at or before this
    /// host first saw it: an expiry after that, the tenure's authority is over, as
    /// with any heartbeat that stood unchanged. If it is an old read, the fence's
    /// if-match on its etag fails. The wait is on this host's own clock whatever the
    /// expiry rule, because the version's timestamp may be a fencer's copy.
    pub(super) fn earlier_tenure_stood(&self, member: &Member, slot: &Slot, now: Now) -> bool {
        now.local >= self.earlier_tenure_expires(member, slot)
    }

    /// When [`earlier_tenure_stood`](Self::earlier_tenure_stood) turns true: the wait
    /// is the longest of this host's terms, the heartbeat's and the lease's (whose
    /// last writer may be the tenure's holder, and the heartbeat a fencer's copy).
    fn earlier_tenure_expires(&self, member: &Member, slot: &Slot) -> LocalTime {
        let policy = self
            .config
            .expiry
            .judging(member.doc.terms)
            .judging(slot.doc().terms);
        member.seen + policy.observer_wait()
    }

    /// For a lease whose tenure is [`Unknown`](TenureVerdict::Unknown) at `now`, when
    /// its owner's heartbeat will have stood long enough to be fenced: the plan must be
    /// made again then.
    pub(super) fn unknown_tenure_until(&self, slot: &Slot, now: Now) -> Option<LocalTime> {
        let owner = slot.doc().owner.as_ref()?;
        let member = self.membership.member(owner)?;
        (self.tenure_verdict(slot, now) == Some(TenureVerdict::Unknown))
            .then(|| self.earlier_tenure_expires(member, slot))
            .filter(|at| *at > now.local)
    }

    /// Ends `host`'s `tenure` with a conditional write of a fenced heartbeat, once: a
    /// take of its leases waits for the answer.
    pub(super) fn fence(&mut self, now: Now, host: &HostId, tenure: Tenure, etag: Option<Etag>) {
        // A fence on this very version failed: it is not current, and never will be
        // again. A read that shows another version tells more; fencing it again, on a
        // read from a replica that lags, failed in a loop as fast as the store answers
        // (the emulator's two regions, a newcomer in the lagging one).
        if etag.is_some() && self.membership.refuted(host) == etag.as_ref() {
            return;
        }
        let prefix = &self.config.prefix;
        let Some(doc) = self
            .membership
            .begin_fence(prefix, &self.me, host, tenure, now)
        else {
            return;
        };
        let op = match etag.clone() {
            Some(etag) => Op::Replace {
                doc: Record::Host(doc.clone()),
                if_match: Some(etag),
            },
            // No heartbeat known: create the fenced one, which fails if the host's
            // heartbeat exists after all.
            None => Op::Create(Record::Host(doc.clone())),
        };
        let seq = self.wire.issued();
        let aim = Aim::Fence { doc, seq, etag };
        self.send(now, Intent::Fence, op, aim);
    }

    pub(super) fn on_fence_response(
        &mut self,
        now: Now,
        doc: HostDocument,
        seq: u64,
        fenced_at: Option<Etag>,
        result: Result<Reply<Record>, StoreError>,
    ) {
        let landed = match &result {
            Ok(Reply::Created(etag) | Reply::Replaced(etag)) => Some(etag.clone()),
            _ => None,
        };
        if let (Err(StoreError::PreconditionFailed), Some(etag)) = (&result, fenced_at) {
            self.membership.refute(&doc.host, etag);
        }
        let fenced = landed.is_some();
        self.membership.fence_answered(now, doc, seq, landed);
        match result {
            _ if fenced => {
                self.touch_handoffs();
                // The leases of the fenced tenure are free now: read where they are
                // (the heartbeats alone do not say) and take them.
                if self.phase == Phase::Running {
                    self.need_table(now);
                }
            }
            Err(StoreError::Throttled { retry_after }) => {
                self.table.read_by(now.local + retry_after);
            }
            // It renewed, came back, or was fenced by someone else: look again.
            _ => self.table.read_at(now.local),
        }
    }

    /// Gives every lease held in the current tenure the heartbeat's authority.
    pub(super) fn grant_session_authority(&mut self) {
        let until = self.membership.beat.authority_until();
        let held: Vec<LeaseToken> = self
            .agenda
            .active()
            .iter()
            .filter(|t| {
                self.slots
                    .get(*t)
                    .is_some_and(|s| self.held_in_tenure(s.doc()))
            })
            .cloned()
            .collect();
        for token in held {
            let Some(slot) = self.slots.get_mut(&token) else {
                continue;
            };
            if let Some((own, doc)) = slot.held()
                && doc.epoch == own.epoch
                && own.authority_until != until
            {
                own.authority_until = until;
                self.touch(&token);
            }
        }
    }

    /// The authority a lease held under the current tenure has: the heartbeat's.
    pub(super) fn session_authority(&self, doc: &LeaseDocument) -> Option<LocalTime> {
        self.held_in_tenure(doc)
            .then_some(self.membership.beat.authority_until())
            .flatten()
    }
}
