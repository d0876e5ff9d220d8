//! The owner's writes: which one a lease needs now (a re-read, a claimant check, a
//! release, a resume at a new epoch, a checkpoint, a renewal), and sending it.

use super::LeaseHost;
use super::split::SplitStep;
use crate::ids::{HostId, LeaseToken, PartitionKey};
use crate::lease::phase::Phase;
use crate::lease::slot::{Own, ReleaseTo, Slot};
use crate::lease::wire::{Aim, Written};
use crate::lease::{CheckpointPolicy, HostDocument, Intent, KnownBad, Record};
use crate::store::Op;
use crate::time::Now;

/// The request one lease needs now.
enum Due {
    /// Re-read it after a conflict or an unknown outcome.
    Reread,
    /// Read the heartbeat of the host it is about to be handed to.
    Confirm(HostId),
    /// Write it.
    Write(Intent),
    /// Create the leases of its children (it split).
    Children,
    /// Delete it: it split, and its children's leases exist.
    DeleteParent,
}

impl LeaseHost {
    /// Sends re-reads and owner writes (renew, resume, checkpoint, release) that are
    /// due.
    pub(super) fn write_due(&mut self, now: Now, scope: &[LeaseToken]) {
        for token in scope {
            let Some(slot) = self.slots.get(token).filter(|s| s.can_send(now.local)) else {
                continue;
            };
            let id = match self.due(token, slot, now) {
                None => continue,
                Some(Due::Reread) => {
                    let op = Op::Read {
                        pk: PartitionKey::new(slot.doc().id.as_str()),
                        id: slot.doc().id.clone(),
                    };
                    self.send(now, Intent::Reread, op, Aim::Read(token.clone()))
                }
                Some(Due::Confirm(claimant)) => {
                    // The claimant may have left since the last scan: a handoff to a
                    // host that is gone would leave the lease idle for a whole expiry.
                    let id = HostDocument::id_for(&self.config.prefix, &claimant);
                    let op = Op::Read {
                        pk: PartitionKey::new(id.as_str()),
                        id,
                    };
                    let aim = Aim::Confirm {
                        token: token.clone(),
                        claimant,
                    };
                    self.send(now, Intent::ConfirmClaim, op, aim)
                }
                Some(Due::Write(intent)) => match self.owner_write(now, token, intent) {
                    Some(id) => id,
                    None => continue,
                },
                Some(Due::Children) => {
                    self.create_children(now, token);
                    continue;
                }
                Some(Due::DeleteParent) => match self.delete_parent(now, token) {
                    Some(id) => id,
                    None => continue,
                },
            };
            self.mark_in_flight(token, id);
        }
    }

    /// What `token` needs now, if anything.
    fn due(&self, token: &LeaseToken, slot: &Slot, now: Now) -> Option<Due> {
        if slot.is_stale() {
            return Some(Due::Reread);
        }
        let own = slot.own()?;
        // Under session liveness a host between tenures holds no lease with authority:
        // one named after it belongs to an ended tenure, or to another life of its name
        // that it is still waiting out, and whatever it wrote (a handoff, a release)
        // would free the lease while that life may still process it. It waits for a
        // tenure of its own, as a resume does.
        if self.session_liveness() && self.membership.beat.tenure().is_none() {
            return None;
        }
        let run = self.sessions.get(token);
        // A running or draining call must end first, and so must a lost one: it has
        // no authority, but the driver aborts it only within its grace, and a release
        // or a handoff lets the next holder start at once, with no expiry to wait
        // out. Past the stop timeout a call that never ends no longer holds the
        // lease back (`give_up_stuck`).
        let free_beside = self.config.known_bad == Some(KnownBad::FreeBesideLostCall);
        let releasing = own.release.is_some()
            && run.is_none_or(|r| {
                r.lost_since().is_some_and(|since| {
                    free_beside || now.local >= since + self.config.stop_timeout
                })
            });
        match &own.release {
            Some(ReleaseTo::Host {
                to,
                confirmed: false,
            }) if releasing => return Some(Due::Confirm(to.clone())),
            Some(ReleaseTo::Nobody) if releasing => return Some(Due::Write(Intent::Release)),
            Some(ReleaseTo::Host { .. } | ReleaseTo::Successor(_)) if releasing => {
                return Some(Due::Write(Intent::Handoff));
            }
            _ => {}
        }
        match self.split_step(token, slot) {
            Some(SplitStep::Mark) => return Some(Due::Write(Intent::Split)),
            Some(SplitStep::CreateChildren) => return Some(Due::Children),
            Some(SplitStep::Finish) => return Some(Due::Write(Intent::FinishSplit)),
            Some(SplitStep::DeleteParent) => return Some(Due::DeleteParent),
            Some(SplitStep::Wait) => return None,
            None => {}
        }
        let session = self.session_liveness();
        // A resume names the tenure it is held in: it waits for one.
        if own.resume && (!session || self.membership.beat.tenure().is_some()) {
            return Some(Due::Write(Intent::Resume));
        }
        if own.checkpoint.is_some() && self.checkpoint_due(own, now) {
            return Some(Due::Write(Intent::Checkpoint));
        }
        if session {
            // The heartbeat renews every lease held in the tenure.
            return None;
        }
        let policy = &self.config.expiry;
        // A draining session does not renew: its drain ends, at the latest, when
        // the authority it has runs out.
        let draining = run.is_some_and(|r| r.is_draining());
        let renew = own.authority_until.is_none()
            || (slot.doc().fenced && own.fence_passed(policy, now))
            || (!draining && now.local >= own.next_renew);
        renew.then_some(Due::Write(Intent::Renew))
    }

    /// Whether the policy lets a checkpoint go in a write of its own now.
    fn checkpoint_due(&self, own: &Own, now: Now) -> bool {
        match self.config.checkpoint {
            CheckpointPolicy::EveryBatch => true,
            CheckpointPolicy::AtMostEvery(_) => own.checkpoint_after.is_none_or(|t| now.local >= t),
            CheckpointPolicy::AtMostEveryItems(n) => own.unsent_items >= n,
        }
    }

    /// Sends the owner write `intent` for `token`, conditional on the version last
    /// seen.
    fn owner_write(
        &mut self,
        now: Now,
        token: &LeaseToken,
        intent: Intent,
    ) -> Option<crate::ids::RequestId> {
        let policy = self.config.expiry;
        let session = self.session_liveness();
        let forget_terms = self.config.known_bad == Some(KnownBad::FenceForgetsTerms);
        let checkpoint_policy = self.config.checkpoint;
        let life = self.incarnation();
        let slot = self.slots.get_mut(token)?;
        let etag = slot.etag().clone();
        let (own, known) = slot.held()?;
        let fence_passed = own.fence_passed(&policy, now);
        let mut doc = known.clone();
        doc.timestamp = now.wall;
        // The fence is in the document until it passes, whoever set it (a steal, or
        // a lease found named after this host, whose earlier life may still hold it):
        // this host may forget it (a 412 of the SDK's retry of its own write loses the
        // lease, and a re-read finds it again), and the mark brings it back.
        doc.fenced = own.fence.is_some() && !fence_passed;
        let checkpoint = own.checkpoint.take();
        match (&checkpoint, checkpoint_policy) {
            (Some(_), CheckpointPolicy::AtMostEvery(every)) => {
                own.checkpoint_after = Some(now.local + every);
            }
            (Some(_), CheckpointPolicy::AtMostEveryItems(_)) => own.unsent_items = 0,
            _ => {}
        }
        // This life's writes name it: the next life of its name waits out this
        // version, and this life knows a version it finds as its own.
        doc.owner_life = Some(life);
        if intent == Intent::Split {
            doc.split_into = own.split.clone().unwrap_or_default();
        }
        if let Some(cp) = &checkpoint {
            doc.checkpoint = Some(cp.clone());
        }
        let release = matches!(
            intent,
            Intent::Release | Intent::Handoff | Intent::FinishSplit
        );
        let gift = release && matches!(own.release, Some(ReleaseTo::Successor(_)));
        if intent == Intent::FinishSplit {
            // A finished split: owned by nobody, held in no tenure, for good.
            doc.owner = None;
            doc.owner_tenure = None;
            doc.owner_life = None;
            doc.split_done = true;
            doc.fenced = false;
            own.authority_until = None;
        } else if release {
            doc.owner = match &own.release {
                Some(ReleaseTo::Host { to, .. } | ReleaseTo::Successor(to)) => Some(to.clone()),
                _ => None,
            };
            // The recipient's tenure as last seen: if it has a newer one by the time
            // it reads the lease, the lease is free, and it takes it like any other.
            let theirs = doc.owner.as_ref().and_then(|o| self.membership.member(o));
            if session {
                doc.owner_tenure = theirs.and_then(|m| m.doc.tenure);
            }
            // The recipient's life as last seen, for the same reason: another life
            // of its name, which may have claimed the lease as well, waits it out.
            doc.owner_life = theirs.and_then(|m| m.doc.life);
            // A lease released before its fence passed carries the fence on.
            doc.fenced = !fence_passed;
            // A release may land at any moment once sent, even after a timeout:
            // authority ends now, as for a lock given up. Should the host keep the
            // lease after all, only a renewal that succeeds restores it. Under session
            // liveness the heartbeat renews, which would not change this lease's etag
            // and so would not stop a release held on the wire from landing later: the
            // host must resume it (a conditional write at a new epoch) instead.
            own.authority_until = None;
            own.resume = session;
        }
        if release || intent == Intent::Resume {
            doc.epoch = doc.epoch.next();
        }
        if intent == Intent::Resume && session {
            doc.owner_tenure = self.membership.beat.tenure();
        }
        if forget_terms {
            doc.terms = None;
        }
        let op = Op::Replace {
            doc: Record::Lease(doc.clone()),
            if_match: Some(etag),
        };
        let aim = Aim::Write(Written {
            doc,
            checkpoint,
            release,
            gift,
        });
        Some(self.send(now, intent, op, aim))
    }

    /// A handoff goes ahead only if its claimant is still alive and still claims the
    /// lease when the handler has stopped. Otherwise a running host keeps the lease
    /// (and starts it again); a host shutting down releases it to nobody.
    pub(super) fn recheck_handoffs(&mut self, now: Now, scope: &[LeaseToken]) {
        let abandoned: Vec<LeaseToken> = scope
            .iter()
            .filter_map(|token| {
                let own = self.slots.get(token)?.own()?;
                let (claimant, needs_claim) = match &own.release {
                    Some(ReleaseTo::Host { to, .. }) => (to, true),
                    Some(ReleaseTo::Successor(to)) => (to, false),
                    _ => return None,
                };
                let waiting = self.membership.member(claimant).is_some_and(|m| {
                    self.is_alive(m, now) && (!needs_claim || m.claimed.contains(token))
                });
                (!waiting).then(|| token.clone())
            })
            .collect();
        let fallback = match self.phase {
            Phase::Running => None,
            _ => Some(ReleaseTo::Nobody),
        };
        for token in abandoned {
            if let Some(own) = self.slots.get_mut(&token).and_then(|s| s.own_mut()) {
                own.release = fallback.clone();
                self.touch(&token);
            }
        }
    }
}
