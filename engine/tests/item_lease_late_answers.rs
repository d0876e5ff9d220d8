//! A holder's write answered after the leaser leased the item again: the answer is
//! about the lease it was sent under, and leaves the lease held now alone. Leases of
//! 10 s, drift 1 %, margin 0.5 s, as in `item_lease.rs`.

mod item_common;

use item_common::*;
use leasehold_engine::item_lease::{Input, Item, ItemError, ItemKnownBad, Leaser, Output};
use leasehold_engine::store::{Container, Reply, StoreError};
use leasehold_engine::{Now, RequestId};
use std::collections::VecDeque;

type Answer = (RequestId, Result<Reply<Item>, StoreError>);

/// Feeds `input` and serves its requests at once, except its write: the store
/// applies that one, and its answer is returned, held. Returns what else it said.
fn holding_the_write(
    l: &mut Leaser,
    store: &mut Container<Item>,
    now: Now,
    input: Input,
) -> (Answer, Vec<Output>) {
    let mut inputs = VecDeque::from([input]);
    let mut seen = Vec::new();
    let mut held = None;
    while let Some(input) = inputs.pop_front() {
        l.handle_input(now, input).unwrap();
        while let Some(out) = l.poll_output() {
            match out {
                Output::Request(req) if req.op.is_write() => {
                    held = Some((req.id, store.execute(req.op)));
                }
                Output::Request(req) => inputs.push_back(Input::Response {
                    id: req.id,
                    result: store.execute(req.op),
                }),
                other => seen.push(other),
            }
        }
    }
    (held.expect("a write"), seen)
}

fn arrives(l: &mut Leaser, store: &mut Container<Item>, now: Now, held: Answer) -> Vec<Output> {
    let (id, result) = held;
    try_run(l, store, now, Input::Response { id, result }).unwrap()
}

fn renewed(out: &Result<Vec<Output>, ItemError>) -> bool {
    matches!(out.as_deref(), Ok([Output::Renewed { .. }]))
}

/// The leaser's acquire lands with its reply held; it acquires the item again over
/// its own lease; the held reply arrives. Returns the answer's outputs, and what a
/// renewal of the lease held now then says.
fn acquire_answered_after_a_new_lease(
    known_bad: Option<ItemKnownBad>,
) -> (Vec<Output>, Result<Vec<Output>, ItemError>) {
    let mut store = store();
    let mut a = leaser(known_bad);
    let (held, _) = holding_the_write(&mut a, &mut store, at(0), acquire());
    assert!(matches!(held.1, Ok(Reply::Replaced(_))), "{held:?}");
    let again = granted(&try_run(&mut a, &mut store, at(1_000), acquire()).unwrap());
    let answer = arrives(&mut a, &mut store, at(1_100), held);
    let renewal = try_run(&mut a, &mut store, at(2_000), Input::Renew(again));
    (answer, renewal)
}

#[test]
fn an_acquires_late_answer_leaves_the_new_lease_its_token_and_etag() {
    let (answer, renewal) = acquire_answered_after_a_new_lease(None);
    assert!(lock_lost(&answer), "{answer:?}");
    assert!(renewed(&renewal), "{renewal:?}");
}

/// Its sibling: acted on as the lease held now (`item-answers-read-held`), the
/// answer puts the earlier lease back, and the renewal is refused.
#[test]
fn an_acquires_late_answer_read_as_the_lease_held_then_costs_the_new_lease() {
    let (answer, renewal) = acquire_answered_after_a_new_lease(Some(ItemKnownBad::AnswersReadHeld));
    assert!(matches!(answer[..], [Output::Acquired(_)]), "{answer:?}");
    assert!(!renewed(&renewal), "{renewal:?}");
}

/// The holder breaks its lease with the reply held, acquires the item again, and the
/// held reply arrives.
fn break_answered_after_a_new_lease(
    known_bad: Option<ItemKnownBad>,
) -> (Vec<Output>, Result<Vec<Output>, ItemError>) {
    let mut store = store();
    let mut a = leaser(known_bad);
    let first = granted(&try_run(&mut a, &mut store, at(0), acquire()).unwrap());
    let (held, _) = holding_the_write(&mut a, &mut store, at(1_000), Input::Break(first));
    assert!(held.1.is_ok(), "{held:?}");
    let again = granted(&try_run(&mut a, &mut store, at(1_100), acquire()).unwrap());
    let answer = arrives(&mut a, &mut store, at(1_200), held);
    let renewal = try_run(&mut a, &mut store, at(2_000), Input::Renew(again));
    (answer, renewal)
}

#[test]
fn a_breaks_late_answer_leaves_the_new_lease_held() {
    let (answer, renewal) = break_answered_after_a_new_lease(None);
    assert!(matches!(answer[..], [Output::Broken(_)]), "{answer:?}");
    assert!(renewed(&renewal), "{renewal:?}");
}

/// Its sibling under `item-answers-read-held`: the answer drops the new lease.
#[test]
fn a_breaks_late_answer_read_as_the_lease_held_then_drops_the_new_lease() {
    let (_, renewal) = break_answered_after_a_new_lease(Some(ItemKnownBad::AnswersReadHeld));
    assert!(!renewed(&renewal), "{renewal:?}");
}

/// The leaser's acquire lands with its reply held; its `next_for_state` leases the
/// item again (its own) and the task gives that lease up; the held reply arrives, and
/// another leaser then reads the item, free. Returns the answer's outputs, whether the
/// first leaser claims authority under the earlier lease, and whether the other
/// leaser got the item.
fn acquire_answered_after_a_new_lease_was_let_go(
    known_bad: Option<ItemKnownBad>,
) -> (Vec<Output>, bool, bool) {
    let mut store = store();
    let mut a = leaser(known_bad);
    let (held, _) = holding_the_write(&mut a, &mut store, at(0), acquire());
    let next = Input::NextForState {
        state: leasehold_engine::item_lease::ItemState::from("REQUESTED"),
        limit: 1,
        duration: leasehold_engine::Millis::from_secs(10),
    };
    let again = match &try_run(&mut a, &mut store, at(100), next).unwrap()[..] {
        [Output::Leased(grants)] if grants.len() == 1 => grants[0].handle(),
        other => panic!("not leased again: {other:?}"),
    };
    let out = try_run(&mut a, &mut store, at(200), Input::Break(again)).unwrap();
    assert!(matches!(out[..], [Output::Broken(_)]), "{out:?}");
    let answer = arrives(&mut a, &mut store, at(300), held.clone());
    let earlier = match &answer[..] {
        [Output::Acquired(grant)] => Some(grant.handle()),
        _ => None,
    };
    let mut b = leaser_in_life(1, None);
    let taken = matches!(
        try_run(&mut b, &mut store, at(400), acquire()).unwrap()[..],
        [Output::Acquired(_)]
    );
    let claims = earlier.is_some_and(|h| a.has_authority(&h, at(400).local));
    (answer, claims, taken)
}

#[test]
fn an_acquires_late_answer_after_its_item_was_leased_again_and_let_go_grants_nothing() {
    let (answer, claims, taken) = acquire_answered_after_a_new_lease_was_let_go(None);
    assert!(lock_lost(&answer), "{answer:?}");
    assert!(taken && !claims);
}

/// Its sibling under `item-answers-read-held` (and the shipped leaser before the
/// thirty-third session, which compared only with the lease held): the late answer
/// grants the earlier lease, with authority, while the store holds no lease and
/// another leaser takes the item.
#[test]
fn an_acquires_late_answer_read_as_the_lease_held_then_grants_a_lease_the_store_lacks() {
    let (answer, claims, taken) =
        acquire_answered_after_a_new_lease_was_let_go(Some(ItemKnownBad::AnswersReadHeld));
    assert!(matches!(answer[..], [Output::Acquired(_)]), "{answer:?}");
    assert!(taken && claims, "two leasers with authority");
}

/// Its sibling under `item-forgets-let-go`: the leaser compares with the lease it
/// holds, but forgets the one it let go of, so the late answer grants the earlier
/// lease as in the last sibling (the model finds it with three-second leases).
#[test]
fn an_acquires_late_answer_after_a_forgotten_let_go_grants_a_lease_the_store_lacks() {
    let (answer, claims, taken) =
        acquire_answered_after_a_new_lease_was_let_go(Some(ItemKnownBad::ForgetsLetGo));
    assert!(matches!(answer[..], [Output::Acquired(_)]), "{answer:?}");
    assert!(taken && claims, "two leasers with authority");
}
