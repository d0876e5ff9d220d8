//! Membership: how hosts that own nothing yet become visible, and where claims live.
//!
//! Only strategies that need membership publish heartbeats. A heartbeat expires by the
//! same rule as a lease, so a host is alive exactly as long as a lease it renewed
//! would be.
//!
//! Under session liveness the heartbeat is also the host's authority over every lease
//! it holds (see `tenure`).
//!
//! [`Membership`] and its [`Heartbeat`] keep their own state and decide their own
//! steps; they know nothing of leases. The host sends the requests they ask for and
//! acts on the leases when a tenure begins or ends (see `beat`).

use super::HostDocument;
use super::heartbeat::Heartbeat;
use crate::expiry::{ExpiryPolicy, Observation};
use crate::ids::{Etag, HostId, LeaseToken, Tenure};
use crate::time::{LocalTime, Now};
use std::collections::{BTreeMap, BTreeSet};

/// The group as this host knows it: its own heartbeat, the other hosts' heartbeats,
/// and the tenures it is ending.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Membership {
    /// Other hosts, as their heartbeats show them, by id.
    members: BTreeMap<HostId, Member>,
    /// This host's own heartbeat.
    pub beat: Heartbeat,
    /// Hosts whose tenure this host is fencing (session liveness).
    fencing: BTreeSet<HostId>,
    /// Per host, the last version of its heartbeat a fence or a retire of this
    /// host's found changed (412): never current again, so never worth writing
    /// again.
    refuted: BTreeMap<HostId, Etag>,
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
    /// A member finished a split: the table has new leases.
    pub split: bool,
    /// A member gave a lease away without a claim: the table names its recipient,
    /// which may be this host.
    pub gift: bool,
    /// A member published another count of the leases it holds.
    pub counts: bool,
    /// A member that announced its leave is gone: it released its leases.
    pub left: bool,
}

impl Member {
    pub fn observation(&self) -> Observation {
        Observation {
            first_seen: self.seen,
            timestamp: self.doc.timestamp,
            terms: self.doc.terms,
        }
    }

    /// Whether another host has ended this heartbeat's tenure.
    pub fn is_fenced(&self) -> bool {
        self.doc.fenced_by.is_some()
    }

    /// Whether this heartbeat is live at `now`: not fenced, not expired.
    pub fn is_alive(&self, policy: &ExpiryPolicy, now: Now) -> bool {
        !self.is_fenced() && !policy.is_expired(&self.observation(), now)
    }
}

/// The live host that `giver`, unable to process a lease, hands it to: among `live`
/// (the other live hosts as the giver sees them), the first after the giver in id
/// order, wrapping around, so that two stuck hosts do not hand their leases to each
/// other. The giver and the successor both apply this one rule.
pub(super) fn successor<'a>(
    giver: &HostId,
    live: impl IntoIterator<Item = &'a HostId>,
) -> Option<&'a HostId> {
    let live: Vec<&HostId> = live.into_iter().filter(|h| *h != giver).collect();
    let after = live.iter().filter(|h| **h > giver).min();
    after.or_else(|| live.iter().min()).copied()
}

impl Membership {
    pub fn new() -> Membership {
        Membership {
            members: BTreeMap::new(),
            beat: Heartbeat::new(),
            fencing: BTreeSet::new(),
            refuted: BTreeMap::new(),
        }
    }

    /// Another host, if its heartbeat has been seen.
    pub fn member(&self, host: &HostId) -> Option<&Member> {
        self.members.get(host)
    }

    /// Every other host whose heartbeat has been seen, by id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// Live members other than `me`, sorted by id.
    pub fn live<'a>(
        &'a self,
        me: &'a HostId,
        policy: &'a ExpiryPolicy,
        now: Now,
    ) -> impl Iterator<Item = &'a Member> {
        self.members
            .values()
            .filter(move |m| m.doc.host != *me && m.is_alive(policy, now))
    }

    /// Folds the heartbeats of one scan, issued after `seq` requests, into the member
    /// list. Says whether a tenure ended since the last one (replaced, fenced, or its
    /// heartbeat gone), and whether anything a plan reads changed: who is a member, a
    /// tenure, a claim.
    pub fn integrate(
        &mut self,
        me: &HostId,
        now: Now,
        seq: u64,
        beats: Vec<(HostDocument, Etag)>,
    ) -> MemberChanges {
        let mut members = std::mem::take(&mut self.members);
        let mut next = BTreeMap::new();
        let mut ended = false;
        let mut changed = false;
        let mut split = false;
        let mut gift = false;
        let mut counts = false;
        for (doc, etag) in beats {
            if doc.host == *me {
                continue;
            }
            let member = match members.remove(&doc.host) {
                Some(mut m) => {
                    ended |= m.doc.tenure.is_some()
                        && (m.doc.tenure != doc.tenure
                            || (!m.is_fenced() && doc.fenced_by.is_some()));
                    split |= m.doc.splits != doc.splits;
                    gift |= m.doc.gifts != doc.gifts;
                    counts |= m.doc.owned != doc.owned || m.doc.leases != doc.leases;
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
                    counts = true;
                    // Splits and gifts made before this host first saw the member
                    // may have changed the table since this host last read it.
                    split |= doc.splits > 0;
                    gift |= doc.gifts > 0;
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
        let left = members.values().any(|m| m.doc.leaving);
        changed |= !members.is_empty();
        self.members = next;
        MemberChanges {
            ended,
            changed: changed || ended || split || gift,
            split,
            gift,
            counts,
            left,
        }
    }

    /// Whether a live member other than `me` announced its leave: its leases are
    /// released soon.
    pub fn any_leaving(&self, me: &HostId, policy: &ExpiryPolicy, now: Now) -> bool {
        self.live(me, policy, now).any(|m| m.doc.leaving)
    }

    /// Whether some member's heartbeat has expired and is not being deleted yet.
    pub fn any_dead(&self, policy: &ExpiryPolicy, now: Now) -> bool {
        self.members
            .values()
            .any(|m| !m.retiring && !m.is_alive(policy, now))
    }

    /// The dead members to delete, each with the etag it was seen at, now marked as
    /// being deleted: all but those in `keep` and those this host is fencing.
    pub fn retire(
        &mut self,
        policy: &ExpiryPolicy,
        now: Now,
        keep: &BTreeSet<&HostId>,
    ) -> Vec<(HostId, Etag)> {
        let fencing = &self.fencing;
        let dead: Vec<(HostId, Etag)> = self
            .members
            .values()
            .filter(|m| !m.retiring && !m.is_alive(policy, now))
            .filter(|m| !keep.contains(&m.doc.host) && !fencing.contains(&m.doc.host))
            // A delete of this very version failed: a read from a lagging replica
            // still shows it, and deleting it again can only fail again.
            .filter(|m| self.refuted.get(&m.doc.host) != Some(&m.etag))
            .map(|m| (m.doc.host.clone(), m.etag.clone()))
            .collect();
        for (host, _) in &dead {
            if let Some(m) = self.members.get_mut(host) {
                m.retiring = true;
            }
        }
        dead
    }

    /// A delete of `host`'s heartbeat was answered.
    pub fn retired(&mut self, host: &HostId, refused: Option<Etag>) {
        // Whatever the answer, the next scan tells the truth about this heartbeat.
        // The record stays until then: forgetting it would restart the expiry wait if
        // the delete did not apply, counting a dead host as alive for another round.
        if let Some(m) = self.members.get_mut(host) {
            m.retiring = false;
        }
        if let Some(etag) = refused {
            self.refute(host, etag);
        }
    }

    /// The fenced heartbeat that ends `host`'s `tenure`, written by `me` at `now`;
    /// `None` if this host is fencing it already.
    pub fn begin_fence(
        &mut self,
        prefix: &str,
        me: &HostId,
        host: &HostId,
        tenure: Tenure,
        now: Now,
    ) -> Option<HostDocument> {
        if !self.fencing.insert(host.clone()) {
            return None;
        }
        let mut doc = HostDocument::new(prefix, host.clone(), now.wall);
        if let Some(m) = self.members.get(host) {
            doc.claims = m.doc.claims.clone();
            doc.timestamp = m.doc.timestamp;
        }
        doc.tenure = Some(tenure);
        doc.fenced_by = Some(me.clone());
        Some(doc)
    }

    /// The last version of `host`'s heartbeat a fence found changed.
    pub fn refuted(&self, host: &HostId) -> Option<&Etag> {
        self.refuted.get(host)
    }

    /// A fence or a retire of `host`'s heartbeat at `etag` failed: that version has
    /// been written over.
    pub fn refute(&mut self, host: &HostId, etag: Etag) {
        self.refuted.insert(host.clone(), etag);
    }

    /// A fence was answered: if it landed (`etag`), the fenced heartbeat is the
    /// member's latest version, as of a read issued after `seq` requests.
    pub fn fence_answered(&mut self, now: Now, doc: HostDocument, seq: u64, etag: Option<Etag>) {
        self.fencing.remove(&doc.host);
        if let Some(etag) = etag {
            let member = Member {
                claimed: BTreeSet::new(),
                doc,
                etag,
                seen: now.local,
                read: seq,
                retiring: false,
            };
            self.members.insert(member.doc.host.clone(), member);
        }
    }
}
