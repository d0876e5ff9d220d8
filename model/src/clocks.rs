//! The clocks of modelled processes: each runs slow or fast by the drift bound for
//! the whole run, and each wall clock is off true time by a fixed number of ticks.

use leasehold_engine::{LocalTime, Now, WallTime};

/// One tick of true time, in milliseconds.
pub const TICK_MS: u64 = 1_000;

/// A host clock's rate against true time, fixed for the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rate {
    /// Loses the drift bound every tick.
    Slow,
    /// Keeps true time.
    Exact,
    /// Gains the drift bound every tick.
    Fast,
}

/// The wall clock of true time 0.
pub const WALL_BASE: i64 = 1_700_000_000_000;

/// A process's clocks at true time `time`.
pub fn now(drift_ms: u16, rate: Rate, wall_offset: i8, time: u8) -> Now {
    let tick = i64::from(drift_ms);
    let per_tick = TICK_MS as i64
        + match rate {
            Rate::Slow => -tick,
            Rate::Exact => 0,
            Rate::Fast => tick,
        };
    let local = u64::try_from(per_tick * i64::from(time)).unwrap_or(0);
    let wall = WALL_BASE + (i64::from(time) + i64::from(wall_offset)) * TICK_MS as i64;
    Now::new(LocalTime(local), WallTime(wall))
}

/// The clock set-ups to explore for `count` processes: every rate is slow or fast
/// (the extremes of the drift bound), and every wall clock but the first is off by up
/// to `skew` either way (only differences between wall clocks matter).
pub fn setups(count: u8, drift_ms: u16, skew: u8) -> Vec<Vec<(Rate, i8)>> {
    let rates: &[Rate] = if drift_ms == 0 {
        &[Rate::Exact]
    } else {
        &[Rate::Slow, Rate::Fast]
    };
    let skew = i8::try_from(skew).unwrap_or(0);
    let mut setups: Vec<Vec<(Rate, i8)>> = vec![vec![]];
    for p in 0..count {
        let offsets: Vec<i8> = if p == 0 {
            vec![0]
        } else {
            (-skew..=skew).collect()
        };
        let mut next = Vec::new();
        for setup in &setups {
            for &rate in rates {
                for &offset in &offsets {
                    let mut s = setup.clone();
                    s.push((rate, offset));
                    next.push(s);
                }
            }
        }
        setups = next;
    }
    setups
}
