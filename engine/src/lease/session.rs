//! The stop contract: a processing session lives from its `Start` until the driver
//! reports `Stopped`, whatever the reason it was told to stop.
//!
//! A session outlives the ownership that started it. When a lease is lost, the
//! handler call may still be running; until the driver says it has ended, this host
//! neither starts the lease again nor takes it back, so two calls of one lease never
//! overlap on one host.

use super::io::{Output, StopReason};
use crate::ids::{Epoch, Incarnation, LeaseToken, Session};
use crate::time::LocalTime;
use std::collections::BTreeMap;

/// Where one lease's session is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The handler is processing.
    Running,
    /// The handler was told to stop at `since`, for `reason`, and has not said it has.
    Stopping {
        /// Why it was told to stop. A release or a shutdown that outlives the
        /// authority becomes a loss.
        reason: StopReason,
        /// When it was first told to stop, on the host's clock.
        since: LocalTime,
    },
}

/// One session: the start it came from and how far it has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Run {
    /// The session the handler was started with.
    pub session: Session,
    /// The epoch it was started at: its fencing token.
    pub epoch: Epoch,
    /// Running or stopping.
    pub stage: Stage,
}

impl Run {
    /// Told to stop because the lease was lost: its call may still run, but has no
    /// authority.
    pub fn is_lost(&self) -> bool {
        matches!(
            self.stage,
            Stage::Stopping {
                reason: StopReason::Lost(_),
                ..
            }
        )
    }

    /// Told to stop for a release or a shutdown, and still entitled to finish its
    /// batch and checkpoint.
    pub fn is_draining(&self) -> bool {
        matches!(self.stage, Stage::Stopping { reason, .. } if !matches!(reason, StopReason::Lost(_)))
    }

    /// When it was lost, if it was.
    pub fn lost_since(&self) -> Option<LocalTime> {
        match self.stage {
            Stage::Stopping {
                reason: StopReason::Lost(_),
                since,
            } => Some(since),
            _ => None,
        }
    }
}

/// Every session of one host that has started and not yet been reported stopped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Sessions {
    incarnation: Incarnation,
    /// Sessions started so far: the next session's number.
    started: u64,
    runs: BTreeMap<LeaseToken, Run>,
    /// The known-bad lifecycle the checkers reproduce, if configured.
    legacy: bool,
}

impl Sessions {
    pub fn new(incarnation: Incarnation, legacy: bool) -> Sessions {
        Sessions {
            incarnation,
            started: 0,
            runs: BTreeMap::new(),
            legacy,
        }
    }

    pub fn get(&self, token: &LeaseToken) -> Option<&Run> {
        self.runs.get(token)
    }

    /// Whether `token` has a session here that has not ended.
    pub fn is_live(&self, token: &LeaseToken) -> bool {
        self.runs.contains_key(token)
    }

    /// Starts a session of `token` at `epoch`. The caller has checked that none is
    /// live.
    pub fn start(&mut self, token: &LeaseToken, epoch: Epoch) -> Session {
        debug_assert!(!self.runs.contains_key(token), "one session per lease");
        let session = Session {
            incarnation: self.incarnation,
            seq: self.started,
        };
        self.started += 1;
        let run = Run {
            session,
            epoch,
            stage: Stage::Running,
        };
        self.runs.insert(token.clone(), run);
        session
    }

    /// Tells `token`'s session to stop for `reason` at `now`: the `Stop` to emit, if
    /// the handler must hear of it. A running session stops; a draining one that is
    /// lost is told again, since it must now end at once; a lost one is not told
    /// twice.
    pub fn stop(
        &mut self,
        token: &LeaseToken,
        reason: StopReason,
        now: LocalTime,
    ) -> Option<Output> {
        let run = self.runs.get_mut(token)?;
        let tell = match run.stage {
            Stage::Running => true,
            Stage::Stopping { .. } => matches!(reason, StopReason::Lost(_)) && run.is_draining(),
        };
        if !tell {
            return None;
        }
        let since = match run.stage {
            Stage::Stopping { since, .. } => since,
            Stage::Running => now,
        };
        run.stage = Stage::Stopping { reason, since };
        let stop = Output::Stop {
            lease: token.clone(),
            epoch: run.epoch,
            session: run.session,
            reason,
        };
        if self.legacy && matches!(reason, StopReason::Lost(_)) {
            // The old lifecycle: a lost session was forgotten at once, its call left
            // running.
            self.runs.remove(token);
        }
        Some(stop)
    }

    /// The driver reports that `session` of `token` has ended. Whether it was the
    /// live one; a late or duplicate report changes nothing.
    pub fn stopped(&mut self, token: &LeaseToken, session: Session) -> bool {
        if self.runs.get(token).is_some_and(|r| r.session == session) {
            self.runs.remove(token);
            return true;
        }
        false
    }

    /// Whether a checkpoint from `session` of `token` may be stored: the session is
    /// running or draining, not lost.
    pub fn may_checkpoint(&self, token: &LeaseToken, session: Session) -> bool {
        self.runs
            .get(token)
            .is_some_and(|r| r.session == session && !r.is_lost())
    }

    /// Whether the lost-session lifecycle is the old, known-bad one.
    pub fn is_legacy(&self) -> bool {
        self.legacy
    }

    /// Sessions not yet reported stopped.
    pub fn iter(&self) -> impl Iterator<Item = (&LeaseToken, &Run)> {
        self.runs.iter()
    }
}
