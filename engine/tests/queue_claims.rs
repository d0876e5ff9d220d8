//! Claim checks: the payload in the user's claim store, the message carrying only its
//! key. Nothing is delivered before its payload is stored, nothing mismatched is
//! delivered, and nothing is left in either store that a sweep does not remove. The
//! sweep bound is 60 s (60.6 s of watching, with the 1 % drift allowance).

mod queue_common;

use leasehold_engine::queue::{
    ClaimKey, Consumer, ConsumerConfig, ConsumerConfigError, Input, LargeMessages, Message,
    MessageState, Output, PartsProblem, QueueError, QueueKnownBad, payload_hash,
};
use leasehold_engine::store::Container;
use leasehold_engine::{HostId, Incarnation, Millis, Now};
use queue_common::*;
use std::collections::{BTreeMap, VecDeque};

fn claiming() -> ConsumerConfig {
    ConsumerConfig {
        large: Some(LargeMessages {
            max_bytes: 1 << 20,
            orphan_after: Millis::from_secs(60),
        }),
        ..config()
    }
}

fn client(who: &str) -> Consumer {
    Consumer::new(HostId::from(who), Incarnation(0), claiming()).unwrap()
}

/// The claim store, and whether its driver answers the consumer's asks.
#[derive(Default)]
struct Claims {
    payloads: BTreeMap<ClaimKey, String>,
    /// The payload of the enqueue in flight, stored when the consumer asks.
    next: Option<String>,
    /// The driver stops at the consumer's next ask, as if it crashed there.
    stop: bool,
    /// The asks left unanswered.
    unanswered: Vec<Output>,
    /// Discards fail: the payload stays.
    fail_discards: bool,
}

/// Feeds `input`, serves every request and every ask of the claim store at once
/// (unless `claims.stop`); returns the other outputs.
fn drive(
    c: &mut Consumer,
    store: &mut Container<Message>,
    claims: &mut Claims,
    now: Now,
    input: Input,
) -> Vec<Output> {
    let mut inputs = VecDeque::from([input]);
    let mut seen = Vec::new();
    while let Some(input) = inputs.pop_front() {
        c.handle_input(now, input).unwrap();
        while let Some(out) = c.poll_output() {
            match out {
                Output::Request(req) => inputs.push_back(Input::Response {
                    id: req.id,
                    result: store.execute(req.op),
                }),
                ask @ (Output::StoreClaim(_) | Output::DropClaim(_)) if claims.stop => {
                    claims.unanswered.push(ask);
                }
                Output::StoreClaim(key) => {
                    let payload = claims.next.take().expect("an enqueue in flight");
                    claims.payloads.insert(key.clone(), payload);
                    inputs.push_back(Input::ClaimStored { key, stored: true });
                }
                Output::DropClaim(key) => {
                    claims.payloads.remove(&key);
                    inputs.push_back(Input::ClaimDropped { key, dropped: true });
                }
                Output::DiscardClaim(key) => {
                    if !claims.fail_discards {
                        claims.payloads.remove(&key);
                    }
                }
                other => seen.push(other),
            }
        }
    }
    seen
}

/// One sweep of up to 10 heads by `c` at `ms`.
fn sweep(
    c: &mut Consumer,
    store: &mut Container<Message>,
    claims: &mut Claims,
    ms: u64,
) -> Vec<Output> {
    drive(c, store, claims, at(ms), Input::Sweep { max: 10 })
}

fn enqueue_claimed(body: &str, claims: &mut Claims) -> Input {
    claims.next = Some(body.to_string());
    Input::EnqueueClaimed {
        name: name("big"),
        bytes: body.len() as u64,
        hash: payload_hash(body.as_bytes()),
        delay: Millis::ZERO,
    }
}

fn heads(store: &Container<Message>) -> usize {
    store
        .iter()
        .filter(|s| matches!(s.doc.state, MessageState::PartSet { .. }))
        .count()
}

fn swept(out: &[Output]) -> usize {
    out.iter()
        .filter(|o| matches!(o, Output::Swept { .. }))
        .count()
}

/// Claim-checked payloads that no head or message names: nothing would ever remove
/// them.
fn orphans(store: &Container<Message>, claims: &Claims) -> Vec<ClaimKey> {
    let named = |key: &ClaimKey| {
        store.iter().any(|s| match &s.doc.state {
            MessageState::PartSet { set, .. } => *set == key.set,
            _ => ClaimKey::of(&s.doc).as_ref() == Some(key),
        })
    };
    claims
        .payloads
        .keys()
        .filter(|k| !named(k))
        .cloned()
        .collect()
}

#[test]
fn a_claim_checked_payload_is_delivered_with_its_claim_and_completing_leaves_nothing() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let body = "x".repeat(50_000);
    let input = enqueue_claimed(&body, &mut claims);
    let out = drive(&mut client("p"), &mut store, &mut claims, at(0), input);
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
    // A head and the message, which carries no payload; the payload is outside.
    assert_eq!((store.iter().count(), heads(&store)), (2, 1));
    assert!(stored(&store, "big").unwrap().payload.is_empty());
    assert_eq!(claims.payloads.len(), 1);

    let mut a = client("a");
    let out = drive(
        &mut a,
        &mut store,
        &mut claims,
        at(1_000),
        Input::Dequeue { max: 5 },
    );
    let got = deliveries(&out);
    assert_eq!(got.len(), 1);
    let claim = got[0].claim.clone().expect("delivered with its claim");
    assert!(got[0].payload.is_empty());
    let fetched = claims.payloads.get(&claim.key).cloned();
    assert_eq!(claim.check(fetched), Ok(body));

    let out = drive(
        &mut a,
        &mut store,
        &mut claims,
        at(2_000),
        Input::Complete(got[0].handle()),
    );
    assert!(matches!(out[..], [Output::Completed(_)]), "{out:?}");
    assert_eq!(store.iter().count(), 0, "head or message left behind");
    assert!(
        claims.payloads.is_empty(),
        "payload left in the claim store"
    );
}

#[test]
fn nothing_is_visible_before_the_payload_is_stored() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    claims.stop = true;
    let input = enqueue_claimed("payload", &mut claims);
    let mut producer = client("p");
    drive(&mut producer, &mut store, &mut claims, at(0), input);
    assert!(matches!(claims.unanswered[..], [Output::StoreClaim(_)]));
    assert_eq!(heads(&store), 1);
    let out = drive(
        &mut client("a"),
        &mut store,
        &mut claims,
        at(0),
        Input::Dequeue { max: 5 },
    );
    assert!(deliveries(&out).is_empty(), "{out:?}");
}

/// A producer that wrote its head and was asked to store its payload, not yet
/// answered; the driver answers again from here.
fn asked_to_store(store: &mut Container<Message>, claims: &mut Claims) -> (Consumer, ClaimKey) {
    claims.stop = true;
    let input = enqueue_claimed("payload", claims);
    let mut producer = client("p");
    drive(&mut producer, store, claims, at(0), input);
    claims.stop = false;
    let Some(Output::StoreClaim(key)) = claims.unanswered.pop() else {
        panic!("no ask to store")
    };
    (producer, key)
}

#[test]
fn a_producer_stopped_after_storing_its_payload_leaves_what_the_sweep_clears_after_the_bound() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    // It stored the payload, then died before writing the message.
    let (_, key) = asked_to_store(&mut store, &mut claims);
    claims.payloads.insert(key, "payload".into());

    let mut a = client("a");
    let out = sweep(&mut a, &mut store, &mut claims, 1_000);
    assert!(
        out.contains(&Output::SweepFinished { read: 1, swept: 0 }),
        "{out:?}"
    );
    let out = sweep(&mut a, &mut store, &mut claims, 61_599);
    assert_eq!(swept(&out), 0);
    let out = sweep(&mut a, &mut store, &mut claims, 61_600);
    assert_eq!(swept(&out), 1, "{out:?}");
    assert!(
        out.contains(&Output::SweepFinished { read: 1, swept: 1 }),
        "{out:?}"
    );
    assert_eq!(store.iter().count(), 0);
    assert!(claims.payloads.is_empty());
}

#[test]
fn a_producer_that_paused_past_the_bound_is_refused_and_its_payload_is_named_by_no_message() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let (mut producer, key) = asked_to_store(&mut store, &mut claims);
    // The producer stalls before storing its payload; a sweep takes its set.
    let mut a = client("a");
    sweep(&mut a, &mut store, &mut claims, 0);
    let out = sweep(&mut a, &mut store, &mut claims, 70_000);
    assert_eq!(swept(&out), 1);
    // Then it stores the payload and goes on: its message is refused.
    claims.payloads.insert(key.clone(), "payload".into());
    let out = drive(
        &mut producer,
        &mut store,
        &mut claims,
        at(70_000),
        Input::ClaimStored {
            key: key.clone(),
            stored: true,
        },
    );
    assert!(refused_as_swept(&out), "{out:?}");
    assert_eq!(store.iter().count(), 0, "a message names a swept payload");
    // Named by no head, the payload stored after the sweep is dropped by its producer.
    assert!(claims.payloads.is_empty(), "{:?}", claims.payloads);
}

/// A producer under `config` whose head's create lands at 0 s but whose reply comes
/// back only at `answered_ms`, after a sweep at 0 s and one at 70 s; returns what the
/// late reply leads to.
fn head_answered_late(
    config: ConsumerConfig,
    answered_ms: u64,
    store: &mut Container<Message>,
    claims: &mut Claims,
) -> Vec<Output> {
    let (mut producer, late) = head_written(config, store, claims);
    let mut a = client("a");
    sweep(&mut a, store, claims, 0);
    sweep(&mut a, store, claims, 70_000);
    drive(&mut producer, store, claims, at(answered_ms), late)
}

/// A producer under `config` whose head's create landed at 0 s, and the reply it has
/// not yet been given.
fn head_written(
    config: ConsumerConfig,
    store: &mut Container<Message>,
    claims: &mut Claims,
) -> (Consumer, Input) {
    let mut producer = Consumer::new(HostId::from("p"), Incarnation(0), config).unwrap();
    let input = enqueue_claimed("payload", claims);
    producer.handle_input(at(0), input).unwrap();
    let Some(Output::Request(req)) = producer.poll_output() else {
        panic!("no head write")
    };
    let result = store.execute(req.op);
    (producer, Input::Response { id: req.id, result })
}

#[test]
fn a_producer_whose_head_is_answered_past_the_sweeps_bound_stores_no_payload() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    // 58.9 s: the first instant past the head's authority.
    let out = head_answered_late(claiming(), 58_900, &mut store, &mut claims);
    assert!(refused_as_swept(&out), "{out:?}");
    assert!(claims.payloads.is_empty(), "{:?}", claims.payloads);
    assert_eq!(store.iter().count(), 0);
}

#[test]
fn a_payload_stored_however_late_after_its_head_is_stranded_where_no_sweep_finds_it() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let unbounded = ConsumerConfig {
        known_bad: Some(QueueKnownBad::ClaimUnbounded),
        ..claiming()
    };
    head_answered_late(unbounded, 70_000, &mut store, &mut claims);
    // The message is refused (its head is gone), and the payload it stored after
    // the sweep dropped the key is named by nothing. Its discard is all that
    // removes it: one failed discard strands it.
    assert_eq!(store.iter().count(), 0);
    let mut a = client("a");
    sweep(&mut a, &mut store, &mut claims, 140_000);
    assert!(claims.payloads.is_empty(), "the discard removed it");
    let mut store = Container::default();
    let mut claims = Claims {
        fail_discards: true,
        ..Claims::default()
    };
    head_answered_late(
        ConsumerConfig {
            known_bad: Some(QueueKnownBad::ClaimUnbounded),
            ..claiming()
        },
        70_000,
        &mut store,
        &mut claims,
    );
    assert_eq!(orphans(&store, &claims).len(), 1, "{:?}", claims.payloads);
}

#[test]
fn a_payload_stored_within_the_heads_authority_survives_a_failed_discard() {
    // The same late reply, with the discard failing: within the head's authority
    // (60 s less the 1 % drift allowance and the 0.5 s margin: 58.9 s) the payload
    // is stored while the head stands, and the sweep that takes the head drops it.
    let mut store = Container::default();
    let mut claims = Claims {
        fail_discards: true,
        ..Claims::default()
    };
    let (mut producer, late) = head_written(claiming(), &mut store, &mut claims);
    claims.stop = true;
    drive(&mut producer, &mut store, &mut claims, at(58_899), late);
    claims.stop = false;
    assert!(
        matches!(claims.unanswered[..], [Output::StoreClaim(_)]),
        "within the bound the payload is stored: {:?}",
        claims.unanswered
    );
    let Some(Output::StoreClaim(key)) = claims.unanswered.pop() else {
        unreachable!()
    };
    claims.payloads.insert(key, "payload".into());
    let mut a = client("a");
    sweep(&mut a, &mut store, &mut claims, 0);
    let out = sweep(&mut a, &mut store, &mut claims, 70_000);
    assert_eq!(swept(&out), 1, "{out:?}");
    assert!(claims.payloads.is_empty(), "{:?}", claims.payloads);
    assert!(orphans(&store, &claims).is_empty());
}

#[test]
fn a_failed_store_of_the_payload_ends_the_enqueue_and_the_sweep_clears_its_head() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let (mut producer, key) = asked_to_store(&mut store, &mut claims);
    // The put failed, but landed all the same: its outcome was unknown.
    claims.payloads.insert(key.clone(), "payload".into());
    let failed = Input::ClaimStored { key, stored: false };
    let out = drive(&mut producer, &mut store, &mut claims, at(0), failed);
    assert!(out.is_empty(), "{out:?}");
    assert!(
        claims.payloads.is_empty(),
        "the failed put's payload is discarded"
    );
    assert!(stored(&store, "big").is_none());
    let mut a = client("a");
    sweep(&mut a, &mut store, &mut claims, 0);
    let out = sweep(&mut a, &mut store, &mut claims, 70_000);
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(store.iter().count(), 0);
}

/// A claim-checked message enqueued, delivered to consumer "a" and completed by it at
/// 1 s, its driver not answering the claim store's asks (left in `claims.unanswered`);
/// returns the consumer and the completion's outputs.
fn completed_unanswered(
    store: &mut Container<Message>,
    claims: &mut Claims,
) -> (Consumer, Vec<Output>) {
    let input = enqueue_claimed("payload", claims);
    drive(&mut client("p"), store, claims, at(0), input);
    let mut a = client("a");
    let got = deliveries(&drive(
        &mut a,
        store,
        claims,
        at(0),
        Input::Dequeue { max: 1 },
    ));
    claims.stop = true;
    let complete = Input::Complete(got[0].handle());
    let out = drive(&mut a, store, claims, at(1_000), complete);
    (a, out)
}

#[test]
fn a_completion_cut_short_before_its_payload_is_dropped_leaves_what_the_sweep_clears() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let (_, out) = completed_unanswered(&mut store, &mut claims);
    assert!(matches!(out[..], [Output::Completed(_)]), "{out:?}");
    assert!(matches!(claims.unanswered[..], [Output::DropClaim(_)]));
    // The consumer dies here: the head outlives the payload, so the sweep finds both.
    assert_eq!((heads(&store), claims.payloads.len()), (1, 1));
    claims.stop = false;
    let mut b = client("b");
    sweep(&mut b, &mut store, &mut claims, 2_000);
    let out = sweep(&mut b, &mut store, &mut claims, 63_000);
    assert_eq!(swept(&out), 1, "{out:?}");
    assert_eq!(store.iter().count(), 0);
    assert!(claims.payloads.is_empty());
}

#[test]
fn a_sweep_never_drops_a_payload_that_a_message_or_a_dead_letter_names() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let input = enqueue_claimed("payload", &mut claims);
    drive(&mut client("p"), &mut store, &mut claims, at(0), input);
    let mut a = client("a");
    sweep(&mut a, &mut store, &mut claims, 0);
    let out = sweep(&mut a, &mut store, &mut claims, 100_000);
    assert_eq!(swept(&out), 0, "{out:?}");
    let got = deliveries(&drive(
        &mut a,
        &mut store,
        &mut claims,
        at(100_000),
        Input::Dequeue { max: 1 },
    ));
    let dead = Input::DeadLetter {
        delivery: got[0].handle(),
        reason: "inspect".into(),
    };
    drive(&mut a, &mut store, &mut claims, at(100_000), dead);
    let out = sweep(&mut a, &mut store, &mut claims, 300_000);
    assert_eq!(swept(&out), 0, "{out:?}");
    let letter = dead_letters(&store, "big").pop().unwrap();
    assert_eq!(
        ClaimKey::of(&letter.doc),
        Some(got[0].claim.clone().unwrap().key)
    );
    assert_eq!(claims.payloads.len(), 1);
    assert!(orphans(&store, &claims).is_empty());
}

#[test]
fn a_payload_stored_outside_the_protocol_is_an_orphan_the_check_reports() {
    // The sibling of the checks above: a payload put before any head names it (as a
    // client that stored first would) is seen, and nothing would sweep it.
    let (store, mut claims) = (Container::<Message>::default(), Claims::default());
    let key = ClaimKey {
        queue: config().queue,
        name: name("big"),
        set: leasehold_engine::queue::PartSetId::of(&leasehold_engine::lock::LockToken {
            holder: HostId::from("p"),
            incarnation: Incarnation(0),
            seq: 1,
        }),
    };
    claims.payloads.insert(key.clone(), "payload".into());
    assert_eq!(orphans(&store, &claims), vec![key]);
}

#[test]
fn a_missing_or_changed_payload_is_refused_by_its_claim() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let input = enqueue_claimed("payload", &mut claims);
    drive(&mut client("p"), &mut store, &mut claims, at(0), input);
    let got = deliveries(&drive(
        &mut client("a"),
        &mut store,
        &mut claims,
        at(0),
        Input::Dequeue { max: 1 },
    ));
    let claim = got[0].claim.clone().unwrap();
    assert_eq!(claim.check(None), Err(PartsProblem::Unclaimed));
    assert_eq!(
        claim.check(Some("paylode".into())),
        Err(PartsProblem::Damaged)
    );
    assert_eq!(
        claim.check(Some("payload!".into())),
        Err(PartsProblem::Damaged)
    );
}

#[test]
fn a_claim_check_without_a_sweep_is_refused() {
    let mut c = Consumer::new(
        HostId::from("p"),
        Incarnation(0),
        ConsumerConfig {
            large: None,
            ..config()
        },
    )
    .unwrap();
    let mut claims = Claims::default();
    let input = enqueue_claimed("payload", &mut claims);
    assert_eq!(c.handle_input(at(0), input), Err(QueueError::NoSweep));
    assert_eq!(c.poll_output(), None);
}

#[test]
fn an_answer_for_a_key_no_cleanup_awaits_changes_nothing() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let (mut a, _) = completed_unanswered(&mut store, &mut claims);
    let Some(Output::DropClaim(key)) = claims.unanswered.pop() else {
        panic!("no drop asked")
    };
    // Of another name, the same set: not the cleanup's claim, so the head stays.
    let other = ClaimKey {
        name: name("other"),
        ..key.clone()
    };
    claims.stop = false;
    let input = Input::ClaimDropped {
        key: other,
        dropped: true,
    };
    assert!(drive(&mut a, &mut store, &mut claims, at(1_000), input).is_empty());
    assert_eq!(heads(&store), 1);
    let input = Input::ClaimDropped { key, dropped: true };
    drive(&mut a, &mut store, &mut claims, at(1_000), input);
    assert_eq!(heads(&store), 0);
}

#[test]
fn a_sweep_bound_that_leaves_a_producer_no_time_is_refused() {
    // 0.5 s less the 1 % drift allowance and the 0.5 s margin: nothing left, so no
    // claim-checked payload could ever be stored. A little more leaves some.
    let with_bound = |ms| ConsumerConfig {
        large: Some(LargeMessages {
            max_bytes: 1 << 20,
            orphan_after: Millis(ms),
        }),
        ..config()
    };
    assert_eq!(
        with_bound(500).validate(),
        Err(ConsumerConfigError::OrphanBoundTooShort {
            orphan_after: Millis(500)
        })
    );
    assert!(
        Consumer::new(HostId::from("p"), Incarnation(0), with_bound(500)).is_err(),
        "the consumer refuses it too"
    );
    assert_eq!(with_bound(600).validate(), Ok(()));
}

/// An operator deletes a claim-checked message's dead letter: the dead letter goes,
/// then the payload in the claim store, then the head.
#[test]
fn a_claim_checked_dead_letter_deleted_through_the_consumer_takes_its_payload_with_it() {
    let (mut store, mut claims) = (Container::default(), Claims::default());
    let input = enqueue_claimed(&"x".repeat(50_000), &mut claims);
    drive(&mut client("p"), &mut store, &mut claims, at(0), input);
    let mut a = client("a");
    let got = deliveries(&drive(
        &mut a,
        &mut store,
        &mut claims,
        at(1_000),
        Input::Dequeue { max: 1 },
    ));
    let dead = Input::DeadLetter {
        delivery: got[0].handle(),
        reason: "inspect".into(),
    };
    drive(&mut a, &mut store, &mut claims, at(1_000), dead);
    let letter = dead_letters(&store, "big").pop().unwrap();
    let input = Input::DeleteDeadLetter(letter.clone());
    let out = drive(&mut a, &mut store, &mut claims, at(2_000), input);
    assert_eq!(out, [Output::DeadLetterDeleted(letter.doc.id)]);
    assert_eq!(store.iter().count(), 0, "head or dead letter left behind");
    assert!(
        claims.payloads.is_empty(),
        "payload left in the claim store"
    );
}
