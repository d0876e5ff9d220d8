//! The run's trace: a hash of every event, for the determinism check, and the last
//! few events, for the violation report.

use super::faults::FaultKind;
use fnv::FnvHasher;
use leasehold_engine::lease::{Intent, StopReason, Timer};
use leasehold_engine::{DocId, HostId};
use std::collections::VecDeque;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Something that happened in a run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// A host started a life.
    Boot {
        /// The host.
        host: HostId,
        /// Which life.
        life: u64,
    },
    /// A host died without releasing anything.
    Crash {
        /// The host.
        host: HostId,
    },
    /// A host began a graceful shutdown.
    Shutdown {
        /// The host.
        host: HostId,
    },
    /// A host finished its graceful shutdown and stopped.
    Down {
        /// The host.
        host: HostId,
    },
    /// A fault began; `host` is `None` for store-wide faults.
    Fault {
        /// The kind.
        kind: FaultKind,
        /// The host it hit.
        host: Option<HostId>,
        /// Its size: how long it lasts, or how far a clock stepped, in ms.
        size_ms: i64,
    },
    /// Every fault ended; crashed hosts restart.
    Heal,
    /// A host sent a store request.
    Request {
        /// The host.
        host: HostId,
        /// Why.
        intent: Intent,
        /// The document it is about, if one.
        doc: Option<DocId>,
    },
    /// A host heard the store's answer (or its own timeout).
    Reply {
        /// The host.
        host: HostId,
        /// Why it had asked.
        intent: Intent,
        /// The status code.
        status: u16,
    },
    /// A handler started on a partition.
    Start {
        /// The host.
        host: HostId,
        /// The partition.
        partition: u32,
        /// The lease epoch (fencing token).
        epoch: u64,
        /// Where it resumes.
        from: u64,
    },
    /// A handler stopped.
    Stop {
        /// The host.
        host: HostId,
        /// The partition.
        partition: u32,
        /// The lease epoch.
        epoch: u64,
        /// Why.
        reason: StopReason,
    },
    /// A handler's batch took effect downstream: events `from..to`.
    Commit {
        /// The host.
        host: HostId,
        /// The partition.
        partition: u32,
        /// The lease epoch it carried.
        epoch: u64,
        /// First event.
        from: u64,
        /// One past the last event.
        to: u64,
    },
    /// The store applied a write to a lease.
    Stored {
        /// The partition.
        partition: u32,
        /// Its owner now.
        owner: Option<HostId>,
        /// Its epoch now.
        epoch: u64,
        /// Its checkpoint now.
        checkpoint: u64,
    },
    // Last, so that the variants before it hash as they did before it existed.
    /// A host's timer woke it: which one. Recorded aside ([`Trace::aside`]): the
    /// engine's state, which earlier events fix, names it.
    Wake {
        /// The host.
        host: HostId,
        /// The timer, in the engine's words.
        timer: Timer,
    },
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceEvent::Boot { host, life } => write!(f, "{host} boots (life {life})"),
            TraceEvent::Crash { host } => write!(f, "{host} crashes"),
            TraceEvent::Shutdown { host } => write!(f, "{host} begins a graceful shutdown"),
            TraceEvent::Down { host } => write!(f, "{host} has shut down"),
            TraceEvent::Fault {
                kind,
                host: Some(host),
                size_ms,
            } => write!(f, "fault {kind} on {host} ({size_ms} ms)"),
            TraceEvent::Fault {
                kind,
                host: None,
                size_ms,
            } => write!(f, "fault {kind} on the store ({size_ms} ms)"),
            TraceEvent::Heal => f.write_str("faults healed; crashed hosts restart"),
            TraceEvent::Wake { host, timer } => write!(f, "{host} wakes for {timer}"),
            TraceEvent::Request { host, intent, doc } => match doc {
                Some(doc) => write!(f, "{host} sends {intent} {doc}"),
                None => write!(f, "{host} sends {intent}"),
            },
            TraceEvent::Reply {
                host,
                intent,
                status,
            } => write!(f, "{host} hears {status} for {intent}"),
            TraceEvent::Start {
                host,
                partition,
                epoch,
                from,
            } => write!(
                f,
                "{host} starts partition {partition} at epoch {epoch} from event {from}"
            ),
            TraceEvent::Stop {
                host,
                partition,
                epoch,
                reason,
            } => write!(
                f,
                "{host} stops partition {partition} (epoch {epoch}): {reason}"
            ),
            TraceEvent::Commit {
                host,
                partition,
                epoch,
                from,
                to,
            } => write!(
                f,
                "{host} commits partition {partition} events {from}..{to} at epoch {epoch}"
            ),
            TraceEvent::Stored {
                partition,
                owner,
                epoch,
                checkpoint,
            } => {
                let owner = owner.as_ref().map_or("nobody", |o| o.as_str());
                write!(
                    f,
                    "store: partition {partition} owner {owner} epoch {epoch} checkpoint {checkpoint}"
                )
            }
        }
    }
}

/// The trace of one run, of partition-lease events unless told otherwise.
pub struct Trace<E = TraceEvent> {
    last: VecDeque<(u64, E)>,
    keep: usize,
    hasher: FnvHasher,
    events: u64,
}

impl<E: Hash + fmt::Display> Trace<E> {
    /// A trace that keeps the last `keep` events.
    pub fn new(keep: usize) -> Trace<E> {
        Trace {
            last: VecDeque::with_capacity(keep.min(4_096)),
            keep,
            hasher: FnvHasher::default(),
            events: 0,
        }
    }

    /// Records `event` at true time `t`.
    pub fn record(&mut self, t: u64, event: E) {
        t.hash(&mut self.hasher);
        event.hash(&mut self.hasher);
        self.events += 1;
        if self.keep == 0 {
            return;
        }
        if self.last.len() == self.keep {
            self.last.pop_front();
        }
        self.last.push_back((t, event));
    }

    /// Keeps `event` at true time `t` among the last events, to read, but leaves it
    /// out of the hash and the count: something earlier events already decide, such
    /// as why a host woke, so the determinism check loses nothing without it.
    pub fn aside(&mut self, t: u64, event: impl FnOnce() -> E) {
        if !self.keeps() {
            return;
        }
        if self.last.len() == self.keep {
            self.last.pop_front();
        }
        self.last.push_back((t, event()));
    }

    /// Whether it keeps any events to read (a quiet run keeps none).
    pub fn keeps(&self) -> bool {
        self.keep > 0
    }

    /// A hash of every event so far: equal seeds give equal hashes.
    pub fn hash(&self) -> u64 {
        self.hasher.finish()
    }

    /// How many events were recorded.
    pub fn len(&self) -> u64 {
        self.events
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// The last events, oldest first, as lines with their true time.
    pub fn tail(&self) -> Vec<String> {
        self.last
            .iter()
            .map(|(t, e)| format!("{:>10.3}s  {e}", *t as f64 / 1_000.0))
            .collect()
    }
}
