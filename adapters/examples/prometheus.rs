//! A processor on the in-memory store and feed, its metrics exported in Prometheus's
//! text format through the `metrics` facade: install a recorder, run, render. A real
//! service would serve `render()` on its `/metrics` endpoint.
//!
//! ```sh
//! cargo run -p leasehold-adapters --example prometheus
//! ```

use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
use leasehold_engine::lease::Record;
use metrics_exporter_prometheus::PrometheusBuilder;
use std::time::Duration;

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;

    let feed = MemoryFeed::new(["0", "1", "2"]);
    for i in 0..30 {
        feed.push((i % 3).to_string(), format!("event {i}"));
    }
    let store: MemoryStore<Record> = MemoryStore::new();
    let processor = Processor::builder()
        .instance("host-a")
        .processor_name("orders")
        .source(feed.clone())
        .store(store.clone())
        .handler(|_, batch| async move { Ok(batch.checkpoint) })
        .build()
        .await?;
    let stop = processor.cancellation();
    let run = tokio::spawn(processor.run());
    tokio::time::sleep(Duration::from_secs(30)).await;

    // The estimator's lag per lease lands in the same registry.
    feed.push("0", "late event");
    Processor::builder()
        .processor_name("orders")
        .source(feed)
        .store(store)
        .build_estimator()?
        .estimate()
        .await?;

    print!("{}", prometheus.render());
    stop.cancel();
    run.await??;
    Ok(())
}
