//! The checkpoint policy: after every batch, at most once per interval or at most once
//! per so many items, the newest report winning and any other write of the lease
//! carrying it at once.

mod common;

use common::*;
use leasehold_engine::lease::{CheckpointPolicy, ConfigError, Input, Intent, LeaseConfig, Output};
use leasehold_engine::store::StoreError;
use leasehold_engine::{Checkpoint, Millis};

fn every_5s(config: LeaseConfig) -> LeaseConfig {
    LeaseConfig {
        checkpoint: CheckpointPolicy::AtMostEvery(Millis::from_secs(5)),
        ..config
    }
}

/// The checkpoints `name` was told are stored, in order.
fn written(c: &Cluster, name: &str) -> Vec<String> {
    c.events_of(name)
        .into_iter()
        .filter_map(|o| match o {
            Output::Checkpointed { checkpoint, .. } => Some(checkpoint.to_string()),
            _ => None,
        })
        .collect()
}

/// One host under session liveness (no renewals to carry a checkpoint): reports 1 at
/// once, 2 a second later, 3 two seconds after that; then six seconds pass.
fn three_reports(config: LeaseConfig) -> Cluster {
    let mut c = Cluster::new();
    c.add("a", config);
    c.run_for(100);
    c.checkpoint("a", "0", "1").unwrap();
    c.run_for(1_000);
    c.checkpoint("a", "0", "2").unwrap();
    c.run_for(2_000);
    c.checkpoint("a", "0", "3").unwrap();
    c.run_for(6_000);
    c
}

#[test]
fn under_an_interval_a_checkpoint_waits_for_it_and_the_newest_report_wins() {
    let mut c = Cluster::new();
    c.add("a", every_5s(session_config(1)));
    c.run_for(100);
    c.checkpoint("a", "0", "1").unwrap();
    c.deliver_all();
    // The first of an ownership goes at once.
    assert_eq!(written(&c, "a"), ["1"]);
    c.run_for(1_000);
    c.checkpoint("a", "0", "2").unwrap();
    c.run_for(2_000);
    c.checkpoint("a", "0", "3").unwrap();
    c.run_for(1_800);
    assert_eq!(written(&c, "a"), ["1"], "held until 5 s after the first");
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("1")));
    c.run_for(300);
    assert_eq!(written(&c, "a"), ["1", "3"]);
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("3")));
}

#[test]
fn after_every_batch_each_report_is_written_at_once() {
    let c = three_reports(session_config(1));
    assert_eq!(written(&c, "a"), ["1", "2", "3"]);
}

#[test]
fn under_an_interval_the_same_reports_take_two_writes() {
    let c = three_reports(every_5s(session_config(1)));
    assert_eq!(written(&c, "a"), ["1", "3"]);
}

#[test]
fn a_shutdown_writes_the_checkpoint_the_interval_held_back() {
    let mut c = Cluster::new();
    c.add("a", every_5s(session_config(1)));
    c.nodes.get_mut("a").unwrap().auto_ack = false;
    c.run_for(100);
    c.checkpoint("a", "0", "1").unwrap();
    c.deliver_all();
    c.checkpoint("a", "0", "2").unwrap();
    c.deliver_all();
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("1")));
    c.input("a", Input::Shutdown).unwrap();
    c.checkpoint("a", "0", "3").unwrap();
    c.stopped("a", "0");
    c.deliver_all();
    let released = c.lease("0");
    assert_eq!(released.owner, None);
    assert_eq!(released.checkpoint, Some(Checkpoint::from("3")));
}

#[test]
fn under_lease_liveness_a_renewal_carries_the_held_checkpoint() {
    let mut c = Cluster::new();
    c.add(
        "a",
        LeaseConfig {
            checkpoint: CheckpointPolicy::AtMostEvery(Millis::from_secs(60)),
            ..config(1)
        },
    );
    c.run_for(100);
    c.checkpoint("a", "0", "1").unwrap();
    c.deliver_all();
    c.checkpoint("a", "0", "2").unwrap();
    // Renewals come every 3 s; the interval is a minute.
    c.run_for(4_000);
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("2")));
    let alone = c
        .sent
        .iter()
        .filter(|(_, _, r)| r.intent == Intent::Checkpoint)
        .count();
    assert_eq!(alone, 1, "only the first went on a write of its own");
}

fn every_3_items(config: LeaseConfig) -> LeaseConfig {
    LeaseConfig {
        checkpoint: CheckpointPolicy::AtMostEveryItems(3),
        ..config
    }
}

#[test]
fn under_an_item_count_a_checkpoint_waits_for_that_many_items() {
    let mut c = Cluster::new();
    c.add("a", every_3_items(session_config(1)));
    c.run_for(100);
    for item in 1..=7 {
        c.checkpoint("a", "0", &item.to_string()).unwrap();
        c.run_for(100);
    }
    // The lag never reaches 3 items: 7 waits with one finished item behind it.
    assert_eq!(written(&c, "a"), ["3", "6"]);
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("6")));
}

#[test]
fn a_batch_of_as_many_items_as_the_count_is_written_at_once() {
    let mut c = Cluster::new();
    c.add("a", every_3_items(session_config(1)));
    c.run_for(100);
    c.checkpoint_items("a", "0", "2", 2).unwrap();
    c.run_for(100);
    assert!(written(&c, "a").is_empty());
    c.checkpoint_items("a", "0", "40", 38).unwrap();
    c.run_for(100);
    assert_eq!(written(&c, "a"), ["40"]);
}

#[test]
fn a_shutdown_writes_the_checkpoint_the_item_count_held_back() {
    let mut c = Cluster::new();
    c.add("a", every_3_items(session_config(1)));
    c.nodes.get_mut("a").unwrap().auto_ack = false;
    c.run_for(100);
    c.checkpoint("a", "0", "1").unwrap();
    c.deliver_all();
    assert_eq!(c.lease("0").checkpoint, None);
    c.input("a", Input::Shutdown).unwrap();
    c.checkpoint("a", "0", "2").unwrap();
    c.stopped("a", "0");
    c.deliver_all();
    let released = c.lease("0");
    assert_eq!(released.owner, None);
    assert_eq!(released.checkpoint, Some(Checkpoint::from("2")));
}

#[test]
fn an_item_count_of_zero_is_refused() {
    let config = LeaseConfig {
        checkpoint: CheckpointPolicy::AtMostEveryItems(0),
        ..LeaseConfig::default()
    };
    assert_eq!(config.validate(), Err(ConfigError::ZeroCheckpointItems));
    assert!(every_3_items(LeaseConfig::default()).validate().is_ok());
}

/// Under an interval, reports 1 (whose write the store throttles, asking for a 100 ms
/// wait) and returns when the lease's stored checkpoint became 1.
fn stored_after_a_throttled_write(config: LeaseConfig) -> Option<u64> {
    let mut c = Cluster::new();
    c.add("a", config);
    c.run_for(100);
    c.checkpoint("a", "0", "1").unwrap();
    let write = c.intercept("a", Intent::Checkpoint);
    let throttled = Err(StoreError::Throttled {
        retry_after: Millis(100),
    });
    c.answer("a", &write, throttled);
    for step in 1..=100 {
        c.run_for(100);
        if c.lease("0").checkpoint == Some(Checkpoint::from("1")) {
            return Some(100 + step * 100);
        }
    }
    None
}

#[test]
fn a_checkpoint_whose_write_failed_goes_at_the_next_write_not_an_interval_later() {
    // The failed write counts as none: the retry goes after the store's 100 ms.
    let at = stored_after_a_throttled_write(LeaseConfig {
        checkpoint: CheckpointPolicy::AtMostEvery(Millis::from_secs(60)),
        ..session_config(1)
    });
    assert_eq!(at, Some(200));
    // As after every batch.
    assert_eq!(stored_after_a_throttled_write(session_config(1)), Some(200));
}

#[test]
fn under_an_item_count_a_checkpoint_whose_write_failed_goes_at_the_next_write() {
    let mut c = Cluster::new();
    c.add("a", every_3_items(session_config(1)));
    c.run_for(100);
    c.checkpoint_items("a", "0", "3", 3).unwrap();
    let write = c.intercept("a", Intent::Checkpoint);
    let throttled = Err(StoreError::Throttled {
        retry_after: Millis(100),
    });
    c.answer("a", &write, throttled);
    // No item more is reported: the one that failed is due again all the same.
    c.run_for(300);
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("3")));
}
