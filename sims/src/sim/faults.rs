//! The faults the simulator injects, each switched on by giving it a rate.

use rand::Rng;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// A host dies without releasing anything, and restarts 5–60 s later as a new life.
    Crash,
    /// A host shuts down gracefully (releasing its leases) and restarts 5–30 s later.
    Shutdown,
    /// A host's process stalls for 1–90 s (a GC or VM pause): it neither runs nor
    /// hears anything; its handlers stall too.
    Pause,
    /// Each host's wall clock is off true time by up to this many seconds, either way.
    Skew,
    /// Each host's monotonic clock runs fast or slow by up to this many parts per
    /// million.
    Drift,
    /// A host's wall clock steps by 1–120 s, either way.
    Jump,
    /// The store throttles half its requests (429 with retry-after) for 5–60 s.
    Throttle,
    /// The store's latency rises by 0.2–8 s for 5–30 s: requests sent then arrive
    /// late, some after their sender gave up on them.
    Spike,
    /// For 1–20 s a host's replies are lost after the store applied the write: every
    /// answer is an ambiguous timeout.
    Timeout,
    /// A host cannot reach the store for 5–90 s: nothing it sends is applied.
    Partition,
    /// A partition's range splits in two: its feed ends, and two child ranges go on
    /// at half its rate each, both starting with its events so far.
    Split,
    /// For 5–60 s replicas lag (Session consistency): each document a read covers is
    /// served, one time in two, at a version up to 3 writes older that its reader has
    /// not yet seen superseded.
    Stale,
    /// For 1–20 s the SDK retries a host's writes beneath it: a write that was
    /// applied is sent again, and the host hears the second answer (412, 409, 404).
    Retry,
    /// A host is believed dead, and a new life starts under its name at once; the old
    /// one, cut off from the store for 5–90 s, acts on until it dies then (a paused VM
    /// or a partitioned pod its orchestrator replaced).
    Zombie,
    /// For 5–60 s a host's handlers are stuck in blocking code: a call whose lease
    /// is lost then cannot be aborted when its grace runs out, and runs on for one
    /// to three of its host's stop timeouts before it returns.
    Stuck,
}

impl FaultKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FaultKind; 15] = [
        FaultKind::Crash,
        FaultKind::Shutdown,
        FaultKind::Pause,
        FaultKind::Skew,
        FaultKind::Drift,
        FaultKind::Jump,
        FaultKind::Throttle,
        FaultKind::Spike,
        FaultKind::Timeout,
        FaultKind::Partition,
        FaultKind::Split,
        FaultKind::Stale,
        FaultKind::Retry,
        FaultKind::Zombie,
        FaultKind::Stuck,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Crash => "crash",
            FaultKind::Shutdown => "shutdown",
            FaultKind::Pause => "pause",
            FaultKind::Skew => "skew",
            FaultKind::Drift => "drift",
            FaultKind::Jump => "jump",
            FaultKind::Throttle => "throttle",
            FaultKind::Spike => "spike",
            FaultKind::Timeout => "timeout",
            FaultKind::Partition => "partition",
            FaultKind::Split => "split",
            FaultKind::Stale => "stale",
            FaultKind::Retry => "retry",
            FaultKind::Zombie => "zombie",
            FaultKind::Stuck => "stuck",
        }
    }

    /// What the number given with the kind means.
    pub fn unit(self) -> &'static str {
        match self {
            FaultKind::Skew => "largest wall-clock offset, seconds",
            FaultKind::Drift => "largest clock drift, ppm",
            FaultKind::Throttle | FaultKind::Spike | FaultKind::Stale => "windows per hour",
            FaultKind::Split => "splits per hour",
            _ => "per host per hour",
        }
    }

    /// Whether the fault is drawn once per host at boot rather than over time.
    pub fn is_static(self) -> bool {
        matches!(self, FaultKind::Skew | FaultKind::Drift)
    }

    fn index(self) -> usize {
        FaultKind::ALL
            .iter()
            .position(|k| *k == self)
            .unwrap_or_default()
    }
}

impl FaultKind {
    /// How long one fault of this kind lasts, in ms (for a clock jump: how far the
    /// clock steps, either way), drawn the same way in every simulated world.
    pub fn draw_size(self, rng: &mut impl Rng) -> i64 {
        let mut secs = |lo: u64, hi: u64| {
            i64::try_from(rng.random_range(lo * 1_000..=hi * 1_000)).unwrap_or(0)
        };
        match self {
            FaultKind::Crash => secs(5, 60),
            FaultKind::Shutdown => secs(5, 30),
            FaultKind::Pause => secs(1, 90),
            FaultKind::Jump => {
                let step = secs(1, 120);
                if rng.random_bool(0.5) { step } else { -step }
            }
            FaultKind::Throttle => secs(5, 60),
            FaultKind::Spike => secs(5, 30),
            FaultKind::Timeout | FaultKind::Retry => secs(1, 20),
            FaultKind::Stale | FaultKind::Stuck => secs(5, 60),
            FaultKind::Partition | FaultKind::Zombie => secs(5, 90),
            FaultKind::Skew | FaultKind::Drift | FaultKind::Split => 0,
        }
    }
}

/// How many writes behind a lagging replica may be.
pub const STALE_DEPTH: u8 = 3;

/// The store as the hosts of a run see it: with older versions kept for replicas to
/// lag by only if the run has `stale` windows.
pub fn replicated<D: leasehold_engine::store::Document>(
    faults: &Faults,
) -> leasehold_engine::store::Replicated<D> {
    let depth = if faults.get(FaultKind::Stale) > 0.0 {
        STALE_DEPTH
    } else {
        0
    };
    leasehold_engine::store::Replicated::new(leasehold_engine::store::Container::new(), depth)
}

/// The session of `client`'s life `life` with the store.
pub fn session(client: usize, life: u64) -> leasehold_engine::store::Reader {
    leasehold_engine::store::Reader((client as u32) << 16 | (life as u32 & 0xffff))
}

/// Serves one read of `op` for `reader`: while replicas lag, each document it covers
/// comes, one time in two, from a replica up to [`STALE_DEPTH`] writes behind.
pub fn serve<D: leasehold_engine::store::Document>(
    store: &mut leasehold_engine::store::Replicated<D>,
    reader: leasehold_engine::store::Reader,
    op: leasehold_engine::store::Op<D>,
    lagging: bool,
    rng: &mut impl Rng,
) -> Result<leasehold_engine::store::Reply<D>, leasehold_engine::store::StoreError> {
    if !lagging {
        return store.fresh(reader, op);
    }
    store.execute(reader, op, &mut |_, n| {
        if rng.random_bool(0.5) {
            rng.random_range(1..=n)
        } else {
            0
        }
    })
}

/// A write's answer while the SDK retries beneath its sender: where the first attempt
/// landed (`retried`), its answer was lost and the SDK sent the write again, so the
/// sender hears what the second attempt found (412, 409 or 404 where the write won).
/// One rule for every simulated client, as the model's `Fault::Retried` is for every
/// checked one.
///
/// ```
/// use leasehold_sims::sim::faults::sdk_retry;
///
/// assert_eq!(sdk_retry(true, Ok::<u8, u16>(1), || Err(412)), Err(412));
/// assert_eq!(sdk_retry(false, Ok::<u8, u16>(1), || Err(412)), Ok(1));
/// ```
pub fn sdk_retry<T, E>(
    retried: bool,
    first: Result<T, E>,
    again: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    if retried { again() } else { first }
}

/// The store-wide fault windows: throttling and latency spikes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreWeather {
    throttle_until: u64,
    spike_until: u64,
    spike_ms: u64,
    stale_until: u64,
}

impl StoreWeather {
    /// Opens a throttling or spike window of `window` ms at true time `now`; a spike
    /// adds 0.2–8 s of latency.
    pub fn open(&mut self, kind: FaultKind, now: u64, window: u64, rng: &mut impl Rng) {
        match kind {
            FaultKind::Throttle => self.throttle_until = self.throttle_until.max(now + window),
            FaultKind::Stale => self.stale_until = self.stale_until.max(now + window),
            FaultKind::Spike => {
                self.spike_until = self.spike_until.max(now + window);
                self.spike_ms = rng.random_range(200..=8_000);
            }
            _ => {}
        }
    }

    /// Whether the store throttles half its requests at `now`.
    pub fn throttling(&self, now: u64) -> bool {
        self.throttle_until > now
    }

    /// Whether replicas lag at `now`.
    pub fn lagging(&self, now: u64) -> bool {
        self.stale_until > now
    }

    /// The latency a spike adds at `now`.
    pub fn extra_latency(&self, now: u64) -> u64 {
        if self.spike_until > now {
            self.spike_ms
        } else {
            0
        }
    }

    /// Ends every window (the heal).
    pub fn clear(&mut self) {
        self.throttle_until = 0;
        self.spike_until = 0;
        self.stale_until = 0;
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The faults of one run: a number per kind, zero for off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    values: [f64; FaultKind::ALL.len()],
}

impl Faults {
    /// No faults at all.
    pub const NONE: Faults = Faults {
        values: [0.0; FaultKind::ALL.len()],
    };

    /// The value for `kind` (0 when off).
    pub fn get(&self, kind: FaultKind) -> f64 {
        self.values[kind.index()]
    }

    /// Sets `kind` to `value`.
    pub fn set(&mut self, kind: FaultKind, value: f64) {
        self.values[kind.index()] = value;
    }

    /// Sets `kind` to `value`, for building.
    pub fn with(mut self, kind: FaultKind, value: f64) -> Faults {
        self.set(kind, value);
        self
    }

    /// Whether any fault is on.
    pub fn any(&self) -> bool {
        self.values.iter().any(|v| *v > 0.0)
    }

    /// The kinds that are on, with their values.
    pub fn enabled(&self) -> impl Iterator<Item = (FaultKind, f64)> + '_ {
        FaultKind::ALL
            .into_iter()
            .map(|k| (k, self.get(k)))
            .filter(|(_, v)| *v > 0.0)
    }

    /// Applies `text` on top of these faults: `none`, or a comma-separated list of
    /// `kind=value` (see [`FaultKind::unit`]).
    pub fn apply(mut self, text: &str) -> Result<Faults, FaultsError> {
        let text = text.trim();
        if text == "none" || text.is_empty() {
            return Ok(Faults::NONE);
        }
        for part in text.split(',') {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| FaultsError::MissingValue(part.trim().to_string()))?;
            let kind = name.trim().parse::<FaultKind>()?;
            let value: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| FaultsError::BadValue {
                    kind,
                    value: value.trim().to_string(),
                })?;
            if kind == FaultKind::Drift && value >= 1_000_000.0 {
                return Err(FaultsError::BadValue {
                    kind,
                    value: value.to_string(),
                });
            }
            self.set(kind, value);
        }
        Ok(self)
    }
}

/// A fault list on its own, as `--faults` writes it (`none`, or `crash=4,pause=6`).
impl std::str::FromStr for Faults {
    type Err = FaultsError;

    fn from_str(text: &str) -> Result<Faults, FaultsError> {
        Faults::NONE.apply(text)
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.enabled().map(|(k, v)| format!("{k}={v}")).collect();
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

impl FromStr for FaultKind {
    type Err = FaultsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| FaultsError::UnknownKind(s.to_string()))
    }
}

/// A `--faults` list that cannot be read.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FaultsError {
    /// No such fault kind.
    #[error(
        "unknown fault {0:?}; the kinds are crash, shutdown, pause, skew, drift, jump, throttle, spike, timeout, partition, split, stale, retry, zombie"
    )]
    UnknownKind(String),
    /// `kind` without `=value`.
    #[error("fault {0:?} needs a value, as in crash=2")]
    MissingValue(String),
    /// A value that is not a non-negative number (drift must stay below 1,000,000 ppm).
    #[error("fault {kind}={value}: the value must be a number of {unit}", unit = kind.unit())]
    BadValue {
        /// The kind.
        kind: FaultKind,
        /// The value given.
        value: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_list_sets_only_what_it_names() {
        let faults = Faults::NONE.apply("crash=2, pause=0.5").unwrap();
        assert_eq!(faults.get(FaultKind::Crash), 2.0);
        assert_eq!(faults.get(FaultKind::Pause), 0.5);
        assert_eq!(faults.get(FaultKind::Spike), 0.0);
        assert_eq!(faults.to_string(), "crash=2,pause=0.5");
        assert_eq!(faults.apply("none").unwrap(), Faults::NONE);
    }

    #[test]
    fn a_bad_fault_list_is_a_typed_error() {
        assert!(matches!(
            Faults::NONE.apply("meteor=1"),
            Err(FaultsError::UnknownKind(_))
        ));
        assert!(matches!(
            Faults::NONE.apply("crash"),
            Err(FaultsError::MissingValue(_))
        ));
        assert!(matches!(
            Faults::NONE.apply("crash=-1"),
            Err(FaultsError::BadValue { .. })
        ));
        assert!(matches!(
            Faults::NONE.apply("drift=1000000"),
            Err(FaultsError::BadValue { .. })
        ));
    }
}
