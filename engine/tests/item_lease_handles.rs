//! A task acts under its own lease: once its leaser has leased the item again for
//! another task (`next_for_state` takes the leaser's own items), the first task's
//! renewals, saves and breaks are refused and leave the later lease alone.

mod item_common;

use item_common::*;
use leasehold_engine::item_lease::{
    Input, Item, ItemError, ItemHandle, ItemKnownBad, ItemState, Leaser, Output,
};
use leasehold_engine::store::Container;
use leasehold_engine::{LocalTime, Millis};

fn next() -> Input {
    Input::NextForState {
        state: ItemState::from("REQUESTED"),
        limit: 1,
        duration: Millis::from_secs(10),
    }
}

fn leased(out: &[Output]) -> ItemHandle {
    match out {
        [Output::Leased(grants)] if grants.len() == 1 => grants[0].handle(),
        other => panic!("not one grant: {other:?}"),
    }
}

/// Task A is granted tp-1 and overruns; at 1 s its leaser's `next_for_state`
/// leases tp-1 again, for task B. Returns both leases, the leaser and the store.
fn leased_again_for_another_task(
    known_bad: Option<ItemKnownBad>,
) -> (ItemHandle, ItemHandle, Leaser, Container<Item>) {
    let mut store = store();
    let mut a = leaser(known_bad);
    let first = leased(&try_run(&mut a, &mut store, at(0), next()).unwrap());
    let again = leased(&try_run(&mut a, &mut store, at(1_000), next()).unwrap());
    assert_ne!(first.token, again.token, "tp-1 is leased again");
    (first, again, a, store)
}

fn save_done(lease: &ItemHandle) -> Input {
    Input::Save {
        lease: lease.clone(),
        state: ItemState::from("DONE"),
        release: true,
    }
}

const NOW: LocalTime = LocalTime(2_000);

#[test]
fn an_overrun_tasks_save_is_refused_and_the_later_lease_saves() {
    let (first, again, mut a, mut store) = leased_again_for_another_task(None);
    assert!(!a.has_authority(&first, NOW));
    assert!(a.has_authority(&again, NOW));
    let late = try_run(&mut a, &mut store, at(2_000), save_done(&first));
    assert!(matches!(late, Err(ItemError::NotHeld)), "{late:?}");
    let item = stored(&store);
    assert_eq!(item.state, ItemState::from("REQUESTED"));
    assert_eq!(item.lease.map(|l| l.token), Some(again.token.clone()));
    let done = try_run(&mut a, &mut store, at(2_000), save_done(&again));
    assert!(
        matches!(done.as_deref(), Ok([Output::Saved(_)])),
        "{done:?}"
    );
    assert_eq!(stored(&store).state, ItemState::from("DONE"));
}

/// Its sibling: named by the item only (`item-grant-names-item`), the overrun task
/// is told it has authority, and its save moves tp-1 on and releases the lease task
/// B still works under.
#[test]
fn an_overrun_tasks_save_named_by_the_item_ends_the_later_lease() {
    let bad = Some(ItemKnownBad::GrantNamesItem);
    let (first, again, mut a, mut store) = leased_again_for_another_task(bad);
    assert!(a.has_authority(&first, NOW));
    let late = try_run(&mut a, &mut store, at(2_000), save_done(&first));
    assert!(
        matches!(late.as_deref(), Ok([Output::Saved(_)])),
        "{late:?}"
    );
    assert_eq!(stored(&store).lease, None, "task B's lease is gone");
    assert!(!a.has_authority(&again, NOW));
}

#[test]
fn an_overrun_tasks_renewal_and_break_are_refused_and_the_later_lease_holds() {
    let (first, again, mut a, mut store) = leased_again_for_another_task(None);
    for input in [Input::Renew(first.clone()), Input::Break(first.clone())] {
        let late = try_run(&mut a, &mut store, at(2_000), input);
        assert!(matches!(late, Err(ItemError::NotHeld)), "{late:?}");
        assert_eq!(
            stored(&store).lease.map(|l| l.token),
            Some(again.token.clone())
        );
    }
    let renewal = try_run(&mut a, &mut store, at(2_000), Input::Renew(again.clone()));
    assert!(
        matches!(renewal.as_deref(), Ok([Output::Renewed { .. }])),
        "{renewal:?}"
    );
    assert!(a.has_authority(&again, NOW));
}

/// Its sibling: named by the item only, the overrun task's break gives up the lease
/// task B works under.
#[test]
fn an_overrun_tasks_break_named_by_the_item_gives_up_the_later_lease() {
    let bad = Some(ItemKnownBad::GrantNamesItem);
    let (first, again, mut a, mut store) = leased_again_for_another_task(bad);
    let late = try_run(&mut a, &mut store, at(2_000), Input::Break(first));
    assert!(
        matches!(late.as_deref(), Ok([Output::Broken(_)])),
        "{late:?}"
    );
    assert_eq!(stored(&store).lease, None);
    assert!(!a.has_authority(&again, NOW));
}

/// A lease once broken names nothing: the leaser that leased the item again refuses
/// the earlier lease's break, and another life of its name cannot break the later
/// one by naming it.
#[test]
fn a_broken_lease_or_another_lifes_name_breaks_nothing() {
    let mut store = store();
    let mut a = leaser(None);
    let first = granted(&try_run(&mut a, &mut store, at(0), acquire()).unwrap());
    let out = try_run(&mut a, &mut store, at(500), Input::Break(first.clone())).unwrap();
    assert!(matches!(out[..], [Output::Broken(_)]), "{out:?}");
    let again = granted(&try_run(&mut a, &mut store, at(1_000), acquire()).unwrap());
    // Another life of the same name does not hold tp-1, even named by its lease: it
    // reads, and refuses.
    let mut b = leaser_in_life(1, None);
    let out = try_run(&mut b, &mut store, at(1_500), Input::Break(again.clone())).unwrap();
    assert!(
        matches!(
            out[..],
            [Output::Failed {
                error: ItemError::NotHolder { .. },
                ..
            }]
        ),
        "{out:?}"
    );
    let out = try_run(&mut a, &mut store, at(1_500), Input::Break(first)).unwrap_err();
    assert!(matches!(out, ItemError::NotHeld), "{out:?}");
    assert_eq!(stored(&store).lease.map(|l| l.token), Some(again.token));
}

/// A lease the leaser no longer knows it holds is read before it is broken: a later
/// lease of its own found there is left alone (`LockLost`). The later lease's
/// acquire landed with its answer lost, so the leaser holds nothing.
fn break_of_an_earlier_lease_over_a_later_one_unheard_of(
    known_bad: Option<ItemKnownBad>,
) -> (Vec<Output>, Option<leasehold_engine::lock::LockToken>) {
    let mut store = store();
    let mut a = leaser(known_bad);
    let first = granted(&try_run(&mut a, &mut store, at(0), acquire()).unwrap());
    let out = try_run(&mut a, &mut store, at(100), Input::Break(first.clone())).unwrap();
    assert!(matches!(out[..], [Output::Broken(_)]), "{out:?}");
    // The acquire's write lands; its answer is lost on the way back.
    a.handle_input(at(200), acquire()).unwrap();
    let mut landed = None;
    let mut inputs = Vec::new();
    while let Some(out) = a.poll_output() {
        if let Output::Request(req) = out {
            let result = store.execute(req.op.clone());
            if req.op.is_write() {
                landed = Some(req.id);
            } else {
                inputs.push(Input::Response { id: req.id, result });
            }
        }
        for input in inputs.drain(..) {
            a.handle_input(at(200), input).unwrap();
        }
    }
    let lost = landed.expect("the acquire's write");
    let ambiguous = Err(leasehold_engine::store::StoreError::Timeout);
    try_run(
        &mut a,
        &mut store,
        at(300),
        Input::Response {
            id: lost,
            result: ambiguous,
        },
    )
    .unwrap();
    let out = try_run(&mut a, &mut store, at(400), Input::Break(first)).unwrap();
    (out, stored(&store).lease.map(|l| l.token))
}

#[test]
fn breaking_an_earlier_lease_leaves_a_later_one_the_leaser_never_heard_of() {
    let (out, stored) = break_of_an_earlier_lease_over_a_later_one_unheard_of(None);
    assert!(lock_lost(&out), "{out:?}");
    assert!(stored.is_some(), "the later lease is still stored");
}

/// Its sibling: named by the item only, the read finds a lease of the leaser's own
/// and breaks it.
#[test]
fn breaking_an_earlier_lease_named_by_the_item_breaks_the_later_one() {
    let bad = Some(ItemKnownBad::GrantNamesItem);
    let (out, stored) = break_of_an_earlier_lease_over_a_later_one_unheard_of(bad);
    assert!(matches!(out[..], [Output::Broken(_)]), "{out:?}");
    assert_eq!(stored, None);
}
