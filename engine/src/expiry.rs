//! When a lease counts as expired, and how long its holder may act on it.
//!
//! Two rules are offered.
//!
//! **`Observed`** (the default) needs no agreement between clocks. Let `D` be the lease
//! duration and `ρ` the drift bound (a local clock runs at a rate within `1 ± ρ` of
//! true time).
//!
//! - An observer may treat a lease as expired once it has seen the *same etag* for
//!   `D + ρD` on its own clock. That is at least `D` of true time after it first saw
//!   the etag, hence at least `D` after the write that produced it was applied, hence
//!   at least `D` after that write was sent.
//! - The holder's authority runs from the moment it *sent* its last successful write,
//!   for `D(1 − ρ) − margin` on its own clock: at most `D − margin/(1−ρ)` of true time.
//!
//! So authority always ends before any observer may act, whatever the clock offsets.
//!
//! **`Timestamp`** is CFP's rule: the holder writes its wall clock into `timestamp`,
//! and a reader considers the lease expired once its own wall clock passes
//! `timestamp + D`. It is kept for interoperation. It is only safe while every pair of
//! wall clocks differs by less than the holder's margin, which nothing enforces.

use crate::time::{Drift, LocalTime, Millis, Now, WallTime};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which rule decides that another holder's lease has expired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExpiryRule {
    /// Expired once the same etag has been observed for the duration plus the drift
    /// allowance, on the observer's monotonic clock. Safe under any clock offset.
    #[default]
    Observed,
    /// Expired once the observer's wall clock passes the holder's `timestamp` plus the
    /// duration, as the change feed processor does. Unsafe under clock skew.
    Timestamp,
}

impl fmt::Display for ExpiryRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExpiryRule::Observed => "observed",
            ExpiryRule::Timestamp => "timestamp",
        })
    }
}

/// Parses `observed` or `timestamp`.
impl std::str::FromStr for ExpiryRule {
    type Err = UnknownExpiryRule;

    fn from_str(s: &str) -> Result<ExpiryRule, UnknownExpiryRule> {
        match s {
            "observed" => Ok(ExpiryRule::Observed),
            "timestamp" => Ok(ExpiryRule::Timestamp),
            other => Err(UnknownExpiryRule(other.to_string())),
        }
    }
}

/// An expiry rule name that does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownExpiryRule(pub String);

impl fmt::Display for UnknownExpiryRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown expiry rule {:?}; the rules are observed and timestamp",
            self.0
        )
    }
}

impl std::error::Error for UnknownExpiryRule {}

/// What an observer knows about one version (etag) of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Observation {
    /// When this observer first saw the version, on its own monotonic clock.
    pub first_seen: LocalTime,
    /// The wall-clock `timestamp` its writer put in it.
    pub timestamp: WallTime,
    /// The expiry terms its writer held it under, if the document says.
    pub terms: Option<Terms>,
}

/// The expiry terms a holder wrote a document under: its lease duration and drift
/// bound. Written into every lease and heartbeat, so that a host whose own settings
/// differ (a deploy that changed them, half done) still waits out the holder's.
///
/// ```
/// use leasehold_engine::{
///     Drift, ExpiryPolicy, LocalTime, Millis, Now, Observation, Terms, WallTime,
/// };
///
/// // This host would wait 60.6 s; the holder wrote its heartbeat under 120 s.
/// let mine = ExpiryPolicy::default();
/// let seen = Observation {
///     first_seen: LocalTime(0),
///     timestamp: WallTime(0),
///     terms: Some(Terms { duration: Millis::from_secs(120), drift: Drift::ppm(10_000) }),
/// };
/// let at = |s: u64| Now::new(LocalTime(s * 1_000), WallTime(0));
/// assert!(!mine.is_expired(&seen, at(61)));
/// assert!(mine.is_expired(&seen, at(122)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Terms {
    /// The holder's lease duration.
    #[serde(rename = "DurationMs")]
    pub duration: Millis,
    /// The holder's drift bound.
    #[serde(rename = "DriftPpm")]
    pub drift: Drift,
}

impl Terms {
    /// The longer of the two durations and the wider of the two drift bounds: what
    /// waits out a holder under either terms.
    ///
    /// ```
    /// use leasehold_engine::{Drift, Millis, Terms};
    ///
    /// let old = Terms { duration: Millis::from_secs(60), drift: Drift::ppm(10_000) };
    /// let new = Terms { duration: Millis::from_secs(35), drift: Drift::ppm(20_000) };
    /// let both = new.widest(Some(old));
    /// assert_eq!(both.duration, Millis::from_secs(60));
    /// assert_eq!(both.drift, Drift::ppm(20_000));
    /// assert_eq!(new.widest(None), new);
    /// ```
    pub fn widest(self, other: Option<Terms>) -> Terms {
        match other {
            Some(o) => Terms {
                duration: self.duration.max(o.duration),
                drift: self.drift.max(o.drift),
            },
            None => self,
        }
    }
}

/// The lease duration and the clock assumptions that go with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExpiryPolicy {
    /// The rule readers apply.
    pub rule: ExpiryRule,
    /// The lease duration `D` (CFP's lease expiration interval).
    pub duration: Millis,
    /// The assumed bound on clock drift.
    pub drift: Drift,
    /// How much earlier than strictly needed a holder gives up its authority, to cover
    /// the time between a deadline check and the work it guards.
    pub safety_margin: Millis,
}

impl Default for ExpiryPolicy {
    fn default() -> Self {
        ExpiryPolicy {
            rule: ExpiryRule::Observed,
            duration: Millis::from_secs(60),
            drift: Drift::ppm(10_000),
            safety_margin: Millis::from_secs(2),
        }
    }
}

impl ExpiryPolicy {
    /// The terms this policy writes into the documents it holds.
    pub fn terms(&self) -> Terms {
        Terms {
            duration: self.duration,
            drift: self.drift,
        }
    }

    /// This policy as it judges a version written under `terms`: the longer of the
    /// two durations and the wider of the two drift bounds. A holder's authority lasts
    /// at most its own duration of true time, which a reader must wait out whatever
    /// its own settings say.
    pub fn judging(&self, terms: Option<Terms>) -> ExpiryPolicy {
        let widest = self.terms().widest(terms);
        ExpiryPolicy {
            duration: widest.duration,
            drift: widest.drift,
            ..*self
        }
    }

    /// How long an observer must see one version unchanged before it is expired: the
    /// duration plus the drift allowance.
    pub fn observer_wait(&self) -> Millis {
        self.duration + self.drift.allowance(self.duration)
    }

    /// How long a holder's authority lasts after it sent a successful write:
    /// `D − ρD − margin`. Zero means the configuration leaves no authority at all.
    pub fn authority_span(&self) -> Millis {
        self.duration
            .saturating_sub(self.drift.allowance(self.duration))
            .saturating_sub(self.safety_margin)
    }

    /// How long a driver lets a handler call run on after its lease was lost before
    /// it aborts the call: half the safety margin. A loss is reported at the latest
    /// when the holder's authority runs out, and no rival may act until the margin
    /// has passed after that (on any clock within the drift bound), so an abort this
    /// soon lands first, with half the margin left for the driver's own lateness.
    /// The runtime's default, and the simulator's, is this one rule.
    ///
    /// ```
    /// use leasehold_engine::{ExpiryPolicy, Millis};
    ///
    /// assert_eq!(ExpiryPolicy::default().abort_grace(), Millis(1_000));
    /// ```
    pub fn abort_grace(&self) -> Millis {
        Millis(self.safety_margin.as_millis() / 2)
    }

    /// The local time at which authority from a write sent at `sent_at` ends.
    /// Authority holds while `now < deadline`.
    pub fn holder_deadline(&self, sent_at: LocalTime) -> LocalTime {
        sent_at + self.authority_span()
    }

    /// Whether `observed` counts as expired at `now`, under the longer of this
    /// policy's terms and those the version was written under.
    pub fn is_expired(&self, observed: &Observation, now: Now) -> bool {
        let judged = self.judging(observed.terms);
        match judged.rule {
            ExpiryRule::Observed => now.local >= observed.first_seen + judged.observer_wait(),
            // CFP: `timestamp + expiration < now`.
            ExpiryRule::Timestamp => observed.timestamp + judged.duration < now.wall,
        }
    }

    /// The local time at which `observed` will count as expired, if nothing changes.
    pub fn expires_at(&self, observed: &Observation, now: Now) -> LocalTime {
        let judged = self.judging(observed.terms);
        match judged.rule {
            ExpiryRule::Observed => observed.first_seen + judged.observer_wait(),
            ExpiryRule::Timestamp => {
                let at = observed.timestamp + judged.duration;
                let wait = at
                    .as_unix_millis()
                    .saturating_sub(now.wall.as_unix_millis())
                    + 1;
                now.local + Millis(u64::try_from(wait).unwrap_or(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rule: ExpiryRule) -> ExpiryPolicy {
        ExpiryPolicy {
            rule,
            duration: Millis::from_secs(60),
            drift: Drift::ppm(10_000),
            safety_margin: Millis::from_secs(1),
        }
    }

    #[test]
    fn an_observer_waits_the_duration_plus_the_drift_allowance() {
        let p = policy(ExpiryRule::Observed);
        let seen = Observation {
            first_seen: LocalTime(1_000),
            timestamp: WallTime(0),
            terms: None,
        };
        let at = |ms| Now::new(LocalTime(ms), WallTime(0));
        assert!(!p.is_expired(&seen, at(1_000 + 60_599)));
        assert!(p.is_expired(&seen, at(1_000 + 60_600)));
        assert_eq!(p.expires_at(&seen, at(0)), LocalTime(61_600));
    }

    #[test]
    fn a_holder_gives_up_before_the_duration_minus_drift_and_margin() {
        let p = policy(ExpiryRule::Observed);
        assert_eq!(p.authority_span(), Millis(60_000 - 600 - 1_000));
        assert_eq!(p.holder_deadline(LocalTime(5)), LocalTime(5 + 58_400));
    }

    #[test]
    fn the_timestamp_rule_reads_the_wall_clock_only() {
        let p = policy(ExpiryRule::Timestamp);
        let seen = Observation {
            first_seen: LocalTime(0),
            timestamp: WallTime(10_000),
            terms: None,
        };
        assert!(!p.is_expired(&seen, Now::new(LocalTime(999_999), WallTime(70_000))));
        assert!(p.is_expired(&seen, Now::new(LocalTime(0), WallTime(70_001))));
        assert_eq!(
            p.expires_at(&seen, Now::new(LocalTime(100), WallTime(69_000))),
            LocalTime(100 + 1_001)
        );
    }

    #[test]
    fn a_version_written_under_a_longer_duration_is_waited_out_in_full() {
        let p = policy(ExpiryRule::Observed);
        let seen = Observation {
            first_seen: LocalTime(0),
            timestamp: WallTime(0),
            terms: Some(Terms {
                duration: Millis::from_secs(120),
                drift: Drift::ppm(20_000),
            }),
        };
        let at = |ms| Now::new(LocalTime(ms), WallTime(0));
        // 120 s plus 2 %, the wider of the two drift bounds.
        assert!(!p.is_expired(&seen, at(122_399)));
        assert!(p.is_expired(&seen, at(122_400)));
        assert_eq!(p.expires_at(&seen, at(0)), LocalTime(122_400));
        // A shorter writer never shortens the reader's own wait.
        let short = Observation {
            terms: Some(Terms {
                duration: Millis::from_secs(10),
                drift: Drift::ppm(0),
            }),
            ..seen
        };
        assert!(!p.is_expired(&short, at(60_599)));
        assert!(p.is_expired(&short, at(60_600)));
    }

    #[test]
    fn the_timestamp_rule_adds_the_longer_duration_too() {
        let p = policy(ExpiryRule::Timestamp);
        let seen = Observation {
            first_seen: LocalTime(0),
            timestamp: WallTime(10_000),
            terms: Some(Terms {
                duration: Millis::from_secs(90),
                drift: Drift::ppm(0),
            }),
        };
        assert!(!p.is_expired(&seen, Now::new(LocalTime(0), WallTime(100_000))));
        assert!(p.is_expired(&seen, Now::new(LocalTime(0), WallTime(100_001))));
    }
}
