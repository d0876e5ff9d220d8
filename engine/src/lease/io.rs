//! What goes into a partition-lease host and what comes out of it.

use super::Record;
use crate::ids::{Checkpoint, Epoch, LeaseToken, RequestId, Session};
use crate::store::{Op, Reply, StoreError};
use std::fmt;

/// Something that happened to a host.
// A store answer carries a whole document, now with its writer's terms: each input
// is moved once, into the host, and a box would cost an allocation per answer.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// Time passed; the host acts on whatever is due.
    Tick,
    /// The store answered request `id`.
    Response {
        /// The request answered.
        id: RequestId,
        /// What the store said.
        result: Result<Reply<Record>, StoreError>,
    },
    /// Stop gracefully: hand every lease back, keeping its checkpoint.
    Shutdown,
    /// The handler processed a partition up to `checkpoint`, in `session`.
    Checkpoint {
        /// The partition.
        lease: LeaseToken,
        /// The session the handler was started with.
        session: Session,
        /// How far it got.
        checkpoint: Checkpoint,
        /// How many items it finished since its previous report: what
        /// [`CheckpointPolicy::AtMostEveryItems`](super::CheckpointPolicy) counts.
        items: u32,
    },
    /// The handler found that the partition's range has split into `children` (the
    /// source's "partition gone"): it reads no more of it. The host stops the
    /// session, marks the lease with its children once the call has ended, creates
    /// one lease per child from the lease's checkpoint, and only then deletes it.
    Split {
        /// The partition that split.
        lease: LeaseToken,
        /// The session the handler was started with.
        session: Session,
        /// The ranges that replace it, each a partition of its own from now on.
        children: Vec<LeaseToken>,
    },
    /// The handler's call for `session` has ended (returned, or been aborted) after an
    /// [`Output::Stop`], whatever its reason. Until then the session is stopping: the
    /// host does not start the lease again, nor take it back, and a release or a
    /// shutdown waits for it. A lost session that never reports this while the host
    /// still owns the lease makes the host give the lease up after
    /// [`LeaseConfig::stop_timeout`](super::LeaseConfig::stop_timeout).
    Stopped {
        /// The partition.
        lease: LeaseToken,
        /// The session the handler was started with.
        session: Session,
    },
}

/// Something a host asks its driver to do, or tells it.
// As for `Input`: a request carries a whole document, and each output is moved once.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// Send this request to the store and answer with [`Input::Response`].
    Request(StoreRequest),
    /// Start processing a partition. The epoch is a fencing token for the handler's
    /// own side effects; the session identifies this start in handler calls.
    Start {
        /// The partition.
        lease: LeaseToken,
        /// The lease's epoch.
        epoch: Epoch,
        /// This processing session.
        session: Session,
        /// Where processing resumes.
        checkpoint: Option<Checkpoint>,
    },
    /// Stop processing a partition.
    Stop {
        /// The partition.
        lease: LeaseToken,
        /// The epoch it was processed under.
        epoch: Epoch,
        /// The session that ends.
        session: Session,
        /// Why. After [`StopReason::Lost`] processing must end at once (the host
        /// refuses its checkpoints, and a later session of this lease starts at a
        /// higher epoch); after a release or a shutdown the handler may finish its
        /// batch and checkpoint. Either way the driver answers with
        /// [`Input::Stopped`] once the call has ended. A draining session can be told
        /// to stop a second time, with [`StopReason::Lost`], if its authority runs
        /// out first.
        reason: StopReason,
    },
    /// A checkpoint is durably stored; it will never be lost or go backwards.
    Checkpointed {
        /// The partition.
        lease: LeaseToken,
        /// The epoch it was written under.
        epoch: Epoch,
        /// The checkpoint.
        checkpoint: Checkpoint,
    },
    /// A checkpoint could not be stored (it made the lease document too large). The
    /// lease is kept; processing resumes from the last stored checkpoint if it moves.
    CheckpointRejected {
        /// The partition.
        lease: LeaseToken,
        /// The epoch.
        epoch: Epoch,
        /// The checkpoint refused.
        checkpoint: Checkpoint,
        /// The store's answer.
        error: StoreError,
    },
    /// A graceful shutdown has released every lease; the host has nothing left to do.
    ShutdownComplete,
    /// The host will not run in this group (its first read of the table found it
    /// written under settings that cannot coexist with its own): it has begun to shut
    /// down, and ends with [`ShutdownComplete`](Output::ShutdownComplete).
    Refused(super::ConfigError),
}

/// Why processing of a lease stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The host no longer holds the lease, or can no longer prove it does.
    Lost(LossCause),
    /// The lease is being handed over to a host that claimed it.
    Released,
    /// The host is shutting down.
    Shutdown,
    /// The handler reported that the partition split ([`Input::Split`]); its
    /// children take over.
    Split,
}

/// How a lease was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossCause {
    /// Another host owns it now, or its epoch moved on.
    TakenOver,
    /// The lease document is gone.
    Deleted,
    /// No renewal succeeded in time: the authority deadline passed.
    AuthorityLapsed,
    /// Under session liveness, another host fenced (or deleted) this host's heartbeat,
    /// ending the tenure every lease it held hung on.
    SessionFenced,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Lost(LossCause::TakenOver) => f.write_str("lost (taken over)"),
            StopReason::Lost(LossCause::Deleted) => f.write_str("lost (deleted)"),
            StopReason::Lost(LossCause::AuthorityLapsed) => f.write_str("lost (authority lapsed)"),
            StopReason::Lost(LossCause::SessionFenced) => f.write_str("lost (session fenced)"),
            StopReason::Released => f.write_str("released"),
            StopReason::Shutdown => f.write_str("shutdown"),
            StopReason::Split => f.write_str("split"),
        }
    }
}

/// A store request, with the reason the host sends it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoreRequest {
    /// Echo this in the response.
    pub id: RequestId,
    /// Why the host sends it; drivers use it for tracing and fault injection.
    pub intent: Intent,
    /// The operation.
    pub op: Op<Record>,
}

/// Why a host sends a store request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Intent {
    /// Read the whole lease table: every interval under lease liveness; under
    /// session liveness at start-up and when a change in the group calls for it.
    Scan,
    /// Read every host's heartbeat and no lease: session liveness's read each
    /// acquire interval.
    ReadMembers,
    /// Read the whole lease table because the audit is due (session liveness): it
    /// catches whatever the heartbeats did not tell.
    Audit,
    /// Create a missing lease.
    CreateLease,
    /// Take an unowned or expired lease.
    Acquire,
    /// Take a live lease from its owner (CFP).
    Steal,
    /// Record a claim for a handoff.
    Claim,
    /// Renew an owned lease.
    Renew,
    /// Renew an owned lease at a new epoch, after authority lapsed while a handler
    /// call was running: a later session must not share that call's fencing token.
    Resume,
    /// Store a checkpoint (which also renews).
    Checkpoint,
    /// Give a lease up at shutdown.
    Release,
    /// Hand a lease over to its claimant.
    Handoff,
    /// Read a claimant's heartbeat just before handing a lease over to it.
    ConfirmClaim,
    /// Re-read a lease after a conflict or an unknown outcome.
    Reread,
    /// Write or re-read this host's heartbeat.
    Heartbeat,
    /// Delete this host's heartbeat at shutdown.
    Leave,
    /// Read the heartbeat of a host that announced its leave, every
    /// [`LEAVE_POLL`](super::LEAVE_POLL) until it is gone: then its leases are free.
    WatchLeave,
    /// Delete the heartbeat of a host that stopped.
    Retire,
    /// Under session liveness, end a dead host's tenure with a conditional write to
    /// its heartbeat, before taking its leases.
    Fence,
    /// Under lease liveness, free a lease whose owner let it expire, for whichever
    /// host the plan gives it to: an expiry this host watched becomes one every host
    /// can trust at its next read, a newcomer's included.
    Expire,
    /// Mark an owned lease whose range split with the children that replace it.
    Split,
    /// Create the lease of one child of a split, from its parent's checkpoint.
    CreateChild,
    /// Give up the lease of a split range once every child's lease exists: a marked
    /// lease nobody owns is a finished split, kept so that its id is never reused.
    FinishSplit,
    /// Delete the lease of a split range (the known-bad variants: before its
    /// children exist, or once they do).
    DeleteParent,
}

impl Intent {
    /// The intent's name in traces and reports (`create-lease`, `handoff`).
    pub fn name(self) -> &'static str {
        match self {
            Intent::Scan => "scan",
            Intent::ReadMembers => "read-members",
            Intent::Audit => "audit",
            Intent::CreateLease => "create-lease",
            Intent::Acquire => "acquire",
            Intent::Steal => "steal",
            Intent::Claim => "claim",
            Intent::Renew => "renew",
            Intent::Resume => "resume",
            Intent::Checkpoint => "checkpoint",
            Intent::Release => "release",
            Intent::Handoff => "handoff",
            Intent::ConfirmClaim => "confirm-claim",
            Intent::Reread => "reread",
            Intent::Heartbeat => "heartbeat",
            Intent::Leave => "leave",
            Intent::WatchLeave => "watch-leave",
            Intent::Retire => "retire",
            Intent::Fence => "fence",
            Intent::Expire => "expire",
            Intent::Split => "split",
            Intent::CreateChild => "create-child",
            Intent::FinishSplit => "finish-split",
            Intent::DeleteParent => "delete-parent",
        }
    }
}

impl std::fmt::Display for Intent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a store request is spent on, for cost accounting: the split the simulator's
/// report and the runtime's metrics give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    /// Keeping the host's heartbeat (and, under session liveness, its tenure).
    Heartbeat,
    /// Reading the lease table to plan.
    Scan,
    /// Keeping a lease one holds: renewals, resumes and re-reads.
    Renew,
    /// Storing progress.
    Checkpoint,
    /// Creating and taking leases, fencing a dead host's tenure first, and replacing
    /// a split range's lease with its children's.
    Takeover,
    /// Moving a live lease between hosts: claims, their confirmation, the handoff or
    /// release itself.
    Handoff,
    /// Checking and cleaning up: the session audit's reads of the whole table, and
    /// deleting heartbeats of hosts that are gone.
    Audit,
}

impl Purpose {
    /// Every purpose, in report order.
    pub const ALL: [Purpose; 7] = [
        Purpose::Heartbeat,
        Purpose::Scan,
        Purpose::Renew,
        Purpose::Checkpoint,
        Purpose::Takeover,
        Purpose::Handoff,
        Purpose::Audit,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Heartbeat => "heartbeat",
            Purpose::Scan => "scan",
            Purpose::Renew => "renew",
            Purpose::Checkpoint => "checkpoint",
            Purpose::Takeover => "takeover",
            Purpose::Handoff => "handoff",
            Purpose::Audit => "audit",
        }
    }

    /// Whether it is coordination: everything but storing progress.
    pub fn is_protocol(self) -> bool {
        self != Purpose::Checkpoint
    }
}

impl Intent {
    /// What the request is spent on.
    ///
    /// ```
    /// use leasehold_engine::lease::{Intent, Purpose};
    /// assert_eq!(Intent::Fence.purpose(), Purpose::Takeover);
    /// assert!(!Intent::Checkpoint.purpose().is_protocol());
    /// ```
    pub fn purpose(self) -> Purpose {
        match self {
            Intent::Heartbeat | Intent::Leave => Purpose::Heartbeat,
            Intent::Scan | Intent::ReadMembers | Intent::WatchLeave => Purpose::Scan,
            Intent::Renew | Intent::Resume | Intent::Reread => Purpose::Renew,
            Intent::Checkpoint => Purpose::Checkpoint,
            Intent::CreateLease
            | Intent::Acquire
            | Intent::Steal
            | Intent::Fence
            | Intent::Expire
            | Intent::Split
            | Intent::CreateChild
            | Intent::FinishSplit
            | Intent::DeleteParent => Purpose::Takeover,
            Intent::Claim | Intent::ConfirmClaim | Intent::Handoff | Intent::Release => {
                Purpose::Handoff
            }
            Intent::Retire | Intent::Audit => Purpose::Audit,
        }
    }

    /// Whether the request writes a lease on behalf of its owner.
    pub fn is_owner_write(self) -> bool {
        matches!(
            self,
            Intent::Renew
                | Intent::Resume
                | Intent::Checkpoint
                | Intent::Release
                | Intent::Handoff
                | Intent::Split
                | Intent::FinishSplit
        )
    }
}

/// An input the host cannot accept. The host's state is unchanged by it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InputError {
    /// No request with this id is outstanding (a duplicate, or a response from
    /// before a restart).
    UnknownRequest(RequestId),
    /// A checkpoint for a lease this host is not processing in this session, or from
    /// a session that was told the lease is lost.
    NotProcessing {
        /// The partition.
        lease: LeaseToken,
        /// The session the caller gave.
        session: Session,
    },
    /// A split that names no child, or names the lease itself or a child twice.
    InvalidSplit {
        /// The partition.
        lease: LeaseToken,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::UnknownRequest(id) => write!(f, "no request {id} is outstanding"),
            InputError::NotProcessing { lease, session } => write!(
                f,
                "lease {lease} is not being processed in session {session}; the checkpoint is refused"
            ),
            InputError::InvalidSplit { lease } => write!(
                f,
                "a split of lease {lease} must name at least one child, each once, none the lease itself"
            ),
        }
    }
}

impl std::error::Error for InputError {}
