//! What a host knows about one lease, and what it holds if it owns it.

use super::LeaseDocument;
use crate::expiry::{ExpiryPolicy, Observation};
use crate::ids::{Checkpoint, Epoch, Etag, HostId, LeaseToken, RequestId};
use crate::time::{LocalTime, Millis, Now};

/// One lease as this host last saw it, and the state of this host's requests for it.
///
/// The version it knows (`doc`, `etag`) changes only through [`Slot::update`], so
/// that the start of the observed-expiry wait and what a later read must have seen
/// move with the etag and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Slot {
    doc: LeaseDocument,
    etag: Etag,
    /// When this host first saw `etag`: the start of the observed-expiry wait.
    seen: LocalTime,
    /// How many requests had been issued when this knowledge arrived. A table scan
    /// issued at or after this point is at least as fresh.
    learned: u64,
    /// `learned` when `etag` was first seen: a heartbeat read issued at or after
    /// this point saw the store after this version was written.
    etag_learned: u64,
    /// The one request in flight for this lease; per-lease requests never overlap, so
    /// their answers arrive in order.
    op: Option<RequestId>,
    /// The host must re-read the lease before writing it (after a 412 or an unknown
    /// outcome).
    stale: bool,
    /// The last write failed without saying whether it landed (an unknown outcome or
    /// an unexpected error): if the re-read shows it did not, it is sent again only
    /// after a backoff.
    write_failed: bool,
    /// Throttled or backing off: no request for this lease before this time.
    retry_at: Option<LocalTime>,
    /// The version the store last refused a write of this host's on (412), and the
    /// backoff before the lease is read again while a read still shows it. That
    /// version is gone for good, whatever a lagging replica serves: taken as current
    /// again, it had the host write it at once, be refused, read it again, and so on
    /// for as long as the replica lagged (the two-region emulator run, with a leave
    /// notice, at 100 % CPU on a paused clock).
    refused: Option<(Etag, Millis)>,
    /// The backoff that waits for a read newer than the refused version: a read that
    /// shows one sooner ends it (left standing, it held every take after a lost race
    /// back by the backoff, and `cfp`'s scale-out converged 13 s later).
    reread_at: Option<LocalTime>,
    /// Under [`KnownBad::TakeByName`](super::KnownBad::TakeByName) only: the epoch of
    /// this life's last take whose outcome is unknown, which that variant takes a
    /// read naming this host at that epoch to have landed. Always `None` otherwise,
    /// so that the models' states are what they were.
    unsure_take: Option<Epoch>,
    /// The version a take of this host's was sent on, if its outcome is unknown and
    /// no read since has shown another: the take may still land (a request given up
    /// on can), and a re-read that came first says nothing of it. Any other version
    /// read ends it, as the store has moved past the take's version for good: at
    /// Session consistency no read of this host's goes back behind a version it saw.
    landing: Option<Etag>,
    /// A gift of this lease to a successor (a handoff answering no claim) whose
    /// outcome is unknown or was answered 412 (the SDK's retry of a write that
    /// landed): the recipient and the epoch it was written at. A read at that epoch
    /// or later settles it (`Slot::gift_landed`).
    unsure_gift: Option<(HostId, Epoch)>,
    /// Present while this host owns the lease. Boxed because a host owns a small
    /// share of the table, and every scan walks every slot: inline, it made each slot
    /// 60 % larger.
    own: Option<Box<Own>>,
}

impl Slot {
    pub fn new(doc: LeaseDocument, etag: Etag, now: LocalTime, learned: u64) -> Slot {
        Slot {
            doc,
            etag,
            seen: now,
            learned,
            etag_learned: learned,
            op: None,
            stale: false,
            write_failed: false,
            retry_at: None,
            refused: None,
            reread_at: None,
            unsure_take: None,
            landing: None,
            unsure_gift: None,
            own: None,
        }
    }

    /// The version of the lease this host knows.
    pub fn doc(&self) -> &LeaseDocument {
        &self.doc
    }

    /// The etag of the version this host knows.
    pub fn etag(&self) -> &Etag {
        &self.etag
    }

    /// See the field `etag_learned`.
    pub fn etag_learned(&self) -> u64 {
        self.etag_learned
    }

    /// Whether this host owns the lease.
    pub fn is_owned(&self) -> bool {
        self.own.is_some()
    }

    /// What this host holds of the lease, if it owns it.
    pub fn own(&self) -> Option<&Own> {
        self.own.as_deref()
    }

    /// What this host holds of the lease, if it owns it, to change.
    pub fn own_mut(&mut self) -> Option<&mut Own> {
        self.own.as_deref_mut()
    }

    /// Records that this host owns the lease, holding `own`.
    pub fn hold(&mut self, own: Own) {
        self.own = Some(Box::new(own));
    }

    /// Records that this host no longer owns the lease.
    pub fn disown(&mut self) {
        self.own = None;
    }

    /// Takes what this host held of the lease: it no longer owns it.
    pub fn take_own(&mut self) -> Option<Box<Own>> {
        self.own.take()
    }

    /// What this host holds of the lease, beside the version it knows, if it owns it.
    pub fn held(&mut self) -> Option<(&mut Own, &LeaseDocument)> {
        self.own.as_deref_mut().map(|own| (own, &self.doc))
    }

    /// Records a newer version; the expiry wait restarts only if the etag changed.
    ///
    /// A read that shows the version the store refused a write on (see
    /// [`Slot::refuse`]) came from a replica that lags: it changes nothing but the
    /// lease is read again after the backoff, as often as it takes.
    pub fn update(&mut self, doc: LeaseDocument, etag: Etag, now: LocalTime, learned: u64) {
        if let Some((gone, backoff)) = &self.refused {
            if *gone == etag {
                self.reread_after(now + *backoff);
                return;
            }
            self.refused = None;
            if self
                .reread_at
                .take()
                .is_some_and(|at| self.retry_at == Some(at))
            {
                self.retry_at = None;
            }
        }
        if etag != self.etag {
            self.seen = now;
            self.etag_learned = learned;
        }
        if self
            .landing
            .as_ref()
            .is_some_and(|sent_on| *sent_on != etag)
        {
            self.landing = None;
        }
        self.doc = doc;
        self.etag = etag;
        self.learned = learned;
        self.stale = false;
    }

    /// Whether a table read issued as request `seq` may replace what this host knows:
    /// none of its requests for the lease is in flight (its answer will say more),
    /// and the read was sent after this knowledge arrived.
    pub fn read_may_replace(&self, seq: u64) -> bool {
        self.op.is_none() && self.learned <= seq
    }

    /// After an answer that leaves this host unsure of the lease (a 412, an unknown
    /// outcome), with `issued` requests sent so far: only a read sent from now on can
    /// tell. A table scan sent earlier, even one answered later, may predate this
    /// host's own write, which may since have landed; taken as fresh, it once gave a
    /// host back a lease its own handoff had already given away (the swarm's
    /// skewed-clocks seed 2888576).
    pub fn distrust(&mut self, issued: u64, known_bad: Option<super::KnownBad>) {
        self.stale = true;
        if known_bad != Some(super::KnownBad::ScanBeforeOwnWrite) {
            self.learned = self.learned.max(issued);
        }
    }

    /// Records that the store refused a write of this host's on the version it
    /// knows (412): nothing is written on that version again ([`Slot::is_refused`]),
    /// no read showing it is taken as current, and each such read backs the next one
    /// off by `backoff`. The earlier behaviour
    /// ([`KnownBad::RewriteRefusedVersion`](super::KnownBad::RewriteRefusedVersion))
    /// records nothing.
    pub fn refuse(&mut self, backoff: Millis, known_bad: Option<super::KnownBad>) {
        use super::KnownBad::{RewriteRefusedVersion, ScanBeforeOwnWrite};
        // Both earlier behaviours predate this memory.
        if !matches!(known_bad, Some(RewriteRefusedVersion | ScanBeforeOwnWrite)) {
            self.refused = Some((self.etag.clone(), backoff));
        }
    }

    /// Whether the version this host knows is one the store refused a write on: no
    /// plan takes or frees the lease until a read shows a newer one.
    pub fn is_refused(&self) -> bool {
        self.refused
            .as_ref()
            .is_some_and(|(gone, _)| *gone == self.etag)
    }

    /// Marks the lease to be re-read before this host writes it, by a read sent no
    /// sooner than `at` (a table read sent meanwhile may tell first).
    pub fn reread_after(&mut self, at: LocalTime) {
        self.stale = true;
        let at = self.retry_at.map_or(at, |t| t.max(at));
        self.retry_at = Some(at);
        self.reread_at = Some(at);
    }

    /// Marks the lease to be re-read before this host writes it.
    pub fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Whether the host must re-read the lease before writing it.
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Whether the host keeps watch over the lease at every wake-up: it owns it, or
    /// must re-read it.
    pub fn is_active(&self) -> bool {
        self.is_owned() || self.stale
    }

    pub fn observation(&self) -> Observation {
        Observation {
            first_seen: self.seen,
            timestamp: self.doc.timestamp,
            terms: self.doc.terms,
        }
    }

    /// Whether a request for the lease may go now: none is in flight, and no
    /// throttle or backoff holds it back.
    pub fn can_send(&self, now: LocalTime) -> bool {
        self.op.is_none() && self.retry_at.is_none_or(|t| now >= t)
    }

    /// Whether a request for the lease is in flight.
    pub fn in_flight(&self) -> bool {
        self.op.is_some()
    }

    /// Records request `id` sent for the lease.
    pub fn sent(&mut self, id: RequestId) {
        self.op = Some(id);
    }

    /// Records the answer to the request in flight.
    pub fn answered(&mut self) {
        self.op = None;
    }

    /// When a throttle or backoff lets the next request go, if one holds it back.
    pub fn retry_at(&self) -> Option<LocalTime> {
        self.retry_at
    }

    /// Holds the next request back until `at`.
    pub fn retry_after(&mut self, at: LocalTime) {
        self.retry_at = Some(at);
    }

    /// Lets the next request go at once.
    pub fn retry_now(&mut self) {
        self.retry_at = None;
    }

    /// Records a write that failed without saying whether it landed.
    pub fn write_unsure(&mut self) {
        self.write_failed = true;
    }

    /// Whether the last write failed unsure, forgetting it.
    pub fn take_write_unsure(&mut self) -> bool {
        std::mem::take(&mut self.write_failed)
    }

    /// See the field `unsure_take`.
    pub fn unsure_take(&self) -> Option<Epoch> {
        self.unsure_take
    }

    /// Records a take of this host's, sent on the version it knows, whose outcome is
    /// unknown: see [`Slot::may_land`].
    pub fn take_may_land(&mut self) {
        self.landing = Some(self.etag.clone());
    }

    /// Whether a take of this host's whose outcome is unknown may still land: every
    /// read since showed the version it was sent on.
    pub fn may_land(&self) -> bool {
        self.landing.is_some()
    }

    /// Records a gift of this lease, written naming `to` at `epoch`, that may have
    /// landed although its answer did not say so.
    pub fn gift_unsure(&mut self, to: HostId, epoch: Epoch) {
        self.unsure_gift = Some((to, epoch));
    }

    /// Whether the version this slot now holds shows an unsure gift of this host's
    /// landed: it names the recipient at the gift's epoch. A version at that epoch or
    /// later settles the gift either way, so it is told once.
    pub fn gift_landed(&mut self) -> bool {
        let Some((to, epoch)) = &self.unsure_gift else {
            return false;
        };
        if self.doc.epoch < *epoch {
            return false;
        }
        let landed = self.doc.epoch == *epoch && self.doc.owner.as_ref() == Some(to);
        self.unsure_gift = None;
        landed
    }

    /// Records, for the known-bad variant, a take at `epoch` whose outcome is unknown.
    pub fn take_unsure_at(&mut self, epoch: Epoch) {
        self.unsure_take = Some(epoch);
    }

    /// Makes the host forget who owns the lease, as if a read had shown it free: a
    /// test's way to change the table behind the host's back.
    #[cfg(all(test, debug_assertions))]
    pub fn forget_owner(&mut self) {
        self.own = None;
        self.doc.owner = None;
    }
}

/// A lease this host owns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Own {
    pub epoch: Epoch,
    /// Authority holds while `now < authority_until`. `None` until this host's own
    /// conditional write succeeds: learning ownership from a read grants nothing.
    pub authority_until: Option<LocalTime>,
    /// If set, an earlier owner may still hold authority until this version (the one
    /// this host replaced) expires; processing waits for that.
    pub fence: Option<Observation>,
    /// Authority lapsed while a session ran, and that call may still be running at
    /// this epoch: the next session must start at a new one, so this host's next
    /// owner write raises it.
    pub resume: bool,
    pub next_renew: LocalTime,
    /// A checkpoint the handler reported that is not yet written.
    pub checkpoint: Option<Checkpoint>,
    /// Under [`CheckpointPolicy::AtMostEvery`](super::CheckpointPolicy): no write
    /// goes for the checkpoint alone before this. Always `None` under every-batch,
    /// so that the models' states are what they were.
    pub checkpoint_after: Option<LocalTime>,
    /// Under [`CheckpointPolicy::AtMostEveryItems`](super::CheckpointPolicy): the
    /// items reported since the last write that carried a checkpoint. Always 0 under
    /// the other policies, so that the models' states are what they were.
    pub unsent_items: u32,
    /// Where the lease goes once the handler has stopped.
    pub release: Option<ReleaseTo>,
    /// The children the handler reported the range split into, to be written into
    /// the lease once its session has ended.
    pub split: Option<Vec<LeaseToken>>,
    /// Children of a marked lease whose leases are known to exist (this host created
    /// them, or found them created).
    pub children_made: Vec<LeaseToken>,
    /// Found named after this host, with no write of this life's landed on it yet:
    /// it may be an earlier life's, still held by that life until the fence passes.
    pub inherited: bool,
}

impl Own {
    pub fn new(epoch: Epoch, fence: Option<Observation>, now: LocalTime) -> Own {
        Own {
            epoch,
            authority_until: None,
            fence,
            resume: false,
            next_renew: now,
            checkpoint: None,
            checkpoint_after: None,
            unsent_items: 0,
            release: None,
            split: None,
            children_made: Vec::new(),
            inherited: false,
        }
    }

    pub fn has_authority(&self, now: LocalTime) -> bool {
        self.authority_until.is_some_and(|until| now < until)
    }

    pub fn fence_passed(&self, policy: &ExpiryPolicy, now: Now) -> bool {
        self.fence.is_none_or(|f| policy.is_expired(&f, now))
    }
}

/// Where a released lease goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum ReleaseTo {
    /// Unowned (graceful shutdown).
    Nobody,
    /// To the host that claimed it (handoff), once a fresh read of its heartbeat
    /// shows it still claims the lease.
    Host {
        /// The claimant.
        to: HostId,
        /// Whether that read has been made.
        confirmed: bool,
    },
    /// To a live member that did not claim it, because this host cannot process it
    /// (a lost call never reported stopped). Every host plans from the same view, so
    /// a lease this host gave up to nobody would be planned back to it.
    Successor(HostId),
}
