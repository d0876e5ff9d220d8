//! The Kinesis Client Library 2.x lease taker (`DynamoDBLeaseTaker`).
//!
//! The source algorithm, in words:
//! 1. Leases not renewed within the failover time, and leases with no owner, are
//!    "available". Workers are the owners of the other leases; the planning host joins
//!    them with zero if it owns none.
//! 2. With `L` leases and `W` workers the target is 1 when `W ≥ L`, else `ceil(L/W)`,
//!    capped at `maxLeasesForWorker`.
//! 3. A worker at or above its target takes nothing. Otherwise it needs
//!    `target − held`, and if any lease is available it takes as many available leases
//!    as it needs (shuffled), and steals nothing.
//! 4. Only when none is available does it steal, and only from the most loaded worker:
//!    `min(need, most − target)` leases, but 1 when that is 0 and it needs more than
//!    one, capped at `maxLeasesToStealAtOneTime` (default 1). So a worker short by
//!    exactly one never steals from a worker that is only at target.
//!
//! The source shuffles with a random generator; here the order is
//! [`super::scatter`], which differs from host to host but takes no randomness.

use super::{Action, KclConfig, LeaseStatus, Plan, Reason, TableView, pick, take_free};
use crate::ids::HostId;
use std::collections::HashMap;

pub(super) fn plan(config: &KclConfig, view: &TableView, me: &HostId) -> Plan {
    let leases = &view.leases;
    if leases.is_empty() {
        return Plan::default();
    }
    let mut workers: HashMap<&HostId, Vec<usize>> = HashMap::new();
    let mut available = Vec::new();
    for (li, lease) in leases.iter().enumerate() {
        match (&lease.owner, lease.status) {
            (Some(owner), LeaseStatus::Held) if !owner.is_blank() => {
                workers.entry(owner).or_default().push(li)
            }
            _ => available.push(li),
        }
    }
    let held = workers.entry(me).or_default().len();
    let mut target = if workers.len() >= leases.len() {
        1
    } else {
        leases.len().div_ceil(workers.len())
    };
    if config.max_leases_for_worker > 0 {
        target = target.min(config.max_leases_for_worker as usize);
    }
    if held >= target {
        return Plan::default();
    }
    let need = target - held;

    if !available.is_empty() {
        let actions = pick(view, me, &available, need)
            .into_iter()
            .map(|li| take_free(&leases[li]))
            .collect();
        return Plan { actions };
    }

    // The most loaded worker; the source keeps the first maximum of a hash map's
    // order, which is arbitrary, so ties go to the smallest id to stay deterministic.
    let Some((victim, theirs)) = workers
        .iter()
        .filter(|(owner, _)| **owner != me)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| b.0.cmp(a.0)))
    else {
        return Plan::default();
    };
    let most = theirs.len();
    if most < target {
        return Plan::default();
    }
    let mut steal = need.min(most - target);
    if need > 1 && steal == 0 {
        steal = 1;
    }
    steal = steal.min(config.max_leases_to_steal_at_one_time.max(1) as usize);
    let actions = pick(view, me, theirs, steal)
        .into_iter()
        .map(|li| Action::Take {
            lease: leases[li].token.clone(),
            reason: Reason::Steal {
                from: (*victim).clone(),
                count: most,
                target,
                need,
            },
        })
        .collect();
    Plan { actions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{LeaseView, test_lease as lease};
    use crate::time::Now;

    fn plan_for(leases: Vec<LeaseView>, config: KclConfig) -> Plan {
        let view = TableView {
            leases,
            members: vec![],
            now: Now::default(),
        };
        plan(&config, &view, &HostId::from("me"))
    }

    #[test]
    fn a_worker_takes_every_available_lease_it_needs_at_once() {
        let leases = (0..8).map(|p| lease(&p.to_string(), None)).collect();
        assert_eq!(plan_for(leases, KclConfig::default()).actions.len(), 8);
    }

    #[test]
    fn a_worker_short_by_exactly_one_does_not_steal_from_a_worker_at_target() {
        // 5 leases, 2 workers: target 3. "a" holds 3 (= target), "me" holds 2.
        let leases = vec![
            lease("1", Some("a")),
            lease("2", Some("a")),
            lease("3", Some("a")),
            lease("4", Some("me")),
            lease("5", Some("me")),
        ];
        assert!(plan_for(leases, KclConfig::default()).actions.is_empty());
    }

    #[test]
    fn a_worker_steals_one_lease_from_the_most_loaded_worker_by_default() {
        let mut leases: Vec<_> = (0..6).map(|p| lease(&format!("a{p}"), Some("a"))).collect();
        leases.extend((0..3).map(|p| lease(&format!("b{p}"), Some("b"))));
        let plan = plan_for(leases.clone(), KclConfig::default());
        let taken: Vec<_> = plan.takes().collect();
        assert_eq!(taken.len(), 1);
        assert!(matches!(taken[0].1, Reason::Steal { from, .. } if from.as_str() == "a"));
        // Raising maxLeasesToStealAtOneTime lets it take min(need, most − target).
        let config = KclConfig {
            max_leases_to_steal_at_one_time: 5,
            ..KclConfig::default()
        };
        // 9 leases, 3 workers: target 3; "a" is 3 over, "me" needs 3.
        assert_eq!(plan_for(leases, config).actions.len(), 3);
    }

    #[test]
    fn max_leases_for_worker_caps_the_target() {
        let leases = (0..8).map(|p| lease(&p.to_string(), None)).collect();
        let config = KclConfig {
            max_leases_for_worker: 2,
            ..KclConfig::default()
        };
        assert_eq!(plan_for(leases, config).actions.len(), 2);
    }
}
