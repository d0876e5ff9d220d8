//! Cosmos DB accounts with two regions, on the in-memory emulator: East US is the hub,
//! West US receives every write 50 to 1,500 ms later (seeded), and reads run at
//! Session consistency from the region nearest each host.

mod common;

use common::stores::Racing;

use azure_data_cosmos::options::Region;
use common::Emulator;
use leasehold_adapters::{
    AccountError, ContainerError, CosmosStore, MemoryFeed, Processor, RunError, Store,
};
use leasehold_engine::lease::{LeaseDocument, Record};
use leasehold_engine::store::{Op, Reply, StoreError};
use leasehold_engine::{DocId, Epoch, HostId, LeaseToken, PartitionKey, WallTime};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The seeded replication delays each two-region run is tried with (each run is
/// about 25 s in a debug build: the emulator replicates every write by timer).
const SEEDS: u64 = 2;

fn lease(token: &str) -> LeaseDocument {
    LeaseDocument::new("test", LeaseToken::from(token), WallTime(0))
}

async fn read(store: &CosmosStore<Record>, id: &DocId) -> Result<Reply<Record>, StoreError> {
    let op = Op::Read {
        pk: PartitionKey::new(id.as_str()),
        id: id.clone(),
    };
    store.execute(op).await.result
}

/// A two-region account (`multi`: both regions take writes) with a lease container,
/// and a store near each region.
async fn east_and_west(multi: bool) -> (Emulator, CosmosStore<Record>, CosmosStore<Record>) {
    let emulator = Emulator::two_regions(multi, 7);
    emulator.container("leases", "/id", 4);
    let east = CosmosStore::new(emulator.client_near("leases", Region::EAST_US).await);
    let west = CosmosStore::new(emulator.client_near("leases", Region::WEST_US).await);
    (emulator, east, west)
}

/// Why leasehold needs a single write region: on a multi-write account if-match is
/// checked in each region, so two hosts in two regions that read one version of a
/// lease both take it, and both are told they succeeded.
#[tokio::test(start_paused = true)]
async fn on_a_multi_write_account_two_regions_both_take_one_lease() {
    let (_emulator, east, west) = east_and_west(true).await;
    let doc = lease("0");
    let id = doc.id.clone();
    let created = east
        .execute(Op::Create(Record::Lease(doc.clone())))
        .await
        .result;
    assert!(matches!(created, Ok(Reply::Created(_))));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (Ok(Reply::Read(in_east)), Ok(Reply::Read(in_west))) =
        (read(&east, &id).await, read(&west, &id).await)
    else {
        panic!("both regions have the lease");
    };
    assert_eq!(in_east.etag, in_west.etag);
    let mut taken = Vec::new();
    for (store, host) in [(&east, "a"), (&west, "b")] {
        let mut mine = doc.clone();
        mine.owner = Some(HostId::from(host));
        mine.epoch = Epoch(1);
        let result = store
            .execute(Op::Replace {
                doc: Record::Lease(mine),
                if_match: Some(in_east.etag.clone()),
            })
            .await
            .result;
        taken.push(matches!(result, Ok(Reply::Replaced(_))));
    }
    assert_eq!(taken, [true, true], "two owners of one lease");
}

/// The account check refuses that account: a processor whose store checks the
/// account stops at start with a typed error naming the write regions, and writes
/// nothing (no lease, no heartbeat). The same check passes the single-write account,
/// hosts near either region.
#[tokio::test(start_paused = true)]
async fn a_processor_refuses_a_multi_write_account_at_start_and_writes_nothing() {
    let (emulator, east, west) = east_and_west(true).await;
    let feed = MemoryFeed::new(["0", "1"]);
    for store in [east.clone(), west] {
        let checked = store.with_account_check(emulator.account(), emulator.http());
        let processor = Processor::builder()
            .instance("a")
            .processor_name("test")
            .source(feed.clone())
            .store(checked)
            .handler(|_ctx, batch| async move { Ok(batch.checkpoint) })
            .build()
            .await
            .expect("valid settings");
        let error = processor.run().await.expect_err("refused at start");
        let RunError::Container(ContainerError::Account(AccountError::MultiRegionWrites {
            write_regions,
        })) = &error
        else {
            panic!("{error}");
        };
        assert_eq!(write_regions, &["East US", "West US"]);
        assert!(error.to_string().contains("single write region"), "{error}");
    }
    match east
        .execute(Op::ReadAll {
            prefix: "test".into(),
        })
        .await
        .result
    {
        Ok(Reply::ReadAll(found)) => assert!(found.is_empty(), "{found:?}"),
        other => panic!("{other:?}"),
    }
    let (single, near_east, near_west) = east_and_west(false).await;
    for store in [near_east, near_west] {
        let checked = store.with_account_check(single.account(), single.http());
        assert_eq!(checked.check().await, Ok(()));
    }
}

/// The same race on a single-write account: every write goes to the hub, where
/// if-match is checked once, so the second take fails.
#[tokio::test(start_paused = true)]
async fn on_a_single_write_account_only_one_region_takes_the_lease() {
    let (_emulator, east, west) = east_and_west(false).await;
    let doc = lease("0");
    let id = doc.id.clone();
    assert!(
        east.execute(Op::Create(Record::Lease(doc.clone())))
            .await
            .result
            .is_ok()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let Ok(Reply::Read(seen)) = read(&west, &id).await else {
        panic!("the west region has the lease");
    };
    let mut results = Vec::new();
    for (store, host) in [(&east, "a"), (&west, "b")] {
        let mut mine = doc.clone();
        mine.owner = Some(HostId::from(host));
        mine.epoch = Epoch(1);
        results.push(
            store
                .execute(Op::Replace {
                    doc: Record::Lease(mine),
                    if_match: Some(seen.etag.clone()),
                })
                .await
                .result,
        );
    }
    assert!(matches!(results[0], Ok(Reply::Replaced(_))));
    assert_eq!(results[1], Err(StoreError::PreconditionFailed));
}

/// One handler call: which host, at which epoch, from when to when.
type Calls = Arc<Mutex<BTreeMap<LeaseToken, Vec<(String, Epoch, Instant, Instant)>>>>;

/// Starts processor `name`, reading from the region nearest to `near`.
async fn host(
    emulator: &Emulator,
    name: &str,
    near: Region,
    feed: &MemoryFeed,
    calls: &Calls,
    blind: bool,
) -> (CancellationToken, JoinHandle<()>) {
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client_near("leases", near).await);
    if blind {
        // One party: the store only drops if-match, it waits for nobody.
        return run(name, feed, calls, Racing::new(store, 1).blind()).await;
    }
    run(name, feed, calls, store).await
}

async fn run<St: Store<Record>>(
    name: &str,
    feed: &MemoryFeed,
    calls: &Calls,
    store: St,
) -> (CancellationToken, JoinHandle<()>) {
    let calls = calls.clone();
    let me = name.to_string();
    let builder = Processor::builder()
        .instance(name)
        .processor_name("test")
        .acquire_interval(Duration::from_secs(2))
        .renew_interval(Duration::from_secs(3))
        .expiration_interval(Duration::from_secs(12))
        .poll_interval(Duration::from_millis(500))
        .max_batch(5)
        .source(feed.clone())
        .store(store);
    let processor = builder
        .handler(move |ctx, batch| {
            let calls = calls.clone();
            let me = me.clone();
            async move {
                let started = Instant::now();
                tokio::time::sleep(Duration::from_millis(200)).await;
                calls
                    .lock()
                    .unwrap()
                    .entry(ctx.lease().clone())
                    .or_default()
                    .push((me, ctx.epoch(), started, Instant::now()));
                Ok(batch.checkpoint)
            }
        })
        .build()
        .await
        .expect("valid settings");
    let stop = processor.cancellation();
    let run = tokio::spawn(async move {
        let _ = processor.run().await;
    });
    (stop, run)
}

/// Hosts near East US and near West US share one lease container of a single-write
/// account whose second region lags by up to 1.5 s, seeded by `seed`. east-1 crashes
/// and comes back at once under its name (a new life, which takes its leases back in
/// a new tenure), and new hosts join in the lagging region just then: their first
/// reads may show the leases naming east-1's new tenure and its heartbeat from
/// before. Returns the first two overlapping handler calls of one lease, if any, and
/// how many calls there were.
async fn two_regions(seed: u64, blind: bool) -> (Option<String>, usize) {
    let emulator = Emulator::two_regions(false, seed);
    emulator.container("leases", "/id", 4);
    let feed = MemoryFeed::new((0..8).map(|p| p.to_string()));
    for i in 0..400 {
        feed.push((i % 8).to_string(), format!("item-{i}"));
    }
    let calls: Calls = Arc::default();
    let mut hosts = Vec::new();
    for (name, near) in [("east-1", Region::EAST_US), ("west-1", Region::WEST_US)] {
        hosts.push(host(&emulator, name, near, &feed, &calls, blind).await);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    // east-1 crashes (its task dropped) and starts again under its name.
    let crashed = hosts.remove(0);
    crashed.1.abort();
    let _ = crashed.1.await;
    hosts.push(host(&emulator, "east-1", Region::EAST_US, &feed, &calls, blind).await);
    for (i, name) in ["west-2", "west-3", "west-4"].into_iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(300 * (i as u64 + 1))).await;
        hosts.push(host(&emulator, name, Region::WEST_US, &feed, &calls, blind).await);
    }
    for i in 400..480 {
        feed.push((i % 8).to_string(), format!("item-{i}"));
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    for (i, (stop, run)) in hosts.into_iter().enumerate() {
        stop.cancel();
        if tokio::time::timeout(Duration::from_secs(600), run)
            .await
            .is_err()
        {
            eprintln!("host {i} did not stop within 600 s (seed {seed})");
        }
    }
    let calls = calls.lock().unwrap();
    let total = calls.values().map(Vec::len).sum();
    for (lease, list) in calls.iter() {
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                let apart = a.3 <= b.2 || b.3 <= a.2;
                if !apart && a.0 != b.0 {
                    let overlap = format!(
                        "lease {lease}: {} at {:?} overlaps {} at {:?}",
                        a.0, a.1, b.0, b.1
                    );
                    return (Some(overlap), total);
                }
            }
        }
    }
    (None, total)
}

#[tokio::test(start_paused = true)]
async fn hosts_in_two_regions_never_process_one_lease_at_once() {
    for seed in 1..=SEEDS {
        let (overlap, calls) = two_regions(seed, false).await;
        assert_eq!(overlap, None, "seed {seed}");
        assert!(
            calls >= 8,
            "seed {seed}: every lease is processed ({calls} calls)"
        );
    }
}

/// The sibling: on a store that drops if-match, the same runs have two hosts
/// process one lease at once, and the check above sees it.
#[tokio::test(start_paused = true)]
async fn on_a_store_without_if_match_hosts_in_two_regions_process_one_lease_at_once() {
    let mut found = None;
    for seed in 1..=4 * SEEDS {
        if let (Some(overlap), _) = two_regions(seed, true).await {
            found = Some((seed, overlap));
            break;
        }
    }
    assert!(found.is_some(), "no seed of {} overlapped", 4 * SEEDS);
}
