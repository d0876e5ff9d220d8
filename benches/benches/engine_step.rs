//! Engine step throughput: inputs handled per second by one host that owns 1,000
//! leases, with CFP's intervals and a checkpoint from every lease each 5 s.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use leasehold_benches::lone_host::LoneHost;
use leasehold_engine::Millis;

fn step(c: &mut Criterion) {
    let owner = LoneHost::owning(1_000);
    assert_eq!(owner.processing(), 1_000, "the host must own every lease");
    let span = Millis::from_secs(60);
    let every = Millis::from_secs(5);
    // Count the inputs of one span once, so criterion reports inputs per second.
    let mut probe = owner.clone();
    let before = probe.inputs();
    probe.run_for(span, every);
    let inputs = probe.inputs() - before;
    println!("one virtual minute of a host owning 1,000 leases: {inputs} engine inputs");

    let mut group = c.benchmark_group("engine_step");
    group.throughput(Throughput::Elements(inputs));
    group.sample_size(20);
    group.bench_function("owner_of_1000_leases/1_virtual_min", |b| {
        b.iter_batched(
            || owner.clone(),
            |mut host| {
                host.run_for(span, every);
                host
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
