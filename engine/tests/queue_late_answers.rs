//! A holder's write answered after the consumer took the message again: the answer
//! is about the delivery it was sent for, and leaves the delivery held now alone.

mod queue_common;

use leasehold_engine::queue::{
    Consumer, ConsumerConfig, Delivery, Input, Message, Output, QueueError, QueueKnownBad,
    QueueRequest,
};
use leasehold_engine::store::{Container, Op, Reply};
use leasehold_engine::{HostId, Incarnation, Millis};
use queue_common::*;

fn consumer_with(known_bad: Option<QueueKnownBad>) -> Consumer {
    let config = ConsumerConfig {
        known_bad,
        ..config()
    };
    Consumer::new(HostId::from("a"), Incarnation(0), config).unwrap()
}

/// Feeds `input` at `now` and returns the one request it sends, not yet served.
fn sent(c: &mut Consumer, now: u64, input: Input) -> QueueRequest {
    c.handle_input(at(now), input).unwrap();
    let requests: Vec<_> = std::iter::from_fn(|| c.poll_output())
        .filter_map(|o| match o {
            Output::Request(req) => Some(req),
            _ => None,
        })
        .collect();
    let [request] = &requests[..] else {
        panic!("one request: {requests:?}")
    };
    request.clone()
}

/// The held answer's outputs, then what completing the delivery held now says.
type Answered = (
    Vec<Output>,
    Result<Vec<Output>, QueueError>,
    Container<Message>,
);

/// The held reply to `req`, applied by the store long before, arrives at `now`.
fn held_reply_arrives(
    c: &mut Consumer,
    now: u64,
    req: &QueueRequest,
    result: Result<Reply<Message>, leasehold_engine::store::StoreError>,
) -> Vec<Output> {
    let mut store = Container::new();
    let answer = Input::Response { id: req.id, result };
    // Nothing more is sent: the answer settles what it was about.
    run(c, &mut store, at(now), answer)
}

/// Completes the delivery of `id` held now: what the consumer says, or its refusal.
fn complete(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: u64,
    delivery: &Delivery,
) -> Result<Vec<Output>, QueueError> {
    try_run(c, store, at(now), Input::Complete(delivery.handle()))
}

/// The consumer gives m1 back with no delay; the store applies it and the reply is
/// held while the same consumer takes m1 again. Returns the answer's outputs, and
/// what completing the new delivery then says, with the store.
fn give_back_answered_after_a_new_delivery(known_bad: Option<QueueKnownBad>) -> Answered {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer_with(known_bad);
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let give_back = Input::Abandon {
        delivery: got[0].handle(),
        delay: Millis::ZERO,
    };
    let req = sent(&mut a, 1_000, give_back);
    let landed = store.execute(req.op.clone());
    assert!(landed.is_ok(), "{landed:?}");
    let again = deliveries(&run(
        &mut a,
        &mut store,
        at(1_100),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(again.len(), 1, "the give-back made it pending at once");
    assert_ne!(again[0].lock, got[0].lock);
    let answer = held_reply_arrives(&mut a, 1_200, &req, landed);
    let completed = complete(&mut a, &mut store, 1_300, &again[0]);
    (answer, completed, store)
}

#[test]
fn a_give_backs_late_answer_leaves_the_new_delivery_its_lock() {
    let (answer, completed, store) = give_back_answered_after_a_new_delivery(None);
    assert!(matches!(answer[..], [Output::Abandoned(_)]), "{answer:?}");
    assert!(
        matches!(completed.as_deref(), Ok([Output::Completed(_)])),
        "{completed:?}"
    );
    assert!(stored(&store, "m1").is_none());
}

/// Its sibling: acted on as the lock held now (`holder-answers-read-held`), the
/// answer drops the new delivery, whose completion is refused; m1 stays locked, to
/// come back once more than its handler failed.
#[test]
fn a_give_backs_late_answer_read_as_the_lock_held_then_drops_the_new_delivery() {
    let bad = Some(QueueKnownBad::HolderAnswersReadHeld);
    let (_, completed, store) = give_back_answered_after_a_new_delivery(bad);
    assert!(
        matches!(completed, Err(QueueError::NotHeld(_))),
        "{completed:?}"
    );
    assert!(stored(&store, "m1").is_some());
}

/// The consumer renews m1; the store applies it and the reply is held while the
/// consumer's authority runs out, the renewed lock expires, and the same consumer
/// takes m1 again.
fn renewal_answered_after_a_new_delivery(known_bad: Option<QueueKnownBad>) -> Answered {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer_with(known_bad);
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let req = sent(&mut a, 5_000, Input::Renew(got[0].handle()));
    let landed = store.execute(req.op.clone());
    assert!(matches!(landed, Ok(Reply::Replaced(_))), "{landed:?}");
    // The renewed lock is first seen at 10 s and watched out from there.
    let none = deliveries(&run(
        &mut a,
        &mut store,
        at(10_000),
        Input::Dequeue { max: 1 },
    ));
    assert!(none.is_empty());
    let again = deliveries(&run(
        &mut a,
        &mut store,
        at(21_000),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(again.len(), 1, "the renewed lock ran out");
    let answer = held_reply_arrives(&mut a, 21_100, &req, landed);
    let completed = complete(&mut a, &mut store, 21_200, &again[0]);
    (answer, completed, store)
}

#[test]
fn a_renewals_late_answer_leaves_the_new_delivery_its_lock_and_etag() {
    let (answer, completed, store) = renewal_answered_after_a_new_delivery(None);
    // The delivery the renewal was for ended when the consumer took m1 again.
    assert!(
        matches!(
            answer[..],
            [Output::Failed {
                error: QueueError::LockLost(_),
                ..
            }]
        ),
        "{answer:?}"
    );
    assert!(
        matches!(completed.as_deref(), Ok([Output::Completed(_)])),
        "{completed:?}"
    );
    assert!(stored(&store, "m1").is_none());
}

/// Its sibling: the answer gives the new delivery the renewed version's etag, and
/// its completion is refused as if its lock were lost.
#[test]
fn a_renewals_late_answer_read_as_the_lock_held_then_costs_the_new_delivery() {
    let bad = Some(QueueKnownBad::HolderAnswersReadHeld);
    let (answer, completed, store) = renewal_answered_after_a_new_delivery(bad);
    assert!(matches!(answer[..], [Output::Renewed { .. }]), "{answer:?}");
    assert!(
        matches!(
            completed.as_deref(),
            Ok([Output::Failed {
                error: QueueError::LockLost(_),
                ..
            }])
        ),
        "{completed:?}"
    );
    assert!(stored(&store, "m1").is_some());
}

/// The consumer moves m1 to the dead letters; the store applies it and the reply is
/// held while an enqueue stores m1 anew and the same consumer takes it.
fn move_answered_after_a_new_delivery(known_bad: Option<QueueKnownBad>) -> Answered {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer_with(known_bad);
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let move_it = Input::DeadLetter {
        delivery: got[0].handle(),
        reason: "schema v0".into(),
    };
    let req = sent(&mut a, 1_000, move_it);
    assert!(matches!(req.op, Op::Batch { .. }), "{:?}", req.op);
    let landed = store.execute(req.op.clone());
    assert!(landed.is_ok(), "{landed:?}");
    enqueue(&mut store, "m1", at(1_050), Millis::ZERO);
    let again = deliveries(&run(
        &mut a,
        &mut store,
        at(1_100),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, got[0].id, "the name's live id again");
    let answer = held_reply_arrives(&mut a, 1_200, &req, landed);
    let completed = complete(&mut a, &mut store, 1_300, &again[0]);
    (answer, completed, store)
}

#[test]
fn a_dead_letter_moves_late_answer_leaves_the_new_delivery_its_lock() {
    let (answer, completed, store) = move_answered_after_a_new_delivery(None);
    assert!(
        matches!(answer[..], [Output::DeadLettered { .. }]),
        "{answer:?}"
    );
    assert!(
        matches!(completed.as_deref(), Ok([Output::Completed(_)])),
        "{completed:?}"
    );
    assert!(stored(&store, "m1").is_none());
    assert_eq!(dead_letters(&store, "m1").len(), 1);
}

/// Its sibling under `holder-answers-read-held`: the new delivery is dropped.
#[test]
fn a_dead_letter_moves_late_answer_read_as_the_lock_held_then_drops_the_new_delivery() {
    let bad = Some(QueueKnownBad::HolderAnswersReadHeld);
    let (_, completed, store) = move_answered_after_a_new_delivery(bad);
    assert!(
        matches!(completed, Err(QueueError::NotHeld(_))),
        "{completed:?}"
    );
    assert!(stored(&store, "m1").is_some());
}
