//! The state of the modelled world: hosts running the engine, the reference store,
//! the messages between them, true time, and what the properties need of the past.

use leasehold_engine::lease::{LeaseHost, Record, StoreRequest};
use leasehold_engine::store::Container;
use leasehold_engine::{RequestId, Session};
use std::collections::BTreeMap;

/// A whole world at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// True time, in ticks.
    pub time: u8,
    /// Every host, up or down.
    pub hosts: Vec<Host>,
    /// The lease container.
    pub store: Container<Record>,
    /// Requests held on the wire, by sender and request id. Everything else a host
    /// sends is served within its step.
    pub net: BTreeMap<(u8, RequestId), StoreRequest>,
    /// Crashes so far.
    pub crashes: u8,
    /// Late ticks so far.
    pub pauses: u8,
    /// Requests held on the wire so far.
    pub delays: u8,
    /// Replies lost so far.
    pub lost_replies: u8,
    /// True time of the last fault: a crash, late tick, lost reply, or a
    /// request held or delivered late (0: the cold start).
    pub last_fault: u8,
    /// True time a host last joined, by restarting (0: the cold start).
    pub last_join: u8,
    /// What the properties need to know of the past.
    pub ghost: Ghost,
}

/// One host: its engine while it is up, its clocks, and its handler.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Host {
    /// The engine; `None` while the host is down.
    pub engine: Option<LeaseHost>,
    /// Which life of the host this is.
    pub incarnation: u8,
    /// How fast its clock runs.
    pub rate: Rate,
    /// How far its wall clock is off true time, in ticks.
    pub wall_offset: i8,
    /// Per partition: the session the handler is processing and how far it got.
    pub work: Vec<Option<Work>>,
    /// Per partition: a handler call told that its lease is lost, still running
    /// until it returns or the driver aborts it.
    pub lingering: Vec<Option<Work>>,
}

/// A handler processing one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Work {
    /// The session it was started with.
    pub session: Session,
    /// The epoch it was started at: its fencing token.
    pub epoch: u64,
    /// The last checkpoint it reached (checkpoints are numbers in the model).
    pub progress: u8,
}

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

/// History the properties look at, recorded as things happen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// A lease changed owner without its epoch going up (or its epoch went down).
    pub epoch_not_increased: bool,
    /// A write on behalf of an owner succeeded although the writer no longer owned
    /// the lease at that epoch.
    pub stale_write_succeeded: bool,
    /// A stored checkpoint went backwards.
    pub checkpoint_went_back: bool,
    /// Per partition, the highest checkpoint confirmed to a handler.
    pub confirmed: Vec<u8>,
    /// A host took over a lease whose owner had crashed.
    pub takeover_after_crash: bool,
    /// A lease moved between live hosts (a handoff or a steal).
    pub rebalance_move: bool,
    /// A host lost a lease it was processing.
    pub lost_lease: bool,
    /// A write was applied but its reply was lost.
    pub ambiguous_write: bool,
    /// Hosts that have crashed at least once, as a bit set.
    pub crashed: u8,
    /// Which (host, partition) pairs lost authority by a lapse, as a bit set indexed
    /// by `host * 4 + partition`.
    pub lapsed: u16,
    /// A host started a lease again after its authority over it had lapsed.
    pub restart_after_lapse: bool,
}

/// One step of the world.
///
/// A host acts atomically: its requests are served in the order it sends them and
/// the replies come straight back, until it has nothing left to do. Asynchrony enters
/// as faults within a step: one write may be held on the wire (served later, at any
/// point, even after its sender crashed), or applied with its reply lost.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A host's timers fire; first, its handlers report one more checkpoint of every
    /// lease they process.
    Step(u8, Option<Fault>),
    /// The store serves a request that was held on the wire.
    Serve(u8, RequestId),
    /// A host crashes, losing its volatile state.
    Crash(u8),
    /// A crashed host starts again, as a new incarnation with the same name.
    Restart(u8),
    /// A lost handler call on a host ends (it returns, or its driver aborts it
    /// after the grace period): the driver reports the session stopped.
    Return(u8, u8),
    /// One tick of true time passes with every host on time.
    Advance,
    /// One tick passes while some host still had due work (a pause).
    Late,
}

/// A fault injected into one write of a host's step, counted in the order the host
/// sends its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The n-th write is held on the wire.
    Hold(u8),
    /// The n-th write is applied, but its reply is lost: the host sees a timeout.
    LoseReply(u8),
}
