//! What a processor tells the outside: the `metrics` facade's series, tracing spans
//! per lease, and the estimator's lag. All on the in-memory store and feed.

use leasehold_adapters::runtime::METRIC_NAMES;
use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
use leasehold_engine::lease::Record;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::{BTreeMap, BTreeSet};

mod common_obs;
use common_obs::{feed, run_a};

#[tokio::test(start_paused = true)]
async fn the_processor_emits_its_counters_through_the_metrics_facade() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    run_a(feed(), MemoryStore::new(), 30).await;
    let mut values: BTreeMap<String, f64> = BTreeMap::new();
    let mut names = BTreeSet::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let name = key.key().name().to_string();
        assert!(name.starts_with("leasehold_"), "{name}");
        assert!(
            METRIC_NAMES.iter().any(|(n, ..)| *n == name),
            "{name} is documented"
        );
        let labels: Vec<_> = key.key().labels().map(|l| l.key().to_string()).collect();
        assert!(labels.contains(&"group".to_string()), "{name}: {labels:?}");
        let v = match value {
            DebugValue::Counter(c) => c as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(h) => h.len() as f64,
        };
        *values.entry(name.clone()).or_default() += v;
        names.insert(name);
    }
    assert_eq!(values["leasehold_lease_acquisitions_total"], 2.0);
    assert_eq!(
        values["leasehold_lease_releases_total"], 2.0,
        "both released at shutdown"
    );
    assert_eq!(values["leasehold_leases_owned"], 0.0);
    assert!(
        values["leasehold_handler_failures_total"] >= 1.0,
        "lease 0's handler fails"
    );
    assert!(
        values["leasehold_checkpoints_total"] >= 1.0,
        "lease 1 checkpoints"
    );
    assert!(values["leasehold_requests_total"] > 0.0);
    assert!(names.contains("leasehold_request_units"));
}

#[tokio::test(start_paused = true)]
async fn the_estimator_reports_each_leases_owner_and_backlog() {
    let feed = feed();
    let store = MemoryStore::new();
    run_a(feed.clone(), store.clone(), 30).await;
    feed.push("1", "one-5");
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let estimator = Processor::builder()
        .processor_name("obs")
        .source(feed)
        .store(store)
        .build_estimator()
        .unwrap();
    let estimate = estimator.estimate().await.unwrap();
    let lags: Vec<(String, Option<String>, u64)> = estimate
        .leases
        .iter()
        .map(|l| {
            (
                l.lease.to_string(),
                l.owner.as_ref().map(|o| o.to_string()),
                l.items,
            )
        })
        .collect();
    // Released at shutdown: no owner. Lease 0 never got past its 7; lease 1 took its
    // 5 and has 1 new.
    assert_eq!(lags, [("0".into(), None, 7), ("1".into(), None, 1)]);
    assert_eq!(estimate.total(), 8);
    let lag: BTreeMap<String, f64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(k, ..)| k.key().name() == "leasehold_lease_lag_items")
        .map(|(k, _, _, v)| {
            let lease = k
                .key()
                .labels()
                .find(|l| l.key() == "lease")
                .unwrap()
                .value()
                .to_string();
            let DebugValue::Gauge(g) = v else {
                panic!("a gauge")
            };
            (lease, g.into_inner())
        })
        .collect();
    assert_eq!(lag, BTreeMap::from([("0".into(), 7.0), ("1".into(), 1.0)]));
}

#[test]
fn an_estimator_needs_a_processor_name() {
    let built = Processor::builder()
        .source(MemoryFeed::new(["0"]))
        .store(MemoryStore::<Record>::new())
        .build_estimator();
    assert!(built.is_err());
}

/// While a split is being finished, the marked lease and its children overlap: only
/// the children are counted.
#[tokio::test(start_paused = true)]
async fn the_estimator_leaves_out_a_lease_being_replaced_by_its_children() {
    use leasehold_adapters::{PartitionSource, Store};
    use leasehold_engine::lease::LeaseDocument;
    use leasehold_engine::store::Op;
    use leasehold_engine::{LeaseToken, WallTime};
    let feed = MemoryFeed::new(["0"]);
    for i in 0..6 {
        feed.push("0", format!("item-{i}"));
    }
    feed.split("0", ["0a", "0b"]).unwrap();
    let store: MemoryStore<Record> = MemoryStore::new();
    let mut parent = LeaseDocument::new("obs", LeaseToken::from("0"), WallTime(0));
    parent.split_into = vec![LeaseToken::from("0a"), LeaseToken::from("0b")];
    let child = parent.child(LeaseToken::from("0a"), WallTime(0));
    for doc in [parent, child] {
        store
            .execute(Op::Create(Record::Lease(doc)))
            .await
            .result
            .unwrap();
    }
    let estimate = Processor::builder()
        .processor_name("obs")
        .source(feed.clone())
        .store(store)
        .build_estimator()
        .unwrap()
        .estimate()
        .await
        .unwrap();
    let leases: Vec<String> = estimate
        .leases
        .iter()
        .map(|l| l.lease.to_string())
        .collect();
    assert_eq!(leases, ["0a"]);
    let in_0a = feed
        .read(&"0a".into(), None, 100)
        .await
        .unwrap()
        .items
        .len() as u64;
    assert_eq!(estimate.total(), in_0a);
}
