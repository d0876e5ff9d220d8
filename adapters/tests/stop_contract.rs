//! The runtime keeps the engine's stop contract: a handler call that outlives its
//! lease's authority is cancelled, then aborted, and no second call of that lease runs
//! beside it on this host or at its epoch. Time is tokio's paused clock.

use leasehold_adapters::engine::lease::{KnownBad, Record};
use leasehold_adapters::engine::store::Op;
use leasehold_adapters::runtime::RuntimeBad;
use leasehold_adapters::{MemoryFeed, MemoryStore, Processor, Response, Store};
use leasehold_engine::{Epoch, Session};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A memory store whose writes take `delay` while `slow` is set: renewals land late,
/// as in a 429 storm that ends.
#[derive(Clone)]
struct SlowWrites {
    inner: MemoryStore<Record>,
    slow: Arc<AtomicBool>,
    delay: Duration,
}

impl Store<Record> for SlowWrites {
    async fn execute(&self, op: Op<Record>) -> Response<Record> {
        if matches!(op, Op::Replace { .. }) && self.slow.load(Ordering::Relaxed) {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.execute(op).await
    }

    fn charges(&self) -> &leasehold_adapters::Charges {
        self.inner.charges()
    }
}

/// One handler call: its session, its epoch, and when it ran (`None`: still running,
/// or aborted).
#[derive(Clone, Debug)]
struct Call {
    session: Session,
    epoch: Epoch,
    start: Instant,
    end: Option<Instant>,
}

/// Marks a call ended when its future completes or is dropped by an abort.
struct Ends(Arc<Mutex<Vec<Call>>>, usize);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.lock().unwrap()[self.1].end = Some(Instant::now());
    }
}

/// One host, one lease; the first call blocks for a minute, ignoring its
/// cancellation, while writes are slowed until the lease's authority lapses and a
/// late renewal brings it back.
async fn blocked_past_authority(
    bad: Option<KnownBad>,
    grace: Option<RuntimeBad>,
) -> (Vec<Call>, u64, u64) {
    let feed = MemoryFeed::new(["0"]);
    for i in 0..50 {
        feed.push("0", format!("item-{i}"));
    }
    let slow = Arc::new(AtomicBool::new(false));
    let store = SlowWrites {
        inner: MemoryStore::new(),
        slow: slow.clone(),
        delay: Duration::from_secs(6),
    };
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let log = calls.clone();
    let mut builder = Processor::builder()
        .instance("a")
        .processor_name("test")
        .acquire_interval(Duration::from_secs(2))
        .renew_interval(Duration::from_secs(3))
        .expiration_interval(Duration::from_secs(12))
        .request_timeout(Duration::from_secs(20))
        .poll_interval(Duration::from_secs(1))
        .max_batch(5)
        .source(feed)
        .store(store)
        .handler(move |ctx, batch| {
            let log = log.clone();
            async move {
                let index = {
                    let mut all = log.lock().unwrap();
                    all.push(Call {
                        session: ctx.session(),
                        epoch: ctx.epoch(),
                        start: Instant::now(),
                        end: None,
                    });
                    all.len() - 1
                };
                let _ends = Ends(log, index);
                if index == 0 {
                    // Blocks, ignoring `ctx.cancellation()`: only an abort ends it.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok(batch.checkpoint)
            }
        });
    if let Some(bad) = bad {
        builder = builder.known_bad(bad);
    }
    if let Some(grace) = grace {
        builder = builder.runtime_bad(grace);
    }
    let processor = builder.build().await.expect("valid settings");
    let (stop, metrics) = (processor.cancellation(), processor.metrics());
    let run = tokio::spawn(processor.run());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(calls.lock().unwrap().len(), 1, "the first call is running");
    slow.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(14)).await;
    slow.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(40)).await;
    stop.cancel();
    run.await.unwrap().unwrap();
    let m = metrics.snapshot();
    let calls = calls.lock().unwrap().clone();
    (calls, m.cancelled_calls, m.aborted_calls)
}

/// Pairs of calls that ran at once, or that came from different sessions at one
/// epoch.
fn clashes(calls: &[Call]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, a) in calls.iter().enumerate() {
        for b in &calls[i + 1..] {
            let overlap = a.end.is_none_or(|end| b.start < end);
            if overlap {
                found.push(format!("{a:?} and {b:?} ran at once"));
            }
            if a.session != b.session && a.epoch == b.epoch {
                found.push(format!("{a:?} and {b:?} share an epoch"));
            }
        }
    }
    found
}

#[tokio::test(start_paused = true)]
async fn a_call_blocked_past_its_authority_is_aborted_and_never_overlaps_a_later_call() {
    // With the default grace, and with the old 5 s one: the stop contract alone keeps
    // the calls apart on this host, whatever the grace.
    for grace in [None, Some(RuntimeBad::LongGrace)] {
        let (calls, cancelled, aborted) = blocked_past_authority(None, grace).await;
        assert!(calls.len() > 1, "the lease was processed again: {calls:?}");
        assert_eq!(clashes(&calls), Vec::<String>::new());
        assert!(calls[1].epoch > calls[0].epoch, "{calls:?}");
        assert_eq!(aborted, 1);
        assert!(cancelled >= 1);
    }
}

/// The old lifecycle, with the old 5 s grace it shipped with (a 1 s grace aborts the
/// blocked call before the late renewal lands here).
#[tokio::test(start_paused = true)]
async fn the_old_lifecycle_runs_a_second_call_beside_the_blocked_one() {
    let (calls, _, _) = blocked_past_authority(
        Some(KnownBad::RestartSameEpoch),
        Some(RuntimeBad::LongGrace),
    )
    .await;
    let found = clashes(&calls);
    assert!(
        found.iter().any(|c| c.contains("ran at once"))
            && found.iter().any(|c| c.contains("share an epoch")),
        "{calls:?}"
    );
}
