//! The work queue: one consumer or several against the reference store, with time
//! moved by hand. Lock 10 s, drift 1 %, margin 0.5 s: authority lasts 9.4 s after the
//! claim was sent; another consumer may take over after seeing the lock for 10.1 s.

mod queue_common;

use leasehold_engine::queue::{
    Consumer, ConsumerConfig, Input, Message, MessageState, Output, QueueError, QueueKnownBad,
    QueueName,
};
use leasehold_engine::store::{Container, Limits, Op};
use leasehold_engine::{DocId, HostId, Incarnation, LocalTime, Millis, PartitionKey};
use queue_common::*;

#[test]
fn a_delivered_message_is_completed_and_gone() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 5 }));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dequeue_count, 1);
    assert_eq!(got[0].authority_until, LocalTime(9_400));
    let out = run(
        &mut a,
        &mut store,
        at(1_000),
        Input::Complete(got[0].handle()),
    );
    assert!(matches!(out[..], [Output::Completed(_)]));
    assert!(stored(&store, "m1").is_none());
}

#[test]
fn a_locked_message_is_not_delivered_again_until_its_lock_was_seen_for_duration_plus_drift() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let mut b = consumer("b");
    assert_eq!(
        deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 })).len(),
        1
    );
    // b first sees the lock at 1 s; it may take over at 11.1 s, not before.
    assert!(
        deliveries(&run(
            &mut b,
            &mut store,
            at(1_000),
            Input::Dequeue { max: 1 }
        ))
        .is_empty()
    );
    assert!(
        deliveries(&run(
            &mut b,
            &mut store,
            at(11_099),
            Input::Dequeue { max: 1 }
        ))
        .is_empty()
    );
    let got = deliveries(&run(
        &mut b,
        &mut store,
        at(11_100),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dequeue_count, 2);
    assert!(!a.has_authority(&got[0].handle(), LocalTime(11_100)));
}

#[test]
fn a_stale_holders_completion_is_refused_and_the_message_left_untouched() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let mut b = consumer("b");
    let first = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    run(&mut b, &mut store, at(0), Input::Dequeue { max: 1 });
    let second = deliveries(&run(
        &mut b,
        &mut store,
        at(10_100),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(second.len(), 1);
    let before = stored(&store, "m1").unwrap();
    let out = run(
        &mut a,
        &mut store,
        at(10_200),
        Input::Complete(first[0].handle()),
    );
    assert!(
        matches!(refusal(&out), Some(QueueError::LockLost(_))),
        "{out:?}"
    );
    assert_eq!(stored(&store, "m1").unwrap(), before);
    // The stale holder forgot the lock: a second try says so without a request.
    let again = a.handle_input(at(10_300), Input::Complete(first[0].handle()));
    assert!(matches!(again, Err(QueueError::NotHeld(_))));
}

#[test]
fn a_dequeue_takes_the_earliest_visible_then_the_oldest_created_first() {
    let mut store = Container::new();
    enqueue(&mut store, "late", at(0), Millis::from_secs(5));
    enqueue(&mut store, "second", at(2_000), Millis::ZERO);
    enqueue(&mut store, "first", at(1_000), Millis::ZERO);
    let mut a = consumer("a");
    let got = deliveries(&run(
        &mut a,
        &mut store,
        at(3_000),
        Input::Dequeue { max: 5 },
    ));
    let names: Vec<_> = got.iter().map(|d| d.name.as_str().to_string()).collect();
    assert_eq!(
        names,
        ["first", "second"],
        "the delayed message is not visible yet"
    );
    let got = deliveries(&run(
        &mut a,
        &mut store,
        at(5_000),
        Input::Dequeue { max: 5 },
    ));
    assert_eq!(got[0].name.as_str(), "late");
}

#[test]
fn an_abandoned_message_comes_back_after_its_delay_with_its_count_bumped() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let input = Input::Abandon {
        delivery: got[0].handle(),
        delay: Millis::from_secs(2),
    };
    assert!(matches!(
        run(&mut a, &mut store, at(0), input)[..],
        [Output::Abandoned(_)]
    ));
    assert_eq!(stored(&store, "m1").unwrap().state, MessageState::Pending);
    assert!(
        deliveries(&run(
            &mut a,
            &mut store,
            at(1_000),
            Input::Dequeue { max: 1 }
        ))
        .is_empty()
    );
    let again = deliveries(&run(
        &mut a,
        &mut store,
        at(2_000),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(again[0].dequeue_count, 2);
}

#[test]
fn a_poison_message_is_dead_lettered_with_its_reason_after_the_maximum_deliveries() {
    let mut store = Container::new();
    enqueue(&mut store, "poison", at(0), Millis::ZERO);
    let mut a = consumer("a");
    for round in 0..3 {
        let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
        assert_eq!(got[0].dequeue_count, round + 1);
        let input = Input::Abandon {
            delivery: got[0].handle(),
            delay: Millis::ZERO,
        };
        run(&mut a, &mut store, at(0), input);
    }
    let out = run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 });
    assert!(deliveries(&out).is_empty());
    assert!(out.iter().any(|o| matches!(
        o,
        Output::DequeueFinished {
            delivered: 0,
            dead_lettered: 1
        }
    )));
    // The message left the queue for a dead letter of its own.
    assert_eq!(stored(&store, "poison"), None);
    let dead = dead_letters(&store, "poison");
    let MessageState::DeadLettered { reason } = &dead[0].doc.state else {
        panic!("not dead-lettered: {dead:?}")
    };
    assert!(reason.contains("3 times"), "{reason}");
    assert_eq!(dead.len(), 1);
    // Dead letters are never delivered again.
    assert!(
        deliveries(&run(
            &mut a,
            &mut store,
            at(60_000),
            Input::Dequeue { max: 1 }
        ))
        .is_empty()
    );
}

/// Consumer `a`, running the earlier behaviour `known_bad` if one is given.
fn consumer_a(known_bad: Option<QueueKnownBad>) -> Consumer {
    let cfg = ConsumerConfig {
        known_bad,
        ..config()
    };
    Consumer::new(HostId::from("a"), Incarnation(0), cfg).unwrap()
}

/// Two poison messages ahead of a healthy one, and a dequeue of one: `bad` runs the
/// consumer's earlier dequeue, which ended once it had acted on its one read.
fn dequeue_behind_poison(bad: bool) -> Vec<Output> {
    let mut a = consumer_a(bad.then_some(QueueKnownBad::PoisonSpendsBatch));
    let mut store = Container::new();
    enqueue(&mut store, "p1", at(0), Millis::ZERO);
    enqueue(&mut store, "p2", at(0), Millis::ZERO);
    enqueue(&mut store, "healthy", at(0), Millis::from_secs(1));
    for _ in 0..3 {
        for got in deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 2 })) {
            let input = Input::Abandon {
                delivery: got.handle(),
                delay: Millis::ZERO,
            };
            run(&mut a, &mut store, at(0), input);
        }
    }
    run(&mut a, &mut store, at(2_000), Input::Dequeue { max: 1 })
}

#[test]
fn poison_messages_ahead_of_a_healthy_one_take_no_place_in_the_batch() {
    let out = dequeue_behind_poison(false);
    let got = deliveries(&out);
    assert_eq!(got.len(), 1, "{out:?}");
    assert_eq!(got[0].name.as_str(), "healthy");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::DequeueFinished {
            delivered: 1,
            dead_lettered: 2
        }
    )));
}

/// The sibling: the earlier dequeue spends its one place on the first poison message
/// and delivers nothing while the healthy message waits.
#[test]
fn read_the_earlier_way_a_poison_message_spends_the_batch() {
    let out = dequeue_behind_poison(true);
    assert!(deliveries(&out).is_empty(), "{out:?}");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::DequeueFinished {
            delivered: 0,
            dead_lettered: 1
        }
    )));
}

/// A dequeue of one by `c` at 100 ms, its reads served at once and its one write (a
/// claim or a poison move) held on the wire and returned.
fn dequeue_holding_its_write(
    c: &mut Consumer,
    store: &mut Container<Message>,
) -> leasehold_engine::queue::QueueRequest {
    let mut held = None;
    let mut inputs = std::collections::VecDeque::from([Input::Dequeue { max: 1 }]);
    while let Some(input) = inputs.pop_front() {
        c.handle_input(at(100), input).unwrap();
        while let Some(out) = c.poll_output() {
            if let Output::Request(req) = out {
                if req.op.is_write() {
                    assert!(held.is_none(), "one write: {req:?}");
                    held = Some(req);
                } else {
                    let result = store.execute(req.op);
                    inputs.push_back(Input::Response { id: req.id, result });
                }
            }
        }
    }
    held.expect("the dequeue wrote")
}

/// Two messages waiting, and two consumers with room for one each that read the same
/// oldest one: `a`'s claim of `m1` is held on the wire while `b` claims it. Then `a`'s
/// claim is refused, and its later reads are answered by `reads` (the store, or a
/// replica still showing `m1` unclaimed). `bad` runs the earlier dequeue, which ended
/// once its claims were answered. Returns `a`'s outputs after the refusal and the
/// claims it sent in all.
fn claim_lost_to_another_consumer(bad: bool, lagging: bool) -> (Vec<Output>, usize) {
    let mut a = consumer_a(bad.then_some(QueueKnownBad::LostClaimWaitsPoll));
    let mut b = consumer("b");
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    enqueue(&mut store, "m2", at(10), Millis::ZERO);
    let before = store.clone();
    let held = dequeue_holding_its_write(&mut a, &mut store);
    let mut claims = 1;
    let got = deliveries(&run(&mut b, &mut store, at(100), Input::Dequeue { max: 1 }));
    assert_eq!(got[0].name.as_str(), "m1");
    let result = store.execute(held.op);
    assert!(result.is_err(), "{result:?}");
    let mut seen = Vec::new();
    let mut inputs = std::collections::VecDeque::from([Input::Response {
        id: held.id,
        result,
    }]);
    // Bounded, so that a consumer claiming over and over fails the test, not hangs it.
    while let Some(input) = inputs.pop_front().filter(|_| claims < 10) {
        a.handle_input(at(100), input).unwrap();
        while let Some(out) = a.poll_output() {
            match out {
                Output::Request(req) => {
                    claims += usize::from(req.op.is_write());
                    let result = if lagging && !req.op.is_write() {
                        before.clone().execute(req.op)
                    } else {
                        store.execute(req.op)
                    };
                    inputs.push_back(Input::Response { id: req.id, result });
                }
                other => seen.push(other),
            }
        }
    }
    (seen, claims)
}

#[test]
fn a_claim_lost_to_another_consumer_takes_no_place_in_the_batch() {
    let (out, claims) = claim_lost_to_another_consumer(false, false);
    let got = deliveries(&out);
    assert_eq!(got.len(), 1, "{out:?}");
    assert_eq!(got[0].name.as_str(), "m2");
    assert_eq!(claims, 2);
}

/// Asserts that a dequeue ended empty-handed after its one claim, the one refused.
fn ended_empty_after_one_claim((out, claims): (Vec<Output>, usize)) {
    assert!(deliveries(&out).is_empty(), "{out:?}");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::DequeueFinished { delivered: 0, .. }))
    );
    assert_eq!(claims, 1);
}

/// The sibling: the earlier dequeue ends with its place unused while `m2` waits for
/// the next poll.
#[test]
fn read_the_earlier_way_a_lost_claim_waits_a_poll() {
    ended_empty_after_one_claim(claim_lost_to_another_consumer(true, false));
}

/// A read again from a replica that still shows `m1` unclaimed: the version refused is
/// not claimed again, so the dequeue ends rather than claim it over and over.
#[test]
fn a_claim_refused_is_not_sent_again_on_a_lagging_replicas_word() {
    ended_empty_after_one_claim(claim_lost_to_another_consumer(false, true));
}

/// A poison message `p` ahead of `m2` and `m3`, and two consumers with room for one
/// each: `a` reads `p` (a full read of one) and its move of `p` to the dead letters is
/// held on the wire while `b` moves `p` and claims `m2`. Then `a`'s move is refused,
/// as `p` is gone. `bad` runs the earlier dequeue, for which a lost move was no loss.
/// Returns `a`'s outputs after the refusal.
fn poison_move_lost_to_another_consumer(bad: bool) -> Vec<Output> {
    let mut a = consumer_a(bad.then_some(QueueKnownBad::LostMoveWaitsPoll));
    let mut b = consumer("b");
    let mut store = Container::new();
    enqueue(&mut store, "p", at(0), Millis::ZERO);
    enqueue(&mut store, "m2", at(10), Millis::ZERO);
    enqueue(&mut store, "m3", at(20), Millis::ZERO);
    let mut poison = stored(&store, "p").expect("p was enqueued");
    poison.dequeue_count = config().max_dequeue_count;
    let written = store.execute(Op::Replace {
        doc: poison,
        if_match: None,
    });
    assert!(written.is_ok(), "{written:?}");
    let held = dequeue_holding_its_write(&mut a, &mut store);
    let out = run(&mut b, &mut store, at(100), Input::Dequeue { max: 1 });
    assert_eq!(deliveries(&out)[0].name.as_str(), "m2");
    assert_eq!(dead_letters(&store, "p").len(), 1, "b moved p");
    let result = store.execute(held.op);
    run(
        &mut a,
        &mut store,
        at(100),
        Input::Response {
            id: held.id,
            result,
        },
    )
}

#[test]
fn a_poison_move_lost_to_another_consumer_takes_no_place_in_the_batch() {
    let out = poison_move_lost_to_another_consumer(false);
    let got = deliveries(&out);
    assert_eq!(got.len(), 1, "{out:?}");
    assert_eq!(got[0].name.as_str(), "m3");
    assert!(
        !out.iter().any(|o| matches!(o, Output::DeadLettered { .. })),
        "b's move, not a's: {out:?}"
    );
}

/// The sibling: the earlier dequeue ends with its place unused while `m3` waits for
/// the next poll.
#[test]
fn read_the_earlier_way_a_lost_poison_move_waits_a_poll() {
    let out = poison_move_lost_to_another_consumer(true);
    assert!(deliveries(&out).is_empty(), "{out:?}");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::DequeueFinished {
            delivered: 0,
            dead_lettered: 0
        }
    )));
}

#[test]
fn a_holder_dead_letters_a_message_and_the_reason_is_kept() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let input = Input::DeadLetter {
        delivery: got[0].handle(),
        reason: "schema v0 is not supported".into(),
    };
    let out = run(&mut a, &mut store, at(0), input);
    assert!(matches!(out[..], [Output::DeadLettered { .. }]), "{out:?}");
    assert_eq!(stored(&store, "m1"), None);
    assert_eq!(
        dead_letters(&store, "m1")[0].doc.state,
        MessageState::DeadLettered {
            reason: "schema v0 is not supported".into()
        }
    );
}

#[test]
fn with_large_messages_off_an_oversized_payload_is_refused_at_enqueue_and_nothing_is_sent() {
    let mut small = config();
    small.limits = Limits {
        max_document_bytes: 1_000,
        ..Limits::default()
    };
    small.large = None;
    let mut a = Consumer::new(HostId::from("a"), Incarnation(0), small).unwrap();
    let input = Input::Enqueue {
        name: name("big"),
        payload: "x".repeat(2_000),
        delay: Millis::ZERO,
    };
    let refused = a.handle_input(at(0), input);
    assert!(
        matches!(refused, Err(QueueError::TooLarge { limit: 1_000, .. })),
        "{refused:?}"
    );
    assert_eq!(a.poll_output(), None);
    // The default limit is Cosmos DB's 2 MB.
    assert_eq!(config().limits.max_document_bytes, 2 * 1024 * 1024);
}

#[test]
fn enqueueing_a_name_twice_stores_one_message() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut p = consumer("p");
    let input = Input::Enqueue {
        name: name("m1"),
        payload: "retry".into(),
        delay: Millis::ZERO,
    };
    let out = run(&mut p, &mut store, at(5), input);
    assert!(matches!(
        out[..],
        [Output::Enqueued {
            already_present: true,
            ..
        }]
    ));
    assert_eq!(store.len(), 1);
    assert_eq!(stored(&store, "m1").unwrap().payload, "payload of m1");
}

#[test]
fn a_renewal_extends_authority_but_fails_once_the_lock_was_taken_over() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let mut b = consumer("b");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let id = got[0].handle();
    let out = run(&mut a, &mut store, at(5_000), Input::Renew(id.clone()));
    assert!(matches!(
        out[..],
        [Output::Renewed {
            authority_until: LocalTime(14_400),
            ..
        }]
    ));
    assert!(a.has_authority(&id, LocalTime(14_399)));
    run(&mut b, &mut store, at(5_000), Input::Dequeue { max: 1 });
    assert_eq!(
        deliveries(&run(
            &mut b,
            &mut store,
            at(15_100),
            Input::Dequeue { max: 1 }
        ))
        .len(),
        1
    );
    let out = run(&mut a, &mut store, at(15_200), Input::Renew(id));
    assert!(
        matches!(refusal(&out), Some(QueueError::LockLost(_))),
        "{out:?}"
    );
}

#[test]
fn a_consumer_refuses_a_lock_too_short_to_leave_authority() {
    let mut short = config();
    short.lock_duration = Millis(500);
    assert!(Consumer::new(HostId::from("a"), Incarnation(0), short).is_err());
    let mut none = config();
    none.max_dequeue_count = 0;
    assert!(Consumer::new(HostId::from("a"), Incarnation(0), none).is_err());
}

#[test]
fn a_new_owner_of_a_control_queue_waits_out_the_previous_owners_locks() {
    // Partitioned queues: each partition's control queue is consumed by whoever owns
    // the partition's lease. The owner changes; the message locks still rule.
    let queue = QueueName::control("hub", &leasehold_engine::LeaseToken::from("3")).unwrap();
    assert_eq!(queue.as_str(), "hub-control-3");
    let cfg = |q: &QueueName| ConsumerConfig {
        queue: q.clone(),
        ..config()
    };
    let mut store = Container::new();
    let mut old_owner = Consumer::new(HostId::from("old"), Incarnation(0), cfg(&queue)).unwrap();
    let input = Input::Enqueue {
        name: name("e1"),
        payload: "event".into(),
        delay: Millis::ZERO,
    };
    run(&mut old_owner, &mut store, at(0), input);
    assert_eq!(
        deliveries(&run(
            &mut old_owner,
            &mut store,
            at(0),
            Input::Dequeue { max: 8 }
        ))
        .len(),
        1
    );
    // The old owner crashes; the new owner of partition 3 starts consuming at 20 s.
    let mut new_owner = Consumer::new(HostId::from("new"), Incarnation(0), cfg(&queue)).unwrap();
    assert!(
        deliveries(&run(
            &mut new_owner,
            &mut store,
            at(20_000),
            Input::Dequeue { max: 8 }
        ))
        .is_empty()
    );
    let got = deliveries(&run(
        &mut new_owner,
        &mut store,
        at(30_100),
        Input::Dequeue { max: 8 },
    ));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, DocId::from("hub-control-3:e1"));
}

/// A consumer whose handler overran its authority never completed or abandoned the
/// message. Every consumer that once held it that way used to skip it forever, so a
/// message all of them had overrun was stranded (the simulator found it); now it
/// comes back, even to the same consumer, once its lock was seen for duration plus
/// drift.
#[test]
fn a_delivery_whose_authority_ran_out_comes_back_to_its_own_consumer_after_the_lock() {
    let mut store = Container::new();
    let mut only = consumer("only");
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let first = deliveries(&run(
        &mut only,
        &mut store,
        at(0),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(first.len(), 1);
    // Authority (9.4 s) is over; the handler never came back.
    assert!(!only.has_authority(&first[0].handle(), LocalTime(9_500)));
    let seen = run(&mut only, &mut store, at(9_500), Input::Dequeue { max: 1 });
    assert!(
        deliveries(&seen).is_empty(),
        "first sight of its own stale lock"
    );
    let again = deliveries(&run(
        &mut only,
        &mut store,
        at(9_500 + 10_100),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(again.len(), 1, "the message comes back");
    assert_eq!(again[0].dequeue_count, 2);
    // The new delivery is an ordinary one.
    let out = run(
        &mut only,
        &mut store,
        at(19_700),
        Input::Complete(again[0].handle()),
    );
    assert!(matches!(out[..], [Output::Completed(_)]), "{out:?}");
}

/// Dead-letters message `msg`, delivered to `c` now.
fn deliver_and_dead_letter(c: &mut Consumer, store: &mut Container<Message>, msg: &str) {
    let got = deliveries(&run(c, store, at(0), Input::Dequeue { max: 1 }));
    assert_eq!(got[0].name.as_str(), msg);
    let input = Input::DeadLetter {
        delivery: got[0].handle(),
        reason: "bad".into(),
    };
    let out = run(c, store, at(0), input);
    assert!(matches!(out[..], [Output::DeadLettered { .. }]), "{out:?}");
}

#[test]
fn a_name_dead_lettered_twice_keeps_both_dead_letters_and_a_new_message_of_it_is_live() {
    let mut store = Container::new();
    let mut a = consumer("a");
    for round in 1..=2 {
        enqueue(&mut store, "m1", at(0), Millis::ZERO);
        deliver_and_dead_letter(&mut a, &mut store, "m1");
        assert_eq!(dead_letters(&store, "m1").len(), round);
    }
    // The name is free again: a third enqueue is a new live message, delivered.
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 5 }));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dequeue_count, 1);
}

#[test]
fn a_requeue_moves_a_dead_letter_back_only_while_it_is_as_listed_and_its_name_is_free() {
    let mut store = Container::new();
    let mut a = consumer("a");
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    deliver_and_dead_letter(&mut a, &mut store, "m1");
    let listed = run(
        &mut a,
        &mut store,
        at(0),
        Input::ListDeadLetters { max: 10 },
    );
    let [Output::DeadLetters(dead)] = &listed[..] else {
        panic!("{listed:?}")
    };
    assert_eq!(dead.len(), 1);
    let dead = dead[0].clone();

    // The name was enqueued again meanwhile: the requeue changes nothing.
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let out = run(&mut a, &mut store, at(0), Input::Requeue(dead.clone()));
    assert!(
        matches!(refusal(&out), Some(QueueError::NameTaken(_))),
        "{out:?}"
    );
    assert_eq!(dead_letters(&store, "m1").len(), 1);
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    run(&mut a, &mut store, at(0), Input::Complete(got[0].handle()));

    // A stale listing is refused.
    let mut stale = dead.clone();
    stale.etag = store
        .read(&PartitionKey::from("work"), &stale.doc.id)
        .unwrap()
        .etag;
    let mut changed = stale.doc.clone();
    changed.payload = "edited".into();
    store.replace(changed, Some(&stale.etag)).unwrap();
    let out = run(&mut a, &mut store, at(0), Input::Requeue(stale));
    assert!(
        matches!(refusal(&out), Some(QueueError::DeadLetterChanged(_))),
        "{out:?}"
    );

    // As listed now, with the name free: back in the queue, its deliveries counted afresh.
    let current = dead_letters(&store, "m1").remove(0);
    let out = run(&mut a, &mut store, at(5), Input::Requeue(current));
    assert!(matches!(&out[..], [Output::Requeued { .. }]), "{out:?}");
    assert!(dead_letters(&store, "m1").is_empty());
    let back = stored(&store, "m1").unwrap();
    assert_eq!((back.state, back.dequeue_count), (MessageState::Pending, 0));
    assert_eq!(back.payload, "edited");
    // A live message is not a dead letter.
    let live = store.read(&PartitionKey::from("work"), &back.id).unwrap();
    assert!(matches!(
        a.handle_input(at(5), Input::Requeue(live)),
        Err(QueueError::NotADeadLetter(_))
    ));
}

#[test]
fn a_dequeue_reads_its_batch_and_the_locks_in_flight_however_long_the_backlog() {
    let mut read_at = Vec::new();
    for backlog in [10, 1_000] {
        let mut store = Container::new();
        for i in 0..backlog {
            enqueue(&mut store, &format!("m{i:04}"), at(0), Millis::ZERO);
        }
        let mut a = consumer("a");
        // Two deliveries in flight, then a dequeue of three once the locks are due
        // to be read again (a quarter of the 10 s lock).
        let plain = |_: &mut Op<Message>| {};
        assert_eq!(
            observe(&mut a, &mut store, at(1), 2, plain).delivered.len(),
            2
        );
        let seen = observe(&mut a, &mut store, at(2_600), 3, plain);
        assert_eq!(seen.delivered.len(), 3);
        read_at.push(seen.documents);
        // The sibling: without the limit, the same dequeue reads the backlog.
        let unlimited = |op: &mut Op<Message>| {
            if let Op::Query(q) = op {
                q.limit = None;
            }
        };
        let widened = observe(&mut a, &mut store, at(5_200), 3, unlimited).documents;
        assert!(
            widened >= backlog - 5,
            "widened read {widened} of {backlog}"
        );
    }
    assert_eq!(read_at, [3 + 2, 3 + 2]);
}

/// The first two names a dequeue of two delivers from messages named against their
/// visibility; `unordered` reads the visible messages in id order, as the model's
/// `dequeue-unordered` variant does.
fn first_two_delivered(unordered: bool) -> Vec<String> {
    let mut store = Container::new();
    enqueue(&mut store, "a", at(30), Millis::ZERO);
    enqueue(&mut store, "b", at(20), Millis::ZERO);
    enqueue(&mut store, "c", at(10), Millis::ZERO);
    enqueue(&mut store, "d", at(0), Millis::from_secs(60));
    let tamper = |op: &mut Op<Message>| {
        if let (true, Op::Query(q)) = (unordered, op) {
            q.order_by = None;
        }
    };
    observe(&mut consumer("a"), &mut store, at(40), 2, tamper).delivered
}

#[test]
fn a_dequeue_takes_the_oldest_visible_messages_first() {
    assert_eq!(first_two_delivered(false), ["c", "b"]);
    // The sibling: read in id order, the oldest (c) is left behind, and this sees it.
    assert_eq!(first_two_delivered(true), ["b", "a"]);
}

/// Reads one dequeue of five sends, and the names it delivers.
fn dequeue_requests(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: leasehold_engine::Now,
) -> (usize, Vec<String>) {
    let seen = observe(c, store, now, 5, |_| {});
    (seen.reads, seen.delivered)
}

/// The locks are read on a cadence of a quarter of the lock (2.5 s here) and when a
/// watched lock is due to expire (10.1 s after it was first seen), not on every poll;
/// a crashed holder's message is taken at the first poll after it is due.
#[test]
fn an_idle_consumer_reads_the_locks_on_a_cadence_and_when_one_is_due() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    assert_eq!(dequeue_requests(&mut a, &mut store, at(0)).1, ["m1"]);
    // a crashes holding m1. b polls every second.
    let mut b = consumer("b");
    let mut reads = Vec::new();
    let mut taken_at = None;
    for second in 0..12 {
        let (requests, names) = dequeue_requests(&mut b, &mut store, at(second * 1_000 + 100));
        reads.push(requests);
        if !names.is_empty() && taken_at.is_none() {
            taken_at = Some(second);
        }
    }
    // Reads at 0.1 s; again from 2.6 s (at 3.1), 5.6 s (at 6.1), 8.6 s (at 9.1), and
    // at the due time, 10.2 s (at 11.1), which takes m1 over.
    assert_eq!(reads, [2, 1, 1, 2, 1, 1, 2, 1, 1, 2, 1, 2]);
    assert_eq!(taken_at, Some(11));
    // The sibling: told to read the locks every time, the same polls read them all.
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    dequeue_requests(&mut consumer("a"), &mut store, at(0));
    let every = ConsumerConfig {
        lock_watch: Some(Millis::ZERO),
        ..queue_common::config()
    };
    let mut c = Consumer::new(HostId::from("c"), Incarnation(0), every).unwrap();
    let reads: Vec<usize> = (0..4)
        .map(|s| dequeue_requests(&mut c, &mut store, at(s * 1_000 + 100)).0)
        .collect();
    assert_eq!(reads, [2, 2, 2, 2]);
}

/// A dead letter stored under its message's own id, as versions before dead letters
/// had ids of their own left them, is listed and requeued in place; a stale listing
/// of it is refused.
#[test]
fn a_dead_letter_kept_under_its_live_id_is_requeued_in_place() {
    let mut store = Container::new();
    enqueue(&mut store, "old", at(0), Millis::ZERO);
    let pk = PartitionKey::from("work");
    let id = Message::id_for(&QueueName::new("work").unwrap(), &name("old"));
    let stored = store.read(&pk, &id).unwrap();
    let mut dead = stored.doc.clone();
    dead.state = MessageState::DeadLettered {
        reason: "old format".into(),
    };
    dead.dequeue_count = 5;
    store.replace(dead, Some(&stored.etag)).unwrap();
    let mut a = consumer("a");
    let listed = run(
        &mut a,
        &mut store,
        at(0),
        Input::ListDeadLetters { max: 10 },
    );
    let [Output::DeadLetters(found)] = &listed[..] else {
        panic!("{listed:?}")
    };
    let mut stale = found[0].clone();
    let out = run(&mut a, &mut store, at(1), Input::Requeue(found[0].clone()));
    assert!(matches!(&out[..], [Output::Requeued { .. }]), "{out:?}");
    let back = store.read(&pk, &id).unwrap().doc;
    assert_eq!((back.state, back.dequeue_count), (MessageState::Pending, 0));
    // The same listing again: the document changed since, and nothing is written.
    stale.doc.payload = "stale".into();
    let out = run(&mut a, &mut store, at(2), Input::Requeue(stale));
    assert!(
        matches!(refusal(&out), Some(QueueError::DeadLetterChanged(_))),
        "{out:?}"
    );
}

/// The error of an operation that failed and produced nothing else.
fn refusal(out: &[Output]) -> Option<&QueueError> {
    match out {
        [Output::Failed { error, .. }] => Some(error),
        _ => None,
    }
}

/// Sends a completion of `id` at `now` and returns its request, not yet served.
fn send_complete(
    c: &mut Consumer,
    now: u64,
    id: &leasehold_engine::queue::Delivery,
) -> leasehold_engine::queue::QueueRequest {
    c.handle_input(at(now), Input::Complete(id.handle()))
        .unwrap();
    let mut requests: Vec<_> = std::iter::from_fn(|| c.poll_output())
        .filter_map(|o| match o {
            Output::Request(req) => Some(req),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 1);
    requests.remove(0)
}

/// The store applies `req` at `now`, but its reply is lost.
fn serve_reply_lost(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: u64,
    req: leasehold_engine::queue::QueueRequest,
) {
    let _applied = store.execute(req.op);
    let lost = Input::Response {
        id: req.id,
        result: Err(leasehold_engine::store::StoreError::Timeout),
    };
    c.handle_input(at(now), lost).unwrap();
    assert!(matches!(
        c.poll_output(),
        Some(Output::Failed {
            error: QueueError::Store(_),
            ..
        })
    ));
}

/// A completion lands, its reply is lost, and the caller retries it: m1 at once, m2
/// after a dequeue read the locks while its completion was on the way. `bad` runs
/// the consumer's earlier reading of the answers. Returns the retries' outputs and
/// the answer to m2's retry.
fn retried_completions(bad: bool) -> (Vec<Output>, Result<(), QueueError>) {
    let mut cfg = config();
    if bad {
        cfg.known_bad = Some(leasehold_engine::queue::QueueKnownBad::GoneMeansLost);
    }
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    enqueue(&mut store, "m2", at(0), Millis::ZERO);
    let mut a = Consumer::new(HostId::from("a"), Incarnation(0), cfg).unwrap();
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 2 }));
    assert_eq!(got.len(), 2);
    let req = send_complete(&mut a, 1_000, &got[0]);
    serve_reply_lost(&mut a, &mut store, 1_050, req);
    assert!(stored(&store, "m1").is_none(), "the first attempt landed");
    let mut out = run(
        &mut a,
        &mut store,
        at(2_000),
        Input::Complete(got[0].handle()),
    );
    // m2: the dequeue at 3 s reads the locks (due every 2.5 s) and finds m2 still
    // locked, its completion not yet arrived.
    let req = send_complete(&mut a, 2_900, &got[1]);
    enqueue(&mut store, "m3", at(2_950), Millis::ZERO);
    let between = run(&mut a, &mut store, at(3_000), Input::Dequeue { max: 1 });
    assert_eq!(deliveries(&between).len(), 1, "m3 is delivered");
    serve_reply_lost(&mut a, &mut store, 3_100, req);
    assert!(stored(&store, "m2").is_none(), "the first attempt landed");
    let after_dequeue = a.handle_input(at(4_000), Input::Complete(got[1].handle()));
    while let Some(o) = a.poll_output() {
        if let Output::Request(req) = o {
            let result = store.execute(req.op);
            let answer = Input::Response { id: req.id, result };
            out.extend(run(&mut a, &mut store, at(4_000), answer));
        } else {
            out.push(o);
        }
    }
    (out, after_dequeue)
}

/// A completion that landed but whose reply was lost is confirmed when retried while
/// the lock still excludes every other consumer: only its own first attempt can have
/// deleted the message. A dequeue in between keeps the lock for that retry.
#[test]
fn a_retried_completion_whose_first_attempt_landed_is_confirmed() {
    let (out, after_dequeue) = retried_completions(false);
    assert!(after_dequeue.is_ok(), "{after_dequeue:?}");
    let completed = out
        .iter()
        .filter(|o| matches!(o, Output::Completed(_)))
        .count();
    assert_eq!(completed, 2, "{out:?}");
}

/// The sibling: read the earlier way, the same retries say the lock was lost, or
/// that the consumer holds none, although its own completion deleted the message.
#[test]
fn read_the_earlier_way_a_landed_completion_is_reported_lost() {
    let (out, after_dequeue) = retried_completions(true);
    assert!(
        matches!(after_dequeue, Err(QueueError::NotHeld(_))),
        "{after_dequeue:?}"
    );
    let lost = out
        .iter()
        .filter(|o| {
            matches!(
                o,
                Output::Failed {
                    error: QueueError::LockLost(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(lost, 1, "{out:?}");
    assert!(!out.iter().any(|o| matches!(o, Output::Completed(_))));
}

/// Once the lock no longer excludes others, a completion that finds the message gone
/// cannot tell whose completion deleted it, and says so: neither confirmed nor lost.
#[test]
fn a_completion_found_gone_after_the_lock_ran_out_cannot_tell_whose_it_was() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let req = send_complete(&mut a, 1_000, &got[0]);
    serve_reply_lost(&mut a, &mut store, 1_050, req);
    // Authority was 9.4 s from the claim.
    let out = run(
        &mut a,
        &mut store,
        at(9_400),
        Input::Complete(got[0].handle()),
    );
    assert!(
        matches!(refusal(&out), Some(QueueError::Gone(_))),
        "{out:?}"
    );
    // Its lock is forgotten: nothing is left to retry.
    let again = a.handle_input(at(9_500), Input::Complete(got[0].handle()));
    assert!(matches!(again, Err(QueueError::NotHeld(_))));
}

/// An abandon lands but its reply is lost; the message, pending again, is taken and
/// completed by another consumer at once; then the first consumer completes it. The
/// message is gone, but not by any completion of the first consumer's: its abandon
/// freed the message while its lock seemed to exclude everyone. It must hear `Gone`,
/// never `Completed` (the model's large-payload check found it, a poison move taking
/// the place of the other completion).
#[test]
fn a_completion_after_an_abandon_of_unknown_outcome_is_not_confirmed_by_a_gone_message() {
    let mut store = Container::new();
    enqueue(&mut store, "m1", at(0), Millis::ZERO);
    let mut a = consumer("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let abandon = Input::Abandon {
        delivery: got[0].handle(),
        delay: Millis::ZERO,
    };
    a.handle_input(at(1_000), abandon).unwrap();
    let Some(Output::Request(req)) = a.poll_output() else {
        panic!("an abandon request")
    };
    serve_reply_lost(&mut a, &mut store, 1_050, req);
    let mut b = consumer("b");
    let taken = deliveries(&run(
        &mut b,
        &mut store,
        at(1_100),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(taken.len(), 1, "the abandon made it pending at once");
    run(
        &mut b,
        &mut store,
        at(1_200),
        Input::Complete(taken[0].handle()),
    );
    assert!(stored(&store, "m1").is_none());
    let out = run(
        &mut a,
        &mut store,
        at(1_300),
        Input::Complete(got[0].handle()),
    );
    assert!(
        matches!(refusal(&out), Some(QueueError::Gone(_))),
        "{out:?}"
    );
}
