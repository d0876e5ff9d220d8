//! Processors on one lease store, in one process: contention, crash and takeover,
//! handoff on graceful shutdown, handler failures, throttling, and the change feed end
//! to end. Time is tokio's paused clock, which jumps ahead whenever every task waits,
//! so the CFP-like intervals below cost no wall time and the tests read no wall clock
//! for their logic.

mod common;

use common::Emulator;
use leasehold_adapters::cosmos::ChangeFeedSource;
use leasehold_adapters::{
    CosmosStore, HandlerError, MemoryFeed, MemoryStore, PartitionSource, Processor, Store,
};
use leasehold_engine::lease::{Intent, Record};
use leasehold_engine::{Checkpoint, Epoch, LeaseToken};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What every handler saw: (lease, epoch, item), in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(LeaseToken, Epoch, String)>>>);

impl Seen {
    fn items(&self) -> BTreeSet<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, _, i)| i.clone())
            .collect()
    }
    fn epochs(&self) -> BTreeMap<LeaseToken, BTreeSet<Epoch>> {
        let mut map: BTreeMap<LeaseToken, BTreeSet<Epoch>> = BTreeMap::new();
        for (l, e, _) in self.0.lock().unwrap().iter() {
            map.entry(l.clone()).or_default().insert(*e);
        }
        map
    }
}

struct Host {
    stop: CancellationToken,
    run: JoinHandle<()>,
    metrics: Arc<leasehold_adapters::Metrics>,
}

async fn start<S, St>(name: &str, source: S, store: St, seen: Seen) -> Host
where
    S: PartitionSource,
    S::Item: std::fmt::Display,
    St: Store<Record>,
{
    start_checkpointing(name, source, store, seen, None).await
}

/// A checkpoint policy other than the default's every batch.
#[derive(Clone, Copy)]
enum Every {
    /// At most once per this long.
    Time(Duration),
    /// At most once per this many items.
    Items(u32),
}

/// As [`start`], checkpointing at most once per `every` if given.
async fn start_checkpointing<S, St>(
    name: &str,
    source: S,
    store: St,
    seen: Seen,
    every: Option<Every>,
) -> Host
where
    S: PartitionSource,
    S::Item: std::fmt::Display,
    St: Store<Record>,
{
    let builder = match every {
        Some(Every::Time(every)) => Processor::builder().checkpoint_at_most_every(every),
        Some(Every::Items(n)) => Processor::builder().checkpoint_every_items(n),
        None => Processor::builder(),
    };
    let processor = builder
        .instance(name)
        .processor_name("test")
        .acquire_interval(Duration::from_secs(13))
        .renew_interval(Duration::from_secs(17))
        .expiration_interval(Duration::from_secs(60))
        .poll_interval(Duration::from_secs(1))
        .max_batch(10)
        .source(source)
        .store(store)
        .handler(move |ctx, batch| {
            let seen = seen.clone();
            async move {
                let mut all = seen.0.lock().unwrap();
                for item in &batch.items {
                    all.push((ctx.lease().clone(), ctx.epoch(), item.to_string()));
                }
                Ok(batch.checkpoint)
            }
        })
        .build()
        .await
        .expect("valid settings");
    let stop = processor.cancellation();
    let metrics = processor.metrics();
    let run = tokio::spawn(async move { processor.run().await.expect("runs") });
    Host { stop, run, metrics }
}

/// Hosts "a" and "b" on `source` and `store`.
async fn two_hosts<S, St>(source: &S, store: &St, seen: &Seen) -> [Host; 2]
where
    S: PartitionSource,
    S::Item: std::fmt::Display,
    St: Store<Record> + Clone,
{
    [
        start("a", source.clone(), store.clone(), seen.clone()).await,
        start("b", source.clone(), store.clone(), seen.clone()).await,
    ]
}

/// Cancels every host and waits for each to end.
async fn stop_all(hosts: impl IntoIterator<Item = Host>) {
    for h in hosts {
        h.stop.cancel();
        h.run.await.unwrap();
    }
}

async fn settle(seconds: u64) {
    tokio::time::sleep(Duration::from_secs(seconds)).await;
}

fn feed(partitions: usize, items: usize) -> MemoryFeed {
    let feed = MemoryFeed::new((0..partitions).map(|p| p.to_string()));
    for i in 0..items {
        feed.push((i % partitions).to_string(), format!("item-{i}"));
    }
    feed
}

/// The owner of every lease, finished splits left out: they are no leases to own.
fn owners(store: &MemoryStore<Record>) -> BTreeMap<String, Option<String>> {
    store
        .snapshot("test..")
        .into_iter()
        .filter_map(|s| match s.doc {
            Record::Lease(l) if !l.is_finished_split() => {
                Some((l.token.to_string(), l.owner.map(|o| o.to_string())))
            }
            Record::Lease(_) | Record::Host(_) => None,
        })
        .collect()
}

fn checkpoints(store: &MemoryStore<Record>) -> BTreeMap<String, u64> {
    store
        .snapshot("test..")
        .into_iter()
        .filter_map(|s| match s.doc {
            Record::Lease(l) => {
                let n = l
                    .checkpoint
                    .map_or(0, |c| c.as_str().parse().expect("a count"));
                Some((l.token.to_string(), n))
            }
            Record::Host(_) => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn three_hosts_share_the_leases_and_process_every_item() {
    let source = feed(6, 60);
    let store = MemoryStore::new();
    let seen = Seen::default();
    let hosts = [
        start("a", source.clone(), store.clone(), seen.clone()).await,
        start("b", source.clone(), store.clone(), seen.clone()).await,
        start("c", source.clone(), store.clone(), seen.clone()).await,
    ];
    // The stored checkpoints (counts of items consumed) never go back.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..300 {
        settle(1).await;
        for (token, checkpoint) in checkpoints(&store) {
            let previous = last.insert(token.clone(), checkpoint).unwrap_or(0);
            assert!(
                checkpoint >= previous,
                "lease {token}: {previous} -> {checkpoint}"
            );
        }
    }
    let expected: BTreeSet<String> = (0..60).map(|i| format!("item-{i}")).collect();
    assert_eq!(seen.items(), expected);
    let mut per_owner: BTreeMap<String, usize> = BTreeMap::new();
    for owner in owners(&store).into_values().flatten() {
        *per_owner.entry(owner).or_default() += 1;
    }
    assert_eq!(
        per_owner.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{per_owner:?}"
    );
    for h in hosts {
        h.stop.cancel();
        h.run.await.unwrap();
    }
    // A graceful stop releases every lease.
    assert!(
        owners(&store).values().all(Option::is_none),
        "{:?}",
        owners(&store)
    );
}

#[tokio::test(start_paused = true)]
async fn a_crashed_hosts_leases_are_taken_over_after_expiry_with_a_new_epoch() {
    let source = feed(4, 0);
    let store = MemoryStore::new();
    let seen = Seen::default();
    let a = start("a", source.clone(), store.clone(), seen.clone()).await;
    settle(60).await;
    assert!(owners(&store).values().all(|o| o.as_deref() == Some("a")));
    // A crash: the task is gone without releasing anything.
    a.run.abort();
    let b = start("b", source.clone(), store.clone(), seen.clone()).await;
    settle(30).await;
    // Not yet: the leases have not expired.
    assert!(owners(&store).values().all(|o| o.as_deref() == Some("a")));
    settle(120).await;
    assert!(
        owners(&store).values().all(|o| o.as_deref() == Some("b")),
        "{:?}",
        owners(&store)
    );
    for i in 0..8 {
        source.push((i % 4).to_string(), format!("late-{i}"));
    }
    settle(30).await;
    let epochs = seen.epochs();
    assert_eq!(epochs.len(), 4);
    assert!(
        epochs.values().all(|e| e.iter().all(|e| e.0 >= 2)),
        "{epochs:?}"
    );
    assert!(b.metrics.snapshot().acquisitions >= 4);
    b.stop.cancel();
    b.run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_host_shutting_down_hands_its_leases_over_without_waiting_for_expiry() {
    let source = feed(4, 0);
    let store = MemoryStore::new();
    let seen = Seen::default();
    let a = start("a", source.clone(), store.clone(), seen.clone()).await;
    settle(60).await;
    let b = start("b", source.clone(), store.clone(), seen.clone()).await;
    settle(60).await;
    a.stop.cancel();
    a.run.await.unwrap();
    // Well under one 60 s expiration after the release, b owns everything.
    settle(20).await;
    assert!(
        owners(&store).values().all(|o| o.as_deref() == Some("b")),
        "{:?}",
        owners(&store)
    );
    assert!(a.metrics.snapshot().releases >= 2);
    b.stop.cancel();
    b.run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failing_or_panicking_handler_is_retried_and_the_host_survives() {
    let source = feed(1, 3);
    let store: MemoryStore<Record> = MemoryStore::new();
    let calls = Arc::new(Mutex::new(0u32));
    let done = Arc::new(Mutex::new(Vec::new()));
    let (c, d) = (calls.clone(), done.clone());
    let processor = Processor::builder()
        .instance("a")
        .processor_name("test")
        .source(source)
        .store(store)
        .handler(move |_ctx, batch| {
            let (calls, done) = (c.clone(), d.clone());
            async move {
                let n = {
                    let mut calls = calls.lock().unwrap();
                    *calls += 1;
                    *calls
                };
                match n {
                    1 => Err::<Checkpoint, HandlerError>("downstream unavailable".into()),
                    2 => panic!("a bug in the handler"),
                    _ => {
                        done.lock().unwrap().extend(batch.items);
                        Ok(batch.checkpoint)
                    }
                }
            }
        })
        .build()
        .await
        .unwrap();
    let stop = processor.cancellation();
    let metrics = processor.metrics();
    let run = tokio::spawn(processor.run());
    settle(60).await;
    assert_eq!(*done.lock().unwrap(), ["item-0", "item-1", "item-2"]);
    let m = metrics.snapshot();
    assert_eq!(m.handler_failures, 2);
    assert_eq!(m.owned, 1);
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn leases_on_the_emulator_are_shared_and_released_and_their_ru_is_counted() {
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client("leases", vec![]).await);
    let source = feed(4, 40);
    let seen = Seen::default();
    let a = start("a", source.clone(), store.clone(), seen.clone()).await;
    let b = start("b", source.clone(), store.clone(), seen.clone()).await;
    settle(300).await;
    assert_eq!(seen.items().len(), 40);
    let (ma, mb) = (a.metrics.snapshot(), b.metrics.snapshot());
    assert_eq!(ma.owned + mb.owned, 4);
    assert_eq!((ma.owned, mb.owned), (2, 2));
    for intent in [Intent::Acquire, Intent::Heartbeat, Intent::Checkpoint] {
        let ru = ma.units_per_call(intent).or(mb.units_per_call(intent));
        println!("RU per {intent:?}: {ru:?}");
        assert!(ru.is_some_and(|ru| ru > 0.0), "{intent:?}");
    }
    // Handoff runs session liveness: the heartbeat renews every lease.
    assert_eq!(ma.units_per_call(Intent::Renew), None);
    assert_eq!(mb.units_per_call(Intent::Renew), None);
    for h in [a, b] {
        h.stop.cancel();
        h.run.await.unwrap();
    }
}

/// One host on the emulator, one item a second into each of 4 partitions for a
/// minute: the checkpoint writes it sends, every item it saw, and the checkpoints its
/// shutdown left.
async fn a_minute_of_items(every: Option<Every>) -> (u64, usize, BTreeMap<String, u64>) {
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client("leases", vec![]).await);
    let source = feed(4, 0);
    let seen = Seen::default();
    let host = start_checkpointing("a", source.clone(), store.clone(), seen.clone(), every).await;
    settle(5).await;
    for i in 0..60 {
        for p in 0..4 {
            source.push(p.to_string(), format!("{p}-{i}"));
        }
        settle(1).await;
    }
    settle(10).await;
    let writes = host
        .metrics
        .snapshot()
        .requests
        .iter()
        .find(|(i, _, _)| *i == Intent::Checkpoint)
        .map_or(0, |(_, calls, _)| *calls);
    stop_all([host]).await;
    let mut left = BTreeMap::new();
    for (token, _, checkpoint) in leases_of(&store).await {
        let n = checkpoint.map_or(0, |c| c.parse().expect("a count"));
        left.insert(token, n);
    }
    (writes, seen.items().len(), left)
}

#[tokio::test(start_paused = true)]
async fn checkpointing_every_ten_seconds_writes_fewer_checkpoints_and_loses_no_item() {
    let (every_batch, seen, left) = a_minute_of_items(None).await;
    let all: BTreeMap<String, u64> = (0..4).map(|p| (p.to_string(), 60)).collect();
    assert_eq!((seen, &left), (240, &all));
    let (interval, seen, left) =
        a_minute_of_items(Some(Every::Time(Duration::from_secs(10)))).await;
    println!("checkpoint writes in a minute: every batch {every_batch}, every 10 s {interval}");
    // The shutdown's releases wrote the last checkpoints the interval held back.
    assert_eq!((seen, &left), (240, &all));
    assert!(
        interval * 4 < every_batch,
        "every batch {every_batch}, every 10 s {interval}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_change_feed_is_processed_end_to_end_while_a_host_stops_midway() {
    let (_emulator, monitored, store, source) = change_feed_rig(3).await;
    let seen = Seen::default();
    write(&monitored, 7, 0..100).await;
    let hosts: Vec<Host> = vec![
        start("a", source.clone(), store.clone(), seen.clone()).await,
        start("b", source.clone(), store.clone(), seen.clone()).await,
        start("c", source.clone(), store.clone(), seen.clone()).await,
    ];
    // The stored checkpoints, sampled every second, never go back, across owners.
    let mut positions = Positions::default();
    let sample = async |positions: &mut Positions| {
        for (lease, token) in StoredCheckpoints(store.clone()).tokens().await {
            positions.at(&lease, emulator_lsn(&token));
        }
    };
    for _ in 0..120 {
        settle(1).await;
        sample(&mut positions).await;
    }
    let mut hosts = hosts.into_iter();
    let first = hosts.next().unwrap();
    first.stop.cancel();
    first.run.await.unwrap();
    write(&monitored, 7, 100..200).await;
    for _ in 0..120 {
        settle(1).await;
        sample(&mut positions).await;
    }
    assert_eq!(positions.regressions, Vec::<String>::new());
    // Every range's checkpoint moved on after the second round of writes.
    assert!(
        positions.samples > 100 && positions.advances >= 3,
        "{} samples, {} advances",
        positions.samples,
        positions.advances
    );
    let ids = seen.document_ids();
    assert_eq!(ids.len(), 200, "every document processed at least once");
    for h in hosts {
        h.stop.cancel();
        h.run.await.unwrap();
    }
}

/// The leases of the processor group: token, owner and checkpoint.
async fn leases_of<St: Store<Record>>(store: &St) -> Vec<(String, Option<String>, Option<String>)> {
    use leasehold_engine::store::{Op, Reply};
    let all = store
        .execute(Op::ReadAll {
            prefix: "test..".into(),
        })
        .await
        .result;
    let Ok(Reply::ReadAll(all)) = all else {
        panic!("{all:?}")
    };
    // Finished splits stay in the table, but are no leases.
    all.into_iter()
        .filter_map(|s| match s.doc {
            Record::Lease(l) if !l.is_finished_split() => Some((
                l.token.to_string(),
                l.owner.map(|o| o.to_string()),
                l.checkpoint.map(|c| c.as_str().to_string()),
            )),
            Record::Lease(_) | Record::Host(_) => None,
        })
        .collect()
}

/// A split of a memory-feed partition: its lease is replaced by one per child, each
/// from its checkpoint, and once balanced the children are on different hosts.
#[tokio::test(start_paused = true)]
async fn a_split_partition_is_replaced_by_child_leases_that_two_hosts_share() {
    let source = feed(1, 40);
    let store = MemoryStore::new();
    let seen = Seen::default();
    let hosts = two_hosts(&source, &store, &seen).await;
    settle(60).await;
    source.split("0", ["0a", "0b"]).unwrap();
    for i in 40..80 {
        source.push("0", format!("item-{i}"));
    }
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..60 {
        settle(5).await;
        for (lease, n) in checkpoints(&store) {
            let before = last.insert(lease.clone(), n).unwrap_or(0);
            assert!(n >= before, "lease {lease}: checkpoint {before} -> {n}");
        }
    }
    assert_eq!(seen.items().len(), 80, "every item processed at least once");
    let leases = owners(&store);
    assert_eq!(leases.keys().collect::<Vec<_>>(), ["0a", "0b"]);
    assert_ne!(leases["0a"], leases["0b"], "balanced: one child each");
    stop_all(hosts).await;
}

/// A source that answers every partition split into itself: the engine would refuse
/// that, so the worker logs it and reads on.
#[derive(Clone)]
struct SplitsIntoItself(MemoryFeed);

impl PartitionSource for SplitsIntoItself {
    type Item = String;

    async fn partitions(&self) -> Result<Vec<LeaseToken>, leasehold_adapters::SourceError> {
        self.0.partitions().await
    }

    async fn read(
        &self,
        partition: &LeaseToken,
        from: Option<&Checkpoint>,
        max: usize,
    ) -> Result<leasehold_adapters::Batch<String>, leasehold_adapters::SourceError> {
        self.0.read(partition, from, max).await
    }

    async fn split_of(
        &self,
        partition: &LeaseToken,
    ) -> Result<Option<Vec<LeaseToken>>, leasehold_adapters::SourceError> {
        Ok(Some(vec![partition.clone()]))
    }
}

#[tokio::test(start_paused = true)]
async fn a_source_naming_impossible_split_children_is_read_on_not_hung() {
    let source = SplitsIntoItself(feed(2, 20));
    let store = MemoryStore::new();
    let seen = Seen::default();
    let a = start("a", source, store.clone(), seen.clone()).await;
    settle(30).await;
    assert_eq!(seen.items().len(), 20);
    assert_eq!(owners(&store).len(), 2, "no lease was replaced");
    a.stop.cancel();
    a.run.await.unwrap();
}

/// A split of the monitored container on the emulator: the split range's lease is
/// replaced by one lease per child, each from the parent's continuation. Every
/// document is processed at least once, no stored checkpoint goes back, and once
/// balanced the children are owned by different hosts.
#[tokio::test(start_paused = true)]
async fn a_split_of_the_monitored_container_gives_child_leases_on_different_hosts() {
    let (emulator, monitored, store, source) = change_feed_rig(1).await;
    let seen = Seen::default();
    write(&monitored, 11, 0..60).await;
    let hosts = two_hosts(&source, &store, &seen).await;
    settle(60).await;
    let before = leases_of(&store).await;
    assert_eq!(before.len(), 1);
    let parent_lsn = emulator_lsn(before[0].2.as_deref().expect("a checkpoint"));
    let children = emulator.split("monitored", 0).await;
    assert_eq!(children.len(), 2);
    write(&monitored, 11, 60..120).await;
    let mut positions = Positions::default();
    for _ in 0..60 {
        settle(5).await;
        for (lease, token) in StoredCheckpoints(store.clone()).tokens().await {
            let lsn = emulator_lsn(&token);
            if lease != before[0].0 {
                assert!(lsn >= parent_lsn, "child {lease} starts behind its parent");
            }
            positions.at(&lease, lsn);
        }
    }
    assert_eq!(positions.regressions, Vec::<String>::new());
    assert_eq!(
        seen.document_ids().len(),
        120,
        "every document processed at least once"
    );
    let after = leases_of(&store).await;
    assert_eq!(after.len(), 2, "one lease per child: {after:?}");
    assert!(
        after.iter().all(|(token, ..)| *token != before[0].0),
        "the parent is a finished split"
    );
    assert_ne!(after[0].1, after[1].1, "balanced: one child each");
    println!(
        "split: parent at lsn {parent_lsn}; children {:?}; {} documents, {} deliveries",
        after
            .iter()
            .map(|(_, o, c)| (o.clone(), c.as_deref().map(emulator_lsn)))
            .collect::<Vec<_>>(),
        seen.document_ids().len(),
        seen.0.lock().unwrap().len()
    );
    stop_all(hosts).await;
}

/// A merge of the monitored container's partitions on the emulator: each lease keeps
/// its range and reads it on from its own continuation; no lease is split or added,
/// and every document written after the merge is processed. (The emulator renumbers
/// the merged partition's log, so reading on from an old continuation also returns
/// some changes from before the merge again: at least once, not exactly once.)
#[tokio::test(start_paused = true)]
async fn after_a_merge_each_lease_reads_on_from_its_own_continuation() {
    let (emulator, monitored, store, source) = change_feed_rig(2).await;
    let seen = Seen::default();
    write(&monitored, 11, 0..60).await;
    let hosts = two_hosts(&source, &store, &seen).await;
    settle(60).await;
    let before = leases_of(&store).await;
    assert_eq!(before.len(), 2);
    assert_eq!(seen.document_ids().len(), 60);
    emulator.merge("monitored", 0, 1).await;
    write(&monitored, 11, 60..120).await;
    settle(120).await;
    let after = leases_of(&store).await;
    let tokens = |l: &[(String, Option<String>, Option<String>)]| {
        l.iter().map(|(t, ..)| t.clone()).collect::<Vec<_>>()
    };
    assert_eq!(tokens(&after), tokens(&before), "the same leases, no split");
    assert!(after.iter().all(|(_, owner, _)| owner.is_some()));
    let processed = seen.document_ids();
    let number = |id: &String| id.trim_start_matches("doc-").parse::<usize>().unwrap();
    let after_merge = processed.iter().filter(|id| number(id) >= 60).count();
    assert_eq!(after_merge, 60, "every document written after the merge");
    let deliveries = seen.0.lock().unwrap().len();
    println!(
        "merge: 120 documents, 60 of them after the merge, all processed; {} deliveries ({} again after the merge)",
        deliveries,
        deliveries - 120
    );
    stop_all(hosts).await;
}

/// The estimator on the emulator's change feed, with a known backlog: 25 documents
/// written after every lease caught up and its host left. It reads one change per
/// lease from the checkpoint; the lag is the partition's latest log sequence number
/// less the first unread change's, plus one.
#[tokio::test(start_paused = true)]
async fn the_estimator_reports_a_known_backlog_on_the_change_feed() {
    let (_emulator, monitored, store, source) = change_feed_rig(2).await;
    let seen = Seen::default();
    write(&monitored, 11, 0..30).await;
    let a = start("a", source.clone(), store.clone(), seen.clone()).await;
    settle(60).await;
    assert_eq!(seen.document_ids().len(), 30);
    let estimator = Processor::builder()
        .processor_name("test")
        .source(source.clone())
        .store(store.clone())
        .build_estimator()
        .unwrap();
    let caught_up = estimator.estimate().await.unwrap();
    assert_eq!(caught_up.leases.len(), 2);
    assert_eq!(caught_up.total(), 0, "{caught_up:?}");
    assert!(
        caught_up
            .leases
            .iter()
            .all(|l| l.owner.as_ref().map(|o| o.as_str()) == Some("a"))
    );
    a.stop.cancel();
    a.run.await.unwrap();
    write(&monitored, 11, 30..55).await;
    let behind = estimator.estimate().await.unwrap();
    assert_eq!(behind.total(), 25, "{behind:?}");
    assert!(behind.leases.iter().all(|l| l.owner.is_none()), "released");
    assert!(
        behind
            .leases
            .iter()
            .all(|l| l.items == 0 || l.oldest.is_some()),
        "the age of the oldest change is known"
    );
    println!(
        "estimator: 2 leases, backlog {} ({:?}); {:.1} RU per call caught up, {:.1} RU behind",
        behind.total(),
        behind.leases.iter().map(|l| l.items).collect::<Vec<_>>(),
        caught_up.request_units,
        behind.request_units
    );
}

#[tokio::test(start_paused = true)]
async fn throttled_lease_writes_are_retried_and_no_checkpoint_is_lost() {
    use azure_data_cosmos::fault_injection::{
        FaultInjectionConditionBuilder, FaultInjectionErrorType, FaultInjectionResultBuilder,
        FaultInjectionRuleBuilder, FaultOperationType,
    };
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    let rule = Arc::new(
        FaultInjectionRuleBuilder::new(
            "replace-429",
            FaultInjectionResultBuilder::new()
                .with_error(FaultInjectionErrorType::TooManyRequests)
                .build(),
        )
        .with_condition(
            FaultInjectionConditionBuilder::new()
                .with_operation_type(FaultOperationType::ReplaceItem)
                .build(),
        )
        .with_hit_limit(25)
        .build(),
    );
    let client = emulator
        .client_with("leases", vec![rule.clone()], true)
        .await;
    let store: CosmosStore<Record> = CosmosStore::new(client);
    let source = feed(2, 30);
    let seen = Seen::default();
    let a = start("a", source.clone(), store.clone(), seen.clone()).await;
    settle(300).await;
    assert_eq!(rule.hit_count(), 25, "the 429s reached the engine");
    assert_eq!(seen.items().len(), 30);
    a.stop.cancel();
    a.run.await.unwrap();
    // Every lease ends with the checkpoint of all its items: 15 each.
    let reader = StoredCheckpoints(store);
    assert_eq!(reader.checkpoints().await, [15, 15]);
}

/// The position of each lease's stored checkpoint over time, and every time one went
/// back.
#[derive(Default)]
struct Positions {
    last: BTreeMap<String, i64>,
    samples: usize,
    advances: usize,
    regressions: Vec<String>,
}

impl Positions {
    fn at(&mut self, lease: &str, lsn: i64) {
        self.samples += 1;
        match self.last.insert(lease.to_string(), lsn) {
            Some(previous) if lsn < previous => self
                .regressions
                .push(format!("lease {lease}: lsn {previous} -> {lsn}")),
            Some(previous) if lsn > previous => self.advances += 1,
            _ => {}
        }
    }
}

/// The position a change-feed continuation token stands for. Tokens are opaque to
/// leasehold; this reads the emulator's own encoding (`c1.` then base64 JSON whose
/// per-range server continuations carry an `lsn`), for this test alone.
fn emulator_lsn(token: &str) -> i64 {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let body = token.strip_prefix("c1.").expect("an emulator token");
    let bytes = GeneralPurpose::new(&base64::alphabet::URL_SAFE, config)
        .decode(body)
        .or_else(|_| GeneralPurpose::new(&base64::alphabet::STANDARD, config).decode(body))
        .expect("base64");
    let json: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    json["root"]["active_tokens"]
        .as_array()
        .expect("active tokens")
        .iter()
        .map(|t| {
            let server: serde_json::Value =
                serde_json::from_str(t["server_continuation"].as_str().expect("a cursor"))
                    .expect("cursor json");
            server["lsn"].as_i64().expect("an lsn")
        })
        .max()
        .expect("one range")
}

/// The monotonicity check above sees a checkpoint that goes back.
#[test]
fn the_checkpoint_position_check_catches_a_checkpoint_going_back() {
    let mut positions = Positions::default();
    for lsn in [3, 7, 7, 9] {
        positions.at("range-a", lsn);
    }
    assert!(positions.regressions.is_empty());
    positions.at("range-a", 8);
    assert_eq!(positions.regressions, ["lease range-a: lsn 9 -> 8"]);
}

/// An emulator with a monitored container over `partitions` physical partitions and
/// a lease container: the emulator, the monitored container, the lease store and the
/// change feed source.
async fn change_feed_rig(
    partitions: u32,
) -> (
    Emulator,
    azure_data_cosmos::ContainerClient,
    CosmosStore<Record>,
    ChangeFeedSource,
) {
    let emulator = Emulator::new();
    emulator.container("monitored", "/pk", partitions);
    emulator.container("leases", "/id", 1);
    let monitored = emulator.client("monitored", vec![]).await;
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client("leases", vec![]).await);
    let source = ChangeFeedSource::new(monitored.clone());
    (emulator, monitored, store, source)
}

/// Writes documents `range` to the monitored container, spread over `keys` logical
/// partitions.
async fn write(
    monitored: &azure_data_cosmos::ContainerClient,
    keys: usize,
    range: std::ops::Range<usize>,
) {
    for i in range {
        let pk = format!("k{}", i % keys);
        let doc = serde_json::json!({"id": format!("doc-{i}"), "pk": pk});
        monitored
            .create_item(pk, &format!("doc-{i}"), &doc, None)
            .await
            .unwrap();
    }
}

impl Seen {
    /// The ids of the change-feed documents the handlers saw.
    fn document_ids(&self) -> BTreeSet<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, _, v)| serde_json::from_str::<serde_json::Value>(v).ok())
            .filter_map(|v| v["id"].as_str().map(String::from))
            .collect()
    }
}

struct StoredCheckpoints(CosmosStore<Record>);

impl StoredCheckpoints {
    /// (lease, checkpoint) for every lease with a checkpoint.
    async fn tokens(&self) -> Vec<(String, String)> {
        use leasehold_engine::store::{Op, Reply};
        let all = self
            .0
            .execute(Op::ReadAll {
                prefix: "test..".into(),
            })
            .await
            .result;
        let Ok(Reply::ReadAll(all)) = all else {
            panic!("{all:?}")
        };
        all.into_iter()
            .filter_map(|s| match s.doc {
                Record::Lease(l) => l
                    .checkpoint
                    .map(|c| (l.token.to_string(), c.as_str().to_string())),
                Record::Host(_) => None,
            })
            .collect()
    }

    async fn checkpoints(&self) -> Vec<u64> {
        use leasehold_engine::store::{Op, Reply};
        let all = self
            .0
            .execute(Op::ReadAll {
                prefix: "test..".into(),
            })
            .await
            .result;
        let Ok(Reply::ReadAll(all)) = all else {
            panic!("{all:?}")
        };
        all.into_iter()
            .filter_map(|s| match s.doc {
                Record::Lease(l) => l.checkpoint.map(|c| c.as_str().parse().unwrap()),
                Record::Host(_) => None,
            })
            .collect()
    }
}

/// A lease container partitioned by another path than `/id` would scatter or refuse
/// every lease write: the processor says so before it starts anything.
#[tokio::test(start_paused = true)]
async fn a_lease_container_partitioned_by_another_path_stops_the_processor_before_it_starts() {
    let emulator = Emulator::new();
    emulator.container("leases", "/pk", 1);
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client("leases", vec![]).await);
    let processor = Processor::builder()
        .instance("a")
        .processor_name("test")
        .source(feed(2, 4))
        .store(store.clone())
        .handler(|_ctx, batch: leasehold_adapters::Batch<_>| async move { Ok(batch.checkpoint) })
        .build()
        .await
        .unwrap();
    let error = processor.run().await.unwrap_err();
    assert!(
        matches!(
            &error,
            leasehold_adapters::RunError::Container(
                leasehold_adapters::ContainerError::PartitionKey {
                    expected: "/id",
                    ..
                }
            )
        ),
        "{error}"
    );
    assert_eq!(
        store.charges().total_units(),
        0.0,
        "nothing was written or read"
    );
}

#[tokio::test(start_paused = true)]
async fn checkpointing_every_eight_items_writes_fewer_checkpoints_and_loses_no_item() {
    let (every_batch, seen, left) = a_minute_of_items(None).await;
    let all: BTreeMap<String, u64> = (0..4).map(|p| (p.to_string(), 60)).collect();
    assert_eq!((seen, &left), (240, &all));
    let (items, seen, left) = a_minute_of_items(Some(Every::Items(8))).await;
    println!("checkpoint writes in a minute: every batch {every_batch}, every 8 items {items}");
    // The shutdown's releases wrote the last checkpoints the count held back.
    assert_eq!((seen, &left), (240, &all));
    // One item a second per partition, one write per 8 items: 7 or so per partition.
    assert!(
        items * 4 < every_batch,
        "every batch {every_batch}, every 8 items {items}"
    );
}
