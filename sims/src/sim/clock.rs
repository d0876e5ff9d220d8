//! Host clocks: a monotonic clock that drifts, and a wall clock that is offset and
//! may be stepped. True time is the simulator's; no host ever reads it.

use leasehold_engine::{LocalTime, Now, WallTime};

/// 2023-11-14T22:13:20Z: wall clocks start here, so that timestamps look like real ones.
pub const WALL_BASE: i64 = 1_700_000_000_000;

const PPM: i128 = 1_000_000;

/// One life of a host's clocks. The monotonic clock starts at zero at boot and runs
/// `drift_ppm` parts per million fast (or slow, if negative).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostClock {
    /// True time of boot, in milliseconds.
    pub boot: u64,
    /// How fast the monotonic clock runs against true time.
    pub drift_ppm: i32,
    /// How far the wall clock is from true time, in milliseconds.
    pub offset_ms: i64,
}

impl HostClock {
    /// The monotonic reading at true time `t` (never before boot).
    pub fn local(&self, t: u64) -> LocalTime {
        let elapsed = i128::from(t.saturating_sub(self.boot));
        let scaled = elapsed * (PPM + i128::from(self.drift_ppm)) / PPM;
        LocalTime(u64::try_from(scaled).unwrap_or(0))
    }

    /// The earliest true time at which the monotonic clock reads at least `local`.
    pub fn true_at(&self, local: LocalTime) -> u64 {
        let rate = PPM + i128::from(self.drift_ppm);
        let elapsed = (i128::from(local.0) * PPM + rate - 1) / rate;
        let mut t = self.boot + u64::try_from(elapsed).unwrap_or(u64::MAX / 4);
        // Integer rounding may leave the reading one short; step until it is reached.
        while self.local(t) < local {
            t += 1;
        }
        t
    }

    /// The wall-clock reading at true time `t`.
    pub fn wall(&self, t: u64) -> WallTime {
        let t = i64::try_from(t).unwrap_or(i64::MAX / 2);
        WallTime(WALL_BASE + t + self.offset_ms)
    }

    /// Both readings at true time `t`, as an engine input carries them.
    pub fn now(&self, t: u64) -> Now {
        Now::new(self.local(t), self.wall(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_clock_reaches_a_deadline_early_in_true_time() {
        let clock = HostClock {
            boot: 1_000,
            drift_ppm: 10_000,
            offset_ms: -500,
        };
        assert_eq!(clock.local(1_000), LocalTime(0));
        assert_eq!(clock.local(101_000), LocalTime(101_000));
        let t = clock.true_at(LocalTime(60_000));
        assert!(clock.local(t) >= LocalTime(60_000));
        assert!(clock.local(t - 1) < LocalTime(60_000));
        assert!(t < 61_000);
        assert_eq!(clock.wall(1_000), WallTime(WALL_BASE + 500));
    }

    #[test]
    fn a_slow_clock_inverts_exactly_too() {
        let clock = HostClock {
            boot: 7,
            drift_ppm: -9_999,
            offset_ms: 0,
        };
        for local in [0, 1, 999, 41_003, 3_600_000] {
            let t = clock.true_at(LocalTime(local));
            assert!(clock.local(t) >= LocalTime(local));
            assert!(t == clock.boot || clock.local(t - 1) < LocalTime(local));
        }
    }
}
