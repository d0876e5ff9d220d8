//! The state of the partition model: the shared [`World`] (hosts running the engine,
//! the reference store, requests held on the wire, true time and the fault counts),
//! each host's handler calls, and what the properties need of the past.

use crate::world::{Client, Fault, World};
use leasehold_engine::feed::FeedRanges;
use leasehold_engine::lease::LeaseHost;
use leasehold_engine::{RequestId, Session};

/// The most partitions a bound may have.
pub const MAX_PARTITIONS: usize = 5;

/// A whole world at one instant. Everything a host sends is served within its step,
/// except a request a fault holds on the wire.
pub type State = World<LeaseHost, Ghost, Calls>;

/// One host: its engine while it is up, its clocks, and its handler calls.
pub type Host = Client<LeaseHost, Calls>;

/// The handler calls a host's driver runs, by partition. Fixed arrays, not vectors:
/// they are copied with every state, and a copy then allocates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Calls {
    /// Per partition: the session the handler is processing and how far it got.
    pub work: [Option<Work>; MAX_PARTITIONS],
    /// Per partition: a handler call told that its lease is lost, still running
    /// until it returns or the driver aborts it.
    pub lingering: [Option<Work>; MAX_PARTITIONS],
    /// Per partition: a handler call told to stop for a release or a handoff that
    /// finishes its batch first, past the tick (a slow drain): it may still reach
    /// checkpoints, and it reports itself stopped when it returns.
    pub draining: [Option<Work>; MAX_PARTITIONS],
    /// The lingering calls that are stuck, as a bit set by partition: a call that
    /// never ends (a handler the driver cannot abort), so time moves on past it and
    /// the engine's stop timeout may elapse (`--stuck-calls`).
    pub stuck: u8,
    /// The host finished a graceful shutdown: its process exits after this step.
    pub finished: bool,
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
    /// A host released or handed off a lease while a lost call of it might still
    /// run there, before the stop timeout.
    pub freed_beside_call: bool,
    /// Per partition, the highest checkpoint confirmed to a handler.
    pub confirmed: [u8; MAX_PARTITIONS],
    /// True time a host last joined, by restarting, or left, by a graceful shutdown
    /// (0: the cold start).
    pub last_join: u8,
    /// True time a split last finished, giving the table new leases to share (0:
    /// none yet).
    pub last_split: u8,
    /// True time a host last restarted while its earlier life's heartbeat still
    /// vouched for a tenure: the new life joins only once that heartbeat would have
    /// expired, since its name proves that life dead no more than any other.
    pub last_rejoin: Option<u8>,
    /// True time a write held on the wire was last served, or a reply held on the
    /// way back delivered, for a host that had restarted: an earlier life's write
    /// revives what the next life waits out, and the next life's own held write or
    /// late answer delayed its learning of it; either way the new life may only now
    /// begin that wait, learning of it at its next heartbeat.
    pub last_relive: Option<u8>,
    /// True time a lease was last given up past a stuck call's stop timeout: its new
    /// owner learns of it only through the giver's next heartbeat.
    pub last_gift: Option<u8>,
    /// Graceful shutdowns so far.
    pub shutdowns: u8,
    /// Zombies so far.
    pub zombies: u8,
    /// Slow drains so far.
    pub slow_drains: u8,
    /// Stuck calls so far.
    pub stuck_calls: u8,
    /// The host whose earlier life the zombie slot holds, while it acts on.
    pub zombie_of: Option<u8>,
    /// What the step into this state did, for the `sometimes` properties.
    pub events: Events,
    /// Which (host, partition) pairs lost authority by a lapse, as a bit set indexed
    /// by `host * MAX_PARTITIONS + partition`.
    pub lapsed: u32,
    /// The monitored feed's ranges: not history, but the model's source, which
    /// handlers read.
    pub feed: FeedRanges,
    /// Per split the bound allows, in order, the highest checkpoint ever stored in
    /// the lease of the range that splits: none of its children may start behind it.
    pub parent_stored: [u8; 2],
    /// Under a checkpoint policy by items (all zero otherwise, so that the states are
    /// what they were): per partition, the highest checkpoint a handler with authority
    /// reported,
    pub reported: [u8; MAX_PARTITIONS],
    /// the highest carried by a write of its lease that reached the store (landed or
    /// refused),
    pub sent: [u8; MAX_PARTITIONS],
    /// and the checkpoints reported while a write of the reporter's was on the wire,
    /// which the write in flight may leave unsent.
    pub flown: [u8; MAX_PARTITIONS],
    /// A call started further behind the reports than the policy allows.
    pub replay_beyond_bound: bool,
}

/// What one step did that a `sometimes` property looks for. Each step starts with
/// none, so a flag holds only in the state right after its event.
///
/// They were history once, set for good: then nearly every state satisfied some
/// `sometimes` property again, and stateright records a discovery (a lock and a copy
/// of the path) each time it finds one satisfied, even when it already has one. A
/// `sometimes` property is reached exactly when some reachable state satisfies it,
/// and the state right after an event is reachable, so no verdict changes (docs/model-checking.md,
/// "Model-checking speed").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Events {
    /// A host took over a lease whose owner had crashed.
    pub takeover_after_crash: bool,
    /// A lease moved between live hosts (a handoff or a steal).
    pub rebalance_move: bool,
    /// A host told to shut down announced its leave and processes on.
    pub leave_notice: bool,
    /// A host lost a lease it was processing.
    pub lost_lease: bool,
    /// A write was applied but its reply was lost.
    pub ambiguous_write: bool,
    /// A host started a lease again after its authority over it had lapsed.
    pub restart_after_lapse: bool,
    /// A host gave a lease up (a release or a handoff) while a lost call of it
    /// still ran there, past the stop timeout.
    pub gave_up_stuck: bool,
}

/// One step of the world.
///
/// A host acts atomically: its requests are served in the order it sends them and
/// the replies come straight back, until it has nothing left to do. Asynchrony enters
/// as faults within a step ([`Fault`]): a write held on the wire (served later, at any
/// point, even after its sender crashed), applied with its reply lost or answered by
/// the SDK's retry, a reply held on the way back, a read served by a lagging replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A host's timers fire; first, its handlers report one more checkpoint of every
    /// lease they process.
    Step(u8, Option<Fault>),
    /// A host's timers fire, with two faults on two of its requests (only where the
    /// bounds allow two faults in a step).
    StepTwice(u8, Fault, Fault),
    /// The store serves a request that was held on the wire; a fault, if any, hits a
    /// request its reply sets off (only a held write is explored: the write a late
    /// answer releases, such as the checkpoints reported meanwhile, may be slow too).
    Serve(u8, RequestId, Option<Fault>),
    /// A reply held on the way back reaches its host; a fault, if any, as for
    /// [`Action::Serve`].
    Deliver(u8, RequestId, Option<Fault>),
    /// A host's driver gives up on a request held on the wire: it answers the host
    /// with a timeout, and the request may still land later, unheard.
    GiveUp(u8, RequestId),
    /// A host crashes, losing its volatile state.
    Crash(u8),
    /// A host is told to shut down gracefully: it releases its leases, leaves, and
    /// exits once done.
    Shutdown(u8),
    /// A crashed host starts again, as a new incarnation with the same name.
    Restart(u8),
    /// A host is believed crashed, but its life acts on, cut off from the store, until
    /// its authority ends (a paused VM, a partitioned pod): it moves to the zombie
    /// slot, and the host may restart under its name.
    Zombie(u8),
    /// The store starts throttling a host's reads: until the next tick, each is
    /// answered 429 without being served, while its writes go through.
    Throttle(u8),
    /// A lost handler call on a host ends (it returns, or its driver aborts it
    /// after the grace period): the driver reports the session stopped.
    Return(u8, u8),
    /// A lost handler call on a host gets stuck: its driver cannot abort it, so it
    /// no longer holds time back, and it may run on past the stop timeout (or end
    /// later, by [`Action::Return`]).
    Stick(u8, u8),
    /// One tick of true time passes with every host on time.
    Advance,
    /// One tick passes while some host still had due work (a pause).
    Late,
    /// The next split the bound allows happens in the feed: partition 0's range,
    /// then its first child's.
    Split,
}

impl Action {
    /// Whether this is a fault the bounds budget: a step, a serve or a delivery with a
    /// fault on its requests,
    /// a crash, shutdown, zombie, throttling, pause, stuck call or split. Serving,
    /// delivering, a driver's giving up on a held request, a call's return and a
    /// restart are the system's own progress.
    pub fn is_fault(&self) -> bool {
        !matches!(
            self,
            Action::Step(_, None)
                | Action::Serve(_, _, None)
                | Action::Deliver(_, _, None)
                | Action::GiveUp(..)
                | Action::Restart(_)
                | Action::Return(..)
                | Action::Advance
        )
    }
}
