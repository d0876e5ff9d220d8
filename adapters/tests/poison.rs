//! A batch the handler always fails on: retried for ever by default, as the change
//! feed processor does (the lease never moves past it), or, with `max_attempts`,
//! skipped or made to stop the processor, which then leaves the lease before it.

use leasehold_adapters::runtime::{Exhausted, RunError};
use leasehold_adapters::{BuildError, MemoryFeed, MemoryStore, Processor};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the handler saw: items handled, and attempts at each item by attempt number.
#[derive(Debug, Default)]
struct Seen {
    handled: Vec<String>,
    attempts: BTreeMap<String, Vec<u32>>,
}

/// One partition of items 0 to 5, one per batch; the handler fails on item-2 every
/// time. Runs 60 s of paused time (or until the processor stops by itself) and
/// returns what `run()` returned, if it did, and what the handler saw.
async fn poisoned(policy: Option<(u32, Exhausted)>) -> (Option<Result<(), RunError>>, Seen, u64) {
    let feed = MemoryFeed::new(["0"]);
    for i in 0..6 {
        feed.push("0", format!("item-{i}"));
    }
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let note = seen.clone();
    let mut builder = Processor::builder()
        .instance("a")
        .processor_name("poison")
        .acquire_interval(Duration::from_secs(2))
        .renew_interval(Duration::from_secs(3))
        .expiration_interval(Duration::from_secs(12))
        .poll_interval(Duration::from_millis(500))
        .max_batch(1);
    if let Some((attempts, then)) = policy {
        builder = builder.max_attempts(attempts, then);
    }
    let processor = builder
        .source(feed)
        .store(MemoryStore::new())
        .handler(move |ctx, batch| {
            let note = note.clone();
            async move {
                let item: String = batch.items[0].clone();
                let mut s = note.lock().unwrap();
                s.attempts
                    .entry(item.clone())
                    .or_default()
                    .push(ctx.attempt());
                if item == "item-2" {
                    return Err("item-2 cannot be handled".into());
                }
                s.handled.push(item);
                Ok(batch.checkpoint)
            }
        })
        .build()
        .await
        .expect("valid settings");
    let (stop, metrics) = (processor.cancellation(), processor.metrics());
    let mut run = tokio::spawn(processor.run());
    let ended = tokio::time::timeout(Duration::from_secs(60), &mut run).await;
    let result = match ended {
        Ok(joined) => Some(joined.expect("run() does not panic")),
        Err(_) => {
            stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(60), run).await;
            None
        }
    };
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (result, seen, metrics.snapshot().skipped_batches)
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_exhausts_its_attempts_is_skipped_and_the_lease_reads_on() {
    let (result, seen, skipped) = poisoned(Some((3, Exhausted::Skip))).await;
    assert!(result.is_none(), "runs until stopped: {result:?}");
    assert_eq!(skipped, 1);
    assert_eq!(seen.attempts["item-2"], [1, 2, 3], "{seen:?}");
    assert_eq!(
        seen.handled,
        ["item-0", "item-1", "item-3", "item-4", "item-5"],
        "{seen:?}"
    );
}

/// The sibling, and the default: without `max_attempts` the batch is retried for
/// ever, and nothing after it is ever handled.
#[tokio::test(start_paused = true)]
async fn by_default_a_batch_the_handler_always_fails_on_holds_its_lease_back() {
    let (result, seen, skipped) = poisoned(None).await;
    assert!(result.is_none());
    assert_eq!(skipped, 0);
    assert!(seen.attempts["item-2"].len() > 3, "{seen:?}");
    assert_eq!(seen.handled, ["item-0", "item-1"], "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_exhausts_its_attempts_under_stop_ends_run_with_the_lease_and_the_error() {
    let (result, seen, _) = poisoned(Some((2, Exhausted::Stop))).await;
    match result {
        Some(Err(RunError::Poisoned {
            lease,
            attempts,
            error,
        })) => {
            assert_eq!(lease.as_str(), "0");
            assert_eq!(attempts, 2);
            assert!(error.contains("item-2 cannot be handled"), "{error}");
        }
        other => panic!("expected Poisoned, got {other:?}"),
    }
    assert_eq!(seen.attempts["item-2"], [1, 2]);
    assert_eq!(
        seen.handled,
        ["item-0", "item-1"],
        "nothing after it was skipped"
    );
}

#[tokio::test]
async fn no_attempts_at_all_is_refused() {
    let built = Processor::builder()
        .instance("a")
        .processor_name("poison")
        .max_attempts(0, Exhausted::Skip)
        .source(MemoryFeed::new(["0"]))
        .store(MemoryStore::new())
        .handler(|_, batch| async move { Ok(batch.checkpoint) })
        .build()
        .await;
    assert!(matches!(built, Err(BuildError::Zero("max_attempts"))));
}
