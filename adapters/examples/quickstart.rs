//! Three hosts on the in-memory store process a synthetic partitioned feed, and print
//! ownership changes as they happen, and the estimator's lag once a minute. One host
//! leaves midway; the others take over its leases by handoff.
//!
//! ```sh
//! cargo run -p leasehold-adapters --example quickstart
//! ```

use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
use leasehold_engine::lease::Record;
use std::collections::BTreeMap;
use std::time::Duration;

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Paused time: the example runs five virtual minutes in well under a second.
    let feed = MemoryFeed::new((0..8).map(|p| p.to_string()));
    let store: MemoryStore<Record> = MemoryStore::new();
    let mut hosts = Vec::new();
    for name in ["host-a", "host-b", "host-c"] {
        let processor = Processor::builder()
            .instance(name)
            .processor_name("quickstart")
            .poll_interval(Duration::from_secs(1))
            .source(feed.clone())
            .store(store.clone())
            .handler(move |ctx, batch| async move {
                println!(
                    "{name} processed {} items of lease {} at epoch {}",
                    batch.items.len(),
                    ctx.lease(),
                    ctx.epoch().0
                );
                Ok(batch.checkpoint)
            })
            .build()
            .await?;
        let stop = processor.cancellation();
        hosts.push((name, stop, tokio::spawn(processor.run())));
    }
    let estimator = Processor::builder()
        .processor_name("quickstart")
        .source(feed.clone())
        .store(store.clone())
        .build_estimator()?;
    let mut owners: BTreeMap<String, Option<String>> = BTreeMap::new();
    for second in 0..300u32 {
        if second % 10 == 0 {
            for p in 0..8 {
                feed.push(p.to_string(), format!("event {second}"));
            }
        }
        if second == 150 {
            println!("-- host-a leaves gracefully");
            hosts[0].1.cancel();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        if second % 60 == 59 {
            let estimate = estimator.estimate().await?;
            let lags: Vec<String> = estimate
                .leases
                .iter()
                .map(|l| format!("{}:{}", l.lease, l.items))
                .collect();
            println!(
                "t={second:>3}s lag {} in all (lease:items {})",
                estimate.total(),
                lags.join(" ")
            );
        }
        for stored in store.snapshot("quickstart..") {
            if let Record::Lease(lease) = stored.doc {
                let owner = lease.owner.map(|o| o.to_string());
                let token = lease.token.to_string();
                let known = owners.contains_key(&token);
                if !known && owner.is_none() {
                    owners.insert(token, owner);
                } else if owners.get(&token) != Some(&owner) {
                    println!(
                        "t={second:>3}s lease {token}: {:?} -> {:?} (epoch {})",
                        owners.get(&token).cloned().flatten(),
                        owner,
                        lease.epoch.0
                    );
                    owners.insert(token, owner);
                }
            }
        }
    }
    for (_, stop, run) in hosts {
        stop.cancel();
        run.await??;
    }
    Ok(())
}
