//! This host's own heartbeat: the document that tells the group it is alive, carries
//! its claims and, under session liveness, vouches for its tenure.

use super::phase::Phase;
use super::{HostDocument, Intent, Record};
use crate::expiry::{ExpiryPolicy, Observation};
use crate::ids::{Etag, HostId, Incarnation, LeaseToken, PartitionKey, RequestId, Tenure};
use crate::store::{Op, Reply, StoreError, Stored};
use crate::time::{LocalTime, Millis, Now};

/// This host's own heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Heartbeat {
    state: BeatState,
    op: Option<RequestId>,
    next_at: LocalTime,
    /// Throttled: nothing is sent before this time, whatever else changed.
    retry_at: Option<LocalTime>,
    /// The claims this host wants published.
    claims: Vec<LeaseToken>,
    /// The claims in the stored heartbeat.
    published: Vec<LeaseToken>,
    /// Splits this life finished, and how many the stored heartbeat tells.
    splits: u64,
    published_splits: u64,
    /// Leases this life gave away without a claim, and how many the stored heartbeat
    /// tells.
    gifts: u64,
    published_gifts: u64,
    /// Session liveness: the tenure the stored heartbeat vouches for, once a write
    /// of it has succeeded; `None` between tenures.
    tenure: Option<Tenure>,
    /// Session liveness: the last tenure this life proposed, so a new one never
    /// repeats an old one (a proposal whose outcome was unknown may have landed).
    proposed: Option<Tenure>,
    /// Session liveness: the highest tenure this host's stored heartbeat was read to
    /// show (an earlier life's, or one a fencer wrote): the next proposal goes above
    /// it, so the tenures of one name only ever rise.
    floor: Option<Tenure>,
    /// Session liveness: authority over every lease held in `tenure` lasts while
    /// `now <` this, counted from the last successful write's send time.
    authority_until: Option<LocalTime>,
    /// Session liveness: the stored heartbeat, at this etag, vouches for a tenure
    /// this life never proposed (an earlier life's, or a later one's), unfenced. Its
    /// holder may be alive, whatever the orchestrator believes: this host writes
    /// over that version only once it would have expired, at the second field.
    predecessor: Option<(Etag, LocalTime)>,
    /// A leave was sent in this life.
    leave_sent: bool,
    /// Told to shut down, this host announced its leave in its heartbeat: it keeps
    /// processing until this time, then releases its leases.
    leave_at: Option<LocalTime>,
    /// The version the store last refused a write of the heartbeat on (412). It is
    /// gone for good: a read that still shows it came from a replica that lags, and
    /// taken as current it had the next write go out on it at once, be refused
    /// again, and so on (the model's `store: no host writes again on a version the
    /// store refused it`).
    refused: Option<Etag>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum BeatState {
    /// Not stored (yet, or any more): create it.
    Absent,
    /// Stored with this etag.
    Present(Etag),
    /// Unknown after a conflict or an unknown outcome: read it.
    Unknown,
    /// Deleted at shutdown.
    Left,
}

/// What the heartbeat request in flight does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum BeatStep {
    Write {
        claims: Vec<LeaseToken>,
        tenure: Option<Tenure>,
        splits: u64,
        gifts: u64,
    },
    Read,
    Leave,
}

/// What the host's heartbeat may do next, as the host sees it.
pub(super) struct BeatPlan<'a> {
    pub me: &'a HostId,
    pub incarnation: Incarnation,
    pub prefix: &'a str,
    pub phase: Phase,
    pub session: bool,
    /// Shutting down, and nothing is left for the heartbeat to vouch for: delete it.
    pub leaving: bool,
    /// Session liveness: the leases held in the current tenure, published with every
    /// write of the heartbeat.
    pub owned: u32,
    /// Session liveness: the lease documents in this host's view of the table.
    pub leases: u32,
}

/// How the host's settings bear on a heartbeat's answer.
pub(super) struct BeatRules {
    pub policy: ExpiryPolicy,
    pub renew: Millis,
    pub backoff: Millis,
    pub session: bool,
    /// This life of the host.
    pub incarnation: Incarnation,
    /// A heartbeat of another life under this name that still vouches for a tenure
    /// is waited out before it is written over (`LeaseConfig::waits_out_earlier_life`).
    pub waits_out_earlier_life: bool,
    /// A read showing the version a write was refused on is taken as stale (not so
    /// under [`KnownBad::RewriteRefusedVersion`](super::KnownBad::RewriteRefusedVersion)).
    pub remembers_refusals: bool,
}

/// What a heartbeat's answer means for the leases, which the host must act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct BeatNews {
    /// The tenure this host held is over: every lease held under it is lost.
    pub ended: bool,
    /// A new tenure began: leases waiting for one to name can go on.
    pub began: bool,
    /// The tenure's authority was extended: every lease held in it shares it.
    pub renewed: bool,
}

impl Heartbeat {
    pub fn new() -> Heartbeat {
        Heartbeat {
            state: BeatState::Absent,
            op: None,
            next_at: LocalTime::ZERO,
            retry_at: None,
            claims: Vec::new(),
            published: Vec::new(),
            splits: 0,
            published_splits: 0,
            gifts: 0,
            published_gifts: 0,
            tenure: None,
            proposed: None,
            floor: None,
            authority_until: None,
            predecessor: None,
            leave_sent: false,
            leave_at: None,
            refused: None,
        }
    }

    /// Marks the heartbeat as leaving, written at once: the host releases its leases
    /// at `until`, and the other hosts read often until then (see
    /// [`LeaseConfig::leave_notice`](super::LeaseConfig::leave_notice)).
    pub fn announce_leave(&mut self, now: LocalTime, until: LocalTime) {
        self.leave_at = Some(until);
        self.next_at = now;
    }

    /// When the leave announced ends, if one was.
    pub fn leave_at(&self) -> Option<LocalTime> {
        self.leave_at
    }

    /// The tenure this host's stored heartbeat vouches for, if any.
    pub fn tenure(&self) -> Option<Tenure> {
        self.tenure
    }

    /// Until when the current tenure holds authority.
    pub fn authority_until(&self) -> Option<LocalTime> {
        self.authority_until
    }

    /// The claims in this host's stored heartbeat.
    pub fn published(&self) -> &[LeaseToken] {
        &self.published
    }

    /// Whether this life claims `token`, or has claimed it in its stored heartbeat:
    /// its owner may hand it over.
    pub fn claims(&self, token: &LeaseToken) -> bool {
        self.claims.contains(token) || self.published.contains(token)
    }

    /// This host finished a split: its next heartbeat tells the others, at once.
    pub fn split_done(&mut self) {
        self.splits += 1;
    }

    /// A lease this host gave away without a claim landed (a stuck call's, handed to
    /// its successor): its next heartbeat tells the others, at once, since nothing
    /// else tells the recipient.
    pub fn gave_away(&mut self) {
        self.gifts += 1;
    }

    /// The claims this host wants published, in token order.
    pub fn wanted(&self) -> &[LeaseToken] {
        &self.claims
    }

    /// Sets the claims this host wants published, in token order.
    pub fn set_claims(&mut self, claims: Vec<LeaseToken>) {
        self.claims = claims;
    }

    /// When the heartbeat next needs a request, if one is not in flight.
    pub fn wake(&self) -> Option<LocalTime> {
        if self.op.is_some() || self.has_left() {
            return None;
        }
        let waiting = self.waiting_on_predecessor().unwrap_or(LocalTime::ZERO);
        Some(
            self.next_at
                .max(self.retry_at.unwrap_or(LocalTime::ZERO))
                .max(waiting),
        )
    }

    /// Until when this host waits for another life's tenure, which the stored
    /// heartbeat vouches for, to expire before writing over it.
    pub fn waiting_on_predecessor(&self) -> Option<LocalTime> {
        match (&self.predecessor, &self.state) {
            (Some((etag, until)), BeatState::Present(stored)) if etag == stored => Some(*until),
            _ => None,
        }
    }

    /// Shutting down: the heartbeat's next step is due now.
    pub fn hurry(&mut self, now: LocalTime) {
        self.next_at = now;
    }

    /// Nothing is left for the heartbeat to vouch for: the leave is due now, unless
    /// one was sent already (a failed one waits its backoff).
    pub fn hurry_leave(&mut self, now: LocalTime) {
        if !self.leave_sent {
            self.next_at = self.next_at.min(now);
        }
    }

    /// Whether this life's heartbeat is gone (deleted, or never stored) at shutdown.
    pub fn has_left(&self) -> bool {
        matches!(self.state, BeatState::Left)
    }

    /// Ends this host's tenure: its authority is over. Whether there was one.
    pub fn end_tenure(&mut self) -> bool {
        self.authority_until = None;
        self.tenure.take().is_some()
    }

    /// Whether [`next`](Self::next) would surely ask for nothing at `now`, and change
    /// nothing, in `phase`: a cheap test, so that the host counts its leases for the
    /// heartbeat only when one may be written (counting walks every lease it holds,
    /// and the host drives its heartbeat after every input).
    pub fn idle(&self, now: Now, phase: Phase) -> bool {
        if self.op.is_some() || self.retry_at.is_some_and(|t| now.local < t) {
            return true;
        }
        if self.retry_at.is_some() {
            // `next` clears a retry time that has passed.
            return false;
        }
        let claims_changed = (self.claims != self.published
            || self.splits != self.published_splits
            || self.gifts != self.published_gifts)
            && matches!(self.state, BeatState::Present(_) | BeatState::Absent);
        now.local < self.next_at && !(claims_changed && phase == Phase::Running)
    }

    /// The heartbeat request due at `now`, if any: a write (which also proposes a new
    /// tenure between tenures), a read after an unknown outcome, or the leave.
    pub fn next(
        &mut self,
        now: Now,
        plan: &BeatPlan<'_>,
    ) -> Option<(Intent, Op<Record>, BeatStep)> {
        if self.op.is_some() || self.retry_at.is_some_and(|t| now.local < t) {
            return None;
        }
        self.retry_at = None;
        let claims_changed = (self.claims != self.published
            || self.splits != self.published_splits
            || self.gifts != self.published_gifts)
            && matches!(self.state, BeatState::Present(_) | BeatState::Absent);
        if now.local < self.next_at && !(claims_changed && plan.phase == Phase::Running) {
            return None;
        }
        // A reused name proves no death: another life's tenure is written over only
        // once it would have expired, as a fencer would, so that a heartbeat showing a
        // later tenure still proves the earlier one's authority over.
        let leaving = plan.phase == Phase::ShuttingDown && plan.leaving;
        if !leaving && self.waiting_on_predecessor().is_some_and(|t| now.local < t) {
            return None;
        }
        // A write between tenures proposes a new one, above every tenure this life
        // proposed or read in its heartbeat.
        let tenure = match (plan.session, self.tenure) {
            (false, _) => None,
            (true, Some(tenure)) => Some(tenure),
            (true, None) => Some(self.proposal(plan.incarnation)),
        };
        let id = HostDocument::id_for(plan.prefix, plan.me);
        let pk = PartitionKey::new(id.as_str());
        let (intent, op, step) = match (&self.state, plan.phase) {
            (BeatState::Left, _) | (_, Phase::Finished) => return None,
            // Nothing of this life is stored: nothing to take back. Nor is anything
            // of it stored when the heartbeat is another life's, read and not yet
            // written over: deleting that would end a tenure that may still hold.
            (BeatState::Absent, Phase::ShuttingDown) if plan.leaving => {
                self.state = BeatState::Left;
                return None;
            }
            (BeatState::Present(_), Phase::ShuttingDown)
                if plan.leaving && self.waiting_on_predecessor().is_some() =>
            {
                self.state = BeatState::Left;
                return None;
            }
            // Only the version this life wrote: a leave that arrives late must not
            // delete the heartbeat of the host's next life (the swarm's skewed-clocks
            // seed 100456: a leave held in a latency spike deleted the restarted
            // host's new heartbeat, and a peer took leases it was processing).
            (BeatState::Present(etag), Phase::ShuttingDown) if plan.leaving => (
                Intent::Leave,
                Op::Delete {
                    pk,
                    id,
                    if_match: Some(etag.clone()),
                },
                BeatStep::Leave,
            ),
            (BeatState::Unknown, _) => (Intent::Heartbeat, Op::Read { pk, id }, BeatStep::Read),
            (state, _) => {
                let mut doc = HostDocument::new(plan.prefix, plan.me.clone(), now.wall);
                doc.claims = self.claims.clone();
                doc.life = Some(plan.incarnation);
                doc.tenure = tenure;
                doc.splits = self.splits;
                doc.gifts = self.gifts;
                doc.owned = plan.session.then_some(plan.owned);
                doc.leases = plan.session.then_some(plan.leases);
                doc.leaving = self.leave_at.is_some();
                let step = BeatStep::Write {
                    claims: doc.claims.clone(),
                    tenure: doc.tenure,
                    splits: doc.splits,
                    gifts: doc.gifts,
                };
                let op = match state {
                    BeatState::Present(etag) => Op::Replace {
                        doc: Record::Host(doc),
                        if_match: Some(etag.clone()),
                    },
                    _ => Op::Create(Record::Host(doc)),
                };
                (Intent::Heartbeat, op, step)
            }
        };
        if matches!(step, BeatStep::Write { .. }) && self.tenure.is_none() && tenure.is_some() {
            self.proposed = tenure;
        }
        self.leave_sent |= matches!(step, BeatStep::Leave);
        Some((intent, op, step))
    }

    /// Whether `tenure` is one this life holds or proposed: one of its own
    /// incarnation, or its latest proposal (which takes an earlier life's
    /// incarnation when the clocks made that one higher).
    fn is_own_tenure(&self, tenure: Tenure, incarnation: Incarnation) -> bool {
        tenure.incarnation == incarnation
            || Some(tenure) == self.tenure
            || Some(tenure) == self.proposed
    }

    /// The tenure to propose next: above this life's earlier proposals and the
    /// highest tenure read in its heartbeat, and of this life's incarnation if that
    /// is higher still.
    fn proposal(&self, incarnation: Incarnation) -> Tenure {
        let own = Tenure {
            incarnation,
            seq: 0,
        };
        [self.proposed, self.floor]
            .into_iter()
            .flatten()
            .map(Tenure::next)
            .fold(own, Tenure::max)
    }

    /// The heartbeat request [`next`](Self::next) asked for went out as `id`.
    pub fn sent(&mut self, id: RequestId) {
        self.op = Some(id);
    }

    /// Folds in the answer to the heartbeat request sent at `sent_at`.
    pub fn answered(
        &mut self,
        now: Now,
        sent_at: LocalTime,
        step: BeatStep,
        result: Result<Reply<Record>, StoreError>,
        rules: &BeatRules,
    ) -> BeatNews {
        self.op = None;
        let mut news = BeatNews::default();
        match (step, result) {
            (
                BeatStep::Write {
                    claims,
                    tenure,
                    splits,
                    gifts,
                },
                Ok(Reply::Created(etag) | Reply::Replaced(etag)),
            ) => {
                self.state = BeatState::Present(etag);
                self.published = claims;
                self.published_splits = splits;
                self.published_gifts = gifts;
                self.next_at = sent_at + rules.renew;
                if rules.session {
                    news.began = self.tenure != tenure;
                    if news.began {
                        news.ended = self.end_tenure();
                        self.tenure = tenure;
                    }
                    let deadline = rules.policy.holder_deadline(sent_at);
                    let until = self.authority_until.map_or(deadline, |d| d.max(deadline));
                    self.authority_until = Some(until);
                    news.renewed = true;
                }
            }
            (BeatStep::Read, Ok(Reply::Read(Stored { etag, .. })))
                if self.refused.as_ref() == Some(&etag) =>
            {
                // A lagging replica: nothing is known yet. Read again after a backoff;
                // authority runs on from the last write known to have succeeded.
                self.next_at = now.local + rules.backoff;
            }
            (BeatStep::Read, Ok(Reply::Read(Stored { doc, etag }))) => {
                self.refused = None;
                // Only an unfenced heartbeat of this very tenure still vouches for
                // it; anything else means the tenure is over.
                let ours = matches!(&doc, Record::Host(d)
                    if d.vouches_for_tenure() && d.tenure == self.tenure);
                self.predecessor = None;
                if let Record::Host(d) = &doc {
                    self.floor = self.floor.max(d.tenure);
                    let another_life = d.vouches_for_tenure()
                        && d.tenure
                            .is_some_and(|t| !self.is_own_tenure(t, rules.incarnation));
                    if rules.waits_out_earlier_life && another_life {
                        let seen = Observation {
                            first_seen: now.local,
                            timestamp: d.timestamp,
                            terms: d.terms,
                        };
                        self.predecessor =
                            Some((etag.clone(), rules.policy.expires_at(&seen, now)));
                    }
                }
                if rules.session && !ours {
                    news.ended = self.end_tenure();
                }
                self.state = BeatState::Present(etag);
                self.next_at = now.local;
            }
            // Gone, or rewritten by someone else (a fencer, or this host's next life):
            // either way nothing of this life is left to delete.
            (
                BeatStep::Leave,
                Ok(_) | Err(StoreError::NotFound | StoreError::PreconditionFailed),
            ) => {
                self.state = BeatState::Left;
            }
            (_, Err(StoreError::NotFound)) => {
                // Deleted by another host, which judged it expired: as good as fenced.
                if rules.session {
                    news.ended = self.end_tenure();
                }
                self.state = BeatState::Absent;
            }
            (_, Err(StoreError::Throttled { retry_after })) => {
                self.retry_at = Some(now.local + retry_after);
            }
            (BeatStep::Leave, Err(_)) => self.next_at = now.local + rules.backoff,
            (_, Err(StoreError::PreconditionFailed)) => {
                // Someone else wrote it since (a fencer), or this very write landed and
                // the SDK's retry of it found its own etag: the read tells which, and
                // ends the tenure if it is not this one any more. Authority runs on
                // from the last write known to have succeeded, which is all a fencer
                // waits out.
                if let (BeatState::Present(etag), true) = (&self.state, rules.remembers_refusals) {
                    self.refused = Some(etag.clone());
                }
                self.state = BeatState::Unknown;
            }
            (_, Err(StoreError::Conflict)) => self.state = BeatState::Unknown,
            (_, _) => {
                self.state = BeatState::Unknown;
                self.next_at = now.local + rules.backoff;
            }
        }
        news
    }
}
