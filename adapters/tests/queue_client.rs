//! The work-queue client on the Cosmos DB emulator: competing consumers, a crashed
//! consumer's messages coming back, poison messages, visibility delays and bad input.
//! Time is tokio's paused clock; the clients' wall clocks follow it.

mod common;

use common::Emulator;
use common::stores::{Counting, Racing};
use leasehold_adapters::{
    Clock, CosmosStore, Enqueued, MemoryStore, QueueClient, QueueClientError, Store,
};
use leasehold_engine::queue::{
    ConsumerConfig, Delivery, LargeMessages, Message, QueueError, QueueKnownBad, QueueName,
};
use leasehold_engine::{DocId, WallTime};
use std::collections::BTreeMap;
use std::time::Duration;

const START: WallTime = WallTime(1_800_000_000_000);

fn config(max_dequeue_count: u32) -> ConsumerConfig {
    let mut config = ConsumerConfig::new(QueueName::new("orders").unwrap());
    config.lock_duration = leasehold_engine::Millis::from_secs(30);
    config.max_dequeue_count = max_dequeue_count;
    config
}

fn client<St: Store<Message>>(store: St, name: &str, max: u32) -> QueueClient<St> {
    QueueClient::new(store, name, config(max))
        .unwrap()
        .with_clock(Clock::following_tokio(START))
}

async fn queue_store(emulator: &Emulator, name: &str) -> CosmosStore<Message> {
    // Messages are partitioned by queue, as in DurableTask's provider.
    emulator.container(name, "/QueueName", 2);
    CosmosStore::new(emulator.client(name, Vec::new()).await)
}

/// Deliveries of one message to two consumers are a violation.
fn shared_messages(a: &[Delivery], b: &[Delivery]) -> Vec<DocId> {
    a.iter()
        .filter(|d| b.iter().any(|e| e.id == d.id))
        .map(|d| d.id.clone())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn competing_consumers_complete_every_message_exactly_once() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "competing").await;
    let producer = client(store.clone(), "producer", 5);
    for i in 0..40 {
        let name = format!("m{i:02}");
        let stored = producer.enqueue(&name, format!("payload {i}"), Duration::ZERO);
        assert_eq!(stored.await.unwrap(), Enqueued::Stored);
    }
    let consumers: Vec<_> = (0..3)
        .map(|i| client(store.clone(), &format!("c{i}"), 5))
        .collect();
    let mut runs = Vec::new();
    for consumer in consumers {
        runs.push(tokio::spawn(async move {
            let mut done = Vec::new();
            loop {
                let batch = consumer.dequeue(4).await.unwrap();
                if batch.deliveries.is_empty() {
                    return done;
                }
                for d in batch.deliveries {
                    assert!(consumer.has_authority(&d));
                    consumer.complete(&d).await.unwrap();
                    done.push(d.name.to_string());
                }
            }
        }));
    }
    let mut completed: BTreeMap<String, usize> = BTreeMap::new();
    for run in runs {
        for name in run.await.unwrap() {
            *completed.entry(name).or_default() += 1;
        }
    }
    assert_eq!(completed.len(), 40);
    assert!(completed.values().all(|&n| n == 1), "{completed:?}");
    assert!(producer.dead_letters(10).await.unwrap().is_empty());
    let left = store
        .execute(leasehold_engine::store::Op::ReadAll {
            prefix: "orders:".into(),
        })
        .await;
    assert!(matches!(left.result, Ok(leasehold_engine::store::Reply::ReadAll(v)) if v.is_empty()));
    assert!(store.charges().total_units() > 0.0);
}

/// Two consumers that read the queue at the same moment both try to claim the same
/// messages; the if-match lets exactly one claim of each through.
#[tokio::test(start_paused = true)]
async fn consumers_scanning_at_the_same_moment_never_share_a_message() {
    let emulator = Emulator::new();
    let store = Racing::new(queue_store(&emulator, "racing").await, 2);
    let (a, b) = race_for_ten_messages(store).await;
    assert_eq!(a.len() + b.len(), 10, "every message went to someone");
    assert_eq!(shared_messages(&a, &b), Vec::<DocId>::new());
}

/// The sibling: on a store that ignores if-match, the same race hands messages to
/// both consumers, and the check above sees it.
#[tokio::test(start_paused = true)]
async fn the_sharing_check_catches_a_store_that_ignores_etags() {
    let store = Racing::new(MemoryStore::new(), 2).blind();
    let (a, b) = race_for_ten_messages(store).await;
    assert!(!shared_messages(&a, &b).is_empty());
}

async fn race_for_ten_messages<St: Store<Message>>(store: St) -> (Vec<Delivery>, Vec<Delivery>) {
    let producer = client(store.clone(), "producer", 5);
    for i in 0..10 {
        producer
            .enqueue(&format!("m{i}"), "x", Duration::ZERO)
            .await
            .unwrap();
    }
    let a = client(store.clone(), "a", 5);
    let b = client(store, "b", 5);
    let (x, y) = tokio::join!(a.dequeue(10), b.dequeue(10));
    (x.unwrap().deliveries, y.unwrap().deliveries)
}

/// A handler that overran its authority holds a delivery its client let go of and
/// then delivered again, to another handler: the first handler's calls name its own
/// delivery, so they are refused and the second handler's delivery goes on.
#[tokio::test(start_paused = true)]
async fn an_overrun_handler_cannot_complete_its_messages_next_delivery() {
    let (err, next_goes_on) = overrun_handler_completes(None).await;
    assert!(
        matches!(err, Some(QueueClientError::Queue(QueueError::NotHeld(_)))),
        "{err:?}"
    );
    assert!(next_goes_on);
}

/// Its sibling: named by the message only (`handle-names-message`), the overrun
/// handler's completion deletes the message under the next delivery's lock.
#[tokio::test(start_paused = true)]
async fn an_overrun_handler_naming_the_message_completes_its_next_delivery() {
    let (err, next_goes_on) =
        overrun_handler_completes(Some(QueueKnownBad::HandleNamesMessage)).await;
    assert!(err.is_none());
    assert!(!next_goes_on);
}

/// One client delivers m1, its handler overruns, and the client delivers m1 again;
/// the overrun handler then completes. Returns its error, if any, and whether the
/// next delivery still has authority and completes.
async fn overrun_handler_completes(
    known_bad: Option<QueueKnownBad>,
) -> (Option<QueueClientError>, bool) {
    let mut config = config(5);
    config.known_bad = known_bad;
    let queue = QueueClient::new(MemoryStore::new(), "only", config)
        .unwrap()
        .with_clock(Clock::following_tokio(START));
    queue.enqueue("m1", "work", Duration::ZERO).await.unwrap();
    let overrun = queue.dequeue(1).await.unwrap().deliveries.remove(0);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!queue.has_authority(&overrun));
    // First sight of its own stale lock lets it go; the message comes back after the
    // lock's duration plus the drift allowance.
    assert!(queue.dequeue(1).await.unwrap().deliveries.is_empty());
    tokio::time::sleep(Duration::from_secs(31)).await;
    let next = queue.dequeue(1).await.unwrap().deliveries.remove(0);
    assert_eq!(next.dequeue_count, 2);
    let err = queue.complete(&overrun).await.err();
    let next_goes_on = queue.has_authority(&next) && queue.complete(&next).await.is_ok();
    (err, next_goes_on)
}

#[tokio::test(start_paused = true)]
async fn a_crashed_consumers_message_comes_back_after_its_lock_and_the_old_holder_changes_nothing()
{
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "crash").await;
    let crashed = client(store.clone(), "crashed", 5);
    let survivor = client(store.clone(), "survivor", 5);
    crashed.enqueue("m1", "work", Duration::ZERO).await.unwrap();
    let stale = crashed.dequeue(1).await.unwrap().deliveries.remove(0);

    // First sight of the lock: not yet expired, however old its timestamp.
    assert!(survivor.dequeue(1).await.unwrap().deliveries.is_empty());
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(survivor.dequeue(1).await.unwrap().deliveries.is_empty());
    assert!(
        !crashed.has_authority(&stale),
        "the holder's authority ends before anyone may take over"
    );
    // 30 s lock plus the 1 % drift allowance.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut taken = survivor.dequeue(1).await.unwrap().deliveries;
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].dequeue_count, 2);

    let err = crashed.complete(&stale).await.unwrap_err();
    assert!(
        matches!(err, QueueClientError::Queue(QueueError::LockLost(_))),
        "{err}"
    );
    survivor.renew(&mut taken[0]).await.unwrap();
    survivor.complete(&taken[0]).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_message_delivered_too_often_is_dead_lettered_with_its_reason() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "poison").await;
    let consumer = client(store, "c", 2);
    consumer
        .enqueue("poison", "boom", Duration::ZERO)
        .await
        .unwrap();
    for attempt in 1..=2 {
        let d = consumer.dequeue(1).await.unwrap().deliveries.remove(0);
        assert_eq!(d.dequeue_count, attempt);
        consumer.abandon(&d, Duration::ZERO).await.unwrap();
    }
    let third = consumer.dequeue(1).await.unwrap();
    assert!(third.deliveries.is_empty());
    assert_eq!(third.dead_lettered.len(), 1);
    let dead = consumer.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].doc.dequeue_count, 2);
    // Never delivered again.
    assert!(consumer.dequeue(1).await.unwrap().deliveries.is_empty());
    // Moved back, it is a new message, delivered from a count of one.
    consumer.requeue(&dead[0]).await.unwrap();
    let again = consumer.dequeue(1).await.unwrap().deliveries;
    assert_eq!(again[0].dequeue_count, 1);
    assert!(consumer.dead_letters(10).await.unwrap().is_empty());
    // A second requeue of the same listing changes nothing: the name is live.
    let err = consumer.requeue(&dead[0]).await.unwrap_err();
    assert!(
        matches!(err, QueueClientError::Queue(QueueError::NameTaken(_))),
        "{err:?}"
    );
    consumer.complete(&again[0]).await.unwrap();
    // Once it is completed, the same stale listing finds the dead letter gone.
    let err = consumer.requeue(&dead[0]).await.unwrap_err();
    assert!(
        matches!(
            err,
            QueueClientError::Queue(QueueError::DeadLetterChanged(_))
        ),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_holder_dead_letters_a_message_and_it_is_kept_for_inspection() {
    let store = MemoryStore::new();
    let consumer = client(store, "c", 5);
    consumer.enqueue("bad", "{", Duration::ZERO).await.unwrap();
    let d = consumer.dequeue(1).await.unwrap().deliveries.remove(0);
    consumer
        .dead_letter(&d, "unparseable payload")
        .await
        .unwrap();
    let dead = consumer.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        matches!(&dead[0].doc.state, leasehold_engine::queue::MessageState::DeadLettered { reason } if reason == "unparseable payload")
    );
    assert!(consumer.complete(&d).await.is_err(), "no longer held");
}

#[tokio::test(start_paused = true)]
async fn abandoned_and_delayed_messages_stay_invisible_for_their_delay() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "delay").await;
    let consumer = client(store, "c", 5);
    consumer
        .enqueue("later", "x", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(consumer.dequeue(1).await.unwrap().deliveries.is_empty());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let d = consumer.dequeue(1).await.unwrap().deliveries.remove(0);
    consumer.abandon(&d, Duration::from_secs(20)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(19)).await;
    assert!(consumer.dequeue(1).await.unwrap().deliveries.is_empty());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = consumer.dequeue(1).await.unwrap().deliveries;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].dequeue_count, 2);
}

#[tokio::test(start_paused = true)]
async fn enqueueing_a_name_twice_stores_one_message() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "idempotent").await;
    let producer = client(store, "p", 5);
    let first = producer.enqueue("once", "a", Duration::ZERO).await.unwrap();
    let second = producer.enqueue("once", "b", Duration::ZERO).await.unwrap();
    assert_eq!(
        (first, second),
        (Enqueued::Stored, Enqueued::AlreadyPresent)
    );
    let got = producer.dequeue(10).await.unwrap().deliveries;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, "a");
}

#[tokio::test(start_paused = true)]
async fn bad_input_gets_a_typed_error_and_writes_nothing() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "bad-input").await;
    // Past the large-message limit (here 2 MiB) a payload is refused before any write.
    let mut capped = config(5);
    capped.large = Some(LargeMessages {
        max_bytes: 2 * 1024 * 1024,
        ..LargeMessages::default()
    });
    let producer = QueueClient::new(store, "p", capped)
        .unwrap()
        .with_clock(Clock::following_tokio(START));
    let huge = "x".repeat(3 * 1024 * 1024);
    let err = producer.enqueue("huge", huge, Duration::ZERO).await;
    assert!(
        matches!(
            err,
            Err(QueueClientError::Queue(QueueError::TooLarge {
                limit: 2_097_152,
                ..
            }))
        ),
        "{err:?}"
    );
    let err = producer.enqueue("a/b", "x", Duration::ZERO).await;
    assert!(matches!(err, Err(QueueClientError::Name(_))), "{err:?}");
    assert!(producer.dequeue(10).await.unwrap().deliveries.is_empty());
    let mut bad = ConsumerConfig::new(QueueName::new("q").unwrap());
    bad.max_dequeue_count = 0;
    assert!(matches!(
        QueueClient::new(MemoryStore::new(), "c", bad),
        Err(QueueClientError::Config(_))
    ));
}

/// A dequeue whose caller gives up still finishes inside the client, so the next
/// dequeue is not refused as busy.
/// Clones of one client share one consumer. Commands running at once on several
/// threads each get their own outcome: none is taken by another command's loop (when
/// a command's input went in under one hold of the consumer and its outputs were
/// collected under another, a command running meanwhile took them, and enqueues
/// that had stored their message answered `NoOutcome`). Real threads, so a real
/// monotonic clock; nothing asserted depends on it.
#[test]
fn commands_running_at_once_on_clones_each_get_their_own_outcome() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = MemoryStore::new();
        let queue = QueueClient::new(store.clone(), "c", config(5)).unwrap();
        for round in 0..100 {
            let calls: Vec<_> = (0..32)
                .map(|i| {
                    let queue = queue.clone();
                    let name = format!("m-{round}-{i}");
                    tokio::spawn(async move { queue.enqueue(&name, "x", Duration::ZERO).await })
                })
                .collect();
            for call in calls {
                let outcome = call.await.expect("no panic");
                assert!(
                    matches!(outcome, Ok(Enqueued::Stored)),
                    "round {round}: {outcome:?}"
                );
            }
        }
        assert_eq!(store.snapshot("").len(), 3_200);
    });
}

#[tokio::test(start_paused = true)]
async fn a_dropped_dequeue_does_not_wedge_the_client() {
    let store = Racing::new(MemoryStore::new(), 2);
    let consumer = client(store.clone(), "c", 5);
    consumer.enqueue("m", "x", Duration::ZERO).await.unwrap();
    // The scan waits at the gate for a second reader that never comes in time.
    let gave_up = tokio::time::timeout(Duration::from_millis(10), consumer.dequeue(1)).await;
    assert!(gave_up.is_err());
    // Open the gate from another client's scan; the first dequeue then completes.
    let other = client(store, "other", 5);
    let _ = other.dequeue(1).await.unwrap();
    let (next, _) = tokio::join!(consumer.dequeue(1), other.dequeue(1));
    assert!(next.is_ok(), "{next:?}");
}

/// What a message costs on the emulator: an enqueue is a create, a dequeue a query
/// plus a replace per message, a complete a delete. Printed for the README; the test
/// checks only that every kind is charged.
#[tokio::test(start_paused = true)]
async fn every_queue_operation_is_charged() {
    use leasehold_adapters::OpKind;
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "charges").await;
    let consumer = client(store.clone(), "c", 5);
    for i in 0..10 {
        consumer
            .enqueue(&format!("m{i}"), "{\"qty\":1}", Duration::ZERO)
            .await
            .unwrap();
    }
    let batch = consumer.dequeue(10).await.unwrap().deliveries;
    for d in &batch {
        consumer.complete(d).await.unwrap();
    }
    let charges = store.charges();
    for kind in [
        OpKind::Create,
        OpKind::Query,
        OpKind::Replace,
        OpKind::Delete,
    ] {
        let (calls, units) = (charges.calls(kind), charges.units(kind));
        eprintln!(
            "{kind:?}: {calls} calls, {:.2} RU each",
            units / calls as f64
        );
        assert!(calls > 0 && units > 0.0, "{kind:?}");
    }
}

/// What one dequeue (of `max`) returned and cost: deliveries, documents read, RU.
/// Its deliveries are then completed.
async fn drain_once(
    consumer: &QueueClient<Counting<CosmosStore<Message>>>,
    max: usize,
) -> (usize, usize, f64) {
    use leasehold_adapters::OpKind;
    let store = consumer.store();
    let (docs, units) = (store.returned(), store.charges().units(OpKind::Query));
    let batch = consumer.dequeue(max).await.unwrap().deliveries;
    let read = store.returned() - docs;
    let ru = store.charges().units(OpKind::Query) - units;
    for d in &batch {
        consumer.complete(d).await.unwrap();
    }
    (batch.len(), read, ru)
}

/// A 5,000-message backlog drained 100 at a time: each dequeue reads its batch and
/// no more, and its RU does not depend on how much backlog is left. The sibling: one read of
/// the whole queue, what a dequeue used to cost, returns the backlog.
///
/// The emulator charges a query 1 RU per page whatever it returns, so its RU cannot
/// show a full read's cost; the documents returned can.
#[tokio::test(start_paused = true)]
async fn a_dequeue_reads_and_costs_the_same_as_a_5000_message_backlog_drains() {
    let emulator = Emulator::new();
    let store = Counting::new(queue_store(&emulator, "backlog").await);
    let producer = client(store.clone(), "producer", 5);
    for i in 0..5_000 {
        let name = format!("m{i:04}");
        producer.enqueue(&name, "{}", Duration::ZERO).await.unwrap();
    }
    let before = store.returned();
    let scan = store.execute(leasehold_engine::store::Op::ReadAll {
        prefix: "orders:".into(),
    });
    assert!(scan.await.result.is_ok());
    assert_eq!(store.returned() - before, 5_000);
    let consumer = client(store.clone(), "c", 5);
    let mut per_dequeue = Vec::new();
    loop {
        let (got, read, ru) = drain_once(&consumer, 100).await;
        if got == 0 {
            break;
        }
        assert_eq!(read, got, "a dequeue read more than it delivered");
        per_dequeue.push(ru);
    }
    assert_eq!(per_dequeue.len(), 50);
    // The first dequeue also reads the locks; the others, within a quarter-lock of it,
    // need not. None costs more than the first, and the last costs what the second
    // did, however long the backlog still was.
    let (first, second, last) = (per_dequeue[0], per_dequeue[1], per_dequeue[49]);
    eprintln!("RU per dequeue of 100: first {first:.2}, second {second:.2}, last {last:.2}");
    assert!(
        per_dequeue.iter().all(|&ru| ru > 0.0 && ru <= first),
        "{per_dequeue:?}"
    );
    assert_eq!(second, last, "{per_dequeue:?}");
}
