//! Time as the engine sees it: handed in by the driver, never read from a clock.
//!
//! Two clocks matter. A host's *local* monotonic clock measures how long it has
//! waited; it may run slightly fast or slow (drift) but never jumps. The *wall* clock
//! is what a host writes into CFP's `timestamp` field; different hosts' wall clocks
//! may disagree by an arbitrary offset (skew).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A duration in whole milliseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// No time at all.
    pub const ZERO: Millis = Millis(0);

    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Millis {
        Millis(n * 1000)
    }

    /// The duration in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self - other`, or zero if `other` is larger.
    pub fn saturating_sub(self, other: Millis) -> Millis {
        Millis(self.0.saturating_sub(other.0))
    }
}

impl From<Duration> for Millis {
    fn from(value: Duration) -> Self {
        Millis(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }
}

impl From<Millis> for Duration {
    fn from(value: Millis) -> Self {
        Duration::from_millis(value.0)
    }
}

impl Add for Millis {
    type Output = Millis;
    fn add(self, rhs: Millis) -> Millis {
        Millis(self.0.saturating_add(rhs.0))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}s", self.0 / 1000)
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}

/// A reading of one host's local monotonic clock, in milliseconds since an arbitrary
/// origin. Readings of different hosts are not comparable.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct LocalTime(pub u64);

impl LocalTime {
    /// The clock's origin.
    pub const ZERO: LocalTime = LocalTime(0);

    /// A reading `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> LocalTime {
        LocalTime(ms)
    }

    /// Milliseconds since the origin.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// How long after `earlier` this reading is, or zero if it is not after it.
    pub fn since(self, earlier: LocalTime) -> Millis {
        Millis(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Millis> for LocalTime {
    type Output = LocalTime;
    fn add(self, rhs: Millis) -> LocalTime {
        LocalTime(self.0.saturating_add(rhs.0))
    }
}

impl Sub<Millis> for LocalTime {
    type Output = LocalTime;
    fn sub(self, rhs: Millis) -> LocalTime {
        LocalTime(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for LocalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// A wall-clock reading: milliseconds since the Unix epoch, UTC, as one host's clock
/// says. Only used where CFP compatibility needs it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct WallTime(pub i64);

impl WallTime {
    /// A reading `ms` milliseconds after the Unix epoch.
    pub const fn from_unix_millis(ms: i64) -> WallTime {
        WallTime(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_unix_millis(self) -> i64 {
        self.0
    }
}

impl Add<Millis> for WallTime {
    type Output = WallTime;
    fn add(self, rhs: Millis) -> WallTime {
        WallTime(
            self.0
                .saturating_add(i64::try_from(rhs.0).unwrap_or(i64::MAX)),
        )
    }
}

/// Both clocks of one host, read at the same moment. Every input to a state machine
/// carries one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Now {
    /// The host's monotonic clock.
    pub local: LocalTime,
    /// The host's wall clock.
    pub wall: WallTime,
}

impl Now {
    /// A reading of both clocks.
    pub const fn new(local: LocalTime, wall: WallTime) -> Now {
        Now { local, wall }
    }
}

/// A bound on how fast or slow any host's monotonic clock may run against true time,
/// in parts per million. `Drift::ppm(10_000)` means "within 1%".
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Drift(u32);

impl Drift {
    /// One million parts per million: a clock that may stand still.
    pub const MAX_PPM: u32 = 1_000_000;

    /// A drift bound of `ppm` parts per million.
    pub const fn ppm(ppm: u32) -> Drift {
        Drift(ppm)
    }

    /// The bound in parts per million.
    pub const fn as_ppm(self) -> u32 {
        self.0
    }

    /// `d × drift`, rounded up: how much a clock may gain or lose over `d`.
    pub fn allowance(self, d: Millis) -> Millis {
        let scaled = u128::from(d.0) * u128::from(self.0);
        let up = scaled.div_ceil(u128::from(Self::MAX_PPM));
        Millis(u64::try_from(up).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ppm", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drift_allowance_rounds_against_the_holder() {
        assert_eq!(
            Drift::ppm(10_000).allowance(Millis::from_secs(60)),
            Millis(600)
        );
        // 1 ms at 1 ppm still costs a whole millisecond: rounding never favours the holder.
        assert_eq!(Drift::ppm(1).allowance(Millis(1)), Millis(1));
        assert_eq!(Drift::ppm(0).allowance(Millis(5000)), Millis::ZERO);
    }

    #[test]
    fn local_time_never_goes_below_its_origin() {
        assert_eq!(LocalTime(5) - Millis(10), LocalTime::ZERO);
        assert_eq!(LocalTime(5).since(LocalTime(9)), Millis::ZERO);
    }

    #[test]
    fn millis_print_as_seconds_when_whole() {
        assert_eq!(Millis::from_secs(13).to_string(), "13s");
        assert_eq!(Millis(1500).to_string(), "1500ms");
    }
}
