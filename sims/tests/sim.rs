//! The simulator: determinism, every scenario settling, each property catching what
//! a known-bad variant breaks, and the swarm CI runs.

use leasehold_engine::lease::Liveness;
use leasehold_engine::{ExpiryRule, Millis};
use leasehold_model::{Bug, KnownBad};
use leasehold_sims::sim::queue::QueueScenario;
use leasehold_sims::sim::{
    self, FaultKind, Faults, Scenario, SimConfig, ViolationKind, parse_strategy, swarm,
};

/// A small version of `scenario`: 4 hosts, 16 partitions, 3 minutes of disturbance.
fn small(scenario: Scenario, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::scenario(scenario, seed);
    cfg.hosts = 4;
    cfg.partitions = 16;
    cfg.affected = 1;
    cfg.warmup = Millis::from_secs(if scenario == Scenario::Steady { 0 } else { 120 });
    cfg.duration = Millis::from_secs(180);
    cfg
}

fn kinds(cfg: &SimConfig) -> Vec<ViolationKind> {
    let run = sim::simulate(cfg, false).expect("a valid run");
    run.report.violated_kinds()
}

#[test]
fn the_same_seed_replays_the_same_trace_and_another_seed_does_not() {
    let mut cfg = small(Scenario::FlappingHost, 11);
    cfg.faults = Faults::NONE
        .apply("crash=20,pause=20,partition=20,timeout=20,throttle=30,spike=30,skew=20,drift=5000,jump=5")
        .unwrap();
    let first = sim::simulate(&cfg, false).unwrap();
    let second = sim::simulate(&cfg, false).unwrap();
    assert!(first.finished.trace_events > 1_000);
    assert_eq!(first.report.trace_hash, second.report.trace_hash);
    assert_eq!(first.report.moves, second.report.moves);
    assert_eq!(first.finished.tail, second.finished.tail);
    cfg.seed = 12;
    let other = sim::simulate(&cfg, false).unwrap();
    assert_ne!(first.report.trace_hash, other.report.trace_hash);
}

#[test]
fn a_kept_trace_says_why_each_host_woke_and_its_hash_does_not_depend_on_it() {
    let mut cfg = small(Scenario::Steady, 5);
    let kept = sim::simulate(&cfg, false).unwrap();
    let wakes: Vec<&String> = kept
        .finished
        .tail
        .iter()
        .filter(|line| line.contains(" wakes for "))
        .collect();
    assert!(!wakes.is_empty(), "{}", kept.finished.tail.join("\n"));
    // The engine names the timer: a lease, the table read, a plan or a heartbeat.
    assert!(wakes.iter().all(|line| {
        ["lease ", "the table read", "a plan again", "its heartbeat"]
            .iter()
            .any(|timer| line.contains(timer))
    }));
    cfg.trace_keep = 0;
    let quiet = sim::simulate(&cfg, false).unwrap();
    assert!(quiet.finished.tail.is_empty());
    assert_eq!(kept.report.trace_hash, quiet.report.trace_hash);
    assert_eq!(kept.finished.trace_events, quiet.finished.trace_events);
}

#[test]
fn every_scenario_settles_with_both_strategies_and_breaks_nothing() {
    for scenario in Scenario::ALL {
        for strategy in ["cfp", "handoff"] {
            let mut cfg = small(scenario, 3);
            cfg.strategy = parse_strategy(strategy).unwrap();
            let run = sim::simulate(&cfg, false).unwrap();
            let r = &run.report;
            assert!(
                r.passed(),
                "{scenario} {strategy}: {:?}\n{}",
                r.violations,
                run.finished.tail.join("\n")
            );
            assert!(
                r.events_processed >= r.events_produced,
                "{scenario} {strategy}"
            );
            if strategy == "handoff" {
                assert!(r.converge_s.is_some(), "{scenario} never balanced");
            }
        }
    }
}

/// A rolling restart of ten hosts, each stopped once: under `handoff` a host told to
/// stop announces its leave and processes on, and its leases are processed again
/// within a second of its handlers' stop, sooner than `cfp`'s racing takers.
#[test]
fn a_rolling_restart_hands_each_lease_over_within_a_second_of_its_stop() {
    let cfg = SimConfig::scenario(Scenario::RollingRestart, 1);
    let handoff = sim::simulate(&cfg, false).unwrap().report;
    let cfp = SimConfig {
        strategy: parse_strategy("cfp").unwrap(),
        ..cfg.clone()
    };
    let cfp = sim::simulate(&cfp, false).unwrap().report;
    assert!(handoff.takeovers >= 90, "{}", handoff.takeovers);
    let longest = handoff.max_handover_s.unwrap();
    assert!(longest < 1.0, "{longest} s");
    assert!(longest <= cfp.max_takeover_s.unwrap());
}

/// The sibling: leaving at once, a host leaves its leases to the others' next
/// acquire interval.
#[test]
fn a_rolling_restart_without_a_leave_notice_leaves_leases_unprocessed_for_seconds() {
    let cfg = SimConfig {
        leave_notice: Some(Millis::ZERO),
        ..SimConfig::scenario(Scenario::RollingRestart, 1)
    };
    let handoff = sim::simulate(&cfg, false).unwrap().report;
    let longest = handoff.max_handover_s.unwrap();
    assert!(longest > 5.0, "{longest} s");
}

#[test]
fn scale_out_moves_the_minimum_with_handoff_and_converges_faster_than_cfp() {
    let mut cfg = SimConfig::scenario(Scenario::ScaleOut, 1);
    cfg.duration = Millis::from_secs(400);
    let handoff = sim::simulate(&cfg, false).unwrap().report;
    cfg.strategy = parse_strategy("cfp").unwrap();
    let cfp = sim::simulate(&cfg, false).unwrap().report;
    assert_eq!(handoff.min_moves, 90);
    // Newcomers join over two seconds; the first may claim more than its final share
    // and pass a few on.
    assert!(
        handoff.moves >= 90 && handoff.moves <= 99,
        "{}",
        handoff.moves
    );
    assert_eq!(handoff.duplicate_events, 0);
    let (h, c) = (handoff.converge_s.unwrap(), cfp.converge_s.unwrap());
    assert!(h < c, "handoff {h} s, cfp {c} s");
    // A steal leaves the stolen-from host's unconfirmed batch to be done again.
    assert!(cfp.duplicate_events > 0);
}

/// Checkpoint RU per host-minute of handoff and cfp in a small steady run at one
/// event a second per partition, checkpointing as `every` says.
fn checkpoint_cost(every: Option<Millis>) -> [(f64, u64); 2] {
    let mut cfg = small(Scenario::Steady, 1);
    cfg.workload.rate = 1.0;
    cfg.checkpoint_every = every;
    let mut out = [(0.0, 0); 2];
    for (i, strategy) in ["handoff", "cfp"].into_iter().enumerate() {
        cfg.strategy = parse_strategy(strategy).unwrap();
        let run = sim::simulate(&cfg, false).unwrap();
        assert!(run.report.passed(), "{:?}", run.report.violations);
        let ru = run.report.by_purpose["checkpoint"].ru_per_host_min;
        out[i] = (ru, run.report.duplicate_events);
    }
    out
}

#[test]
fn checkpointing_at_most_every_30_seconds_costs_a_fraction_and_handoff_replays_nothing() {
    let [(handoff, _), (cfp, _)] = checkpoint_cost(None);
    let [(handoff_30, replayed), (cfp_30, _)] = checkpoint_cost(Some(Millis::from_secs(30)));
    // Far fewer checkpoints of their own; cfp's renewals carry the rest.
    assert!(handoff_30 * 3.0 < handoff, "{handoff_30} against {handoff}");
    assert!(cfp_30 * 3.0 < cfp, "{cfp_30} against {cfp}");
    // Handoff moves leases by handoffs, which carry the held checkpoint.
    assert_eq!(replayed, 0);
}

/// The longest replay after a crash at 5 events a second per partition, under the
/// checkpoint policy `policy` sets. The replay check runs every time: a new owner
/// starts within the policy's bound.
fn longest_replay_after_a_crash(policy: impl Fn(&mut SimConfig)) -> u64 {
    let mut cfg = small(Scenario::Crash, 1);
    cfg.workload.rate = 5.0;
    policy(&mut cfg);
    let run = sim::simulate(&cfg, false).unwrap();
    assert!(run.report.passed(), "{:?}", run.report.violations);
    run.report.max_replay_events
}

#[test]
fn after_a_crash_a_count_of_20_replays_more_than_every_batch_and_stays_within_its_bound() {
    let every_batch = longest_replay_after_a_crash(|_| {});
    let every_20 = longest_replay_after_a_crash(|cfg| cfg.checkpoint_items = Some(20));
    assert!(every_20 > every_batch, "{every_20} against {every_batch}");
}

#[test]
fn after_a_crash_an_interval_of_30_s_replays_more_than_every_batch_and_stays_within_its_bound() {
    // What a new owner replays was finished by the crashed one less than the
    // interval before it died.
    let every_batch = longest_replay_after_a_crash(|_| {});
    let every_30s =
        longest_replay_after_a_crash(|cfg| cfg.checkpoint_every = Some(Millis::from_secs(30)));
    assert!(every_30s > every_batch, "{every_30s} against {every_batch}");
}

// Each property, and a run that breaks it: a check that cannot fail is no check.

#[test]
fn exclusivity_catches_the_timestamp_rule_under_skewed_clocks() {
    let mut cfg = SimConfig::scenario(Scenario::SkewedClocks, 1);
    assert!(kinds(&cfg).is_empty());
    cfg.expiry = ExpiryRule::Timestamp;
    assert!(kinds(&cfg).contains(&ViolationKind::Exclusivity));
}

#[test]
fn exclusivity_catches_clocks_that_drift_beyond_the_assumed_bound() {
    // Which seeds catch it depends on how the store's faults meet the engine's
    // requests; seeds 2 to 4 catch it now. It is a narrow race: the model checker's
    // `thin-margin` counterexample is what always finds it.
    let mut cfg = SimConfig::scenario(Scenario::Crash, 2);
    cfg.faults = Faults::NONE
        .with(FaultKind::Drift, 9_000.0)
        .with(FaultKind::Partition, 30.0);
    assert!(kinds(&cfg).is_empty(), "within the 1% bound");
    cfg.bug = Some(Bug::ThinMargin);
    cfg.faults.set(FaultKind::Drift, 50_000.0);
    assert!(kinds(&cfg).contains(&ViolationKind::Exclusivity));
}

#[test]
fn fencing_catches_a_takeover_that_keeps_the_epoch() {
    let mut cfg = small(Scenario::Crash, 1);
    cfg.bug = Some(Bug::SameEpoch);
    assert!(kinds(&cfg).contains(&ViolationKind::Fencing));
}

/// Ranges split 60 times an hour while replies are lost: the shipped order (mark,
/// create the children, then delete) breaks nothing, and every event is processed.
fn splitting(seed: u64) -> SimConfig {
    let mut cfg = SimConfig::scenario(Scenario::Crash, seed);
    cfg.strategy = parse_strategy("cfp").expect("a strategy");
    cfg.faults = Faults::NONE
        .with(FaultKind::Split, 60.0)
        .with(FaultKind::Timeout, 30.0);
    cfg
}

#[test]
fn split_ranges_are_handed_to_their_children_without_overlap_or_loss() {
    let cfg = splitting(1);
    let run = sim::simulate(&cfg, false).expect("a valid run");
    assert_eq!(run.report.violated_kinds(), []);
    assert!(run.report.faults.get("split").is_some_and(|n| *n > 0));
}

/// Deleting the parent first: a scan in the gap recreates the range whole, and it is
/// processed beside its children.
#[test]
fn exclusivity_catches_a_split_that_deletes_the_parent_first() {
    // Seed 1 takes other turns since hosts record the expiries they watch; seed 3
    // runs clean with the shipped protocol.
    let mut cfg = splitting(3);
    assert!(kinds(&cfg).is_empty());
    cfg.bug = Some(Bug::Engine(KnownBad::DeleteParentFirst));
    assert!(kinds(&cfg).contains(&ViolationKind::Exclusivity));
}

#[test]
fn fencing_catches_blind_acquires() {
    // Ten hosts starting within two seconds race for every lease.
    let mut cfg = SimConfig::scenario(Scenario::Crash, 1);
    cfg.duration = Millis::from_secs(60);
    cfg.bug = Some(Bug::BlindAcquire);
    assert!(kinds(&cfg).contains(&ViolationKind::Fencing));
}

/// Before the stop contract, this run also moved a checkpoint back (a lease restarted
/// at its old epoch after a lapse, then checkpointed blind over its new owner's
/// progress). A restart now goes through a conditional `Resume` first, which finds the
/// new owner, so the stale checkpoint shows as fencing only; no seed of 1,000 in the
/// swarm moves a checkpoint back any more. The model's
/// `a_blind_checkpoint_from_a_late_write_takes_the_checkpoint_back` still shows the
/// property failing.
#[test]
fn a_stale_owners_blind_checkpoint_is_caught_by_fencing() {
    // The swarm's draw for seed 8: a steady run in which two hosts race at the start.
    let mut cfg = drawn(8);
    assert!(kinds(&cfg).is_empty());
    cfg.bug = Some(Bug::BlindCheckpoint);
    let found = kinds(&cfg);
    assert!(found.contains(&ViolationKind::Fencing), "{found:?}");
}

#[test]
fn liveness_and_no_event_lost_catch_a_deadline_too_short_to_recover() {
    let mut cfg = small(Scenario::Crash, 1);
    cfg.duration = Millis::from_secs(20);
    assert!(kinds(&cfg).is_empty());
    // Crashed owners' leases cannot expire in 10 s.
    cfg.settle = Some(Millis::from_secs(10));
    let found = kinds(&cfg);
    assert!(found.contains(&ViolationKind::Liveness), "{found:?}");
    assert!(found.contains(&ViolationKind::EventLost), "{found:?}");
}

#[test]
fn a_violation_report_names_the_seed_the_last_events_and_a_replay_command() {
    let mut cfg = small(Scenario::Crash, 1);
    cfg.bug = Some(Bug::SameEpoch);
    cfg.trace_keep = 5;
    let run = sim::simulate(&cfg, false).unwrap();
    let text = leasehold_sims::cli::sim::violation_text(&cfg, &run.report, &run.finished.tail);
    assert!(text.contains("seed 1"));
    assert!(text.contains("last 5 events"));
    let replay = sim::replay_command(&cfg);
    assert!(text.contains(&replay));
    assert!(replay.contains("--bug same-epoch") && replay.contains("--hosts 4"));
}

/// CI's swarm: 500 seeds, each a random scenario, strategy and fault mix (100 of them
/// queue runs); every fault kind is drawn by many of them. Longer swarms: `leasehold sim swarm --seeds 0..10000`.
#[test]
fn a_swarm_of_500_seeds_across_every_fault_kind_breaks_nothing() {
    let summary = swarm::run(0..500, swarm::Variant::Shipped, |_, _| {});
    assert_eq!(summary.seeds, 500);
    for kind in FaultKind::ALL.iter().filter(|k| !k.is_static()) {
        assert!(
            summary.faults.get(kind.name()).copied().unwrap_or(0) > 100,
            "{kind} was hardly drawn: {:?}",
            summary.faults
        );
    }
    // Every lease scenario and every queue scenario (one seed in five is a queue run).
    assert_eq!(
        summary.scenarios.len(),
        Scenario::ALL.len() + QueueScenario::ALL.len()
    );
    let static_kinds = (0..500).filter(|s| !swarm::is_queue_seed(*s)).filter(|s| {
        let f = swarm::draw(*s).faults;
        f.get(FaultKind::Skew) > 0.0 && f.get(FaultKind::Drift) > 0.0
    });
    assert!(static_kinds.count() > 50);
    if let Some(f) = summary.failures.first() {
        panic!(
            "{} seeds broke a property; first: seed {} ({}): {}\n{}\nreplay: {}",
            summary.failures.len(),
            f.seed,
            f.scenario,
            f.first,
            f.tail.join("\n"),
            f.replay
        );
    }
}

/// The sibling of CI's swarm: the same draw running a known-bad variant reports the
/// seeds that broke a property, each with a replay that breaks it again. A swarm that
/// dropped its runs' violations would pass the test above and fail this one.
#[test]
fn a_swarm_of_a_known_bad_variant_reports_the_seeds_that_break_it() {
    for (name, kind) in [("same-epoch", "fencing"), ("dequeue-seed", "exclusivity")] {
        let variant = swarm::Variant::parse(name).unwrap();
        let summary = swarm::run(0..20, variant, |_, _| {});
        assert_eq!(summary.seeds, 20);
        let f = summary
            .failures
            .first()
            .unwrap_or_else(|| panic!("{name}: no seed broke anything: {summary:?}"));
        assert!(summary.violations.contains_key(kind), "{name}: {summary:?}");
        assert!(f.replay.contains(&format!("--bug {name}")), "{}", f.replay);
        let again = swarm::run(f.seed..f.seed + 1, variant, |_, _| {});
        assert_eq!(again.failures.first().map(|g| &g.first), Some(&f.first));
    }
    assert!(swarm::Variant::parse("blind-lease").is_err());
}

/// The long swarm's (seeds 20,000 to 120,000) session-liveness counterexamples, kept
/// as regressions. 20293 and 26115 stranded a lease through a take answered after the
/// tenure it named had ended, 36321 through a resume that landed in a fenced tenure
/// and was taken for one sent in the next; in 100456 (exclusivity) and 61518
/// (liveness) a leave held in a latency spike deleted the restarted host's new
/// heartbeat.
#[test]
fn the_long_swarms_counterexamples_hold_no_more() {
    for seed in [20_293, 26_115, 36_321, 61_518, 100_456] {
        let cfg = first_draw(seed);
        assert!(kinds(&cfg).is_empty(), "seed {seed}: {:?}", kinds(&cfg));
    }
}

/// The long swarm's counterexamples with the store's own faults in the draw (seeds
/// 300,000 to 720,000), kept as regressions: 300433 and 301475 lost a split's children
/// or its publication, 307453 and 427170 planned on a view a lagging replica left
/// behind, and 626248 (a scale-out with pauses) kept a view left behind by a pause
/// for good, because this host's own holding changed while no heartbeat's count did;
/// a lease named after an ended tenure was then due to a host that did not know it.
/// 827481 (a rolling restart) called a release off with its final checkpoint still
/// to write, restarted the lease from the stored, older one, and moved it back.
/// Three more stranded a lease: 951625 (a rolling restart) behind a heartbeat a
/// fencer with an old view rolled back to an earlier tenure; 957203 (a flapping host)
/// behind a read at restart that missed a split child; 1001253 and 1012240 behind a
/// gift to a successor that nothing told.
#[test]
fn the_swarms_counterexamples_under_the_stores_faults_hold_no_more() {
    for seed in [
        300_433, 301_475, 307_453, 427_170, 626_248, 827_481, 951_625, 957_203, 1_001_253,
        1_012_240,
    ] {
        let cfg = drawn(seed);
        assert!(kinds(&cfg).is_empty(), "seed {seed}: {:?}", kinds(&cfg));
    }
}

/// Seed 3382147 (a rolling restart under stale reads, found 2026-11-27): a host hands
/// a lease to a name the restart retired two minutes before, because its view of the
/// members and its confirm read of that heartbeat both came from a lagging replica.
/// The lease is then free to every reader, and the plans give it to a host whose view
/// of the table is old: only the giver's published count changed, and the
/// comparison of counts with the view did not share that lease out, so nothing sent
/// that host to the table before its audit, half an hour away. Now it does, and the
/// run converges; under `orphan-uncounted` the lease waits past the deadline.
#[test]
fn a_lease_handed_to_a_name_a_rolling_restart_retired_is_taken_by_the_host_the_plans_choose() {
    let cfg = drawn(3_382_147);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
    let bad = SimConfig {
        bug: Some(Bug::Engine(KnownBad::OrphanUncounted)),
        ..cfg
    };
    assert!(kinds(&bad).contains(&ViolationKind::Liveness));
}

/// The long swarm's seeds 5011530 (scale-in) and 5005496 (scale-out), both handoff
/// under session liveness with stuck handlers and the SDK's retries: a host's
/// checkpoint landed but was answered 412, its handler call was stuck, and one stop
/// timeout later the host gave the lease to its successor without a claim. The
/// recipient's view of the table (5011530: it had not read a handoff between the two
/// others) or of the members (5005496: the giver thought a third host dead) left the
/// giver's lower count unblamed, so it never read the table, and nobody processed the
/// lease to the end. A gift that lands is now announced in the giver's heartbeat, and
/// every host reads the table for it; under `gift-unannounced` both runs break.
#[test]
fn a_lease_a_stuck_call_gave_away_unasked_is_processed_by_its_recipient() {
    for (seed, scenario) in [
        (5_011_530, Scenario::ScaleIn),
        (5_005_496, Scenario::ScaleOut),
    ] {
        let cfg = swarm::draw(seed);
        assert_eq!(cfg.scenario, scenario);
        assert!(kinds(&cfg).is_empty(), "seed {seed}: {:?}", kinds(&cfg));
        let bad = SimConfig {
            bug: Some(Bug::Engine(KnownBad::GiftUnannounced)),
            ..cfg
        };
        let found = kinds(&bad);
        assert!(
            found.contains(&ViolationKind::Liveness),
            "seed {seed}: {found:?}"
        );
    }
}

/// The long swarm's seed 5321510 (a crash of five hosts of six for good, handoff under
/// session liveness, with zombies): the last host's new life, waiting out its zombie's
/// heartbeat, was told to stop with its first scan on the way. The scan showed the
/// earlier lives' leases; the host asked to release them without a tenure to write
/// in, never finished stopping, and so never restarted: nobody processed anything
/// for the last 314 s. Under `shutdown-releases-unwritable` it breaks again.
#[test]
fn a_host_told_to_stop_before_its_first_scan_answers_stops_and_comes_back() {
    let cfg = swarm::draw(5_321_510);
    assert_eq!(cfg.scenario, Scenario::Crash);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
    let bad = SimConfig {
        bug: Some(Bug::Engine(KnownBad::ShutdownReleasesUnwritable)),
        ..cfg
    };
    assert!(kinds(&bad).contains(&ViolationKind::Liveness));
}

/// Seed 3496910 (a scale-in with zombies and stale reads, found 2026-11-27): a zombie
/// cut off from the store calls off a handoff whose confirm read failed, starts the
/// lease again and commits one batch while its writes of the lease back off after
/// that failure; its authority lapses before they may go again, and the next owner
/// replays the batch. The store held the checkpoint back, not the policy: the replay
/// check asks the engine whether the lease's writes wait (`writes_wait`), as it
/// already counted a write on the wire or a failed one.
#[test]
fn a_batch_committed_while_the_leases_writes_back_off_may_be_replayed() {
    let cfg = drawn(3_496_910);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
}

/// Seed 1004479's lease draw: a rolling restart to a build whose expiration is 114 s
/// (60 s before), with zombies and splits, under `cfp`. A partition that split four
/// times in a row is processed again only after the heal, and its children are
/// balanced by steals, each waited out under the terms the lease was written with:
/// two waits of about 125 s in a row, and the run converges 360 s after the heal.
/// The liveness deadline, computed from the old build's expiration alone (208 s),
/// called that a violation, with and without any known-bad variant. The deadline now
/// counts the longer expiration, and one more with splits (435 s); at the old one the
/// same run breaks liveness.
#[test]
fn a_deploy_that_lengthens_the_expiration_is_judged_by_the_longer_one() {
    let cfg = drawn(1_004_479);
    assert_eq!(cfg.deploy_expiration, Some(Millis::from_secs(114)));
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
    let mut old = cfg.clone();
    old.settle = Some(Millis::from_secs(208));
    assert!(kinds(&old).contains(&ViolationKind::Liveness));
}

/// Seed 2234772's lease draw: a rolling restart under `cfp` to a build whose
/// expiration is 35 s (60 s before), with zombies, partitions and the SDK's retries.
/// A restarted host of the new build steals a lease from an old host that a network
/// partition cut off, and restarts again at once; its new life inherits the fence
/// from the document. Written under the thief's own terms, the fence was waited out
/// for 35 s while the old host's authority ran for nearly 60: two hosts processed the
/// partition. A fenced lease now keeps the wider terms of the two. Since a version
/// the store refused is never written again, this run takes another path and
/// `fence-forgets-terms` no longer breaks it: the model (`model/tests/deploys.rs`)
/// and `engine/tests/lease_host.rs` (`a_thief_restarts`) keep the variant.
#[test]
fn a_fence_stolen_across_a_deploy_that_shortened_the_lease_keeps_the_longer_terms() {
    let cfg = drawn(2_234_772);
    assert_eq!(cfg.deploy_expiration, Some(Millis::from_secs(35)));
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
}

/// Seed 2584798's lease draw: skewed clocks under handoff with lease liveness,
/// zombies and lagging replicas. h03 is handed a lease, then cut off (a zombie) while
/// a new life starts under its name; that life's first read of the lease comes from a
/// replica that still shows the earlier owner, so it claims the lease too. Reading it
/// again, named after h03, it took its claim for the handoff's cause and processed the
/// lease beside the zombie. A handoff now names the life it answers. Since a version
/// the store refused is never written again, this run takes another path and
/// `claim-by-name` no longer breaks it (nor any of seeds 2,584,000 to 2,589,999 under
/// the variant): `model/tests/deploys.rs` keeps the variant
/// (`a_new_life_that_takes_its_claim_by_name_as_the_handoff_processes_beside_its_zombie`).
#[test]
fn a_new_life_whose_stale_read_made_it_claim_its_zombies_lease_waits_it_out() {
    let cfg = drawn(2_584_798);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
}

/// Seed 2888576's draw: skewed clocks under handoff with session liveness and the
/// SDK's retries. h02's handoff of partition 22 landed but was answered 412 (the
/// retry's view); its re-read was throttled, and a table scan sent before the handoff
/// then listed the lease as h02's at the old epoch, so h02 took it back and processed
/// it beside h01. A lease left unsure by its own write now trusts only reads sent
/// after that write's answer. Since the lease counts share out every lease the view
/// knows, this run takes another path, and `scan-before-own-write` no longer breaks
/// it: `engine/tests/session_liveness.rs` keeps the variant
/// (`a_scan_sent_before_a_hosts_own_handoff_gives_it_back_under_the_old_rule`).
#[test]
fn a_scan_older_than_a_hosts_own_write_does_not_give_it_back_a_lease_it_handed_off() {
    let cfg = drawn(2_888_576);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
}

/// The long swarm's seed 4308821 (hot-partition, `cfp`, reused names, zombies): a
/// new life of h02 read a lagging table and took a lease on a version its earlier
/// life, cut off but running, took too; the new life's take timed out, and its
/// re-read showed the lease named after h02 at its take's epoch. It took that for
/// its own take and processed beside the zombie. A lease now names the life written
/// for (`OwnerLife`), and the new life waits that version out. The variant
/// (`take-by-name`) broke this draw until the `drops-own-landing` fix (a read of a
/// lease named after this host at another epoch is still its own) sent its run down
/// another path; the model keeps the variant (`model/tests/deploys.rs`).
#[test]
fn a_new_life_whose_lost_take_raced_its_zombies_waits_the_zombie_out() {
    let cfg = swarm::draw(4_308_821);
    assert_eq!(cfg.scenario, Scenario::HotPartition);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
}

/// Seed `seed`'s lease draw as the long swarms that found these seeds ran it: before
/// the swarm drew the checkpoint policy, the leave notice and stuck handlers (last,
/// so that nothing else moved), and before a host told to stop gave notice of its
/// leave, which sends a rolling restart down another path.
fn drawn(seed: u64) -> SimConfig {
    let cfg = swarm::draw(seed);
    SimConfig {
        checkpoint_every: None,
        checkpoint_items: None,
        leave_notice: Some(Millis::ZERO),
        faults: cfg.faults.with(FaultKind::Stuck, 0.0),
        ..cfg
    }
}

/// Seed `seed`'s draw as the long swarm ran it, before the swarm drew Cosmos DB's own
/// faults (lagging replicas, the SDK's retries) last. (A seed replays one engine's
/// run: with today's engine these runs take other turns, so they no longer show the
/// old bugs even under their known-bad variants. The model's variants are what keep
/// those bugs found: `model/tests/cosmos.rs`.)
fn first_draw(seed: u64) -> SimConfig {
    let mut cfg = drawn(seed);
    cfg.faults.set(FaultKind::Stale, 0.0);
    cfg.faults.set(FaultKind::Retry, 0.0);
    cfg
}

/// The text report sizes each column to its widest figure: 7-digit event counts
/// (34 hosts × 2,000 partitions at 1 event a second for 15 minutes) stay apart.
#[test]
fn wide_figures_in_the_text_report_never_run_together() {
    let mut cfg = small(Scenario::Steady, 5);
    cfg.duration = Millis::from_secs(10);
    let mut report = sim::simulate(&cfg, false).unwrap().report;
    report.events_processed = 1_808_814;
    report.events_produced = 18_000_000;
    let mut other = report.clone();
    other.strategy = "cfp".into();
    other.events_processed = 1_800_000;
    other.events_produced = 18_000_000;
    let table = sim::report::table(&[report, other]);
    let line = table
        .lines()
        .find(|l| l.starts_with("events processed / produced"))
        .expect("the events row");
    let cells: Vec<&str> = line
        .trim_start_matches("events processed / produced")
        .split_whitespace()
        .collect();
    assert_eq!(
        cells,
        ["1808814", "/", "18000000", "1800000", "/", "18000000"],
        "{table}"
    );
}

/// A long single run tells how far it has come (`sim steady` at a million partitions
/// showed nothing for minutes): the hook the command line's progress bar draws from
/// sees the virtual time rise towards the deadline.
#[test]
fn a_long_run_reports_its_progress_in_virtual_time() {
    let mut cfg = SimConfig::scenario(Scenario::Steady, 1);
    cfg.partitions = 20;
    cfg.workload.rate = 50.0;
    cfg.duration = leasehold_engine::Millis::from_secs(120);
    let mut seen = Vec::new();
    let run = leasehold_sims::sim::simulate_with(&cfg, false, &mut |now| seen.push(now)).unwrap();
    assert!(run.report.passed());
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(*seen.last().unwrap() <= cfg.deadline().as_millis());
}

/// Seeds 3934200 (a scale-out under `cfp`) and 3934210 (steady, `handoff`), drawn
/// with lagging replicas: a host refused a write (412) was shown that very version
/// again by a replica that lags and wrote it again at once, a busy loop against the
/// store for as long as the replica lagged (the two-region emulator run spun so at
/// 100 % CPU on a paused clock). Today the version refused is never written again;
/// under `rewrite-refused-version` both runs do.
#[test]
fn a_version_the_store_refused_is_never_written_again() {
    for seed in [3_934_200, 3_934_210] {
        let cfg = swarm::draw(seed);
        assert!(kinds(&cfg).is_empty(), "seed {seed}: {:?}", kinds(&cfg));
        let bad = SimConfig {
            bug: Some(Bug::Engine(KnownBad::RewriteRefusedVersion)),
            ..cfg
        };
        assert!(kinds(&bad).contains(&ViolationKind::Rewrite), "seed {seed}");
    }
}

/// The long swarm's seed 4176986 (hot-partition, handoff): a host paused until the
/// heal had its next wake due at that very instant. The simulator dropped the wake
/// while the host was paused but still took it for pending, armed none at the resume,
/// and the host slept to the end of the run with its leases gone to others: a
/// liveness violation (the loads 10 apart) that was the simulator's, not the engine's.
/// A wake dropped in a pause is now forgotten, and the resume arms the next.
#[test]
fn a_host_whose_wake_falls_at_the_instant_its_pause_ends_still_wakes() {
    let cfg = swarm::draw(4_176_986);
    assert_eq!(cfg.scenario, Scenario::HotPartition);
    assert!(kinds(&cfg).is_empty(), "{:?}", kinds(&cfg));
}

/// The faults that lose calls mid-batch, with handlers stuck in blocking code
/// `stuck` windows per host per hour: a steady run of the default size (handoff loses
/// few calls mid-batch in the small one) for `strategy` on `seed`, with 5 minutes of
/// faults.
fn stuck_handlers(
    strategy: &str,
    liveness: Option<Liveness>,
    seed: u64,
    stuck: f64,
) -> sim::RunReport {
    let mut cfg = SimConfig::scenario(Scenario::Steady, seed);
    cfg.duration = Millis::from_secs(300);
    cfg.strategy = parse_strategy(strategy).unwrap();
    cfg.liveness = liveness;
    cfg.faults = Faults::NONE
        .with(FaultKind::Stuck, stuck)
        .with(FaultKind::Partition, 15.0)
        .with(FaultKind::Timeout, 30.0)
        .with(FaultKind::Throttle, 30.0);
    sim::simulate(&cfg, false).expect("a valid run").report
}

/// A call lost while its host's handlers are stuck is neither ended by its batch nor
/// by the runtime's abort: it runs on past the stop timeout, the engine gives its
/// lease up beside it (handoff passes it on through its heartbeats, cfp frees it),
/// and every property holds, liveness after the heal included.
#[test]
fn a_call_stuck_past_the_stop_timeout_leaves_its_lease_to_be_processed_again() {
    for (strategy, liveness, seed) in [
        ("handoff", Some(Liveness::Session), 20),
        ("handoff", Some(Liveness::Lease), 20),
        ("cfp", None, 20),
    ] {
        let report = stuck_handlers(strategy, liveness, seed, 300.0);
        println!(
            "{strategy} {liveness:?}: {} lost calls, {} stuck, {} aborted",
            report.lost_calls, report.stuck_calls, report.aborted_calls
        );
        assert!(
            report.stuck_calls > 0,
            "{strategy} {liveness:?}: no call got stuck"
        );
        assert!(
            report.violations.is_empty(),
            "{strategy} {liveness:?}: {:?}",
            report.violations
        );
    }
}

/// The sibling: the same faults without stuck handlers lose calls too, and every one
/// ends within its grace (its batch ends, or the runtime aborts it).
#[test]
fn without_stuck_handlers_every_lost_call_ends_within_its_grace() {
    let report = stuck_handlers("cfp", None, 20, 0.0);
    assert!(report.lost_calls > 0, "no call was lost");
    assert_eq!(report.stuck_calls, 0);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

/// The swarm's seed 4838351 (hot-partition, `cfp`, a checkpoint at most every 7 s):
/// h01's call of partition 0 was told its lease was lost inside a stuck window and
/// ran on for minutes. The events it committed before the loss are judged against
/// the interval up to the loss, when the engine stopped writing for the call; judged
/// up to its late return (or, before it, up to the next start), they looked held
/// back for two and a half minutes.
#[test]
fn a_stuck_calls_held_back_events_are_judged_up_to_its_loss() {
    let cfg = swarm::draw(4_838_351);
    let report = sim::simulate(&cfg, false).expect("a valid run").report;
    assert!(report.stuck_calls > 0, "no call got stuck");
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}
