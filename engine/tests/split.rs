//! A partition whose range splits is replaced by its children: marked, children
//! created from its checkpoint, and only then deleted.

mod common;

use common::{Cluster, config};
use leasehold_engine::lease::{Input, InputError, Intent, KnownBad, LeaseConfig, Output};
use leasehold_engine::store::{Reply, StoreError};
use leasehold_engine::{Checkpoint, LeaseToken};

fn token(t: &str) -> LeaseToken {
    LeaseToken::from(t)
}

fn split_into(c: &mut Cluster, host: &str, lease: &str, children: &[&str]) {
    let session = c.session(host, lease);
    c.input(
        host,
        Input::Split {
            lease: token(lease),
            session,
            children: children.iter().map(|t| token(t)).collect(),
        },
    )
    .unwrap();
}

fn exists(c: &Cluster, lease: &str) -> bool {
    c.store
        .iter()
        .any(|s| s.doc.as_lease().is_some_and(|l| l.token == token(lease)))
}

/// Leases `host` started, in order, with the checkpoint each resumed from.
fn starts(c: &Cluster, host: &str) -> Vec<(String, Option<String>)> {
    c.events_of(host)
        .into_iter()
        .filter_map(|o| match o {
            Output::Start {
                lease, checkpoint, ..
            } => Some((
                lease.to_string(),
                checkpoint.as_ref().map(|c| c.as_str().to_string()),
            )),
            _ => None,
        })
        .collect()
}

/// `a` processes lease 0 alone and has stored checkpoint 7 of it.
fn processing_with_checkpoint(config: LeaseConfig) -> Cluster {
    let mut c = Cluster::new();
    c.add("a", config);
    c.run_for(100);
    c.checkpoint("a", "0", "7").unwrap();
    c.run_for(100);
    assert_eq!(c.lease("0").checkpoint, Some(Checkpoint::from("7")));
    c
}

#[test]
fn a_split_lease_is_replaced_by_its_children_which_resume_from_its_checkpoint() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.run_for(5_000);
    assert!(!exists(&c, "0"), "the parent is deleted");
    for child in ["0a", "0b"] {
        let doc = c.lease(child);
        assert_eq!(doc.checkpoint, Some(Checkpoint::from("7")), "{child}");
        assert_eq!(doc.split_from, [token("0")]);
    }
    let started = starts(&c, "a");
    assert_eq!(started[0], ("0".into(), None));
    let mut children = started[1..].to_vec();
    children.sort();
    assert_eq!(
        children,
        [
            ("0a".into(), Some("7".into())),
            ("0b".into(), Some("7".into()))
        ]
    );
    // Mark, then both creates, then the delete.
    let order: Vec<Intent> = c
        .sent
        .iter()
        .map(|(_, _, r)| r.intent)
        .filter(|i| {
            matches!(
                i,
                Intent::Split | Intent::CreateChild | Intent::DeleteParent
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            Intent::Split,
            Intent::CreateChild,
            Intent::CreateChild,
            Intent::DeleteParent
        ]
    );
}

#[test]
fn the_parent_is_not_deleted_while_a_child_lease_is_missing() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let create = c.intercept("a", Intent::CreateChild);
    c.answer("a", &create, Err(StoreError::Unavailable));
    c.deliver_all();
    assert!(exists(&c, "0"), "one child is missing: the parent stays");
    assert_eq!(c.lease("0").split_into.len(), 2);
    c.run_for(3_000);
    assert!(!exists(&c, "0"));
    assert!(exists(&c, "0a") && exists(&c, "0b"));
}

#[test]
fn a_marked_parent_left_by_a_crash_is_finished_by_its_next_owner_and_never_processed() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    // The mark and both creates land; `a` crashes before deleting the parent.
    for _ in 0..3 {
        c.deliver_next();
    }
    let _lost = c.intercept("a", Intent::DeleteParent);
    c.crash("a");
    assert!(exists(&c, "0") && exists(&c, "0a") && exists(&c, "0b"));
    c.add("b", config(1));
    c.run_for(40_000);
    assert!(!exists(&c, "0"), "b finished the split");
    assert!(
        starts(&c, "b").iter().all(|(lease, _)| lease != "0"),
        "a marked lease is never started"
    );
    let mut owned: Vec<String> = starts(&c, "b").into_iter().map(|(l, _)| l).collect();
    owned.sort();
    assert_eq!(owned, ["0a", "0b"]);
}

#[test]
fn a_split_partition_is_not_created_again() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.run_for(5_000);
    assert!(!exists(&c, "0"));
    // A host configured with the original partitions joins, and `a` goes on.
    let before = c.sent.len();
    c.add("b", config(1));
    c.run_for(30_000);
    assert!(!exists(&c, "0"), "its children's lineage names it");
    let creates = c.sent[before..].iter();
    assert!(
        !creates
            .clone()
            .any(|(_, _, r)| r.intent == Intent::CreateLease)
    );
}

#[test]
fn a_split_needs_the_session_processing_the_lease_and_real_children() {
    let mut c = processing_with_checkpoint(config(1));
    let session = c.session("a", "0");
    for children in [vec![], vec![token("0")], vec![token("x"), token("x")]] {
        let split = Input::Split {
            lease: token("0"),
            session,
            children,
        };
        assert!(matches!(
            c.input("a", split),
            Err(InputError::InvalidSplit { .. })
        ));
    }
    c.stopped("a", "0");
    let late = Input::Split {
        lease: token("0"),
        session,
        children: vec![token("0a")],
    };
    assert!(matches!(
        c.input("a", late),
        Err(InputError::NotProcessing { .. })
    ));
    assert!(c.lease("0").split_into.is_empty(), "nothing was marked");
}

/// The known-bad order: the parent goes first, and a create that fails then loses
/// the range's checkpoint for good. The partition is created again from nothing.
#[test]
fn deleting_the_parent_first_loses_the_checkpoint_when_a_create_fails() {
    let bad = LeaseConfig {
        known_bad: Some(KnownBad::DeleteParentFirst),
        ..config(1)
    };
    let mut c = processing_with_checkpoint(bad);
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let delete = c.intercept("a", Intent::DeleteParent);
    let result = c.store.execute(delete.op.clone());
    assert!(matches!(result, Ok(Reply::Deleted)));
    c.answer("a", &delete, result);
    for _ in 0..2 {
        let create = c.intercept("a", Intent::CreateChild);
        c.answer("a", &create, Err(StoreError::Unavailable));
    }
    c.run_for(10_000);
    assert!(!exists(&c, "0a") && !exists(&c, "0b"));
    assert!(exists(&c, "0"), "recreated, as nothing names it replaced");
    assert_eq!(c.lease("0").checkpoint, None, "checkpoint 7 is lost");
}

#[test]
fn under_session_liveness_a_split_lease_is_replaced_by_its_children_too() {
    let mut c = processing_with_checkpoint(common::session_config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.run_for(10_000);
    assert!(!exists(&c, "0"));
    let mut children: Vec<_> = starts(&c, "a")[1..].to_vec();
    children.sort();
    assert_eq!(
        children,
        [
            ("0a".into(), Some("7".into())),
            ("0b".into(), Some("7".into()))
        ]
    );
}

#[test]
fn a_marked_lease_waiting_for_its_childrens_creates_does_not_spin() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let _held = c.intercept("a", Intent::CreateChild);
    // The harness panics if the host asks to be woken now, again and again.
    c.run_for(5_000);
    assert!(exists(&c, "0"), "one child is not known to exist yet");
}

/// `a` creates 0b but not 0a; 0b splits in turn and is deleted; `a` crashes. The next
/// owner of 0 creates 0a only: 0b's range is its children's now.
#[test]
fn a_child_that_split_in_turn_is_not_created_again() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let held = c.intercept("a", Intent::CreateChild);
    c.deliver_all();
    c.run_for(100);
    let (first, second) = (starts(&c, "a").len(), "0b");
    assert!(first >= 2, "a processes the child it created");
    split_into(&mut c, "a", second, &["0b1", "0b2"]);
    c.run_for(2_000);
    assert!(!exists(&c, "0b"));
    c.answer("a", &held, Err(StoreError::Unavailable));
    c.crash("a");
    c.add("b", config(1));
    c.run_for(60_000);
    assert!(!exists(&c, "0"), "b finished the first split");
    assert!(!exists(&c, "0b"), "and did not bring 0b back");
    assert!(exists(&c, "0a") && exists(&c, "0b1") && exists(&c, "0b2"));
    assert!(
        starts(&c, "b")
            .iter()
            .all(|(lease, _)| lease != "0b" && lease != "0")
    );
}

fn published_splits(c: &Cluster, host: &str) -> u64 {
    c.store
        .iter()
        .find_map(|s| match &s.doc {
            leasehold_engine::lease::Record::Host(h) if h.host.as_str() == host => Some(h.splits),
            _ => None,
        })
        .unwrap_or(0)
}

#[test]
fn a_delete_whose_outcome_was_unknown_still_tells_the_others_of_the_split() {
    let mut c = processing_with_checkpoint(common::session_config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    for _ in 0..3 {
        c.deliver_next(); // the mark and both creates
    }
    let delete = c.intercept("a", Intent::DeleteParent);
    let applied = c.store.execute(delete.op.clone());
    assert!(matches!(applied, Ok(Reply::Deleted)));
    c.answer("a", &delete, Err(StoreError::Timeout));
    c.run_for(10_000);
    assert!(!exists(&c, "0"));
    assert_eq!(published_splits(&c, "a"), 1);
}

#[test]
fn a_shutdown_in_the_middle_of_a_split_completes() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let held = c.intercept("a", Intent::CreateChild);
    c.input("a", Input::Shutdown).unwrap();
    c.deliver_all();
    let result = c.store.execute(held.op.clone());
    c.answer("a", &held, result);
    c.run_for(3_000);
    let done = c
        .events_of("a")
        .iter()
        .any(|o| matches!(o, Output::ShutdownComplete));
    assert!(done);
    // Whatever is left is unowned and marked or a child: the next host finishes.
    assert!(exists(&c, "0a") && exists(&c, "0b"));
}
