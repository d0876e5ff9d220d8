//! The stateright model of item leases: holders running the engine's [`Leaser`]
//! against the reference store, with the queue model's clocks and faults.

use crate::clocks::WALL_BASE;
use crate::limits::BoundsError;
use crate::lock_config::{LockBounds, LockBug, LockKind};
use crate::transitions::Transitions;
use crate::world::Fault;
use crate::world::{self, Action, Budget, Locking, Request, Rules, World, note};
use leasehold_engine::item_lease::{
    Candidate, Input, Item, ItemError, ItemHandle, ItemIntent, ItemKey, ItemState, Leaser,
    LeaserConfig, Output, Selector,
};
use leasehold_engine::lock::Locks;
use leasehold_engine::store::StoreResult;
use leasehold_engine::store::{Container, Document, Op};
use leasehold_engine::{DocId, HostId, Incarnation, PartitionKey, WallTime};
use stateright::Property;
use std::collections::BTreeMap;
use std::sync::Arc;

impl world::Modelled for Leaser {}

impl Locking for Leaser {
    fn locks(&self) -> &Locks {
        Leaser::locks(self)
    }
}

/// What a holder does when it polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemChoice {
    /// `next_for_state` (when it holds nothing).
    Next,
    /// `acquire` one item (when it holds nothing).
    Acquire(u8),
    /// Process what it holds: save it as done and release it.
    Process,
    /// Break what it holds.
    Break,
    /// Renew what it holds.
    Renew,
    /// `next_for_state` while the task of a lease it holds overran the lease's
    /// authority and works on (while the bound allows): the task keeps its lease, and
    /// the holder, which takes its own items, may lease the item again for another
    /// task.
    Overrun,
    /// The overrun task is done and saves its item as done under the lease it kept.
    SaveKept,
    /// The overrun task fails and breaks the lease it kept.
    BreakKept,
    /// The overrun task asks for more time under the lease it kept (a renewal,
    /// within the renewals' budget). Granted, the task is back within its authority
    /// and its holder processes the item as any other it holds; refused, the task
    /// knows its lease is gone.
    RenewKept,
}

/// What runs beside a holder's engine: the lease a task that overran its authority
/// keeps working under, named as the task names it.
pub type Kept = Option<ItemHandle>;

/// History the item-lease properties need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ItemGhost {
    /// Per item: processed (saved as done).
    pub done: Vec<bool>,
    /// `next_for_state` leased an item another up holder still held with authority.
    pub handed_out_held: bool,
    /// Breaks chosen so far.
    pub give_backs: u8,
    /// Renewals chosen so far.
    pub renewals: u8,
    /// Task overruns chosen so far.
    pub overruns: u8,
    /// An overrun task's call changed a lease its holder held under another token:
    /// it acted under a later lease of the item, another task's.
    pub task_crossed: bool,
    /// An answer to a holder's write, arriving late (its reply held, or its request
    /// held on the wire), changed a lease its holder held under another token.
    pub crossed_answer: bool,
    /// What the step into this state did, for the `sometimes` properties.
    pub events: ItemEvents,
}

/// What one step did that an item `sometimes` property looks for; each step starts
/// with none (see [`crate::Events`] for why).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ItemEvents {
    /// `next_for_state` took over an item whose holder had crashed.
    pub takeover_after_crash: bool,
    /// An acquire was refused with `LeaseHeld`.
    pub lease_held: bool,
    /// A holder broke its lease.
    pub broken: bool,
    /// An overrun task's save or break was refused while its holder held the item
    /// under a later lease.
    pub kept_refused: bool,
}

/// The item-lease model.
#[derive(Clone, Debug)]
pub struct ItemModel {
    /// The bounds.
    pub bounds: LockBounds,
    /// The holders' settings.
    pub config: LeaserConfig,
    /// Ticks after the last fault from which every item must be processed.
    pub liveness_ticks: u8,
    /// The engine transitions its checks computed, shared by its clones and reused
    /// across states ([`Transitions`]).
    pub transitions: Arc<Transitions<Leaser>>,
    /// Every item's key, by index: the properties look them up in every state, and
    /// formatting them there took 2 % of the check.
    keys: Vec<ItemKey>,
}

/// EDC's early `nextForState`: `lease = null OR leasedBy = me`, by name.
fn unleased_or_mine(c: &Candidate<'_>) -> bool {
    c.item.lease.as_ref().is_none_or(|l| l.holder() == c.me)
}

/// Processing: save the item as done and release it.
fn save_done(lease: ItemHandle) -> Input {
    Input::Save {
        lease,
        state: ItemState::from(DONE),
        release: true,
    }
}

/// The state items wait in, and the state processing moves them to.
const WAITING: &str = "REQUESTED";
const DONE: &str = "DONE";

impl ItemModel {
    /// A model of `bounds`.
    pub fn new(bounds: LockBounds) -> Result<ItemModel, BoundsError> {
        bounds.validate(LockKind::Items)?;
        if bounds.policy().authority_span(bounds.lock_duration()) == leasehold_engine::Millis::ZERO
        {
            return Err(BoundsError::LockSettings(
                "the lease leaves no authority".into(),
            ));
        }
        let select = match bounds.bug {
            Some(LockBug::NextForStateNoExpiry) => Selector {
                name: "edc-early",
                pick: unleased_or_mine,
            },
            _ => Selector::AVAILABLE,
        };
        let known_bad = match bounds.bug {
            Some(LockBug::ItemEngine(bad)) => Some(bad),
            _ => None,
        };
        let config = LeaserConfig {
            policy: bounds.policy(),
            select,
            known_bad,
            ..LeaserConfig::new("it")
        };
        Ok(ItemModel {
            liveness_ticks: bounds.liveness_ticks(LockKind::Items),
            keys: (0..bounds.docs).map(Self::key).collect(),
            bounds,
            config,
            // The memo only pays where the engine's step is the cost (BENCHMARKS.md).
            transitions: Arc::new(Transitions::with_capacity(0)),
        })
    }

    /// The key of item `i`.
    pub fn key(i: u8) -> ItemKey {
        let id = format!("it{i}");
        ItemKey {
            pk: PartitionKey::from(id.as_str()),
            id: DocId::from(id),
        }
    }

    fn index(id: &DocId) -> usize {
        id.as_str()[2..].parse().unwrap_or(0)
    }

    fn engine(&self, c: u8, life: u8) -> Leaser {
        Leaser::new(
            HostId::from(format!("c{c}")),
            Incarnation(u64::from(life)),
            self.config.clone(),
        )
    }

    fn step(
        &self,
        last: &ItemsState,
        action: &ItemAction,
        journal: &mut Option<Vec<String>>,
    ) -> Option<ItemsState> {
        let mut next = world::step(
            self,
            last,
            action,
            journal,
            |state, c, choice, fault, journal| self.poll(state, c, choice, fault, journal),
            |c, life| self.engine(c, life),
        )?;
        next.ghost.crossed_answer |= world::answer_crossed(last, &next, action);
        if let Action::Step(
            c,
            ItemChoice::SaveKept | ItemChoice::BreakKept | ItemChoice::RenewKept,
            _,
        ) = *action
        {
            // A task calls on its own thread: its holder still polls this tick.
            let c = usize::from(c);
            next.clients[c].acted = last.clients[c].acted;
        }
        Some(next)
    }

    fn poll(
        &self,
        state: &mut ItemsState,
        c: u8,
        choice: ItemChoice,
        fault: Option<Fault>,
        journal: &mut Option<Vec<String>>,
    ) -> Option<()> {
        state.clients[usize::from(c)].engine.as_ref()?;
        // The overrun task's lease is its own to save or break.
        let kept = state.clients[usize::from(c)].handler.clone();
        let mut held = self.handles(state, c);
        held.retain(|h| Some(h) != kept.as_ref());
        let duration = self.bounds.lock_duration();
        let inputs = match choice {
            ItemChoice::Next => vec![Input::NextForState {
                state: ItemState::from(WAITING),
                limit: usize::from(self.bounds.batch),
                duration,
            }],
            ItemChoice::Acquire(i) => vec![Input::Acquire {
                item: self.keys[usize::from(i)].clone(),
                duration,
            }],
            ItemChoice::Process => held.into_iter().map(save_done).collect(),
            ItemChoice::Overrun => {
                // The task works on past its authority: the item may wait out its
                // lease, so liveness is measured from it.
                state.ghost.overruns += 1;
                state.last_fault = state.time;
                state.clients[usize::from(c)].handler = held.into_iter().next();
                vec![Input::NextForState {
                    state: ItemState::from(WAITING),
                    limit: usize::from(self.bounds.batch),
                    duration,
                }]
            }
            ItemChoice::SaveKept | ItemChoice::BreakKept | ItemChoice::RenewKept => {
                let kept = state.clients[usize::from(c)].handler.take()?;
                let call = match choice {
                    ItemChoice::SaveKept => save_done(kept.clone()),
                    ItemChoice::BreakKept => {
                        // A task failure: liveness is measured from it, as from a break.
                        state.last_fault = state.time;
                        Input::Break(kept.clone())
                    }
                    _ => {
                        // More time asked for puts the work off, as a renewal does.
                        state.ghost.renewals += 1;
                        state.last_fault = state.time;
                        Input::Renew(kept.clone())
                    }
                };
                let token = (&kept.item.id, &kept.token);
                let verdict = world::run_kept(self, state, c, call, token, fault, journal)?;
                state.ghost.task_crossed |= verdict.crossed;
                state.ghost.events.kept_refused = verdict.later && !verdict.crossed;
                return Some(());
            }
            ItemChoice::Break => {
                state.ghost.give_backs += 1;
                state.last_fault = state.time;
                held.into_iter().map(Input::Break).collect()
            }
            ItemChoice::Renew => {
                // A renewal is the handler asking for more time: like an abandon, it
                // puts the work off, so liveness is measured from it.
                state.ghost.renewals += 1;
                state.last_fault = state.time;
                held.into_iter().map(Input::Renew).collect()
            }
        };
        world::run(self, state, c, inputs, fault, journal)
    }

    /// What an overrun task may call under the lease it kept.
    fn kept_calls(&self, state: &ItemsState) -> Vec<ItemChoice> {
        let mut calls = vec![ItemChoice::SaveKept, ItemChoice::BreakKept];
        if state.ghost.renewals < self.bounds.renewals {
            calls.push(ItemChoice::RenewKept);
        }
        calls
    }

    /// The leases holder `c` holds, as their tasks name them.
    fn handles(&self, state: &ItemsState, c: u8) -> Vec<ItemHandle> {
        world::held(state, c)
            .into_iter()
            .map(|(id, token)| ItemHandle {
                item: self.keys[Self::index(&id)].clone(),
                token,
            })
            .collect()
    }

    /// Takes `action` from `state`, telling what happened inside the step.
    pub fn explain(
        &self,
        state: &ItemsState,
        action: &ItemAction,
    ) -> (Option<ItemsState>, Vec<String>) {
        let mut journal = Some(Vec::new());
        let next = self.step(state, action, &mut journal);
        (next, journal.unwrap_or_default())
    }

    /// Whether the liveness guard applies.
    pub fn calm(&self, s: &ItemsState) -> bool {
        world::calm(s, self.liveness_ticks)
    }
}

/// A state of the item-lease model.
pub type ItemsState = World<Leaser, ItemGhost, Kept>;
/// An action of the item-lease model.
pub type ItemAction = Action<ItemChoice>;

impl Rules for ItemModel {
    type M = Leaser;
    type Ghost = ItemGhost;
    type Handler = Kept;

    fn budget(&self) -> Budget {
        self.bounds.budget()
    }

    fn transitions(&self) -> &Transitions<Leaser> {
        &self.transitions
    }

    fn forget_events(&self, ghost: &mut ItemGhost) {
        ghost.events = ItemEvents::default();
    }

    fn tamper(&self, req: &mut Request<Item, ItemIntent>, _: Option<&Item>) {
        if self.bounds.bug == Some(LockBug::BlindLease)
            && req.intent == ItemIntent::Lease
            && let Op::Replace { if_match, .. } = &mut req.op
        {
            *if_match = None;
        }
    }

    fn record(
        &self,
        world: &mut ItemsState,
        client: u8,
        req: &Request<Item, ItemIntent>,
        before: Option<Item>,
        result: &StoreResult<Item>,
    ) {
        let Op::Replace { doc, .. } = &req.op else {
            return;
        };
        if result.is_err() {
            return;
        }
        let i = Self::index(doc.id());
        match req.intent {
            ItemIntent::Lease | ItemIntent::Acquire => {
                if req.intent == ItemIntent::Lease
                    && world::holders(&self.bounds.budget(), world, doc.id(), Some(client)) > 0
                {
                    world.ghost.handed_out_held = true;
                }
                let previous = before
                    .as_ref()
                    .and_then(|b| b.lease.as_ref().map(|l| l.holder().clone()));
                if let Some(holder) = previous {
                    let k: u8 = holder.as_str()[1..].parse().unwrap_or(0);
                    if k != client && world.crashed & (1 << k) != 0 {
                        world.ghost.events.takeover_after_crash = true;
                    }
                }
            }
            ItemIntent::Save if doc.state.0 == DONE => world.ghost.done[i] = true,
            ItemIntent::Break => world.ghost.events.broken = true,
            _ => {}
        }
    }

    fn output(
        &self,
        world: &mut ItemsState,
        c: u8,
        output: Output,
        _fails: bool,
        journal: &mut Option<Vec<String>>,
    ) -> Option<Input> {
        if let Output::Failed {
            error: ItemError::LeaseHeld { .. },
            ..
        } = &output
        {
            world.ghost.events.lease_held = true;
        }
        note(journal, || match &output {
            Output::Leased(grants) => {
                let items: Vec<String> = grants
                    .iter()
                    .map(|g| format!("{} under {}", g.item, g.token))
                    .collect();
                format!("c{c} leased [{}]", items.join(", "))
            }
            Output::Failed {
                item,
                intent,
                error,
            } => format!("c{c}: {intent} of {item} failed: {error}"),
            Output::Acquired(g) => format!("c{c} leased {} under {}", g.item, g.token),
            Output::Renewed {
                item,
                authority_until,
            } => format!(
                "c{c} renewed {item}, authority until {}",
                crate::trace::seconds(*authority_until)
            ),
            Output::Broken(item) => format!("c{c} gave up {item}"),
            Output::Saved(item) => format!("c{c} moved {item} to its new state"),
            Output::Request(req) => format!("c{c} asks to {} (sent by the driver)", req.intent),
        });
        None
    }

    fn describe(&self, req: &Request<Item, ItemIntent>) -> String {
        let target = match &req.op {
            Op::Replace { doc, if_match } => match if_match {
                Some(e) => format!("{} if-match {e:?}", doc.id()),
                None => format!("{} BLIND (no if-match)", doc.id()),
            },
            Op::ReadAll { .. } | Op::Query(_) => "the items".into(),
            Op::Read { id, .. } | Op::Delete { id, .. } => id.to_string(),
            Op::Create(doc) => doc.id().to_string(),
            Op::Batch { .. } => "a batch".into(),
        };
        format!("{} {target}", req.intent)
    }
}

impl crate::check::Checkable for ItemModel {
    fn is_fault(&self, action: &Self::Action) -> bool {
        action.is_fault()
    }
}

impl stateright::Model for ItemModel {
    type State = ItemsState;
    type Action = ItemAction;

    fn init_states(&self) -> Vec<ItemsState> {
        let docs = usize::from(self.bounds.docs);
        let mut store = Container::new();
        for i in 0..self.bounds.docs {
            let key = Self::key(i);
            let at = WallTime(WALL_BASE - 10_000 + i64::from(i));
            store
                .create(Item::new(key.id, key.pk, ItemState::from(WAITING), at))
                .expect("room for every item");
        }
        let ghost = ItemGhost {
            done: vec![false; docs],
            ..ItemGhost::default()
        };
        let budget = self.bounds.budget();
        world::initial(
            self.bounds.clients,
            self.bounds.skew,
            &budget,
            &store,
            &ghost,
            |c| self.engine(c, 0),
        )
    }

    fn actions(&self, state: &ItemsState, actions: &mut Vec<ItemAction>) {
        let budget = self.bounds.budget();
        world::actions(
            &budget,
            state,
            world::FAULTED_WRITES,
            |c| {
                let idle = !world::holds_any(state, c);
                let kept = &state.clients[usize::from(c)].handler;
                if let Some(kept) = kept.as_ref().filter(|_| !idle) {
                    // The overrun task works on while its holder polls on its own
                    // cadence, and may lease the item again, for a task that does
                    // not overrun.
                    let next = if self.handles(state, c).iter().all(|h| h == kept) {
                        ItemChoice::Next
                    } else {
                        ItemChoice::Process
                    };
                    let mut choices = vec![next];
                    choices.extend(self.kept_calls(state));
                    return choices;
                }
                let mut choices = Vec::new();
                if kept.is_some() {
                    choices.extend(self.kept_calls(state));
                }
                if idle || world::polls_beside_held_reply(&budget, state, c) {
                    choices.push(ItemChoice::Next);
                    choices.extend(
                        (0..self.bounds.docs)
                            .filter(|&i| !state.ghost.done[usize::from(i)])
                            .map(ItemChoice::Acquire),
                    );
                }
                if idle {
                    return choices;
                }
                choices.push(ItemChoice::Process);
                if state.ghost.give_backs < self.bounds.give_backs {
                    choices.push(ItemChoice::Break);
                }
                if state.ghost.renewals < self.bounds.renewals {
                    choices.push(ItemChoice::Renew);
                }
                if state.ghost.overruns < self.bounds.overruns {
                    choices.push(ItemChoice::Overrun);
                }
                choices
            },
            actions,
        );
    }

    fn next_state(&self, last: &ItemsState, action: ItemAction) -> Option<ItemsState> {
        self.step(last, &action, &mut None)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(EXCLUSIVE, |m: &ItemModel, s: &ItemsState| {
                m.keys
                    .iter()
                    .all(|k| world::holders(&m.bounds.budget(), s, &k.id, None) <= 1)
            }),
            Property::always(NEXT_SAFE, |_, s: &ItemsState| !s.ghost.handed_out_held),
            Property::always(ANSWER_OWN_LEASE, |_, s: &ItemsState| {
                !s.ghost.crossed_answer
            }),
            Property::always(PROCESSED, |m: &ItemModel, s: &ItemsState| {
                !m.calm(s) || s.ghost.done.iter().all(|&d| d)
            }),
            Property::sometimes(TAKEOVER, |_, s: &ItemsState| {
                s.ghost.events.takeover_after_crash
            }),
            Property::sometimes(LEASE_HELD, |_, s: &ItemsState| s.ghost.events.lease_held),
            Property::sometimes(BROKEN, |_, s: &ItemsState| s.ghost.events.broken),
            Property::sometimes(CALM_AFTER_CRASH, |m: &ItemModel, s: &ItemsState| {
                s.crashes > 0 && m.calm(s)
            }),
        ];
        // Only where tasks overrun: elsewhere they would hold vacuously and never be
        // reached.
        if self.bounds.overruns > 0 {
            properties.extend([
                Property::always(TASK_OWN_LEASE, |_, s: &ItemsState| !s.ghost.task_crossed),
                Property::sometimes(KEPT_REFUSED, |_, s: &ItemsState| {
                    s.ghost.events.kept_refused
                }),
            ]);
        }
        properties
    }

    fn within_boundary(&self, state: &ItemsState) -> bool {
        state.time <= self.bounds.horizon
    }

    fn as_svg(&self, path: stateright::Path<ItemsState, ItemAction>) -> Option<String> {
        Some(crate::svg::sequence_diagram(self, path))
    }

    fn format_action(&self, action: &ItemAction) -> String {
        world::describe_action(action, |choice| match choice {
            ItemChoice::Next => "polls: next_for_state".into(),
            ItemChoice::Acquire(i) => format!("polls: acquire it{i}"),
            ItemChoice::Process => "polls: process what it holds (save as DONE, release)".into(),
            ItemChoice::Break => "polls: BREAK what it holds".into(),
            ItemChoice::Renew => "polls: renew what it holds".into(),
            ItemChoice::Overrun => "polls: next_for_state while its task OVERRUNS".into(),
            ItemChoice::SaveKept => {
                "hears from its overrun task: save the item it kept as DONE".into()
            }
            ItemChoice::BreakKept => "hears from its overrun task: BREAK the lease it kept".into(),
            ItemChoice::RenewKept => "hears from its overrun task: renew the lease it kept".into(),
        })
    }
}

/// Item-lease exclusivity.
pub const EXCLUSIVE: &str = "items: no item leased by two holders with authority";
/// `next_for_state` safety.
pub const NEXT_SAFE: &str = "items: next_for_state never hands out an item a live holder holds";
/// A holder's answer that comes late is about the lease it was sent for.
pub const ANSWER_OWN_LEASE: &str =
    "items: a late answer to a holder's write leaves the holder's other leases as they were";
/// A task's call is about the lease it was granted.
pub const TASK_OWN_LEASE: &str = "items: an overrun task's save, renewal or break leaves a \
     later lease of its item, another task's, as it was";
/// Liveness.
pub const PROCESSED: &str = "items: every item processed once faults stop";
/// Non-vacuity of exclusivity and of `next_for_state`.
pub const TAKEOVER: &str = "sometimes: a crashed holder's item is taken over";
/// Non-vacuity of `acquire`'s refusal.
pub const LEASE_HELD: &str = "sometimes: acquire is refused with LeaseHeld";
/// Non-vacuity of `break`.
pub const BROKEN: &str = "sometimes: a holder breaks its lease";
/// Non-vacuity of the task's own lease.
pub const KEPT_REFUSED: &str = "sometimes: an overrun task saves, renews or breaks while its \
     holder holds a later lease of the item";
/// Non-vacuity of the liveness guard.
pub const CALM_AFTER_CRASH: &str = "sometimes: processing is checked after a crash";

impl crate::trace::Explain for ItemModel {
    fn explain(
        &self,
        state: &ItemsState,
        action: &ItemAction,
    ) -> (Option<ItemsState>, Vec<String>) {
        ItemModel::explain(self, state, action)
    }

    fn lanes(&self) -> Vec<String> {
        world::lanes(self.bounds.clients, Self::ACTOR)
    }

    fn lane(&self, action: &ItemAction) -> crate::trace::Lane {
        world::lane(action)
    }

    fn facts(&self, state: &ItemsState) -> BTreeMap<String, String> {
        let mut facts = world::lock_facts(&self.bounds.budget(), state);
        facts.extend(world::wire_facts(state, Self::ACTOR, |req| {
            self.describe(req)
        }));
        for stored in state.store.iter() {
            let lease = match &stored.doc.lease {
                Some(l) => format!("leased by {}", l.token),
                None => "no lease".into(),
            };
            facts.insert(
                format!("item {}", stored.doc.id),
                format!("{}, {lease}, {:?}", stored.doc.state, stored.etag),
            );
        }
        facts
    }
}
