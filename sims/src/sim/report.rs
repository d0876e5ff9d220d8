//! What a run reports: the measures operators care about, as a table or JSON.

use super::checker::{Violation, ViolationKind};
use super::config::SimConfig;
use super::world::Finished;
use leasehold_engine::lease::Purpose;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The measures of one run of one strategy. The field names are the `--json` format.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The strategy.
    pub strategy: String,
    /// The seed.
    pub seed: u64,
    /// The scenario.
    pub scenario: String,
    /// Seconds from the disturbance until the assignment was balanced for good (every
    /// partition processed by exactly one live host, loads within one); `null` if it
    /// was not balanced at the end.
    pub converge_s: Option<f64>,
    /// Times a partition started on a different host than the one before, from the
    /// disturbance on.
    pub moves: u64,
    /// The fewest moves that balance the owners at the disturbance over the hosts live
    /// at the end.
    pub min_moves: u64,
    /// The largest load difference between live hosts from the disturbance on.
    pub max_imbalance: u32,
    /// Seconds two handlers ran for one partition, summed over partitions.
    pub duplicate_s: f64,
    /// Events that took effect more than once: what new owners delivered again from
    /// the last checkpoint that landed, and what two calls at once both delivered.
    pub duplicate_events: u64,
    /// The most events the calls of one epoch of one partition delivered again: the
    /// longest replay (what a checkpoint policy trades writes for).
    #[serde(default)]
    pub max_replay_events: u64,
    /// Handler calls told their lease was lost while a batch was in flight.
    pub lost_calls: u64,
    /// Of those, calls aborted after the grace period.
    pub aborted_calls: u64,
    /// Of those, calls stuck in blocking code, which returned past the stop timeout.
    #[serde(default)]
    pub stuck_calls: u64,
    /// Batches of lost calls that finished and were refused downstream by epoch.
    pub fenced_batches: u64,
    /// Store requests per host per minute of host uptime. This and every other
    /// per-host-minute figure count only the window from the disturbance to the
    /// heal: a warm-up (a cold start) and the settling after the heal stay out.
    pub store_requests_per_host_min: f64,
    /// Estimated request units per host per minute (see `sim::cost`).
    pub ru_per_host_min: f64,
    /// Coordination's store requests per host per minute: every purpose but
    /// checkpoints (feed reads are not store requests here).
    pub protocol_requests_per_host_min: f64,
    /// Coordination's estimated request units per host per minute.
    pub protocol_ru_per_host_min: f64,
    /// Requests and request units per host per minute, by purpose (heartbeat, scan,
    /// renew, checkpoint, takeover, handoff, audit).
    pub by_purpose: BTreeMap<String, PurposeCost>,
    /// Events that took effect (with duplicates).
    pub events_processed: u64,
    /// Events the source produced.
    pub events_produced: u64,
    /// The longest an event waited between arrival and first taking effect.
    pub max_lag_s: f64,
    /// The longest a partition waited to be processed again after its host crashed
    /// or was told to shut down (from the disturbance on); `null` if none did.
    pub max_takeover_s: Option<f64>,
    /// The mean of those waits.
    pub mean_takeover_s: Option<f64>,
    /// How many partitions waited so.
    pub takeovers: u64,
    /// Of those, the longest wait after a graceful shutdown: the handover, timed
    /// from the host's stop.
    pub max_handover_s: Option<f64>,
    /// The mean handover.
    pub mean_handover_s: Option<f64>,
    /// Hosts at full strength.
    pub hosts: u32,
    /// Partitions.
    pub partitions: u32,
    /// Virtual seconds simulated.
    pub virtual_s: f64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Requests throttled (429).
    pub throttled: u64,
    /// Requests answered with a timeout (outcome unknown).
    pub timeouts: u64,
    /// Violations found (the first 20), empty when every property held.
    pub violations: Vec<Violation>,
    /// Violations by kind, all of them.
    pub violation_counts: BTreeMap<String, u64>,
    /// A hash of the whole trace: the same seed and settings give the same hash.
    pub trace_hash: String,
    /// Simulator events handled.
    pub steps: u64,
    /// Wall-clock seconds the run took (not deterministic; for performance only).
    pub wall_s: f64,
}

/// One purpose's share of the store traffic.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PurposeCost {
    /// Store requests per host per minute.
    pub requests_per_host_min: f64,
    /// Estimated request units per host per minute.
    pub ru_per_host_min: f64,
}

/// The sum over coordination's purposes of `measure`.
fn protocol(finished: &Finished, measure: impl Fn(&(u64, f64)) -> f64) -> f64 {
    finished
        .by_purpose
        .iter()
        .filter(|(p, _)| p.is_protocol())
        .map(|(_, v)| measure(v))
        .sum()
}

impl RunReport {
    /// The report of `finished`, a run of `cfg` that took `wall_s` seconds.
    pub fn new(cfg: &SimConfig, finished: &Finished, wall_s: f64) -> RunReport {
        let c = &finished.checker;
        let host_min = (finished.host_up_ms as f64 / 60_000.0).max(1e-9);
        RunReport {
            strategy: cfg.label(),
            seed: cfg.seed,
            scenario: cfg.scenario.name().to_string(),
            converge_s: c.converge_s(),
            moves: c.moves,
            min_moves: c.min_moves(),
            max_imbalance: c.max_imbalance,
            duplicate_s: c.duplicate_ms as f64 / 1_000.0,
            duplicate_events: c.duplicate_events,
            max_replay_events: c.max_replay,
            lost_calls: c.lost_calls,
            aborted_calls: c.aborted_calls,
            stuck_calls: c.stuck_calls,
            fenced_batches: c.fenced_batches,
            store_requests_per_host_min: round2(finished.requests as f64 / host_min),
            ru_per_host_min: round2(finished.ru / host_min),
            protocol_requests_per_host_min: round2(
                protocol(finished, |(n, _)| *n as f64) / host_min,
            ),
            protocol_ru_per_host_min: round2(protocol(finished, |(_, ru)| *ru) / host_min),
            by_purpose: Purpose::ALL
                .iter()
                .map(|p| {
                    let (n, ru) = finished.by_purpose.get(p).copied().unwrap_or_default();
                    let cost = PurposeCost {
                        requests_per_host_min: round2(n as f64 / host_min),
                        ru_per_host_min: round2(ru / host_min),
                    };
                    (p.name().to_string(), cost)
                })
                .collect(),
            events_processed: c.events_processed,
            events_produced: finished.events_produced,
            max_lag_s: c.max_lag_ms as f64 / 1_000.0,
            max_takeover_s: (c.takeovers.count > 0).then(|| c.takeovers.max_ms as f64 / 1_000.0),
            mean_takeover_s: c.takeovers.mean_s().map(round2),
            takeovers: c.takeovers.count,
            max_handover_s: (c.handovers.count > 0).then(|| c.handovers.max_ms as f64 / 1_000.0),
            mean_handover_s: c.handovers.mean_s().map(round2),
            hosts: cfg.hosts,
            partitions: cfg.partitions,
            virtual_s: finished.end as f64 / 1_000.0,
            faults: finished
                .faults
                .iter()
                .map(|(k, n)| (k.name().to_string(), *n))
                .collect(),
            throttled: finished.throttled,
            timeouts: finished.timeouts,
            violations: c.violations().to_vec(),
            violation_counts: c
                .violation_counts()
                .into_iter()
                .map(|(k, n)| (k.name().to_string(), n))
                .collect(),
            trace_hash: format!("{:016x}", finished.trace_hash),
            steps: finished.steps,
            wall_s: round2(wall_s),
        }
    }

    /// Whether every property held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The kinds of the violations found.
    pub fn violated_kinds(&self) -> Vec<ViolationKind> {
        let mut kinds: Vec<ViolationKind> = self.violations.iter().map(|v| v.kind).collect();
        kinds.dedup();
        kinds
    }
}

/// The violations a report keeps, one per line, and how many more it counted but
/// left out (a run keeps the first 20).
pub fn violation_lines(kept: &[Violation], counted: u64) -> String {
    let mut out = String::new();
    for v in kept {
        let _ = writeln!(out, "  {} at {:.3} s: {}", v.kind, v.at_s, v.detail);
    }
    let more = counted.saturating_sub(kept.len() as u64);
    if more > 0 {
        let _ = writeln!(out, "  … and {more} more");
    }
    out
}

/// `x` to two decimals, as every report's JSON gives its figures.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The runs of one seed, one per strategy, side by side.
/// Each column is as wide as its widest figure, plus a gap, so figures never run
/// together.
pub fn table(reports: &[RunReport]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, cell: &dyn Fn(&RunReport) -> String| {
        rows.push((name.to_string(), reports.iter().map(cell).collect()));
    };
    row("", &|r| r.strategy.clone());
    row("converge (s)", &|r| {
        r.converge_s
            .map_or("never".to_string(), |s| format!("{s:.1}"))
    });
    row("moves / minimum", &|r| {
        format!("{} / {}", r.moves, r.min_moves)
    });
    row("max imbalance", &|r| r.max_imbalance.to_string());
    row("duplicate processing (s)", &|r| {
        format!("{:.1}", r.duplicate_s)
    });
    row("replayed events (longest replay)", &|r| {
        format!("{} ({})", r.duplicate_events, r.max_replay_events)
    });
    row("lost calls (aborted, fenced)", &|r| {
        format!(
            "{} ({}, {})",
            r.lost_calls, r.aborted_calls, r.fenced_batches
        )
    });
    row("store requests / host / min", &|r| {
        format!("{:.1}", r.store_requests_per_host_min)
    });
    row("RU / host / min (estimated)", &|r| {
        format!("{:.1}", r.ru_per_host_min)
    });
    row("protocol RU / host / min", &|r| {
        format!("{:.1}", r.protocol_ru_per_host_min)
    });
    // Coordination's purposes under the protocol total they sum to; the rest (the
    // checkpoints) beside it, not indented under a total that leaves them out.
    let purposes = Purpose::ALL
        .iter()
        .filter(|p| p.is_protocol())
        .chain(Purpose::ALL.iter().filter(|p| !p.is_protocol()));
    for purpose in purposes {
        let name = purpose.name();
        let indent = if purpose.is_protocol() { "  " } else { "" };
        row(&format!("{indent}{name} RU / host / min"), &|r| {
            r.by_purpose
                .get(name)
                .map_or("-".into(), |c| format!("{:.1}", c.ru_per_host_min))
        });
    }
    row("events processed / produced", &|r| {
        format!("{} / {}", r.events_processed, r.events_produced)
    });
    row("max lag (s)", &|r| format!("{:.1}", r.max_lag_s));
    let seconds = |s: Option<f64>| s.map_or("-".to_string(), |s| format!("{s:.1}"));
    row("longest / mean takeover (s)", &|r| {
        format!(
            "{} / {}",
            seconds(r.max_takeover_s),
            seconds(r.mean_takeover_s)
        )
    });
    row("longest / mean handover (s)", &|r| {
        format!(
            "{} / {}",
            seconds(r.max_handover_s),
            seconds(r.mean_handover_s)
        )
    });
    row("throttled / timeouts", &|r| {
        format!("{} / {}", r.throttled, r.timeouts)
    });
    row("violations", &|r| {
        let n: u64 = r.violation_counts.values().sum();
        if n == 0 { "none".into() } else { n.to_string() }
    });
    row("wall time (s)", &|r| format!("{:.2}", r.wall_s));
    let name_width = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let widths: Vec<usize> = (0..reports.len())
        .map(|i| {
            let widest = rows.iter().map(|(_, c)| c[i].chars().count()).max();
            (widest.unwrap_or(0) + 2).max(16)
        })
        .collect();
    let mut out = String::new();
    for (name, cells) in rows {
        let _ = write!(out, "{name:<name_width$}");
        for (cell, width) in cells.iter().zip(&widths) {
            let _ = write!(out, "{cell:>width$}");
        }
        out.push('\n');
    }
    out
}
