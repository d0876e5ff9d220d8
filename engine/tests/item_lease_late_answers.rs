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
    assert!(
        matches!(
            answer[..],
            [Output::Failed {
                error: ItemError::LockLost,
                ..
            }]
        ),
        "{answer:?}"
    );
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
