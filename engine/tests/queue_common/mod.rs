//! What the queue tests share: a consumer's settings, a driver that serves every
//! request at once, and readers of the store.
#![allow(dead_code)]

use leasehold_engine::lock::LockPolicy;
use leasehold_engine::queue::{
    Consumer, ConsumerConfig, Delivery, Input, Message, MessageName, Output, QueueError, QueueName,
};
use leasehold_engine::store::Container;
use leasehold_engine::{
    Drift, HostId, Incarnation, LocalTime, Millis, Now, PartitionKey, WallTime,
};

pub const BASE: i64 = 1_700_000_000_000;

pub fn config() -> ConsumerConfig {
    ConsumerConfig {
        lock_duration: Millis::from_secs(10),
        policy: LockPolicy {
            drift: Drift::ppm(10_000),
            safety_margin: Millis(500),
            ..LockPolicy::default()
        },
        max_dequeue_count: 3,
        ..ConsumerConfig::new(QueueName::new("work").unwrap())
    }
}

pub fn consumer(name: &str) -> Consumer {
    Consumer::new(HostId::from(name), Incarnation(0), config()).unwrap()
}

pub fn at(ms: u64) -> Now {
    Now::new(LocalTime(ms), WallTime(BASE + ms as i64))
}

/// Feeds `input` and serves every request at once; returns the other outputs.
pub fn run(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: Now,
    input: Input,
) -> Vec<Output> {
    let mut inputs = std::collections::VecDeque::from([input]);
    let mut seen = Vec::new();
    while let Some(input) = inputs.pop_front() {
        c.handle_input(now, input).unwrap();
        while let Some(out) = c.poll_output() {
            match out {
                Output::Request(req) => inputs.push_back(Input::Response {
                    id: req.id,
                    result: store.execute(req.op),
                }),
                other => seen.push(other),
            }
        }
    }
    seen
}

/// As [`run`], but `input` may be refused: the refusal is returned, and nothing is
/// served.
pub fn try_run(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: Now,
    input: Input,
) -> Result<Vec<Output>, QueueError> {
    c.handle_input(now, input)?;
    let mut seen = Vec::new();
    while let Some(out) = c.poll_output() {
        match out {
            Output::Request(req) => {
                let answer = Input::Response {
                    id: req.id,
                    result: store.execute(req.op),
                };
                seen.extend(run(c, store, now, answer));
            }
            other => seen.push(other),
        }
    }
    Ok(seen)
}

pub fn name(s: &str) -> MessageName {
    MessageName::new(s).unwrap()
}

pub fn enqueue(store: &mut Container<Message>, msg: &str, now: Now, delay: Millis) {
    let mut producer = consumer("producer");
    let input = Input::Enqueue {
        name: name(msg),
        payload: format!("payload of {msg}"),
        delay,
    };
    let out = run(&mut producer, store, now, input);
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

pub fn deliveries(out: &[Output]) -> Vec<Delivery> {
    out.iter()
        .filter_map(|o| match o {
            Output::Delivered(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

/// Whether `out` is an enqueue refused, and only that, because its part set was swept.
pub fn refused_as_swept(out: &[Output]) -> bool {
    matches!(
        out,
        [Output::Failed {
            error: QueueError::PartsSwept(_),
            ..
        }]
    )
}

pub fn stored(store: &Container<Message>, msg: &str) -> Option<Message> {
    let id = Message::id_for(&QueueName::new("work").unwrap(), &name(msg));
    store
        .read(&PartitionKey::from("work"), &id)
        .ok()
        .map(|s| s.doc)
}

/// The dead letters made of message `msg`.
pub fn dead_letters(
    store: &Container<Message>,
    msg: &str,
) -> Vec<leasehold_engine::store::Stored<Message>> {
    store
        .iter()
        .filter(|s| s.doc.is_dead_lettered() && s.doc.name.as_str() == msg)
        .cloned()
        .collect()
}

/// What one dequeue sent and got.
pub struct Observed {
    /// Reads sent.
    pub reads: usize,
    /// Documents the reads returned.
    pub documents: usize,
    /// The names delivered.
    pub delivered: Vec<String>,
}

/// Runs one dequeue of `max` at `now`, serving each request after `tamper` has had
/// it (the known-bad siblings change the reads there).
pub fn observe(
    c: &mut Consumer,
    store: &mut Container<Message>,
    now: Now,
    max: usize,
    tamper: impl Fn(&mut leasehold_engine::store::Op<Message>),
) -> Observed {
    use leasehold_engine::store::Reply;
    let mut inputs = std::collections::VecDeque::from([Input::Dequeue { max }]);
    let mut seen = Observed {
        reads: 0,
        documents: 0,
        delivered: Vec::new(),
    };
    while let Some(input) = inputs.pop_front() {
        c.handle_input(now, input).unwrap();
        while let Some(out) = c.poll_output() {
            match out {
                Output::Request(mut req) => {
                    tamper(&mut req.op);
                    seen.reads += usize::from(!req.op.is_write());
                    let result = store.execute(req.op);
                    if let Ok(Reply::Query(found)) = &result {
                        seen.documents += found.len();
                    }
                    inputs.push_back(Input::Response { id: req.id, result });
                }
                Output::Delivered(d) => seen.delivered.push(d.name.to_string()),
                _ => {}
            }
        }
    }
    seen
}
