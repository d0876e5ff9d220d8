//! A consumer's settings, and the rule that picks the messages a dequeue takes.

use super::{Message, MessageState, QueueName};
use crate::lock::{LockPolicy, Named};
use crate::store::Limits;
use crate::time::{Millis, Now};
use std::fmt;

/// What a dequeue knows of one stored message.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// The message.
    pub message: &'a Message,
    /// Whether its lock, if any, counts as expired under the lock rule.
    pub lock_expired: bool,
    /// The consumer's clocks.
    pub now: Now,
    /// The consumer's lock duration.
    pub lock_duration: Millis,
}

/// Decides whether a dequeue may take a message. Pluggable so that the model checker
/// can run the seeds' predicates against the same engine; only
/// [`Selector::DELIVERABLE`] ships. Selectors compare by name.
pub type Selector = Named<fn(&Candidate<'_>) -> bool>;

impl Selector {
    /// leasehold's rule, [`deliverable`].
    pub const DELIVERABLE: Selector = Selector {
        name: "deliverable",
        pick: deliverable,
    };
}

/// leasehold's rule: visible, and pending or locked by a lock that has expired.
pub fn deliverable(c: &Candidate<'_>) -> bool {
    c.message.next_visible_at <= c.now.wall
        && match c.message.state {
            MessageState::Pending => true,
            MessageState::InProgress { .. } => c.lock_expired,
            MessageState::DeadLettered { .. }
            | MessageState::PartSet { .. }
            | MessageState::Part { .. } => false,
        }
}

/// The settings of a queue consumer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConsumerConfig {
    /// The queue consumed.
    pub queue: QueueName,
    /// How long a delivery's lock lasts.
    pub lock_duration: Millis,
    /// The lock rule and clock assumptions.
    pub policy: LockPolicy,
    /// A message delivered this many times without completing is dead-lettered
    /// instead of delivered again (a poison message).
    pub max_dequeue_count: u32,
    /// The store's limits, checked before a message is sent.
    pub limits: Limits,
    /// Which messages a dequeue takes.
    pub select: Selector,
    /// How often a dequeue reads the locked messages, besides whenever a lock it
    /// watches is due to expire; `None` is a quarter of `lock_duration`. A longer
    /// interval costs fewer reads and takes over a crashed consumer's messages up to
    /// that much later; zero reads them on every dequeue.
    pub lock_watch: Option<Millis>,
    /// How payloads too large for one document are kept ([`super::parts`]); `None`
    /// refuses them with [`QueueError::TooLarge`](super::QueueError::TooLarge).
    pub large: Option<LargeMessages>,
    /// An earlier behaviour, kept only so that the checkers can reproduce it.
    #[doc(hidden)]
    pub known_bad: Option<QueueKnownBad>,
}

/// The settings of payloads kept in parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LargeMessages {
    /// The largest payload accepted, in bytes; a larger one is refused `TooLarge`.
    pub max_bytes: usize,
    /// A part set whose head no write has changed for this long (plus the drift
    /// allowance, on the sweeper's clock), and which no message names, is swept. A
    /// producer whose writes pause longer than this may find its set swept: its
    /// enqueue then fails, and nothing of it is delivered.
    pub orphan_after: Millis,
}

impl Default for LargeMessages {
    /// 64 MiB at most; sets abandoned for 5 minutes are swept.
    fn default() -> Self {
        LargeMessages {
            max_bytes: 64 * 1024 * 1024,
            orphan_after: Millis::from_secs(300),
        }
    }
}

/// Earlier behaviours of the consumer and producer, kept only so that the checkers can
/// reproduce the defects they had (the model's `--bug NAME`, with
/// [`QueueKnownBad::name`]): the behaviour is the consumer's own reading of its
/// answers and the order of its writes, which no driver or network can fake.
/// Production leaves `ConsumerConfig::known_bad` unset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueKnownBad {
    /// A completion answered "not found" counts as a lost lock even while the lock
    /// still excluded every other consumer, and a dequeue lets go of a message as
    /// soon as a completion gives its authority up. A completion that landed but
    /// whose reply was lost (or that the SDK sent again) is then reported
    /// `LockLost` when retried, or refused `NotHeld`.
    GoneMeansLost,
    /// A dequeue ends once it has acted on its one read, so a message moved to the
    /// dead letters takes a place in the batch: with a backlog of poison messages
    /// ahead, a batch of one delivers nothing poll after poll while healthy messages
    /// wait behind them.
    PoisonSpendsBatch,
    /// A large payload's message is written right after its set's head, before its
    /// parts (or its claim-checked payload), as a provider that wrote the manifest
    /// first would: a dequeue in between finds parts missing.
    ManifestFirst,
    /// As `ManifestFirst`, and a consumer joins whatever parts it finds without
    /// checking the length or hash: a partial payload is delivered.
    ManifestFirstUnchecked,
    /// A completion deletes the set's head before its parts (or its claim-checked
    /// payload): a completion cut short between the two leaves parts no sweep can
    /// find.
    HeadFirst,
    /// A producer stores its claim-checked payload however long after its head it
    /// gets to: a payload that lands after a sweep dropped its key and deleted its
    /// head is found by no sweep.
    ClaimUnbounded,
    /// A dequeue ends once its claims are answered, even when another consumer won
    /// some of them: consumers that read the same oldest messages lose claims to
    /// each other, and a loser with room waits a poll while the backlog waits too
    /// (the simulator's seed 4065274: a consumer had room for 16 s behind a backlog).
    LostClaimWaitsPoll,
    /// A poison message's move to the dead letters that another consumer beat
    /// (which moved or claimed it first) is no loss to the dequeue: a loser that read
    /// a full batch waits a poll with room left while messages behind it wait too.
    LostMoveWaitsPoll,
    /// A part of a large payload read as not found (404) is missing for good: the
    /// payload is judged damaged and its message moved to the dead letters at once.
    /// At Session consistency a replica that lags may not have the producer's parts
    /// yet, though the message that names them is there, so a healthy message is
    /// dead-lettered after one delivery (the long swarm's queue runs, once they drew
    /// lagging replicas).
    MissingPartIsDamage,
    /// A part set's head records nothing of the document that names the set, as
    /// heads written before the record did: a sweep asks a query of the messages and
    /// dead letters whether one names the set, and marks the head if none answers. At
    /// Session consistency a replica that lags answers without a message that exists
    /// (a dead-letter move seen half applied, or a message abandoned for later seen
    /// as before its creation), and the sweep deletes a live message's payload (the
    /// long swarm's queue runs with lagging replicas).
    UnrecordedHeads,
    /// A dead letter's delete is a lone delete that leaves its part set's head naming
    /// it, as deleting it by hand does. A delete whose answer is lost, or a consumer
    /// that stops before the parts go, leaves a set that no sweep will ever take: it
    /// names a document, and only the batch that moves that document would rewrite it.
    DiscardKeepsHead,
    /// A completion's answer reads what it frees from the document this consumer
    /// holds when the answer comes, and acts on the lock it holds then. If the reply
    /// was held while an enqueue stored the message anew and this consumer took the
    /// new one, the answer deletes the new message's payload and drops its lock.
    CompletionReadsHeld,
    /// As `CompletionReadsHeld`, for an abandon, a dead-letter move and a renewal:
    /// the answer acts on the lock this consumer holds when it comes. A give-back's
    /// reply held while the consumer took the message again drops the new delivery's
    /// lock; a renewal's gives it the old version's etag. The new delivery's
    /// completion is refused, and the message comes back once more than its
    /// handlers failed.
    HolderAnswersReadHeld,
    /// A handler's complete, renew, abandon or dead-letter names the message only,
    /// and acts on whatever lock the consumer holds on it when the call comes (as
    /// `has_authority` answers for it): a handler that overran its authority, after
    /// its consumer let the lock go and took the message again for another handler,
    /// completes the message under the new delivery's lock while the other handler
    /// still works on it.
    HandleNamesMessage,
}

impl QueueKnownBad {
    /// Every earlier behaviour, in the order they are declared.
    pub const ALL: [QueueKnownBad; 14] = [
        QueueKnownBad::GoneMeansLost,
        QueueKnownBad::PoisonSpendsBatch,
        QueueKnownBad::ManifestFirst,
        QueueKnownBad::ManifestFirstUnchecked,
        QueueKnownBad::HeadFirst,
        QueueKnownBad::ClaimUnbounded,
        QueueKnownBad::LostClaimWaitsPoll,
        QueueKnownBad::LostMoveWaitsPoll,
        QueueKnownBad::MissingPartIsDamage,
        QueueKnownBad::UnrecordedHeads,
        QueueKnownBad::DiscardKeepsHead,
        QueueKnownBad::CompletionReadsHeld,
        QueueKnownBad::HolderAnswersReadHeld,
        QueueKnownBad::HandleNamesMessage,
    ];

    /// The behaviour's name on the checkers' command lines (`--bug NAME`).
    pub fn name(self) -> &'static str {
        match self {
            QueueKnownBad::GoneMeansLost => "gone-means-lost",
            QueueKnownBad::PoisonSpendsBatch => "poison-spends-batch",
            QueueKnownBad::ManifestFirst => "manifest-first",
            QueueKnownBad::ManifestFirstUnchecked => "manifest-first-unchecked",
            QueueKnownBad::HeadFirst => "head-first",
            QueueKnownBad::ClaimUnbounded => "claim-unbounded",
            QueueKnownBad::LostClaimWaitsPoll => "lost-claim-waits-poll",
            QueueKnownBad::LostMoveWaitsPoll => "lost-move-waits-poll",
            QueueKnownBad::MissingPartIsDamage => "missing-part-is-damage",
            QueueKnownBad::UnrecordedHeads => "unrecorded-heads",
            QueueKnownBad::DiscardKeepsHead => "discard-keeps-head",
            QueueKnownBad::CompletionReadsHeld => "completion-reads-held",
            QueueKnownBad::HolderAnswersReadHeld => "holder-answers-read-held",
            QueueKnownBad::HandleNamesMessage => "handle-names-message",
        }
    }
}

impl ConsumerConfig {
    /// Defaults for `queue`: 60 s locks, 5 deliveries at most, Cosmos DB's limits.
    pub fn new(queue: QueueName) -> ConsumerConfig {
        ConsumerConfig {
            queue,
            lock_duration: Millis::from_secs(60),
            policy: LockPolicy::default(),
            max_dequeue_count: 5,
            limits: Limits::default(),
            select: Selector::DELIVERABLE,
            lock_watch: None,
            large: Some(LargeMessages::default()),
            known_bad: None,
        }
    }

    /// How often a dequeue reads the locked messages when none it watches is due.
    pub fn lock_watch_interval(&self) -> Millis {
        self.lock_watch
            .unwrap_or(Millis(self.lock_duration.as_millis() / 4))
    }

    /// Checks that the settings can work.
    pub fn validate(&self) -> Result<(), ConsumerConfigError> {
        if self.policy.authority_span(self.lock_duration) == Millis::ZERO {
            return Err(ConsumerConfigError::LockTooShort {
                duration: self.lock_duration,
            });
        }
        if self.max_dequeue_count == 0 {
            return Err(ConsumerConfigError::NoDeliveries);
        }
        if let Some(large) = self.large {
            if large.orphan_after == Millis::ZERO {
                return Err(ConsumerConfigError::NoOrphanBound);
            }
            // A claim-checked payload is stored only within this span after its
            // head (`Consumer::claim_in_time`): none would ever be.
            if self.policy.authority_span(large.orphan_after) == Millis::ZERO {
                return Err(ConsumerConfigError::OrphanBoundTooShort {
                    orphan_after: large.orphan_after,
                });
            }
        }
        Ok(())
    }
}

/// Settings a consumer refuses.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConsumerConfigError {
    /// The lock duration leaves no authority after the drift allowance and margin.
    LockTooShort {
        /// The duration given.
        duration: Millis,
    },
    /// A maximum dequeue count of zero would dead-letter every message.
    NoDeliveries,
    /// Part sets swept at once would sweep a producer's set while it writes it.
    NoOrphanBound,
    /// The sweep's bound leaves a producer no time after its head, once the drift
    /// allowance and the margin are taken off: no claim-checked payload could ever be
    /// stored.
    OrphanBoundTooShort {
        /// The bound given.
        orphan_after: Millis,
    },
}

impl fmt::Display for ConsumerConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConsumerConfigError::LockTooShort { duration } => write!(
                f,
                "a lock of {duration} leaves no authority after the drift allowance and the \
                 safety margin; use a longer lock"
            ),
            ConsumerConfigError::NoDeliveries => {
                f.write_str("max_dequeue_count must be at least 1")
            }
            ConsumerConfigError::NoOrphanBound => f.write_str(
                "large.orphan_after must be above zero, or a sweep could remove a part set \
                 while its producer writes it",
            ),
            ConsumerConfigError::OrphanBoundTooShort { orphan_after } => write!(
                f,
                "large.orphan_after of {orphan_after} leaves a producer no time to store a \
                 claim-checked payload after the drift allowance and the safety margin; use \
                 a longer bound"
            ),
        }
    }
}

impl std::error::Error for ConsumerConfigError {}
