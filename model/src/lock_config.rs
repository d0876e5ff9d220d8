//! The bounds of the queue and item-lease checks, and their known-bad variants.

use crate::clocks::TICK_MS;
use crate::limits::{BoundsError, LeastBound, range};
use crate::world::Budget;
use leasehold_engine::item_lease::ItemKnownBad;
use leasehold_engine::lock::LockPolicy;
use leasehold_engine::queue::QueueKnownBad;
use leasehold_engine::{Drift, ExpiryRule, Millis};
use std::fmt;

/// Locks and leases last this many ticks in the lock models unless the bounds ask
/// for longer ([`LockBounds::lock_ticks`]).
pub const LOCK_TICKS: u8 = 2;

/// The most messages a queue check may have.
pub const MAX_MESSAGES: u8 = 5;

/// The bounds and settings of a queue or item-lease check.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockBounds {
    /// Consumers (queue) or holders (items).
    pub clients: u8,
    /// Messages (queue) or items.
    pub docs: u8,
    /// Crashes allowed.
    pub crashes: u8,
    /// Late ticks allowed.
    pub pauses: u8,
    /// Writes that may be applied with their reply lost.
    pub lost_replies: u8,
    /// Writes that may be held on the wire and served later.
    pub delays: u8,
    /// Each client's wall clock is off true time by up to this many ticks.
    pub skew: u8,
    /// Each client's clock gains or loses up to this many milliseconds per tick.
    pub drift_ms: u16,
    /// True time explored, in ticks.
    pub horizon: u8,
    /// Abandons (queue) or breaks (items) clients may choose, in all.
    pub give_backs: u8,
    /// Renewals clients may choose, in all.
    pub renewals: u8,
    /// Ticks an abandoned message stays invisible (queue): an abandon with a delay
    /// takes the message out of every dequeue's read meanwhile, so a consumer that
    /// starts then has not seen it.
    pub abandon_delay: u8,
    /// Dequeue batch size (queue) or `next_for_state` limit (items).
    pub batch: u8,
    /// Deliveries after which a message is dead-lettered (queue).
    pub max_dequeue: u8,
    /// Replies that may be held on the way back and delivered later (the queue's
    /// large payloads: a consumer may crash while reading parts).
    pub late_replies: u8,
    /// The queue's one message is a large payload, produced by consumer 0 as a part
    /// set; consumers sweep as they poll. Implied by the part-set variants.
    pub large: bool,
    /// As `large`, the payload kept in a claim store (a ghost of the model's) through
    /// the queue's claim check rather than in parts. Implies `large`.
    pub claims: bool,
    /// Claim-store calls (puts, drops, discards) that may fail, in the claim-check
    /// mode.
    pub claim_failures: u8,
    /// Reads that a lagging replica may serve, as at Session consistency: each
    /// document a read returns may be an older version, never older than what the
    /// client's session has seen of it.
    pub stale_reads: u8,
    /// How many writes back a lagging replica may serve a document (1 to 4).
    pub stale_depth: u8,
    /// Writes that may be applied and then answered as the SDK's own retry finds the
    /// store: 412 for a conditional replace, 409 for a create, 404 for a delete,
    /// where the write won.
    pub retries: u8,
    /// Dead letters an operator may ask consumer 0 to delete, in all (queue).
    pub dead_letter_deletes: u8,
    /// Handlers (queue) or tasks (items) that may overrun their authority, in all:
    /// the consumer or holder polls on while the handler keeps its delivery or lease,
    /// and the handler completes or saves under it later.
    pub overruns: u8,
    /// How many ticks a lock or lease lasts (2 to 4). Longer leases reach paths
    /// shorter ones cannot: a holder's third poll inside a lease's authority, which
    /// an answer held over a lease taken and let go of in between needs.
    pub lock_ticks: u8,
    /// A known-bad variant.
    pub bug: Option<LockBug>,
}

impl Default for LockBounds {
    fn default() -> Self {
        LockBounds {
            clients: 2,
            docs: 2,
            crashes: 1,
            pauses: 0,
            lost_replies: 1,
            delays: 1,
            skew: 1,
            drift_ms: 100,
            horizon: 11,
            give_backs: 1,
            renewals: 0,
            abandon_delay: 0,
            batch: 1,
            max_dequeue: 2,
            late_replies: 0,
            large: false,
            claims: false,
            claim_failures: 0,
            stale_reads: 0,
            stale_depth: 1,
            retries: 0,
            dead_letter_deletes: 0,
            overruns: 0,
            lock_ticks: LOCK_TICKS,
            bug: None,
        }
    }
}

impl LockBounds {
    /// Checks the bounds for a model of `kind`.
    pub fn validate(&self, kind: LockKind) -> Result<(), BoundsError> {
        // Five messages: a poison move lost to another consumer needs them (the
        // poison one, one for each of the two racing lives, one the winner claims
        // after its move and one left for the loser); the item model stays at four.
        let (clients, docs, most_docs) = match kind {
            LockKind::Queue => ("consumers", "messages", u64::from(MAX_MESSAGES)),
            LockKind::Items => ("holders", "items", 4),
        };
        range(clients, self.clients.into(), 1, 4)?;
        range(docs, self.docs.into(), 1, most_docs)?;
        range("horizon", self.horizon.into(), 1, 60)?;
        range("skew", self.skew.into(), 0, 5)?;
        range("drift", self.drift_ms.into(), 0, 300)?;
        range("batch", self.batch.into(), 1, 4)?;
        range("max dequeue", self.max_dequeue.into(), 1, 10)?;
        range("stale reads", self.stale_reads.into(), 0, 3)?;
        range("stale depth", self.stale_depth.into(), 1, 4)?;
        range("retries", self.retries.into(), 0, 3)?;
        range("abandon delay", self.abandon_delay.into(), 0, 10)?;
        range("dead-letter deletes", self.dead_letter_deletes.into(), 0, 3)?;
        if self.dead_letter_deletes > 0 && kind != LockKind::Queue {
            return Err(BoundsError::LockSettings(
                "dead letters are the work queue's; item leases have none".into(),
            ));
        }
        range("overruns", self.overruns.into(), 0, 2)?;
        // A holder polls once a tick and takes its lease at a poll: a lease shorter
        // than two ticks has lost its authority, less the drift allowance, by the
        // next poll, and nothing is ever processed.
        range("lock duration", self.lock_ticks.into(), 2, 4)?;
        if self.abandon_delay > 0 && kind != LockKind::Queue {
            return Err(BoundsError::LockSettings(
                "an abandon's delay is the work queue's; item leases are broken, not abandoned"
                    .into(),
            ));
        }
        if let Some(bug) = self.bug
            && !bug.applies_to(kind)
        {
            return Err(LockBug::unknown(bug.name(), kind));
        }
        if (self.large || self.claims) && kind != LockKind::Queue {
            return Err(BoundsError::LockSettings(
                "large payloads are the work queue's; item leases have none".into(),
            ));
        }
        if self.claim_failures > 0 && !self.is_claims() {
            return Err(BoundsError::LockSettings(
                "claim-store failures need the claim check (--claims)".into(),
            ));
        }
        range("claim failures", self.claim_failures.into(), 0, 3)?;
        if self.is_large() && (self.clients < 2 || self.docs != 1) {
            return Err(BoundsError::LockSettings(
                "a large payload is one message (--partitions 1) between two consumers or \
                 more: one produces it, another may consume it"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether the queue model runs its large-payload mode: asked for, or implied by
    /// a part-set variant.
    pub fn is_large(&self) -> bool {
        self.large || self.claims || self.bug.is_some_and(LockBug::is_about_parts)
    }

    /// Whether the large payload is kept in the claim store: asked for, or implied by
    /// a claim variant.
    pub fn is_claims(&self) -> bool {
        self.claims || self.bug == Some(LockBug::Engine(QueueKnownBad::ClaimUnbounded))
    }

    /// The lock duration.
    pub fn lock_duration(&self) -> Millis {
        Millis(u64::from(self.lock_ticks) * TICK_MS)
    }

    /// The clients' lock rule: the drift allowance matches the clocks (10 % at the
    /// default 100 ms per tick) and the margin is zero, which is the tightest safe
    /// setting. The `lock-no-drift` variant assumes perfect clocks instead.
    pub fn policy(&self) -> LockPolicy {
        let drift = if self.bug == Some(LockBug::LockNoDrift) {
            0
        } else {
            u32::from(self.drift_ms) * 1_000_000 / TICK_MS as u32
        };
        LockPolicy {
            rule: ExpiryRule::Observed,
            drift: Drift::ppm(drift),
            safety_margin: Millis::ZERO,
        }
    }

    /// The fault budget.
    pub fn budget(&self) -> Budget {
        Budget {
            crashes: self.crashes,
            pauses: self.pauses,
            lost_replies: self.lost_replies,
            delays: self.delays,
            stale_reads: self.stale_reads,
            stale_depth: self.stale_depth,
            late_replies: self.late_replies,
            retries: self.retries,
            throttles: 0,
            side_failures: self.claim_failures,
            horizon: self.horizon,
            drift_ms: self.drift_ms,
        }
    }

    /// Ticks after the last fault, restart, abandon, break or renewal from which every
    /// document must be done (completed or dead-lettered; processed).
    ///
    /// A client first sees a crashed client's lock (or a lock whose claim reply was
    /// lost) at its next poll, waits `D(1+ρ)` on a slow clock, and then needs a poll to
    /// take and a poll to finish each document (batch 1). The tests show the bound
    /// tight for items at 2 × 2 with a crash (one tick less fails); for the queue that
    /// case has one tick to spare, which a lost claim reply uses. In the large-payload
    /// mode consumer 0 polls only to produce until its enqueue is answered: an
    /// enqueue whose message landed with its reply lost takes one more of its polls,
    /// a tick before it first looks at the queue. An abandon's delay hides its
    /// message for that long after the abandon. A handler's overrun counts from its
    /// consumer's poll beside it, a tick after the delivery at the earliest; the
    /// queue's bound has no term of its own for it, and holds with one overrun at
    /// horizon 11 with one consumer and two (`model/tests/locks.rs`) and at the
    /// default 2 × 2. The items' bound has one (below).
    pub fn liveness_ticks(&self, kind: LockKind) -> u8 {
        let d = self.lock_duration().as_millis();
        let rho = u64::from(self.drift_ms);
        let wait_local = d + d * rho / TICK_MS;
        let slow_tick = TICK_MS - rho;
        let wait = wait_local.div_ceil(slow_tick.max(1));
        let work = 2 * u64::from(self.docs);
        // An item lease written with its outcome unknown to its writer (its reply
        // lost, a 412 from the SDK's retry of a `next_for_state` lease, a write held
        // and given up on) is a second lease a crashed holder leaves behind. A
        // survivor that acquires one item at a time first sees it once the first is
        // done, and waits it out in turn.
        // So is an item an overrun task's holder leases for another task while it
        // holds the first (its `next_for_state` takes up to a batch of the other
        // items; leasing the kept item again replaces its lease). So are the items a
        // holder leases while the reply to a lease of its is held on the way back: it
        // polls beside the held reply, and a crash before the reply comes strands
        // both (the thirty-fourth session's check of 2 × 2 with a late reply found
        // 22 steps of it without this term). So, with a batch above one, are the
        // other items a crashed holder's `next_for_state` leased beside the first
        // (the same session's check of 2 × 2 with `--batch 2` found it). A
        // consumer's dequeue reads every message at once, so the queue has no such
        // term.
        let unknown = match kind {
            LockKind::Items => {
                u64::from(self.batch.min(self.docs).saturating_sub(1))
                    + u64::from(self.lost_replies)
                    + u64::from(self.retries)
                    + u64::from(self.delays)
                    + (u64::from(self.overruns) + u64::from(self.late_replies))
                        * u64::from(self.batch.min(self.docs.saturating_sub(1)))
            }
            LockKind::Queue => 0,
        };
        let produce = u64::from(self.is_large());
        // An abandon, which liveness is measured from, hides its message this long.
        let hidden = match kind {
            LockKind::Queue => u64::from(self.abandon_delay),
            LockKind::Items => 0,
        };
        u8::try_from(1 + wait * (1 + unknown) + work + produce + hidden).unwrap_or(u8::MAX)
    }
}

/// Which lock model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// The work queue.
    Queue,
    /// Item leases.
    Items,
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockKind::Queue => "queue",
            LockKind::Items => "items",
        })
    }
}

/// The known-bad variants of the lock models: the seeds' bugs, and safeguards removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockBug {
    /// Seed 001's dequeue predicate: `Status = "Pending" OR (Status = "InProgress" AND
    /// LockedUntil > now + lockDuration/2)`, claimed at once.
    DequeueSeed,
    /// Seed 001's known issue: dequeue does not return messages with expired locks.
    DequeueNoExpired,
    /// Claims are written without if-match (the network strips it).
    BlindClaim,
    /// Completions are written without if-match (the network strips it).
    BlindComplete,
    /// A dequeue reads the visible messages in id order instead of visibility order:
    /// the backlog's order kept wrong. Every queue property still holds (no property
    /// promises an order); what it breaks is fairness, which the engine's test of the
    /// dequeue order catches.
    DequeueUnordered,
    /// Clients assume perfect clocks (no drift allowance) while the real ones drift.
    LockNoDrift,
    /// EDC's early `nextForState`: only `lease = null OR leasedBy = me`.
    NextForStateNoExpiry,
    /// `next_for_state` leases are written without if-match.
    BlindLease,
    /// One of the consumer's or producer's earlier behaviours, behind the engine's own
    /// switch ([`QueueKnownBad`] says what each breaks).
    Engine(QueueKnownBad),
    /// One of the item leaser's earlier behaviours, behind the engine's own switch
    /// ([`ItemKnownBad`] says what each breaks).
    ItemEngine(ItemKnownBad),
}

impl LockBug {
    /// The least bound known to show this variant's counterexample (the bounds
    /// `model/tests/locks.rs` find it at), for every bound not given on the command
    /// line.
    pub fn least_bound(self) -> LeastBound {
        // One message or item, no crash, no give-back: a single late or lagging
        // write is enough.
        let lone = LeastBound {
            partitions: Some(1),
            crashes: Some(0),
            give_backs: Some(0),
            ..LeastBound::default()
        };
        match self {
            LockBug::DequeueSeed => LeastBound::default(),
            // A crash strands the one message or item: nobody gives it back.
            LockBug::DequeueNoExpired | LockBug::NextForStateNoExpiry => LeastBound {
                partitions: Some(1),
                give_backs: Some(0),
                ..LeastBound::default()
            },
            // One lost reply (the lock models' default) and the retry of the completion.
            LockBug::Engine(QueueKnownBad::GoneMeansLost) => LeastBound {
                lost_replies: Some(1),
                delays: Some(0),
                ..lone
            },
            LockBug::BlindClaim | LockBug::BlindComplete | LockBug::BlindLease => LeastBound {
                delays: Some(1),
                ..lone
            },
            LockBug::LockNoDrift => LeastBound {
                pauses: Some(3),
                skew: Some(0),
                ..lone
            },
            // One consumer, one delivery allowed: its crash leaves its message to
            // turn poison once the lock expires, ahead of the healthy ones in
            // visibility order; a second message is taken while it watches the lock
            // and a third waits behind the poison one.
            LockBug::Engine(QueueKnownBad::PoisonSpendsBatch) => LeastBound {
                hosts: Some(1),
                partitions: Some(3),
                crashes: Some(1),
                give_backs: Some(0),
                max_dequeue: Some(1),
                ..LeastBound::default()
            },
            // A producer whose part write is held on the wire while a consumer polls.
            LockBug::Engine(QueueKnownBad::ManifestFirst)
            | LockBug::Engine(QueueKnownBad::ManifestFirstUnchecked) => LeastBound {
                partitions: Some(1),
                crashes: Some(0),
                give_backs: Some(0),
                delays: Some(1),
                lost_replies: Some(0),
                ..LeastBound::default()
            },
            // A completion whose head delete is held on the wire, then its crash.
            LockBug::Engine(QueueKnownBad::HeadFirst) => LeastBound {
                partitions: Some(1),
                crashes: Some(1),
                give_backs: Some(0),
                delays: Some(1),
                lost_replies: Some(0),
                ..LeastBound::default()
            },
            // A producer's head reply held past the sweep's bound: the sweep drops
            // the key and deletes the head, then the reply arrives and the payload is
            // stored. Liveness is checked from the late reply, past the bound.
            LockBug::Engine(QueueKnownBad::ClaimUnbounded) => LeastBound {
                partitions: Some(1),
                crashes: Some(0),
                give_backs: Some(0),
                late_replies: Some(1),
                delays: Some(0),
                lost_replies: Some(0),
                horizon: Some(11),
                ..LeastBound::default()
            },
            // Two consumers read the same oldest message: one's claim is held on the
            // wire while the other's wins, and the loser's dequeue ends with the
            // second message visible.
            LockBug::Engine(QueueKnownBad::LostClaimWaitsPoll) => LeastBound {
                hosts: Some(2),
                partitions: Some(2),
                crashes: Some(0),
                give_backs: Some(0),
                delays: Some(1),
                lost_replies: Some(0),
                ..LeastBound::default()
            },
            // The poison message leads the visibility order only when a crash
            // strands it (an abandoned one goes behind the rest): its holder crashes
            // and its new life claims a second message; the other consumer, having
            // completed a third, moves the poison one with its move held on the wire;
            // the new life moves it first and claims a fourth; the held move is
            // refused, with a fifth message visible. Five messages, at 3 s.
            LockBug::Engine(QueueKnownBad::LostMoveWaitsPoll) => LeastBound {
                hosts: Some(2),
                partitions: Some(MAX_MESSAGES),
                crashes: Some(1),
                give_backs: Some(0),
                max_dequeue: Some(1),
                delays: Some(1),
                lost_replies: Some(0),
                horizon: Some(3),
                ..LeastBound::default()
            },
            // The consumer reads the producer's first part from a replica that has not
            // received it yet, beside the message that names it.
            LockBug::Engine(QueueKnownBad::MissingPartIsDamage) => LeastBound {
                stale_reads: Some(1),
                delays: Some(0),
                lost_replies: Some(0),
                ..lone
            },
            // A consumer's dead-letter move seen half applied by the sweep's query of
            // the documents naming the set: the message gone, its dead letter not yet
            // there.
            // The message comes back by its holder's give-back, not a crash.
            LockBug::Engine(QueueKnownBad::UnrecordedHeads) => LeastBound {
                partitions: Some(1),
                crashes: Some(0),
                stale_reads: Some(1),
                max_dequeue: Some(1),
                delays: Some(0),
                lost_replies: Some(0),
                ..LeastBound::default()
            },
            // One delivery makes the large payload's message a dead letter; the
            // operator's delete of it is applied with its answer lost, so the consumer
            // leaves the parts, and the head names the dead letter for good.
            LockBug::Engine(QueueKnownBad::DiscardKeepsHead) => LeastBound {
                partitions: Some(1),
                crashes: Some(0),
                max_dequeue: Some(1),
                lost_replies: Some(1),
                delays: Some(0),
                dead_letter_deletes: Some(1),
                // The lost reply, then the liveness bound after it.
                horizon: Some(12),
                ..LeastBound::default()
            },
            // The producer's first manifest held on the wire past its retry; a
            // consumer's completion of the retry's message has its reply held while
            // the first manifest lands and the consumer takes that message.
            LockBug::Engine(QueueKnownBad::CompletionReadsHeld) => LeastBound {
                partitions: Some(1),
                crashes: Some(0),
                give_backs: Some(0),
                late_replies: Some(1),
                delays: Some(1),
                lost_replies: Some(0),
                depth_first: true,
                ..LeastBound::default()
            },
            // A consumer gives its message back with the reply held, takes it again,
            // and the held reply arrives.
            LockBug::Engine(QueueKnownBad::HolderAnswersReadHeld) => LeastBound {
                partitions: Some(1),
                crashes: Some(0),
                late_replies: Some(1),
                delays: Some(0),
                lost_replies: Some(0),
                ..LeastBound::default()
            },
            // A handler overruns; its consumer waits out its own lock and delivers the
            // message again, or its holder's `next_for_state` leases the item again
            // for another task; the first handler then completes or saves.
            LockBug::Engine(QueueKnownBad::HandleNamesMessage)
            | LockBug::ItemEngine(ItemKnownBad::GrantNamesItem) => LeastBound {
                // Queue: a second consumer, watching the lock since the first
                // delivery, always takes the message before its own consumer's
                // second sight. Items: found with two holders too; one is the least.
                hosts: Some(1),
                overruns: Some(1),
                late_replies: Some(0),
                delays: Some(0),
                lost_replies: Some(0),
                ..lone
            },
            // A holder's acquire has its reply held; it acquires the item again over
            // its own lease, and the held reply arrives.
            LockBug::ItemEngine(ItemKnownBad::AnswersReadHeld) => LeastBound {
                late_replies: Some(1),
                delays: Some(0),
                lost_replies: Some(0),
                ..lone
            },
            // A holder's acquire lands with its reply held; its `next_for_state`
            // leases the item again (its own), it breaks that lease, the held reply
            // arrives, and another holder takes the free item. Three polls of one
            // holder inside the first lease's authority: two-second leases end
            // before the third.
            LockBug::ItemEngine(ItemKnownBad::ForgetsLetGo) => LeastBound {
                hosts: Some(2),
                give_backs: Some(1),
                late_replies: Some(1),
                delays: Some(0),
                lost_replies: Some(0),
                lock_ticks: Some(3),
                ..lone
            },
            // No queue property promises an order: the engine's test of the dequeue
            // order catches it.
            LockBug::DequeueUnordered => LeastBound {
                out_of_reach: true,
                ..LeastBound::default()
            },
        }
    }

    /// Every variant.
    pub const ALL: [LockBug; 25] = [
        LockBug::DequeueSeed,
        LockBug::DequeueNoExpired,
        LockBug::BlindClaim,
        LockBug::BlindComplete,
        LockBug::DequeueUnordered,
        LockBug::LockNoDrift,
        LockBug::NextForStateNoExpiry,
        LockBug::BlindLease,
        LockBug::Engine(QueueKnownBad::GoneMeansLost),
        LockBug::Engine(QueueKnownBad::PoisonSpendsBatch),
        LockBug::Engine(QueueKnownBad::ManifestFirst),
        LockBug::Engine(QueueKnownBad::ManifestFirstUnchecked),
        LockBug::Engine(QueueKnownBad::HeadFirst),
        LockBug::Engine(QueueKnownBad::ClaimUnbounded),
        LockBug::Engine(QueueKnownBad::LostClaimWaitsPoll),
        LockBug::Engine(QueueKnownBad::LostMoveWaitsPoll),
        LockBug::Engine(QueueKnownBad::MissingPartIsDamage),
        LockBug::Engine(QueueKnownBad::UnrecordedHeads),
        LockBug::Engine(QueueKnownBad::DiscardKeepsHead),
        LockBug::Engine(QueueKnownBad::CompletionReadsHeld),
        LockBug::Engine(QueueKnownBad::HolderAnswersReadHeld),
        LockBug::Engine(QueueKnownBad::HandleNamesMessage),
        LockBug::ItemEngine(ItemKnownBad::AnswersReadHeld),
        LockBug::ItemEngine(ItemKnownBad::GrantNamesItem),
        LockBug::ItemEngine(ItemKnownBad::ForgetsLetGo),
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            LockBug::DequeueSeed => "dequeue-seed",
            LockBug::DequeueNoExpired => "dequeue-no-expired",
            LockBug::BlindClaim => "blind-claim",
            LockBug::BlindComplete => "blind-complete",
            LockBug::DequeueUnordered => "dequeue-unordered",
            LockBug::LockNoDrift => "lock-no-drift",
            LockBug::NextForStateNoExpiry => "next-for-state-no-expiry",
            LockBug::BlindLease => "blind-lease",
            LockBug::Engine(bad) => bad.name(),
            LockBug::ItemEngine(bad) => bad.name(),
        }
    }

    /// Whether the variant is one of a large payload's part set (it runs the queue's
    /// large-payload mode).
    pub fn is_about_parts(self) -> bool {
        matches!(
            self,
            LockBug::Engine(QueueKnownBad::ManifestFirst)
                | LockBug::Engine(QueueKnownBad::ManifestFirstUnchecked)
                | LockBug::Engine(QueueKnownBad::HeadFirst)
                | LockBug::Engine(QueueKnownBad::ClaimUnbounded)
                | LockBug::Engine(QueueKnownBad::MissingPartIsDamage)
                | LockBug::Engine(QueueKnownBad::UnrecordedHeads)
                | LockBug::Engine(QueueKnownBad::DiscardKeepsHead)
                | LockBug::Engine(QueueKnownBad::CompletionReadsHeld)
        )
    }

    /// Whether the variant exists in the model of `kind`.
    pub fn applies_to(self, kind: LockKind) -> bool {
        match self {
            LockBug::LockNoDrift => true,
            LockBug::NextForStateNoExpiry | LockBug::BlindLease | LockBug::ItemEngine(_) => {
                kind == LockKind::Items
            }
            _ => kind == LockKind::Queue,
        }
    }

    /// Parses the name of a variant of the model of `kind`.
    pub fn parse(s: &str, kind: LockKind) -> Result<LockBug, BoundsError> {
        LockBug::ALL
            .into_iter()
            .find(|b| b.name() == s && b.applies_to(kind))
            .ok_or_else(|| LockBug::unknown(s, kind))
    }

    fn unknown(s: &str, kind: LockKind) -> BoundsError {
        let names: Vec<&str> = LockBug::ALL
            .iter()
            .filter(|b| b.applies_to(kind))
            .map(|b| b.name())
            .collect();
        BoundsError::UnknownVariant {
            name: s.to_string(),
            expected: names.join(", "),
        }
    }
}

impl fmt::Display for LockBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_earlier_behaviour_of_the_consumer_is_a_queue_variant_the_checker_can_run_by_its_name()
    {
        for bad in QueueKnownBad::ALL {
            let bug = LockBug::Engine(bad);
            assert!(LockBug::ALL.contains(&bug), "{bad:?} is missing");
            assert_eq!(LockBug::parse(bad.name(), LockKind::Queue).unwrap(), bug);
            assert!(LockBug::parse(bad.name(), LockKind::Items).is_err());
        }
        let mut names: Vec<&str> = LockBug::ALL.iter().map(|b| b.name()).collect();
        let listed = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), listed, "two variants share a name");
    }
}
