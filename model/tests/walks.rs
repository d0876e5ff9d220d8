//! Seeded random walks through the partition model: what they find, that a seed finds
//! it again on any thread count, and that they never claim a property holds.

/// The walks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use common::model;
use leasehold_model::check::{self, Cut, Options, Outcome, Search, Stop};
use leasehold_model::{Bounds, Bug, KnownBad, PartitionModel, PartitionReport, properties as p};
use std::time::Duration;

/// The bound at which judging a tenure by read order gives a lease two owners.
fn stale_tenure(bug: Option<Bug>) -> Bounds {
    Bounds {
        bug,
        ..Bug::Engine(KnownBad::TenureByReadOrder).bounds()
    }
}

fn walks(model: &PartitionModel, seed: u64, threads: usize, max_states: usize) -> PartitionReport {
    let options = Options {
        search: Search::Walks { seed },
        threads,
        max_states: Some(max_states),
        stop: Stop::FirstCounterexample,
        ..Options::default()
    };
    check::check(model, &options, Duration::from_secs(600), |_| {})
}

#[test]
fn a_walk_that_breaks_a_property_is_found_again_by_its_seed_on_any_thread_count() {
    let bounds = stale_tenure(Some(Bug::Engine(KnownBad::TenureByReadOrder)));
    let shortest = common::broken(bounds.clone(), p::EXCLUSIVITY);
    let model = model(bounds);
    for seed in [1, 2, 3] {
        let one = walks(&model, seed, 1, 1_000_000);
        let two = walks(&model, seed, 2, 1_000_000);
        let found = |r: &PartitionReport| r.verdict(p::EXCLUSIVITY).encoded.clone();
        assert_eq!(one.verdict(p::EXCLUSIVITY).outcome, Outcome::Counterexample);
        assert_eq!(found(&one), found(&two), "seed {seed}");
        // Every discovery, `sometimes` ones included: what a later walk already running
        // on the other thread found is not reported.
        let all = |r: &PartitionReport| {
            r.verdicts
                .iter()
                .map(|v| (v.property, v.outcome, v.encoded.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(all(&one), all(&two), "seed {seed}");
        assert_eq!(one.cut, Some(Cut::Discovery));
        let path = found(&one).expect("an encoded path");
        let replayed = check::replay(&model, &path).expect("the walk replays");
        let last = &replayed.last().expect("a last state").0;
        assert!(p::broken(&model, last).contains(&p::EXCLUSIVITY));
        // No walk is shorter than the shortest counterexample, breadth first.
        assert!(replayed.len() > shortest, "seed {seed}");
    }
    // Another seed walks another way: the seed, not the thread count, chooses.
    let paths: std::collections::BTreeSet<_> = (1..=3)
        .map(|seed| {
            walks(&model, seed, 1, 1_000_000)
                .verdict(p::EXCLUSIVITY)
                .encoded
                .clone()
        })
        .collect();
    assert!(paths.len() > 1, "three seeds walked one path");
}

#[test]
fn random_walks_never_say_a_property_holds() {
    // The shipped protocol holds at this bound, and an exhaustive check says so.
    let model = model(stale_tenure(None));
    let walked = walks(&model, 1, 2, 20_000);
    assert!(!walked.complete());
    assert_eq!(walked.cut, Some(Cut::States));
    assert!(walked.progress.walks.is_some_and(|w| w > 0));
    assert_eq!(walked.verdict(p::EXCLUSIVITY).outcome, Outcome::Incomplete);
    let exhaustive = common::proven_for(stale_tenure(None), &[p::EXCLUSIVITY]);
    assert_eq!(exhaustive.verdict(p::EXCLUSIVITY).outcome, Outcome::Holds);
}

/// A take given up on lands after its host's re-read showed the lease free: the store
/// names the host, whose view names nobody, and the other host sees the lease held.
/// Forgotten at that re-read (`take-lands-unseen`), the lease is processed by nobody
/// until the audit: about 45 steps over 20 s, which a depth-first search did not reach
/// in 120 s, and the 439th random walk of seed 1 does (BENCHMARKS.md).
fn landing(bug: Option<Bug>) -> Bounds {
    Bounds {
        bug,
        ..Bug::Engine(KnownBad::TakeLandsUnseen).bounds()
    }
}

#[test]
fn random_walks_find_a_take_that_lands_unseen_after_its_reread() {
    let model = model(landing(Some(Bug::Engine(KnownBad::TakeLandsUnseen))));
    let report = walks(&model, 1, 2, 300_000);
    let verdict = report.verdict(p::KNOWN);
    assert_eq!(verdict.outcome, Outcome::Counterexample);
    let path = verdict.path.as_ref().expect("a path");
    println!("{}", leasehold_model::trace::render(&model, path));
}

#[test]
fn the_same_walks_find_nothing_once_a_take_that_may_land_keeps_its_host_reading() {
    let model = model(landing(None));
    let report = walks(&model, 1, 2, 300_000);
    assert_eq!(report.cut, Some(Cut::States));
    assert!(!report.violated(), "{:?}", report.verdicts);
}

/// One host: its heartbeat's answer is late and its authority lapses; its resume is
/// given up on and lands after its re-read; its next resume is refused, and a lagging
/// replica serves the version it knew. The walks found `drops-own-landing` here (the
/// 277th walk of seed 1), but only because the host then took that refused version up
/// again (`owns-refused-version`); since that fix no walk reaches it. The shipped
/// protocol's walks stay.
fn own_landing(bug: Option<Bug>) -> Bounds {
    Bounds {
        bug,
        ..Bug::Engine(KnownBad::DropsOwnLanding).bounds()
    }
}

#[test]
fn the_same_walks_find_nothing_once_its_own_landed_version_is_processed() {
    let model = model(own_landing(None));
    let report = walks(&model, 1, 2, 300_000);
    assert_eq!(report.cut, Some(Cut::States));
    assert!(!report.violated(), "{:?}", report.verdicts);
}

/// Two hosts: h1's heartbeat renewal, which claims a lease, is held on the wire; h1
/// crashes and restarts, and its new life waits out the earlier life's heartbeat.
/// The held renewal then lands and revives the claim; h0 hands the lease to it, and
/// the new life, which learns of the landed version only at its next heartbeat, waits
/// that out too before it joins. Judged from the restart alone, balance was judged too
/// early there: the 120th walk of seed 1 broke it, on the shipped protocol.
fn relived(bug: Option<Bug>) -> Bounds {
    Bounds {
        hosts: 2,
        partitions: 2,
        crashes: 1,
        delays: 1,
        progress: 2,
        slow_drains: 1,
        horizon: 15,
        bug,
        ..Bounds::default()
    }
}

#[test]
fn balance_waits_for_a_new_life_that_learns_late_of_its_earlier_lifes_landed_claim() {
    let model = model(relived(None));
    assert!(model.relive_balance_ticks > model.rejoin_balance_ticks);
    let report = walks(&model, 1, 2, 300_000);
    assert_eq!(report.cut, Some(Cut::States));
    assert!(!report.violated(), "{:?}", report.verdicts);
}

#[test]
fn balance_judged_from_the_restart_alone_breaks_when_an_earlier_lifes_claim_lands_late() {
    let mut model = model(relived(None));
    model.relive_balance_ticks = model.rejoin_balance_ticks;
    let report = walks(&model, 1, 2, 300_000);
    let verdict = report.verdict(p::BALANCED);
    assert_eq!(verdict.outcome, Outcome::Counterexample);
    let path = verdict.path.as_ref().expect("a path");
    let trace = leasehold_model::trace::render(&model, path);
    assert!(trace.contains("no longer the life that sent it"), "{trace}");
}

/// Two hosts, two leases, one of every fault kind, 30 s: h1 turns zombie and
/// restarts; h0 crashes, and its new life's read of the earlier life's heartbeat is
/// answered late, while h1 fences that tenure and takes its lease; h1 then retires the
/// heartbeat, and the new life joins only at its next renewal (404, a new tenure),
/// claiming a lease 3 s later. Random walks (seed 27, the 184,797th walk) met owned
/// counts apart at 21 s, judged from the late answer's step as if the new life had
/// learned of its earlier heartbeat at once; a held write landing for a restarted
/// host already counted so.
fn every_fault_once() -> Bounds {
    Bounds {
        lost_replies: 1,
        shutdowns: 1,
        zombies: 1,
        pauses: 1,
        delays: 2,
        stale_reads: 1,
        late_replies: 1,
        retries: 1,
        throttled_reads: 1,
        stuck_calls: 1,
        splits: 1,
        horizon: 30,
        ..Bounds::quiet()
    }
}

/// The walk, as `leasehold check partitions` printed it with the flags above.
const LATE_ANSWER_TO_A_NEW_LIFE: &str = "0/0/0/7/7/0/0/5/4/0/2/0/5/0/5/5/0/0/5/31/26/0/5/0/5/\
    0/5/0/0/0/0/12/5/0/5/5/0/23/0/3/0/0/3/0/3/0/3/23/0/3/3/0/0/3/23/0/3/0/3";

#[test]
fn balance_waits_for_a_new_life_whose_read_of_its_earlier_heartbeat_is_answered_late() {
    let lenient = model(every_fault_once());
    let path = check::replay(&lenient, LATE_ANSWER_TO_A_NEW_LIFE).expect("the walk replays");
    assert!(path.iter().all(|(s, _)| p::broken(&lenient, s).is_empty()));
    // The sibling: balance judged with no wait after a late answer (or a held write)
    // reaches a restarted host breaks at the walk's last state.
    let mut hasty = model(every_fault_once());
    hasty.relive_balance_ticks = 0;
    let path = check::replay(&hasty, LATE_ANSWER_TO_A_NEW_LIFE).expect("the walk replays");
    let last = &path.last().expect("a last state").0;
    assert_eq!(p::broken(&hasty, last), [p::BALANCED]);
}

/// Random walks (seed 27 again, once the late answer above was counted) met a new
/// life held back by faults of its own steps: h1 restarts, its first heartbeat's
/// create is answered 409 (its earlier life's heartbeat is there) with the reply
/// lost, and its read of that heartbeat is then throttled. It learns of the earlier
/// heartbeat only at its next renewal, h0 fences that tenure meanwhile, and h1 joins
/// seven seconds after its restart; owned counts were apart at 15 s, judged from the
/// restart.
const FAULTS_HOLD_BACK_A_NEW_LIFE: &str = "0/27/11/4/5/2/3/0/5/5/1/2/0/0/2/2/1/1/4/0/1/0/4/3/\
    1/0/0/0/0/0/0/0/1/0/0/0/0/0/0/0/0/0/1/0/0/0";

#[test]
fn balance_waits_for_a_new_life_whose_first_heartbeat_reply_is_lost_and_read_throttled() {
    let lenient = model(every_fault_once());
    let path = check::replay(&lenient, FAULTS_HOLD_BACK_A_NEW_LIFE).expect("the walk replays");
    assert!(path.iter().all(|(s, _)| p::broken(&lenient, s).is_empty()));
    // The sibling: no wait after a restarted host's faults breaks balance at the
    // walk's last state.
    let mut hasty = model(every_fault_once());
    hasty.relive_balance_ticks = 0;
    let path = check::replay(&hasty, FAULTS_HOLD_BACK_A_NEW_LIFE).expect("the walk replays");
    let last = &path.last().expect("a last state").0;
    assert_eq!(p::broken(&hasty, last), [p::BALANCED]);
}

/// Three hosts, three leases, one pause: h1 fences the paused h0 and takes all three,
/// then hands lease 2 to h2's claim. h0 last read the table before that handoff;
/// its next read is of the heartbeats alone, which shows h2's claim gone, and it
/// begins a claim. Named from its view of the table (`stale-claim`), the claim is for
/// lease 2, which h2 holds at its share and keeps; h0 learns so only at its next read
/// of the table, and owned counts stay apart a tick past the balance bound. Found by
/// random walks, the 17,296th of seed 1.
fn stale_claim(bug: Option<Bug>) -> Bounds {
    Bounds {
        bug,
        ..Bug::Engine(KnownBad::StaleClaim).bounds()
    }
}

/// The variant's counterexample as the walks found it, 37 steps.
const STALE_CLAIM: &str =
    "2/0/1/0/0/0/0/3/1/1/0/0/1/0/0/0/0/0/0/0/0/2/0/0/0/0/0/1/1/0/0/1/0/0/0/1/0/0";

/// What every always-property says at each state of `encoded` under `bounds`, and
/// its trace.
fn replayed(bounds: Bounds, encoded: &str) -> (Vec<Vec<&'static str>>, String) {
    let model = model(bounds);
    let path = check::replay(&model, encoded).expect("the path replays");
    let trace = leasehold_model::trace::render(&model, &path);
    let broken = path
        .iter()
        .map(|(state, _)| check::broken(&model, state))
        .collect();
    (broken, trace)
}

#[test]
fn a_claim_named_from_a_table_a_handoff_moved_on_comes_to_balance_late() {
    let (broken, trace) = replayed(
        stale_claim(Some(Bug::Engine(KnownBad::StaleClaim))),
        STALE_CLAIM,
    );
    assert!(
        trace.contains("read-members the lease table: read\n       > h0 sends heartbeat"),
        "{trace}"
    );
    assert!(
        trace.contains("heartbeat h0: etag:5, claims lease 2"),
        "{trace}"
    );
    let last = broken.last().expect("a state");
    assert_eq!(last, &vec![p::BALANCED], "{trace}");
}

/// The sibling: the same choices on the shipped engine. The claim h0 would begin on
/// the heartbeats waits for the table, read at once, and names lease 1, which h1
/// hands over at its next read: no property breaks on the way.
#[test]
fn a_claim_begun_on_the_heartbeats_alone_waits_for_the_table_and_balance_comes_in_time() {
    let (broken, trace) = replayed(stale_claim(None), STALE_CLAIM);
    assert!(
        trace.contains("read-members the lease table: read\n       > h0 sends scan"),
        "{trace}"
    );
    assert!(
        trace.contains("heartbeat h0: etag:5, claims lease 1"),
        "{trace}"
    );
    assert!(trace.contains("lease 1: owner h0"), "{trace}");
    let broken: Vec<&str> = broken.into_iter().flatten().collect();
    assert_eq!(broken, Vec::<&str>::new(), "{trace}");
}

/// The walks that found `stale-claim`: about 1.6 M states, 17 s in release on two
/// threads, hence ignored.
#[test]
#[ignore = "about 20 s: run with --ignored"]
fn random_walks_find_a_claim_named_from_a_table_a_handoff_moved_on() {
    let model = model(stale_claim(Some(Bug::Engine(KnownBad::StaleClaim))));
    let report = walks(&model, 1, 2, 2_000_000);
    assert_eq!(report.verdict(p::BALANCED).outcome, Outcome::Counterexample);
}

#[test]
#[ignore = "about 20 s: run with --ignored"]
fn the_same_walks_find_nothing_once_a_claim_waits_for_the_table() {
    let model = model(stale_claim(None));
    let report = walks(&model, 1, 2, 2_000_000);
    assert_eq!(report.cut, Some(Cut::States));
    assert!(!report.violated(), "{:?}", report.verdicts);
}
