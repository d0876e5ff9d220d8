//! Model-checking throughput: states per second on one fixed configuration of the
//! partition model (`Bounds::default()`), depth first on one thread, over the first
//! 200,000 states.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use leasehold_model::check::{Options, Search, check};
use leasehold_model::{Bounds, PartitionModel};
use std::time::Duration;

fn states_per_second(c: &mut Criterion) {
    let model = PartitionModel::new(Bounds::default()).expect("the default bounds are valid");
    let options = Options {
        search: Search::Dfs,
        threads: 1,
        // A fixed prefix of the depth-first exploration (one thread explores in the
        // same order every time), so that a sample takes seconds, not minutes.
        max_states: Some(200_000),
        ..Options::default()
    };
    let explore = || check(&model, &options, Duration::from_millis(20), |_| {});
    let states = explore().progress.states as u64;
    println!("partition model, default bounds: {states} states per complete check");

    let mut group = c.benchmark_group("model_check");
    group.sample_size(10);
    group.throughput(Throughput::Elements(states));
    group.bench_function("partitions/default_bounds/dfs_1_thread", |b| {
        b.iter(explore)
    });
    group.finish();
}

criterion_group!(benches, states_per_second);
criterion_main!(benches);
