//! Properties of the balancing strategies, on arbitrary lease tables.
//!
//! Each property is a checker that returns what went wrong; next to each proptest
//! sits a test that feeds the checker a planner known to be bad, to show the checker
//! can fail.

use leasehold_engine::balance::{
    Action, CfpConfig, KclConfig, LeaseStatus, LeaseView, Plan, Reason, Strategy as Balancer,
    TableView,
};
use leasehold_engine::{HostId, LeaseToken, Now};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

type Planner<'a> = &'a dyn Fn(&TableView, &HostId) -> Plan;

fn host(i: usize) -> HostId {
    HostId::from(format!("h{i}"))
}

fn cfp_plan(view: &TableView, me: &HostId) -> Plan {
    Balancer::Cfp(CfpConfig::default()).plan(view, me)
}

fn handoff_plan(view: &TableView, me: &HostId) -> Plan {
    Balancer::Handoff.plan(view, me)
}

fn eh_balanced_plan(view: &TableView, me: &HostId) -> Plan {
    Balancer::EventHubsBalanced.plan(view, me)
}

fn eh_greedy_plan(view: &TableView, me: &HostId) -> Plan {
    Balancer::EventHubsGreedy.plan(view, me)
}

fn kcl_plan(view: &TableView, me: &HostId) -> Plan {
    Balancer::Kcl(KclConfig::default()).plan(view, me)
}

const ALL: [Planner<'static>; 5] = [
    &cfp_plan,
    &handoff_plan,
    &eh_balanced_plan,
    &eh_greedy_plan,
    &kcl_plan,
];

// ---------------------------------------------------------------------------
// A small world of leases, live members and dead hosts, acted on in rounds.

#[derive(Clone, Debug)]
struct World {
    /// (owner, version); the owner may be a dead host.
    leases: Vec<(Option<HostId>, u32)>,
    members: Vec<HostId>,
    claims: BTreeMap<HostId, BTreeSet<LeaseToken>>,
}

fn token(i: usize) -> LeaseToken {
    LeaseToken::from(format!("{i:02}"))
}

impl World {
    fn is_member(&self, h: &HostId) -> bool {
        self.members.contains(h)
    }

    /// The table as `me` sees it: leases of hosts that are gone have expired.
    fn view(&self, me: &HostId) -> TableView {
        let leases = self
            .leases
            .iter()
            .enumerate()
            .map(|(i, (owner, _))| {
                let status = match owner {
                    None => LeaseStatus::Unowned,
                    Some(o) if self.is_member(o) || o == me => LeaseStatus::Held,
                    Some(_) => LeaseStatus::Expired,
                };
                let claimants = self
                    .claims
                    .iter()
                    .filter(|(h, set)| self.is_member(h) && set.contains(&token(i)))
                    .map(|(h, _)| h.clone())
                    .collect();
                LeaseView {
                    token: token(i),
                    owner: owner.clone(),
                    status,
                    claimants,
                }
            })
            .collect();
        TableView {
            leases,
            members: self.members.clone(),
            now: Now::default(),
        }
    }

    /// Applies `me`'s plan, made on a view with lease versions `seen`. Writes are
    /// conditional, as in the store: a lease changed since it was seen is refused.
    fn apply(&mut self, me: &HostId, plan: &Plan, seen: &[u32], moves: &mut [u32]) {
        let index = |t: &LeaseToken| t.as_str().parse::<usize>().unwrap();
        let mut claims = BTreeSet::new();
        for action in &plan.actions {
            match action {
                Action::Take { lease, .. } => {
                    let i = index(lease);
                    if self.leases[i].1 == seen[i] {
                        self.leases[i] = (Some(me.clone()), seen[i] + 1);
                        moves[i] += 1;
                    }
                }
                Action::Claim { lease, .. } => {
                    claims.insert(lease.clone());
                }
                Action::Release { lease, to } => {
                    let i = index(lease);
                    if self.leases[i].1 == seen[i] && self.leases[i].0.as_ref() == Some(me) {
                        self.leases[i] = (Some(to.clone()), seen[i] + 1);
                        moves[i] += 1;
                    }
                }
            }
        }
        self.claims.insert(me.clone(), claims);
    }

    fn versions(&self) -> Vec<u32> {
        self.leases.iter().map(|l| l.1).collect()
    }

    /// Every member plans on the same snapshot; then all writes are applied.
    fn synchronous_round(&mut self, planner: Planner, moves: &mut [u32]) {
        let snapshot = self.clone();
        let seen = self.versions();
        for me in snapshot.members.clone() {
            let plan = planner(&snapshot.view(&me), &me);
            self.apply(&me, &plan, &seen, moves);
        }
    }

    fn counts(&self) -> BTreeMap<HostId, usize> {
        let mut counts: BTreeMap<HostId, usize> =
            self.members.iter().map(|m| (m.clone(), 0)).collect();
        for (owner, _) in &self.leases {
            if let Some(c) = owner.as_ref().and_then(|o| counts.get_mut(o)) {
                *c += 1;
            }
        }
        counts
    }

    fn balanced(&self) -> bool {
        let all_live = self
            .leases
            .iter()
            .all(|(o, _)| o.as_ref().is_some_and(|o| self.is_member(o)));
        let counts: Vec<usize> = self.counts().into_values().collect();
        let spread = counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0);
        all_live && spread <= 1
    }

    /// The fewest moves that reach balance, by brute force over which members get
    /// the larger target.
    fn min_moves(&self) -> usize {
        let p = self.leases.len();
        let h = self.members.len();
        let counts: Vec<usize> = self.counts().into_values().collect();
        let (base, extra) = (p / h, p % h);
        let mut best = 0;
        for mask in 0u32..(1 << h) {
            if mask.count_ones() as usize != extra {
                continue;
            }
            let kept: usize = (0..h)
                .map(|m| counts[m].min(base + usize::from(mask & (1 << m) != 0)))
                .sum();
            best = best.max(kept);
        }
        p - best
    }
}

fn world() -> impl Strategy<Value = World> {
    (1usize..=5, 0usize..=14).prop_flat_map(|(hosts, partitions)| {
        // Owners: none, a member, or one of two dead hosts.
        let owner = (0..hosts + 3).prop_map(move |o| match o {
            0 => None,
            o if o <= hosts => Some(host(o - 1)),
            o => Some(HostId::from(format!("dead{o}"))),
        });
        let claims = proptest::collection::vec(
            proptest::collection::btree_set(0..partitions.max(1), 0..3),
            hosts,
        );
        (proptest::collection::vec(owner, partitions), claims).prop_map(move |(owners, claims)| {
            World {
                leases: owners.into_iter().map(|o| (o, 0)).collect(),
                members: (0..hosts).map(host).collect(),
                claims: claims
                    .into_iter()
                    .enumerate()
                    .map(|(m, set)| {
                        let set = set.into_iter().filter(|&i| i < partitions).map(token);
                        (host(m), set.collect())
                    })
                    .collect(),
            }
        })
    })
}

// ---------------------------------------------------------------------------
// Checkers.

/// Whether a planner takes or claims a live lease its planner already holds.
fn takes_own_live_lease(planner: Planner, view: &TableView, me: &HostId) -> Option<LeaseToken> {
    let plan = planner(view, me);
    plan.takes().find_map(|(lease, _)| {
        let l = view.leases.iter().find(|l| l.token == *lease)?;
        (l.owner.as_ref() == Some(me) && l.status == LeaseStatus::Held).then(|| lease.clone())
    })
}

/// How many leases a plan steals from live owners.
fn steals(plan: &Plan) -> usize {
    plan.takes()
        .filter(|(_, r)| matches!(r, Reason::Steal { .. }))
        .count()
}

/// The one-steal rule of CFP, Event Hubs' balanced mode and KCL's default: at most
/// one steal per cycle, and none while a free or expired lease could be taken instead.
fn one_steal_and_only_when_none_is_free(plan: &Plan, view: &TableView) -> Result<(), String> {
    if steals(plan) > 1 {
        return Err(format!("{} steals in one cycle", steals(plan)));
    }
    let free = view.leases.iter().any(|l| l.status != LeaseStatus::Held);
    if free && steals(plan) > 0 {
        return Err("stole while a free lease existed".into());
    }
    Ok(())
}

/// Event Hubs' cap: a host never plans past `ceil(P / owners)`, counting itself.
fn within_event_hubs_max(plan: &Plan, view: &TableView, me: &HostId) -> Result<(), String> {
    let mut owners: BTreeSet<&HostId> = view
        .leases
        .iter()
        .filter(|l| l.status == LeaseStatus::Held)
        .filter_map(|l| l.owner.as_ref())
        .collect();
    owners.insert(me);
    let held = view
        .leases
        .iter()
        .filter(|l| l.status == LeaseStatus::Held && l.owner.as_ref() == Some(me))
        .count();
    let max = view.leases.len().div_ceil(owners.len());
    let after = held + plan.takes().count();
    // A host already above the maximum (after a scale-out) may keep its surplus.
    if plan.takes().count() > 0 && after > max {
        return Err(format!("would hold {after}, max {max}"));
    }
    Ok(())
}

/// Runs two synchronous rounds; Err says why the result is not a balanced
/// assignment reached with exactly the minimum number of moves.
fn converges_in_two_rounds(planner: Planner, start: &World) -> Result<(), String> {
    let mut w = start.clone();
    let mut moves = vec![0; w.leases.len()];
    w.synchronous_round(planner, &mut moves);
    w.synchronous_round(planner, &mut moves);
    if !w.balanced() {
        return Err(format!("not balanced after 2 rounds: {:?}", w.counts()));
    }
    let total: u32 = moves.iter().sum();
    if total as usize != start.min_moves() {
        return Err(format!("{total} moves, minimum {}", start.min_moves()));
    }
    Ok(())
}

/// Lets members act one at a time in `order` on the latest table, then a few full
/// rounds; Err names a lease that changed owner twice.
fn moves_at_most_once(planner: Planner, start: &World, order: &[usize]) -> Result<(), String> {
    let mut w = start.clone();
    let mut moves = vec![0; w.leases.len()];
    let members = w.members.clone();
    let turns = order
        .iter()
        .map(|i| i % members.len())
        .chain((0..4 * members.len()).map(|i| i % members.len()));
    for m in turns {
        let me = &members[m];
        let plan = planner(&w.view(me), me);
        let seen = w.versions();
        w.apply(me, &plan, &seen, &mut moves);
    }
    match moves.iter().position(|&n| n > 1) {
        Some(i) => Err(format!("lease {i} moved {} times", moves[i])),
        None => Ok(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_strategy_takes_a_live_lease_its_host_already_holds(w in world(), me in 0usize..5) {
        let me = host(me % w.members.len());
        let view = w.view(&me);
        for planner in ALL {
            prop_assert_eq!(takes_own_live_lease(planner, &view, &me), None);
        }
    }

    #[test]
    fn cfp_eh_balanced_and_kcl_steal_at_most_one_lease_and_only_when_none_is_free(
        w in world(),
        me in 0usize..5,
    ) {
        let me = host(me % w.members.len());
        let view = w.view(&me);
        for planner in [&cfp_plan as Planner, &eh_balanced_plan, &kcl_plan] {
            prop_assert_eq!(one_steal_and_only_when_none_is_free(&planner(&view, &me), &view), Ok(()));
        }
    }

    #[test]
    fn event_hubs_balanced_claims_at_most_one_lease_per_cycle(w in world(), me in 0usize..5) {
        let me = host(me % w.members.len());
        prop_assert!(eh_balanced_plan(&w.view(&me), &me).actions.len() <= 1);
    }

    #[test]
    fn event_hubs_never_plans_past_its_maximum(w in world(), me in 0usize..5) {
        let me = host(me % w.members.len());
        let view = w.view(&me);
        for planner in [&eh_balanced_plan as Planner, &eh_greedy_plan] {
            prop_assert_eq!(within_event_hubs_max(&planner(&view, &me), &view, &me), Ok(()));
        }
    }

    #[test]
    fn handoff_balances_any_table_in_two_rounds_with_the_minimum_moves(w in world()) {
        prop_assert_eq!(converges_in_two_rounds(&handoff_plan, &w), Ok(()));
    }

    #[test]
    fn handoff_moves_no_lease_twice_while_membership_is_stable(
        w in world(),
        order in proptest::collection::vec(0usize..5, 0..20),
    ) {
        prop_assert_eq!(moves_at_most_once(&handoff_plan, &w, &order), Ok(()));
    }
}

// ---------------------------------------------------------------------------
// The checkers catch bad planners.

/// Takes every lease not its own, regardless of anything.
fn greedy(view: &TableView, me: &HostId) -> Plan {
    let actions = view
        .leases
        .iter()
        .filter(|l| l.owner.as_ref() != Some(me))
        .map(|l| Action::Take {
            lease: l.token.clone(),
            reason: Reason::Unowned,
        })
        .collect();
    Plan { actions }
}

fn one_owner_world(partitions: usize, hosts: usize) -> World {
    World {
        leases: (0..partitions).map(|_| (Some(host(0)), 0)).collect(),
        members: (0..hosts).map(host).collect(),
        claims: BTreeMap::new(),
    }
}

#[test]
fn the_own_lease_checker_catches_a_planner_that_retakes_its_leases() {
    let w = one_owner_world(3, 2);
    let retake = |view: &TableView, _me: &HostId| Plan {
        actions: vec![Action::Take {
            lease: view.leases[0].token.clone(),
            reason: Reason::Unowned,
        }],
    };
    assert!(takes_own_live_lease(&retake, &w.view(&host(0)), &host(0)).is_some());
}

#[test]
fn the_steal_rule_catches_a_planner_that_steals_many_or_steals_while_leases_are_free() {
    let mut w = one_owner_world(6, 3);
    let me = host(1);
    let view = w.view(&me);
    let err = one_steal_and_only_when_none_is_free(&stealer(&view, &me), &view).unwrap_err();
    assert!(err.contains("steals in one cycle"), "{err}");
    w.leases[0].0 = None;
    let view = w.view(&me);
    let mut one = stealer(&view, &me);
    one.actions.truncate(1);
    let err = one_steal_and_only_when_none_is_free(&one, &view).unwrap_err();
    assert!(err.contains("free"), "{err}");
}

#[test]
fn the_maximum_check_catches_a_planner_that_takes_everything() {
    let w = one_owner_world(6, 3);
    let me = host(1);
    let view = w.view(&me);
    assert!(within_event_hubs_max(&greedy(&view, &me), &view, &me).is_err());
}

/// Steals two leases from the first live owner it finds, whatever else is free.
fn stealer(view: &TableView, me: &HostId) -> Plan {
    let actions = view
        .leases
        .iter()
        .filter(|l| l.status == LeaseStatus::Held && l.owner.as_ref() != Some(me))
        .take(2)
        .map(|l| Action::Take {
            lease: l.token.clone(),
            reason: Reason::Steal {
                from: l.owner.clone().expect("held leases have owners"),
                count: 0,
                target: 0,
                need: 2,
            },
        })
        .collect();
    Plan { actions }
}

#[test]
fn cfp_does_not_balance_a_scale_out_in_two_rounds() {
    // One steal per cycle: 4 hosts joining a host with 12 leases need many cycles.
    let w = one_owner_world(12, 4);
    let verdict = converges_in_two_rounds(&cfp_plan, &w);
    assert!(verdict.unwrap_err().contains("not balanced"));
    assert_eq!(converges_in_two_rounds(&handoff_plan, &w), Ok(()));
}

#[test]
fn the_move_counter_catches_a_planner_that_moves_leases_back_and_forth() {
    let w = one_owner_world(2, 2);
    assert!(moves_at_most_once(&greedy, &w, &[1, 0, 1]).is_err());
}

#[test]
fn the_minimum_is_counted_against_the_best_choice_of_larger_targets() {
    // h0 holds 3, h1 holds 2 of 5: already balanced, nothing needs to move.
    let mut w = one_owner_world(5, 2);
    w.leases[3].0 = Some(host(1));
    w.leases[4].0 = Some(host(1));
    assert_eq!(w.min_moves(), 0);
    assert!(w.balanced());
    // Every lease of a dead host must move.
    w.leases[0].0 = Some(HostId::from("dead"));
    assert_eq!(w.min_moves(), 1);
}

/// The examples `cfp` must reproduce, as a running .NET processor decides them.
#[test]
fn cfp_reproduces_the_change_feed_processors_decisions() {
    let me = HostId::from("self");
    let lease = |t: &str, owner: Option<&str>, status| LeaseView {
        token: LeaseToken::from(t),
        owner: owner.map(HostId::from),
        status,
        claimants: vec![],
    };
    let table = |leases| TableView {
        leases,
        members: vec![],
        now: Now::default(),
    };
    let taken = |view: TableView| -> Vec<String> {
        cfp_plan(&view, &me)
            .takes()
            .map(|(l, _)| l.to_string())
            .collect()
    };
    use LeaseStatus::{Expired, Held, Unowned};
    assert_eq!(
        taken(table(vec![
            lease("1", None, Unowned),
            lease("2", None, Unowned)
        ])),
        ["1", "2"]
    );
    let owned = |t: &str| lease(t, Some("owner 1"), Held);
    assert_eq!(
        taken(table(vec![
            owned("1"),
            owned("2"),
            owned("3"),
            lease("4", Some("owner 1"), Expired)
        ])),
        ["4"]
    );
    let mine = |t: &str| lease(t, Some("self"), Held);
    let a = || vec![owned("A1"), owned("A2"), owned("A3"), owned("A4")];
    let two_mine = [a(), vec![mine("B1"), mine("B2")]].concat();
    assert_eq!(taken(table(two_mine)), ["A1"]);
    let three_mine = [a(), vec![mine("B1"), mine("B2"), mine("B3")]].concat();
    assert_eq!(taken(table(three_mine)), Vec::<String>::new());
}
