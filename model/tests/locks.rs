//! Model checks of the work queue and item leases at the bounds `cargo test` can
//! afford, and the known-bad variants, each of which must yield a counterexample.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_model::check::{self, Cut, Options, Outcome, Report, Search, Stop};
use leasehold_model::trace::{self, Explain};
use leasehold_model::{
    ItemKnownBad, ItemModel, LockBounds, LockBug, LockKind, QueueKnownBad, QueueModel, items, queue,
};
use std::time::Duration;

fn exhaustive<M: check::Checkable + Explain>(model: &M) -> Report<M::State, M::Action>
where
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let options = Options {
        search: Search::Dfs,
        threads: 2,
        ..Options::default()
    };
    let report = check::check(model, &options, Duration::from_secs(60), |_| {});
    assert!(report.complete(), "the check must explore every state");
    eprintln!(
        "{} states, {} unique, {:.1} s",
        report.progress.states, report.progress.unique, report.progress.seconds
    );
    report
}

fn assert_proven<S, A>(report: &Report<S, A>) {
    for v in &report.verdicts {
        let ok = if v.always {
            v.outcome == Outcome::Holds
        } else {
            v.outcome == Outcome::Reached
        };
        assert!(ok, "{}: {}", v.property, v.outcome.word());
    }
}

/// Checks `model` exhaustively: every queue property holds, and `sometimes` (the
/// event the bound is there to show) is reached.
fn every_queue_property_holds(model: &QueueModel, sometimes: &str) {
    let report = exhaustive(model);
    for v in report.verdicts.iter().filter(|v| v.always) {
        assert_eq!(v.outcome, Outcome::Holds, "{}", v.property);
    }
    assert_eq!(report.verdict(sometimes).outcome, Outcome::Reached);
}

/// Finds the shortest counterexample to `property`, checks that it replays to a state
/// that breaks it, and returns its trace.
fn counterexample<M: check::Checkable + Explain>(model: &M, property: &str) -> String
where
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    counterexample_by(model, property, Search::Bfs)
}

/// Finds a counterexample to `property` by `search`, checks that it replays to a state
/// that breaks it, and returns its trace. Breadth first (on one thread) finds a
/// shortest one; depth first finds one without first exploring every shorter path,
/// which is all a check that a bound is tight needs.
fn counterexample_by<M: check::Checkable + Explain>(
    model: &M,
    property: &str,
    search: Search,
) -> String
where
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let options = Options {
        search,
        // One thread: the same counterexample every run.
        threads: 1,
        stop: Stop::FirstCounterexample,
        ..Options::default()
    };
    let report = check::check(model, &options, Duration::from_secs(60), |_| {});
    let verdict = report.verdict(property);
    assert_eq!(verdict.outcome, Outcome::Counterexample, "{property}");
    let path = verdict.path.as_ref().expect("a counterexample has a path");
    let encoded = verdict.encoded.as_ref().expect("and an encoding");
    let replayed = check::replay(model, encoded).expect("the path replays");
    let last = &replayed.last().expect("non-empty").0;
    assert!(
        check::broken(model, last).contains(&property),
        "the replay breaks {property}"
    );
    let text = trace::render(model, path);
    eprintln!("{property} ({} steps):\n{text}", path.len() - 1);
    text
}

fn queue_bounds() -> LockBounds {
    LockBounds {
        lost_replies: 0,
        delays: 0,
        ..LockBounds::default()
    }
}

/// Checks `model` exhaustively: every `always` property holds, and every `sometimes`
/// one is reached but those in `not_reached`, which the bound cannot reach.
fn every_property_holds_but<M: check::Checkable + Explain>(model: &M, not_reached: &[&str])
where
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    let report = exhaustive(model);
    for v in &report.verdicts {
        let want = match (v.always, not_reached.contains(&v.property)) {
            (true, _) => Outcome::Holds,
            (false, true) => Outcome::NotReached,
            (false, false) => Outcome::Reached,
        };
        assert_eq!(v.outcome, want, "{}", v.property);
    }
}

/// The queue's `sometimes` properties a bound without a held or lost write, or with
/// two messages, cannot reach: refusing a stale completion, or finding one's own,
/// needs a held or lost write; a dequeue that both moves a poison message and
/// delivers needs a third message.
const NEED_LOST: [&str; 4] = [
    queue::STALE_REFUSED,
    queue::OWN_COMPLETION_FOUND,
    queue::POISON_THEN_DELIVERED,
    queue::LOST_THEN_DELIVERED,
];

#[test]
fn two_consumers_two_messages_and_a_crash_under_skew_and_drift_keep_every_queue_property() {
    let bounds = LockBounds {
        horizon: queue_bounds().liveness_ticks(LockKind::Queue) + 2,
        ..queue_bounds()
    };
    every_property_holds_but(&QueueModel::new(bounds).unwrap(), &NEED_LOST);
}

/// `check queue --stale-reads 1`: a dequeue's read, or any other, may be served by a
/// replica that lags, as at Session consistency (919,820 unique states).
#[test]
fn reads_from_a_lagging_replica_keep_every_queue_property() {
    let bounds = LockBounds {
        stale_reads: 1,
        horizon: queue_bounds().liveness_ticks(LockKind::Queue) + 1,
        ..queue_bounds()
    };
    // A claim made on a lagging replica's answer is refused, and the dequeue reads
    // again for the place it left.
    let not_reached = [
        queue::STALE_REFUSED,
        queue::OWN_COMPLETION_FOUND,
        queue::POISON_THEN_DELIVERED,
    ];
    every_property_holds_but(&QueueModel::new(bounds).unwrap(), &not_reached);
}

/// The stale read reaches the properties: a claim without if-match on a message a
/// lagging replica shows visible takes a message another consumer holds.
#[test]
fn a_blind_claim_on_a_lagging_replicas_answer_takes_a_held_message() {
    let bounds = LockBounds {
        stale_reads: 1,
        give_backs: 0,
        bug: Some(LockBug::BlindClaim),
        ..queue_bounds()
    };
    counterexample(&QueueModel::new(bounds).unwrap(), queue::EXCLUSIVE);
}

/// `check queue --retries 1`: a write applied and then answered as the SDK's retry
/// finds the store (589,272 unique states). A completion's retry that finds the
/// message gone is its own landing.
#[test]
fn writes_the_sdk_retried_after_they_landed_keep_every_queue_property() {
    let bounds = LockBounds {
        retries: 1,
        horizon: queue_bounds().liveness_ticks(LockKind::Queue) + 1,
        ..queue_bounds()
    };
    // A completion's retry finds its own landing; a claim's, answered 412, counts as
    // lost, and the dequeue reads again for the place it left.
    let not_reached = [queue::STALE_REFUSED, queue::POISON_THEN_DELIVERED];
    every_property_holds_but(&QueueModel::new(bounds).unwrap(), &not_reached);
}

/// The retry reaches the properties: read the earlier way, a completion the SDK
/// retried after it landed is reported lost.
#[test]
fn read_the_earlier_way_a_completion_the_sdk_retried_is_reported_lost() {
    let bounds = LockBounds {
        retries: 1,
        lost_replies: 0,
        ..lost_completion_reply(Some(LockBug::Engine(QueueKnownBad::GoneMeansLost)))
    };
    counterexample(
        &QueueModel::new(bounds).unwrap(),
        queue::COMPLETION_ANSWERED,
    );
}

#[test]
fn lost_replies_and_delayed_writes_keep_every_queue_property() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        lost_replies: 1,
        delays: 1,
        horizon: 7,
        ..LockBounds::default()
    };
    every_queue_property_holds(&QueueModel::new(bounds).unwrap(), queue::STALE_REFUSED);
}

/// The poison variant's least bound: one consumer that may crash once, three
/// messages, one delivery each.
fn poison_backlog(bug: Option<LockBug>) -> LockBounds {
    least_queue_bound(QueueKnownBad::PoisonSpendsBatch, bug)
}

/// The queue bounds at `variant`'s least bound, running `bug` (the variant, or none).
fn least_queue_bound(variant: QueueKnownBad, bug: Option<LockBug>) -> LockBounds {
    let least = LockBug::Engine(variant).least_bound();
    let base = queue_bounds();
    LockBounds {
        clients: least.hosts.unwrap_or(base.clients),
        docs: least.partitions.unwrap_or(base.docs),
        crashes: least.crashes.unwrap_or(base.crashes),
        give_backs: least.give_backs.unwrap_or(base.give_backs),
        max_dequeue: least.max_dequeue.unwrap_or(base.max_dequeue),
        delays: least.delays.unwrap_or(base.delays),
        lost_replies: least.lost_replies.unwrap_or(base.lost_replies),
        bug,
        ..base
    }
}

/// A poison message ahead of a healthy one in visibility order (the crashed life's
/// message, its lock expired after its one delivery) is moved to the dead letters and
/// the same dequeue goes on to deliver the healthy one.
#[test]
fn a_poison_message_takes_no_place_in_the_batch() {
    let report = exhaustive(&QueueModel::new(poison_backlog(None)).unwrap());
    assert_eq!(
        report.verdict(queue::POISON_TAKES_NO_PLACE).outcome,
        Outcome::Holds
    );
    assert_eq!(
        report.verdict(queue::POISON_THEN_DELIVERED).outcome,
        Outcome::Reached
    );
}

/// The sibling, the simulator's seed 2838879: a batch of one spent on the poison
/// message delivers nothing while the healthy one waits behind it.
#[test]
fn a_batch_spent_on_a_poison_message_leaves_a_healthy_one_waiting() {
    let model = QueueModel::new(poison_backlog(Some(LockBug::Engine(
        QueueKnownBad::PoisonSpendsBatch,
    ))))
    .unwrap();
    let text = counterexample(&model, queue::POISON_TAKES_NO_PLACE);
    assert!(text.contains("0 delivered, 1 dead-lettered"), "{text}");
}

/// The lost claim's least bound: two consumers, two messages, one claim held on the
/// wire while the other consumer claims the same message.
fn contended_claim(bug: Option<LockBug>) -> LockBounds {
    least_queue_bound(QueueKnownBad::LostClaimWaitsPoll, bug)
}

/// A consumer whose claim another consumer won reads again and delivers the next
/// visible message in the same dequeue; every queue property holds.
#[test]
fn a_claim_lost_to_another_consumer_takes_no_place_in_the_batch() {
    every_queue_property_holds(
        &QueueModel::new(contended_claim(None)).unwrap(),
        queue::LOST_THEN_DELIVERED,
    );
}

/// A dequeue that moved a poison message and then claimed a healthy one, its claim
/// held on the wire until its driver gave it up: the claim may yet land, so its place
/// is spent and no message waits for it. The properties counted that place free, and
/// reported a counterexample on the shipped consumer at this bound, until they
/// counted such a claim (the review of `lost-move-waits-poll`).
#[test]
fn a_claim_given_up_on_the_wire_spends_its_place_in_the_batch() {
    let bounds = LockBounds {
        clients: 2,
        docs: 3,
        crashes: 1,
        give_backs: 0,
        max_dequeue: 1,
        delays: 1,
        horizon: 3,
        ..queue_bounds()
    };
    every_queue_property_holds(
        &QueueModel::new(bounds).unwrap(),
        queue::POISON_THEN_DELIVERED,
    );
}

/// The lost poison move's least bound: two consumers, five messages, one crash, one
/// delivery each, one move held on the wire while the other consumer's lands.
fn contended_move(bug: Option<LockBug>) -> LockBounds {
    let least = LockBug::Engine(QueueKnownBad::LostMoveWaitsPoll).least_bound();
    LockBounds {
        horizon: least.horizon.unwrap(),
        ..least_queue_bound(QueueKnownBad::LostMoveWaitsPoll, bug)
    }
}

/// A dequeue whose move of a stranded poison message another consumer beat (the
/// move refused, the message moved already) reads again and delivers the message
/// behind it; every queue property holds.
#[test]
fn a_poison_move_lost_to_another_consumer_takes_no_place_in_the_batch() {
    every_queue_property_holds(
        &QueueModel::new(contended_move(None)).unwrap(),
        queue::POISON_THEN_DELIVERED,
    );
}

/// The sibling (`lost-move-waits-poll`, the consumer's earlier dequeue): the refused
/// move ends the dequeue with its place unused while a fifth message waits a poll.
#[test]
fn a_lost_poison_move_leaves_the_next_message_waiting() {
    let model = QueueModel::new(contended_move(Some(LockBug::Engine(
        QueueKnownBad::LostMoveWaitsPoll,
    ))))
    .unwrap();
    let text = counterexample(&model, queue::LOST_CLAIM_TAKES_NO_PLACE);
    assert!(text.contains("0 delivered, 0 dead-lettered"), "{text}");
    assert!(text.contains("404"), "{text}");
}

/// The sibling, the simulator's seed 4065274: a dequeue that lost its claim ends with
/// its place unused while the next message waits for a poll.
#[test]
fn a_dequeue_that_lost_its_claim_leaves_the_next_message_waiting() {
    let model = QueueModel::new(contended_claim(Some(LockBug::Engine(
        QueueKnownBad::LostClaimWaitsPoll,
    ))))
    .unwrap();
    let text = counterexample(&model, queue::LOST_CLAIM_TAKES_NO_PLACE);
    assert!(text.contains("0 delivered, 0 dead-lettered"), "{text}");
}

/// The backlog's order kept wrong (`dequeue-unordered`: the visible messages read in id
/// order, so an abandoned message, visible again later, still comes first) breaks no
/// queue property: none promises an order, and every dequeue still claims what it
/// reads. What it breaks is fairness, which `engine/tests/queue.rs` checks with the
/// same tampering as its known-bad sibling. This test fails if a property ever starts
/// to depend on the order.
#[test]
fn the_backlogs_order_kept_wrong_breaks_no_queue_property() {
    let bounds = LockBounds {
        bug: Some(LockBug::DequeueUnordered),
        horizon: queue_bounds().liveness_ticks(LockKind::Queue) + 2,
        ..queue_bounds()
    };
    let report = exhaustive(&QueueModel::new(bounds).unwrap());
    for v in &report.verdicts {
        let always = !v.property.starts_with("sometimes");
        assert!(!always || v.outcome == Outcome::Holds, "{v:?}");
    }
}

#[test]
fn the_seeds_dequeue_predicate_delivers_a_locked_message_twice() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        bug: Some(LockBug::DequeueSeed),
        ..queue_bounds()
    };
    let text = counterexample(&QueueModel::new(bounds).unwrap(), queue::EXCLUSIVE);
    assert!(text.contains("c1 gets m0"), "{text}");
}

#[test]
fn a_dequeue_that_skips_expired_locks_loses_a_crashed_consumers_message() {
    let bounds = LockBounds {
        docs: 1,
        give_backs: 0,
        bug: Some(LockBug::DequeueNoExpired),
        ..queue_bounds()
    };
    counterexample(&QueueModel::new(bounds).unwrap(), queue::NO_LOSS);
}

#[test]
fn blind_claims_break_the_dequeue_count() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        delays: 1,
        give_backs: 0,
        bug: Some(LockBug::BlindClaim),
        ..queue_bounds()
    };
    counterexample(&QueueModel::new(bounds).unwrap(), queue::DEQUEUE_COUNT);
}

#[test]
fn a_blind_completion_by_a_stale_holder_succeeds() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        delays: 1,
        give_backs: 0,
        bug: Some(LockBug::BlindComplete),
        ..queue_bounds()
    };
    counterexample(&QueueModel::new(bounds).unwrap(), queue::STALE_COMPLETION);
}

/// One message, a completion whose reply is lost, and the retry that follows.
fn lost_completion_reply(bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        docs: 1,
        crashes: 0,
        lost_replies: 1,
        give_backs: 0,
        horizon: 7,
        bug,
        ..queue_bounds()
    }
}

/// A completion that landed with its reply lost is retried: confirmed while its lock
/// still excludes everyone else, and never reported lost (the retry finds its own
/// earlier attempt, which is what the `sometimes` shows).
#[test]
fn a_retried_completion_is_never_reported_lost_when_its_first_attempt_landed() {
    let report = exhaustive(&QueueModel::new(lost_completion_reply(None)).unwrap());
    assert_eq!(
        report.verdict(queue::COMPLETION_ANSWERED).outcome,
        Outcome::Holds
    );
    assert_eq!(
        report.verdict(queue::OWN_COMPLETION_FOUND).outcome,
        Outcome::Reached
    );
}

/// The sibling: the consumer's earlier reading of a 404 tells the consumer that
/// its lock was lost, although its own completion deleted the message.
#[test]
fn read_the_earlier_way_a_retried_completion_that_landed_is_reported_lost() {
    let bounds = lost_completion_reply(Some(LockBug::Engine(QueueKnownBad::GoneMeansLost)));
    let text = counterexample(
        &QueueModel::new(bounds).unwrap(),
        queue::COMPLETION_ANSWERED,
    );
    assert!(text.contains("REPLY IS LOST"), "{text}");
    assert!(text.contains("lock on message q:m0 is lost"), "{text}");
}

#[test]
fn locks_without_a_drift_allowance_overlap_when_clocks_drift() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        pauses: 3,
        give_backs: 0,
        skew: 0,
        bug: Some(LockBug::LockNoDrift),
        ..queue_bounds()
    };
    counterexample(&QueueModel::new(bounds).unwrap(), queue::EXCLUSIVE);
}

#[test]
fn the_same_pauses_with_the_drift_allowance_keep_locks_exclusive() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        pauses: 3,
        give_backs: 0,
        skew: 0,
        horizon: 6,
        ..queue_bounds()
    };
    let report = exhaustive(&QueueModel::new(bounds).unwrap());
    assert_eq!(report.verdict(queue::EXCLUSIVE).outcome, Outcome::Holds);
}

#[test]
fn the_no_loss_bound_is_tight_within_one_tick() {
    let bounds = LockBounds {
        horizon: queue_bounds().liveness_ticks(LockKind::Queue) + 2,
        ..queue_bounds()
    };
    let mut model = QueueModel::new(bounds).unwrap();
    // With a crash and no lost reply the queue has one tick to spare.
    model.liveness_ticks -= 2;
    counterexample(&model, queue::NO_LOSS);
}

fn item_bounds() -> LockBounds {
    LockBounds {
        lost_replies: 0,
        delays: 0,
        ..LockBounds::default()
    }
}

/// `check items` at its defaults: 9.0 M unique states, about 45 s on two threads in
/// a debug build, past what `cargo test` should spend on one check; run by hand with
/// `--ignored`. The one without skew below stays in `cargo test`.
#[test]
#[ignore]
fn two_holders_two_items_and_a_crash_under_skew_and_drift_keep_every_item_property() {
    let bounds = LockBounds {
        horizon: item_bounds().liveness_ticks(LockKind::Items) + 1,
        ..item_bounds()
    };
    assert_proven(&exhaustive(&ItemModel::new(bounds).unwrap()));
}

/// The same with every wall clock true but drift allowed: 3.0 M unique states,
/// about 15 s.
#[test]
fn two_holders_two_items_and_a_crash_under_drift_keep_every_item_property() {
    let bounds = LockBounds {
        skew: 0,
        horizon: item_bounds().liveness_ticks(LockKind::Items) + 1,
        ..item_bounds()
    };
    assert_proven(&exhaustive(&ItemModel::new(bounds).unwrap()));
}

#[test]
fn the_item_processing_bound_is_tight() {
    let bounds = LockBounds {
        horizon: item_bounds().liveness_ticks(LockKind::Items) + 1,
        ..item_bounds()
    };
    let mut model = ItemModel::new(bounds).unwrap();
    model.liveness_ticks -= 1;
    // The late counterexample lies at the horizon: breadth first explored nearly every
    // state to reach it (10.7 s; depth first 1.7 s: BENCHMARKS.md, "Model checking").
    counterexample_by(&model, items::PROCESSED, Search::Dfs);
}

/// Item leases at 2 × 2 with a crash and one lease write whose outcome its writer
/// never learns as a success (`lost` replies lost, `retries` answered 412 by the
/// SDK's retry), no wall-clock skew and no breaks, at the processing bound and one
/// tick past.
fn unknown_outcome(lost: u8, retries: u8, drift_ms: u16) -> ItemModel {
    let bounds = LockBounds {
        skew: 0,
        drift_ms,
        give_backs: 0,
        lost_replies: lost,
        retries,
        ..item_bounds()
    };
    let horizon = bounds.liveness_ticks(LockKind::Items) + 1;
    ItemModel::new(LockBounds { horizon, ..bounds }).unwrap()
}

/// With true clocks, so that `cargo test` can afford it: 870,291 unique states, about
/// 7 s. (With drift the bound is past what a test should spend: BENCHMARKS.md,
/// "twenty-seventh session".)
#[test]
fn an_item_lease_whose_reply_was_lost_keeps_every_item_property() {
    every_property_holds_but(&unknown_outcome(1, 0, 0), &[items::BROKEN]);
}

/// 776,506 unique states, about 6 s.
#[test]
fn an_item_lease_the_sdk_retried_after_it_landed_keeps_every_item_property() {
    every_property_holds_but(&unknown_outcome(0, 1, 0), &[items::BROKEN]);
}

/// Item leases at 2 × 2 with a crash and one read served by a replica that lags, with
/// true clocks so that `cargo test` can afford it (with drift: BENCHMARKS.md,
/// "twenty-seventh session").
#[test]
fn reads_from_a_lagging_replica_keep_every_item_property() {
    let bounds = LockBounds {
        skew: 0,
        drift_ms: 0,
        give_backs: 0,
        stale_reads: 1,
        ..item_bounds()
    };
    let horizon = bounds.liveness_ticks(LockKind::Items) + 1;
    let model = ItemModel::new(LockBounds { horizon, ..bounds }).unwrap();
    every_property_holds_but(&model, &[items::BROKEN]);
}

/// The stale read reaches the properties: a lease without if-match on an item a
/// lagging replica shows free hands out one another holder holds.
#[test]
fn a_blind_lease_on_a_lagging_replicas_answer_takes_a_held_item() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        stale_reads: 1,
        give_backs: 0,
        bug: Some(LockBug::BlindLease),
        ..item_bounds()
    };
    counterexample(&ItemModel::new(bounds).unwrap(), items::EXCLUSIVE);
}

/// The lease a crashed holder left with its outcome unknown is a second lease to
/// wait out: a survivor that acquires one item at a time first sees it once the
/// first is done. With drifting clocks the bound of one wait, as before any such
/// fault was checked, breaks (`check items --lost-replies 1` did at its defaults),
/// for a lost reply and for the SDK's retry alike (about 13 s each, depth first).
#[test]
fn a_crashed_holders_lease_of_unknown_outcome_costs_a_second_wait() {
    for (lost, retries) in [(1, 0), (0, 1)] {
        let mut model = unknown_outcome(lost, retries, 100);
        let one_wait = LockBounds {
            lost_replies: 0,
            retries: 0,
            ..model.bounds.clone()
        }
        .liveness_ticks(LockKind::Items);
        model.liveness_ticks = one_wait;
        counterexample_by(&model, items::PROCESSED, Search::Dfs);
    }
}

#[test]
fn edcs_early_next_for_state_strands_a_crashed_holders_item() {
    let bounds = LockBounds {
        docs: 1,
        give_backs: 0,
        bug: Some(LockBug::NextForStateNoExpiry),
        ..item_bounds()
    };
    counterexample(&ItemModel::new(bounds).unwrap(), items::PROCESSED);
}

#[test]
fn blind_leases_hand_out_an_item_another_holder_holds() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        delays: 1,
        give_backs: 0,
        bug: Some(LockBug::BlindLease),
        ..item_bounds()
    };
    counterexample(&ItemModel::new(bounds).unwrap(), items::EXCLUSIVE);
}

#[test]
fn a_variant_of_the_other_model_is_refused() {
    let bounds = LockBounds {
        bug: Some(LockBug::BlindLease),
        ..LockBounds::default()
    };
    assert!(QueueModel::new(bounds).is_err());
    assert!(LockBug::parse("dequeue-seed", LockKind::Items).is_err());
}

/// A check told to stop (as Ctrl-C tells the CLI's) ends at once, incomplete, with
/// nothing proven.
#[test]
fn an_interrupted_check_is_incomplete_and_proves_nothing() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let options = Options {
        search: Search::Dfs,
        threads: 1,
        interrupt: Some(flag),
        ..Options::default()
    };
    let bounds = LockBounds {
        lost_replies: 1,
        delays: 1,
        ..LockBounds::default()
    };
    let model = QueueModel::new(bounds).unwrap();
    let report = check::check(&model, &options, Duration::from_secs(60), |_| {});
    assert!(!report.complete());
    assert_eq!(report.cut, Some(Cut::Interrupted));
    assert!(
        report.verdicts.iter().all(|v| v.outcome != Outcome::Holds),
        "{:?}",
        report.verdicts
    );
}

/// A check whose process holds more memory than its cap stops at once, incomplete,
/// with nothing proven and the reason given, rather than grow until the system kills
/// it; the same check under a cap it never reaches runs to the end.
#[test]
#[cfg(target_os = "linux")]
fn a_check_past_its_memory_cap_stops_incomplete_and_says_why() {
    let resident = check::resident_bytes().expect("Linux says how much memory a process holds");
    assert!(resident > 0);
    let small = LockBounds {
        docs: 1,
        crashes: 0,
        ..queue_bounds()
    };
    let model = QueueModel::new(small).unwrap();
    let capped = Options {
        search: Search::Dfs,
        threads: 1,
        max_memory: Some(1),
        ..Options::default()
    };
    let report = check::check(&model, &capped, Duration::from_secs(60), |_| {});
    assert!(!report.complete());
    assert!(
        matches!(report.cut, Some(Cut::Memory { resident }) if resident >= 1),
        "{:?}",
        report.cut
    );
    assert!(report.cut.unwrap().reason().contains("memory cap"));
    assert!(report.verdicts.iter().all(|v| v.outcome != Outcome::Holds));

    let roomy = Options {
        max_memory: Some(resident + (64 << 30)),
        ..capped
    };
    let report = check::check(&model, &roomy, Duration::from_secs(60), |_| {});
    assert!(report.complete(), "{:?}", report.cut);
    assert_eq!(report.cut, None);
}

/// The large-payload mode: consumer 0 produces one payload that takes two parts,
/// both consumers dequeue, complete and sweep.
fn large_bounds(bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        docs: 1,
        give_backs: 0,
        large: true,
        bug,
        ..queue_bounds()
    }
}

/// Checks every property of the large-payload mode under `faults`: each `always`
/// holds, and a large payload is both delivered and, left behind, swept (the other
/// `sometimes` need faults these bounds leave out).
fn large_payload_holds(faults: LockBounds) {
    let bounds = LockBounds {
        horizon: faults.liveness_ticks(LockKind::Queue) + 1,
        ..faults
    };
    let report = exhaustive(&QueueModel::new(bounds).unwrap());
    for v in &report.verdicts {
        if v.always {
            assert_eq!(v.outcome, Outcome::Holds, "{}", v.property);
        }
    }
    for property in [queue::LARGE_DELIVERED, queue::PARTS_SWEPT] {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Reached,
            "{property}"
        );
    }
}

#[test]
fn a_large_payload_is_delivered_whole_and_parts_left_by_a_lost_reply_are_swept() {
    large_payload_holds(LockBounds {
        lost_replies: 1,
        ..large_bounds(None)
    });
}

#[test]
fn a_producer_crashing_between_two_part_writes_leaves_nothing_unswept() {
    large_payload_holds(LockBounds {
        delays: 1,
        ..large_bounds(None)
    });
}

#[test]
fn a_consumer_crashing_while_it_reads_parts_delivers_nothing_partial() {
    large_payload_holds(LockBounds {
        late_replies: 1,
        ..large_bounds(None)
    });
}

#[test]
fn a_message_written_before_its_parts_is_found_with_parts_missing() {
    let bug = Some(LockBug::Engine(QueueKnownBad::ManifestFirst));
    let model = QueueModel::new(LockBounds {
        delays: 1,
        crashes: 0,
        ..large_bounds(bug)
    })
    .unwrap();
    // The consumer's read of a part the store does not hold fails the delivery.
    let trace = counterexample(&model, queue::PAYLOAD_INTACT);
    assert!(
        trace.contains("read-part of q:m0 failed: store: 404"),
        "{trace}"
    );
}

/// A part read from a replica that lags: the first part, written by the producer in
/// another session, is not there yet beside the message that names it. The shipped
/// consumer fails the delivery and takes the message again once its lock runs out.
fn part_from_a_lagging_replica(bug: Option<LockBug>) -> QueueModel {
    let variant = LockBug::Engine(QueueKnownBad::MissingPartIsDamage);
    let least = variant.least_bound();
    QueueModel::new(LockBounds {
        stale_reads: least.stale_reads.unwrap(),
        crashes: least.crashes.unwrap(),
        delays: least.delays.unwrap(),
        lost_replies: least.lost_replies.unwrap(),
        ..large_bounds(bug)
    })
    .unwrap()
}

#[test]
fn a_part_a_lagging_replica_lacked_never_dead_letters_its_message() {
    every_property_holds_but(
        &part_from_a_lagging_replica(None),
        &[
            queue::LOST_THEN_DELIVERED,
            queue::REDELIVERED_AFTER_CRASH,
            queue::CALM_AFTER_CRASH,
            queue::STALE_REFUSED,
            queue::OWN_COMPLETION_FOUND,
            queue::DELIVERED_TWICE,
            queue::DEAD_LETTERED,
            queue::POISON_THEN_DELIVERED,
            queue::PARTS_SWEPT,
        ],
    );
}

/// Read the earlier way, the part not found is missing for good, and the healthy
/// message goes to the dead letters (the long swarm's queue runs, once they drew
/// lagging replicas).
#[test]
fn read_the_earlier_way_a_part_a_lagging_replica_lacked_dead_letters_its_message() {
    let bug = Some(LockBug::Engine(QueueKnownBad::MissingPartIsDamage));
    let trace = counterexample(&part_from_a_lagging_replica(bug), queue::HEALTHY_KEPT);
    assert!(trace.contains("LAGGING replica"), "{trace}");
}

#[test]
fn parts_joined_unchecked_deliver_a_partial_payload() {
    let bug = Some(LockBug::Engine(QueueKnownBad::ManifestFirstUnchecked));
    let model = QueueModel::new(LockBounds {
        delays: 1,
        ..large_bounds(bug)
    })
    .unwrap();
    counterexample(&model, queue::WHOLE_PAYLOAD);
}

#[test]
fn a_head_deleted_before_its_parts_strands_them_where_no_sweep_finds_them() {
    let bug = Some(LockBug::Engine(QueueKnownBad::HeadFirst));
    let model = QueueModel::new(LockBounds {
        delays: 1,
        ..large_bounds(bug)
    })
    .unwrap();
    let trace = counterexample_by(&model, queue::ORPHANS_SWEPT, Search::Dfs);
    assert!(trace.contains("HELD on the wire"), "{trace}");
}

#[test]
fn the_large_payloads_no_loss_bound_is_tight() {
    // A producer whose message landed with its reply lost enqueues again at its next
    // poll; with a consumer crashed holding the message, one tick less is too few.
    let faults = LockBounds {
        lost_replies: 1,
        ..large_bounds(None)
    };
    let bounds = LockBounds {
        horizon: faults.liveness_ticks(LockKind::Queue) + 1,
        ..faults
    };
    let mut model = QueueModel::new(bounds).unwrap();
    model.liveness_ticks -= 1;
    let trace = counterexample_by(&model, queue::NO_LOSS, Search::Dfs);
    assert!(trace.contains("enqueued m0 (already stored)"), "{trace}");
}

/// The claim-check mode: as the large-payload mode, the payload kept in the model's
/// claim store.
fn claim_bounds(bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        large: false,
        claims: true,
        ..large_bounds(bug)
    }
}

#[test]
fn a_claim_checked_payload_is_delivered_whole_and_what_a_lost_reply_leaves_is_swept() {
    large_payload_holds(LockBounds {
        lost_replies: 1,
        ..claim_bounds(None)
    });
}

/// With a lagging replica too: a sweep shown a head as it was before its message's
/// batch (naming nobody) marks it if-match, and is refused; what the lost reply
/// leaves is still swept, and no payload goes while a document names it.
#[test]
fn with_a_lagging_replica_what_a_lost_reply_leaves_is_still_swept_and_no_named_payload_goes() {
    large_payload_holds(LockBounds {
        lost_replies: 1,
        stale_reads: 1,
        ..claim_bounds(None)
    });
}

#[test]
fn a_producer_paused_between_its_head_and_its_message_leaves_no_claim_unswept() {
    large_payload_holds(LockBounds {
        delays: 1,
        ..claim_bounds(None)
    });
}

#[test]
fn a_late_claim_reply_never_delivers_a_payload_missing_or_changed() {
    large_payload_holds(LockBounds {
        late_replies: 1,
        ..claim_bounds(None)
    });
}

#[test]
fn a_message_written_before_its_claim_is_found_with_its_payload_missing() {
    let bug = Some(LockBug::Engine(QueueKnownBad::ManifestFirst));
    let model = QueueModel::new(LockBounds {
        delays: 1,
        crashes: 0,
        ..claim_bounds(bug)
    })
    .unwrap();
    let trace = counterexample(&model, queue::PAYLOAD_INTACT);
    assert!(trace.contains("missing from the claim store"), "{trace}");
}

#[test]
fn a_head_deleted_before_its_claim_strands_the_payload_where_no_sweep_finds_it() {
    let bug = Some(LockBug::Engine(QueueKnownBad::HeadFirst));
    let model = QueueModel::new(LockBounds {
        delays: 1,
        ..claim_bounds(bug)
    })
    .unwrap();
    let trace = counterexample_by(&model, queue::ORPHANS_SWEPT, Search::Dfs);
    assert!(
        trace.contains("stores the payload in the claim store"),
        "{trace}"
    );
    assert!(trace.contains("HELD on the wire"), "{trace}");
}

/// A producer whose head's reply comes back late, past the sweep's bound: the horizon
/// reaches past that bound plus the liveness bound, so that what the late reply does
/// is checked for orphans. One claim-store call may fail too (the simulator's seed
/// 3163414 stranded a payload when a producer's discard failed after its set was
/// swept). Without a crash, to stay within seconds (1,073,451 unique); with one,
/// below.
fn late_producer(bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        crashes: 0,
        late_replies: 1,
        claim_failures: 1,
        horizon: 11,
        ..claim_bounds(bug)
    }
}

#[test]
fn a_producer_answered_past_the_sweeps_bound_strands_no_payload_even_when_a_claim_call_fails() {
    let report = exhaustive(&QueueModel::new(late_producer(None)).unwrap());
    for v in &report.verdicts {
        if v.always {
            assert_eq!(v.outcome, Outcome::Holds, "{}", v.property);
        }
    }
    // The failing call is explored: the same bounds without it are fewer states.
    let sure = exhaustive(
        &QueueModel::new(LockBounds {
            claim_failures: 0,
            ..late_producer(None)
        })
        .unwrap(),
    );
    assert!(sure.progress.unique < report.progress.unique);
}

#[test]
fn a_payload_stored_however_late_after_its_head_is_stranded_where_no_sweep_finds_it() {
    let model = QueueModel::new(late_producer(Some(LockBug::Engine(
        QueueKnownBad::ClaimUnbounded,
    ))))
    .unwrap();
    let trace = counterexample(&model, queue::ORPHANS_SWEPT);
    assert!(trace.contains("REPLY IS HELD"), "{trace}");
    assert!(trace.contains("swept part set"), "{trace}");
}

/// As above with a crash as well: 20,785,215 unique states, 109 s in release on two
/// cores; `cargo test --release -p leasehold-model --test locks -- --ignored`.
#[test]
#[ignore]
fn with_a_crash_a_producer_answered_past_the_sweeps_bound_strands_no_payload() {
    let report = exhaustive(
        &QueueModel::new(LockBounds {
            crashes: 1,
            ..late_producer(None)
        })
        .unwrap(),
    );
    for v in &report.verdicts {
        if v.always {
            assert_eq!(v.outcome, Outcome::Holds, "{}", v.property);
        }
    }
}

/// A renewal puts the work off as an abandon does, so liveness is measured from it.
/// Before, it was not: `check queue --renewals 2 --horizon 10` and
/// `check items --items 1 --renewals 2 --horizon 10` broke liveness on the shipped
/// engine (a holder renewing twice had not finished by a deadline counted from
/// before its renewals), and no test chose a renewal.
fn renewing(base: LockBounds, docs: u8) -> LockBounds {
    LockBounds {
        docs,
        renewals: 2,
        horizon: 10,
        ..base
    }
}

#[test]
fn a_consumer_that_renews_its_locks_still_sees_every_message_done() {
    let model = QueueModel::new(renewing(queue_bounds(), 2)).unwrap();
    every_property_holds_but(&model, &NEED_LOST);
}

#[test]
fn a_holder_that_renews_its_lease_still_sees_its_item_processed() {
    let model = ItemModel::new(renewing(item_bounds(), 1)).unwrap();
    assert_proven(&exhaustive(&model));
}

/// Siblings: measured from the last renewal, liveness still catches a message or an
/// item that nobody takes over.
#[test]
fn with_renewals_a_dequeue_that_skips_expired_locks_still_loses_a_message() {
    let bounds = LockBounds {
        give_backs: 0,
        bug: Some(LockBug::DequeueNoExpired),
        ..renewing(queue_bounds(), 1)
    };
    counterexample(&QueueModel::new(bounds).unwrap(), queue::NO_LOSS);
}

#[test]
fn with_renewals_an_early_next_for_state_still_strands_an_item() {
    let bounds = LockBounds {
        give_backs: 0,
        bug: Some(LockBug::NextForStateNoExpiry),
        ..renewing(item_bounds(), 1)
    };
    counterexample(&ItemModel::new(bounds).unwrap(), items::PROCESSED);
}

/// A dead-lettered claim check, one consumer's poll after another moved it, with
/// one read served by a replica that lags document by document: the bound at which
/// the model shows the sweep hazard of docs/limitations.md ("Stale reads in the
/// queue") on heads that record no naming document.
fn dead_letter_then_sweep(bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        docs: 1,
        crashes: 0,
        max_dequeue: 1,
        claims: true,
        stale_reads: 1,
        bug,
        ..queue_bounds()
    }
}

/// A dead-letter move is one batch: the dead letter created, the message deleted.
/// A replica that lags document by document shows a sweep that batch half applied
/// (the message gone, its dead letter not yet there). A sweep that asks a query
/// whether a document names the set then finds none, and drops the dead letter's
/// payload. The swarm found it first (seeds 5,655,000..5,660,000, a live message's
/// payload); the model finds it since it checks that no payload goes while a
/// document names it.
#[test]
fn a_sweep_that_queries_for_the_naming_document_drops_a_dead_letters_payload() {
    let bug = Some(LockBug::Engine(QueueKnownBad::UnrecordedHeads));
    let model = QueueModel::new(dead_letter_then_sweep(bug)).unwrap();
    let text = counterexample(&model, queue::PAYLOAD_KEPT);
    assert!(text.contains("LAGGING"), "{text}");
    assert!(text.contains("swept part set"), "{text}");
}

/// Its sibling: the shipped consumer's move names the dead letter in its head, in
/// the same batch, and a sweep judges the head alone, so at the same bound, stale
/// read and all, every payload is kept and the message is dead-lettered.
#[test]
fn a_head_that_names_the_dead_letter_keeps_its_payload_from_a_lagging_sweep() {
    let model = QueueModel::new(dead_letter_then_sweep(None)).unwrap();
    let not_reached = [
        queue::LOST_THEN_DELIVERED,
        queue::REDELIVERED_AFTER_CRASH,
        queue::CALM_AFTER_CRASH,
        queue::STALE_REFUSED,
        queue::OWN_COMPLETION_FOUND,
        queue::DELIVERED_TWICE,
        queue::POISON_THEN_DELIVERED,
        queue::PARTS_SWEPT,
    ];
    every_property_holds_but(&model, &not_reached);
}

/// The swarm's own path to the sweep hazard: a message abandoned for later is out of
/// every dequeue's read, so a consumer's new life, whose session has seen nothing of
/// it, sweeps beside it. Having read the head after the message's batch, it is shown
/// the message as before its creation, three writes back: Session at one partition
/// key's order would not allow it, the model's replicas lagging document by document
/// do.
fn abandoned_for_later(stale_reads: u8, bug: Option<LockBug>) -> LockBounds {
    let bounds = LockBounds {
        docs: 1,
        max_dequeue: 3,
        claims: true,
        abandon_delay: 4,
        stale_reads,
        stale_depth: 3,
        bug,
        ..queue_bounds()
    };
    LockBounds {
        horizon: bounds.liveness_ticks(LockKind::Queue) + 1,
        ..bounds
    }
}

#[test]
fn a_new_life_that_queries_for_the_naming_document_drops_a_message_abandoned_for_later() {
    let bug = Some(LockBug::Engine(QueueKnownBad::UnrecordedHeads));
    let model = QueueModel::new(abandoned_for_later(1, bug)).unwrap();
    let text = counterexample(&model, queue::PAYLOAD_KEPT);
    assert!(text.contains("q:m0 as it was 3 writes ago"), "{text}");
    assert!(text.contains("swept part set"), "{text}");
}

/// Its sibling: on the shipped consumer the head names the message, so at the same
/// bound, stale read and all, every property holds, and liveness waits out the
/// abandon's delay. (1.8 M unique states: the largest lock check in the suite.)
#[test]
fn a_message_abandoned_for_later_keeps_its_payload_from_a_lagging_sweep() {
    let model = QueueModel::new(abandoned_for_later(1, None)).unwrap();
    let not_reached = [
        queue::STALE_REFUSED,
        queue::OWN_COMPLETION_FOUND,
        queue::DEAD_LETTERED,
        queue::POISON_THEN_DELIVERED,
        queue::PARTS_SWEPT,
    ];
    every_property_holds_but(&model, &not_reached);
}

/// The liveness bound counts the abandon's delay. It is loose (after an abandon no
/// lock is waited out), so a delay of 4 s fits the bound without it; one of 6 s does
/// not: a message hidden after an abandon is judged lost.
#[test]
fn liveness_that_forgets_the_abandons_delay_judges_a_hidden_message_lost() {
    let bounds = LockBounds {
        abandon_delay: 6,
        ..abandoned_for_later(0, None)
    };
    let bounds = LockBounds {
        horizon: bounds.liveness_ticks(LockKind::Queue) + 1,
        ..bounds
    };
    let mut model = QueueModel::new(bounds).unwrap();
    model.liveness_ticks -= 6;
    counterexample_by(&model, queue::NO_LOSS, Search::Dfs);
}

/// The large payload's message turns dead letter after one delivery and a give-back,
/// and the operator asks consumer 0 to delete it, the delete's answer lost (or the
/// SDK's retry of it answered 404): the consumer, told nothing certain, leaves the
/// parts to the sweep.
fn dead_letter_deleted(claims: bool, retried: bool, bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        docs: 1,
        crashes: 0,
        max_dequeue: 1,
        large: true,
        claims,
        lost_replies: u8::from(!retried),
        retries: u8::from(retried),
        dead_letter_deletes: 1,
        horizon: 12,
        bug,
        ..queue_bounds()
    }
}

/// A dead letter deleted alone, as by hand, leaves its head naming it: no sweep ever
/// takes the set, since only the batch that moves its naming document rewrites it.
#[test]
fn a_dead_letter_deleted_alone_leaves_a_part_set_for_good() {
    let bug = Some(LockBug::Engine(QueueKnownBad::DiscardKeepsHead));
    for (claims, retried) in [(false, false), (true, true)] {
        let model = QueueModel::new(dead_letter_deleted(claims, retried, bug)).unwrap();
        let text = counterexample(&model, queue::ORPHANS_SWEPT);
        assert!(text.contains("DELETE the dead letter"), "{text}");
        assert!(text.contains("DELETED by the operator"), "{text}");
    }
}

/// Its sibling: the shipped consumer's delete rewrites the head to name nobody in the
/// same batch, so at the same bounds the sweep takes what the delete left, and every
/// payload a document names is kept.
#[test]
fn a_dead_letters_delete_cut_short_leaves_its_set_to_the_sweep() {
    for (claims, retried) in [(false, false), (true, true)] {
        let model = QueueModel::new(dead_letter_deleted(claims, retried, None)).unwrap();
        let mut not_reached = vec![
            queue::LOST_THEN_DELIVERED,
            queue::REDELIVERED_AFTER_CRASH,
            queue::CALM_AFTER_CRASH,
            queue::DELIVERED_TWICE,
            queue::POISON_THEN_DELIVERED,
        ];
        if retried {
            // Without a lost reply, this bound reaches no completion refused for a
            // stale lock.
            not_reached.push(queue::STALE_REFUSED);
        }
        every_property_holds_but(&model, &not_reached);
    }
}

/// The producer's first manifest is held on the wire past its retry; a consumer's
/// completion of the retry's message has its reply held while the first manifest
/// lands and the same consumer takes that message. Read at the answer from the
/// document held then (`completion-reads-held`), the answer deletes the new
/// message's payload. Found by the model (the shipped consumer broke at this bound,
/// 19.6 M unique depth first, before the answer read what it sent); the engine's
/// tests keep the shipped consumer's side (`engine/tests/queue_parts.rs`).
#[test]
fn a_completions_late_answer_read_from_the_document_held_then_drops_a_live_payload() {
    let bounds = LockBounds {
        docs: 1,
        crashes: 0,
        give_backs: 0,
        large: true,
        late_replies: 1,
        delays: 1,
        bug: Some(LockBug::Engine(QueueKnownBad::CompletionReadsHeld)),
        ..queue_bounds()
    };
    let model = QueueModel::new(bounds).unwrap();
    let text = counterexample_by(&model, queue::PAYLOAD_INTACT, Search::Dfs);
    assert!(text.contains("held reply"), "{text}");
}

/// One consumer gives its message back (`give_backs`) or renews it (`renewals`) with
/// the reply held, takes the message again, and the held reply arrives.
fn holder_answer_held(renew: bool, bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        docs: 1,
        crashes: 0,
        late_replies: 1,
        give_backs: u8::from(!renew),
        renewals: u8::from(renew),
        // A renewed lock must run out before its consumer takes the message again.
        horizon: if renew { 11 } else { 7 },
        bug,
        ..queue_bounds()
    }
}

/// Acted on as the lock held when it comes (`holder-answers-read-held`), a give-back's
/// or a renewal's late answer changes the new delivery's lock: the give-back's drops
/// it, the renewal's gives it the old version's etag.
#[test]
fn a_holders_late_answer_read_as_the_lock_held_then_changes_the_new_delivery() {
    let bug = Some(LockBug::Engine(QueueKnownBad::HolderAnswersReadHeld));
    for (renew, says) in [
        (false, "gave q:m0 back"),
        (true, "c0 renewed the lock on q:m0"),
    ] {
        let model = QueueModel::new(holder_answer_held(renew, bug)).unwrap();
        let text = counterexample(&model, queue::ANSWER_OWN_DELIVERY);
        assert!(text.contains("held reply"), "{text}");
        assert!(text.contains(says), "{text}");
    }
}

/// Its sibling: the shipped consumer's answer reports on the delivery it was sent for
/// and leaves the new delivery's lock as it was; every property holds at both bounds.
#[test]
fn a_holders_late_answer_leaves_the_new_delivery_alone() {
    for renew in [false, true] {
        let model = QueueModel::new(holder_answer_held(renew, None)).unwrap();
        let mut not_reached = vec![
            queue::REDELIVERED_AFTER_CRASH,
            queue::CALM_AFTER_CRASH,
            queue::DEAD_LETTERED,
            queue::POISON_THEN_DELIVERED,
        ];
        if renew {
            // With the one message locked, only a give-back lets two dequeues race.
            not_reached.push(queue::LOST_THEN_DELIVERED);
        }
        every_property_holds_but(&model, &not_reached);
    }
}

/// One message or item, no crash, one handler that overruns: its consumer polls on,
/// lets the lock go, and may deliver the message again while the first handler
/// works; or its holder polls on and leases the item again for another task.
fn overrun(clients: u8, bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        clients,
        docs: 1,
        crashes: 0,
        give_backs: 0,
        overruns: 1,
        horizon: 11,
        bug,
        ..queue_bounds()
    }
}

/// Named by the message only (`handle-names-message`), an overrun handler's
/// completion deletes the message under the lock of its later delivery, another
/// handler's.
#[test]
fn an_overrun_handler_naming_the_message_completes_the_later_delivery() {
    let bug = Some(LockBug::Engine(QueueKnownBad::HandleNamesMessage));
    let model = QueueModel::new(overrun(1, bug)).unwrap();
    let text = counterexample(&model, queue::HANDLER_OWN_DELIVERY);
    assert!(text.contains("OVERRUNS"), "{text}");
    assert!(text.contains("(delivery 2)"), "{text}");
    assert!(text.contains("complete the delivery it kept"), "{text}");
}

/// Its sibling: the shipped consumer refuses the overrun handler's call and the later
/// delivery goes on; every property holds, with one consumer and with two.
#[test]
fn an_overrun_handlers_completion_leaves_the_later_delivery_alone() {
    for clients in [1, 2] {
        let model = QueueModel::new(overrun(clients, None)).unwrap();
        let mut not_reached = vec![
            queue::REDELIVERED_AFTER_CRASH,
            queue::CALM_AFTER_CRASH,
            queue::DEAD_LETTERED,
            queue::POISON_THEN_DELIVERED,
            queue::OWN_COMPLETION_FOUND,
            queue::LOST_THEN_DELIVERED,
        ];
        if clients == 1 {
            not_reached.push(queue::STALE_REFUSED);
        } else {
            // The other consumer, watching the lock since the first delivery, takes
            // the message before its own consumer's second sight of the lock.
            not_reached.push(queue::KEPT_REFUSED);
        }
        every_property_holds_but(&model, &not_reached);
    }
}

/// One item, no crash, one late reply: a holder's acquire has its reply held while it
/// acquires the item again over its own lease.
fn item_answer_held(horizon: u8, bug: Option<LockBug>) -> LockBounds {
    LockBounds {
        docs: 1,
        crashes: 0,
        late_replies: 1,
        horizon,
        bug,
        ..queue_bounds()
    }
}

/// Acted on as the lease held when it comes (`item-answers-read-held`), an acquire's
/// late answer puts the earlier lease back over the new one.
#[test]
fn an_item_holders_late_answer_read_as_the_lease_held_then_changes_the_new_lease() {
    let bug = Some(LockBug::ItemEngine(ItemKnownBad::AnswersReadHeld));
    let model = ItemModel::new(item_answer_held(7, bug)).unwrap();
    let text = counterexample(&model, items::ANSWER_OWN_LEASE);
    assert!(text.contains("held reply"), "{text}");
}

/// Its sibling: the shipped leaser's answer about the earlier lease leaves the new one
/// as it was.
#[test]
fn an_item_holders_late_answer_leaves_the_new_lease_alone() {
    let model = ItemModel::new(item_answer_held(3, None)).unwrap();
    every_property_holds_but(&model, &[items::TAKEOVER, items::CALM_AFTER_CRASH]);
}

/// Two holders, one item, no crash, one late reply, three-second leases: the least
/// bound of `item-forgets-let-go`. A holder's lease lands with its reply held; it
/// leases the item again (its own) and breaks that lease, three polls inside the
/// first lease's authority, which two-second leases end before the third.
fn let_go_while_an_answer_is_held(horizon: u8, bug: Option<LockBug>) -> LockBounds {
    let least = LockBug::ItemEngine(ItemKnownBad::ForgetsLetGo).least_bound();
    LockBounds {
        clients: least.hosts.unwrap(),
        give_backs: least.give_backs.unwrap(),
        lock_ticks: least.lock_ticks.unwrap(),
        ..item_answer_held(horizon, bug)
    }
}

/// Forgetting the lease it let go of (`item-forgets-let-go`), the holder's late
/// answer grants the earlier lease, with authority, while the other holder leases
/// the free item.
#[test]
fn a_holder_that_forgets_a_lease_it_let_go_grants_the_earlier_one_beside_another_holder() {
    let bug = Some(LockBug::ItemEngine(ItemKnownBad::ForgetsLetGo));
    let model = ItemModel::new(let_go_while_an_answer_is_held(4, bug)).unwrap();
    let text = counterexample(&model, items::EXCLUSIVE);
    assert!(text.contains("BREAK"), "{text}");
    assert!(text.contains("held reply"), "{text}");
}

/// Its sibling: the shipped leaser keeps the lease it let go of until the answer
/// comes, and the answer grants nothing (at horizon 4, where only safety is judged;
/// 8 s, where liveness is, in docs/model-checking.md).
#[test]
fn a_late_answer_after_the_holder_let_its_later_lease_go_grants_nothing() {
    let model = ItemModel::new(let_go_while_an_answer_is_held(4, None)).unwrap();
    every_property_holds_but(&model, &[items::TAKEOVER, items::CALM_AFTER_CRASH]);
}

/// Named by the item only (`item-grant-names-item`), an overrun task's save lands
/// under the later lease of its item, another task's, and releases it.
#[test]
fn an_overrun_task_naming_the_item_saves_under_the_later_lease() {
    let bug = Some(LockBug::ItemEngine(ItemKnownBad::GrantNamesItem));
    let model = ItemModel::new(overrun(1, bug)).unwrap();
    let text = counterexample(&model, items::TASK_OWN_LEASE);
    assert!(text.contains("OVERRUNS"), "{text}");
    assert!(text.contains("save the item it kept"), "{text}");
}

/// Its sibling: the shipped leaser refuses the overrun task's save and the later
/// lease goes on; every property holds, with one holder and with two.
#[test]
fn an_overrun_tasks_save_leaves_the_later_lease_alone() {
    for clients in [1, 2] {
        let model = ItemModel::new(overrun(clients, None)).unwrap();
        let mut not_reached = vec![items::TAKEOVER, items::CALM_AFTER_CRASH, items::BROKEN];
        if clients == 1 {
            not_reached.push(items::LEASE_HELD);
        }
        every_property_holds_but(&model, &not_reached);
    }
}

/// The initial state the checker's counterexamples below start from (the one
/// client's clock drifts one way or the other): the queue's path as written needs
/// this one; from the other, its consumer waits out the stale lock on another tick.
const CHECKERS_FIRST: usize = 1;

/// Follows `steps` from `model`'s initial state `init`, each an action the state
/// offers, and returns the last state.
fn follow<M: stateright::Model>(model: &M, init: usize, steps: &[M::Action]) -> M::State
where
    M::Action: std::fmt::Debug + PartialEq + Clone,
{
    let mut state = model.init_states().swap_remove(init);
    for step in steps {
        let mut offered = Vec::new();
        model.actions(&state, &mut offered);
        assert!(offered.contains(step), "{step:?} not offered: {offered:?}");
        state = model
            .next_state(&state, step.clone())
            .expect("every offered step changes the world");
    }
    state
}

/// One holder, one item, one overrun and one renewal, no skew: the holder's task
/// overruns while its `next_for_state` leases the item again for another task, and
/// the first task asks for more time under the lease it kept.
fn item_task_renews_after_overrun(bug: Option<LockBug>) -> items::ItemsState {
    use items::ItemChoice::{Next, Overrun, RenewKept};
    use leasehold_model::world::Action::{Advance, Step};
    let model = ItemModel::new(LockBounds {
        skew: 0,
        renewals: 1,
        ..overrun(1, bug)
    })
    .unwrap();
    let mut path = vec![
        Step(0, Next, None),
        Advance,
        Step(0, Overrun, None),
        Advance,
    ];
    let overran = follow(&model, CHECKERS_FIRST, &path);
    assert!(
        overran.clients[0].handler.is_some(),
        "the task kept its lease"
    );
    path.push(Step(0, RenewKept, None));
    follow(&model, CHECKERS_FIRST, &path)
}

/// Named by the item only (`item-grant-names-item`), the overrun task's renewal
/// renews the later lease, another task's.
#[test]
fn an_overrun_task_naming_the_item_renews_the_later_lease() {
    let bug = Some(LockBug::ItemEngine(ItemKnownBad::GrantNamesItem));
    let state = item_task_renews_after_overrun(bug);
    assert!(state.ghost.task_crossed, "{:?}", state.ghost);
}

/// Its sibling: the shipped leaser refuses the overrun task's renewal, and the later
/// lease is as it was.
#[test]
fn an_overrun_tasks_renewal_is_refused_and_leaves_the_later_lease_alone() {
    let state = item_task_renews_after_overrun(None);
    assert!(!state.ghost.task_crossed, "{:?}", state.ghost);
    assert!(state.ghost.events.kept_refused, "{:?}", state.ghost);
}

/// One consumer, one message, one overrun and one renewal, no skew: the handler
/// overruns, its consumer lets the stale lock go, waits it out and delivers the
/// message again, and the first handler asks for more time under the delivery it
/// kept.
fn queue_handler_renews_after_overrun(bug: Option<LockBug>) -> queue::QueueState {
    use leasehold_model::world::Action::{Advance, Step};
    use queue::QueueChoice::{Dequeue, Overrun, RenewKept};
    let model = QueueModel::new(LockBounds {
        skew: 0,
        renewals: 1,
        ..overrun(1, bug)
    })
    .unwrap();
    follow(
        &model,
        CHECKERS_FIRST,
        &[
            Step(0, Dequeue, None),
            Advance,
            Step(0, Overrun, None),
            Advance,
            Step(0, Dequeue, None),
            Advance,
            Step(0, Dequeue, None),
            Advance,
            Step(0, Dequeue, None),
            Advance,
            Step(0, RenewKept, None),
        ],
    )
}

/// Named by the message only (`handle-names-message`), the overrun handler's renewal
/// renews the later delivery's lock, another handler's.
#[test]
fn an_overrun_handler_naming_the_message_renews_the_later_delivery() {
    let bug = Some(LockBug::Engine(QueueKnownBad::HandleNamesMessage));
    let state = queue_handler_renews_after_overrun(bug);
    assert!(state.ghost.handler_crossed, "{:?}", state.ghost);
}

/// Its sibling: the shipped consumer refuses the overrun handler's renewal, and the
/// later delivery is as it was.
#[test]
fn an_overrun_handlers_renewal_is_refused_and_leaves_the_later_delivery_alone() {
    let state = queue_handler_renews_after_overrun(None);
    assert!(!state.ghost.handler_crossed, "{:?}", state.ghost);
    assert!(state.ghost.events.kept_refused, "{:?}", state.ghost);
}

/// Two holders, two items, a crash, `next_for_state` leasing two at once, no skew, no
/// give-back, at the horizon one tick past `liveness_ticks`.
fn batch_of_two(liveness_ticks: Option<u8>) -> ItemModel {
    let mut bounds = LockBounds {
        batch: 2,
        skew: 0,
        give_backs: 0,
        ..queue_bounds()
    };
    let ticks = liveness_ticks.unwrap_or(bounds.liveness_ticks(LockKind::Items));
    bounds.horizon = ticks + 1;
    let mut model = ItemModel::new(bounds).unwrap();
    model.liveness_ticks = ticks;
    model
}

/// A holder whose `next_for_state` leased both items crashes; the survivor, acquiring
/// one item at a time, sights and waits out one lease after the other, and the
/// items' liveness bound counts the batch's second lease.
#[test]
fn a_crashed_holders_batch_is_waited_out_within_the_liveness_bound() {
    every_property_holds_but(&batch_of_two(None), &[items::BROKEN]);
}

/// Its sibling: a bound that waits out one stranded lease, as the items' bound did
/// before the thirty-fourth session, finds the survivor still waiting.
#[test]
fn a_bound_that_waits_out_one_stranded_lease_is_too_short_for_a_batch() {
    let base = LockBounds {
        batch: 1,
        skew: 0,
        give_backs: 0,
        ..queue_bounds()
    };
    let one_lease = base.liveness_ticks(LockKind::Items);
    let text = counterexample(&batch_of_two(Some(one_lease)), items::PROCESSED);
    assert!(text.contains("CRASHES"), "{text}");
}
