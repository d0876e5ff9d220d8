//! The partition-lease host state machine.

mod beat;
mod replan;
mod respond;
mod split;
mod table;
mod tenure;
mod wake;
mod write;

use super::agenda::Agenda;
use super::creates::Creates;
use super::membership::Membership;
use super::memo::PlanMemo;
use super::phase::Phase;
use super::reads::TableReads;
use super::session::Sessions;
use super::slot::{Own, ReleaseTo, Slot};
use super::timer::Timer;
use super::wire::{Aim, Wire};
use super::{
    CheckpointPolicy, ConfigError, Input, InputError, KnownBad, LeaseConfig, LeaseDocument,
    LossCause, Output, Record, StopReason, StoreRequest,
};
use crate::expiry::Observation;
use crate::ids::{Epoch, Etag, HostId, Incarnation, LeaseToken, RequestId, Session, Tenure};
use crate::lease::Intent;
use crate::store::Op;
use crate::time::{LocalTime, Millis, Now};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// One host's side of the partition-lease protocol, as a sans-IO state machine.
///
/// Feed it [`Input`]s with [`handle_input`](Self::handle_input), then drain
/// [`poll_output`](Self::poll_output) and sleep until [`poll_timeout`](Self::poll_timeout)
/// (the next wake-up time), in the manner of quinn-proto's `Connection`.
///
/// Rules it keeps:
/// - It processes a lease only while it holds *authority*, which comes only from a
///   conditional write it sent that succeeded, and lasts
///   [`ExpiryPolicy::authority_span`](crate::ExpiryPolicy::authority_span) from the
///   moment the write was sent. It stops before any other host may consider the lease
///   expired.
/// - Every write to a lease is conditional on the etag it last saw, so a write also
///   proves ownership. On 412, 404 or a change of owner the lease is lost and
///   processing stops at once; the host then re-reads the lease.
/// - A lease taken before it expired (a steal) is not processed until the version it
///   replaced would have expired, so the previous owner's authority is over.
/// - A session lasts from its [`Output::Start`] until the driver reports
///   [`Input::Stopped`], whatever stopped it. Until then the lease is not started
///   again on this host, and a session that starts after authority lapsed carries a
///   higher epoch than the call that may still be running.
///
/// ```
/// use leasehold_engine::lease::{Input, LeaseConfig, LeaseHost, Output, Record};
/// use leasehold_engine::store::Container;
/// use leasehold_engine::{HostId, Incarnation, LeaseToken, LocalTime, Now, WallTime};
///
/// let config = LeaseConfig {
///     partitions: vec![LeaseToken::from("0"), LeaseToken::from("1")],
///     ..LeaseConfig::default()
/// };
/// let mut host = LeaseHost::new(HostId::from("host-a"), config, Incarnation(0)).unwrap();
/// let mut store = Container::<Record>::new();
/// let now = Now::new(LocalTime::ZERO, WallTime(1_700_000_000_000));
///
/// let mut started = Vec::new();
/// let mut inputs = vec![Input::Tick];
/// while let Some(input) = inputs.pop() {
///     host.handle_input(now, input).unwrap();
///     while let Some(output) = host.poll_output() {
///         match output {
///             // A real driver sends this over the network; here the store answers at once.
///             Output::Request(req) => inputs.push(Input::Response {
///                 id: req.id,
///                 result: store.execute(req.op),
///             }),
///             Output::Start { lease, epoch, .. } => started.push((lease, epoch.0)),
///             _ => {}
///         }
///     }
/// }
/// started.sort();
/// assert_eq!(started, [(LeaseToken::from("0"), 1), (LeaseToken::from("1"), 1)]);
/// assert!(host.poll_timeout().is_some());
/// ```
#[derive(Clone, Debug)]
pub struct LeaseHost {
    me: HostId,
    incarnation: Incarnation,
    /// Sessions started and not yet reported stopped.
    sessions: Sessions,
    /// Shared, not copied: hosts are cloned with every state a model checker makes.
    config: Arc<LeaseConfig>,
    phase: Phase,
    /// The latest time seen; inputs never move the clock backwards.
    now: Now,
    slots: BTreeMap<LeaseToken, Slot>,
    /// Which leases an input can concern: those this host owns or must re-read, and
    /// which of them the next input must look at. A host sees every lease of the
    /// table, and visiting them all on every input made large tables quadratic.
    agenda: Agenda,
    /// Its own heartbeat and the other hosts'.
    membership: Membership,
    /// Its requests in flight.
    wire: Wire,
    /// The leases it is creating, and those it created with an unknown outcome.
    creates: Creates,
    /// When it reads the table and plans next, and whether the whole table must be
    /// read.
    table: TableReads,
    /// What the group looked like to the last plan, if a walk may be skipped.
    memo: PlanMemo,
    out: VecDeque<Output>,
}

/// The host's state as the model checker sees it: everything but the index derived
/// from it (the agenda), which says where to look, not what is there, and the memo
/// of the last plan, which says whether to walk, not what a walk finds.
/// Destructured in full, so that a new field must be placed on one side or the other.
/// The configuration comes apart from the rest: equality compares it, but hashing
/// skips it (see the `Hash` impl).
macro_rules! hashed_state {
    ($host:expr) => {{
        let LeaseHost {
            me,
            incarnation,
            sessions,
            config,
            phase,
            now,
            slots,
            agenda: _,
            membership,
            wire,
            creates,
            table,
            memo: _,
            out,
        } = $host;
        (
            config,
            (
                (me, incarnation, sessions, phase, now, slots),
                (membership, wire, creates),
                (table, out),
            ),
        )
    }};
}

impl PartialEq for LeaseHost {
    fn eq(&self, other: &LeaseHost) -> bool {
        hashed_state!(self) == hashed_state!(other)
    }
}

impl Eq for LeaseHost {}

/// Skips the configuration, which never changes after `new`: hosts hashed together
/// (a model checker's states) share one, and its partition list and strings would be
/// hashed again for every host of every state. Equal hosts still hash equally.
impl std::hash::Hash for LeaseHost {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        hashed_state!(self).1.hash(state);
    }
}

/// A read-only view of one lease as a host knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseState<'a> {
    /// The lease document as last seen.
    pub doc: &'a LeaseDocument,
    /// Its etag as last seen.
    pub etag: &'a Etag,
    /// The epoch this host owns it at, if it does.
    pub owned: Option<Epoch>,
    /// Whether the handler is processing it (started and not yet stopped).
    pub processing: bool,
    /// When this host's authority over it ends.
    pub authority_until: Option<LocalTime>,
}

impl LeaseHost {
    /// A host named `me` with `config`, which is validated first.
    ///
    /// `incarnation` must differ from that of every earlier life of a host with the
    /// same name (see [`Incarnation`]).
    ///
    /// The driver must answer every request exactly once; a reply that never comes
    /// is answered with [`StoreError::Timeout`](crate::store::StoreError::Timeout),
    /// since a lease with a request in flight is not written again until it is.
    pub fn new(
        me: HostId,
        config: LeaseConfig,
        incarnation: Incarnation,
    ) -> Result<LeaseHost, ConfigError> {
        if me.is_blank() {
            return Err(ConfigError::BlankHostId(me));
        }
        config.validate()?;
        let agenda = Agenda::new(&config.partitions);
        let legacy = config.known_bad == Some(KnownBad::RestartSameEpoch);
        Ok(LeaseHost {
            me,
            incarnation,
            sessions: Sessions::new(incarnation, legacy),
            config: Arc::new(config),
            phase: Phase::Running,
            now: Now::default(),
            slots: BTreeMap::new(),
            agenda,
            membership: Membership::new(),
            wire: Wire::default(),
            creates: Creates::default(),
            table: TableReads::default(),
            memo: PlanMemo::default(),
            out: VecDeque::new(),
        })
    }

    /// This host's id.
    pub fn id(&self) -> &HostId {
        &self.me
    }

    /// This life of the host.
    pub fn incarnation(&self) -> Incarnation {
        self.incarnation
    }

    /// This host's configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Whether a graceful shutdown has completed.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// Whether it was told to shut down and processes on through its leave notice
    /// (see [`LeaseConfig::leave_notice`]), its heartbeat marked as leaving.
    pub fn is_leaving(&self) -> bool {
        self.phase == Phase::Running && self.membership.beat.leave_at().is_some()
    }

    /// Whether it runs: no graceful shutdown has begun.
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    /// Whether this life's heartbeat is gone: deleted at a shutdown, or never stored.
    pub fn has_left(&self) -> bool {
        !self.uses_heartbeats() || self.membership.beat.has_left()
    }

    /// Under session liveness, the tenure this host's stored heartbeat vouches for:
    /// a lease holds authority for it only while the lease names this tenure.
    pub fn tenure(&self) -> Option<Tenure> {
        self.membership.beat.tenure()
    }

    /// How many store requests are outstanding.
    pub fn outstanding(&self) -> usize {
        self.wire.outstanding()
    }

    /// Every lease this host has seen, by token.
    pub fn leases(&self) -> impl Iterator<Item = LeaseState<'_>> {
        self.slots.iter().map(|(token, slot)| LeaseState {
            doc: slot.doc(),
            etag: slot.etag(),
            owned: slot.own().map(|o| o.epoch),
            processing: self.sessions.is_live(token),
            authority_until: slot.own().and_then(|o| o.authority_until),
        })
    }

    /// Every session started and not yet reported stopped, lost ones included.
    pub fn sessions(&self) -> impl Iterator<Item = (&LeaseToken, &super::Run)> {
        self.sessions.iter()
    }

    /// The epoch at which this host is entitled to process `lease` at local time
    /// `now`: a session of it runs or drains, and its authority has not run out. This
    /// is the ground truth exclusivity is checked against.
    pub fn authority(&self, lease: &LeaseToken, now: LocalTime) -> Option<Epoch> {
        let own = self.slots.get(lease)?.own()?;
        let run = self.sessions.get(lease)?;
        (!run.is_lost() && run.epoch == own.epoch && own.has_authority(now)).then_some(own.epoch)
    }

    /// Whether `lease`'s writes wait at local time `now`: a request of it is on the
    /// wire, or the host backs off after one failed (a write, a re-read, or the read
    /// that confirms a claimant before a handoff). A checkpoint the handler reports
    /// meanwhile goes out once they may go again; the simulator's replay check counts
    /// it as held back by the store, not by the policy.
    pub fn writes_wait(&self, lease: &LeaseToken, now: LocalTime) -> bool {
        self.slots.get(lease).is_some_and(|s| !s.can_send(now))
    }

    /// When this host's authority over `lease` in `session` runs out, on its local
    /// clock, as far as it knows now: the deadline a handler checks before an effect
    /// that must not outlive the lease. `None` when that session does not run here
    /// with authority (lost, released, stopped, or another session). A renewal moves
    /// it later; a loss or a release ends it.
    pub fn authority_until(&self, lease: &LeaseToken, session: Session) -> Option<LocalTime> {
        let own = self.slots.get(lease)?.own()?;
        let run = self.sessions.get(lease)?;
        (run.session == session && !run.is_lost() && run.epoch == own.epoch)
            .then_some(own.authority_until)
            .flatten()
    }

    /// Handles one input at time `now`.
    ///
    /// An input the host cannot accept returns an error and changes nothing but the
    /// host's clock, which still moves to `now` (it never goes back). Once a graceful
    /// shutdown has finished, every input is ignored.
    pub fn handle_input(&mut self, now: Now, input: Input) -> Result<(), InputError> {
        if self.phase == Phase::Finished {
            if let Input::Response { id, .. } = &input {
                self.wire.answered(id);
            }
            return Ok(());
        }
        let now = self.advance(now);
        match input {
            Input::Tick => {}
            Input::Response { id, result } => {
                let pending = self
                    .wire
                    .answered(&id)
                    .ok_or(InputError::UnknownRequest(id))?;
                self.on_response(now, pending, result);
            }
            Input::Shutdown => self.on_shutdown(now),
            Input::Checkpoint {
                lease,
                session,
                checkpoint,
                items,
            } => {
                let counts = matches!(
                    self.config.checkpoint,
                    CheckpointPolicy::AtMostEveryItems(_)
                );
                let own = self.processing(&lease, session)?;
                own.checkpoint = Some(checkpoint);
                if counts {
                    own.unsent_items = own.unsent_items.saturating_add(items);
                }
                self.touch(&lease);
            }
            Input::Split {
                lease,
                session,
                children,
            } => self.on_split(lease, session, children)?,
            Input::Stopped { lease, session } => {
                // Idempotent: a late or duplicate acknowledgement changes nothing.
                if self.sessions.stopped(&lease, session) {
                    self.touch(&lease);
                    // A lease the plan could not take while this session ran (one
                    // given up after the stop timeout, alone in the group) can be
                    // taken now: plan again at the next read of the heartbeats.
                    self.table.unsettle();
                }
            }
        }
        self.drive(now);
        self.check_agenda();
        Ok(())
    }

    /// What this host holds of `lease` while `session` may still report on it
    /// (running or draining, not lost).
    fn processing(&mut self, lease: &LeaseToken, session: Session) -> Result<&mut Own, InputError> {
        let accepted = self.sessions.may_checkpoint(lease, session);
        self.slots
            .get_mut(lease)
            .and_then(|s| s.own_mut())
            .filter(|_| accepted)
            .ok_or_else(|| InputError::NotProcessing {
                lease: lease.clone(),
                session,
            })
    }

    /// The next thing the driver must do, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When the host next needs an [`Input::Tick`], on its local clock; `None` once
    /// it has finished. Earlier inputs are always welcome.
    pub fn poll_timeout(&self) -> Option<LocalTime> {
        self.poll_timer().map(|(at, _)| at)
    }

    /// The earliest of the host's timers: when it next needs an [`Input::Tick`], as
    /// [`poll_timeout`](Self::poll_timeout) gives it, and why. Where two are due at
    /// once, the first in [`Timer`]'s order is named.
    ///
    /// ```
    /// use leasehold_engine::lease::{LeaseConfig, LeaseHost, Timer};
    /// use leasehold_engine::{Incarnation, LeaseToken, LocalTime};
    ///
    /// let config = LeaseConfig {
    ///     partitions: vec![LeaseToken::from("0")],
    ///     ..LeaseConfig::default()
    /// };
    /// let host = LeaseHost::new("h0".into(), config, Incarnation(0)).unwrap();
    /// // A new host reads the table first, at once.
    /// assert_eq!(host.poll_timer(), Some((LocalTime(0), Timer::TableRead)));
    /// ```
    pub fn poll_timer(&self) -> Option<(LocalTime, Timer)> {
        if self.phase == Phase::Finished {
            return None;
        }
        let now = self.now;
        let mut wake: Option<(LocalTime, Timer)> = None;
        let mut at = |t: LocalTime, timer: Timer| {
            if wake.as_ref().is_none_or(|(w, _)| t < *w) {
                wake = Some((t, timer));
            }
        };
        // Only what is not blocked on an answer counts: a deadline that is already due
        // but waits for a response must not make the driver spin.
        if self.phase == Phase::Running {
            for (t, timer) in self.table.timers() {
                at(t, timer);
            }
        }
        if self.uses_heartbeats()
            && let Some(t) = self.membership.beat.wake()
        {
            at(t, Timer::Heartbeat);
        }
        if self.phase == Phase::Running
            && let Some(t) = self.membership.beat.leave_at()
        {
            at(t, Timer::Leave);
        }
        if let Some((t, lease)) = self.agenda_wake() {
            at(t, Timer::Lease(lease));
        }
        wake.map(|(t, timer)| (t.max(now.local), timer))
    }

    fn advance(&mut self, now: Now) -> Now {
        let local = now.local.max(self.now.local);
        self.now = Now::new(local, now.wall);
        self.now
    }

    fn emit(&mut self, output: Output) {
        self.out.push_back(output);
    }

    /// Issues a request and remembers what it is for. Every document it writes
    /// carries this host's expiry terms and liveness, so that a reader with other
    /// settings knows what it must wait out, or that it cannot judge it at all.
    fn send(&mut self, now: Now, intent: Intent, mut op: Op<Record>, mut aim: Aim) -> RequestId {
        let (terms, liveness) = (self.config.expiry.terms(), self.config.liveness());
        if let Op::Create(doc) | Op::Replace { doc, .. } = &mut op {
            doc.stamp(terms, liveness);
        }
        aim.stamp(terms, liveness);
        let id = self.wire.issue(self.incarnation, now.local, aim);
        self.emit(Output::Request(StoreRequest { id, intent, op }));
        id
    }

    /// How long to wait before retrying after an unknown outcome.
    fn backoff(&self) -> Millis {
        Millis(self.config.renew_interval.as_millis().div_ceil(8))
    }

    /// Acts on everything that is due at `now`.
    fn drive(&mut self, now: Now) {
        if self.phase == Phase::Finished {
            return;
        }
        let scope = self.agenda.scope(now.local);
        let full = self.full_passes_for_check(now);
        self.run_passes(now, &scope);
        if let Some(full) = full {
            assert!(
                *self == full,
                "passes over the agenda's leases differ from passes over every lease"
            );
        }
        self.settle(&scope);
    }

    /// In debug builds, for a small table: the host as it would be after the passes
    /// looked at every lease, to check the agenda against.
    fn full_passes_for_check(&self, now: Now) -> Option<LeaseHost> {
        if !cfg!(debug_assertions) || self.slots.len() > 64 {
            return None;
        }
        let mut full = self.clone();
        let every: Vec<LeaseToken> = full.slots.keys().cloned().collect();
        full.run_passes(now, &every);
        Some(full)
    }

    /// Acts on everything due at `now` among the leases in `scope` (in token order),
    /// then on the table, the heartbeat and the phase.
    fn run_passes(&mut self, now: Now, scope: &[LeaseToken]) {
        self.enforce_deadlines(now, scope);
        self.give_up_stuck(now, scope);
        // Before the starts: a handoff abandoned here leaves a lease to start again,
        // and nothing else would bring it back to a pass (the model found a lease
        // owned under a live session and processed by nobody).
        self.recheck_handoffs(now, scope);
        self.start_ready(now, scope);
        self.write_due(now, scope);
        if self.phase == Phase::Running && self.table.replan_due(now.local) {
            self.replan(now);
        }
        if self.phase == Phase::Running
            && self
                .membership
                .beat
                .leave_at()
                .is_some_and(|t| now.local >= t)
        {
            self.begin_shutdown();
        }
        self.drive_heartbeat(now);
        if self.phase == Phase::Running && self.table.read_due(now.local) {
            self.send_scan(now);
        }
        if self.phase == Phase::Running && self.table.poll_due(now.local) {
            self.watch_leaves(now);
        }
        if self.phase == Phase::ShuttingDown && self.shutdown_done() {
            self.phase = Phase::Finished;
            self.emit(Output::ShutdownComplete);
        }
    }

    /// Stops processing wherever authority has run out. The lease stays owned, but
    /// the call may still be running at this epoch, so the next session needs a new
    /// one.
    fn enforce_deadlines(&mut self, now: Now, scope: &[LeaseToken]) {
        let legacy = self.sessions.is_legacy();
        for token in scope {
            let Some(own) = self.slots.get_mut(token).and_then(|s| s.own_mut()) else {
                continue;
            };
            let Some(run) = self.sessions.get(token) else {
                continue;
            };
            if run.is_lost() || run.epoch != own.epoch || own.has_authority(now.local) {
                continue;
            }
            // Unconfirmed progress must not be written after a restart from an
            // older checkpoint, or the stored checkpoint could go backwards.
            own.checkpoint = None;
            own.resume = !legacy;
            let reason = StopReason::Lost(LossCause::AuthorityLapsed);
            if let Some(stop) = self.sessions.stop(token, reason, now.local) {
                self.emit(stop);
            }
        }
    }

    /// Starts processing wherever this host holds authority, any fence is over, and
    /// no earlier session of the lease is still stopping.
    fn start_ready(&mut self, now: Now, scope: &[LeaseToken]) {
        if self.phase != Phase::Running {
            return;
        }
        let policy = self.config.expiry;
        for token in scope {
            let Some(slot) = self.slots.get_mut(token) else {
                continue;
            };
            // A write in flight may carry the handler's last checkpoint, taken out of
            // `own` and not yet in the stored version: a session started now would
            // start behind it and write a lower checkpoint after it landed (the
            // runtime swarm's seed 114165: a release called off while its final
            // checkpoint was on the way). Its answer starts the lease.
            let in_flight = slot.in_flight()
                && self.config.known_bad != Some(KnownBad::StartBeforeCheckpointLands);
            if let Some((own, doc)) = slot.held()
                && !in_flight
                && !self.sessions.is_live(token)
                && own.release.is_none()
                && !own.resume
                && own.split.is_none()
                && doc.split_into.is_empty()
                && own.has_authority(now.local)
                && own.fence_passed(&policy, now)
            {
                let session = self.sessions.start(token, own.epoch);
                own.fence = None;
                // Progress the handler reported at this epoch and not yet written is
                // newer than the stored checkpoint: a session started from the stored
                // one would write a lower checkpoint after it (the swarm's seed 827481:
                // a release called off with its final checkpoint still to write).
                let checkpoint = own.checkpoint.clone().or_else(|| doc.checkpoint.clone());
                let start = Output::Start {
                    lease: token.clone(),
                    epoch: own.epoch,
                    session,
                    checkpoint,
                };
                self.out.push_back(start);
            }
        }
    }

    /// Gives up leases whose lost session has not stopped within the stop timeout:
    /// the host cannot process them, and holding them would wedge them. Where
    /// members are known, the lease goes to a live one: left unowned, it would be
    /// planned back to this host, which cannot take it. With heartbeats and no live
    /// member, it stays until one is live (`touch_stuck`, at each read of the
    /// heartbeats); nobody else could take it meanwhile.
    fn give_up_stuck(&mut self, now: Now, scope: &[LeaseToken]) {
        let stuck: Vec<LeaseToken> = scope
            .iter()
            .filter(|token| {
                let owned = self
                    .slots
                    .get(*token)
                    .and_then(|s| s.own())
                    .is_some_and(|own| own.release.is_none());
                owned && self.stuck(token, now)
            })
            .cloned()
            .collect();
        let successor =
            super::membership::successor(&self.me, self.live_members(now).map(|m| &m.doc.host))
                .cloned();
        let strands = self.config.known_bad == Some(KnownBad::StuckCallStrands);
        let to = match successor {
            Some(to) if self.uses_heartbeats() => ReleaseTo::Successor(to),
            None if self.uses_heartbeats() && !strands => return,
            _ => ReleaseTo::Nobody,
        };
        for token in stuck {
            self.request_release(&token, to.clone(), StopReason::Shutdown);
        }
    }

    /// Brings every lease held back by a lost call past the stop timeout to the next
    /// pass, where it goes to a successor if one is live now: a read of the
    /// heartbeats is what makes one live.
    pub(super) fn touch_stuck(&mut self, now: Now) {
        let stuck: Vec<LeaseToken> = self
            .sessions
            .iter()
            .map(|(token, _)| token)
            .filter(|token| self.stuck(token, now))
            .cloned()
            .collect();
        stuck.iter().for_each(|t| self.touch(t));
    }

    /// Whether a lost call of `token` still runs here past the stop timeout: the
    /// driver could not abort it, and this host cannot process the lease until it
    /// ends.
    pub(super) fn stuck(&self, token: &LeaseToken, now: Now) -> bool {
        let since = self.sessions.get(token).and_then(|r| r.lost_since());
        since.is_some_and(|t| now.local >= t + self.config.stop_timeout)
    }

    fn mark_in_flight(&mut self, token: &LeaseToken, id: RequestId) {
        if let Some(slot) = self.slots.get_mut(token) {
            slot.sent(id);
            self.touch(token);
        }
    }

    /// Told to shut down: where the strategy has heartbeats and this host holds
    /// leases that another live host can take, it first marks its heartbeat as
    /// leaving and keeps processing for the leave notice, so that the hosts that
    /// take its leases over read often by the time it releases them. Told again, it
    /// leaves at once.
    fn on_shutdown(&mut self, now: Now) {
        if self.phase != Phase::Running {
            return;
        }
        let notice = self.config.leave_notice();
        let announced = self.membership.beat.leave_at().is_some();
        let vouched = !self.session_liveness() || self.membership.beat.tenure().is_some();
        if announced
            || notice == Millis::ZERO
            || !self.uses_heartbeats()
            || !vouched
            || !self.holds_leases()
            || self.live_members(now).next().is_none()
        {
            self.begin_shutdown();
            return;
        }
        self.membership
            .beat
            .announce_leave(now.local, now.local + notice);
    }

    /// Begins a graceful shutdown: every owned lease is stopped and released.
    ///
    /// Under session liveness a host without a tenure holds no lease with
    /// authority: those named after it belong to an ended tenure, or to another
    /// life whose heartbeat it is still waiting out. It lets them be rather than
    /// release them: a release would free at once a lease that other life may still
    /// be processing.
    fn begin_shutdown(&mut self) {
        if self.phase != Phase::Running {
            return;
        }
        self.phase = Phase::ShuttingDown;
        self.membership.beat.hurry(self.now.local);
        let owned: Vec<LeaseToken> = self
            .slots
            .iter()
            .filter(|(_, s)| s.is_owned())
            .map(|(t, _)| t.clone())
            .collect();
        for token in owned {
            self.give_up_at_shutdown(&token, false);
        }
    }

    /// Gives up a lease this host holds while it shuts down: released to nobody, or,
    /// under session liveness without a tenure, let be (see `begin_shutdown`). The
    /// same holds for a lease it learns it holds once the shutdown began (`late`): an
    /// answer or a scan that was on the way. A host shutting down begins no tenure,
    /// so a release it could not write would hold its shutdown for good (the swarm's
    /// seed 5321510: a new life waiting out its earlier life's heartbeat was told to
    /// stop with its first scan on the way; the scan showed that life's leases, and
    /// the host never finished stopping, so it never restarted).
    pub(super) fn give_up_at_shutdown(&mut self, token: &LeaseToken, late: bool) {
        let tenureless = self.session_liveness() && self.membership.beat.tenure().is_none();
        let old_rule = late && self.config.known_bad == Some(KnownBad::ShutdownReleasesUnwritable);
        if tenureless && !old_rule {
            self.lose(token, LossCause::SessionFenced);
        } else {
            self.request_release(token, ReleaseTo::Nobody, StopReason::Shutdown);
        }
    }

    /// Done when nothing is owned and nothing still in flight could reveal that
    /// something is: an answered acquire, a re-read after an unknown outcome, or a
    /// scan that finds a lease a previous life of this host left behind.
    fn shutdown_done(&self) -> bool {
        let holds_leases = self
            .agenda
            .active()
            .iter()
            .filter_map(|t| self.slots.get(t))
            .any(|s| s.is_active());
        let may_gain_lease = self.wire.may_gain_lease();
        let heartbeat_gone = !self.uses_heartbeats() || self.membership.beat.has_left();
        !holds_leases && !may_gain_lease && heartbeat_gone
    }

    /// Whether this host owns any lease.
    fn holds_leases(&self) -> bool {
        self.agenda
            .active()
            .iter()
            .filter_map(|t| self.slots.get(t))
            .any(|s| s.is_owned())
    }

    /// Asks for `token` to be released once its handler has stopped (a lost session's
    /// call need not have: the release raises the epoch past it).
    fn request_release(&mut self, token: &LeaseToken, to: ReleaseTo, why: StopReason) {
        let Some(own) = self.slots.get_mut(token).and_then(|s| s.own_mut()) else {
            return;
        };
        // A handoff already under way stays one; if its claimant is gone by the time
        // the handler stops, the release goes to nobody instead.
        if own.release.is_some() {
            return;
        }
        own.release = Some(to);
        let stop = self.sessions.stop(token, why, self.now.local);
        self.touch(token);
        if let Some(stop) = stop {
            self.emit(stop);
        }
    }

    /// Records that this host owns `token` now, with authority from a write sent at
    /// `sent_at` if one succeeded. Under session liveness authority comes from the
    /// heartbeat instead, for a lease held in the current tenure however it was
    /// learned: a write to the lease alone proves nothing about the tenure.
    fn own(
        &mut self,
        token: &LeaseToken,
        epoch: Epoch,
        fence: Option<Observation>,
        sent_at: Option<LocalTime>,
    ) {
        self.table.unsettle();
        let deadline = if self.session_liveness() {
            self.slots
                .get(token)
                .and_then(|slot| self.session_authority(slot.doc()))
        } else {
            sent_at.map(|t| self.config.expiry.holder_deadline(t))
        };
        let renew = self.config.renew_interval;
        let now = self.now.local;
        if let Some(slot) = self.slots.get_mut(token) {
            let mut own = Own::new(epoch, fence, now);
            own.authority_until = deadline;
            if let Some(t) = sent_at {
                own.next_renew = t + renew;
            }
            slot.hold(own);
            self.touch(token);
        }
    }
}
