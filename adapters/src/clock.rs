//! The clocks the drivers hand to the engine, which never reads one itself.

use leasehold_engine::{Incarnation, LocalTime, Now, WallTime};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// A host's two clocks: monotonic local time since the clock was made, and a wall
/// clock.
///
/// Local time is tokio's clock plus the time the machine spent suspended (a VM saved
/// and restored, a laptop asleep). tokio's clock, like `Instant`, stops during a
/// suspend on Linux and Apple systems: a holder that woke up would believe itself
/// within an authority that ran out while it slept. The suspend is what a clock that
/// counts it (`CLOCK_BOOTTIME` on Linux and Android, `CLOCK_MONOTONIC` on Apple
/// systems) gained over `Instant`; both are the machine's, so on a paused tokio clock
/// (tests) local time is tokio's alone. On Windows `Instant` itself counts a suspend
/// (it reads `QueryPerformanceCounter`, which Microsoft documents as counting sleep,
/// standby and hibernation; rust-lang/rust#79462), so nothing is added there. On other
/// platforms no suspend is counted. Timers still
/// run on tokio's clock: [`instant_of`](Self::instant_of) maps a local time to a tokio
/// instant afresh at each call.
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
#[derive(Clone, Debug)]
pub struct Clock {
    origin: Instant,
    /// The suspend counted so far, in ms: it only grows, so local time never goes
    /// back when two readings of the machine's clocks jitter.
    slept: Arc<AtomicU64>,
    suspend: Suspend,
    wall: Wall,
}

#[derive(Clone, Copy, Debug)]
enum Suspend {
    /// None counted but what a test plays ([`Clock::suspend`]).
    Played,
    /// The clock that counts suspend and `Instant`, read at the clock's making.
    Measured(Duration, std::time::Instant),
}

#[derive(Clone, Copy, Debug)]
enum Wall {
    System,
    Following(WallTime),
}

impl Clock {
    /// The system's clocks; what production uses. Local time counts suspend where the
    /// platform has such a clock.
    pub fn system() -> Clock {
        Clock {
            origin: Instant::now(),
            slept: Arc::default(),
            suspend: boot_time().map_or(Suspend::Played, |boot| {
                Suspend::Measured(boot, std::time::Instant::now())
            }),
            wall: Wall::System,
        }
    }

    /// A wall clock that starts at `start` and advances with tokio's clock, so that
    /// tests on a paused tokio clock see visibility delays and lease ages pass without
    /// reading the machine's clock.
    pub fn following_tokio(start: WallTime) -> Clock {
        Clock {
            origin: Instant::now(),
            slept: Arc::default(),
            suspend: Suspend::Played,
            wall: Wall::Following(start),
        }
    }

    /// Plays a suspend of `d`, for tests of what a host does when it wakes up: local
    /// time (and a following wall clock) jumps ahead by `d` while tokio's clock, and
    /// so every timer, does not. Clones share it.
    #[doc(hidden)]
    pub fn suspend(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.slept.fetch_add(ms, Ordering::Relaxed);
    }

    /// Local time elapsed since the clock was made: tokio's, plus the suspend.
    fn elapsed(&self) -> Duration {
        if let Suspend::Measured(boot0, instant0) = self.suspend
            && let Some(boot) = boot_time()
        {
            let gained = boot
                .saturating_sub(boot0)
                .saturating_sub(instant0.elapsed());
            let ms = u64::try_from(gained.as_millis()).unwrap_or(u64::MAX);
            self.slept.fetch_max(ms, Ordering::Relaxed);
        }
        self.origin.elapsed() + Duration::from_millis(self.slept.load(Ordering::Relaxed))
    }

    /// Both clocks now.
    pub fn now(&self) -> Now {
        let elapsed = self.elapsed();
        let local = LocalTime(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
        let wall = match self.wall {
            Wall::System => system_wall(),
            Wall::Following(start) => {
                WallTime(start.0 + i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX / 2))
            }
        };
        Now::new(local, wall)
    }

    /// The tokio instant at which local time `at` arrives, as far as can be told now:
    /// a suspend later moves local time ahead of tokio's, so the instant is computed
    /// from the time left, not from the clock's origin.
    pub fn instant_of(&self, at: LocalTime) -> Instant {
        let left = at.as_millis().saturating_sub(self.now().local.as_millis());
        Instant::now() + Duration::from_millis(left)
    }
}

/// Time since boot, suspend included, where the platform counts it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn boot_time() -> Option<Duration> {
    timespec(rustix::time::clock_gettime(rustix::time::ClockId::Boottime))
}

/// Time since boot, sleep included: `CLOCK_MONOTONIC` counts it on Apple systems.
#[cfg(target_vendor = "apple")]
fn boot_time() -> Option<Duration> {
    timespec(rustix::time::clock_gettime(
        rustix::time::ClockId::Monotonic,
    ))
}

/// Nothing to add: on Windows `Instant` counts a suspend already (see [`Clock`]);
/// elsewhere no clock that counts one is known.
#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
fn boot_time() -> Option<Duration> {
    None
}

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
fn timespec(ts: rustix::time::Timespec) -> Option<Duration> {
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine's clocks run together while tokio's is paused: the system clock
    /// measures no suspend, and local time is tokio's, as every paused-clock test of
    /// the runtime needs.
    #[tokio::test(start_paused = true)]
    async fn the_system_clock_follows_a_paused_tokio_clock() {
        let clock = Clock::system();
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.now().local.as_millis(), 90_000);
    }

    /// A played suspend moves local time, and the instant a local time arrives at,
    /// without moving tokio's clock.
    #[tokio::test(start_paused = true)]
    async fn a_suspend_moves_local_time_and_brings_instants_nearer() {
        let clock = Clock::following_tokio(WallTime(0));
        let at = LocalTime(20_000);
        let before = clock.instant_of(at);
        clock.suspend(Duration::from_secs(15));
        assert_eq!(clock.now().local.as_millis(), 15_000);
        assert_eq!(clock.now().wall, WallTime(15_000));
        assert_eq!(before - clock.instant_of(at), Duration::from_secs(15));
    }
}
