//! What a host knows about one lease, and what it holds if it owns it.

use super::LeaseDocument;
use crate::expiry::{ExpiryPolicy, Observation};
use crate::ids::{Checkpoint, Epoch, Etag, HostId, LeaseToken, RequestId};
use crate::time::{LocalTime, Now};

/// One lease as this host last saw it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Slot {
    pub doc: LeaseDocument,
    pub etag: Etag,
    /// When this host first saw `etag`: the start of the observed-expiry wait.
    pub seen: LocalTime,
    /// How many requests had been issued when this knowledge arrived. A table scan
    /// issued at or after this point is at least as fresh.
    pub learned: u64,
    /// `learned` when `etag` was first seen: a heartbeat read issued at or after
    /// this point saw the store after this version was written.
    pub etag_learned: u64,
    /// The one request in flight for this lease; per-lease requests never overlap, so
    /// their answers arrive in order.
    pub op: Option<RequestId>,
    /// The host must re-read the lease before writing it (after a 412 or an unknown
    /// outcome).
    pub stale: bool,
    /// The last write failed without saying whether it landed (an unknown outcome or
    /// an unexpected error): if the re-read shows it did not, it is sent again only
    /// after a backoff.
    pub write_failed: bool,
    /// Throttled: do not write before this time.
    pub retry_at: Option<LocalTime>,
    /// The epoch at which this life last owned the lease, or sent a take of it whose
    /// outcome is unknown: a read that shows the lease named after this host at that
    /// epoch shows it this life's, not an earlier life's.
    pub ours: Option<Epoch>,
    /// Present while this host owns the lease. Boxed because a host owns a small
    /// share of the table, and every scan walks every slot: inline, it made each slot
    /// 60 % larger.
    pub own: Option<Box<Own>>,
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
            ours: None,
            own: None,
        }
    }

    /// Records a newer version; the expiry wait restarts only if the etag changed.
    pub fn update(&mut self, doc: LeaseDocument, etag: Etag, now: LocalTime, learned: u64) {
        if etag != self.etag {
            self.seen = now;
            self.etag_learned = learned;
        }
        self.doc = doc;
        self.etag = etag;
        self.learned = learned;
        self.stale = false;
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

    pub fn observation(&self) -> Observation {
        Observation {
            first_seen: self.seen,
            timestamp: self.doc.timestamp,
            terms: self.doc.terms,
        }
    }

    pub fn can_send(&self, now: LocalTime) -> bool {
        self.op.is_none() && self.retry_at.is_none_or(|t| now >= t)
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
