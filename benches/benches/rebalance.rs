//! Simulated rebalancing end to end: scale-outs at 1,000 partitions. Prints the
//! simulated outcomes of every strategy (virtual seconds to converge, moves against
//! the minimum), then measures the simulator's wall time for `cfp` and `handoff`.
//!
//! `LEASEHOLD_BENCH_PARTITIONS` changes the partition count (default 1,000).

use criterion::{BenchmarkId, Criterion, criterion_group};
use leasehold_benches::rebalance::{SCALE_OUTS, run, scale_out};
use leasehold_engine::balance::{STRATEGY_NAMES, Strategy};

fn partitions() -> u32 {
    std::env::var("LEASEHOLD_BENCH_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}

fn table() {
    let partitions = partitions();
    println!("\nsimulated scale-outs at {partitions} partitions (seed 1)");
    println!(
        "{:<10} {:<12} {:>12} {:>10} {:>10} {:>10} {:>9} {:>8}",
        "scale-out", "strategy", "converge (s)", "vs cfp", "moves", "minimum", "dup ev", "wall (s)"
    );
    for (from, to) in SCALE_OUTS {
        let mut cfp = None;
        for name in STRATEGY_NAMES {
            let strategy = Strategy::named(name).expect("listed names parse");
            let report = match run(&scale_out(strategy, from, to, partitions, 1)) {
                Ok(report) => report,
                Err(e) => {
                    println!("{from}->{to} {name}: {e}");
                    continue;
                }
            };
            let converge = report.converge_s;
            if name == "cfp" {
                cfp = converge;
            }
            let ratio = match (converge, cfp) {
                (Some(c), Some(base)) if base > 0.0 => format!("{:.3}", c / base),
                _ => "-".into(),
            };
            println!(
                "{:<10} {:<12} {:>12} {:>10} {:>10} {:>10} {:>9} {:>8.1}",
                format!("{from}->{to}"),
                name,
                converge.map_or("never".into(), |c| format!("{c:.1}")),
                ratio,
                report.moves,
                report.min_moves,
                report.duplicate_events,
                report.wall_s,
            );
            if !report.passed() {
                println!("  violations: {:?}", report.violated_kinds());
            }
        }
    }
    println!();
}

fn wall_time(c: &mut Criterion) {
    let partitions = partitions();
    let mut group = c.benchmark_group("rebalance");
    group.sample_size(10);
    for (from, to) in SCALE_OUTS {
        for strategy in [Strategy::named("cfp"), Strategy::named("handoff")]
            .into_iter()
            .flatten()
        {
            let cfg = scale_out(strategy, from, to, partitions, 1);
            let id = BenchmarkId::new(strategy.name(), format!("{from}->{to}x{partitions}"));
            group.bench_with_input(id, &cfg, |b, cfg| {
                b.iter(|| run(cfg).expect("a valid configuration"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, wall_time);

fn main() {
    // `cargo bench -- --list` and filters still reach criterion; the table is only
    // printed on a real run.
    if !std::env::args().any(|a| a == "--list" || a == "--test") {
        table();
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
