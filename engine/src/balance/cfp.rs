//! A port of the .NET v3 SDK's `EqualPartitionsBalancingStrategy`, faithful down to its
//! tie-breaks, so that leasehold decides as a running .NET processor would.
//!
//! The source algorithm, in words:
//! 1. Workers are the owners of non-expired leases, counted in order of first
//!    appearance; the planning host is added last, with zero, if it owns none.
//! 2. Leases with a blank owner or an expired timestamp are "expired".
//! 3. The target is `ceil(P/W)` (or 1 when `P ≤ W`), clamped by max, then by min.
//! 4. If the host needs leases and some are expired, it takes up to `need` of them in
//!    list order. Otherwise it steals one lease: from the worker with the most leases
//!    (the *last* such worker on ties), if that count exceeds `target − 1` when more
//!    than one lease is needed, or `target` when exactly one is; the victim's first
//!    lease in list order (owner compared case-insensitively).

use super::{Action, CfpConfig, LeaseStatus, Plan, Reason, TableView, take_free};
use crate::ids::HostId;
use std::collections::HashMap;

pub(super) fn plan(config: &CfpConfig, view: &TableView, me: &HostId) -> Plan {
    let total = view.leases.len();
    if total == 0 {
        return Plan::default();
    }
    // Workers in first-appearance order; the map only indexes into the vector, so
    // its iteration order never matters.
    let mut workers: Vec<(&HostId, usize)> = Vec::new();
    let mut index: HashMap<&HostId, usize> = HashMap::new();
    let mut expired = Vec::new();
    for lease in &view.leases {
        match (&lease.owner, lease.status) {
            (Some(owner), LeaseStatus::Held) if !owner.is_blank() => {
                let slot = *index.entry(owner).or_insert_with(|| {
                    workers.push((owner, 0));
                    workers.len() - 1
                });
                workers[slot].1 += 1;
            }
            _ => expired.push(lease),
        }
    }
    let mine = match index.get(me) {
        Some(&slot) => workers[slot].1,
        None => {
            workers.push((me, 0));
            0
        }
    };
    let target = target(config, total, workers.len());
    if mine >= target {
        return Plan::default();
    }
    let need = target - mine;

    if !expired.is_empty() {
        let actions = expired.into_iter().take(need).map(take_free).collect();
        return Plan { actions };
    }

    // The last worker with the largest count wins ties (`<=` in the source).
    let (victim, count) = workers.iter().fold(
        (me, 0),
        |best, &(w, c)| if best.1 <= c { (w, c) } else { best },
    );
    let threshold = if need > 1 { target - 1 } else { target };
    if count <= threshold {
        return Plan::default();
    }
    let stolen = view.leases.iter().find(|lease| {
        lease
            .owner
            .as_ref()
            .is_some_and(|o| same_ignoring_case(o.as_str(), victim.as_str()))
    });
    let actions = stolen
        .map(|lease| Action::Take {
            lease: lease.token.clone(),
            reason: Reason::Steal {
                from: victim.clone(),
                count,
                target,
                need,
            },
        })
        .into_iter()
        .collect();
    Plan { actions }
}

fn target(config: &CfpConfig, partitions: usize, workers: usize) -> usize {
    let mut target = if partitions > workers {
        partitions.div_ceil(workers)
    } else {
        1
    };
    let max = config.max_leases as usize;
    let min = config.min_leases as usize;
    if max > 0 && target > max {
        target = max;
    }
    if min > 0 && target < min {
        target = min;
    }
    target
}

/// .NET's `OrdinalIgnoreCase`, approximated by comparing upper-cased characters.
fn same_ignoring_case(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_uppercase)
        .eq(b.chars().flat_map(char::to_uppercase))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::LeaseView;
    use crate::ids::LeaseToken;
    use crate::time::Now;

    fn held(token: &str, owner: &str) -> LeaseView {
        LeaseView {
            token: LeaseToken::from(token),
            owner: Some(HostId::from(owner)),
            status: LeaseStatus::Held,
            claimants: vec![],
        }
    }

    fn view(leases: Vec<LeaseView>) -> TableView {
        TableView {
            leases,
            members: vec![],
            now: Now::default(),
        }
    }

    fn taken(plan: &Plan) -> Vec<String> {
        plan.takes().map(|(l, r)| format!("{l} {r}")).collect()
    }

    #[test]
    fn the_target_is_one_when_hosts_outnumber_partitions_and_is_clamped_by_max_then_min() {
        let c = |min, max| CfpConfig {
            min_leases: min,
            max_leases: max,
        };
        assert_eq!(target(&c(0, 0), 2, 5), 1);
        assert_eq!(target(&c(0, 0), 7, 2), 4);
        assert_eq!(target(&c(0, 3), 7, 2), 3);
        // min is applied after max, so it wins when they disagree.
        assert_eq!(target(&c(5, 3), 7, 2), 5);
    }

    #[test]
    fn on_ties_the_last_largest_owner_in_first_appearance_order_is_the_victim() {
        let v = view(vec![
            held("a1", "A"),
            held("b1", "B"),
            held("a2", "A"),
            held("b2", "B"),
        ]);
        let plan = plan(&CfpConfig::default(), &v, &HostId::from("me"));
        assert_eq!(taken(&plan), ["b1 steal from B (2 >= target 2)"]);
    }

    #[test]
    fn the_victims_lease_is_found_ignoring_case() {
        let mut v = view(vec![held("x", "a"), held("y", "A"), held("z", "A")]);
        v.leases.push(held("w", "A"));
        // Counts are case-sensitive ("a":1, "A":3) but the stolen lease is the first
        // whose owner matches "A" ignoring case: "x".
        let plan = plan(&CfpConfig::default(), &v, &HostId::from("me"));
        assert_eq!(taken(&plan), ["x steal from A (3 >= target 2)"]);
    }

    #[test]
    fn a_host_short_by_one_steals_only_from_an_owner_above_target() {
        let leases = vec![held("1", "A"), held("2", "A"), held("3", "me")];
        let plan = plan(&CfpConfig::default(), &view(leases), &HostId::from("me"));
        assert!(plan.actions.is_empty(), "{plan:?}");
    }
}
