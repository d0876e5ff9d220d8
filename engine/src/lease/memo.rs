//! What the group looked like to a host's last plan: the part of a host that says
//! whether a walk of the table can be skipped (`host/replan.rs` says why and when).

use super::membership::{Member, Membership};
use crate::expiry::ExpiryPolicy;
use crate::ids::{HostId, LeaseToken, Tenure};
use crate::time::Now;

/// What the group looked like to the last plan, kept only when that plan asked for
/// nothing and no lease's verdict could change with time alone (no lease expires by
/// its own document, none waits on a tenure it cannot judge yet).
///
/// A memo, not state: it says whether a walk can be skipped, never what a walk
/// finds, so hosts that differ only in it behave alike, and the host's equality and
/// hashing (the model checker's states) leave it out, as they leave out the agenda.
#[derive(Clone, Debug, Default)]
pub(super) struct PlanMemo {
    shape: Option<GroupShape>,
    plans: Plans,
}

/// How a host has made its plans in this life: by walking its whole view of the
/// lease table, or by finding that nothing a plan reads had changed since the last
/// one, which asked for nothing. In a steady group nearly every plan is reused; a
/// walk costs one visit per lease.
///
/// ```
/// use leasehold_engine::lease::{LeaseConfig, LeaseHost};
/// use leasehold_engine::{Incarnation, LeaseToken};
///
/// let config = LeaseConfig {
///     partitions: vec![LeaseToken::from("0")],
///     ..LeaseConfig::default()
/// };
/// let host = LeaseHost::new("h0".into(), config, Incarnation(0)).unwrap();
/// assert_eq!(host.plans().walked, 0);
/// assert_eq!(host.plans().reused, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plans {
    /// Plans made by walking every lease.
    pub walked: u64,
    /// Plans found unchanged without a walk.
    pub reused: u64,
}

/// What a plan's verdicts and shares read of the group, beside the leases.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupShape {
    tenure: Option<Tenure>,
    published: Vec<LeaseToken>,
    members: Vec<MemberShape>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct MemberShape {
    host: HostId,
    tenure: Option<Tenure>,
    fenced: bool,
    alive: bool,
    claims: Vec<LeaseToken>,
}

impl MemberShape {
    fn of(m: &Member, expiry: &ExpiryPolicy, now: Now) -> MemberShape {
        MemberShape {
            host: m.doc.host.clone(),
            tenure: m.doc.tenure,
            fenced: m.is_fenced(),
            alive: m.is_alive(expiry, now),
            claims: m.doc.claims.clone(),
        }
    }

    fn is(&self, m: &Member, expiry: &ExpiryPolicy, now: Now) -> bool {
        self.host == m.doc.host
            && self.tenure == m.doc.tenure
            && self.fenced == m.is_fenced()
            && self.alive == m.is_alive(expiry, now)
            && self.claims == m.doc.claims
    }
}

impl PlanMemo {
    /// How the host has made its plans in this life.
    pub(super) fn plans(&self) -> Plans {
        self.plans
    }

    /// A plan found unchanged without a walk.
    pub(super) fn reused(&mut self) {
        self.plans.reused += 1;
    }

    /// A plan made by a walk; the group as it saw it is kept if that plan may be
    /// `reusable`.
    pub(super) fn walked(
        &mut self,
        membership: &Membership,
        expiry: &ExpiryPolicy,
        now: Now,
        reusable: bool,
    ) {
        self.shape = reusable.then(|| GroupShape {
            tenure: membership.beat.tenure(),
            published: membership.beat.published().to_vec(),
            members: membership
                .members()
                .map(|m| MemberShape::of(m, expiry, now))
                .collect(),
        });
        self.plans.walked += 1;
    }

    /// Whether what a plan reads of the group is as the kept plan saw it.
    pub(super) fn group_unchanged(
        &self,
        membership: &Membership,
        expiry: &ExpiryPolicy,
        now: Now,
    ) -> bool {
        let Some(shape) = &self.shape else {
            return false;
        };
        shape.tenure == membership.beat.tenure()
            && shape.published == membership.beat.published()
            && shape.members.len() == membership.members().count()
            && shape
                .members
                .iter()
                .zip(membership.members())
                .all(|(s, m)| s.is(m, expiry, now))
    }
}
