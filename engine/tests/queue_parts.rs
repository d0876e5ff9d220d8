//! Payloads larger than a document: kept as a part set beside the message, never seen
//! half-written, and swept when left behind. Documents here hold at most 2,000 bytes,
//! so a payload of a few thousand takes several parts; the sweep bound is 60 s (with
//! the 1 % drift allowance, 60.6 s of watching).

mod queue_common;

use leasehold_engine::queue::{
    Consumer, ConsumerConfig, Handle, Input, LargeMessages, Message, MessageState, Naming, Output,
    PartsRef, QueueError, QueueKnownBad, QueueRequest,
};
use leasehold_engine::store::{Container, Document, Limits, Op, StoreError, Stored};
use leasehold_engine::{HostId, Incarnation, Millis, Now};
use queue_common::*;

const LIMIT: usize = 2_000;

fn small() -> ConsumerConfig {
    ConsumerConfig {
        limits: Limits {
            max_document_bytes: LIMIT,
            ..Limits::default()
        },
        large: Some(LargeMessages {
            max_bytes: 20_000,
            orphan_after: Millis::from_secs(60),
        }),
        ..config()
    }
}

fn client(who: &str) -> Consumer {
    Consumer::new(HostId::from(who), Incarnation(0), small()).unwrap()
}

fn store() -> Container<Message> {
    Container::with_limits(Limits {
        max_document_bytes: LIMIT,
        ..Limits::default()
    })
}

/// A payload of exactly `bytes` bytes, with characters JSON escapes and wide ones,
/// so that parts are cut by escaped size at character boundaries.
fn payload(bytes: usize) -> String {
    let mut out = String::new();
    for c in "ab\"c\\d\u{1}é—".chars().cycle() {
        if out.len() + c.len_utf8() > bytes {
            break;
        }
        out.push(c);
    }
    while out.len() < bytes {
        out.push('z');
    }
    out
}

fn enqueue_big(c: &mut Consumer, store: &mut Container<Message>, msg: &str, body: &str) {
    let input = Input::Enqueue {
        name: name(msg),
        payload: body.to_string(),
        delay: Millis::ZERO,
    };
    let out = run(c, store, at(0), input);
    assert!(
        matches!(
            out[..],
            [Output::Enqueued {
                already_present: false,
                ..
            }]
        ),
        "{out:?}"
    );
}

/// Feeds one input and returns the requests it sent and the other outputs, serving
/// nothing: the caller decides what lands.
fn step(c: &mut Consumer, now: Now, input: Input) -> (Vec<QueueRequest>, Vec<Output>) {
    c.handle_input(now, input).unwrap();
    let (mut requests, mut outputs) = (Vec::new(), Vec::new());
    while let Some(out) = c.poll_output() {
        match out {
            Output::Request(r) => requests.push(r),
            other => outputs.push(other),
        }
    }
    (requests, outputs)
}

/// Serves `request` against the store and feeds the answer back.
fn serve(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: Now,
    request: QueueRequest,
) -> (Vec<QueueRequest>, Vec<Output>) {
    let result = store.execute(request.op);
    step(
        c,
        now,
        Input::Response {
            id: request.id,
            result,
        },
    )
}

/// Starts an enqueue of a 5,000-byte payload as `big` and lets its first `writes`
/// land, one after another; returns the next request, not yet served.
fn start_large(
    producer: &mut Consumer,
    store: &mut Container<Message>,
    writes: usize,
) -> QueueRequest {
    let input = Input::Enqueue {
        name: name("big"),
        payload: payload(5_000),
        delay: Millis::ZERO,
    };
    let (mut requests, _) = step(producer, at(0), input);
    for _ in 0..writes {
        let next = requests.pop().unwrap();
        (requests, _) = serve(producer, store, at(0), next);
    }
    requests.pop().unwrap()
}

fn count(store: &Container<Message>, status: &str) -> usize {
    store
        .iter()
        .filter(|s| {
            matches!(
                (&s.doc.state, status),
                (MessageState::PartSet { .. }, "head") | (MessageState::Part { .. }, "part")
            )
        })
        .count()
}

fn swept(out: &[Output]) -> usize {
    out.iter()
        .filter(|o| matches!(o, Output::Swept { .. }))
        .count()
}

#[test]
fn a_payload_larger_than_a_document_is_delivered_whole_and_completing_leaves_nothing() {
    let mut store = store();
    let mut producer = client("p");
    let body = payload(9_000);
    enqueue_big(&mut producer, &mut store, "big", &body);
    assert!(count(&store, "part") >= 9, "{}", count(&store, "part"));
    assert_eq!(count(&store, "head"), 1);
    let manifest = stored(&store, "big").unwrap();
    assert!(manifest.payload.is_empty());
    assert_eq!(manifest.parts.as_ref().unwrap().bytes, 9_000);

    let mut a = client("a");
    let got = deliveries(&run(
        &mut a,
        &mut store,
        at(1_000),
        Input::Dequeue { max: 5 },
    ));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, body);
    let out = run(
        &mut a,
        &mut store,
        at(2_000),
        Input::Complete(got[0].handle()),
    );
    assert!(matches!(out[..], [Output::Completed(_)]), "{out:?}");
    assert_eq!(store.iter().count(), 0, "parts or head left behind");
}

#[test]
fn a_small_payload_is_still_one_document() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "small", "tiny");
    assert_eq!(store.iter().count(), 1);
    assert_eq!(stored(&store, "small").unwrap().parts, None);
}

#[test]
fn a_producer_stopped_half_way_leaves_nothing_deliverable_and_the_sweep_clears_it_after_the_bound()
{
    let mut store = store();
    // The head and two parts land; then the producer is gone.
    start_large(&mut client("p"), &mut store, 3);
    assert_eq!((count(&store, "head"), count(&store, "part")), (1, 2));

    let mut a = client("a");
    assert!(deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 5 })).is_empty());
    // First seen at 1 s: kept until 61.6 s.
    let out = run(&mut a, &mut store, at(1_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 0);
    assert!(
        out.contains(&Output::SweepFinished { read: 1, swept: 0 }),
        "{out:?}"
    );
    let out = run(&mut a, &mut store, at(61_599), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 0);
    let out = run(&mut a, &mut store, at(61_600), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(store.iter().count(), 0);
}

#[test]
fn a_sweep_never_removes_a_set_that_a_message_or_a_dead_letter_names() {
    let mut store = store();
    let body = payload(4_000);
    enqueue_big(&mut client("p"), &mut store, "big", &body);
    let mut a = client("a");
    run(&mut a, &mut store, at(0), Input::Sweep { max: 10 });
    let out = run(&mut a, &mut store, at(100_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 0, "{out:?}");

    // Dead-lettered, its payload stays with it, and comes back whole on a requeue.
    let got = deliveries(&run(
        &mut a,
        &mut store,
        at(100_000),
        Input::Dequeue { max: 1 },
    ));
    let reason = "inspect".to_string();
    run(
        &mut a,
        &mut store,
        at(100_000),
        Input::DeadLetter {
            delivery: got[0].handle(),
            reason,
        },
    );
    let out = run(&mut a, &mut store, at(300_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 0, "{out:?}");
    let letter = dead_letters(&store, "big").pop().unwrap();
    run(&mut a, &mut store, at(300_000), Input::Requeue(letter));
    let got = deliveries(&run(
        &mut client("b"),
        &mut store,
        at(300_000),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(got[0].payload, body);
}

#[test]
fn a_producer_that_paused_past_the_bound_is_fenced_off_and_leaves_no_part_behind() {
    let mut store = store();
    let mut producer = client("p");
    // The head and a part land; the next part is on its way when the producer
    // stalls, and a sweep takes the set.
    let held = start_large(&mut producer, &mut store, 2);
    let mut a = client("a");
    run(&mut a, &mut store, at(0), Input::Sweep { max: 10 });
    let out = run(&mut a, &mut store, at(70_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 1);
    let (rest, out) = serve(&mut producer, &mut store, at(70_000), held);
    assert!(rest.is_empty());
    assert!(refused_as_swept(&out), "{out:?}");
    assert_eq!(store.iter().count(), 0, "a part landed outside any set");
}

#[test]
fn a_completion_cut_short_leaves_a_set_the_sweep_clears() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "big", &payload(3_000));
    let mut a = client("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let (requests, _) = step(&mut a, at(1_000), Input::Complete(got[0].handle()));
    let (deletes, out) = serve(
        &mut a,
        &mut store,
        at(1_000),
        requests.into_iter().next().unwrap(),
    );
    assert!(matches!(out[..], [Output::Completed(_)]), "{out:?}");
    // The consumer dies before its part deletes are sent.
    assert!(!deletes.is_empty());
    assert_eq!(count(&store, "head"), 1);
    let mut b = client("b");
    run(&mut b, &mut store, at(2_000), Input::Sweep { max: 10 });
    let out = run(&mut b, &mut store, at(63_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(store.iter().count(), 0);
}

/// A message that names its parts before they are all stored, as a provider that
/// wrote the manifest first would leave it: the known-bad order.
fn manifest_first(store: &mut Container<Message>, keep_parts: usize) -> String {
    let body = payload(4_000);
    let mut scratch = self::store();
    enqueue_big(&mut client("p"), &mut scratch, "big", &body);
    let mut parts: Vec<_> = scratch
        .iter()
        .filter(|s| matches!(s.doc.state, MessageState::Part { .. }))
        .map(|s| s.doc.clone())
        .collect();
    parts.sort_by_key(|p| match p.state {
        MessageState::Part { index, .. } => index,
        _ => 0,
    });
    store
        .execute(Op::Create(stored(&scratch, "big").unwrap()))
        .unwrap();
    for part in parts.into_iter().take(keep_parts) {
        store.execute(Op::Create(part)).unwrap();
    }
    body
}

/// The dead letters' reasons among `out`.
fn dead_letter_reasons(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::DeadLettered { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

/// A part not found beside its message is one a replica that lags has not received
/// yet (parts are written first): the delivery fails, and the message, still locked,
/// comes back once its lock runs out, whole by then.
#[test]
fn a_message_whose_parts_are_not_all_stored_is_never_delivered_in_part() {
    let mut store = store();
    manifest_first(&mut store, 2);
    let mut a = client("a");
    let out = run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 });
    assert!(deliveries(&out).is_empty(), "{out:?}");
    assert!(dead_letter_reasons(&out).is_empty(), "{out:?}");
    assert!(
        out.iter().any(|o| matches!(
            o,
            Output::Failed {
                error: QueueError::Store(StoreError::NotFound),
                ..
            }
        )),
        "{out:?}"
    );
    // The sibling: with every part stored, the same message is delivered whole.
    let mut whole = self::store();
    let body = manifest_first(&mut whole, usize::MAX);
    let mut b = client("b");
    let got = deliveries(&run(&mut b, &mut whole, at(0), Input::Dequeue { max: 1 }));
    assert_eq!(got[0].payload, body);
}

/// The store a replica that lags showed: the message, its first two parts; then the
/// replica catches up. The message comes back once its lock has run out, and is
/// delivered whole, on its second delivery.
#[test]
fn a_part_a_lagging_replica_lacked_is_read_on_a_later_delivery() {
    let mut lagging = store();
    manifest_first(&mut lagging, 2);
    let mut a = client("a");
    let first = run(&mut a, &mut lagging, at(0), Input::Dequeue { max: 1 });
    assert!(deliveries(&first).is_empty(), "{first:?}");
    // Caught up: every part there, beside the message as the failed delivery left it.
    let mut caught_up = self::store();
    let body = manifest_first(&mut caught_up, usize::MAX);
    let locked = stored(&lagging, "big").unwrap();
    assert!(matches!(locked.state, MessageState::InProgress { .. }));
    caught_up
        .execute(Op::Replace {
            doc: locked,
            if_match: None,
        })
        .unwrap();
    let b = &mut client("b");
    let early = run(b, &mut caught_up, at(1_000), Input::Dequeue { max: 1 });
    assert!(deliveries(&early).is_empty(), "locked still: {early:?}");
    let later = deliveries(&run(
        b,
        &mut caught_up,
        at(12_000),
        Input::Dequeue { max: 1 },
    ));
    assert_eq!(later.len(), 1, "{later:?}");
    assert_eq!(later[0].payload, body);
    assert_eq!(later[0].dequeue_count, 2);
}

/// Read the earlier way, a part not found is missing for good, and a healthy message
/// goes to the dead letters after one delivery (`missing-part-is-damage`).
#[test]
fn read_the_earlier_way_a_part_a_lagging_replica_lacked_dead_letters_its_message() {
    let mut store = store();
    manifest_first(&mut store, 2);
    let config = ConsumerConfig {
        known_bad: Some(QueueKnownBad::MissingPartIsDamage),
        ..small()
    };
    let mut a = Consumer::new(HostId::from("a"), Incarnation(0), config).unwrap();
    let out = run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 });
    assert_eq!(
        dead_letter_reasons(&out),
        ["part 2 of its payload is missing"]
    );
}

#[test]
fn parts_mixed_from_another_payload_are_refused() {
    let mut store = store();
    manifest_first(&mut store, usize::MAX);
    // Another producer's payload of the same length, under the same set and ids.
    let manifest = stored(&store, "big").unwrap();
    let set = manifest
        .parts
        .as_ref()
        .map(|p: &PartsRef| p.set.clone())
        .unwrap();
    let part_zero = store
        .iter()
        .find(|s| matches!(&s.doc.state, MessageState::Part { index: 0, set: s2 } if *s2 == set))
        .cloned()
        .unwrap();
    let mut other = part_zero.doc.clone();
    other.payload = "x".repeat(other.payload.len());
    store
        .execute(Op::Replace {
            doc: other,
            if_match: None,
        })
        .unwrap();
    let out = run(
        &mut client("a"),
        &mut store,
        at(0),
        Input::Dequeue { max: 1 },
    );
    assert!(deliveries(&out).is_empty());
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::DeadLettered { reason, .. }
            if reason == "its payload's parts do not match its hash")),
        "{out:?}"
    );
}

#[test]
fn a_payload_over_the_large_limit_or_with_large_messages_off_is_refused_too_large() {
    let mut a = client("a");
    let input = |bytes| Input::Enqueue {
        name: name("huge"),
        payload: "x".repeat(bytes),
        delay: Millis::ZERO,
    };
    let refused = a.handle_input(at(0), input(20_001));
    assert!(
        matches!(
            refused,
            Err(QueueError::TooLarge {
                size: 20_001,
                limit: 20_000
            })
        ),
        "{refused:?}"
    );
    assert_eq!(a.poll_output(), None);
    let off = ConsumerConfig {
        large: None,
        ..small()
    };
    let mut b = Consumer::new(HostId::from("b"), Incarnation(0), off).unwrap();
    let refused = b.handle_input(at(0), input(2_000));
    assert!(
        matches!(refused, Err(QueueError::TooLarge { limit: LIMIT, .. })),
        "{refused:?}"
    );
    assert_eq!(b.poll_output(), None);
}

#[test]
fn a_batch_larger_than_a_request_may_be_is_refused_by_the_reference_store() {
    let mut store = store();
    let doc = |n: &str, bytes| {
        Message::new(
            leasehold_engine::queue::QueueName::new("work").unwrap(),
            name(n),
            "x".repeat(bytes),
            at(0).wall,
            Millis::ZERO,
        )
    };
    let ops = vec![
        leasehold_engine::store::BatchOp::Create(doc("a", 1_100)),
        leasehold_engine::store::BatchOp::Create(doc("b", 1_100)),
    ];
    let pk = leasehold_engine::PartitionKey::from("work");
    let result = store.execute(Op::Batch { pk, ops });
    assert!(
        matches!(result, Err(StoreError::TooLarge { .. })),
        "{result:?}"
    );
    assert_eq!(store.iter().count(), 0);
}

/// What the set's head of `store` records as its naming document.
fn head_naming(store: &Container<Message>) -> Naming {
    let heads: Vec<Naming> = store
        .iter()
        .filter_map(|s| match &s.doc.state {
            MessageState::PartSet { named_by, .. } => Some(named_by.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(heads.len(), 1, "{heads:?}");
    heads.into_iter().next().unwrap()
}

/// `consumer` dequeues the message "big" and moves it to the dead letters; returns
/// the dead letter.
fn dequeue_and_dead_letter(
    consumer: &mut Consumer,
    store: &mut Container<Message>,
) -> Stored<Message> {
    let got = deliveries(&run(consumer, store, at(0), Input::Dequeue { max: 1 }));
    let delivery = got[0].handle();
    let reason = "inspect".to_string();
    run(
        consumer,
        store,
        at(0),
        Input::DeadLetter { delivery, reason },
    );
    dead_letters(store, "big").pop().unwrap()
}

/// Moves a large message to the dead letters with consumers configured by
/// `config`; returns the store a replica that lags document by document may show
/// a sweep: the move half applied, the message gone and its dead letter not there.
fn dead_lettered_seen_half_applied(config: &ConsumerConfig) -> Container<Message> {
    let mut store = store();
    let consumer = |who: &str| Consumer::new(HostId::from(who), Incarnation(0), config.clone());
    enqueue_big(
        &mut consumer("p").unwrap(),
        &mut store,
        "big",
        &payload(4_000),
    );
    let letter = dequeue_and_dead_letter(&mut consumer("a").unwrap(), &mut store);
    if config.known_bad.is_none() {
        assert_eq!(head_naming(&store), Naming::By(letter.doc.id.clone()));
    }
    let mut lagging = store.clone();
    lagging
        .execute(Op::Delete {
            pk: letter.doc.partition_key(),
            id: letter.doc.id,
            if_match: None,
        })
        .unwrap();
    lagging
}

/// A sweep judges a head by what the head records, which the move's batch wrote:
/// shown the move half applied, it still leaves the dead letter's payload alone.
#[test]
fn a_sweep_shown_a_dead_letter_move_half_applied_keeps_the_dead_letters_payload() {
    let mut lagging = dead_lettered_seen_half_applied(&small());
    let parts = count(&lagging, "part");
    assert!(parts > 1);
    let mut b = client("b");
    run(&mut b, &mut lagging, at(1_000), Input::Sweep { max: 10 });
    let out = run(&mut b, &mut lagging, at(100_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 0, "{out:?}");
    assert_eq!(count(&lagging, "part"), parts);
}

/// Its sibling: heads that record nothing (`unrecorded-heads`, as versions before
/// the record wrote them) leave the sweep to a query, which the half-applied move
/// answers with no document naming the set: the dead letter's payload is dropped.
#[test]
fn a_sweep_that_queries_for_the_naming_document_drops_a_payload_a_half_applied_move_hides() {
    let config = ConsumerConfig {
        known_bad: Some(QueueKnownBad::UnrecordedHeads),
        ..small()
    };
    let mut lagging = dead_lettered_seen_half_applied(&config);
    assert_eq!(head_naming(&lagging), Naming::Unrecorded);
    let mut b = Consumer::new(HostId::from("b"), Incarnation(0), config).unwrap();
    run(&mut b, &mut lagging, at(1_000), Input::Sweep { max: 10 });
    let out = run(&mut b, &mut lagging, at(100_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(count(&lagging, "part"), 0);
}

/// The head follows its naming document through every move: the manifest, the dead
/// letter, the requeued message; a completion leaves it naming nobody.
#[test]
fn a_head_names_the_document_that_names_its_set_through_every_move() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "big", &payload(4_000));
    let live = stored(&store, "big").unwrap().id;
    assert_eq!(head_naming(&store), Naming::By(live.clone()));
    let mut a = client("a");
    let letter = dequeue_and_dead_letter(&mut a, &mut store);
    assert_eq!(head_naming(&store), Naming::By(letter.doc.id.clone()));
    run(&mut a, &mut store, at(0), Input::Requeue(letter));
    assert_eq!(head_naming(&store), Naming::By(live));
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let (requests, _) = step(&mut a, at(0), Input::Complete(got[0].handle()));
    serve(
        &mut a,
        &mut store,
        at(0),
        requests.into_iter().next().unwrap(),
    );
    assert_eq!(head_naming(&store), Naming::Nobody);
}

/// A head written before heads recorded their naming document is judged as before:
/// kept while a query finds its message, swept once none does.
#[test]
fn a_head_written_before_the_record_is_swept_only_when_no_message_names_it() {
    let mut store = store();
    let earlier = ConsumerConfig {
        known_bad: Some(QueueKnownBad::UnrecordedHeads),
        ..small()
    };
    let mut producer = Consumer::new(HostId::from("p"), Incarnation(0), earlier).unwrap();
    enqueue_big(&mut producer, &mut store, "big", &payload(4_000));
    assert_eq!(head_naming(&store), Naming::Unrecorded);
    let mut a = client("a");
    run(&mut a, &mut store, at(0), Input::Sweep { max: 10 });
    let out = run(&mut a, &mut store, at(100_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 0, "{out:?}");
    // An earlier version's completion, cut short after the message's delete.
    let message = stored(&store, "big").unwrap();
    let op = Op::Delete {
        pk: message.partition_key(),
        id: message.id,
        if_match: None,
    };
    store.execute(op).unwrap();
    // Seen unchanged since 0 s, and named by nothing the query finds.
    let out = run(&mut a, &mut store, at(100_000), Input::Sweep { max: 10 });
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(store.iter().count(), 0);
}

/// An operator deletes a large message's dead letter: the dead letter goes, then its
/// parts and head, and nothing is left.
#[test]
fn a_dead_letter_deleted_through_the_consumer_takes_its_payload_with_it() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "big", &payload(4_000));
    let mut a = client("a");
    let letter = dequeue_and_dead_letter(&mut a, &mut store);
    let id = letter.doc.id.clone();
    let out = run(
        &mut a,
        &mut store,
        at(1_000),
        Input::DeleteDeadLetter(letter),
    );
    assert!(out.contains(&Output::DeadLetterDeleted(id)), "{out:?}");
    assert_eq!(
        store.iter().count(),
        0,
        "{:?}",
        store.iter().collect::<Vec<_>>()
    );
}

/// Deletes the dead letter of "big" with consumers configured by `config`, its
/// answer lost: the batch (or lone delete) lands, and the consumer, told nothing
/// certain, leaves the parts. Returns the store and a sweeper's outputs once it has
/// watched the set well past the bound.
fn dead_letter_deleted_answer_lost(config: ConsumerConfig) -> (Container<Message>, Vec<Output>) {
    let mut store = store();
    let consumer = |who: &str| Consumer::new(HostId::from(who), Incarnation(0), config.clone());
    enqueue_big(
        &mut consumer("p").unwrap(),
        &mut store,
        "big",
        &payload(4_000),
    );
    let mut a = consumer("a").unwrap();
    let letter = dequeue_and_dead_letter(&mut a, &mut store);
    let (requests, _) = step(&mut a, at(1_000), Input::DeleteDeadLetter(letter));
    let [request] = &requests[..] else {
        panic!("{requests:?}")
    };
    store.execute(request.op.clone()).unwrap();
    let answer = Input::Response {
        id: request.id,
        result: Err(StoreError::Timeout),
    };
    let (more, out) = step(&mut a, at(11_000), answer);
    assert!(more.is_empty(), "{more:?}");
    assert!(
        matches!(
            &out[..],
            [Output::Failed {
                error: QueueError::Store(StoreError::Timeout),
                ..
            }]
        ),
        "{out:?}"
    );
    assert!(dead_letters(&store, "big").is_empty());
    assert!(count(&store, "part") > 1);
    let mut b = consumer("b").unwrap();
    run(&mut b, &mut store, at(12_000), Input::Sweep { max: 10 });
    let out = run(&mut b, &mut store, at(200_000), Input::Sweep { max: 10 });
    (store, out)
}

/// The delete's batch left the head naming nobody, so a sweep takes what an
/// answer lost (or a consumer stopped before its part deletes) left behind.
#[test]
fn a_dead_letters_delete_cut_short_leaves_a_set_the_sweep_clears() {
    let (store, out) = dead_letter_deleted_answer_lost(small());
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(store.iter().count(), 0);
}

/// Its sibling: a lone delete (`discard-keeps-head`, as deleting it by hand does)
/// leaves the head naming the gone dead letter, and no sweep ever takes the set.
#[test]
fn a_dead_letter_deleted_alone_leaves_a_set_no_sweep_takes() {
    let config = ConsumerConfig {
        known_bad: Some(QueueKnownBad::DiscardKeepsHead),
        ..small()
    };
    let (store, out) = dead_letter_deleted_answer_lost(config);
    assert_eq!(swept(&out), 0, "{out:?}");
    assert!(matches!(head_naming(&store), Naming::By(_)));
    assert!(count(&store, "part") > 1);
}

/// A delete is of the dead letter as listed: one requeued since is refused, and the
/// live message keeps its payload; a live message is not a dead letter.
#[test]
fn a_dead_letter_requeued_since_it_was_listed_is_not_deleted() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "big", &payload(4_000));
    let mut a = client("a");
    let letter = dequeue_and_dead_letter(&mut a, &mut store);
    let mut b = client("b");
    run(&mut b, &mut store, at(0), Input::Requeue(letter.clone()));
    let live = stored(&store, "big").unwrap();
    let parts = count(&store, "part");
    assert!(parts > 1);
    let out = run(&mut a, &mut store, at(0), Input::DeleteDeadLetter(letter));
    assert!(
        matches!(
            &out[..],
            [Output::Failed {
                error: QueueError::DeadLetterGone(_),
                ..
            }]
        ),
        "{out:?}"
    );
    assert_eq!(count(&store, "part"), parts);
    assert_eq!(head_naming(&store), Naming::By(live.id.clone()));
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    assert_eq!(got[0].payload, payload(4_000));
    let stale = Stored {
        doc: live.clone(),
        etag: store
            .iter()
            .find(|s| s.doc.id == live.id)
            .unwrap()
            .etag
            .clone(),
    };
    assert!(matches!(
        a.handle_input(at(0), Input::DeleteDeadLetter(stale)),
        Err(QueueError::NotADeadLetter(_))
    ));
}

/// A delete is of the dead letter as listed: one changed since is refused with
/// nothing changed, one gone (deleted by another consumer, or by an earlier attempt
/// of the same delete) is answered as gone.
#[test]
fn a_dead_letter_changed_or_gone_since_it_was_listed_is_not_deleted() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "big", &payload(4_000));
    let mut a = client("a");
    let letter = dequeue_and_dead_letter(&mut a, &mut store);
    let stale = Stored {
        etag: leasehold_engine::Etag::opaque("stale"),
        ..letter.clone()
    };
    let out = run(&mut a, &mut store, at(0), Input::DeleteDeadLetter(stale));
    assert!(
        matches!(
            &out[..],
            [Output::Failed {
                error: QueueError::DeadLetterChanged(_),
                ..
            }]
        ),
        "{out:?}"
    );
    let mut b = client("b");
    let out = run(
        &mut b,
        &mut store,
        at(0),
        Input::DeleteDeadLetter(letter.clone()),
    );
    assert!(matches!(out[..], [Output::DeadLetterDeleted(_)]), "{out:?}");
    let out = run(&mut a, &mut store, at(0), Input::DeleteDeadLetter(letter));
    assert!(
        matches!(
            &out[..],
            [Output::Failed {
                error: QueueError::DeadLetterGone(_),
                ..
            }]
        ),
        "{out:?}"
    );
    assert_eq!(store.iter().count(), 0);
}

/// A completion whose batch landed but whose answer came back only after the
/// consumer's own sweep had taken the set (the head named nobody for the whole
/// bound) leaves that sweep to finish: the late answer's part deletes do not take
/// over the sweep's, which would then never end and refuse every later sweep.
#[test]
fn a_completions_late_answer_leaves_the_sweep_that_took_its_set_to_finish() {
    let mut store = store();
    enqueue_big(&mut client("p"), &mut store, "big", &payload(4_000));
    let mut a = client("a");
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let (requests, _) = step(&mut a, at(1_000), Input::Complete(got[0].handle()));
    let [completion] = &requests[..] else {
        panic!("{requests:?}")
    };
    let landed = store.execute(completion.op.clone());
    assert!(landed.is_ok(), "{landed:?}");
    assert_eq!(head_naming(&store), Naming::Nobody);
    run(&mut a, &mut store, at(2_000), Input::Sweep { max: 10 });
    // The sweep marks the head and sends its part deletes, not yet served.
    let (mut pending, _) = step(&mut a, at(100_000), Input::Sweep { max: 10 });
    while let Some(next) = pending.pop() {
        if matches!(next.op, Op::Delete { .. }) {
            pending.push(next);
            break;
        }
        let (more, _) = serve(&mut a, &mut store, at(100_000), next);
        pending.extend(more);
    }
    assert!(!pending.is_empty(), "the sweep sends its deletes");
    // The completion's answer arrives now.
    let answer = Input::Response {
        id: completion.id,
        result: landed,
    };
    let (more, out) = step(&mut a, at(100_000), answer);
    assert!(
        out.contains(&Output::Completed(got[0].id.clone())),
        "{out:?}"
    );
    pending.extend(more);
    let mut outs = Vec::new();
    while let Some(next) = pending.pop() {
        let (more, out) = serve(&mut a, &mut store, at(100_000), next);
        pending.extend(more);
        outs.extend(out);
    }
    assert!(
        outs.iter()
            .any(|o| matches!(o, Output::SweepFinished { .. })),
        "{outs:?}"
    );
    assert_eq!(store.iter().count(), 0);
    let out = run(&mut a, &mut store, at(101_000), Input::Sweep { max: 10 });
    assert!(
        out.contains(&Output::SweepFinished { read: 0, swept: 0 }),
        "{out:?}"
    );
}

/// The model's counterexample to `completion-reads-held`, as an engine test: a
/// completion's reply is held while an enqueue stores the message anew (another
/// attempt of the producer's, naming another set) and the same consumer takes it.
/// Returns the store once the held reply arrives, and the consumer.
fn completion_answered_after_a_new_delivery(
    config: ConsumerConfig,
) -> (Container<Message>, Consumer) {
    let mut store = store();
    let consumer = |who: &str| Consumer::new(HostId::from(who), Incarnation(0), config.clone());
    enqueue_big(
        &mut consumer("p").unwrap(),
        &mut store,
        "big",
        &payload(4_000),
    );
    let mut a = consumer("a").unwrap();
    let got = deliveries(&run(&mut a, &mut store, at(0), Input::Dequeue { max: 1 }));
    let (requests, _) = step(&mut a, at(1_000), Input::Complete(got[0].handle()));
    let [completion] = &requests[..] else {
        panic!("{requests:?}")
    };
    let landed = store.execute(completion.op.clone());
    assert!(landed.is_ok(), "{landed:?}");
    // Completed again, it is found gone (the earlier attempt's), and forgotten.
    run(
        &mut a,
        &mut store,
        at(5_000),
        Input::Complete(got[0].handle()),
    );
    // An enqueue of the same name stores it again, naming a set of its own.
    let mut producer = consumer("q").unwrap();
    enqueue_big(&mut producer, &mut store, "big", &payload(3_000));
    let dequeue = Input::Dequeue { max: 1 };
    let again = deliveries(&run(&mut a, &mut store, at(5_000), dequeue));
    assert_eq!(again[0].id, got[0].id);
    let answer = Input::Response {
        id: completion.id,
        result: landed,
    };
    run(&mut a, &mut store, at(5_000), answer);
    (store, a)
}

/// Whether every part of the payload the stored message "big" names is stored.
fn payload_whole(store: &Container<Message>) -> bool {
    let named = stored(store, "big").unwrap().parts.unwrap();
    (0..named.count).all(|i| {
        store.iter().any(|s| {
            matches!(&s.doc.state, MessageState::Part { set, index } if *set == named.set && *index == i)
        })
    })
}

/// The delivery `live`'s stored lock is of.
fn locked(live: &Message) -> Handle {
    Handle {
        message: live.id.clone(),
        lock: live.lock().expect("locked").token.clone(),
    }
}

/// A completion's answer frees what the message it deleted named, and leaves the
/// lock the consumer holds now alone: the message stored anew keeps its payload, and
/// its delivery its authority.
#[test]
fn a_completions_late_answer_frees_the_payload_of_the_message_it_deleted_only() {
    let (store, a) = completion_answered_after_a_new_delivery(small());
    assert!(
        payload_whole(&store),
        "{:?}",
        store.iter().collect::<Vec<_>>()
    );
    // The completed message's set is gone: nothing is left for the sweep.
    assert_eq!(count(&store, "head"), 1);
    let live = stored(&store, "big").unwrap();
    assert!(a.has_authority(&locked(&live), at(5_000).local));
}

/// Its sibling: read at the answer from the document held then (`completion-reads-held`),
/// the answer deletes the new message's payload and drops its lock.
#[test]
fn a_completions_late_answer_read_from_the_document_held_then_drops_the_new_payload() {
    let config = ConsumerConfig {
        known_bad: Some(QueueKnownBad::CompletionReadsHeld),
        ..small()
    };
    let (store, a) = completion_answered_after_a_new_delivery(config);
    assert!(!payload_whole(&store));
    let live = stored(&store, "big").unwrap();
    assert!(!a.has_authority(&locked(&live), at(5_000).local));
}
