//! Exhaustive checks of the partition-lease protocol at the bounds `cargo test` can
//! afford, the known-bad variants that must break it, and checks that the liveness
//! bounds are tight.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_engine::ExpiryRule;
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::Liveness;
use leasehold_model::PartitionReport;
use leasehold_model::check::{self, Options, Outcome, Search, Stop};
use leasehold_model::{Bounds, Bug, KnownBad, PartitionModel, properties as p, trace};
use std::time::Duration;

fn exhaustive(model: &PartitionModel) -> PartitionReport {
    let options = Options {
        search: Search::Dfs,
        threads: 2,
        ..Options::default()
    };
    let report = check::check(model, &options, Duration::from_secs(60), |_| {});
    println!(
        "{:?}\n  {} states, {} unique, depth {}, {:.1} s",
        model.bounds,
        report.progress.states,
        report.progress.unique,
        report.progress.depth,
        report.progress.seconds
    );
    println!("  engine transitions {:?}", model.transitions.stats());
    for v in &report.verdicts {
        println!("  {:<15} {}", v.outcome.word(), v.property);
    }
    report
}

fn assert_proven(report: &PartitionReport, reached: &[&str]) {
    assert!(report.complete(), "the check must explore every state");
    for property in p::SAFETY.into_iter().chain(p::LIVENESS) {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Holds,
            "{property}"
        );
    }
    for property in reached {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Reached,
            "{property}"
        );
    }
}

/// Finds the shortest counterexample to `property`, prints it, and returns it.
fn counterexample(model: &PartitionModel, property: &'static str) -> String {
    let options = Options {
        search: Search::Bfs,
        threads: 1,
        stop: Stop::At(property),
        ..Options::default()
    };
    let report = check::check(model, &options, Duration::from_secs(60), |_| {});
    let verdict = report.verdict(property);
    assert_eq!(verdict.outcome, Outcome::Counterexample, "{property}");
    let path = verdict.path.as_ref().expect("a counterexample has a path");
    let text = trace::render(model, path);
    println!(
        "COUNTEREXAMPLE to {property:?} in {:?}:\n{text}",
        model.bounds
    );
    // The printed path replays to a state that breaks the property.
    let encoded = verdict
        .encoded
        .as_ref()
        .expect("a counterexample is encoded");
    let replayed = check::replay(model, encoded).expect("the path replays");
    let last = &replayed.last().expect("a path has a last state").0;
    assert!(p::broken(model, last).contains(&property));
    text
}

fn skewed(strategy: Strategy) -> Bounds {
    Bounds {
        hosts: 2,
        partitions: 2,
        crashes: 1,
        skew: 1,
        drift_ms: 100,
        horizon: 16,
        pauses: 0,
        lost_replies: 0,
        delays: 0,
        strategy,
        ..Bounds::default()
    }
}

fn three_hosts(strategy: Strategy) -> Bounds {
    Bounds {
        hosts: 3,
        skew: 0,
        drift_ms: 0,
        horizon: 12,
        ..skewed(strategy)
    }
}

fn model(bounds: Bounds) -> PartitionModel {
    PartitionModel::new(bounds).expect("valid bounds")
}

/// Handoff at 2 × 2 with a crash, skew and drift, under `liveness`: every property
/// holds and every `sometimes` is reached.
fn handoff_two_by_two_is_proven(liveness: Liveness) {
    let report = exhaustive(&model(Bounds {
        horizon: 14,
        liveness: Some(liveness),
        ..skewed(Strategy::Handoff)
    }));
    assert_proven(
        &report,
        &[
            p::TAKEOVER,
            p::REBALANCE,
            p::CALM_AFTER_CRASH,
            p::SETTLED_AFTER_RESTART,
        ],
    );
}

#[test]
fn two_hosts_two_partitions_one_crash_with_skew_and_drift_are_safe_and_live_under_handoff_with_session_liveness()
 {
    handoff_two_by_two_is_proven(Liveness::Session);
}

/// Handoff as before session leases: each lease renewed on its own.
#[test]
fn two_hosts_two_partitions_one_crash_with_skew_and_drift_are_safe_and_live_under_handoff_with_lease_liveness()
 {
    handoff_two_by_two_is_proven(Liveness::Lease);
}

#[test]
fn two_hosts_two_partitions_one_crash_with_skew_and_drift_are_safe_and_live_under_cfp() {
    let report = exhaustive(&model(Bounds {
        horizon: 12,
        ..skewed(Strategy::CFP)
    }));
    assert_proven(
        &report,
        &[p::TAKEOVER, p::REBALANCE, p::LOST, p::CALM_AFTER_CRASH],
    );
}

/// 9.2 M unique states, about 95 s on two threads in a debug build: past what
/// `cargo test` should spend on one check, so run by hand with `--ignored`; the
/// session protocol's three-host check in `cargo test` is the one-partition one below.
#[test]
#[ignore]
fn three_hosts_two_partitions_one_crash_are_safe_and_live_under_handoff_with_session_liveness() {
    let report = exhaustive(&model(Bounds {
        liveness: Some(Liveness::Session),
        ..three_hosts(Strategy::Handoff)
    }));
    assert_proven(&report, &[p::TAKEOVER, p::REBALANCE, p::CALM_AFTER_CRASH]);
}

/// Three lives of a session each may hand, take or fence: 1.2 M unique states, about
/// 14 s. With one partition there is nothing to rebalance.
#[test]
fn three_hosts_one_partition_one_crash_are_safe_and_live_under_handoff_with_session_liveness() {
    let report = exhaustive(&model(Bounds {
        partitions: 1,
        liveness: Some(Liveness::Session),
        ..three_hosts(Strategy::Handoff)
    }));
    assert_proven(&report, &[p::TAKEOVER, p::CALM_AFTER_CRASH]);
}

#[test]
fn three_hosts_two_partitions_one_crash_are_safe_and_live_under_cfp() {
    let report = exhaustive(&model(three_hosts(Strategy::CFP)));
    assert_proven(
        &report,
        &[p::TAKEOVER, p::REBALANCE, p::LOST, p::CALM_AFTER_CRASH],
    );
    // Without a split there is nothing for the split's `sometimes` to find, so it is
    // not among the verdicts, rather than reported reached.
    assert!(report.verdicts.iter().all(|v| v.property != p::SPLIT_DONE));
}

#[test]
fn lost_replies_pauses_and_late_writes_are_survived() {
    let faults = Bounds {
        crashes: 0,
        skew: 0,
        drift_ms: 0,
        horizon: 8,
        lost_replies: 1,
        pauses: 1,
        ..skewed(Strategy::Handoff)
    };
    let report = exhaustive(&model(faults.clone()));
    assert_proven(&report, &[p::AMBIGUOUS]);
    let late = Bounds {
        lost_replies: 0,
        pauses: 0,
        delays: 1,
        ..faults
    };
    let report = exhaustive(&model(late));
    assert_proven(&report, &[p::LOST, p::RESTART_AFTER_LAPSE]);
    // The sibling: an event the bound cannot produce is not found. Events are flags of
    // the last step only, and one set where it did not happen would show here.
    assert_eq!(
        report.verdict(p::AMBIGUOUS).outcome,
        Outcome::NotReached,
        "no reply is lost without a lost-reply budget"
    );
}

/// The engine's old lifecycle: a lapse forgets the session while its call runs on,
/// and a renewal that lands late restarts the lease at the same epoch.
#[test]
fn a_restart_at_the_same_epoch_overlaps_a_lost_call() {
    let bounds = Bounds {
        bug: Some(Bug::Engine(KnownBad::RestartSameEpoch)),
        crashes: 0,
        skew: 0,
        drift_ms: 0,
        horizon: 8,
        delays: 1,
        ..skewed(Strategy::Handoff)
    };
    counterexample(&model(bounds), p::SESSIONS);
}

#[test]
fn timestamp_expiry_with_a_margin_of_twice_the_skew_is_safe() {
    let bounds = Bounds {
        expiry: ExpiryRule::Timestamp,
        horizon: 12,
        margin_ms: Some(2_000),
        ..skewed(Strategy::Handoff)
    };
    let report = exhaustive(&model(bounds));
    assert_proven(&report, &[p::TAKEOVER]);
}

/// CFP as shipped: the timestamp rule with no margin. Two hosts whose wall clocks
/// are 2 s apart both hold a lease; with a margin of twice that skew it holds.
#[test]
fn cfp_as_shipped_gives_two_owners_under_skew_and_a_margin_of_twice_the_skew_prevents_it() {
    let shipped = Bounds {
        strategy: Strategy::CFP,
        expiry: ExpiryRule::Timestamp,
        skew: 2,
        crashes: 0,
        lost_replies: 0,
        delays: 0,
        horizon: 10,
        ..Bounds::default()
    };
    counterexample(&model(shipped.clone()), p::EXCLUSIVITY);
    let with_margin = Bounds {
        margin_ms: Some(4_000),
        ..shipped
    };
    let report = exhaustive(&model(with_margin));
    let exclusive = report.verdict(p::EXCLUSIVITY).outcome;
    assert_eq!(exclusive, Outcome::Holds);
}

#[test]
fn timestamp_expiry_with_skew_beyond_its_margin_gives_two_owners() {
    let bounds = Bounds {
        bug: Some(Bug::TimestampSkew),
        skew: 2,
        crashes: 0,
        horizon: 10,
        ..skewed(Strategy::CFP)
    };
    counterexample(&model(bounds), p::EXCLUSIVITY);
}

/// Under lease liveness the acquire's if-match is what keeps a taker from a lease its
/// owner just renewed. (Under session liveness the fence of the owner's tenure does
/// that, and the same variant is survived at this bound.)
#[test]
fn a_blind_acquire_gives_two_owners() {
    let bounds = Bounds {
        bug: Some(Bug::BlindAcquire),
        horizon: 10,
        liveness: Some(Liveness::Lease),
        ..skewed(Strategy::Handoff)
    };
    counterexample(&model(bounds), p::EXCLUSIVITY);
}

/// Session liveness: a taker that does not fence a dead host's tenure first races the
/// renewal that host still had in flight, and both process.
#[test]
fn a_takeover_without_fencing_the_dead_session_gives_two_owners() {
    counterexample(
        &model(session_variant(Bug::Engine(KnownBad::UnfencedTakeover))),
        p::EXCLUSIVITY,
    );
}

/// A variant of session liveness at the bound its counterexample needs: no crash,
/// skew or drift, but one write held on the wire.
fn session_variant(bug: Bug) -> Bounds {
    Bounds {
        bug: Some(bug),
        crashes: 0,
        skew: 0,
        drift_ms: 0,
        delays: 1,
        horizon: 12,
        ..skewed(Strategy::Handoff)
    }
}

/// Session liveness: a renewal written without if-match revives a fenced tenure, so
/// its host keeps processing leases already taken.
#[test]
fn a_blind_heartbeat_renews_a_fenced_session_and_gives_two_owners() {
    counterexample(&model(session_variant(Bug::BlindHeartbeat)), p::EXCLUSIVITY);
}

/// The runtime swarm's seed 84112: a pause lapses the authority of a host that holds
/// both leases while the other claims one; it resumes the lease it keeps and hands
/// the other off, and the recipient starts while the lost call still runs. At the
/// variant's least bound: 2 × 2, one pause, no crash, horizon 6.
fn paused_owner(bug: Option<Bug>) -> Bounds {
    Bounds {
        bug,
        ..Bug::Engine(KnownBad::FreeBesideLostCall).bounds()
    }
}

#[test]
fn a_lease_lost_in_a_pause_is_handed_off_only_once_its_call_ended() {
    let report = exhaustive(&model(paused_owner(None)));
    assert!(report.complete());
    for property in p::SAFETY {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Holds,
            "{property}"
        );
    }
    assert_eq!(report.verdict(p::LOST).outcome, Outcome::Reached);
}

/// The sibling: the earlier rule hands the lease off beside its lost call.
#[test]
fn read_the_earlier_way_a_lost_lease_is_handed_off_beside_its_call() {
    let text = counterexample(
        &model(paused_owner(Some(Bug::Engine(
            KnownBad::FreeBesideLostCall,
        )))),
        p::FREED_AFTER_CALL,
    );
    assert!(text.contains("sends handoff"), "{text}");
    assert!(text.contains("still running"), "{text}");
}

/// Drains that finish their batch past the tick (`--slow-drains`), reaching a
/// checkpoint meanwhile, at 2 × 2 with no other fault.
fn slow_drain(slow_drains: u8) -> Bounds {
    Bounds {
        crashes: 0,
        lost_replies: 0,
        delays: 0,
        progress: 2,
        slow_drains,
        horizon: 6,
        ..Bounds::default()
    }
}

#[test]
fn a_drain_that_outlasts_the_tick_breaks_no_safety_property() {
    let with = exhaustive(&model(slow_drain(1)));
    assert!(with.complete());
    for property in p::SAFETY {
        assert_eq!(with.verdict(property).outcome, Outcome::Holds, "{property}");
    }
    // The sibling: the slow drain is taken. Were no drain ever to outlast its step,
    // the counts would be equal.
    let without = exhaustive(&model(slow_drain(0)));
    assert!(
        with.progress.unique > without.progress.unique,
        "{} vs {}",
        with.progress.unique,
        without.progress.unique
    );
}

#[test]
fn the_session_variants_need_session_liveness() {
    let bounds = Bounds {
        bug: Some(Bug::BlindHeartbeat),
        liveness: Some(Liveness::Lease),
        ..Bounds::default()
    };
    let err = PartitionModel::new(bounds).unwrap_err();
    assert!(err.to_string().contains("--liveness session"), "{err}");
}

#[test]
fn a_blind_checkpoint_from_a_late_write_takes_the_checkpoint_back() {
    let bounds = Bounds {
        bug: Some(Bug::BlindCheckpoint),
        crashes: 0,
        delays: 1,
        progress: 2,
        horizon: 10,
        ..skewed(Strategy::Handoff)
    };
    counterexample(&model(bounds), p::CHECKPOINT_MONOTONIC);
}

#[test]
fn a_margin_below_the_drift_allowance_gives_two_owners() {
    let bounds = Bounds {
        bug: Some(Bug::ThinMargin),
        crashes: 0,
        pauses: 1,
        horizon: 10,
        ..skewed(Strategy::Handoff)
    };
    counterexample(&model(bounds.clone()), p::EXCLUSIVITY);
    // The same pause with the drift allowance in place is survived.
    let good = Bounds {
        bug: None,
        ..bounds
    };
    assert_proven(&exhaustive(&model(good)), &[]);
}

#[test]
fn takeovers_that_keep_the_epoch_let_a_former_owner_write() {
    let bounds = Bounds {
        bug: Some(Bug::SameEpoch),
        horizon: 10,
        ..skewed(Strategy::Handoff)
    };
    let model = model(bounds);
    counterexample(&model, p::EPOCHS);
    counterexample(&model, p::STALE_WRITES);
}

#[test]
fn a_blind_acquire_loses_a_confirmed_checkpoint() {
    let bounds = Bounds {
        bug: Some(Bug::BlindAcquire),
        horizon: 10,
        liveness: Some(Liveness::Lease),
        ..skewed(Strategy::Handoff)
    };
    counterexample(&model(bounds), p::CHECKPOINT_KEPT);
}

#[test]
fn the_liveness_bound_is_tight() {
    let mut model = model(skewed(Strategy::CFP));
    model.liveness_ticks -= 1;
    counterexample(&model, p::OWNED);
    // Session liveness meets the same bound (a fence and a take add no time here),
    // and no tighter one.
    let mut session = self::model(Bounds {
        liveness: Some(Liveness::Session),
        ..skewed(Strategy::Handoff)
    });
    assert_eq!(session.liveness_ticks, model.liveness_ticks + 1);
    session.liveness_ticks -= 1;
    counterexample(&session, p::OWNED);
}

/// `bounds` (one host, one lease) cost a new life a second wait, which `plain`,
/// without the fault that causes it, does not: the liveness bound allows for it,
/// every state within the bound keeps every property (reaching `reached`), and one
/// tick less breaks liveness. The bound is checked from a few ticks past it, so that
/// the fault can come after the first life holds the lease.
fn a_second_wait_is_allowed_for(bounds: Bounds, plain: Bounds, reached: &[&str]) {
    assert!(bounds.liveness_ticks() > plain.liveness_ticks());
    let bounds = Bounds {
        horizon: bounds.liveness_ticks() + 3,
        ..bounds
    };
    let report = exhaustive(&model(bounds.clone()));
    assert_proven(&report, reached);
    let mut tighter = model(bounds);
    tighter.liveness_ticks -= 1;
    counterexample(&tighter, p::OWNED);
}

/// A crashed life's heartbeat renewal, held on the wire, lands just after its next
/// life began to wait out the version it found: the new life learns of it only when
/// its own heartbeat at the end of that wait fails, and then waits the landed version
/// out in turn. The bound allows one timer more wherever a delayed write and a new
/// life under the same name can meet, and one tick less breaks it on this path
/// (`check partitions --hosts 1 --partitions 1 --delays 1` reported a liveness
/// counterexample of the shipped protocol before).
#[test]
fn a_dead_lifes_late_write_costs_its_next_life_a_second_wait() {
    let bounds = Bounds {
        hosts: 1,
        partitions: 1,
        delays: 1,
        ..skewed(Strategy::Handoff)
    };
    let plain = Bounds {
        delays: 0,
        ..bounds.clone()
    };
    a_second_wait_is_allowed_for(bounds, plain, &[p::CALM_AFTER_CRASH]);
}

/// The same with a zombie: its heartbeat renewal, held on the wire, lands after its
/// replacement read the version it must wait out, and the replacement waits again.
/// The bound's timer for it counted crashes and shutdowns only, and a sweep of small
/// bounds (1 × 1, a zombie and a held write) found liveness judged a wait too early.
#[test]
fn a_zombies_late_write_costs_its_replacement_a_second_wait() {
    let bounds = Bounds {
        hosts: 1,
        partitions: 1,
        crashes: 0,
        zombies: 1,
        delays: 1,
        ..skewed(Strategy::Handoff)
    };
    let plain = Bounds {
        delays: 0,
        ..bounds.clone()
    };
    a_second_wait_is_allowed_for(bounds, plain, &[]);
}

/// The same with a lagging replica: the new life's read of its earlier life's
/// heartbeat is served a version behind (put off by a throttled read until the
/// replica can lag), so it waits out the older version, learns of the newer one at
/// its write's 412, and waits again. The sweep of small bounds found liveness judged
/// a wait too early here (1 × 1, a crash, a stale read and a throttled one).
#[test]
fn a_stale_read_of_the_earlier_lifes_heartbeat_costs_the_next_life_a_second_wait() {
    let bounds = Bounds {
        hosts: 1,
        partitions: 1,
        stale_reads: 1,
        throttled_reads: 1,
        ..skewed(Strategy::Handoff)
    };
    let plain = Bounds {
        stale_reads: 0,
        ..bounds.clone()
    };
    a_second_wait_is_allowed_for(bounds, plain, &[p::CALM_AFTER_CRASH]);
}

/// A zombie cut off from the store can neither renew its heartbeat nor watch one
/// expire: a host that restarts beside it, with nobody else up, is the first to
/// watch, and liveness counts from its restart. Here the zombie's call is stuck, so
/// the zombie is never gone, and its replacement starts late; judged from the
/// zombie's fault, the sweep of small bounds found liveness broken. Judged from the
/// restart the bound is loose here (three ticks under it still hold), and four
/// under it breaks: the new life's wait is real.
#[test]
fn a_host_restarting_beside_a_cut_off_zombie_counts_liveness_from_its_restart() {
    let bounds = Bounds {
        hosts: 1,
        partitions: 1,
        crashes: 0,
        zombies: 1,
        stuck_calls: 1,
        ..skewed(Strategy::Handoff)
    };
    let bounds = Bounds {
        horizon: bounds.liveness_ticks() + 3,
        ..bounds
    };
    let report = exhaustive(&model(bounds.clone()));
    assert_proven(&report, &[]);
    let mut tighter = model(bounds);
    tighter.liveness_ticks -= 4;
    counterexample(&tighter, p::OWNED);
}

/// Under lease liveness. An owner may still hand a lease to a claimant that crashed
/// after claiming (its heartbeat has not yet expired in the owner's eyes), but the
/// owner has watched the handed-off version since it wrote it, and frees it one
/// observer wait later (`free_expired`); the next host in the plan takes it at its
/// next scan. So here `handoff` meets `cfp`'s bound (96 s in release, BENCHMARKS.md),
/// and one tick less breaks it on this very path. (Before every watcher freed expired
/// leases, only the planned taker could, and it first saw the handed-off version up
/// to an acquire interval after the handoff: one more expiration, which the bound
/// still allows for.)
#[test]
fn a_handoff_to_a_claimant_that_crashed_is_freed_by_its_former_owner() {
    let bounds = Bounds {
        liveness: Some(Liveness::Lease),
        ..three_hosts(Strategy::Handoff)
    };
    let mut model = model(bounds.clone());
    model.liveness_ticks = Bounds {
        strategy: Strategy::CFP,
        ..bounds
    }
    .liveness_ticks()
        - 1;
    let trace = counterexample(&model, p::OWNED);
    assert!(
        trace.contains("CRASHES")
            && trace.contains("sends handoff")
            && trace.contains("sends expire"),
        "{trace}"
    );
}

#[test]
fn a_balance_bound_shorter_than_one_acquire_interval_is_broken() {
    let mut model = model(Bounds {
        horizon: 14,
        ..skewed(Strategy::Handoff)
    });
    assert_eq!(
        model.balance_ticks, 5,
        "two acquire intervals on a slow clock"
    );
    // One acquire interval on the slow clock (3 ticks) is enough here; 2 is not.
    model.balance_ticks = 2;
    counterexample(&model, p::BALANCED);
}

/// A finished split gives the table leases to share, and the others learn of it only
/// at their next read of the heartbeats: balance is judged one acquire interval later
/// than after a join. Judged at the join's bound, the shipped protocol breaks it (the
/// model found it at 2 × 1 with a crash and a stale read); at the split's, it holds.
#[test]
fn balance_after_a_split_waits_one_acquire_interval_more_than_after_a_join() {
    let bounds = Bounds {
        partitions: 1,
        splits: 1,
        crashes: 0,
        lost_replies: 0,
        delays: 0,
        horizon: 14,
        ..Bounds::default()
    };
    let mut model = model(bounds);
    assert_eq!(
        (model.balance_ticks, model.split_balance_ticks),
        (5, 8),
        "one acquire interval on a slow clock is 3 ticks"
    );
    assert_proven(&exhaustive(&model), &[p::SPLIT_DONE]);
    model.split_balance_ticks = model.balance_ticks;
    counterexample(&model, p::BALANCED);
}

/// The larger target; minutes, so only on request:
/// `cargo test --release -p leasehold-model -- --ignored`.
#[test]
#[ignore]
fn three_hosts_three_partitions_one_crash_with_skew_are_safe_and_live() {
    let bounds = Bounds {
        hosts: 3,
        partitions: 3,
        skew: 1,
        drift_ms: 0,
        horizon: 12,
        ..skewed(Strategy::Handoff)
    };
    let report = exhaustive(&model(bounds));
    assert_proven(&report, &[p::TAKEOVER, p::REBALANCE, p::CALM_AFTER_CRASH]);
}

/// Two crashes may take every host down. Nobody is then left to own anything, and
/// the first host back must watch the dead heartbeats expire from its restart, so
/// liveness counts from there; the bound stays tight. Seconds in release, so only on
/// request: `cargo test --release -p leasehold-model -- --ignored`.
#[test]
#[ignore]
fn two_crashes_that_empty_the_cluster_leave_every_partition_owned_after_the_restart() {
    let bounds = Bounds {
        partitions: 1,
        crashes: 2,
        horizon: 11,
        ..skewed(Strategy::Handoff)
    };
    let report = exhaustive(&model(bounds.clone()));
    assert_proven(&report, &[p::TAKEOVER, p::CALM_AFTER_CRASH]);
    let mut tighter = model(bounds);
    tighter.liveness_ticks -= 1;
    counterexample(&tighter, p::OWNED);
}

/// Partition 0's range splits at any moment, around a crash: its lease is replaced by
/// its children's, no range is left unowned once faults stop, no two hosts process
/// overlapping ranges, and no child starts behind its parent.
#[test]
fn a_split_around_a_crash_leaves_every_range_owned_apart_and_no_child_behind() {
    let report = exhaustive(&model(Bounds {
        splits: 1,
        horizon: 11,
        ..skewed(Strategy::Handoff)
    }));
    assert_proven(&report, &[p::SPLIT_DONE, p::TAKEOVER, p::CALM_AFTER_CRASH]);
}

/// Deleting the split lease first opens a gap with neither the parent nor its
/// children stored: a scan in it creates the configured partition again from no
/// checkpoint, so the confirmed one is lost.
#[test]
fn deleting_a_split_lease_before_its_children_exist_loses_its_checkpoint() {
    counterexample(&model(parent_first()), p::CHECKPOINT_KEPT);
}

/// Partition 0 may split, and its lease is deleted before its children's exist.
fn parent_first() -> Bounds {
    Bounds {
        splits: 1,
        horizon: 11,
        bug: Some(Bug::Engine(KnownBad::DeleteParentFirst)),
        ..skewed(Strategy::Handoff)
    }
}

/// The same gap, and the recreated partition is processed again beside its
/// children.
#[test]
fn deleting_a_split_lease_before_its_children_exist_lets_two_hosts_process_one_range() {
    counterexample(&model(parent_first()), p::SPLIT_APART);
}

/// A delete whose reply is lost leaves the owner unsure, so it never creates the
/// children; the recreated partition splits again from nothing, behind the
/// checkpoint its first lease had stored.
#[test]
fn deleting_a_split_lease_first_lets_a_child_start_behind_it() {
    let bounds = Bounds {
        lost_replies: 1,
        ..parent_first()
    };
    counterexample(&model(bounds), p::CHILD_CHECKPOINT);
}

/// A held write at horizon 11 reaches a handoff abandoned after its session stopped;
/// the engine's debug check (passes over the agenda's leases equal passes over every
/// lease) panicked here until abandoned handoffs were rechecked before the starts.
/// 8.8 M unique states, about 70 s in a debug build: run by hand with `--ignored`.
#[test]
#[ignore]
fn a_handoff_abandoned_after_its_session_stopped_starts_its_lease_again_at_once() {
    let report = exhaustive(&model(Bounds {
        horizon: 11,
        delays: 1,
        ..skewed(Strategy::Handoff)
    }));
    assert_proven(&report, &[p::TAKEOVER, p::CALM_AFTER_CRASH]);
}

/// One host, one lease, a crash and a lost reply, the handler reaching 3 checkpoints
/// under a policy of at most one write per 2: what a new life replays.
fn replay_bounds() -> Bounds {
    Bounds {
        hosts: 1,
        partitions: 1,
        crashes: 1,
        lost_replies: 1,
        delays: 0,
        progress: 3,
        checkpoint_items: 2,
        horizon: 11,
        ..Bounds::default()
    }
}

#[test]
fn under_a_policy_of_two_items_a_new_call_replays_at_most_one_beyond_a_write_in_flight() {
    let model = model(replay_bounds());
    assert_eq!(model.replay_items, Some(1));
    let report = exhaustive(&model);
    assert!(report.complete());
    assert_eq!(
        report.verdict(p::REPLAY_BOUNDED).outcome,
        Outcome::Holds,
        "{}",
        p::REPLAY_BOUNDED
    );
    for property in p::SAFETY {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Holds,
            "{property}"
        );
    }
}

#[test]
fn a_replay_bound_tighter_than_the_policy_is_broken_by_a_call_cut_short() {
    let mut model = model(replay_bounds());
    // The hosts still write at most every 2; the property now allows no lag at all.
    model.replay_items = Some(0);
    let trace = counterexample(&model, p::REPLAY_BOUNDED);
    // The shortest way: a lost renewal's reply lets the lease lapse mid-call, and the
    // new call starts from the checkpoint before the call's last item (a crash is
    // another way).
    assert!(trace.contains("lost (authority lapsed)"), "{trace}");
}
