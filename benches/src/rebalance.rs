//! Scale-out runs of the simulator at benchmark sizes, shared by the criterion
//! benchmark and the printed table of simulated outcomes.

use leasehold_engine::Millis;
use leasehold_engine::balance::Strategy;
use leasehold_sims::sim::{RunReport, Scenario, SimConfig, SimError, simulate};

/// The scale-outs the benchmarks run: from how many hosts to how many.
pub const SCALE_OUTS: [(u32, u32); 2] = [(1, 10), (10, 20)];

/// A scale-out from `from` to `to` hosts over `partitions` leases, with a light
/// workload so that the run measures rebalancing rather than event handling: one event
/// per partition every 100 s, handlers polling every 60 s.
///
/// The warm-up lets the first hosts settle before the newcomers join: 60 s for one
/// host (every strategy but Event Hubs' balanced mode takes all free leases in one
/// cycle), 25 min for several (CFP and KCL steal one lease per cycle), and for
/// `eh-balanced`, which claims one lease per cycle, long enough for that.
///
/// ```
/// use leasehold_engine::balance::Strategy;
/// let cfg = leasehold_benches::rebalance::scale_out(Strategy::Handoff, 1, 10, 1_000, 1);
/// assert_eq!((cfg.from, cfg.hosts, cfg.partitions), (1, 10, 1_000));
/// ```
pub fn scale_out(strategy: Strategy, from: u32, to: u32, partitions: u32, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::scenario(Scenario::ScaleOut, seed);
    cfg.strategy = strategy;
    cfg.from = from;
    cfg.hosts = to;
    cfg.partitions = partitions;
    cfg.workload.rate = 0.01;
    cfg.workload.poll = Millis::from_secs(60);
    let mut warmup = if from == 1 { 60 } else { 1_500 };
    if strategy == Strategy::EventHubsBalanced {
        let per_host = u64::from(partitions.div_ceil(from));
        warmup = warmup.max(per_host * cfg.acquire.as_millis() / 1_000 * 6 / 5 + 60);
    }
    cfg.warmup = Millis::from_secs(warmup);
    cfg
}

/// Runs `cfg` and returns its report.
pub fn run(cfg: &SimConfig) -> Result<RunReport, SimError> {
    simulate(cfg, false).map(|run| run.report)
}
