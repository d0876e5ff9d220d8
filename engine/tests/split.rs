//! A partition whose range splits is replaced by its children: marked, children
//! created from its checkpoint, and only then given up as a finished split, which
//! stays in the table so that its id is never created again.

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

/// Whether `lease` is a finished split: marked with its children, owned by nobody.
fn finished(c: &Cluster, lease: &str) -> bool {
    c.store.iter().any(|s| {
        s.doc
            .as_lease()
            .is_some_and(|l| l.token == token(lease) && l.is_finished_split())
    })
}

/// Whether `lease` exists and is a lease to process, not a finished split.
fn live(c: &Cluster, lease: &str) -> bool {
    exists(c, lease) && !finished(c, lease)
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
    assert!(finished(&c, "0"), "the parent is a finished split");
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
    // Mark, then both creates, then the finish; nothing is deleted.
    let order: Vec<Intent> = c
        .sent
        .iter()
        .map(|(_, _, r)| r.intent)
        .filter(|i| {
            matches!(
                i,
                Intent::Split | Intent::CreateChild | Intent::FinishSplit | Intent::DeleteParent
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            Intent::Split,
            Intent::CreateChild,
            Intent::CreateChild,
            Intent::FinishSplit
        ]
    );
}

#[test]
fn the_split_is_not_finished_while_a_child_lease_is_missing() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let create = c.intercept("a", Intent::CreateChild);
    c.answer("a", &create, Err(StoreError::Unavailable));
    c.deliver_all();
    assert!(
        live(&c, "0"),
        "one child is missing: the parent stays owned"
    );
    assert_eq!(c.lease("0").split_into.len(), 2);
    c.run_for(3_000);
    assert!(finished(&c, "0"));
    assert!(live(&c, "0a") && live(&c, "0b"));
}

#[test]
fn a_marked_parent_left_by_a_crash_is_finished_by_its_next_owner_and_never_processed() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    // The mark and both creates land; `a` crashes before finishing the split.
    for _ in 0..3 {
        c.deliver_next();
    }
    let _lost = c.intercept("a", Intent::FinishSplit);
    c.crash("a");
    assert!(live(&c, "0") && exists(&c, "0a") && exists(&c, "0b"));
    c.add("b", config(1));
    c.run_for(40_000);
    assert!(finished(&c, "0"), "b finished the split");
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
    assert!(finished(&c, "0"));
    // A host configured with the original partitions joins, and `a` goes on.
    let before = c.sent.len();
    c.add("b", config(1));
    c.run_for(30_000);
    assert!(
        finished(&c, "0"),
        "the finished split stays, and is no lease to take"
    );
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
    assert!(finished(&c, "0"));
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
    assert!(live(&c, "0"), "one child is not known to exist yet");
}

/// `a` creates 0b but not 0a; 0b splits in turn and is finished; `a` crashes. The next
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
    assert!(finished(&c, "0b"));
    c.answer("a", &held, Err(StoreError::Unavailable));
    c.crash("a");
    c.add("b", config(1));
    c.run_for(60_000);
    assert!(finished(&c, "0"), "b finished the first split");
    assert!(finished(&c, "0b"), "and did not bring 0b back");
    assert!(live(&c, "0a") && live(&c, "0b1") && live(&c, "0b2"));
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

/// The finish lands, but its answer is lost, or comes back as the SDK's retry of it
/// saw the store: 412, its own etag. Either way the split is done, and the heartbeat
/// tells the other hosts to read the table (the swarm's seed 301475 left the children
/// unknown to them, and the loads 2 apart, until the audit).
#[test]
fn a_finish_whose_answer_was_lost_or_retried_still_tells_the_others_of_the_split() {
    for answer in [StoreError::Timeout, StoreError::PreconditionFailed] {
        let mut c = processing_with_checkpoint(common::session_config(1));
        split_into(&mut c, "a", "0", &["0a", "0b"]);
        for _ in 0..3 {
            c.deliver_next(); // the mark and both creates
        }
        let finish = c.intercept("a", Intent::FinishSplit);
        let applied = c.store.execute(finish.op.clone());
        assert!(matches!(applied, Ok(Reply::Replaced(_))));
        c.answer("a", &finish, Err(answer.clone()));
        c.run_for(10_000);
        assert!(finished(&c, "0"), "{answer:?}");
        assert_eq!(published_splits(&c, "a"), 1, "{answer:?}");
    }
}

/// A child's create held on the wire lands after the child split in turn. With the
/// split kept as a finished split, the late create finds the id taken (409); deleted,
/// as the change feed processor deletes it, the id is free, and the late create
/// brings back a range whose children are being processed (the swarm's seed 188947).
#[test]
fn a_late_create_never_brings_back_a_range_that_split_in_turn() {
    for known_bad in [None, Some(KnownBad::DeleteSplitLease)] {
        let cfg = LeaseConfig {
            known_bad,
            ..config(1)
        };
        let mut c = processing_with_checkpoint(cfg);
        split_into(&mut c, "a", "0", &["0a", "0b"]);
        c.deliver_next(); // the mark
        let late = c.intercept("a", Intent::CreateChild);
        let applied = c.store.execute(late.op.clone());
        assert!(matches!(applied, Ok(Reply::Created(_))), "0a created");
        c.answer("a", &late, Err(StoreError::Timeout));
        c.run_for(2_000);
        split_into(&mut c, "a", "0a", &["0a1", "0a2"]);
        c.run_for(2_000);
        assert!(live(&c, "0a1") && live(&c, "0a2"));
        // The same create, held on the wire all along, lands now.
        let again = c.store.execute(late.op.clone());
        match known_bad {
            None => assert_eq!(again, Err(StoreError::Conflict), "the id stays taken"),
            Some(_) => {
                assert!(matches!(again, Ok(Reply::Created(_))));
                assert!(
                    live(&c, "0a"),
                    "the split range is back beside its children"
                );
            }
        }
    }
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
    assert!(c.has_shut_down("a"));
    // Whatever is left is unowned and marked or a child: the next host finishes.
    assert!(exists(&c, "0a") && exists(&c, "0b"));
}

/// A host shutting down releases a marked lease before one child's lease exists.
/// Released is not finished: the next host takes the marked lease, creates the
/// missing child and only then finishes the split (the swarm's seed 300433 left the
/// child uncreated while a marked lease nobody owned counted as finished).
#[test]
fn a_marked_lease_released_mid_split_is_finished_by_the_next_host() {
    let mut c = processing_with_checkpoint(config(1));
    split_into(&mut c, "a", "0", &["0a", "0b"]);
    c.deliver_next(); // the mark
    let lost = c.intercept("a", Intent::CreateChild);
    c.answer("a", &lost, Err(StoreError::Unavailable));
    c.input("a", Input::Shutdown).unwrap();
    c.run_for(3_000);
    assert!(live(&c, "0"), "released, not finished: {:?}", c.lease("0"));
    assert_eq!(c.lease("0").owner, None);
    c.add("b", config(1));
    c.run_for(60_000);
    assert!(finished(&c, "0"));
    assert!(live(&c, "0a") && live(&c, "0b"));
}
