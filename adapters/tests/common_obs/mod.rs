//! A processor whose lease "0" is stuck, for the observability tests.

use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
use leasehold_engine::lease::Record;
use std::time::Duration;

/// Runs host "a" for `seconds` of paused time on `feed`; the handler refuses every
/// batch of lease "0", so its backlog stays.
pub async fn run_a(feed: MemoryFeed, store: MemoryStore<Record>, seconds: u64) {
    let processor = Processor::builder()
        .instance("a")
        .processor_name("obs")
        .poll_interval(Duration::from_secs(1))
        .source(feed)
        .store(store)
        .handler(|ctx, batch| async move {
            if ctx.lease().as_str() == "0" {
                return Err("lease 0 is stuck".into());
            }
            Ok(batch.checkpoint)
        })
        .build()
        .await
        .unwrap();
    let stop = processor.cancellation();
    let run = tokio::spawn(processor.run());
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.cancel();
    run.await.unwrap().unwrap();
}

/// Lease 0 with 7 items, lease 1 with 5.
pub fn feed() -> MemoryFeed {
    let feed = MemoryFeed::new(["0", "1"]);
    for i in 0..7 {
        feed.push("0", format!("zero-{i}"));
    }
    for i in 0..5 {
        feed.push("1", format!("one-{i}"));
    }
    feed
}
