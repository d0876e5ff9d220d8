//! Reference store throughput: replace-if-match and read-all on a container of 1,000
//! lease documents.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use leasehold_engine::lease::{LeaseDocument, Record};
use leasehold_engine::store::Container;
use leasehold_engine::{Checkpoint, LeaseToken, WallTime};
use std::hint::black_box;

const LEASES: usize = 1_000;

fn container() -> Container<Record> {
    let mut store = Container::new();
    for p in 0..LEASES {
        let doc = LeaseDocument::new("bench", LeaseToken::from(format!("{p:05}")), WallTime(0));
        store.create(Record::Lease(doc)).expect("distinct ids");
    }
    store
}

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("store");
    group.throughput(Throughput::Elements(1));

    let mut store = container();
    let mut current: Vec<_> = store.read_all("bench");
    let mut round = 0u64;
    group.bench_function("replace_if_match", |b| {
        b.iter(|| {
            let i = (round as usize) % LEASES;
            round += 1;
            let stored = &mut current[i];
            let Record::Lease(mut doc) = stored.doc.clone() else {
                unreachable!("the container holds only leases")
            };
            doc.checkpoint = Some(Checkpoint::from(round.to_string()));
            let etag = store
                .replace(Record::Lease(doc.clone()), Some(&stored.etag))
                .expect("the etag is current");
            stored.doc = Record::Lease(doc);
            stored.etag = etag;
        })
    });

    let store = container();
    group.throughput(Throughput::Elements(LEASES as u64));
    group.bench_function("read_all_1000", |b| {
        b.iter(|| black_box(store.read_all(black_box("bench"))))
    });
    group.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
