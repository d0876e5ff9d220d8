//! Balancing decision time: one host plans on a whole lease table.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use leasehold_engine::HostId;
use leasehold_engine::balance::{STRATEGY_NAMES, Strategy};
use std::hint::black_box;

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("balance");
    for (partitions, hosts) in [(100, 10), (10_000, 100), (100_000, 1_000)] {
        for (state, owners, members) in [("steady", hosts, hosts), ("scale-out", hosts / 2, hosts)]
        {
            let view = leasehold_benches::table(partitions, owners, members);
            // The newest host plans: after a scale-out it owns nothing yet.
            let me = HostId::from(format!("host-{}", hosts - 1));
            for strategy in STRATEGY_NAMES
                .iter()
                .filter_map(|name| Strategy::named(name))
            {
                let id = BenchmarkId::new(
                    format!("{}/{state}", strategy.name()),
                    format!("{partitions}x{hosts}"),
                );
                group.bench_with_input(id, &view, |b, view| {
                    b.iter(|| black_box(strategy.plan(black_box(view), &me)))
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
