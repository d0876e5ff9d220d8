//! The world every model shares: clients running an engine state machine against the
//! reference store, with clocks, crashes, pauses and write faults.
//!
//! A client acts atomically: its requests are served in order and the replies come
//! straight back, except where a fault hits one of them (see [`Fault`]): a write held
//! on the wire (served later, even after its sender crashed), applied with its reply
//! lost, or applied and answered as the SDK's retry of it sees it; a reply held on the
//! way back; a read served by a replica that lags. The store is Cosmos DB's as its
//! clients see it ([`Replicated`]): writes are linearizable, and a read may describe
//! an older version of a document the reader has not yet seen. The lock models (queue,
//! items) let each client act once per tick (its poll loop), and true time moves on
//! once every live client has acted, or, as a bounded fault (a pause), while one still
//! has not. The partition model steps a host when its timers are due instead, and adds
//! its handler calls to each client ([`Client::handler`]); it shares everything else
//! here.

use crate::clocks::Rate;
use leasehold_engine::lock::{LockToken, Locks};
use leasehold_engine::store::{
    BatchOp, Container, Document, Op, Reader, Replicated, Reply, StoreError,
};
use leasehold_engine::{DocId, Etag, Now, RequestId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::hash::Hash;

pub use crate::sealed::Sealed;
use crate::transitions::Transitions;

mod run;
use leasehold_engine::store::StoreResult;
pub use leasehold_engine::{Request, StoreClient};
pub use run::{KeptCall, run, run_kept, run_with};

/// An engine state machine a client runs: the engine's
/// [`StoreClient`] contract, which routes its requests, and what a model
/// checker's state needs (clone, compare, hash).
///
/// The world shares the engines of the clients a step leaves alone with the state it
/// came from, and keeps each engine's digest ([`Sealed`]): a step clones and hashes
/// only the engine it runs. The engine's contract already makes a machine and its
/// values `Send + 'static`; a checker also shares them between its threads (`Sync`).
pub trait Modelled:
    leasehold_engine::StoreClient<Intent: Copy + PartialEq + Eq + Hash + Sync>
    + leasehold_engine::Machine<Input: Clone + PartialEq + Hash + Sync, Output: Clone + Sync>
    + Clone
    + Debug
    + PartialEq
    + Eq
    + Hash
    + Sync
{
}

/// A machine that holds document locks (the queue consumer, the item leaser).
pub trait Locking: Modelled {
    /// The locks it holds.
    fn locks(&self) -> &Locks;
}

/// A reply held on the way back: the store's answer, and the lock its request acted
/// under (a holder's write), if any.
pub type HeldReply<D> = (StoreResult<D>, Option<LockToken>);

/// One client: its engine while it is up, its clocks, and what the model runs beside
/// the engine (`X`: the partition model's handler calls; nothing for the others).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client<M, X = ()> {
    /// The engine; `None` while the client is down. Shared with the states that have
    /// the same engine: a step clones only the engine it changes.
    pub engine: Option<Sealed<M>>,
    /// Which life of the client this is.
    pub incarnation: u8,
    /// How fast its clock runs.
    pub rate: Rate,
    /// How far its wall clock is off true time, in ticks.
    pub wall_offset: i8,
    /// Whether it has acted in this tick (lock models).
    pub acted: bool,
    /// Cut off from the store: every request it sends goes unanswered until its
    /// driver's timeout (a zombie of the partition model).
    pub cut: bool,
    /// The store throttles its reads until the next tick: each is answered 429,
    /// unserved, while its writes go through (a burst of throttling, as under a hot
    /// partition).
    pub throttled: bool,
    /// What runs beside the engine; reset by a crash.
    pub handler: X,
}

/// A whole world at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World<M: Modelled, G, X = ()> {
    /// True time, in ticks.
    pub time: u8,
    /// Every client, up or down.
    pub clients: Vec<Client<M, X>>,
    /// The container, as the clients' sessions see it.
    pub store: Replicated<M::Doc>,
    /// Requests held on the wire, by sender and request id.
    pub net: BTreeMap<(u8, RequestId), Request<M::Doc, M::Intent>>,
    /// Held requests whose sender's driver has given up on them (answered them with
    /// a timeout): they may still land, and nobody hears how.
    pub given_up: BTreeSet<(u8, RequestId)>,
    /// Replies held on the way back, by sender and request id: the store has served
    /// the request already. Each keeps the lock its request acted under, so that the
    /// lock models can judge what its answer does to the locks held when it comes.
    pub replies: BTreeMap<(u8, RequestId), HeldReply<M::Doc>>,
    /// Crashes so far.
    pub crashes: u8,
    /// Late ticks so far.
    pub pauses: u8,
    /// Requests held on the wire so far.
    pub delays: u8,
    /// Replies lost so far.
    pub lost_replies: u8,
    /// Documents served stale so far.
    pub stale_reads: u8,
    /// Replies held on the way back so far.
    pub late_replies: u8,
    /// Writes answered as the SDK's retry sees them so far.
    pub retries: u8,
    /// Bursts of throttled reads so far.
    pub throttles: u8,
    /// Calls beside the store that failed so far.
    pub side_failures: u8,
    /// True time of the last fault (0: the cold start). The lock models count a
    /// restart as one; the partition model counts it as a join, unless every host
    /// was down.
    pub last_fault: u8,
    /// Clients that crashed at least once, as a bit set.
    pub crashed: u8,
    /// The versions the store refused a conditional write on (412), by the life
    /// that heard the refusal at once: (client, incarnation, document, etag).
    /// Recorded only while a stale read, or the late reply of a read sent before the
    /// write, may still show such a version again (empty otherwise, so that checks
    /// without those faults keep their states exactly).
    pub refused: BTreeSet<(u8, u8, DocId, Etag)>,
    /// A life sent a conditional write on a version the store had refused it, which
    /// can only be refused again: a replica that lags had it write, be refused and
    /// read again with no end but the replica's catching up.
    pub rewrote_refused: bool,
    /// What the properties need of the past.
    pub ghost: G,
}

/// The fault budget of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Crashes.
    pub crashes: u8,
    /// Late ticks.
    pub pauses: u8,
    /// Writes applied with the reply lost.
    pub lost_replies: u8,
    /// Writes held on the wire.
    pub delays: u8,
    /// Documents a read may be served at an older version (Session consistency); the
    /// store then retains `stale_depth` older versions of each document.
    pub stale_reads: u8,
    /// How many writes back a lagging replica may be (at least 1 where reads may be
    /// stale): a new life's session has seen nothing, so a replica may serve it a
    /// version from before several writes it never saw.
    pub stale_depth: u8,
    /// Replies (to reads and writes alike) that may be held on the way back and
    /// delivered later.
    pub late_replies: u8,
    /// Writes that may be applied and then answered as the SDK's own retry of them
    /// sees the store (a definite 412, 409 or 404 although the write won).
    pub retries: u8,
    /// Bursts of throttled reads: from a moment the model chooses until the next
    /// tick, the store answers a client's reads 429 without serving them.
    pub throttles: u8,
    /// Calls a driver makes beside the store that may fail: the queue's claim
    /// store's puts and deletes ([`Rules::fallible`]).
    pub side_failures: u8,
    /// The last tick explored.
    pub horizon: u8,
    /// Drift per tick, in milliseconds.
    pub drift_ms: u16,
}

/// What a model adds to the shared world.
pub trait Rules: Sized {
    /// The engine.
    type M: Modelled;
    /// The history the properties need.
    type Ghost: Clone + Debug + PartialEq + Eq + Hash;
    /// What runs beside each client's engine; a crash resets it to its default.
    type Handler: Clone + Debug + Default + PartialEq + Eq + Hash;
    /// How traces name a client: `c0` or `h0`.
    const ACTOR: char = 'c';
    /// The fault budget.
    fn budget(&self) -> Budget;
    /// The engine transitions computed so far, to reuse.
    fn transitions(&self) -> &Transitions<Self::M>;
    /// Clears what the previous step did, at the start of every step: the events the
    /// `sometimes` properties look for hold only in the state right after them (see
    /// [`crate::Events`] for why).
    fn forget_events(&self, _ghost: &mut Self::Ghost) {}
    /// A known-bad variant may rewrite a request on the wire; `before` is the document
    /// it targets as stored.
    fn tamper(
        &self,
        _req: &mut Request<<Self::M as StoreClient>::Doc, <Self::M as StoreClient>::Intent>,
        _before: Option<&<Self::M as StoreClient>::Doc>,
    ) {
    }
    /// Records what an applied request means; `before` is the document it targets as
    /// stored just before.
    fn record(
        &self,
        world: &mut State<Self>,
        client: u8,
        req: &Request<<Self::M as StoreClient>::Doc, <Self::M as StoreClient>::Intent>,
        before: Option<<Self::M as StoreClient>::Doc>,
        result: &StoreResult<<Self::M as StoreClient>::Doc>,
    );
    /// Handles an output other than a request; it may answer with an input for the
    /// engine (a handler that stops at once reports it). `fails`: the output is a
    /// call beside the store ([`Rules::fallible`]) that a [`Fault::SideFails`] hit.
    fn output(
        &self,
        world: &mut State<Self>,
        client: u8,
        output: <Self::M as leasehold_engine::Machine>::Output,
        fails: bool,
        journal: &mut Option<Vec<String>>,
    ) -> Option<<Self::M as leasehold_engine::Machine>::Input>;
    /// Whether `output` asks the driver for a call beside the store that may fail.
    fn fallible(&self, _output: &<Self::M as leasehold_engine::Machine>::Output) -> bool {
        false
    }
    /// A write was applied (or refused) but its reply is lost.
    fn reply_lost(
        &self,
        _world: &mut State<Self>,
        _applied: &StoreResult<<Self::M as StoreClient>::Doc>,
    ) {
    }
    /// A short description of a request, for traces.
    fn describe(
        &self,
        req: &Request<<Self::M as StoreClient>::Doc, <Self::M as StoreClient>::Intent>,
    ) -> String;
}

/// The world of a model's rules.
pub type State<R> = World<<R as Rules>::M, <R as Rules>::Ghost, <R as Rules>::Handler>;

/// Client `c`'s clocks now.
pub fn now<M: Modelled, G, X>(budget: &Budget, world: &World<M, G, X>, c: u8) -> Now {
    let client = &world.clients[usize::from(c)];
    crate::clocks::now(budget.drift_ms, client.rate, client.wall_offset, world.time)
}

/// Appends to the journal, formatting only when one is kept.
pub fn note(journal: &mut Option<Vec<String>>, line: impl FnOnce() -> String) {
    if let Some(lines) = journal {
        lines.push(line());
    }
}

/// A store answer, briefly.
pub fn answer<D>(result: &StoreResult<D>) -> String {
    match result {
        Ok(Reply::Replaced(e) | Reply::Created(e)) => format!("ok, now {e:?}"),
        Ok(Reply::Deleted) => "deleted".into(),
        Ok(Reply::Read(_) | Reply::ReadAll(_) | Reply::Query(_)) => "read".into(),
        Ok(Reply::Batch(r)) => match r.failure() {
            None if r.is_success() => "batch applied".into(),
            Some((i, status)) => format!("batch refused, operation {i}: {}", status.code()),
            None => "batch refused".into(),
        },
        Err(e) => e.status().to_string(),
    }
}

/// A fault injected into one request of a client's step. Writes, reads and requests
/// are each counted in the order the client sends them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// The n-th write is held on the wire: served later, in any order with everything
    /// else, even after its sender crashed.
    Hold(u8),
    /// The n-th write is applied, but its reply is lost: the client sees a timeout.
    LoseReply(u8),
    /// The n-th write is applied, its answer lost, and the SDK's own retry of it
    /// answers instead: 412, 409 or 404 where the write won.
    Retried(u8),
    /// The n-th request is served at once, but its reply is held on the way back and
    /// delivered later.
    LateReply(u8),
    /// The n-th read is served by a replica that lags: `choice` picks one document
    /// and how far back ([`stale_choice`]).
    Stale {
        /// Which read of the step.
        read: u8,
        /// Which of the read's stale answers.
        choice: u8,
    },
    /// The n-th call of the step that the driver makes beside the store (a claim
    /// store's put or delete) fails. A failed put is one that landed all the same:
    /// of the two outcomes a caller cannot tell apart, the one that leaves more
    /// behind.
    SideFails(u8),
}

/// Calls beside the store one step may make that a fault may pick: a producer's
/// put and discard, or a consumer's drops in one sweep.
pub const SIDE_CALLS_PER_STEP: u8 = 2;

/// The wait a throttled read's 429 asks for: well within a tick, so that the host
/// reads again at its next step, as it would after a real burst of throttling.
pub const THROTTLE_RETRY_AFTER_MS: u64 = 100;

/// The most stale answers one read is explored with: the documents it covers that
/// the reader has not seen at their newest version.
pub const MAX_STALE_CHOICES: u8 = 6;

impl Fault {
    /// The faults a step may suffer within `budget`, given what `world` has used,
    /// `none` first; writes and requests counted up to `per_step`, reads a lagging
    /// replica may serve up to the first two.
    pub fn menu<M: Modelled, G, X>(
        budget: &Budget,
        world: &World<M, G, X>,
        per_step: u8,
    ) -> Vec<Option<Fault>> {
        Self::menu_reading(budget, world, per_step, per_step.min(2))
    }

    /// As [`menu`](Self::menu), with reads a lagging replica may serve counted up to
    /// `reads`: a queue poll in the large-payload mode reads its parts after two scans,
    /// and a replica that lags may not have them yet.
    pub fn menu_reading<M: Modelled, G, X>(
        budget: &Budget,
        world: &World<M, G, X>,
        per_step: u8,
        reads: u8,
    ) -> Vec<Option<Fault>> {
        let mut faults = vec![None];
        for n in 0..per_step {
            if world.delays < budget.delays {
                faults.push(Some(Fault::Hold(n)));
            }
            if world.lost_replies < budget.lost_replies {
                faults.push(Some(Fault::LoseReply(n)));
            }
            if world.retries < budget.retries {
                faults.push(Some(Fault::Retried(n)));
            }
            if world.late_replies < budget.late_replies {
                faults.push(Some(Fault::LateReply(n)));
            }
        }
        if world.side_failures < budget.side_failures {
            faults.extend((0..SIDE_CALLS_PER_STEP).map(|n| Some(Fault::SideFails(n))));
        }
        if world.stale_reads < budget.stale_reads {
            for read in 0..reads {
                for choice in 0..MAX_STALE_CHOICES {
                    faults.push(Some(Fault::Stale { read, choice }));
                }
            }
        }
        faults
    }

    /// The pairs of faults one step may suffer within `budget` (each on its own
    /// request), for a bound that allows two faults in a step: a late reply to a scan
    /// sent beside a write the SDK retries, say. Two of one kind need two left of it.
    pub fn pairs<M: Modelled, G, X>(
        budget: &Budget,
        world: &World<M, G, X>,
        per_step: u8,
    ) -> Vec<(Fault, Fault)> {
        let singles: Vec<Fault> = Self::menu(budget, world, per_step)
            .into_iter()
            .flatten()
            .collect();
        let left = |f: &Fault| match f {
            Fault::Hold(_) => budget.delays - world.delays,
            Fault::LoseReply(_) => budget.lost_replies - world.lost_replies,
            Fault::Retried(_) => budget.retries - world.retries,
            Fault::LateReply(_) => budget.late_replies - world.late_replies,
            Fault::Stale { .. } => budget.stale_reads - world.stale_reads,
            Fault::SideFails(_) => budget.side_failures - world.side_failures,
        };
        let mut pairs = Vec::new();
        for (i, a) in singles.iter().enumerate() {
            for b in &singles[i + 1..] {
                let same_kind = std::mem::discriminant(a) == std::mem::discriminant(b);
                if !same_kind || left(a) >= 2 {
                    pairs.push((*a, *b));
                }
            }
        }
        pairs
    }

    /// How a step's description names it.
    pub fn describe(fault: &Option<Fault>) -> String {
        match fault {
            None => String::new(),
            Some(Fault::Hold(n)) => format!(", holding write #{n} on the wire"),
            Some(Fault::LoseReply(n)) => format!(", losing the reply to write #{n}"),
            Some(Fault::Retried(n)) => format!(", the SDK retrying write #{n} after it landed"),
            Some(Fault::LateReply(n)) => format!(", holding the reply to request #{n}"),
            Some(Fault::Stale { read, choice }) => {
                format!(", a lagging replica serving read #{read} (stale answer {choice})")
            }
            Some(Fault::SideFails(n)) => {
                format!(", FAILING the driver's call #{n} beside the store")
            }
        }
    }
}

/// The stale answer numbered `choice` among those `options` allows (documents and how
/// many versions back each may go, as [`Replicated::options`] lists them): a document
/// and how far back. Numbered document by document, nearest version first.
pub fn stale_choice(options: &[(DocId, usize)], choice: u8) -> Option<(&DocId, usize)> {
    options
        .iter()
        .flat_map(|(id, n)| (1..=*n).map(move |back| (id, back)))
        .nth(usize::from(choice))
}

/// The session of client `c`'s life `incarnation` with the store.
pub fn reader(c: u8, incarnation: u64) -> Reader {
    Reader(u32::from(c) << 16 | (incarnation as u32 & 0xffff))
}

/// The stored document a single-document write targets, or the one a batch deletes.
fn target<D: Document>(store: &Container<D>, op: &Op<D>) -> Option<D> {
    let (pk, id) = match op {
        Op::Replace { doc, .. } => (doc.partition_key(), doc.id().clone()),
        Op::Delete { pk, id, .. } => (pk.clone(), id.clone()),
        // A queue's move or completion: the document it deletes.
        Op::Batch { pk, ops } => {
            let id = ops.iter().find_map(|op| match op {
                BatchOp::Delete { id, .. } => Some(id.clone()),
                _ => None,
            })?;
            (pk.clone(), id)
        }
        _ => return None,
    };
    store.read(&pk, &id).ok().map(|s| s.doc)
}

/// How the store serves one request.
#[derive(Clone, Copy)]
enum Serve<'a> {
    /// At the current version of everything.
    Fresh,
    /// One document at the version `back` writes older.
    Stale(&'a DocId, usize),
    /// A write whose answer its sender never hears.
    Unheard,
}

fn apply<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    req: &mut Request<<R::M as StoreClient>::Doc, <R::M as StoreClient>::Intent>,
    serve: Serve<'_>,
) -> StoreResult<<R::M as StoreClient>::Doc> {
    let before = target(&world.store, &req.op);
    rules.tamper(req, before.as_ref());
    let reader = reader(c, req.id.incarnation.0);
    let result = match serve {
        Serve::Fresh => world.store.fresh(reader, req.op.clone()),
        Serve::Stale(doc, back) => world.store.execute(reader, req.op.clone(), &mut |id, _| {
            if id == doc { back } else { 0 }
        }),
        Serve::Unheard => world.store.unheard(req.op.clone()),
    };
    rules.record(world, c, req, before, &result);
    result
}

/// A fault has hit: it counts against its budget, and liveness counts from now.
fn faulted<M: Modelled, G, X>(world: &mut World<M, G, X>, fault: Fault) {
    match fault {
        Fault::Hold(_) => world.delays += 1,
        Fault::LoseReply(_) => world.lost_replies += 1,
        Fault::Retried(_) => world.retries += 1,
        Fault::LateReply(_) => world.late_replies += 1,
        Fault::Stale { .. } => world.stale_reads += 1,
        Fault::SideFails(_) => world.side_failures += 1,
    }
    world.last_fault = world.time;
}

/// Whether request `id` was sent by client `c`'s current life.
fn sent_by_this_life<M: Modelled, G, X>(world: &World<M, G, X>, c: u8, id: RequestId) -> bool {
    let client = &world.clients[usize::from(c)];
    client.engine.is_some() && id.incarnation.0 == u64::from(client.incarnation)
}

/// The store serves a request held on the wire; its reply reaches the sender if the
/// sender is still the same life, and `fault` hits what that reply sets off (`None`
/// if nothing hears the reply or the fault hits no request).
pub fn serve_held<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    id: RequestId,
    fault: Option<Fault>,
    journal: &mut Option<Vec<String>>,
) -> Option<()> {
    let who = R::ACTOR;
    let unheard = world.given_up.contains(&(c, id));
    if fault.is_some() && (unheard || !sent_by_this_life(world, c, id)) {
        return None;
    }
    let mut req = world.net.remove(&(c, id))?;
    // The network's fault lasts until the late request arrives.
    world.last_fault = world.time;
    // A request its driver gave up on is answered to nobody: its sender's session
    // never learns of it (forgetting the whole session instead let the model serve
    // the sender versions older than its own earlier writes, which Session never does).
    world.given_up.remove(&(c, id));
    let serve = if unheard {
        Serve::Unheard
    } else {
        Serve::Fresh
    };
    let result = apply(rules, world, c, &mut req, serve);
    note(journal, || {
        format!(
            "the store serves {who}{c}'s held {}: {}",
            rules.describe(&req),
            answer(&result)
        )
    });
    if unheard {
        note(journal, || {
            format!("nobody hears it: {who}{c}'s driver gave up on it")
        });
        return Some(());
    }
    reply(rules, world, c, id, result, fault, journal)
}

/// Client `c`'s driver gives up on a request held on the wire: it answers the client
/// with a timeout, and the request may still land later, unheard.
pub fn give_up<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    id: RequestId,
    journal: &mut Option<Vec<String>>,
) -> Option<()> {
    let who = R::ACTOR;
    if !world.net.contains_key(&(c, id)) || !sent_by_this_life(world, c, id) {
        return None;
    }
    if !world.given_up.insert((c, id)) {
        return None;
    }
    note(journal, || {
        format!("{who}{c}'s driver gives up on {id}: a TIMEOUT, though it may still land")
    });
    run(
        rules,
        world,
        c,
        vec![R::M::response(id, Err(StoreError::Timeout))],
        None,
        journal,
    )
}

/// The held requests client `c`'s driver may still give up on: sent by its current
/// life, not given up yet.
pub fn may_give_up<M: Modelled, G, X>(world: &World<M, G, X>) -> Vec<(u8, RequestId)> {
    world
        .net
        .keys()
        .filter(|k| !world.given_up.contains(k) && sent_by_this_life(world, k.0, k.1))
        .copied()
        .collect()
}

/// A reply held on the way back reaches client `c`, if it is still the life that sent
/// the request, and `fault` hits what it sets off (`None` if nothing hears the reply
/// or the fault hits no request).
pub fn deliver<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    id: RequestId,
    fault: Option<Fault>,
    journal: &mut Option<Vec<String>>,
) -> Option<()> {
    let who = R::ACTOR;
    if fault.is_some() && !sent_by_this_life(world, c, id) {
        return None;
    }
    let (result, _) = world.replies.remove(&(c, id))?;
    world.last_fault = world.time;
    note(journal, || {
        format!("{who}{c}'s held reply to {id} arrives: {}", answer(&result))
    });
    reply(rules, world, c, id, result, fault, journal)
}

fn reply<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    id: RequestId,
    result: StoreResult<<R::M as StoreClient>::Doc>,
    fault: Option<Fault>,
    journal: &mut Option<Vec<String>>,
) -> Option<()> {
    let who = R::ACTOR;
    if sent_by_this_life(world, c, id) {
        run(
            rules,
            world,
            c,
            vec![R::M::response(id, result)],
            fault,
            journal,
        )
    } else {
        // The session that sent it is over: nothing it saw bounds anyone's reads.
        world.store.forget(reader(c, id.incarnation.0));
        note(journal, || {
            format!("the reply is lost: {who}{c} is no longer the life that sent it")
        });
        Some(())
    }
}

/// Whether time may move on without a pause: every live client has acted.
pub fn settled<M: Modelled, G, X>(world: &World<M, G, X>) -> bool {
    world.clients.iter().all(|c| c.engine.is_none() || c.acted)
}

/// The writes of a step (and, for late replies, its requests) that faults may hit in
/// the lock models: a step's first two, which cover a claim and what follows it.
pub const FAULTED_WRITES: u8 = 2;

/// The actions every lock model shares, in a fixed order: for each client, its steps
/// (one per choice and fault) or its restart, and its crash; then held requests; then
/// time. `choices(c)` lists what client `c` may do in its step; a fault may hit any of
/// a step's first `faulted` writes (and, for late replies, requests; for a lagging replica, reads).
pub fn actions<M: Modelled, G, X, C: Copy>(
    budget: &Budget,
    world: &World<M, G, X>,
    faulted: u8,
    mut choices: impl FnMut(u8) -> Vec<C>,
    actions: &mut Vec<Action<C>>,
) {
    let faults = Fault::menu_reading(budget, world, faulted, faulted);
    // Crashes and restarts happen at tick boundaries, once every live client has
    // polled: a crash between two clients' polls looks the same to the others.
    let settled = settled(world);
    for (c, client) in world.clients.iter().enumerate() {
        let c = c as u8;
        if client.engine.is_none() {
            if settled {
                actions.push(Action::Restart(c));
            }
            continue;
        }
        if !client.acted {
            for choice in choices(c) {
                actions.extend(faults.iter().map(|f| Action::Step(c, choice, *f)));
            }
        }
        if settled && world.crashes < budget.crashes {
            actions.push(Action::Crash(c));
        }
    }
    actions.extend(world.net.keys().map(|(c, id)| Action::Serve(*c, *id)));
    actions.extend(
        may_give_up(world)
            .into_iter()
            .map(|(c, id)| Action::GiveUp(c, id)),
    );
    actions.extend(world.replies.keys().map(|(c, id)| Action::Deliver(*c, *id)));
    if world.time < budget.horizon {
        if settled {
            actions.push(Action::Advance);
        } else if world.pauses < budget.pauses {
            actions.push(Action::Late);
        }
    }
}

/// One step of a lock model's world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action<C> {
    /// A client polls: it does `C`, with an optional fault on one of its writes.
    Step(u8, C, Option<Fault>),
    /// The store serves a request held on the wire.
    Serve(u8, RequestId),
    /// A reply held on the way back reaches its client.
    Deliver(u8, RequestId),
    /// A client's driver gives up on a request held on the wire (a timeout).
    GiveUp(u8, RequestId),
    /// A client crashes, losing its volatile state (its locks stay in the store).
    Crash(u8),
    /// A crashed client starts again as a new life with the same name.
    Restart(u8),
    /// One tick passes; every live client has polled.
    Advance,
    /// One tick passes while some client has not polled (a pause).
    Late,
}

impl<C> Action<C> {
    /// Whether this is a fault the bounds budget: a step with a fault on one of its
    /// requests, a crash or a pause. Serving, delivering, giving up on a held request
    /// and restarting are the system's own progress.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Action::Step(_, _, Some(_)) | Action::Crash(_) | Action::Late
        )
    }
}

/// Applies the shared actions; `Step` is the model's own.
pub fn shared_step<M: Modelled, G, X: Default, C>(
    world: &mut World<M, G, X>,
    action: &Action<C>,
    engine: impl FnOnce(u8, u8) -> M,
) {
    match *action {
        Action::Crash(c) => crash(world, c),
        Action::Restart(c) => {
            restart(world, c, engine);
            world.clients[usize::from(c)].acted = true;
            world.last_fault = world.time;
        }
        Action::Advance => advance(world, false),
        Action::Late => advance(world, true),
        Action::Step(..) | Action::Serve(..) | Action::Deliver(..) | Action::GiveUp(..) => {}
    }
}

/// Client `c` crashes: its engine and what ran beside it are gone; the requests it
/// left on the wire stay there and may still arrive.
pub fn crash<M: Modelled, G, X: Default>(world: &mut World<M, G, X>, c: u8) {
    let client = &mut world.clients[usize::from(c)];
    // Its session with the store ends with it; a new life starts a new one.
    world.store.forget(reader(c, u64::from(client.incarnation)));
    client.engine = None;
    client.handler = X::default();
    world.crashes += 1;
    world.crashed |= 1 << c;
    world.last_fault = world.time;
}

/// Client `c` exits after a graceful shutdown: like a crash, but no fault.
pub fn exit<M: Modelled, G, X: Default>(world: &mut World<M, G, X>, c: u8) {
    let client = &mut world.clients[usize::from(c)];
    world.store.forget(reader(c, u64::from(client.incarnation)));
    client.engine = None;
    client.handler = X::default();
}

/// Client `c` starts again as its next life.
pub fn restart<M: Modelled, G, X>(
    world: &mut World<M, G, X>,
    c: u8,
    engine: impl FnOnce(u8, u8) -> M,
) {
    let client = &mut world.clients[usize::from(c)];
    client.incarnation += 1;
    client.engine = Some(Sealed::new(engine(c, client.incarnation)));
}

/// One tick passes; `late` if some client still had work due (a pause).
pub fn advance<M: Modelled, G, X>(world: &mut World<M, G, X>, late: bool) {
    world.time += 1;
    if late {
        world.pauses += 1;
        world.last_fault = world.time;
    }
    world.clients.iter_mut().for_each(|c| {
        c.acted = false;
        c.throttled = false;
    });
}

/// The store starts throttling client `c`'s reads until the next tick. `None` if it
/// already does or the budget is spent.
pub fn throttle<M: Modelled, G, X>(
    budget: &Budget,
    world: &mut World<M, G, X>,
    c: u8,
) -> Option<()> {
    let client = &mut world.clients[usize::from(c)];
    if client.throttled || client.engine.is_none() || world.throttles >= budget.throttles {
        return None;
    }
    client.throttled = true;
    world.throttles += 1;
    world.last_fault = world.time;
    Some(())
}

/// Describes a shared action; `choice` names a step's choice.
pub fn describe_action<C>(action: &Action<C>, choice: impl Fn(&C) -> String) -> String {
    match action {
        Action::Step(c, what, f) => format!("c{c} {}{}", choice(what), Fault::describe(f)),
        Action::Serve(c, id) => format!("the store serves c{c}'s held request {id}"),
        Action::Deliver(c, id) => format!("c{c}'s held reply to {id} arrives"),
        Action::GiveUp(c, id) => format!("c{c}'s driver gives up on its held request {id}"),
        Action::Crash(c) => format!("c{c} CRASHES"),
        Action::Restart(c) => format!("c{c} restarts as a new life"),
        Action::Advance => "1 s passes".into(),
        Action::Late => "1 s passes while a client has not polled (a PAUSE)".into(),
    }
}

/// The facts every lock model shows about its clients: time, each client's state and
/// clocks, and the lines `held` gives for an up client's engine.
pub fn client_facts<M: Modelled, G, X>(
    budget: &Budget,
    world: &World<M, G, X>,
    who: char,
    held: impl Fn(u8, &M, Now) -> Vec<(String, String)>,
) -> BTreeMap<String, String> {
    let mut facts = BTreeMap::new();
    facts.insert(" time".into(), format!("{} s", world.time));
    for (c, client) in world.clients.iter().enumerate() {
        let c = c as u8;
        let now = now(budget, world, c);
        let clock = format!(
            "local {:.1} s, wall {:+} s",
            now.local.as_millis() as f64 / 1000.0,
            client.wall_offset
        );
        match &client.engine {
            None => {
                facts.insert(format!("{who}{c}"), format!("down ({clock})"));
            }
            Some(engine) => {
                facts.insert(
                    format!("{who}{c}"),
                    format!("up, life {} ({clock})", client.incarnation),
                );
                facts.extend(held(c, engine, now));
            }
        }
    }
    facts
}

/// The initial worlds: one per clock set-up, every client up in its first life, the
/// given store and ghost.
pub fn initial<M: Modelled, G: Clone, X: Default>(
    clients: u8,
    skew: u8,
    budget: &Budget,
    store: &Container<M::Doc>,
    ghost: &G,
    engine: impl Fn(u8) -> M,
) -> Vec<World<M, G, X>> {
    crate::clocks::setups(clients, budget.drift_ms, skew)
        .into_iter()
        .map(|clocks| World {
            time: 0,
            clients: clocks
                .into_iter()
                .enumerate()
                .map(|(c, (rate, wall_offset))| Client {
                    engine: Some(Sealed::new(engine(c as u8))),
                    incarnation: 0,
                    rate,
                    wall_offset,
                    acted: false,
                    cut: false,
                    throttled: false,
                    handler: X::default(),
                })
                .collect(),
            // As many older versions of each document as a replica may lag by; none
            // is kept when no read may be stale, so that such checks keep their
            // states exactly.
            store: Replicated::new(
                store.clone(),
                if budget.stale_reads > 0 {
                    budget.stale_depth.max(1)
                } else {
                    0
                },
            ),
            net: BTreeMap::new(),
            given_up: BTreeSet::new(),
            replies: BTreeMap::new(),
            crashes: 0,
            pauses: 0,
            delays: 0,
            lost_replies: 0,
            stale_reads: 0,
            late_replies: 0,
            retries: 0,
            throttles: 0,
            side_failures: 0,
            last_fault: 0,
            crashed: 0,
            refused: BTreeSet::new(),
            rewrote_refused: false,
            ghost: ghost.clone(),
        })
        .collect()
}

/// One step of a lock model: `poll` runs a client's own choice; everything else is
/// shared.
pub fn step<R: Rules, C: Copy>(
    rules: &R,
    last: &State<R>,
    action: &Action<C>,
    journal: &mut Option<Vec<String>>,
    poll: impl FnOnce(&mut State<R>, u8, C, Option<Fault>, &mut Option<Vec<String>>) -> Option<()>,
    engine: impl FnOnce(u8, u8) -> R::M,
) -> Option<State<R>> {
    let mut world = last.clone();
    rules.forget_events(&mut world.ghost);
    match *action {
        Action::Step(c, choice, fault) => {
            world.clients[usize::from(c)].acted = true;
            poll(&mut world, c, choice, fault, journal)?;
        }
        Action::Serve(c, id) => serve_held(rules, &mut world, c, id, None, journal)?,
        Action::Deliver(c, id) => deliver(rules, &mut world, c, id, None, journal)?,
        Action::GiveUp(c, id) => give_up(rules, &mut world, c, id, journal)?,
        _ => shared_step(&mut world, action, engine),
    }
    Some(world)
}

/// How many up clients other than `except` hold authority over `id` now, by their
/// own clocks.
pub fn holders<M: Locking, G, X>(
    budget: &Budget,
    world: &World<M, G, X>,
    id: &DocId,
    except: Option<u8>,
) -> usize {
    (0..world.clients.len() as u8)
        .filter(|&c| Some(c) != except)
        .filter(|&c| {
            let local = now(budget, world, c).local;
            world.clients[usize::from(c)]
                .engine
                .as_ref()
                .is_some_and(|e| e.locks().has_authority(id, local))
        })
        .count()
}

/// Whether client `c`, which holds some lock, may poll as one that holds none: a
/// reply to it is held on the way back, and no lock it holds has authority left by its
/// clock. A client polls on its own cadence, not after its calls are answered; the
/// lock models let one that holds a lock poll only then, so that a late answer may
/// meet a new lock on the same document without the states of every other poll.
pub fn polls_beside_held_reply<M: Locking, G, X>(
    budget: &Budget,
    world: &World<M, G, X>,
    c: u8,
) -> bool {
    if !world.replies.keys().any(|(sender, _)| *sender == c) {
        return false;
    }
    no_authority_left(budget, world, c)
}

/// Whether client `c` is up and none of the locks it holds has authority left by
/// its clock.
fn no_authority_left<M: Locking, G, X>(budget: &Budget, world: &World<M, G, X>, c: u8) -> bool {
    let local = now(budget, world, c).local;
    world.clients[usize::from(c)]
        .engine
        .as_ref()
        .is_some_and(|e| {
            let locks = e.locks();
            locks
                .all_held()
                .all(|(id, _)| !locks.has_authority(id, local))
        })
}

/// Whether `action`, taken from `last` to `next`, brought a late answer to a holder's
/// write (a held reply, or a request held on the wire that lands and is answered at
/// once) that changed a lock its client took after the one the write was under: an
/// answer about one lock acted on a newer one. (A lock taken before may rightly be
/// replaced: an acquire's answer supersedes the lease a break still on its way gave
/// up.)
pub fn answer_crossed<M: Locking, G, X, C>(
    last: &World<M, G, X>,
    next: &World<M, G, X>,
    action: &Action<C>,
) -> bool {
    let (c, lock) = match *action {
        Action::Deliver(c, id) => match last.replies.get(&(c, id)) {
            Some((_, Some(lock))) => (c, lock),
            _ => return false,
        },
        Action::Serve(c, id) => match last.net.get(&(c, id)).and_then(|r| r.lock.as_ref()) {
            Some(lock) => (c, lock),
            None => return false,
        },
        _ => return false,
    };
    let locks = |world: &World<M, G, X>| {
        world.clients[usize::from(c)]
            .engine
            .as_ref()
            .map(|e| e.locks().clone())
    };
    let (Some(before), after) = (locks(last), locks(next)) else {
        return false;
    };
    before
        .all_held()
        .filter(|(_, h)| h.token > *lock)
        .any(|(id, h)| after.as_ref().and_then(|a| a.held(id)) != Some(h))
}

/// Whether client `c` is up and holds some lock.
pub fn holds_any<M: Locking, G, X>(world: &World<M, G, X>, c: u8) -> bool {
    world.clients[usize::from(c)]
        .engine
        .as_ref()
        .is_some_and(|e| e.locks().all_held().next().is_some())
}

/// The documents client `c` holds, each with the token of its lock, if it is up: what
/// its handlers name their calls by.
pub fn held<M: Locking, G, X>(world: &World<M, G, X>, c: u8) -> Vec<(DocId, LockToken)> {
    world.clients[usize::from(c)]
        .engine
        .as_ref()
        .map(|e| {
            e.locks()
                .all_held()
                .map(|(id, h)| (id.clone(), h.token.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the liveness guard applies: `ticks` since the last fault, a client up,
/// nothing on the wire.
pub fn calm<M: Modelled, G, X>(world: &World<M, G, X>, ticks: u8) -> bool {
    world.time.saturating_sub(world.last_fault) >= ticks
        && !all_down(world)
        && world.net.is_empty()
        && world.replies.is_empty()
}

/// Whether every client that can reach the store is down: nobody is left to own or
/// process anything. A zombie cut off from the store counts as down: it acts on,
/// but it can neither renew nor watch a heartbeat expire, so a host that restarts
/// beside it starts watching from nothing (the sweep of small bounds found liveness
/// judged from the zombie's fault instead, at 1 × 1 with a zombie whose stuck call
/// kept it from being buried, and its replacement started late).
pub fn all_down<M: Modelled, G, X>(world: &World<M, G, X>) -> bool {
    world.clients.iter().all(|c| c.engine.is_none() || c.cut)
}

/// The requests held on the wire, as facts, each described by `describe`.
pub fn wire_facts<M: Modelled, G, X>(
    world: &World<M, G, X>,
    who: char,
    describe: impl Fn(&Request<M::Doc, M::Intent>) -> String,
) -> BTreeMap<String, String> {
    let held = world.net.iter().map(|((c, id), req)| {
        let unheard = if world.given_up.contains(&(*c, *id)) {
            " (given up on)"
        } else {
            ""
        };
        (
            format!("wire {who}{c} {id}"),
            format!("held: {}{unheard}", describe(req)),
        )
    });
    let replies = world.replies.iter().map(|((c, id), (result, _))| {
        (
            format!("wire {who}{c} {id}"),
            format!("reply held: {}", answer(result)),
        )
    });
    held.chain(replies).collect()
}

/// The lifelines of `clients` clients.
pub fn lanes(clients: u8, who: char) -> Vec<String> {
    (0..clients).map(|c| format!("{who}{c}")).collect()
}

/// Whose lifeline a lock model's action is drawn on.
pub fn lane<C>(action: &Action<C>) -> crate::trace::Lane {
    use crate::trace::Lane;
    match *action {
        Action::Crash(c) => Lane::Crash(c),
        Action::Step(c, ..)
        | Action::Serve(c, _)
        | Action::Deliver(c, _)
        | Action::GiveUp(c, _)
        | Action::Restart(c) => Lane::Actor(c),
        Action::Advance | Action::Late => Lane::Time,
    }
}

/// The facts of every client and the locks it holds, with their authority.
pub fn lock_facts<M: Locking, G, X>(
    budget: &Budget,
    world: &World<M, G, X>,
) -> BTreeMap<String, String> {
    client_facts(budget, world, 'c', |c, engine, now| {
        engine
            .locks()
            .all_held()
            .map(|(id, held)| {
                let what = if now.local < held.authority_until {
                    format!(
                        "holds under {}, authority until {}",
                        held.token,
                        crate::trace::seconds(held.authority_until)
                    )
                } else {
                    format!("holds under {}, authority LAPSED", held.token)
                };
                (format!("c{c} {id}"), what)
            })
            .collect()
    })
}
