//! The clocks the drivers hand to the engine, which never reads one itself.

use leasehold_engine::{Incarnation, LocalTime, Now, WallTime};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// A host's two clocks: monotonic local time since the clock was made (tokio's
/// `Instant`, so a paused tokio clock pauses it too), and a wall clock.
///
/// ```
/// use leasehold_adapters::Clock;
/// use leasehold_engine::WallTime;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = Clock::following_tokio(WallTime(1_700_000_000_000));
/// tokio::time::sleep(std::time::Duration::from_secs(5)).await;
/// assert_eq!(clock.now().wall, WallTime(1_700_000_005_000));
/// assert_eq!(clock.now().local.as_millis(), 5_000);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: Instant,
    wall: Wall,
}

#[derive(Clone, Copy, Debug)]
enum Wall {
    System,
    Following(WallTime),
}

impl Clock {
    /// The system's wall clock; what production uses.
    pub fn system() -> Clock {
        Clock {
            origin: Instant::now(),
            wall: Wall::System,
        }
    }

    /// A wall clock that starts at `start` and advances with tokio's clock, so that
    /// tests on a paused tokio clock see visibility delays and lease ages pass without
    /// reading the machine's clock.
    pub fn following_tokio(start: WallTime) -> Clock {
        Clock {
            origin: Instant::now(),
            wall: Wall::Following(start),
        }
    }

    /// Both clocks now.
    pub fn now(&self) -> Now {
        let elapsed = self.origin.elapsed();
        let local = LocalTime(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
        let wall = match self.wall {
            Wall::System => system_wall(),
            Wall::Following(start) => {
                WallTime(start.0 + i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX / 2))
            }
        };
        Now::new(local, wall)
    }

    /// The tokio instant at which local time `at` arrives.
    pub fn instant_of(&self, at: LocalTime) -> Instant {
        self.origin + Duration::from_millis(at.as_millis())
    }
}

fn system_wall() -> WallTime {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    WallTime(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// A new life of a process: it must differ from every earlier life with the same
/// name, and the system clock in microseconds does, short of two starts in the same
/// microsecond.
pub(crate) fn fresh_incarnation() -> Incarnation {
    Incarnation(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
    )
}
