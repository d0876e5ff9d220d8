//! The monitored source: partitions that receive events at steady rates, and the
//! handler's costs.
//!
//! Event `k` of a partition arrives at a fixed time, so the source needs no state:
//! how many events exist at any moment is a formula. That keeps 10,000 partitions
//! cheap.

use super::flags::duration;
use leasehold_engine::Millis;
use serde::{Deserialize, Serialize};

/// What the partitions receive and what processing costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Workload {
    /// Events per second each partition receives.
    pub rate: f64,
    /// The hot partition (index 0) receives `rate × hot_factor` events per second.
    pub hot_factor: f64,
    /// How long an idle handler waits before reading its partition again (CFP's
    /// feed poll delay).
    #[serde(with = "duration")]
    pub poll: Millis,
    /// The most events one batch takes.
    pub max_batch: u64,
    /// Fixed cost of one batch.
    #[serde(with = "duration")]
    pub per_batch: Millis,
    /// Cost of each event in a batch, in microseconds.
    pub per_event_us: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            rate: 1.0,
            hot_factor: 1.0,
            poll: Millis::from_secs(5),
            max_batch: 100,
            per_batch: Millis(50),
            per_event_us: 2_000,
        }
    }
}

impl Workload {
    /// How long a batch of `n` events takes.
    pub fn batch_time(&self, n: u64) -> u64 {
        self.per_batch.as_millis() + (n * self.per_event_us).div_ceil(1_000)
    }
}

/// One partition's stream of events.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feed {
    /// Events per millisecond.
    per_ms: f64,
    /// When the first event arrives.
    phase: u64,
    /// No events arrive from this time on.
    stop: u64,
}

impl Feed {
    /// A feed of `per_s` events per second starting at `phase`, ending at `stop`.
    pub fn new(per_s: f64, phase: u64, stop: u64) -> Feed {
        Feed {
            per_ms: per_s / 1_000.0,
            phase,
            stop,
        }
    }

    /// A feed that produces no events from true time `at` on (its range split).
    pub fn end_at(&mut self, at: u64) {
        self.stop = self.stop.min(at);
    }

    /// How many events have arrived by true time `t`.
    pub fn produced(&self, t: u64) -> u64 {
        let t = t.min(self.stop);
        if t < self.phase || self.per_ms <= 0.0 {
            return 0;
        }
        // Event k arrives at phase + k/rate, for k = 0, 1, ...
        ((t - self.phase) as f64 * self.per_ms).floor() as u64 + 1
    }

    /// When event `k` arrived.
    pub fn arrival(&self, k: u64) -> u64 {
        if self.per_ms <= 0.0 {
            return self.phase;
        }
        self.phase + (k as f64 / self.per_ms).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_arrive_at_their_rate_and_stop_when_the_source_stops() {
        let feed = Feed::new(2.0, 100, 10_000);
        assert_eq!(feed.produced(99), 0);
        assert_eq!(feed.produced(100), 1);
        assert_eq!(feed.produced(1_100), 3);
        assert_eq!(feed.produced(1_000_000), feed.produced(10_000));
        for k in 0..20 {
            assert!(feed.produced(feed.arrival(k)) > k);
            assert!(feed.arrival(k) == 100 || feed.produced(feed.arrival(k) - 1) <= k);
        }
    }
}
