//! Item leases against the reference store. Leases of 10 s, drift 1 %, margin 0.5 s:
//! authority lasts 9.4 s; another holder may take over after seeing a lease for 10.1 s.

mod item_common;

use leasehold_engine::item_lease::{
    Grant, Input, Item, ItemError, ItemHandle, ItemKey, ItemState, Leaser, LeaserConfig, Output,
};
use leasehold_engine::lock::{LockPolicy, LockToken};
use leasehold_engine::store::Container;
use leasehold_engine::{
    DocId, Drift, HostId, Incarnation, LocalTime, Millis, Now, PartitionKey, WallTime,
};

const D: Millis = Millis::from_secs(10);

fn leaser(name: &str, life: u64) -> Leaser {
    let config = LeaserConfig {
        policy: LockPolicy {
            drift: Drift::ppm(10_000),
            safety_margin: Millis(500),
            ..LockPolicy::default()
        },
        ..LeaserConfig::new("tp-")
    };
    Leaser::new(HostId::from(name), Incarnation(life), config)
}

fn at(ms: u64) -> Now {
    Now::new(LocalTime(ms), WallTime(1_700_000_000_000 + ms as i64))
}

fn run(l: &mut Leaser, store: &mut Container<Item>, now: Now, input: Input) -> Vec<Output> {
    item_common::try_run(l, store, now, input).unwrap()
}

fn key(n: &str) -> ItemKey {
    ItemKey {
        pk: PartitionKey::from(n),
        id: DocId::from(n),
    }
}

fn store_with(items: &[(&str, &str, i64)]) -> Container<Item> {
    let mut store = Container::new();
    for (id, state, ts) in items {
        let item = Item::new(
            DocId::from(*id),
            PartitionKey::from(*id),
            ItemState::from(*state),
            WallTime(*ts),
        );
        store.create(item).unwrap();
    }
    store
}

fn acquire(n: &str) -> Input {
    Input::Acquire {
        item: key(n),
        duration: D,
    }
}

fn next(limit: usize) -> Input {
    Input::NextForState {
        state: ItemState::from("REQUESTED"),
        limit,
        duration: D,
    }
}

fn acquired(out: &[Output]) -> Grant {
    match out {
        [Output::Acquired(grant)] => grant.clone(),
        other => panic!("no Acquired output: {other:?}"),
    }
}

fn leased(out: &[Output]) -> Vec<Grant> {
    match out.last() {
        Some(Output::Leased(grants)) => grants.clone(),
        other => panic!("no Leased output: {other:?}"),
    }
}

#[test]
fn acquire_reports_the_holder_while_another_lease_is_valid() {
    let mut store = store_with(&[("tp-1", "REQUESTED", 0)]);
    let mut a = leaser("a", 0);
    let mut b = leaser("b", 0);
    assert!(matches!(
        run(&mut a, &mut store, at(0), acquire("tp-1"))[..],
        [Output::Acquired(_)]
    ));
    let out = run(&mut b, &mut store, at(5_000), acquire("tp-1"));
    let [
        Output::Failed {
            error: ItemError::LeaseHeld { holder, until },
            ..
        },
    ] = &out[..]
    else {
        panic!("{out:?}")
    };
    assert_eq!(holder.as_str(), "a");
    assert_eq!(*until, WallTime(1_700_000_000_000 + 10_000));
    // b has watched the same version since 5 s; it may take over at 15.1 s.
    assert!(matches!(
        run(&mut b, &mut store, at(15_099), acquire("tp-1"))[..],
        [Output::Failed { .. }]
    ));
    assert!(matches!(
        run(&mut b, &mut store, at(15_100), acquire("tp-1"))[..],
        [Output::Acquired(_)]
    ));
}

#[test]
fn only_the_holder_may_break_a_lease() {
    let mut store = store_with(&[("tp-1", "REQUESTED", 0)]);
    let mut a = leaser("a", 0);
    let mut b = leaser("b", 0);
    let lease = acquired(&run(&mut a, &mut store, at(0), acquire("tp-1"))).handle();
    // b names a's very lease: the name is not the lease.
    let out = run(&mut b, &mut store, at(1_000), Input::Break(lease.clone()));
    assert!(
        matches!(&out[..], [Output::Failed { error: ItemError::NotHolder { holder: Some(h) }, .. }] if h.as_str() == "a"),
        "{out:?}"
    );
    assert!(matches!(
        run(&mut a, &mut store, at(1_000), Input::Break(lease))[..],
        [Output::Broken(_)]
    ));
    // Broken: anyone may take it at once.
    assert!(matches!(
        run(&mut b, &mut store, at(1_000), acquire("tp-1"))[..],
        [Output::Acquired(_)]
    ));
}

#[test]
fn a_renewal_extends_authority_and_a_stale_holders_renewal_fails() {
    let mut store = store_with(&[("tp-1", "REQUESTED", 0)]);
    let mut a = leaser("a", 0);
    let mut b = leaser("b", 0);
    let lease = acquired(&run(&mut a, &mut store, at(0), acquire("tp-1"))).handle();
    let out = run(&mut a, &mut store, at(4_000), Input::Renew(lease.clone()));
    assert!(matches!(
        out[..],
        [Output::Renewed {
            authority_until: LocalTime(13_400),
            ..
        }]
    ));
    run(&mut b, &mut store, at(4_000), acquire("tp-1"));
    assert!(matches!(
        run(&mut b, &mut store, at(14_100), acquire("tp-1"))[..],
        [Output::Acquired(_)]
    ));
    let out = run(&mut a, &mut store, at(14_200), Input::Renew(lease));
    assert!(item_common::lock_lost(&out), "{out:?}");
}

#[test]
fn next_for_state_leases_the_oldest_free_items_in_the_state_up_to_the_limit() {
    let mut store = store_with(&[
        ("tp-a", "REQUESTED", 30),
        ("tp-b", "REQUESTED", 10),
        ("tp-c", "STARTED", 0),
        ("tp-d", "REQUESTED", 20),
    ]);
    let mut a = leaser("a", 0);
    let grants = leased(&run(&mut a, &mut store, at(0), next(2)));
    let ids: Vec<&str> = grants.iter().map(|g| g.item.as_str()).collect();
    assert_eq!(ids, ["tp-b", "tp-d"]);
    // A second caller gets only what is left; the first caller gets its own back.
    let mut b = leaser("b", 0);
    let ids: Vec<String> = leased(&run(&mut b, &mut store, at(0), next(5)))
        .iter()
        .map(|g| g.item.to_string())
        .collect();
    assert_eq!(ids, ["tp-a"]);
    assert_eq!(leased(&run(&mut a, &mut store, at(1), next(5))).len(), 2);
}

#[test]
fn next_for_state_takes_over_a_crashed_holders_items_once_their_leases_expire() {
    let mut store = store_with(&[("tp-1", "REQUESTED", 0)]);
    let mut crashed = leaser("a", 0);
    run(&mut crashed, &mut store, at(0), next(1));
    // The same name restarted is a new life: it waits like anyone else.
    let mut restarted = leaser("a", 1);
    assert!(leased(&run(&mut restarted, &mut store, at(1_000), next(1))).is_empty());
    assert_eq!(
        leased(&run(&mut restarted, &mut store, at(11_100), next(1))).len(),
        1
    );
}

/// Leases tp-1 and saves it as `STARTED` at 1 s, giving the lease up if `release`.
fn leased_and_saved(release: bool) -> (Leaser, Container<Item>, ItemHandle) {
    let mut store = store_with(&[("tp-1", "REQUESTED", 0)]);
    let mut a = leaser("a", 0);
    let lease = leased(&run(&mut a, &mut store, at(0), next(1)))[0].handle();
    let save = Input::Save {
        lease: lease.clone(),
        state: ItemState::from("STARTED"),
        release,
    };
    assert!(matches!(
        run(&mut a, &mut store, at(1_000), save)[..],
        [Output::Saved(_)]
    ));
    (a, store, lease)
}

#[test]
fn saving_under_the_lease_moves_the_item_and_releases_it() {
    let (a, store, lease) = leased_and_saved(true);
    let item = item_common::stored(&store);
    assert_eq!(item.state, ItemState::from("STARTED"));
    assert_eq!(item.lease, None);
    assert!(!a.has_authority(&lease, LocalTime(2_000)));
}

#[test]
fn acquiring_a_missing_item_says_so() {
    let mut store = store_with(&[]);
    let mut a = leaser("a", 0);
    let out = run(&mut a, &mut store, at(0), acquire("tp-9"));
    assert!(matches!(
        out[..],
        [Output::Failed {
            error: ItemError::NotFound,
            ..
        }]
    ));
    let never_granted = ItemHandle {
        item: key("tp-9"),
        token: LockToken {
            holder: HostId::from("a"),
            incarnation: Incarnation(0),
            seq: 1,
        },
    };
    assert!(matches!(
        a.handle_input(at(0), Input::Renew(never_granted)),
        Err(ItemError::NotHeld)
    ));
}

#[test]
fn an_item_document_keeps_edc_style_field_names() {
    let item = Item::new(
        DocId::from("x"),
        PartitionKey::from("x"),
        ItemState::from("S"),
        WallTime(5),
    );
    let json = serde_json::to_value(&item).unwrap();
    assert_eq!(json["stateTimestamp"], 5);
    assert_eq!(json["partitionKey"], "x");
    let bad = serde_json::from_str::<Item>(r#"{"id":"x","state":"S"}"#);
    assert!(
        bad.is_err(),
        "a document without its fields is refused, not guessed"
    );
}

/// Documents the reads of one `next_for_state` returned, and the items it leased:
/// the store holds `items` items in the state, the oldest 5 of them leased by
/// another holder.
fn documents_read_per_next(items: usize) -> (usize, usize) {
    let mut store = Container::new();
    for i in 0..items {
        let id = format!("tp-{i:06}");
        let item = Item::new(
            DocId::from(id.as_str()),
            PartitionKey::from(id.as_str()),
            ItemState::from("REQUESTED"),
            WallTime(i as i64),
        );
        store.create(item).unwrap();
    }
    let mut other = leaser("other", 0);
    let next = |limit| Input::NextForState {
        state: ItemState::from("REQUESTED"),
        limit,
        duration: D,
    };
    run(&mut other, &mut store, at(0), next(5));
    let mut me = leaser("me", 0);
    let mut inputs = std::collections::VecDeque::from([next(10)]);
    let (mut read, mut leased) = (0, 0);
    while let Some(input) = inputs.pop_front() {
        me.handle_input(at(1_000), input).unwrap();
        while let Some(out) = me.poll_output() {
            match out {
                Output::Request(req) => {
                    let result = store.execute(req.op);
                    if let Ok(leasehold_engine::store::Reply::Query(found)) = &result {
                        read += found.len();
                    }
                    inputs.push_back(Input::Response { id: req.id, result });
                }
                Output::Leased(grants) => leased = grants.len(),
                _ => {}
            }
        }
    }
    (read, leased)
}

/// `next N in state S` reads the oldest items of the state, a window as wide as N
/// plus the leases at its top: what one call reads does not grow with the items
/// (it read them all, `ReadAll`, before).
#[test]
fn leasing_the_next_items_reads_as_many_documents_at_100000_items_as_at_100() {
    let (small, got_small) = documents_read_per_next(100);
    let (large, got_large) = documents_read_per_next(100_000);
    eprintln!("documents read per call: {small} at 100 items, {large} at 100,000");
    assert_eq!((got_small, got_large), (10, 10));
    assert!(large <= 2 * small, "{large} against {small}");
    // The measure catches a read of every item, as the earlier scan was.
    let scan = |n: usize| {
        let mut store = Container::new();
        for i in 0..n {
            let id = format!("tp-{i:06}");
            let (pk, state) = (
                PartitionKey::from(id.as_str()),
                ItemState::from("REQUESTED"),
            );
            store
                .create(Item::new(DocId::from(id.as_str()), pk, state, WallTime(0)))
                .unwrap();
        }
        store.read_all("tp-").len()
    };
    assert!(scan(100_000) > 2 * scan(100));
}

/// A save that keeps the lease moves the item on for good: the renewal after it writes
/// the item as saved. Before the thirty-third session the leaser kept the version it
/// leased, and the renewal put the item back in its earlier state.
#[test]
fn a_renewal_after_a_save_that_keeps_the_lease_keeps_the_saved_state() {
    let (mut a, mut store, lease) = leased_and_saved(false);
    let out = run(&mut a, &mut store, at(2_000), Input::Renew(lease));
    assert!(matches!(out[..], [Output::Renewed { .. }]), "{out:?}");
    let item = item_common::stored(&store);
    assert_eq!(item.state, ItemState::from("STARTED"));
    assert!(item.lease.is_some());
}
