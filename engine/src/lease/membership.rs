//! Heartbeats: how hosts that own nothing yet become visible, and where claims live.
//!
//! Only strategies that need membership publish heartbeats. A heartbeat expires by the
//! same rule as a lease, so a host is alive exactly as long as a lease it renewed
//! would be.

use super::host::{LeaseHost, Phase, What};
use super::{HostDocument, Intent, Record};
use crate::expiry::Observation;
use crate::ids::{Etag, HostId, LeaseToken, PartitionKey, RequestId};
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
    Write(Vec<LeaseToken>),
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
    pub retiring: bool,
}

impl Member {
    pub fn observation(&self) -> Observation {
        Observation {
            first_seen: self.seen,
            timestamp: self.doc.timestamp,
        }
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
        }
    }
}

impl LeaseHost {
    pub(super) fn uses_heartbeats(&self) -> bool {
        self.config.strategy.needs_membership()
    }

    /// Whether the heartbeat of `member` is live at `now`.
    pub(super) fn is_alive(&self, member: &Member, now: Now) -> bool {
        !self.config.expiry.is_expired(&member.observation(), now)
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
        let prefix = &self.config.prefix;
        let id = HostDocument::id_for(prefix, &self.me);
        let pk = PartitionKey::new(id.as_str());
        let (intent, op, step) = match (&self.beat.state, self.phase) {
            (BeatState::Left, _) | (_, Phase::Finished) => return,
            (_, Phase::ShuttingDown) => (
                Intent::Leave,
                Op::Delete {
                    pk,
                    id,
                    if_match: None,
                },
                BeatStep::Leave,
            ),
            (BeatState::Unknown, Phase::Running) => {
                (Intent::Heartbeat, Op::Read { pk, id }, BeatStep::Read)
            }
            (state, Phase::Running) => {
                let mut doc = HostDocument::new(prefix, self.me.clone(), now.wall);
                doc.claims = self.beat.claims.clone();
                let step = BeatStep::Write(doc.claims.clone());
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
        match (step, result) {
            (BeatStep::Write(claims), Ok(Reply::Created(etag) | Reply::Replaced(etag))) => {
                self.beat.state = BeatState::Present(etag);
                self.beat.published = claims;
                self.beat.next_at = sent_at + renew;
            }
            (BeatStep::Read, Ok(Reply::Read(Stored { etag, .. }))) => {
                self.beat.state = BeatState::Present(etag);
                self.beat.next_at = now.local;
            }
            (BeatStep::Leave, Ok(_) | Err(StoreError::NotFound)) => {
                self.beat.state = BeatState::Left;
            }
            (_, Err(StoreError::NotFound)) => self.beat.state = BeatState::Absent,
            (_, Err(StoreError::Throttled { retry_after })) => {
                self.beat.retry_at = Some(now.local + retry_after);
            }
            (BeatStep::Leave, Err(_)) => self.beat.next_at = now.local + self.backoff(),
            (_, Err(StoreError::Conflict | StoreError::PreconditionFailed)) => {
                self.beat.state = BeatState::Unknown;
            }
            (_, _) => {
                self.beat.state = BeatState::Unknown;
                self.beat.next_at = now.local + self.backoff();
            }
        }
    }

    /// Folds the heartbeats of one table scan into the member list.
    pub(super) fn integrate_members(&mut self, now: Now, beats: Vec<(HostDocument, Etag)>) {
        let mut members = std::mem::take(&mut self.members);
        let mut next = std::collections::BTreeMap::new();
        for (doc, etag) in beats {
            if doc.host == self.me {
                continue;
            }
            let member = match members.remove(&doc.host) {
                Some(mut m) => {
                    if m.etag != etag {
                        m.seen = now.local;
                        m.etag = etag;
                        m.retiring = false;
                    }
                    m.claimed = doc.claims.iter().cloned().collect();
                    m.doc = doc;
                    m
                }
                None => Member {
                    claimed: doc.claims.iter().cloned().collect(),
                    doc,
                    etag,
                    seen: now.local,
                    retiring: false,
                },
            };
            next.insert(member.doc.host.clone(), member);
        }
        self.members = next;
    }

    /// Deletes heartbeats of hosts that stopped, so that restarted hosts with new
    /// identities do not pile up. Conditional, so a host that just came back wins.
    pub(super) fn retire_dead_members(&mut self, now: Now) {
        let dead: Vec<(HostId, Etag)> = self
            .members
            .values()
            .filter(|m| !m.retiring && !self.is_alive(m, now))
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
