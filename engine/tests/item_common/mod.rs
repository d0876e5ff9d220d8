//! What the item-lease tests share: a leaser's settings (leases of 10 s, drift 1 %,
//! margin 0.5 s), one item `tp-1`, and a driver that serves every request at once.
#![allow(dead_code)]

use leasehold_engine::item_lease::{
    Input, Item, ItemError, ItemHandle, ItemKey, ItemKnownBad, ItemState, Leaser, LeaserConfig,
    Output,
};
use leasehold_engine::lock::LockPolicy;
use leasehold_engine::store::Container;
use leasehold_engine::{
    DocId, Drift, HostId, Incarnation, LocalTime, Millis, Now, PartitionKey, WallTime,
};
use std::collections::VecDeque;

/// Leaser `a`, life 0, with `known_bad` switched on.
pub fn leaser(known_bad: Option<ItemKnownBad>) -> Leaser {
    leaser_in_life(0, known_bad)
}

/// Leaser `a` in life `life`.
pub fn leaser_in_life(life: u64, known_bad: Option<ItemKnownBad>) -> Leaser {
    let config = LeaserConfig {
        policy: LockPolicy {
            drift: Drift::ppm(10_000),
            safety_margin: Millis(500),
            ..LockPolicy::default()
        },
        known_bad,
        ..LeaserConfig::new("tp-")
    };
    Leaser::new(HostId::from("a"), Incarnation(life), config)
}

pub fn at(ms: u64) -> Now {
    Now::new(LocalTime(ms), WallTime(1_700_000_000_000 + ms as i64))
}

pub fn key() -> ItemKey {
    ItemKey {
        pk: PartitionKey::from("tp-1"),
        id: DocId::from("tp-1"),
    }
}

/// A store holding `tp-1`, unleased, in `REQUESTED`.
pub fn store() -> Container<Item> {
    let mut store = Container::new();
    let item = Item::new(
        DocId::from("tp-1"),
        PartitionKey::from("tp-1"),
        ItemState::from("REQUESTED"),
        WallTime(0),
    );
    store.create(item).unwrap();
    store
}

/// `tp-1` as stored.
pub fn stored(store: &Container<Item>) -> Item {
    store
        .read(&PartitionKey::from("tp-1"), &DocId::from("tp-1"))
        .unwrap()
        .doc
}

pub fn acquire() -> Input {
    Input::Acquire {
        item: key(),
        duration: Millis::from_secs(10),
    }
}

/// Feeds `input` and serves every request at once; its refusal, or what it said.
pub fn try_run(
    l: &mut Leaser,
    store: &mut Container<Item>,
    now: Now,
    input: Input,
) -> Result<Vec<Output>, ItemError> {
    let mut inputs = VecDeque::from([input]);
    let mut seen = Vec::new();
    while let Some(input) = inputs.pop_front() {
        l.handle_input(now, input)?;
        while let Some(out) = l.poll_output() {
            match out {
                Output::Request(req) => inputs.push_back(Input::Response {
                    id: req.id,
                    result: store.execute(req.op),
                }),
                other => seen.push(other),
            }
        }
    }
    Ok(seen)
}

/// The lease an acquire's outputs grant.
pub fn granted(out: &[Output]) -> ItemHandle {
    match out {
        [Output::Acquired(grant)] => grant.handle(),
        other => panic!("no Acquired output: {other:?}"),
    }
}

/// Whether `out` is one failure: the lease was lost.
pub fn lock_lost(out: &[Output]) -> bool {
    matches!(
        out,
        [Output::Failed {
            error: ItemError::LockLost,
            ..
        }]
    )
}
