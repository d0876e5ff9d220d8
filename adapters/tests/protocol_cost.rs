//! What coordination costs on the emulator, with its own request charges: processors
//! with nothing to process, on tokio's paused clock, counted by purpose over a steady
//! window after a warm-up. Checkpoints are not coordination and are left out (there
//! are none: the feed is empty).
//!
//! `cargo test -p leasehold-adapters --release --test protocol_cost -- --ignored --nocapture`
//! prints the 8 hosts × 200 leases figures that BENCHMARKS.md records.

mod common;

use common::Emulator;
use leasehold_adapters::{CosmosStore, MemoryFeed, MetricsSnapshot, Processor};
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::{Intent, Liveness, Purpose, Record};
use std::collections::BTreeMap;
use std::time::Duration;

/// One protocol, as `leasehold sim --strategy` names it.
#[derive(Clone, Copy, Debug)]
struct Protocol {
    strategy: Strategy,
    liveness: Liveness,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.strategy, self.liveness)
    }
}

const CFP: Protocol = Protocol {
    strategy: Strategy::CFP,
    liveness: Liveness::Lease,
};
const HANDOFF_LEASE: Protocol = Protocol {
    strategy: Strategy::Handoff,
    liveness: Liveness::Lease,
};
const HANDOFF_SESSION: Protocol = Protocol {
    strategy: Strategy::Handoff,
    liveness: Liveness::Session,
};

/// Requests and request units per host-minute, by purpose, over the window.
#[derive(Debug, Default)]
struct Cost {
    by_purpose: BTreeMap<String, (f64, f64)>,
    requests: f64,
    units: f64,
}

impl Cost {
    /// The difference between two snapshots of each host, over `minutes`.
    fn between(before: &[MetricsSnapshot], after: &[MetricsSnapshot], minutes: f64) -> Cost {
        let per_host_minute = before.len() as f64 * minutes;
        let mut totals: BTreeMap<Intent, (u64, f64)> = BTreeMap::new();
        for (b, a) in before.iter().zip(after) {
            for (intent, calls, units) in &a.requests {
                let entry = totals.entry(*intent).or_default();
                entry.0 += calls;
                entry.1 += units;
            }
            for (intent, calls, units) in &b.requests {
                let entry = totals.entry(*intent).or_default();
                entry.0 -= calls;
                entry.1 -= units;
            }
        }
        let mut cost = Cost::default();
        for (intent, (calls, units)) in totals {
            let purpose = intent.purpose();
            if purpose == Purpose::Checkpoint || calls == 0 {
                continue;
            }
            let (r, u) = (calls as f64 / per_host_minute, units / per_host_minute);
            let entry = cost.by_purpose.entry(format!("{purpose:?}")).or_default();
            entry.0 += r;
            entry.1 += u;
            cost.requests += r;
            cost.units += u;
        }
        cost
    }
}

/// Runs `hosts` processors of `protocol` over `partitions` leases on a fresh emulator
/// container; returns the steady cost over `window` after `warmup`.
async fn steady(
    protocol: Protocol,
    hosts: usize,
    partitions: usize,
    warmup: Duration,
    window: Duration,
) -> Cost {
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client("leases", vec![]).await);
    let feed = MemoryFeed::new((0..partitions).map(|p| format!("p{p:05}")));
    let mut running = Vec::new();
    for h in 0..hosts {
        let processor = Processor::builder()
            .instance(format!("h{h:02}"))
            .processor_name("cost")
            .strategy(protocol.strategy)
            .liveness(protocol.liveness)
            .source(feed.clone())
            .store(store.clone())
            .handler(|_, batch| async move { Ok(batch.checkpoint) })
            .build()
            .await
            .expect("valid settings");
        let stop = processor.cancellation();
        let metrics = processor.metrics();
        let run = tokio::spawn(processor.run());
        running.push((stop, metrics, run));
    }
    tokio::time::sleep(warmup).await;
    let before: Vec<MetricsSnapshot> = running.iter().map(|(_, m, _)| m.snapshot()).collect();
    let owned: u64 = before.iter().map(|s| s.owned).sum();
    assert_eq!(
        owned, partitions as u64,
        "{protocol}: every lease is owned after the warm-up"
    );
    tokio::time::sleep(window).await;
    let after: Vec<MetricsSnapshot> = running.iter().map(|(_, m, _)| m.snapshot()).collect();
    for (stop, _, run) in running {
        stop.cancel();
        run.await.expect("no panic").expect("runs");
    }
    Cost::between(&before, &after, window.as_secs_f64() / 60.0)
}

fn print(protocol: Protocol, cost: &Cost) {
    println!(
        "{protocol}: {:.1} requests, {:.1} RU per host-minute",
        cost.requests, cost.units
    );
    for (purpose, (r, u)) in &cost.by_purpose {
        println!("  {purpose:<10} {r:>8.2} requests {u:>9.2} RU");
    }
}

/// Under session liveness one heartbeat renews every lease a host holds, and the
/// interval's read is the heartbeats: coordination costs a fraction of what per-lease
/// renewals and full scans cost, on the emulator's own charges. Counts, not timings.
#[tokio::test(start_paused = true)]
async fn session_liveness_costs_a_fraction_of_lease_liveness_on_the_emulator() {
    let (warmup, window) = (Duration::from_secs(180), Duration::from_secs(180));
    let lease = steady(HANDOFF_LEASE, 3, 30, warmup, window).await;
    let session = steady(HANDOFF_SESSION, 3, 30, warmup, window).await;
    print(HANDOFF_LEASE, &lease);
    print(HANDOFF_SESSION, &session);
    assert!(
        lease.requests >= 3.0 * session.requests,
        "session {:.1} against lease {:.1} requests per host-minute",
        session.requests,
        lease.requests
    );
    assert!(
        !session.by_purpose.contains_key("Renew"),
        "no per-lease renewal"
    );
    // The sibling: per-lease liveness renews every lease it holds.
    assert!(lease.by_purpose.get("Renew").is_some_and(|(r, _)| *r > 0.0));
}

/// The figures BENCHMARKS.md records: 8 hosts × 200 leases, 10 minutes of warm-up,
/// then 10 minutes measured, for each protocol side by side.
#[tokio::test(start_paused = true)]
#[ignore = "a measurement: run it in release with --nocapture"]
async fn emulator_protocol_cost_of_eight_hosts_and_two_hundred_leases() {
    let (warmup, window) = (Duration::from_secs(600), Duration::from_secs(600));
    let mut costs = Vec::new();
    for protocol in [CFP, HANDOFF_LEASE, HANDOFF_SESSION] {
        let cost = steady(protocol, 8, 200, warmup, window).await;
        print(protocol, &cost);
        costs.push(cost);
    }
    println!(
        "cfp ÷ handoff:session: {:.1} in requests, {:.1} in RU",
        costs[0].requests / costs[2].requests,
        costs[0].units / costs[2].units
    );
}
