//! Locks on single documents: the lock a queue consumer takes on a message and the
//! lease a holder takes on an item follow one rule, kept here.
//!
//! **The rule** is the partition leases' `observed` rule, applied per document:
//!
//! - A lock is written with its duration `D`. A client may treat another client's lock
//!   as expired only once it has seen the document's *same etag* for `D + ρD` on its
//!   own monotonic clock, `ρ` being the drift bound. Nothing about wall clocks is
//!   assumed, so any clock skew is safe.
//! - The holder's authority runs from the moment it *sent* the write that took or
//!   renewed the lock, for `D − ρD − margin` on its own clock.
//!
//! The first sighting happens after the write was applied, and so after it was sent;
//! `D + ρD` on a clock at most `ρ` slow is at least `D` of true time; authority of
//! `D − ρD − margin` on a clock at most `ρ` fast is less than `D` of true time. So
//! authority always ends before anyone may take the lock, whatever the clock offsets.
//! The model checker proves this at small bounds with skew and drift, and shows the
//! counterexample when the drift allowance is left out.
//!
//! The wall-clock `locked_until` a lock also carries is for people and for readers that
//! choose the `timestamp` rule (CFP's, unsafe under skew; see [`ExpiryRule`]).

mod token;

pub use token::LockToken;

use crate::expiry::{ExpiryPolicy, ExpiryRule};
use crate::ids::{DocId, Etag, HostId, Incarnation, RequestId};
use crate::time::{Drift, LocalTime, Millis, Now, WallTime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The clock assumptions of a lock client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LockPolicy {
    /// The rule readers apply; `Observed` unless interoperating with wall-clock readers.
    pub rule: ExpiryRule,
    /// The assumed bound on clock drift.
    pub drift: Drift,
    /// How much earlier than strictly needed a holder gives up its authority.
    pub safety_margin: Millis,
}

impl Default for LockPolicy {
    fn default() -> Self {
        let lease = ExpiryPolicy::default();
        LockPolicy {
            rule: ExpiryRule::Observed,
            drift: lease.drift,
            safety_margin: lease.safety_margin,
        }
    }
}

impl LockPolicy {
    fn with_duration(&self, duration: Millis) -> ExpiryPolicy {
        ExpiryPolicy {
            rule: self.rule,
            duration,
            drift: self.drift,
            safety_margin: self.safety_margin,
        }
    }

    /// How long a holder's authority lasts after it sent a successful write of a lock
    /// of `duration`. Zero means the duration is too short to hold anything.
    pub fn authority_span(&self, duration: Millis) -> Millis {
        self.with_duration(duration).authority_span()
    }

    /// When a lock of `duration` first seen at `first_seen` will count as expired, on
    /// the reader's clock: known in advance under the observed rule, not under the
    /// timestamp rule (it depends on the wall clock).
    pub fn expires_at(&self, duration: Millis, first_seen: LocalTime) -> Option<LocalTime> {
        match self.rule {
            ExpiryRule::Observed => Some(first_seen + duration + self.drift.allowance(duration)),
            ExpiryRule::Timestamp => None,
        }
    }

    /// Whether a lock of `duration`, first seen at `first_seen` in the version that
    /// says `locked_until`, counts as expired at `now`.
    ///
    /// ```
    /// use leasehold_engine::lock::LockPolicy;
    /// use leasehold_engine::{Drift, LocalTime, Millis, Now, WallTime};
    ///
    /// let policy = LockPolicy { drift: Drift::ppm(100_000), ..LockPolicy::default() };
    /// let d = Millis::from_secs(10);
    /// let at = |ms| Now::new(LocalTime(ms), WallTime(0));
    /// // Seen at 0 s: expired only after 10 s plus the 10 % drift allowance.
    /// assert!(!policy.is_expired(d, LocalTime(0), WallTime(0), at(10_999)));
    /// assert!(policy.is_expired(d, LocalTime(0), WallTime(0), at(11_000)));
    /// ```
    pub fn is_expired(
        &self,
        duration: Millis,
        first_seen: LocalTime,
        locked_until: WallTime,
        now: Now,
    ) -> bool {
        match self.rule {
            ExpiryRule::Observed => {
                now.local >= first_seen + duration + self.drift.allowance(duration)
            }
            ExpiryRule::Timestamp => locked_until < now.wall,
        }
    }
}

/// A lock this client holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    /// The etag of the write that took or last renewed it.
    pub etag: Etag,
    /// The lock's token.
    pub token: LockToken,
    /// The lock's duration.
    pub duration: Millis,
    /// Authority holds while the local clock is before this.
    pub authority_until: LocalTime,
    /// No other client can take the document before this: the authority the lock
    /// was granted, which giving authority up does not shorten. A write of this
    /// client's that finds the document gone before then was answered by one of
    /// its own earlier writes.
    pub excludes_until: LocalTime,
}

/// What one client knows of locks: those it holds, and when it first saw each
/// version of documents locked by others.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Locks {
    held: BTreeMap<DocId, Held>,
    seen: BTreeMap<DocId, (Etag, LocalTime)>,
}

impl Locks {
    /// The lock held on `id`, if any.
    pub fn held(&self, id: &DocId) -> Option<&Held> {
        self.held.get(id)
    }

    /// Every lock held, by document id.
    pub fn all_held(&self) -> impl Iterator<Item = (&DocId, &Held)> {
        self.held.iter()
    }

    /// Whether this client may act on `id` at `now`.
    pub fn has_authority(&self, id: &DocId, now: LocalTime) -> bool {
        self.held.get(id).is_some_and(|h| now < h.authority_until)
    }

    /// Whether no other client can have taken `id` by `now`: it is held, and the
    /// lock's granted authority (given up or not) has not run out.
    pub fn excludes_others(&self, id: &DocId, now: LocalTime) -> bool {
        self.held.get(id).is_some_and(|h| now < h.excludes_until)
    }

    /// Records a successful write of a lock, sent at `sent_at`.
    pub fn hold(&mut self, id: DocId, held: Held) {
        self.seen.remove(&id);
        self.held.insert(id, held);
    }

    /// Ends authority over `id` at once, keeping the lock's etag: used when a write that
    /// gives the lock up is sent. Should its outcome be unknown, the write may have
    /// been applied and someone else may take the document, so authority must not
    /// outlive the sending; the etag stays so that the write can be retried.
    pub fn give_up_authority(&mut self, id: &DocId, now: LocalTime) {
        if let Some(held) = self.held.get_mut(id) {
            held.authority_until = held.authority_until.min(now);
        }
    }

    /// Ends authority over `id` at once, and with it the lock's exclusion: used when a
    /// write that frees the document for others (an abandon, a move to the dead
    /// letters) is sent. Should its outcome be unknown, it may have landed, and
    /// another client may then have taken the document and deleted it at once: a
    /// later write of this client's that finds the document gone cannot tell whose
    /// doing that was. The etag stays so that the write can be retried.
    pub fn release_exclusion(&mut self, id: &DocId, now: LocalTime) {
        self.give_up_authority(id, now);
        if let Some(held) = self.held.get_mut(id) {
            held.excludes_until = held.excludes_until.min(now);
        }
    }

    /// Forgets a lock (completed, released or lost).
    pub fn drop_lock(&mut self, id: &DocId) -> Option<Held> {
        self.held.remove(id)
    }

    /// Notes that `id` was read at `now` with `etag`, and returns when this client
    /// first saw that version.
    pub fn sight(&mut self, id: &DocId, etag: &Etag, now: LocalTime) -> LocalTime {
        match self.seen.get(id) {
            Some((seen, at)) if seen == etag => *at,
            _ => {
                self.seen.insert(id.clone(), (etag.clone(), now));
                now
            }
        }
    }

    /// Forgets the sighting of `id` (it is gone or unlocked).
    pub fn forget_sighting(&mut self, id: &DocId) {
        self.seen.remove(id);
    }

    /// Forgets sightings of documents not in `present` (they are gone or unlocked).
    pub fn forget_sightings_except(&mut self, present: &[&DocId]) {
        self.seen.retain(|id, _| present.contains(&id));
    }

    /// Forgets sightings of documents with ids after `after` (all, if `None`) up to
    /// `through` (no end, if `None`) that are not in `present`: a read of that id
    /// range found them gone.
    pub fn forget_sightings_between(
        &mut self,
        after: Option<&DocId>,
        through: Option<&DocId>,
        present: &[DocId],
    ) {
        self.seen.retain(|id, _| {
            let in_range = after.is_none_or(|a| id > a) && through.is_none_or(|t| id <= t);
            !in_range || present.contains(id)
        });
    }

    /// How many versions this client is watching.
    pub fn sightings(&self) -> usize {
        self.seen.len()
    }
}

/// A rule with a name. Rules are compared and hashed by name, so that clients that
/// carry one stay comparable (model checkers compare whole client states).
#[derive(Clone, Copy)]
pub struct Named<F> {
    /// A name for traces and comparisons.
    pub name: &'static str,
    /// The rule.
    pub pick: F,
}

impl<F> PartialEq for Named<F> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl<F> Eq for Named<F> {}

impl<F> std::hash::Hash for Named<F> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl<F> std::fmt::Debug for Named<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The identity of one life of a lock client, and the numbers it hands out.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The client's name.
    pub me: HostId,
    /// Which life of it.
    pub incarnation: Incarnation,
    issued: u64,
    tokens: u64,
}

impl Client {
    /// Life `incarnation` of client `me`.
    pub fn new(me: HostId, incarnation: Incarnation) -> Client {
        Client {
            me,
            incarnation,
            issued: 0,
            tokens: 0,
        }
    }

    /// A fresh request id.
    pub fn next_request(&mut self) -> RequestId {
        self.issued += 1;
        RequestId {
            incarnation: self.incarnation,
            seq: self.issued - 1,
        }
    }

    /// A fresh lock token.
    pub fn next_token(&mut self) -> LockToken {
        self.tokens += 1;
        LockToken {
            holder: self.me.clone(),
            incarnation: self.incarnation,
            seq: self.tokens,
        }
    }

    /// Whether `token` was issued by this life of this client.
    pub fn owns(&self, token: &LockToken) -> bool {
        token.is_from(&self.me, self.incarnation)
    }
}
