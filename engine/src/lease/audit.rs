//! What a lease write the store accepted must never have done: the ground truth every
//! driver that watches the store (the model checker, the simulator) judges writes by,
//! written once so that they cannot disagree.

use super::{Intent, LeaseDocument};
use crate::ids::HostId;

/// A rule an applied lease write broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteFault {
    /// The epoch went down, or the owner changed without the epoch going up: the epoch
    /// no longer fences the former owner.
    EpochNotRaised,
    /// A write on behalf of an owner succeeded although the writer did not own the
    /// version it replaced at the epoch it wrote under.
    StaleOwnerWrite,
    /// The stored checkpoint went back.
    CheckpointBack,
}

/// The rules `writer`'s write for `intent`, which replaced `before` with `after`,
/// broke. `position` orders checkpoints, which the engine itself treats as opaque.
///
/// ```
/// use leasehold_engine::lease::{Intent, LeaseDocument, WriteFault, audit_write};
/// use leasehold_engine::{Epoch, HostId, LeaseToken, WallTime};
///
/// let mut before = LeaseDocument::new("p", LeaseToken::from("0"), WallTime(0));
/// before.owner = Some(HostId::from("a"));
/// before.epoch = Epoch(3);
/// let mut after = before.clone();
/// after.owner = Some(HostId::from("b"));
/// let position = |_: &LeaseDocument| 0;
/// // A takeover that kept the epoch: the epoch no longer fences `a`.
/// let faults = audit_write(Intent::Acquire, &HostId::from("b"), &before, &after, position);
/// assert_eq!(faults, [WriteFault::EpochNotRaised]);
/// // A renewal by `a` at its own epoch is fine.
/// let renewal = audit_write(Intent::Renew, &HostId::from("a"), &before, &before, position);
/// assert!(renewal.is_empty());
/// ```
pub fn audit_write(
    intent: Intent,
    writer: &HostId,
    before: &LeaseDocument,
    after: &LeaseDocument,
    position: impl Fn(&LeaseDocument) -> u64,
) -> Vec<WriteFault> {
    let mut faults = Vec::new();
    if after.epoch < before.epoch || (after.owner != before.owner && after.epoch <= before.epoch) {
        faults.push(WriteFault::EpochNotRaised);
    }
    if intent.is_owner_write() {
        // These raise the epoch the writer owned the lease at; the others keep it.
        let raises = matches!(
            intent,
            Intent::Release | Intent::Handoff | Intent::Resume | Intent::FinishSplit
        );
        let owned_at = if raises {
            after.epoch.0.checked_sub(1)
        } else {
            Some(after.epoch.0)
        };
        if !before.is_owned_by(writer) || owned_at != Some(before.epoch.0) {
            faults.push(WriteFault::StaleOwnerWrite);
        }
    }
    if position(after) < position(before) {
        faults.push(WriteFault::CheckpointBack);
    }
    faults
}
