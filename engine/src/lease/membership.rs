//! Heartbeats: how hosts that own nothing yet become visible, and where claims live.
//!
//! Only strategies that need membership publish heartbeats. A heartbeat expires by the
//! same rule as a lease, so a host is alive exactly as long as a lease it renewed
//! would be.
//!
//! Under session liveness the heartbeat is also the host's authority over every lease
//! it holds (see `tenure`).

use super::host::{LeaseHost, Phase, What};
use super::{HostDocument, Intent, Record};
use crate::expiry::Observation;
use crate::ids::{Etag, HostId, LeaseToken, PartitionKey, RequestId, Tenure};
use crate::store::{Op, Reply, StoreError, Stored};
use crate::time::{LocalTime, Now};
use std::collections::BTreeSet;

/// This host's own heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Heartbeat {
    pub state: BeatState,
    pub op: Option<RequestId>,
    pub next_at: LocalTime,
    /// Throttled: nothing is sent before this time, whatever else changed.
    pub retry_at: Option<LocalTime>,
    /// The claims this host wants published.
    pub claims: Vec<LeaseToken>,
    /// The claims in the stored heartbeat.
    pub published: Vec<LeaseToken>,
    /// Session liveness: the tenure the stored heartbeat vouches for, once a write
    /// of it has succeeded; `None` between tenures.
    pub tenure: Option<Tenure>,
    /// Session liveness: how many tenures this life has proposed, so a new one never
    /// repeats an old one (a proposal whose outcome was unknown may have landed).
    pub proposed: u64,
    /// Session liveness: authority over every lease held in `tenure` lasts while
    /// `now <` this, counted from the last successful write's send time.
    pub authority_until: Option<LocalTime>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum BeatState {
    /// Not stored (yet, or any more): create it.
    Absent,
    /// Stored with this etag.
    Present(Etag),
    /// Unknown after a conflict or an unknown outcome: read it.
    Unknown,
    /// Deleted at shutdown.
    Left,
}

/// What the heartbeat request in flight does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum BeatStep {
    Write {
        claims: Vec<LeaseToken>,
        tenure: Option<Tenure>,
    },
    Read,
    Leave,
}

/// Another host, as its heartbeat shows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Member {
    pub doc: HostDocument,
    /// `doc.claims` as a set: a host handing off many leases asks about each.
    pub claimed: BTreeSet<LeaseToken>,
    pub etag: Etag,
    pub seen: LocalTime,
    /// How many requests had been issued before the latest one that returned this
    /// version (a scan, or this host's own fence).
    pub read: u64,
    pub retiring: bool,
}

/// What one read of the heartbeats changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct MemberChanges {
    /// A tenure ended: its leases are free.
    pub ended: bool,
    /// Membership, a tenure or a claim changed: plans made before may be wrong.
    pub changed: bool,
}

impl Member {
    pub fn observation(&self) -> Observation {
        Observation {
            first_seen: self.seen,
            timestamp: self.doc.timestamp,
        }
    }

    /// Whether another host has ended this heartbeat's tenure.
    pub fn is_fenced(&self) -> bool {
        self.doc.fenced_by.is_some()
    }
}

impl Heartbeat {
    pub fn new() -> Heartbeat {
        Heartbeat {
            state: BeatState::Absent,
            op: None,
            next_at: LocalTime::ZERO,
            retry_at: None,
            claims: Vec::new(),
            published: Vec::new(),
            tenure: None,
            proposed: 0,
            authority_until: None,
        }
    }
}

impl LeaseHost {
    pub(super) fn uses_heartbeats(&self) -> bool {
        self.config.strategy.needs_membership()
    }

    /// Whether the heartbeat of `member` is live at `now`: not fenced, not expired.
    pub(super) fn is_alive(&self, member: &Member, now: Now) -> bool {
        !member.is_fenced() && !self.config.expiry.is_expired(&member.observation(), now)
    }

    /// Live members other than this host, sorted by id.
    pub(super) fn live_members(&self, now: Now) -> impl Iterator<Item = &Member> {
        self.members
            .values()
            .filter(move |m| m.doc.host != self.me && self.is_alive(m, now))
    }

    pub(super) fn drive_heartbeat(&mut self, now: Now) {
        if !self.uses_heartbeats() || self.beat.op.is_some() {
            return;
        }
        if self.beat.retry_at.is_some_and(|t| now.local < t) {
            return;
        }
        self.beat.retry_at = None;
        let claims_changed = self.beat.claims != self.beat.published
            && matches!(self.beat.state, BeatState::Present(_) | BeatState::Absent);
        if now.local < self.beat.next_at && !(claims_changed && self.phase == Phase::Running) {
            return;
        }
        // Under session liveness the heartbeat vouches for the leases still being
        // released: it is renewed until the last is gone, and only then deleted.
        let leaving =
            self.phase == Phase::ShuttingDown && !(self.session_liveness() && self.holds_leases());
        // A write between tenures proposes a new one, never used before in this life.
        let tenure = match (self.session_liveness(), self.beat.tenure) {
            (false, _) => None,
            (true, Some(tenure)) => Some(tenure),
            (true, None) => Some(Tenure {
                incarnation: self.incarnation(),
                seq: self.beat.proposed,
            }),
        };
        let prefix = &self.config.prefix;
        let id = HostDocument::id_for(prefix, &self.me);
        let pk = PartitionKey::new(id.as_str());
        let (intent, op, step) = match (&self.beat.state, self.phase) {
            (BeatState::Left, _) | (_, Phase::Finished) => return,
            // Nothing of this life is stored: nothing to take back.
            (BeatState::Absent, Phase::ShuttingDown) if leaving => {
                self.beat.state = BeatState::Left;
                return;
            }
            // Only the version this life wrote: a leave that arrives late must not
            // delete the heartbeat of the host's next life (the swarm's skewed-clocks
            // seed 100456: a leave held in a latency spike deleted the restarted
            // host's new heartbeat, and a peer took leases it was processing).
            (BeatState::Present(etag), Phase::ShuttingDown) if leaving => (
                Intent::Leave,
                Op::Delete {
                    pk,
                    id,
                    if_match: Some(etag.clone()),
                },
                BeatStep::Leave,
            ),
            (BeatState::Unknown, _) => (Intent::Heartbeat, Op::Read { pk, id }, BeatStep::Read),
            (state, _) => {
                let mut doc = HostDocument::new(prefix, self.me.clone(), now.wall);
                doc.claims = self.beat.claims.clone();
                doc.tenure = tenure;
                let step = BeatStep::Write {
                    claims: doc.claims.clone(),
                    tenure: doc.tenure,
                };
                let op = match state {
                    BeatState::Present(etag) => Op::Replace {
                        doc: Record::Host(doc),
                        if_match: Some(etag.clone()),
                    },
                    _ => Op::Create(Record::Host(doc)),
                };
                (Intent::Heartbeat, op, step)
            }
        };
        if matches!(step, BeatStep::Write { .. }) && self.beat.tenure.is_none() && tenure.is_some()
        {
            self.beat.proposed += 1;
        }
        let id = self.send(now, intent, op, What::Beat(step));
        self.beat.op = Some(id);
    }

    pub(super) fn on_heartbeat_response(
        &mut self,
        now: Now,
        sent_at: LocalTime,
        step: BeatStep,
        result: Result<Reply<Record>, StoreError>,
    ) {
        self.beat.op = None;
        let renew = self.config.renew_interval;
        let session = self.session_liveness();
        match (step, result) {
            (
                BeatStep::Write { claims, tenure },
                Ok(Reply::Created(etag) | Reply::Replaced(etag)),
            ) => {
                self.beat.state = BeatState::Present(etag);
                self.beat.published = claims;
                self.beat.next_at = sent_at + renew;
                if session {
                    let began = self.beat.tenure != tenure;
                    if began {
                        self.end_tenure();
                        self.beat.tenure = tenure;
                        self.table.settled = false;
                        // Resumes wait for a tenure to name.
                        let held: Vec<LeaseToken> = self.active.iter().cloned().collect();
                        held.iter().for_each(|t| self.touch(t));
                    }
                    let deadline = self.config.expiry.holder_deadline(sent_at);
                    let until = self
                        .beat
                        .authority_until
                        .map_or(deadline, |d| d.max(deadline));
                    self.beat.authority_until = Some(until);
                    self.grant_session_authority();
                    // Takes wait for a tenure to hold the leases in: plan now.
                    if began && self.phase == Phase::Running && !self.slots.is_empty() {
                        self.rebalance(now);
                    }
                }
            }
            (BeatStep::Read, Ok(Reply::Read(Stored { doc, etag }))) => {
                // Only an unfenced heartbeat of this very tenure still vouches for
                // it; anything else means the tenure is over.
                let ours = matches!(&doc, Record::Host(d)
                    if d.fenced_by.is_none() && d.tenure.is_some() && d.tenure == self.beat.tenure);
                if session && !ours {
                    self.end_tenure();
                }
                self.beat.state = BeatState::Present(etag);
                self.beat.next_at = now.local;
            }
            // Gone, or rewritten by someone else (a fencer, or this host's next life):
            // either way nothing of this life is left to delete.
            (
                BeatStep::Leave,
                Ok(_) | Err(StoreError::NotFound | StoreError::PreconditionFailed),
            ) => {
                self.beat.state = BeatState::Left;
            }
            (_, Err(StoreError::NotFound)) => {
                // Deleted by another host, which judged it expired: as good as fenced.
                if session {
                    self.end_tenure();
                }
                self.beat.state = BeatState::Absent;
            }
            (_, Err(StoreError::Throttled { retry_after })) => {
                self.beat.retry_at = Some(now.local + retry_after);
            }
            (BeatStep::Leave, Err(_)) => self.beat.next_at = now.local + self.backoff(),
            (step, Err(StoreError::PreconditionFailed)) => {
                // Only a fencer writes another host's heartbeat: the tenure is over.
                // (The blind variant never gets here: its renewal wins.)
                if session && matches!(step, BeatStep::Write { .. }) {
                    self.end_tenure();
                }
                self.beat.state = BeatState::Unknown;
            }
            (_, Err(StoreError::Conflict)) => self.beat.state = BeatState::Unknown,
            (_, _) => {
                self.beat.state = BeatState::Unknown;
                self.beat.next_at = now.local + self.backoff();
            }
        }
    }

    /// Folds the heartbeats of one scan into the member list. Says whether a tenure
    /// ended since the last one (replaced, fenced, or its heartbeat gone), and
    /// whether anything a plan reads changed: who is a member, a tenure, a claim.
    pub(super) fn integrate_members(
        &mut self,
        now: Now,
        seq: u64,
        beats: Vec<(HostDocument, Etag)>,
    ) -> MemberChanges {
        let mut members = std::mem::take(&mut self.members);
        let mut next = std::collections::BTreeMap::new();
        let mut ended = false;
        let mut changed = false;
        for (doc, etag) in beats {
            if doc.host == self.me {
                continue;
            }
            let member = match members.remove(&doc.host) {
                Some(mut m) => {
                    ended |= m.doc.tenure.is_some()
                        && (m.doc.tenure != doc.tenure
                            || (!m.is_fenced() && doc.fenced_by.is_some()));
                    changed |= m.doc.tenure != doc.tenure
                        || m.doc.fenced_by != doc.fenced_by
                        || m.doc.claims != doc.claims;
                    if m.etag != etag {
                        m.seen = now.local;
                        m.etag = etag;
                        m.retiring = false;
                    }
                    m.claimed = doc.claims.iter().cloned().collect();
                    m.doc = doc;
                    m.read = seq;
                    m
                }
                None => {
                    changed = true;
                    Member {
                        claimed: doc.claims.iter().cloned().collect(),
                        doc,
                        etag,
                        seen: now.local,
                        read: seq,
                        retiring: false,
                    }
                }
            };
            next.insert(member.doc.host.clone(), member);
        }
        ended |= members.values().any(|m| m.doc.tenure.is_some());
        changed |= !members.is_empty();
        self.members = next;
        MemberChanges {
            ended,
            changed: changed || ended,
        }
    }

    /// Deletes heartbeats of hosts that stopped, so that restarted hosts with new
    /// identities do not pile up. Conditional, so a host that just came back wins.
    ///
    /// Under session liveness a heartbeat some lease still names stays: deleting it
    /// would end that tenure without the fence its taker writes, and a fenced one
    /// tells everyone the tenure is over. It goes once no lease names the host.
    pub(super) fn retire_dead_members(&mut self, now: Now) {
        // Walking the slots costs O(partitions): only when there is someone to retire.
        let none_dead = self
            .members
            .values()
            .all(|m| m.retiring || self.is_alive(m, now));
        if none_dead {
            return;
        }
        let named: BTreeSet<&HostId> = if self.session_liveness() {
            self.slots
                .values()
                .filter_map(|s| s.doc.owner.as_ref())
                .collect()
        } else {
            BTreeSet::new()
        };
        let dead: Vec<(HostId, Etag)> = self
            .members
            .values()
            .filter(|m| !m.retiring && !self.is_alive(m, now))
            .filter(|m| !named.contains(&m.doc.host) && !self.fencing.contains(&m.doc.host))
            .map(|m| (m.doc.host.clone(), m.etag.clone()))
            .collect();
        for (host, etag) in dead {
            let id = HostDocument::id_for(&self.config.prefix, &host);
            let op = Op::Delete {
                pk: PartitionKey::new(id.as_str()),
                id,
                if_match: Some(etag),
            };
            self.send(now, Intent::Retire, op, What::Retire(host.clone()));
            if let Some(m) = self.members.get_mut(&host) {
                m.retiring = true;
            }
        }
    }

    pub(super) fn on_retire_response(&mut self, host: HostId) {
        // Whatever the answer, the next scan tells the truth about this heartbeat.
        // The record stays until then: forgetting it would restart the expiry wait if
        // the delete did not apply, counting a dead host as alive for another round.
        if let Some(m) = self.members.get_mut(&host) {
            m.retiring = false;
        }
    }
}
