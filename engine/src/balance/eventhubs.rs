//! The Azure Event Hubs event processor's load balancer, in both of its modes.
//!
//! The source algorithm (the Event Hubs SDKs' processor load balancer; this follows the
//! Go SDK's `processor_load_balancer.go`, which the .NET and Java balancers match in
//! outline), in words:
//! 1. Ownerships not renewed within the expiration interval, and partitions with no
//!    ownership or a blank owner, are "unowned or expired". The other ownerships are
//!    grouped by owner; the planning host joins the groups with none.
//! 2. With `P` partitions and `C` such owners, a host must hold at least `P / C`
//!    (integer division) and may hold `max = P / C + 1` when `P mod C > 0`, else
//!    `max = P / C`.
//! 3. A host that holds `max` or more claims nothing. A host at `max − 1` while an extra
//!    partition is possible claims only if some partition is unowned or expired, or
//!    some other owner holds more than `max`.
//! 4. *Balanced* claims one partition per cycle: a random unowned or expired one, else
//!    a random one among the partitions of owners above `max`.
//! 5. *Greedy* claims up to `max − held` partitions in one cycle: random unowned or
//!    expired ones first, then random ones from owners above `max`.
//!
//! The source draws from a random generator; the engine takes no randomness it is not
//! handed, so "random" here is [`super::scatter`]: an order that differs from host to
//! host but is fixed for a given host and lease.

use super::{Action, LeaseStatus, Plan, Reason, TableView, pick, take_free};
use crate::ids::HostId;
use std::collections::HashMap;

/// Which of the two Event Hubs modes plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Balanced,
    Greedy,
}

pub(super) fn plan(mode: Mode, view: &TableView, me: &HostId) -> Plan {
    let leases = &view.leases;
    if leases.is_empty() {
        return Plan::default();
    }
    let mut groups: HashMap<&HostId, Vec<usize>> = HashMap::new();
    let mut free = Vec::new();
    for (li, lease) in leases.iter().enumerate() {
        match (&lease.owner, lease.status) {
            (Some(owner), LeaseStatus::Held) if !owner.is_blank() => {
                groups.entry(owner).or_default().push(li)
            }
            _ => free.push(li),
        }
    }
    let held = groups.entry(me).or_default().len();
    let owners = groups.len();
    let min = leases.len() / owners;
    let extra_possible = !leases.len().is_multiple_of(owners);
    let max = min + usize::from(extra_possible);

    // Partitions of other owners above `max`, each with its owner and that owner's count.
    let above: Vec<(usize, &HostId, usize)> = groups
        .iter()
        .filter(|&(owner, mine)| *owner != me && mine.len() > max)
        .flat_map(|(owner, mine)| mine.iter().map(move |&li| (li, *owner, mine.len())))
        .collect();

    let claim_more = if held >= max {
        false
    } else if extra_possible && held == max - 1 {
        !free.is_empty() || !above.is_empty()
    } else {
        true
    };
    if !claim_more {
        return Plan::default();
    }
    let want = match mode {
        Mode::Balanced => 1,
        Mode::Greedy => max - held,
    };
    let mut actions: Vec<Action> = pick(view, me, &free, want)
        .into_iter()
        .map(|li| take_free(&leases[li]))
        .collect();
    let need = max - held;
    let room = want - actions.len();
    if room > 0 {
        let candidates: Vec<usize> = above.iter().map(|&(li, _, _)| li).collect();
        let owner_of: HashMap<usize, (&HostId, usize)> = above
            .iter()
            .map(|&(li, from, count)| (li, (from, count)))
            .collect();
        actions.extend(pick(view, me, &candidates, room).into_iter().map(|li| {
            let (from, count) = owner_of[&li];
            Action::Take {
                lease: leases[li].token.clone(),
                reason: Reason::Steal {
                    from: from.clone(),
                    count,
                    target: max,
                    need,
                },
            }
        }));
    }
    Plan { actions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{LeaseView, test_lease as lease};
    use crate::time::Now;

    fn view(leases: Vec<LeaseView>) -> TableView {
        TableView {
            leases,
            members: vec![],
            now: Now::default(),
        }
    }

    #[test]
    fn balanced_mode_claims_one_free_partition_per_cycle_and_greedy_claims_up_to_max() {
        let v = view((0..6).map(|p| lease(&p.to_string(), None)).collect());
        let me = HostId::from("me");
        assert_eq!(plan(Mode::Balanced, &v, &me).actions.len(), 1);
        // Alone, the host may hold all six.
        assert_eq!(plan(Mode::Greedy, &v, &me).actions.len(), 6);
    }

    #[test]
    fn a_host_one_below_max_claims_only_if_something_is_free_or_someone_is_above_max() {
        // 5 partitions, 2 owners: min 2, max 3. "me" holds 2, "a" holds 3 (= max).
        let leases = vec![
            lease("1", Some("a")),
            lease("2", Some("a")),
            lease("3", Some("a")),
            lease("4", Some("me")),
            lease("5", Some("me")),
        ];
        let me = HostId::from("me");
        for mode in [Mode::Balanced, Mode::Greedy] {
            assert!(plan(mode, &view(leases.clone()), &me).actions.is_empty());
        }
    }

    #[test]
    fn steals_come_only_from_owners_above_max() {
        // 6 partitions, 2 owners: max 3; "a" holds 6 > 3.
        let v = view((0..6).map(|p| lease(&p.to_string(), Some("a"))).collect());
        let me = HostId::from("me");
        let greedy = plan(Mode::Greedy, &v, &me);
        assert_eq!(greedy.actions.len(), 3);
        assert!(
            greedy
                .takes()
                .all(|(_, r)| matches!(r, Reason::Steal { from, .. } if from.as_str() == "a"))
        );
        assert_eq!(plan(Mode::Balanced, &v, &me).actions.len(), 1);
    }
}
