//! The acquire cycle: read the lease table, judge it, plan, act.

use super::LeaseHost;
use super::tenure::TenureVerdict;
use crate::balance::{Action, LeaseStatus, LeaseView, Reason, TableView};
use crate::ids::{Etag, HostId, LeaseToken};
use crate::lease::membership::Member;
use crate::lease::phase::Phase;
use crate::lease::reads::{Group, Why};
use crate::lease::slot::{ReleaseTo, Slot};
use crate::lease::wire::Aim;
use crate::lease::{
    ConfigError, HostDocument, Intent, KnownBad, LEAVE_POLL, LeaseDocument, Liveness, Output,
    Record, StopReason,
};
use crate::store::{Op, Reply, StoreError, Stored};
use crate::time::{LocalTime, Now};
use std::collections::BTreeMap;

/// Lease documents of one scan with their etags, in listing order.
type Listing = Vec<(LeaseDocument, Etag)>;

/// The table as a host judges it at one moment.
pub(super) struct Judged {
    pub view: TableView,
    /// When a lease or heartbeat watched will next count as expired.
    pub next: Option<LocalTime>,
    /// No lease's verdict moves with time alone: none expires by its own document,
    /// and none hangs on a tenure that is expired or cannot be judged yet. Only the
    /// members' heartbeats can change it then.
    pub timeless: bool,
}

impl LeaseHost {
    /// Sends the interval's read: the heartbeats alone, or the whole table.
    pub(super) fn send_scan(&mut self, now: Now) {
        self.table.read_sent();
        let seq = self.wire.issued();
        let hosts = self.live_members(now).count() as u64 + 1;
        let slots = &self.slots;
        let landing = self
            .table
            .still_landing(|t| slots.get(t).is_some_and(|s| s.may_land()));
        let group = Group {
            landing,
            session: self.session_liveness(),
            claiming: !self.membership.beat.published().is_empty(),
            claimed_from: self.is_claimed_from(),
            period: self.config.audit_period(hosts),
            phase: self.config.audit_phase(&self.me, hosts),
            lease_duration: self.config.expiry.duration,
        };
        let (intent, prefix, table) = match self.table.choose(now, &group) {
            Some(Why::Needed) => (
                Intent::Scan,
                Record::group_prefix(&self.config.prefix),
                true,
            ),
            Some(Why::Audit) => (
                Intent::Audit,
                Record::group_prefix(&self.config.prefix),
                true,
            ),
            None => (
                Intent::ReadMembers,
                HostDocument::id_prefix(&self.config.prefix),
                false,
            ),
        };
        self.send(
            now,
            intent,
            Op::ReadAll { prefix },
            Aim::Scan { seq, table },
        );
    }

    /// Whether another host claims a lease this host holds, or one its view shows
    /// unowned or named after it without being held: a claimant claims only leases
    /// it sees held by another host, so either view is behind, and it may be this
    /// host's (a take that landed after its driver gave up on it: the model found the
    /// lease held, unknown to its owner, with the claim waiting for the audit).
    fn is_claimed_from(&self) -> bool {
        self.membership.members().any(|m| {
            m.claimed.iter().any(|t| {
                self.slots.get(t).is_some_and(|s| {
                    s.is_owned() || s.doc().owner.is_none() || s.doc().is_owned_by(&self.me)
                })
            })
        })
    }

    /// Something happened that only the table can tell the whole of: read it at
    /// the next scan, which is now.
    pub(super) fn need_table(&mut self, now: Now) {
        self.table.need();
        self.table.read_by(now.local);
    }

    pub(super) fn on_scan(
        &mut self,
        now: Now,
        sent_at: LocalTime,
        seq: u64,
        table: bool,
        result: Result<Reply<Record>, StoreError>,
    ) {
        self.table
            .read_answered(now.local + self.config.acquire_interval);
        let read = matches!(result, Ok(Reply::ReadAll(_)));
        let first = table && read && self.table.never_read();
        if table {
            self.table.answered(sent_at, read);
        }
        match result {
            Ok(Reply::ReadAll(items)) if table => {
                self.integrate_scan(now, seq, items);
                if first
                    && self.phase == Phase::Running
                    && let Some(error) = self.mismatch()
                {
                    self.emit(Output::Refused(error));
                    self.begin_shutdown();
                    return;
                }
                let behind = self.view_behind_counts(now);
                self.table.set_behind(behind, self.held_count());
                if self.phase == Phase::Running {
                    self.create_missing(now);
                    self.rebalance(now);
                    if self.uses_heartbeats() {
                        self.retire_dead_members(now);
                    }
                }
            }
            Ok(Reply::ReadAll(items)) => {
                let beats = self.heartbeats_of(&items);
                let changes = self.membership.integrate(&self.me, now, seq, beats);
                if changes.ended || changes.split || changes.gift || changes.left {
                    // The ended tenure's leases are free, a host that announced its
                    // leave released its own, a split made new ones, or a host gave
                    // one away unasked, and only the table says which they are.
                    self.need_table(now);
                }
                // The share this host is due moves with the counts, and with what it
                // holds itself: a tenure that ended, or a lease lost, changes the
                // comparison although no heartbeat's count changed (the swarm's seed
                // 626248: a view left behind by a pause stayed so for good).
                let held = self.held_count();
                if changes.counts || self.table.is_behind() || self.table.held_changed(held) {
                    let behind = self.view_behind_counts(now);
                    self.table.set_behind(behind, held);
                }
                self.touch_handoffs();
                // Planning walks every lease: only when the heartbeats changed what
                // a plan reads, or the last plan is not done. Expiries replan at
                // their own time (`replan_at`).
                if self.phase == Phase::Running {
                    if changes.changed || !self.table.is_settled() {
                        self.rebalance_on_members(now);
                    } else {
                        #[cfg(debug_assertions)]
                        if self.group_unchanged(now) {
                            self.check_reused_plan(now);
                        }
                    }
                    self.retire_dead_members(now);
                }
            }
            Err(StoreError::Throttled { retry_after }) => {
                self.table.read_at(now.local + retry_after);
            }
            _ => {}
        }
        if read && self.uses_heartbeats() {
            self.touch_stuck(now);
        }
        // While another host announces its leave, its heartbeat is read often: its
        // leases are taken within a read of its release, not at the next interval.
        let leaving = self.uses_heartbeats()
            && self
                .membership
                .any_leaving(&self.me, &self.config.expiry, now);
        self.table.poll(leaving.then(|| now.local + LEAVE_POLL));
    }

    /// Plans on a read of the heartbeats alone, whose view of the leases is as old
    /// as the last read of the table. A claim it would begin names a lease from that
    /// view, and a handoff since may have moved that lease to a host at its share,
    /// which keeps it: the claimant would learn so only at its next read of the table,
    /// an interval later (the model's random walks, at 3 hosts × 3 partitions with a
    /// pause: balance came a tick past its bound, `stale-claim`). So the claim waits
    /// for the table, read now.
    fn rebalance_on_members(&mut self, now: Now) {
        let before = self.membership.beat.wanted().to_vec();
        self.rebalance(now);
        let begun = self
            .membership
            .beat
            .wanted()
            .iter()
            .any(|t| !before.contains(t));
        if begun && self.config.known_bad != Some(KnownBad::StaleClaim) {
            self.membership.beat.set_claims(before);
            self.need_table(now);
        }
    }

    /// Reads the heartbeat of each live host that announced its leave: a point read,
    /// one RU, where a read of every heartbeat costs one more RU per three hosts.
    pub(super) fn watch_leaves(&mut self, now: Now) {
        let leaving: Vec<HostId> = self
            .live_members(now)
            .filter(|m| m.doc.leaving)
            .map(|m| m.doc.host.clone())
            .collect();
        self.table.polls_sent(leaving.len() as u32);
        for host in leaving {
            let id = HostDocument::id_for(&self.config.prefix, &host);
            let op = Op::Read {
                pk: crate::ids::PartitionKey::new(id.as_str()),
                id,
            };
            self.send(now, Intent::WatchLeave, op, Aim::Watch(host));
        }
    }

    /// A leaving host's heartbeat, read: still leaving, it is read again a poll
    /// later; gone, or no longer leaving, its leases are free or about to be, and
    /// the table says which.
    pub(super) fn on_watch(
        &mut self,
        now: Now,
        host: &HostId,
        result: Result<Reply<Record>, StoreError>,
    ) {
        self.table.poll_answered();
        match result {
            Ok(Reply::Read(Stored {
                doc: Record::Host(beat),
                ..
            })) if beat.leaving && beat.host == *host => {
                self.table.poll_by(now.local + LEAVE_POLL);
            }
            Ok(_) | Err(StoreError::NotFound) => self.need_table(now),
            Err(StoreError::Throttled { retry_after }) => {
                self.table.poll_by(now.local + retry_after.max(LEAVE_POLL));
            }
            Err(_) => self.table.poll_by(now.local + LEAVE_POLL),
        }
    }

    /// Folds one table scan, issued when `seq` requests had been sent, into what the
    /// host knows. A lease answered by a request that completed after the scan was
    /// sent is fresher than the scan and keeps its version.
    ///
    /// Only documents of this processor group count: the scan matches ids by
    /// prefix, so group "orders" also reads group "orders-eu"'s documents.
    fn integrate_scan(&mut self, now: Now, seq: u64, items: Vec<Stored<Record>>) {
        let prefix = self.config.prefix.clone();
        let own_lease = |doc: &LeaseDocument| doc.has_own_id(&prefix);
        // Heartbeats are few and leases are many: heartbeats are copied out, and the
        // leases are folded straight out of the reply rather than moved to a second
        // list first. This pass marks which documents are the group's leases.
        let mut sorted = true;
        let mut last: Option<&LeaseToken> = None;
        let mut ours = Vec::with_capacity(items.len());
        for Stored { doc, .. } in &items {
            let lease = matches!(doc, Record::Lease(doc) if own_lease(doc));
            ours.push(lease);
            match doc {
                Record::Lease(doc) if lease => {
                    sorted &= last.is_none_or(|t| *t < doc.token);
                    last = Some(&doc.token);
                }
                Record::Lease(_) | Record::Host(_) => {}
            }
        }
        if self.uses_heartbeats() {
            let beats = self.heartbeats_of(&items);
            self.membership.integrate(&self.me, now, seq, beats);
            self.touch_handoffs();
        }
        let leases =
            items
                .into_iter()
                .zip(ours)
                .filter_map(|(Stored { doc, etag }, ours)| match doc {
                    Record::Lease(doc) if ours => Some((doc, etag)),
                    _ => None,
                });
        // The reference store lists by id, which orders tokens as the slots are
        // ordered: then one walk over both does the work of a lookup per lease.
        let (rest, vanished) = if sorted {
            self.merge_sorted_scan(now, seq, leases)
        } else {
            self.merge_scan(seq, leases.collect())
        };
        for (doc, etag) in rest {
            let token = doc.token.clone();
            self.reconcile(now, &token, doc, etag);
        }
        for token in vanished {
            if let Some(slot) = self.slots.get_mut(&token) {
                if slot.is_owned() {
                    // Make sure before giving up: the read's 404 stops processing.
                    slot.mark_stale();
                } else {
                    self.slots.remove(&token);
                }
                self.touch(&token);
            }
        }
    }

    /// Folds in a scan's leases, listed in token order, that concern no pass: another
    /// host's lease that this host neither owns nor must re-read, exactly as
    /// [`reconcile`](Self::reconcile) would. Returns the leases left for `reconcile`,
    /// in listing order, and the slots the scan did not list.
    fn merge_sorted_scan(
        &mut self,
        now: Now,
        seq: u64,
        leases: impl Iterator<Item = (LeaseDocument, Etag)>,
    ) -> (Listing, Vec<LeaseToken>) {
        let learned = self.wire.issued();
        let me = &self.me;
        let mut slots = self.slots.iter_mut().peekable();
        let (mut rest, mut vanished) = (Vec::new(), Vec::new());
        let mut unlisted = |token: &LeaseToken, slot: &Slot| {
            if slot.read_may_replace(seq) {
                vanished.push(token.clone());
            }
        };
        for (doc, etag) in leases {
            while let Some((token, slot)) = slots.next_if(|(t, _)| **t < doc.token) {
                unlisted(token, slot);
            }
            match slots.next_if(|(t, _)| **t == doc.token) {
                Some((_, slot)) if !slot.read_may_replace(seq) => {}
                Some((_, slot))
                    if !slot.is_owned()
                        && !slot.is_stale()
                        && !slot.is_refused()
                        && !doc.is_owned_by(me) =>
                {
                    slot.update(doc, etag, now.local, learned);
                }
                _ => rest.push((doc, etag)),
            }
        }
        for (token, slot) in slots {
            unlisted(token, slot);
        }
        (rest, vanished)
    }

    /// The same for leases listed in any order (a real store's query).
    fn merge_scan(&self, seq: u64, leases: Listing) -> (Listing, Vec<LeaseToken>) {
        let mut listed: Vec<&LeaseToken> = leases.iter().map(|(doc, _)| &doc.token).collect();
        listed.sort_unstable();
        let vanished = self
            .slots
            .iter()
            .filter(|(token, slot)| {
                listed.binary_search(token).is_err() && slot.read_may_replace(seq)
            })
            .map(|(token, _)| token.clone())
            .collect();
        let fresher = |doc: &LeaseDocument| {
            self.slots
                .get(&doc.token)
                .is_none_or(|slot| slot.read_may_replace(seq))
        };
        let rest = leases.into_iter().filter(|(doc, _)| fresher(doc)).collect();
        (rest, vanished)
    }

    /// The heartbeats of this group among a scan's documents.
    fn heartbeats_of(&self, items: &[Stored<Record>]) -> Vec<(HostDocument, Etag)> {
        let prefix = &self.config.prefix;
        items
            .iter()
            .filter_map(|Stored { doc, etag }| match doc {
                Record::Host(doc) if doc.has_own_id(prefix) => Some((doc.clone(), etag.clone())),
                _ => None,
            })
            .collect()
    }

    fn create_missing(&mut self, now: Now) {
        // One walk of the partitions in token order beside the slots finds what is
        // absent; a lookup per partition on every scan cost more than the scan.
        let mut slots = self.slots.keys().peekable();
        let mut absent = Vec::new();
        for token in self.agenda.partitions() {
            while slots.next_if(|t| *t < token).is_some() {}
            if slots.peek() != Some(&token) {
                absent.push(token);
            }
        }
        if absent.is_empty() {
            return;
        }
        let replaced = self.replaced_by_splits();
        let missing: Vec<LeaseToken> = self
            .config
            .partitions
            .iter()
            .filter(|t| {
                absent.binary_search(t).is_ok()
                    && !self.creates.is_creating(t)
                    && !replaced.contains(t)
            })
            .cloned()
            .collect();
        for token in missing {
            let doc = LeaseDocument::new(&self.config.prefix, token.clone(), now.wall);
            self.creates.sent(token);
            let op = Op::Create(Record::Lease(doc.clone()));
            self.send(now, Intent::CreateLease, op, Aim::Create(doc));
        }
    }

    /// The lease table as this host judges it now.
    pub fn view(&self, now: Now) -> TableView {
        self.judge(now).view
    }

    /// The table as judged now, and the earliest future moment at which a lease held
    /// by another host, or a member's heartbeat, will count as expired. One walk over
    /// the slots gives both: a scan of a large table is bound by reading the slots.
    pub(super) fn judge(&self, now: Now) -> Judged {
        let policy = &self.config.expiry;
        let mut claims: BTreeMap<&LeaseToken, Vec<HostId>> = BTreeMap::new();
        let mut members = Vec::new();
        // Members are in id order and this host is inserted at its place, so every
        // claimant list comes out sorted.
        let live: Vec<&Member> = self.live_members(now).collect();
        let mut next = self.member_expiries(now);
        let mut timeless = true;
        let mut published = HostDocument::new("", self.me.clone(), now.wall);
        published.claims = self.membership.beat.published().to_vec();
        let mut all: Vec<&HostDocument> = live.iter().map(|m| &m.doc).collect();
        let at = all.partition_point(|d| d.host < self.me);
        all.insert(at, &published);
        for doc in all {
            if doc.host != self.me {
                members.push(doc.host.clone());
            }
            for token in &doc.claims {
                claims.entry(token).or_default().push(doc.host.clone());
            }
        }
        let session = self.session_liveness();
        let leases = self
            .slots
            .iter()
            // A finished split is no lease: nothing to plan, take or count.
            .filter(|(_, slot)| !slot.doc().is_finished_split())
            .map(|(token, slot)| {
                if self.expires_by_itself(slot) {
                    timeless = false;
                    let at = policy.expires_at(&slot.observation(), now);
                    if at > now.local && next.is_none_or(|n| at < n) {
                        next = Some(at);
                    }
                }
                let owner = slot.doc().owner.clone().filter(|o| !o.is_blank());
                let verdict = if session && owner.is_some() {
                    self.tenure_verdict(slot, now)
                } else {
                    None
                };
                timeless &= !matches!(
                    verdict,
                    Some(TenureVerdict::Unknown | TenureVerdict::Expired(_))
                );
                if verdict == Some(TenureVerdict::Unknown)
                    && let Some(at) = self.unknown_tenure_until(slot, now)
                    && next.is_none_or(|n| at < n)
                {
                    next = Some(at);
                }
                let status = match (&owner, verdict) {
                    _ if slot.is_owned() => LeaseStatus::Held,
                    (_, Some(TenureVerdict::Live | TenureVerdict::Unknown)) => LeaseStatus::Held,
                    (_, Some(_)) => LeaseStatus::Expired,
                    (Some(o), None) if *o == self.me => LeaseStatus::Held,
                    (None, _) => LeaseStatus::Unowned,
                    // A host under lease liveness cannot judge a lease held in a
                    // tenure, which is never renewed on its own: it stays held.
                    (Some(_), None) if held_under_session(slot.doc()) => LeaseStatus::Held,
                    (Some(_), None) if policy.is_expired(&slot.observation(), now) => {
                        LeaseStatus::Expired
                    }
                    (Some(_), None) => LeaseStatus::Held,
                };
                LeaseView {
                    token: token.clone(),
                    owner,
                    status,
                    claimants: claims.remove(token).unwrap_or_default(),
                }
            })
            .collect();
        let view = TableView {
            leases,
            members,
            now,
        };
        Judged {
            view,
            next,
            timeless,
        }
    }

    pub(super) fn rebalance(&mut self, now: Now) {
        let Judged {
            view,
            next,
            timeless,
        } = self.judge(now);
        self.table.plan_at(next);
        #[cfg(debug_assertions)]
        assert_eq!(next, self.next_expiry(now), "one walk judges as two did");
        let plan = self.config.strategy.plan(&view, &self.me);
        let empty = plan.actions.is_empty();
        self.table.planned(empty);
        let mut claims = Vec::new();
        // A host that announced its leave gains nothing more, which it would only
        // release again within the notice, and hands nothing over: a claimant learns
        // of a handoff at its next interval, but of the release at the notice's end
        // within a poll.
        let leaving = self.membership.beat.leave_at().is_some();
        for action in plan.actions {
            match action {
                Action::Take { .. } | Action::Claim { .. } | Action::Release { .. } if leaving => {}
                Action::Take { lease, reason } => self.take(now, &lease, &reason),
                Action::Claim { lease, .. } if !self.sessions.is_live(&lease) => claims.push(lease),
                Action::Claim { .. } => {}
                Action::Release { lease, to } => {
                    let to = ReleaseTo::Host {
                        to,
                        confirmed: false,
                    };
                    self.request_release(&lease, to, StopReason::Released);
                }
            }
        }
        claims.sort();
        self.membership.beat.set_claims(claims);
        self.record_expiries(now);
        self.remember_plan(now, empty && timeless && self.session_liveness());
    }

    /// Makes an expiry this host has watched one that every host can trust at its
    /// next read, whichever host the plan gives the lease to: a newcomer has watched
    /// the dead host only since it started, and would see the lease expired up to an
    /// expiry later than the hosts whose plans give it the lease (the model's
    /// `newcomer-waits`, at 3 hosts × 1 partition with 2 crashes). Under session
    /// liveness it fences every tenure a lease names whose heartbeat it watched
    /// expire; a fenced tenure is over to everyone.
    fn record_expiries(&mut self, now: Now) {
        if self.config.known_bad == Some(KnownBad::NewcomerWaits) {
            return;
        }
        if !self.session_liveness() {
            self.free_expired(now);
            return;
        }
        // The variant without the fence has no fence to record an expiry with.
        if self.config.known_bad == Some(KnownBad::UnfencedTakeover)
            || !self.membership.any_dead(&self.config.expiry, now)
        {
            return;
        }
        let mut due: Vec<(HostId, crate::ids::Tenure, Etag)> = Vec::new();
        for slot in self.slots.values() {
            if slot.is_owned() || slot.doc().is_finished_split() {
                continue;
            }
            let (Some(owner), Some(theirs)) = (&slot.doc().owner, slot.doc().owner_tenure) else {
                continue;
            };
            // A heartbeat it has watched: one it never saw is the planned taker's
            // to create fenced, as before.
            if let Some(TenureVerdict::Expired(Some(etag))) = self.tenure_verdict(slot, now)
                && !due.iter().any(|(h, ..)| h == owner)
            {
                due.push((owner.clone(), theirs, etag));
            }
        }
        for (host, tenure, etag) in due {
            self.fence(now, &host, tenure, Some(etag));
        }
    }

    /// Under lease liveness, frees every lease of another host that this host watched
    /// expire and is not taking itself: a conditional write that leaves it unowned,
    /// at a new epoch, which any host may take at once. Conditional on the version
    /// watched, so a renewal its owner had in flight fails, or the free does.
    fn free_expired(&mut self, now: Now) {
        let policy = self.config.expiry;
        let expired: Vec<LeaseToken> = self
            .slots
            .iter()
            .filter(|(_, slot)| {
                self.expires_by_itself(slot)
                    && !slot.doc().is_finished_split()
                    && slot.doc().split_into.is_empty()
                    && !slot.is_stale()
                    && !slot.is_refused()
                    && slot.can_send(now.local)
                    && policy.is_expired(&slot.observation(), now)
            })
            .map(|(token, _)| token.clone())
            .collect();
        for token in expired {
            let Some(slot) = self.slots.get(&token) else {
                continue;
            };
            let mut doc = slot.doc().clone();
            doc.owner = None;
            doc.owner_tenure = None;
            doc.owner_life = None;
            doc.epoch = doc.epoch.next();
            doc.fenced = false;
            doc.timestamp = now.wall;
            let op = Op::Replace {
                doc: Record::Lease(doc.clone()),
                if_match: Some(slot.etag().clone()),
            };
            let id = self.send(now, Intent::Expire, op, Aim::Free(doc));
            self.mark_in_flight(&token, id);
        }
    }

    /// Whether another host's lease expires by its own document's observation: under
    /// lease liveness, or (under session liveness) when no tenure holds it. A lease
    /// held in a tenure expires with that tenure's heartbeat.
    fn expires_by_itself(&self, slot: &Slot) -> bool {
        let others = !slot.is_owned() && slot.doc().owner.as_ref().is_some_and(|o| *o != self.me);
        others && slot.doc().owner_tenure.is_none() && !held_under_session(slot.doc())
    }

    /// The first document of the group, as this host's view holds it, written under
    /// a liveness this host cannot run beside: stamped with another one, or (for a
    /// host under lease liveness) held in a tenure. Unstamped leases with no tenure
    /// are the change feed processor's, which a host under session liveness judges by
    /// their own expiry, as a host under lease liveness would.
    pub(super) fn mismatch(&self) -> Option<ConfigError> {
        let mine = self.config.liveness();
        let leases = self.slots.values().filter_map(|s| {
            let d = s.doc();
            let held_in_tenure = d.owner.is_some() && d.owner_tenure.is_some();
            let theirs = d.liveness.or(held_in_tenure.then_some(Liveness::Session));
            // An unowned lease holds nobody's authority, whoever released it.
            Some((theirs.filter(|_| d.owner.is_some())?, &d.id))
        });
        let hosts = self.membership.members().filter_map(|m| {
            let d = &m.doc;
            Some((d.liveness.or(d.tenure.map(|_| Liveness::Session))?, &d.id))
        });
        let (theirs, id) = leases.chain(hosts).find(|(theirs, _)| *theirs != mine)?;
        Some(ConfigError::LivenessMismatch {
            mine,
            theirs,
            document: id.clone(),
        })
    }

    /// [`judge`](Self::judge)'s second half on its own, as debug builds check it.
    #[cfg(debug_assertions)]
    fn next_expiry(&self, now: Now) -> Option<LocalTime> {
        let policy = &self.config.expiry;
        let leases = self
            .slots
            .values()
            .filter(|slot| self.expires_by_itself(slot));
        let lease_times = leases.map(|slot| policy.expires_at(&slot.observation(), now));
        let member_times = self
            .live_members(now)
            .map(|m| policy.expires_at(&m.observation(), now));
        let unknown_times = self
            .slots
            .values()
            .filter(|slot| !slot.doc().is_finished_split() && !slot.is_owned())
            .filter(|slot| self.session_liveness() && slot.doc().owner.is_some())
            .filter_map(|slot| self.unknown_tenure_until(slot, now));
        lease_times
            .chain(member_times)
            .chain(unknown_times)
            .filter(|t| *t > now.local)
            .min()
    }

    fn take(&mut self, now: Now, token: &LeaseToken, reason: &Reason) {
        let Some(slot) = self.slots.get(token) else {
            return;
        };
        // An earlier session of this lease that has not stopped here bars taking it
        // back: its call may still be running. Past the stop timeout it may run for
        // good, and the plans, which every host shares, give the lease to this host
        // all the same: taken, the lease has an owner that passes it on to its
        // successor (`give_up_stuck`), and no session starts beside the call.
        let strands = self.config.known_bad == Some(KnownBad::StuckCallStrands);
        let barred = self.sessions.is_live(token) && (strands || !self.stuck(token, now));
        if !slot.can_send(now.local)
            || slot.is_owned()
            || slot.is_stale()
            || slot.is_refused()
            || barred
        {
            return;
        }
        // Whoever held this version may still be processing unless it expired or was
        // released cleanly; then this host waits for it to expire before processing.
        let fenced = match reason {
            Reason::Unowned => slot.doc().fenced,
            Reason::Expired { .. } => false,
            Reason::Steal { .. } | Reason::Handoff { .. } => true,
        };
        let fence = fenced.then(|| slot.observation());
        let mut doc = slot.doc().clone();
        if self.session_liveness() {
            // A lease is taken only in a tenure of this host's own, and only once the
            // tenure it hangs on is over: a dead host's is ended (fenced) first, so
            // that a renewal it still has in flight fails instead of extending it.
            let Some(tenure) = self.membership.beat.tenure() else {
                return;
            };
            let bad = self.config.known_bad == Some(KnownBad::UnfencedTakeover);
            match (
                self.tenure_verdict(slot, now),
                doc.owner.clone(),
                doc.owner_tenure,
            ) {
                (Some(TenureVerdict::Expired(etag)), Some(owner), Some(theirs)) if !bad => {
                    self.fence(now, &owner, theirs, etag);
                    return;
                }
                // Not proven over: the next scan reads the heartbeat again.
                (Some(TenureVerdict::Unknown), ..) if matches!(reason, Reason::Expired { .. }) => {
                    return;
                }
                _ => {}
            }
            doc.owner_tenure = Some(tenure);
        }
        doc.owner = Some(self.me.clone());
        // Named after this life, not just this host: a read after a take whose
        // answer was lost tells this life's take from an earlier life's (a zombie
        // sent on the same version at the same epoch: the swarm's seed 4308821).
        doc.owner_life = Some(self.incarnation());
        doc.epoch = doc.epoch.next();
        doc.fenced = fenced;
        doc.timestamp = now.wall;
        if self.config.known_bad == Some(KnownBad::FenceForgetsTerms) {
            doc.terms = None;
        }
        let intent = match reason {
            Reason::Steal { .. } => Intent::Steal,
            _ => Intent::Acquire,
        };
        let op = Op::Replace {
            doc: Record::Lease(doc.clone()),
            if_match: Some(slot.etag().clone()),
        };
        let id = self.send(now, intent, op, Aim::Take { doc, fence });
        self.mark_in_flight(token, id);
    }
}

/// Whether `doc` is held under session liveness: authority over it comes from its
/// owner's heartbeat, so it is never renewed on its own.
fn held_under_session(doc: &LeaseDocument) -> bool {
    doc.owner.is_some() && (doc.owner_tenure.is_some() || doc.liveness == Some(Liveness::Session))
}
