//! The claim-check hook: payloads past a bound go to a claim store of the user's
//! choosing, the message carrying their key. Round trips, a payload gone missing, a
//! claim store that fails, a client without one, and the sweep. The queue's store is
//! the in-memory one, then the Cosmos DB emulator; time is tokio's paused clock.

mod common;

use common::Emulator;
use common::queue::{documents, payload};
use futures::future::BoxFuture;
use leasehold_adapters::{
    ClaimError, ClaimStore, Clock, CosmosStore, MemoryClaims, MemoryStore, QueueClient,
    QueueClientError, Store,
};
use leasehold_engine::WallTime;
use leasehold_engine::queue::{ClaimKey, ConsumerConfig, Message, QueueError, QueueName};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const START: WallTime = WallTime(1_800_000_000_000);
const ABOVE: usize = 1_000;

fn plain<St: Store<Message>>(store: St, name: &str) -> QueueClient<St> {
    let config = ConsumerConfig::new(QueueName::new("orders").unwrap());
    QueueClient::new(store, name, config)
        .unwrap()
        .with_clock(Clock::following_tokio(START))
}

fn client<St: Store<Message>>(store: St, claims: impl ClaimStore, name: &str) -> QueueClient<St> {
    plain(store, name).with_claim_check(claims, ABOVE).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_payload_past_the_bound_goes_round_through_the_claim_store_and_one_under_it_does_not() {
    let (store, claims) = (MemoryStore::new(), MemoryClaims::default());
    let queue = client(store.clone(), claims.clone(), "c");
    let (big, small) = (payload(5_000), payload(ABOVE));
    queue
        .enqueue("big", big.clone(), Duration::ZERO)
        .await
        .unwrap();
    queue
        .enqueue("small", small.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(claims.keys().len(), 1);
    // The big one's head and message, and the small one.
    assert_eq!(documents(&store).await.len(), 3);
    let batch = queue.dequeue(5).await.unwrap();
    let mut got: Vec<_> = batch.deliveries.iter().map(|d| d.payload.clone()).collect();
    got.sort_by_key(|p| p.len());
    assert_eq!(got, vec![small, big]);
    for d in &batch.deliveries {
        queue.complete(d).await.unwrap();
    }
    assert!(claims.keys().is_empty());
    assert_eq!(documents(&store).await, Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_dead_letter_deleted_through_the_client_takes_its_claim_checked_payload() {
    let (store, claims) = (MemoryStore::new(), MemoryClaims::default());
    let queue = client(store.clone(), claims.clone(), "c");
    queue
        .enqueue("big", payload(5_000), Duration::ZERO)
        .await
        .unwrap();
    let delivery = queue.dequeue(1).await.unwrap().deliveries.remove(0);
    queue.dead_letter(&delivery, "inspect").await.unwrap();
    let letters = queue.dead_letters(10).await.unwrap();
    assert_eq!(claims.keys().len(), 1);
    queue.delete_dead_letter(&letters[0]).await.unwrap();
    assert!(
        claims.keys().is_empty(),
        "the payload is left in the claim store"
    );
    assert_eq!(documents(&store).await, Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_payload_missing_from_the_claim_store_is_dead_lettered_with_the_reason_never_delivered_empty()
 {
    let (store, claims) = (MemoryStore::new(), MemoryClaims::default());
    let queue = client(store.clone(), claims.clone(), "c");
    queue
        .enqueue("big", payload(5_000), Duration::ZERO)
        .await
        .unwrap();
    let key = claims.keys().pop().unwrap();
    claims.delete(key).await.unwrap();
    let batch = queue.dequeue(5).await.unwrap();
    assert!(batch.deliveries.is_empty(), "{:?}", batch.deliveries);
    assert_eq!(batch.dead_lettered.len(), 1);
    assert!(
        batch.dead_lettered[0]
            .1
            .contains("missing from the claim store")
    );
    assert_eq!(queue.dead_letters(5).await.unwrap().len(), 1);
}

/// A claim store that refuses every call while `down` is set.
#[derive(Clone, Default)]
struct Flaky {
    inner: MemoryClaims,
    down: Arc<AtomicBool>,
}

impl Flaky {
    fn refuse(&self) -> Result<(), ClaimError> {
        if self.down.load(Ordering::Relaxed) {
            return Err(ClaimError::new("the claim store is down"));
        }
        Ok(())
    }
}

impl ClaimStore for Flaky {
    fn put(&self, key: ClaimKey, payload: String) -> BoxFuture<'_, Result<(), ClaimError>> {
        Box::pin(async move {
            self.refuse()?;
            self.inner.put(key, payload).await
        })
    }

    fn get(&self, key: ClaimKey) -> BoxFuture<'_, Result<Option<String>, ClaimError>> {
        Box::pin(async move {
            self.refuse()?;
            self.inner.get(key).await
        })
    }

    fn delete(&self, key: ClaimKey) -> BoxFuture<'_, Result<(), ClaimError>> {
        Box::pin(async move {
            self.refuse()?;
            self.inner.delete(key).await
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_claim_store_that_fails_loses_nothing_and_leaves_nothing_the_sweep_does_not_clear() {
    let (store, claims) = (MemoryStore::new(), Flaky::default());
    let queue = client(store.clone(), claims.clone(), "c");
    claims.down.store(true, Ordering::Relaxed);
    let failed = queue.enqueue("lost", payload(5_000), Duration::ZERO).await;
    assert!(
        matches!(failed, Err(QueueClientError::Claim(_))),
        "{failed:?}"
    );
    claims.down.store(false, Ordering::Relaxed);
    queue
        .enqueue("kept", payload(5_000), Duration::ZERO)
        .await
        .unwrap();

    // Its payload unreadable, a message is given back, not delivered nor lost.
    claims.down.store(true, Ordering::Relaxed);
    let batch = queue.dequeue(5).await.unwrap();
    assert!(batch.deliveries.is_empty() && batch.dead_lettered.is_empty());
    claims.down.store(false, Ordering::Relaxed);
    let batch = queue.dequeue(5).await.unwrap();
    assert_eq!(batch.deliveries.len(), 1);
    assert_eq!(batch.deliveries[0].dequeue_count, 2);

    // A completion whose payload cannot be deleted still completes; the sweep
    // deletes the payload later, with the failed enqueue's head.
    claims.down.store(true, Ordering::Relaxed);
    queue.complete(&batch.deliveries[0]).await.unwrap();
    claims.down.store(false, Ordering::Relaxed);
    assert_eq!(claims.inner.keys().len(), 1);
    assert_eq!(documents(&store).await.len(), 2, "two heads");
    assert_eq!(queue.sweep(10).await.unwrap().swept, 0);
    tokio::time::advance(Duration::from_secs(310)).await;
    let swept = queue.sweep(10).await.unwrap();
    assert_eq!((swept.read, swept.swept), (2, 2));
    assert!(claims.inner.keys().is_empty());
    assert_eq!(documents(&store).await, Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_client_without_the_claim_store_gives_a_claim_checked_message_back_undelivered() {
    let (store, claims) = (MemoryStore::new(), MemoryClaims::default());
    client(store.clone(), claims.clone(), "p")
        .enqueue("big", payload(5_000), Duration::ZERO)
        .await
        .unwrap();
    let bare = plain(store.clone(), "bare");
    let batch = bare.dequeue(5).await.unwrap();
    assert!(batch.deliveries.is_empty() && batch.dead_lettered.is_empty());
    let batch = client(store, claims, "c").dequeue(5).await.unwrap();
    assert_eq!(batch.deliveries[0].payload, payload(5_000));
}

#[test]
fn a_claim_check_needs_the_sweep_of_the_large_settings() {
    let config = ConsumerConfig {
        large: None,
        ..ConsumerConfig::new(QueueName::new("orders").unwrap())
    };
    let queue = QueueClient::new(MemoryStore::new(), "c", config).unwrap();
    let refused = queue.with_claim_check(MemoryClaims::default(), ABOVE);
    assert!(matches!(
        refused,
        Err(QueueClientError::Queue(QueueError::NoSweep))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_10_mb_claim_checked_message_on_the_emulator_takes_two_small_documents() {
    let emulator = Emulator::new();
    emulator.container("claims", "/QueueName", 1);
    let store = CosmosStore::<Message>::new(emulator.client("claims", Vec::new()).await);
    let claims = MemoryClaims::default();
    let queue = client(store.clone(), claims.clone(), "c");
    let body = payload(10 * 1024 * 1024);
    queue
        .enqueue("big", body.clone(), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(documents(&store).await.len(), 2);
    let batch = queue.dequeue(1).await.unwrap();
    assert!(batch.deliveries[0].payload == body, "the payload differs");
    queue.complete(&batch.deliveries[0]).await.unwrap();
    assert_eq!(documents(&store).await, Vec::<String>::new());
    assert!(claims.keys().is_empty());
}

/// A claim store that never answers.
#[derive(Clone, Default)]
struct Silent;

impl ClaimStore for Silent {
    fn put(&self, _: ClaimKey, _: String) -> BoxFuture<'_, Result<(), ClaimError>> {
        Box::pin(futures::future::pending())
    }

    fn get(&self, _: ClaimKey) -> BoxFuture<'_, Result<Option<String>, ClaimError>> {
        Box::pin(futures::future::pending())
    }

    fn delete(&self, _: ClaimKey) -> BoxFuture<'_, Result<(), ClaimError>> {
        Box::pin(futures::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn a_claim_store_that_never_answers_is_given_up_on_after_the_request_timeout() {
    let store = MemoryStore::new();
    let queue = plain(store.clone(), "c")
        .with_request_timeout(Duration::from_secs(2))
        .with_claim_check(Silent, ABOVE)
        .unwrap();
    let failed = queue.enqueue("big", payload(5_000), Duration::ZERO).await;
    assert!(
        matches!(failed, Err(QueueClientError::Claim(_))),
        "{failed:?}"
    );
    assert!(queue.dequeue(5).await.unwrap().deliveries.is_empty());
    // Only the head is stored. The sweep's delete of the payload is given up on too,
    // so the head stays for a later sweep, and the sweep still finishes.
    assert_eq!(documents(&store).await.len(), 1);
    assert_eq!(queue.sweep(10).await.unwrap().read, 1);
    tokio::time::advance(Duration::from_secs(310)).await;
    let swept = queue.sweep(10).await.unwrap();
    assert_eq!((swept.read, swept.swept), (1, 0));
    assert_eq!(documents(&store).await.len(), 1);
}

/// A claim store whose puts take `put_takes` before they land.
#[derive(Clone, Default)]
struct Slow {
    inner: MemoryClaims,
    put_takes: Duration,
}

impl ClaimStore for Slow {
    fn put(&self, key: ClaimKey, payload: String) -> BoxFuture<'_, Result<(), ClaimError>> {
        Box::pin(async move {
            tokio::time::sleep(self.put_takes).await;
            self.inner.put(key, payload).await
        })
    }

    fn get(&self, key: ClaimKey) -> BoxFuture<'_, Result<Option<String>, ClaimError>> {
        self.inner.get(key)
    }

    fn delete(&self, key: ClaimKey) -> BoxFuture<'_, Result<(), ClaimError>> {
        self.inner.delete(key)
    }
}

#[tokio::test(start_paused = true)]
async fn a_put_that_outlasts_the_heads_authority_is_discarded_and_the_enqueue_refused() {
    // The sweep's bound is 300 s: a put that takes 400 s may land after a sweep has
    // dropped its key and deleted its head, so the producer discards it. One that
    // takes 200 s is in time.
    for (takes, in_time) in [(400, false), (200, true)] {
        let (store, inner) = (MemoryStore::new(), MemoryClaims::default());
        let slow = Slow {
            inner: inner.clone(),
            put_takes: Duration::from_secs(takes),
        };
        let queue = plain(store.clone(), "c")
            .with_request_timeout(Duration::from_secs(600))
            .with_claim_check(slow, ABOVE)
            .unwrap();
        let outcome = queue.enqueue("big", payload(5_000), Duration::ZERO).await;
        if in_time {
            assert!(outcome.is_ok(), "{outcome:?}");
            assert_eq!(inner.keys().len(), 1);
            continue;
        }
        assert!(
            matches!(
                outcome,
                Err(QueueClientError::Queue(QueueError::PartsSwept(_)))
            ),
            "{outcome:?}"
        );
        assert!(inner.keys().is_empty(), "the late payload is discarded");
        // Only the head, which the sweep clears.
        assert_eq!(documents(&store).await.len(), 1);
        assert_eq!(queue.sweep(10).await.unwrap().read, 1);
        tokio::time::advance(Duration::from_secs(310)).await;
        assert_eq!(queue.sweep(10).await.unwrap().swept, 1);
        assert_eq!(documents(&store).await, Vec::<String>::new());
    }
}
