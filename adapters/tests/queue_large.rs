//! Queue messages larger than a document, on the Cosmos DB emulator: a 10 MB message
//! goes round whole, and an enqueue stopped half-way leaves nothing visible and
//! nothing the sweep does not clear. Time is tokio's paused clock.

mod common;

use common::Emulator;
use common::queue::{documents, payload};
use leasehold_adapters::{Charges, Clock, CosmosStore, QueueClient, QueueClientError, Store};
use leasehold_engine::WallTime;
use leasehold_engine::queue::{ConsumerConfig, Message, QueueError, QueueName};
use leasehold_engine::store::{Op, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const START: WallTime = WallTime(1_800_000_000_000);

fn client<St: Store<Message>>(store: St, name: &str) -> QueueClient<St> {
    let config = ConsumerConfig::new(QueueName::new("orders").unwrap());
    QueueClient::new(store, name, config)
        .unwrap()
        .with_clock(Clock::following_tokio(START))
}

async fn queue_store(emulator: &Emulator, name: &str) -> CosmosStore<Message> {
    emulator.container(name, "/QueueName", 1);
    CosmosStore::new(emulator.client(name, Vec::new()).await)
}

#[tokio::test(start_paused = true)]
async fn a_10_mb_message_is_delivered_whole_and_completing_it_leaves_no_document() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "large").await;
    let producer = client(store.clone(), "p");
    let body = payload(10 * 1024 * 1024);
    producer
        .enqueue("big", body.clone(), Duration::ZERO)
        .await
        .unwrap();
    // A head, six parts of under 2 MB, and the message.
    assert_eq!(documents(&store).await.len(), 8);
    let consumer = client(store.clone(), "c");
    let batch = consumer.dequeue(5).await.unwrap();
    assert_eq!(batch.deliveries.len(), 1);
    assert!(batch.deliveries[0].payload == body, "the payload differs");
    consumer.complete(&batch.deliveries[0]).await.unwrap();
    assert_eq!(documents(&store).await, Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_large_dead_letter_deleted_through_the_client_leaves_no_document() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "large-dead").await;
    let producer = client(store.clone(), "p");
    producer
        .enqueue("big", payload(5 * 1024 * 1024), Duration::ZERO)
        .await
        .unwrap();
    let consumer = client(store.clone(), "c");
    let delivery = consumer.dequeue(1).await.unwrap().deliveries.remove(0);
    consumer.dead_letter(&delivery, "inspect").await.unwrap();
    let letters = consumer.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    // A head, three parts and the dead letter.
    assert_eq!(documents(&store).await.len(), 5);
    consumer.delete_dead_letter(&letters[0]).await.unwrap();
    assert_eq!(documents(&store).await, Vec::<String>::new());
    // The same listing again: the dead letter is gone, and nothing changes.
    let err = consumer.delete_dead_letter(&letters[0]).await.unwrap_err();
    assert!(
        matches!(err, QueueClientError::Queue(QueueError::DeadLetterGone(_))),
        "{err:?}"
    );
}

/// A store through which only the first `writes` writes go; later ones are refused
/// unsent, as if the producer had stopped there.
#[derive(Clone)]
struct StopsAfter<S> {
    inner: S,
    writes: Arc<AtomicUsize>,
}

impl<S: Store<Message>> Store<Message> for StopsAfter<S> {
    async fn execute(&self, op: Op<Message>) -> leasehold_adapters::Response<Message> {
        if op.is_write() {
            let left = self.writes.load(Ordering::Relaxed);
            if left == 0 {
                return leasehold_adapters::Response {
                    result: Err(StoreError::Unavailable),
                    charge: 0.0,
                };
            }
            self.writes.store(left - 1, Ordering::Relaxed);
        }
        self.inner.execute(op).await
    }

    fn charges(&self) -> &Charges {
        self.inner.charges()
    }
}

#[tokio::test(start_paused = true)]
async fn a_producer_stopped_half_way_leaves_nothing_visible_and_the_sweep_clears_it() {
    let emulator = Emulator::new();
    let store = queue_store(&emulator, "halfway").await;
    // The head and two parts land.
    let stopping = StopsAfter {
        inner: store.clone(),
        writes: Arc::new(AtomicUsize::new(3)),
    };
    let producer = client(stopping, "p");
    let failed = producer
        .enqueue("big", payload(7 * 1024 * 1024), Duration::ZERO)
        .await;
    assert!(
        matches!(
            failed,
            Err(QueueClientError::Queue(QueueError::Store(
                StoreError::Unavailable
            )))
        ),
        "{failed:?}"
    );
    assert_eq!(documents(&store).await.len(), 3);
    let consumer = client(store.clone(), "c");
    assert!(consumer.dequeue(5).await.unwrap().deliveries.is_empty());
    let first = consumer.sweep(100).await.unwrap();
    assert_eq!((first.read, first.swept), (1, 0));
    // The bound is 5 min; with the drift allowance, a little more.
    tokio::time::advance(Duration::from_secs(290)).await;
    assert_eq!(consumer.sweep(100).await.unwrap().swept, 0);
    tokio::time::advance(Duration::from_secs(20)).await;
    assert_eq!(consumer.sweep(100).await.unwrap().swept, 1);
    assert_eq!(documents(&store).await, Vec::<String>::new());
}

/// RU and wall time to enqueue, dequeue and complete one message of `bytes`, kept in
/// parts, against the same payload split by its user into messages of under 2 MB, and
/// kept in a claim store.
/// Run by hand (`cargo test --release -p leasehold-adapters --test queue_large --
/// --ignored --nocapture`); the figures are in BENCHMARKS.md, never asserted.
#[tokio::test(flavor = "current_thread")]
#[ignore = "a measurement, run by hand"]
async fn what_a_large_message_costs_against_one_split_by_its_user() {
    use leasehold_adapters::OpKind;
    println!("| payload | kept as | requests | RU | wall ms |");
    println!("|---|---|---|---|---|");
    for mb in [1usize, 10, 50] {
        let body = payload(mb * 1024 * 1024);
        for kept in ["parts", "split", "claim"] {
            let split = kept == "split";
            let emulator = Emulator::new();
            let store = queue_store(&emulator, &format!("cost-{mb}-{kept}")).await;
            let mut queue = client(store.clone(), "p");
            if kept == "claim" {
                let claims = leasehold_adapters::MemoryClaims::default();
                queue = queue.with_claim_check(claims, 512 * 1024).unwrap();
            }
            let pieces: Vec<String> = if split {
                body.as_bytes()
                    .chunks(1_900_000)
                    .map(|c| String::from_utf8(c.to_vec()).unwrap())
                    .collect()
            } else {
                vec![body.clone()]
            };
            let started = std::time::Instant::now();
            for (i, piece) in pieces.iter().enumerate() {
                queue
                    .enqueue(&format!("m{i}"), piece.clone(), Duration::ZERO)
                    .await
                    .unwrap();
            }
            let mut got = 0;
            while got < pieces.len() {
                let batch = queue.dequeue(10).await.unwrap();
                for d in &batch.deliveries {
                    queue.complete(d).await.unwrap();
                }
                got += batch.deliveries.len();
            }
            let wall = started.elapsed().as_millis();
            let charges = store.charges();
            let requests: u64 = OpKind::ALL.iter().map(|k| charges.calls(*k)).sum();
            println!(
                "| {mb} MB | {} | {requests} | {:.0} | {wall} |",
                match kept {
                    "split" => format!("{} messages split by the user", pieces.len()),
                    "claim" => "one claim-checked message (payload in memory)".to_string(),
                    _ => "one message in parts".to_string(),
                },
                charges.total_units()
            );
        }
    }
}

/// Requests and RU of deleting a dead letter of `mb` MB kept in parts, against
/// completing the same message: the delete's batch and the part deletes, against the
/// completion's. Run by hand (`cargo test -p leasehold-adapters --test queue_large
/// -- --ignored --nocapture`); the figures are in BENCHMARKS.md, never asserted.
#[tokio::test(flavor = "current_thread")]
#[ignore = "a measurement, run by hand"]
async fn what_deleting_a_large_dead_letter_costs_against_completing_it() {
    use leasehold_adapters::OpKind;
    let requests_and_units = |store: &CosmosStore<Message>| {
        let charges = store.charges();
        let requests: u64 = OpKind::ALL.iter().map(|k| charges.calls(*k)).sum();
        (requests, charges.total_units())
    };
    println!("| payload | ends by | requests | RU |");
    println!("|---|---|---|---|");
    for mb in [1usize, 10] {
        for ends in ["completion", "dead letter deleted"] {
            let emulator = Emulator::new();
            let store = queue_store(&emulator, &format!("dead-cost-{mb}")).await;
            let queue = client(store.clone(), "c");
            queue
                .enqueue("big", payload(mb * 1024 * 1024), Duration::ZERO)
                .await
                .unwrap();
            let delivery = queue.dequeue(1).await.unwrap().deliveries.remove(0);
            let letters = if ends == "completion" {
                Vec::new()
            } else {
                queue.dead_letter(&delivery, "inspect").await.unwrap();
                queue.dead_letters(10).await.unwrap()
            };
            let (requests, units) = requests_and_units(&store);
            match letters.first() {
                None => queue.complete(&delivery).await.unwrap(),
                Some(letter) => queue.delete_dead_letter(letter).await.unwrap(),
            }
            let (after, after_units) = requests_and_units(&store);
            assert_eq!(documents(&store).await, Vec::<String>::new());
            println!(
                "| {mb} MB | {ends} | {} | {:.0} |",
                after - requests,
                after_units - units
            );
        }
    }
}
