//! A handler acts on its own delivery: after its consumer let an overrun lock go and
//! took the message again for another handler, the first handler's calls are refused
//! and leave the new delivery alone.

mod queue_common;

use leasehold_engine::queue::{
    Consumer, ConsumerConfig, Delivery, Input, Message, Output, QueueError, QueueKnownBad,
};
use leasehold_engine::store::Container;
use leasehold_engine::{HostId, Incarnation, Millis};
use queue_common::*;

fn consumer_with(known_bad: Option<QueueKnownBad>) -> Consumer {
    let config = ConsumerConfig {
        known_bad,
        ..config()
    };
    Consumer::new(HostId::from("a"), Incarnation(0), config).unwrap()
}

/// The first handler of m1 overruns its authority; the consumer sees its own lock
/// stale, waits it out and delivers m1 again, to a second handler. Returns both
/// deliveries, the consumer and the store, at 19.6 s.
fn delivered_again_while_the_first_handler_overran(
    known_bad: Option<QueueKnownBad>,
) -> (Delivery, Delivery, Consumer, Container<Message>) {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer_with(known_bad);
    let dequeue = Input::Dequeue { max: 1 };
    let first = deliveries(&run(&mut a, &mut store, at(0), dequeue.clone()));
    assert!(deliveries(&run(&mut a, &mut store, at(9_500), dequeue.clone())).is_empty());
    let again = deliveries(&run(&mut a, &mut store, at(19_600), dequeue));
    assert_eq!(again.len(), 1, "m1 comes back to its own consumer");
    assert_ne!(again[0].lock, first[0].lock);
    let [first, again] = [&first[0], &again[0]].map(Clone::clone);
    (first, again, a, store)
}

/// What the consumer says to `input`, each request served at once, or its refusal.
fn answer(
    c: &mut Consumer,
    store: &mut Container<Message>,
    input: Input,
) -> Result<Vec<Output>, QueueError> {
    try_run(c, store, at(19_700), input)
}

#[test]
fn an_overrun_handlers_completion_is_refused_and_the_new_delivery_goes_on() {
    let (first, again, mut a, mut store) = delivered_again_while_the_first_handler_overran(None);
    let now = at(19_700).local;
    assert!(!a.has_authority(&first.handle(), now));
    assert!(a.has_authority(&again.handle(), now));
    let late = answer(&mut a, &mut store, Input::Complete(first.handle()));
    assert!(matches!(late, Err(QueueError::NotHeld(_))), "{late:?}");
    assert!(
        stored(&store, "m1").is_some(),
        "m1 is still the second handler's"
    );
    assert!(a.has_authority(&again.handle(), now));
    let done = answer(&mut a, &mut store, Input::Complete(again.handle()));
    assert!(
        matches!(done.as_deref(), Ok([Output::Completed(_)])),
        "{done:?}"
    );
    assert!(stored(&store, "m1").is_none());
}

/// Its sibling: named by the message only (`handle-names-message`), the overrun
/// handler is told it has authority, and its completion deletes m1 under the new
/// delivery's lock while the second handler still works on it.
#[test]
fn an_overrun_handlers_completion_named_by_the_message_deletes_the_new_delivery() {
    let bad = Some(QueueKnownBad::HandleNamesMessage);
    let (first, again, mut a, mut store) = delivered_again_while_the_first_handler_overran(bad);
    assert!(a.has_authority(&first.handle(), at(19_700).local));
    let late = answer(&mut a, &mut store, Input::Complete(first.handle()));
    assert!(
        matches!(late.as_deref(), Ok([Output::Completed(_)])),
        "{late:?}"
    );
    assert!(stored(&store, "m1").is_none());
    assert!(!a.has_authority(&again.handle(), at(19_700).local));
}

#[test]
fn an_overrun_handlers_renewal_give_back_and_dead_letter_are_refused() {
    let (first, again, mut a, mut store) = delivered_again_while_the_first_handler_overran(None);
    let calls = [
        Input::Renew(first.handle()),
        Input::Abandon {
            delivery: first.handle(),
            delay: Millis::ZERO,
        },
        Input::DeadLetter {
            delivery: first.handle(),
            reason: "overran".into(),
        },
    ];
    for call in calls {
        let late = answer(&mut a, &mut store, call.clone());
        assert!(
            matches!(late, Err(QueueError::NotHeld(_))),
            "{call:?}: {late:?}"
        );
    }
    let m1 = stored(&store, "m1").expect("m1 is still the second handler's");
    assert_eq!(m1.lock().map(|l| &l.token), Some(&again.lock));
    assert!(a.has_authority(&again.handle(), at(19_700).local));
}

/// Its sibling: named by the message only, the overrun handler's give-back hands the
/// second handler's delivery back.
#[test]
fn an_overrun_handlers_give_back_named_by_the_message_ends_the_new_delivery() {
    let bad = Some(QueueKnownBad::HandleNamesMessage);
    let (first, again, mut a, mut store) = delivered_again_while_the_first_handler_overran(bad);
    let give_back = Input::Abandon {
        delivery: first.handle(),
        delay: Millis::ZERO,
    };
    let late = answer(&mut a, &mut store, give_back);
    assert!(
        matches!(late.as_deref(), Ok([Output::Abandoned(_)])),
        "{late:?}"
    );
    let m1 = stored(&store, "m1").expect("given back");
    assert_eq!(m1.lock(), None);
    assert!(!a.has_authority(&again.handle(), at(19_700).local));
}
