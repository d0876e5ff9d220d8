//! What a host makes of the store's answers.
//!
//! A reply of the wrong kind for its request (a driver bug) is treated like an
//! unknown outcome: the host re-reads, which is always safe.

use super::LeaseHost;
use crate::expiry::Observation;
use crate::ids::{Checkpoint, Etag, HostId, LeaseToken};
use crate::lease::phase::Phase;
use crate::lease::slot::{ReleaseTo, Slot};
use crate::lease::wire::{Aim, Pending, Written};
use crate::lease::{
    CheckpointPolicy, KnownBad, LeaseDocument, LossCause, Output, Record, StopReason,
};
use crate::store::{Reply, StoreError, StoreResult, Stored};
use crate::time::{LocalTime, Now};

impl LeaseHost {
    pub(super) fn on_response(&mut self, now: Now, pending: Pending, result: StoreResult<Record>) {
        let Pending { sent_at, aim } = pending;
        match aim {
            Aim::Scan { seq, table } => self.on_scan(now, sent_at, seq, table, result),
            Aim::Create(doc) => self.on_create(now, doc, result),
            Aim::Take { doc, fence } => self.on_take(now, sent_at, doc, fence, result),
            Aim::Write(written) => self.on_write(now, sent_at, written, result),
            Aim::Read(token) => self.on_read(now, token, result),
            Aim::Free(doc) => self.on_free(now, doc, result),
            Aim::Confirm { token, claimant } => self.on_confirm(now, token, claimant, result),
            Aim::Beat(step) => self.on_heartbeat_response(now, sent_at, step, result),
            Aim::Retire(host, etag) => {
                let refused = matches!(result, Err(StoreError::PreconditionFailed))
                    && self.config.known_bad != Some(KnownBad::RewriteRefusedVersion);
                self.membership.retired(&host, refused.then_some(etag));
            }
            Aim::Watch(host) => self.on_watch(now, &host, result),
            Aim::Fence { doc, seq, etag } => self.on_fence_response(now, doc, seq, etag, result),
            Aim::DeleteParent { token, then_create } => {
                self.on_parent_deleted(now, token, then_create, result);
            }
        }
    }

    fn on_create(&mut self, now: Now, doc: LeaseDocument, result: StoreResult<Record>) {
        self.creates.answered(&doc.token);
        self.on_child_answer(now, &doc, &result);
        if let Ok(Reply::Created(etag)) = result {
            let token = doc.token.clone();
            // Any version already known came from a read that saw this create
            // applied, so it is at least as fresh: a late create reply is old news.
            if !self.slots.contains_key(&token) {
                // A split's child this host created in its own name is this life's.
                let learned = self.wire.issued();
                let slot = Slot::new(doc.clone(), etag.clone(), now.local, learned);
                self.slots.entry(token.clone()).or_insert(slot);
                self.reconcile(now, &token, doc, etag);
            }
            // A new lease is free: plan again now rather than an interval later.
            self.table.read_at(now.local);
        } else if self.session_liveness() {
            // Another host created it: only the table tells this host of it.
            self.need_table(now);
        }
        // Otherwise someone else created it (409), or the next scan will tell.
    }

    fn on_take(
        &mut self,
        now: Now,
        sent_at: LocalTime,
        doc: LeaseDocument,
        fence: Option<Observation>,
        result: StoreResult<Record>,
    ) {
        let token = doc.token.clone();
        let learned = self.wire.issued();
        let session = self.session_liveness();
        let backoff = self.backoff();
        self.touch(&token);
        let Some(slot) = self.slots.get_mut(&token) else {
            return;
        };
        slot.answered();
        match result {
            Ok(Reply::Replaced(etag)) => {
                let epoch = doc.epoch;
                // A take names the tenure it was sent in. If that tenure ended while
                // the take was on the wire, the lease is this host's with no
                // authority, and only a resume naming the next tenure makes it work
                // again (left as it was, it was held by nobody for good: the
                // simulator's swarm, rolling-restart seed 20293).
                let ended = session
                    && !self.held_in_tenure(&doc)
                    && self.config.known_bad != Some(KnownBad::TakeKeepsEndedTenure);
                let Some(slot) = self.slots.get_mut(&token) else {
                    return;
                };
                slot.update(doc, etag, now.local, learned);
                self.own(&token, epoch, fence, Some(sent_at));
                if ended && let Some(own) = self.slots.get_mut(&token).and_then(|s| s.own_mut()) {
                    own.resume = true;
                }
                if self.phase != Phase::Running {
                    self.give_up_at_shutdown(&token, true);
                }
            }
            // Someone else won, or the owner renewed after this host's last scan: its
            // view is stale, and a plan made on it may have dropped claims that balance
            // needs (the model found a newcomer starved that way). Scan again now.
            // Under session liveness the scan must then read the whole table, not
            // the heartbeats alone.
            Err(StoreError::PreconditionFailed) => {
                slot.refuse(backoff, self.config.known_bad);
                // The table read sent now plans again on what it shows; if it shows
                // nothing newer of this lease, a read of the lease after the backoff
                // does (under session liveness later table reads may read only the
                // heartbeats: the swarm's seed 4021523 left a lease refused for good).
                if self.config.known_bad != Some(KnownBad::RewriteRefusedVersion) {
                    slot.reread_after(now.local + backoff);
                }
                if session {
                    self.need_table(now);
                } else {
                    self.table.read_at(now.local);
                }
            }
            Err(StoreError::Throttled { retry_after }) => {
                slot.retry_after(now.local + retry_after);
            }
            Err(StoreError::NotFound) => {
                self.slots.remove(&token);
                // A lease fewer changes every share: plan again.
                self.table.unsettle();
                // Deleted since this host last read the table: a split replaced it,
                // and under session liveness only the table tells with what.
                if session {
                    self.need_table(now);
                }
            }
            // Applied or not? Only a read can tell whether this host owns the lease:
            // it does if the version read names this life.
            Err(_) | Ok(_) => {
                slot.distrust(self.wire.issued(), self.config.known_bad);
                if self.config.known_bad == Some(KnownBad::TakeByName) {
                    slot.take_unsure_at(doc.epoch);
                }
                // Under session liveness later reads may be of the heartbeats alone,
                // which would never tell this host that the take landed after its
                // re-read.
                if session && self.config.known_bad != Some(KnownBad::TakeLandsUnseen) {
                    slot.take_may_land();
                    self.table.may_land(token.clone());
                }
            }
        }
        self.touch(&token);
    }

    fn on_write(
        &mut self,
        now: Now,
        sent_at: LocalTime,
        written: Written,
        result: StoreResult<Record>,
    ) {
        let Written {
            doc,
            checkpoint,
            release,
            gift,
        } = written;
        let token = doc.token.clone();
        let learned = self.wire.issued();
        let policy = self.config.expiry;
        let renew = self.config.renew_interval;
        let backoff = self.backoff();
        let session = self.session_liveness();
        let session_authority = self.session_authority(&doc);
        let announces = self.announces_gifts();
        self.touch(&token);
        let Some(slot) = self.slots.get_mut(&token) else {
            return;
        };
        slot.answered();
        // Refused whether or not it still owns the lease (a lapse may have ended
        // its ownership while the write was on the wire): the version is gone.
        let refused = matches!(result, Err(StoreError::PreconditionFailed));
        // A gift answered 412 may have landed (the SDK's retry of it sees its own
        // write), as may one whose outcome is unknown: a read settles it.
        if gift
            && announces
            && (refused || result.as_ref().is_err_and(|e| e.is_ambiguous()))
            && let Some(to) = doc.owner.clone()
        {
            slot.gift_unsure(to, doc.epoch);
        }
        if refused {
            slot.refuse(backoff, self.config.known_bad);
        }
        let Some(epoch) = slot.own().map(|o| o.epoch) else {
            // No longer owned: read it again after the backoff, as after a take.
            if refused && self.config.known_bad != Some(KnownBad::RewriteRefusedVersion) {
                slot.reread_after(now.local + backoff);
                self.touch(&token);
            }
            return;
        };
        match result {
            Ok(Reply::Replaced(etag)) => {
                let finished = release && doc.is_finished_split();
                let written = doc.epoch;
                slot.update(doc, etag, now.local, learned);
                slot.retry_now();
                let mut epoch = epoch;
                if release {
                    slot.disown();
                    if gift && announces {
                        self.membership.beat.gave_away();
                    }
                    // Another owner, or none: the plan that counted it as this
                    // host's is out of date.
                    self.table.unsettle();
                    if finished {
                        self.split_finished(now);
                        return;
                    }
                } else if let Some(own) = slot.own_mut() {
                    if written > own.epoch {
                        // A resume: later sessions start at the new epoch.
                        own.epoch = written;
                        own.resume = false;
                        epoch = own.epoch;
                    }
                    // A write of this life landed: the lease is this life's now.
                    own.inherited = false;
                    if session {
                        // Authority is the tenure's, not this write's.
                        own.authority_until = session_authority;
                    } else {
                        let deadline = policy.holder_deadline(sent_at);
                        own.authority_until =
                            Some(own.authority_until.map_or(deadline, |d| d.max(deadline)));
                    }
                    own.next_renew = sent_at + renew;
                }
                if let Some(checkpoint) = checkpoint {
                    self.emit(Output::Checkpointed {
                        lease: token,
                        epoch,
                        checkpoint,
                    });
                }
            }
            Err(StoreError::PreconditionFailed) => {
                slot.distrust(self.wire.issued(), self.config.known_bad);
                self.touch(&token);
                self.lose(&token, LossCause::TakenOver);
            }
            Err(StoreError::NotFound) => {
                self.lose(&token, LossCause::Deleted);
                self.slots.remove(&token);
            }
            Err(StoreError::Throttled { retry_after }) => {
                requeue(slot, checkpoint, self.config.checkpoint);
                slot.retry_after(now.local + retry_after);
            }
            Err(error @ StoreError::TooLarge { .. }) => {
                slot.retry_after(now.local + backoff);
                if let Some(checkpoint) = checkpoint {
                    self.emit(Output::CheckpointRejected {
                        lease: token,
                        epoch,
                        checkpoint,
                        error,
                    });
                }
            }
            // Applied or not? A read tells (`on_read`).
            Err(_) | Ok(_) => {
                requeue(slot, checkpoint, self.config.checkpoint);
                slot.distrust(self.wire.issued(), self.config.known_bad);
                slot.write_unsure();
                self.touch(&token);
            }
        }
    }

    /// A free of an expired lease was answered: if it landed, the lease is unowned
    /// for all to see; if not, someone wrote it first (its owner came back, or a
    /// taker), and a read tells.
    fn on_free(&mut self, now: Now, doc: LeaseDocument, result: StoreResult<Record>) {
        let token = doc.token.clone();
        let backoff = self.backoff();
        self.touch(&token);
        let Some(slot) = self.slots.get_mut(&token) else {
            return;
        };
        slot.answered();
        match result {
            Ok(Reply::Replaced(etag)) => {
                self.reconcile(now, &token, doc, etag);
                // Free now: plan again at once rather than an interval later.
                self.table.read_by(now.local);
            }
            Err(StoreError::NotFound) => {
                self.slots.remove(&token);
                self.table.unsettle();
            }
            Err(StoreError::Throttled { retry_after }) => {
                slot.retry_after(now.local + retry_after);
            }
            Err(StoreError::PreconditionFailed) => {
                slot.refuse(backoff, self.config.known_bad);
                slot.distrust(self.wire.issued(), self.config.known_bad);
            }
            Err(_) | Ok(_) => slot.distrust(self.wire.issued(), self.config.known_bad),
        }
        self.touch(&token);
    }

    fn on_read(&mut self, now: Now, token: LeaseToken, result: StoreResult<Record>) {
        let backoff = self.backoff();
        self.touch(&token);
        let Some(slot) = self.slots.get_mut(&token) else {
            return;
        };
        slot.answered();
        match result {
            Ok(Reply::Read(Stored {
                doc: Record::Lease(doc),
                etag,
            })) => {
                // Nothing was written since the version this host knew, its own
                // write whose outcome was unknown included: that write is sent again
                // only after a backoff, or a store that fails writes at once while
                // it serves reads would get the same write again and again.
                let failed = slot.take_write_unsure();
                let unchanged = failed && &etag == slot.etag();
                self.reconcile(now, &token, doc, etag);
                if let Some(slot) = self.slots.get_mut(&token).filter(|_| unchanged) {
                    slot.retry_after(now.local + backoff);
                }
            }
            Err(StoreError::NotFound) | Ok(Reply::Read(_)) => {
                // A marked lease is deleted only once its children exist: a delete
                // whose outcome was unknown landed, or another host finished.
                let split = !slot.doc().split_into.is_empty();
                self.lose(&token, LossCause::Deleted);
                self.slots.remove(&token);
                if split {
                    self.split_finished(now);
                }
            }
            Err(StoreError::Throttled { retry_after }) => {
                slot.retry_after(now.local + retry_after);
            }
            Err(_) | Ok(_) => slot.retry_after(now.local + backoff),
        }
    }

    fn on_confirm(
        &mut self,
        now: Now,
        token: LeaseToken,
        claimant: HostId,
        result: StoreResult<Record>,
    ) {
        let backoff = self.backoff();
        let fallback = match self.phase {
            Phase::Running => None,
            _ => Some(ReleaseTo::Nobody),
        };
        self.touch(&token);
        let Some(slot) = self.slots.get_mut(&token) else {
            return;
        };
        slot.answered();
        let Some(own) = slot.own_mut() else {
            return;
        };
        match result {
            Ok(Reply::Read(Stored {
                doc: Record::Host(beat),
                ..
            })) if beat.claims.contains(&token) => {
                if let Some(ReleaseTo::Host { to, confirmed }) = &mut own.release
                    && *to == claimant
                {
                    *confirmed = true;
                }
            }
            Err(StoreError::Throttled { retry_after }) => {
                slot.retry_after(now.local + retry_after);
            }
            Err(e) if e.is_ambiguous() => slot.retry_after(now.local + backoff),
            // Gone, or no longer claiming: keep the lease (or, shutting down, free it).
            _ => own.release = fallback,
        }
    }

    /// Folds in a version of a lease that is at least as fresh as what the host knew.
    pub(super) fn reconcile(
        &mut self,
        now: Now,
        token: &LeaseToken,
        doc: LeaseDocument,
        etag: Etag,
    ) {
        // News of a lease: the next read of the heartbeats plans again.
        self.table.unsettle();
        let learned = self.wire.issued();
        // Under session liveness a lease named after this host holds authority only
        // in the current tenure; one from an ended tenure or an earlier life is taken
        // back by a resume, a conditional write at a new epoch naming the tenure.
        let in_tenure = !self.session_liveness() || self.held_in_tenure(&doc);
        let resume_known_bad = self.config.known_bad == Some(KnownBad::ResumeKeepsEndedTenure);
        // Written for this very life, by its own write or a handoff to it. A name
        // and an epoch do not say so: an earlier life of this name (a zombie) may
        // have taken the lease at the epoch of this life's take whose answer was
        // lost, or been handed it on a claim this life made too.
        let life = self.incarnation();
        let for_this_life = doc.owner_life == Some(life)
            || match self.config.known_bad {
                Some(KnownBad::ClaimByName) => self.membership.beat.claims(token),
                Some(KnownBad::TakeByName) => self
                    .slots
                    .get(token)
                    .is_some_and(|s| s.unsure_take() == Some(doc.epoch)),
                _ => false,
            };
        let lease_liveness = !self.session_liveness();
        let name_proves_death = self.config.known_bad == Some(KnownBad::NameProvesDeath);
        let slot = self
            .slots
            .entry(token.clone())
            .or_insert_with(|| Slot::new(doc.clone(), etag.clone(), now.local, learned));
        // A lease neither owned nor stale before or after concerns no pass: touching
        // every lease of every scan would make each scan's next input visit them all.
        let was_active = slot.is_active();
        // This host's own finish of a split landed although its answer was lost, or
        // came back as the SDK's retry saw it (412).
        let finished = slot.doc().is_owned_by(&self.me)
            && !slot.doc().split_into.is_empty()
            && !slot.doc().is_finished_split()
            && doc.is_finished_split();
        slot.update(doc, etag, now.local, learned);
        // A version the store refused this host's write on, from a replica that lags:
        // the host knows no more than before, and the read again after the backoff
        // tells. What it names is no news, least of all that the lease is this
        // host's (a handoff refused because it had landed unheard named the giver).
        if slot.is_refused() && self.config.known_bad != Some(KnownBad::OwnsRefusedVersion) {
            self.touch(token);
            return;
        }
        let mine = slot.doc().is_owned_by(&self.me);
        let found_epoch = slot.doc().epoch;
        // Under lease liveness a lease named after this host came to this life by its
        // own write, or by a handoff naming this life; one named so otherwise may be an
        // earlier life's, which a reused name does not prove dead (paused, partitioned,
        // or a second replica under one name): it is processed only once the version
        // this host found would have expired, as after a steal. Under session liveness
        // the heartbeat does this wait, before the tenure a resume needs begins.
        let inherited = mine && lease_liveness && !name_proves_death && !for_this_life;
        let inherited = inherited.then(|| slot.observation());
        // (Not for a lease found named after this host: another life of its name
        // writes that name at the next epoch too.)
        if let Some(own) = slot.own_mut()
            && own.resume
            && !own.inherited
            && mine
            && for_this_life
            && found_epoch == own.epoch.next()
        {
            // A resume whose outcome was unknown did land: only this life writes its
            // own life at the next epoch while it owns the lease. One that named a
            // tenure since ended restores nothing: resume again, in the current one
            // (the swarm's rolling-restart seed 36321 stranded a lease there).
            own.epoch = found_epoch;
            own.resume = !in_tenure && !resume_known_bad;
        }
        let still_ours = slot.own().map(|own| mine && slot.doc().epoch == own.epoch);
        // This host's gift to its successor landed unheard (its answer lost, timed
        // out, or a 412 from the SDK's retry): announced as one that was answered.
        let gift_landed = slot.gift_landed();
        let (epoch, fence) = (
            slot.doc().epoch,
            slot.doc().fenced.then(|| slot.observation()),
        );
        if gift_landed {
            self.membership.beat.gave_away();
        }
        if still_ours == Some(false) {
            self.lose(token, LossCause::TakenOver);
        }
        // A version named after this host at another epoch than the one it held is
        // still this host's to process: its own write that landed unheard (a resume
        // given up on, whose re-read came back before it landed), a handoff to it, or
        // an earlier life's. Its session stops all the same; dropped here, nothing
        // would read the lease again under session liveness, and nobody would process
        // it until the audit (found by the model's random walks).
        let drop_own =
            still_ours == Some(false) && self.config.known_bad == Some(KnownBad::DropsOwnLanding);
        match still_ours {
            Some(true) => {}
            _ if mine && !drop_own => {
                // Learned from a read (a handoff to this host, or a restart): ownership
                // grants no authority until this host's own renewal succeeds.
                self.own(token, epoch, inherited.or(fence), None);
                // A lease from an ended tenure, or an earlier life's, restarts at a new
                // epoch: that life's last call may still be running at the old one.
                if let Some(slot) = self.slots.get_mut(token)
                    && let Some(own) = slot.own_mut()
                {
                    own.resume |= !in_tenure || inherited.is_some();
                    if inherited.is_some() {
                        own.inherited = true;
                    }
                }
                if self.phase != Phase::Running {
                    self.give_up_at_shutdown(token, true);
                }
            }
            _ => {}
        }
        // A read of a version this host was refused on leaves the lease to be read
        // again: active now, if it was not.
        if was_active || self.slots.get(token).is_some_and(Slot::is_active) {
            self.touch(token);
        }
        if finished {
            self.split_finished(now);
        }
    }

    /// Forgets ownership of `token` and tells its session, if any, to stop at once.
    /// The session stays until the driver reports it stopped.
    pub(super) fn lose(&mut self, token: &LeaseToken, cause: LossCause) {
        self.table.unsettle();
        let Some(slot) = self.slots.get_mut(token) else {
            return;
        };
        if slot.take_own().is_none() {
            return;
        }
        self.touch(token);
        if let Some(stop) = self
            .sessions
            .stop(token, StopReason::Lost(cause), self.now.local)
        {
            self.emit(stop);
        }
    }
}

/// Puts back a checkpoint whose write failed, unless the handler has sent a newer one.
/// A write that failed counts as none for the checkpoint policy: whatever is held goes
/// at the next write, not an interval after the failed one.
fn requeue(slot: &mut Slot, checkpoint: Option<Checkpoint>, policy: CheckpointPolicy) {
    let Some(own) = slot.own_mut() else {
        return;
    };
    if checkpoint.is_some() {
        own.checkpoint_after = None;
        if let CheckpointPolicy::AtMostEveryItems(n) = policy {
            own.unsent_items = own.unsent_items.max(n);
        }
    }
    if own.checkpoint.is_none() {
        own.checkpoint = checkpoint;
    }
}
