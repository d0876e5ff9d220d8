//! The `handoff` strategy: every host computes the same global assignment from the
//! same view, and acts only on its own part of it.
//!
//! - Members are the hosts with a live heartbeat, the owners of live leases, and the
//!   planner itself.
//! - With `P` leases and `H` members, `P mod H` members get `ceil(P/H)` and the rest
//!   `floor(P/H)`. The larger targets go first to members that already hold at
//!   least `ceil(P/H)`, then by id. That maximises the leases that stay put, so the
//!   number of moves is the minimum possible.
//! - Free leases (unowned, then expired) and the surplus of over-target members go to
//!   under-target members in rank order. Ranks cannot change as leases move this
//!   way, which is what keeps targets stable from one cycle to the next.
//! - Surplus leases move by handoff: the taker claims, the owner releases to the
//!   claimant. An owner honours a claim only if its own plan assigns that lease to
//!   that claimant. Existing claims are honoured first, so a plan never reshuffles a
//!   handoff already under way.

use super::{Action, LeaseStatus, Plan, Reason, TableView};
use crate::ids::HostId;
use std::collections::HashMap;

/// The members, by `count` index (members in id order, each holding `count[m]` of
/// `leases`), in rank order, and each one's target.
///
/// Members holding at least ceil(P/H) rank first, then by id. A larger target saves
/// a move only for a member that holds that many; among the others it changes
/// nothing, so their counts must not matter: counts change as leases move, and a
/// rank that followed them would flip targets mid-rebalance.
pub(crate) fn ranked_targets(count: &[usize], leases: usize) -> (Vec<usize>, Vec<usize>) {
    let hosts = count.len().max(1);
    let base = leases / hosts;
    let full = |m: usize| count[m] > base;
    let mut ranked: Vec<usize> = (0..count.len()).collect();
    ranked.sort_by_key(|&m| (!full(m), m));
    let mut target = vec![base; count.len()];
    for &m in ranked.iter().take(leases % hosts) {
        target[m] += 1;
    }
    (ranked, target)
}

pub(super) fn plan(view: &TableView, me: &HostId) -> Plan {
    let leases = &view.leases;
    if leases.is_empty() {
        return Plan::default();
    }
    let held_owner = |li: usize| match (&leases[li].owner, leases[li].status) {
        (Some(owner), LeaseStatus::Held) => Some(owner),
        _ => None,
    };

    // Each distinct host once, then sorted by id: sorting every lease's owner would
    // cost O(P log P) string comparisons. The map is only looked up, never
    // iterated, so its order cannot leak into the plan.
    let mut seen: HashMap<&HostId, usize> = HashMap::new();
    let mut distinct: Vec<&HostId> = Vec::new();
    let mut intern = |host| {
        *seen.entry(host).or_insert_with(|| {
            distinct.push(host);
            distinct.len() - 1
        })
    };
    view.members.iter().chain([me]).for_each(|h| {
        intern(h);
    });
    // One pass over the leases: the table can be large, and every pass over it is
    // memory-bound.
    let (mut unowned, mut expired) = (Vec::new(), Vec::new());
    let mut has_claims = vec![false; leases.len()];
    let first_seen: Vec<Option<usize>> = (0..leases.len())
        .map(|li| {
            has_claims[li] = !leases[li].claimants.is_empty();
            let owner = held_owner(li);
            if owner.is_none() {
                match leases[li].status {
                    LeaseStatus::Expired => expired.push(li),
                    _ => unowned.push(li),
                }
            }
            owner.map(&mut intern)
        })
        .collect();
    let mut by_id: Vec<usize> = (0..distinct.len()).collect();
    by_id.sort_by(|&a, &b| distinct[a].cmp(distinct[b]));
    let mut position = vec![0; distinct.len()];
    for (pos, &d) in by_id.iter().enumerate() {
        position[d] = pos;
    }
    let members: Vec<&HostId> = by_id.iter().map(|&d| distinct[d]).collect();
    let hosts = members.len();
    let owner_of: Vec<Option<usize>> = first_seen.iter().map(|s| s.map(|d| position[d])).collect();
    let index: HashMap<&HostId, usize> = members.iter().enumerate().map(|(i, m)| (*m, i)).collect();

    let mut owned: Vec<Vec<usize>> = vec![Vec::new(); hosts];
    for (li, owner) in owner_of.iter().enumerate() {
        if let Some(o) = owner {
            owned[*o].push(li);
        }
    }
    let count: Vec<usize> = owned.iter().map(Vec::len).collect();

    // Members are sorted by id, so index order is id order.
    let (ranked, target) = ranked_targets(&count, leases.len());
    let mut rank = vec![0; hosts];
    for (r, &m) in ranked.iter().enumerate() {
        rank[m] = r;
    }
    let mut left: Vec<usize> = (0..hosts)
        .map(|m| target[m].saturating_sub(count[m]))
        .collect();
    // The best-ranked member that claims lease `li` and still needs leases.
    let claimant = |li: usize, left: &[usize]| {
        if !has_claims[li] {
            return None;
        }
        let owner = owner_of[li];
        leases[li]
            .claimants
            .iter()
            .filter_map(|c| index.get(c).copied())
            .filter(|&c| left[c] > 0 && Some(c) != owner)
            .min_by_key(|&c| rank[c])
    };
    let claimed = |li: usize| has_claims[li];

    // Which leases leave each over-target member: those claimed by a member that
    // needs them, then unclaimed ones, then the rest (latest listed first).
    let mut surplus: Vec<usize> = Vec::new();
    for &v in &ranked {
        let Some(excess) = count[v].checked_sub(target[v]).filter(|&e| e > 0) else {
            continue;
        };
        let wanted = |li: &usize| claimant(*li, &left).is_some();
        let first = owned[v].iter().copied().filter(wanted);
        let unclaimed = owned[v].iter().rev().copied().filter(|&li| !claimed(li));
        let rest = owned[v]
            .iter()
            .rev()
            .copied()
            .filter(|&li| claimed(li) && !wanted(&li));
        surplus.extend(first.chain(unclaimed).chain(rest).take(excess));
    }

    let mut assigned: Vec<(usize, usize)> = Vec::new();
    let mut placed = vec![false; surplus.len()];
    for (si, &li) in surplus.iter().enumerate() {
        if let Some(c) = claimant(li, &left) {
            left[c] -= 1;
            assigned.push((li, c));
            placed[si] = true;
        }
    }
    let needy: Vec<usize> = ranked.iter().copied().filter(|&m| left[m] > 0).collect();
    let mut cursor = 0;
    let mut next_needy = |left: &mut Vec<usize>| {
        while cursor < needy.len() && left[needy[cursor]] == 0 {
            cursor += 1;
        }
        let m = *needy.get(cursor)?;
        left[m] -= 1;
        Some(m)
    };
    for li in unowned.into_iter().chain(expired) {
        let Some(m) = next_needy(&mut left) else {
            break;
        };
        assigned.push((li, m));
    }
    for (si, &li) in surplus.iter().enumerate() {
        if !placed[si] {
            let Some(m) = next_needy(&mut left) else {
                break;
            };
            assigned.push((li, m));
        }
    }

    let me_at = index[me];
    let (mut takes, mut claims, mut releases) = (Vec::new(), Vec::new(), Vec::new());
    for &(li, to) in &assigned {
        // Most of the plan is other hosts' business; skip it before touching the lease.
        if to != me_at && owner_of[li] != Some(me_at) {
            continue;
        }
        let lease = &leases[li];
        let token = lease.token.clone();
        match (owner_of[li], to == me_at) {
            (None, true) => takes.push(Action::Take {
                lease: token,
                reason: match &lease.owner {
                    Some(owner) if lease.status == LeaseStatus::Expired => Reason::Expired {
                        owner: owner.clone(),
                    },
                    _ => Reason::Unowned,
                },
            }),
            (Some(from), true) => claims.push(Action::Claim {
                lease: token,
                reason: Reason::Handoff {
                    from: members[from].clone(),
                    count: count[from],
                    target: target[from],
                },
            }),
            (Some(from), false) if from == me_at && lease.claimants.contains(members[to]) => {
                releases.push(Action::Release {
                    lease: token,
                    to: members[to].clone(),
                });
            }
            _ => {}
        }
    }
    takes.extend(claims);
    takes.extend(releases);
    Plan { actions: takes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::LeaseView;
    use crate::ids::LeaseToken;
    use crate::time::Now;

    fn lease(token: &str, owner: Option<&str>, status: LeaseStatus) -> LeaseView {
        LeaseView {
            token: LeaseToken::from(token),
            owner: owner.map(HostId::from),
            status,
            claimants: vec![],
        }
    }

    fn view(leases: Vec<LeaseView>, members: &[&str]) -> TableView {
        TableView {
            leases,
            members: members.iter().map(|m| HostId::from(*m)).collect(),
            now: Now::default(),
        }
    }

    fn actions(plan: &Plan) -> Vec<String> {
        plan.actions
            .iter()
            .map(|a| match a {
                Action::Take { lease, reason } => format!("take {lease} ({reason})"),
                Action::Claim { lease, reason } => format!("claim {lease} ({reason})"),
                Action::Release { lease, to } => format!("release {lease} to {to}"),
            })
            .collect()
    }

    #[test]
    fn a_new_host_that_owns_nothing_claims_its_share_in_one_cycle() {
        use LeaseStatus::Held;
        let leases = (1..=4)
            .map(|i| lease(&i.to_string(), Some("a"), Held))
            .collect();
        let v = view(leases, &["a", "b"]);
        let plan = plan(&v, &HostId::from("b"));
        assert_eq!(
            actions(&plan),
            [
                "claim 4 (handoff from a (4 > target 2))",
                "claim 3 (handoff from a (4 > target 2))"
            ]
        );
        // The owner, seeing no claims yet, does nothing.
        assert!(super::plan(&v, &HostId::from("a")).actions.is_empty());
    }

    #[test]
    fn an_owner_hands_over_exactly_the_claimed_surplus() {
        use LeaseStatus::Held;
        let mut leases: Vec<LeaseView> = (1..=4)
            .map(|i| lease(&i.to_string(), Some("a"), Held))
            .collect();
        leases[3].claimants = vec![HostId::from("b")];
        leases[0].claimants = vec![HostId::from("gone")];
        let v = view(leases, &["a", "b"]);
        // A claim by a host that is not a member is ignored.
        assert_eq!(actions(&plan(&v, &HostId::from("a"))), ["release 4 to b"]);
        assert_eq!(
            actions(&plan(&v, &HostId::from("b"))),
            [
                "claim 4 (handoff from a (4 > target 2))",
                "claim 3 (handoff from a (4 > target 2))"
            ]
        );
    }

    #[test]
    fn free_leases_fill_hosts_in_need_in_rank_order() {
        use LeaseStatus::{Expired, Held, Unowned};
        let leases = vec![
            lease("1", Some("b"), Held),
            lease("2", None, Unowned),
            lease("3", Some("dead"), Expired),
        ];
        let v = view(leases, &["a", "b"]);
        // Nobody holds ceil(3/2) = 2 yet, so ranks go by id: a gets the larger target
        // and both free leases, unowned first. Either split costs two moves.
        assert!(plan(&v, &HostId::from("b")).actions.is_empty());
        assert_eq!(
            actions(&plan(&v, &HostId::from("a"))),
            ["take 2 (unowned)", "take 3 (expired)"]
        );
    }
}
