//! Claim checks: a payload kept in a store of the user's choosing (a blob container,
//! a file share), with the message carrying only its reference.
//!
//! A claim check is a part set whose one part lives outside Cosmos DB: its head is
//! written first, then the driver stores the payload under the set's [`ClaimKey`],
//! then the message (the manifest, naming the set with `count` 0, the payload's length
//! and hash) is written in one batch with a conditional rewrite of the head. The
//! message exists only once the payload is stored. A dequeue delivers the message
//! with its [`Claim`]; the driver fetches the payload and checks it
//! ([`Claim::check`]) before acting on it. Completing deletes the message, then asks
//! the driver to delete the payload, and only then deletes the head.
//!
//! The head outlives the payload: a producer stopped after storing its payload, or a
//! completion cut short, leaves a head that the sweep finds, exactly as for parts. The
//! sweep marks it (fencing off the producer's manifest), asks the driver to delete the
//! payload, then deletes the head.
//!
//! A producer stores its payload only while its head has authority, as a lock holder
//! writes: `orphan_after` less the drift allowance and margin, from when the head's
//! first create was sent. A sweep drops a payload only after seeing the head unchanged
//! for `orphan_after`, so a payload stored in time is named by the message or dropped
//! by the sweep that takes the head. Past it the producer stores nothing; a put
//! answered past it is discarded ([`Output::DiscardClaim`](super::Output::DiscardClaim))
//! and the enqueue refused ([`QueueError::PartsSwept`](super::QueueError::PartsSwept)).
//! (Without this rule a head reply held past the bound let a payload land after the
//! sweep had dropped its key: the simulator's seed 3163414, the model's known-bad
//! `claim-unbounded`.)
//!
//! What stays open, and no fence in Cosmos DB can close: a put that fails and lands
//! later than its discard (the claim store's own timeouts), or a producer that dies
//! between a put that outlasted the bound and its discard, leaves the payload in the
//! claim store, named by nothing. Only a sweep that listed the claim store would find
//! it.

use super::{Message, MessageName, PartSetId, PartsProblem, QueueName};
use std::fmt;

/// Where a claim-checked payload is kept: `queue/name/set`. Neither a queue's nor a
/// message's name holds `/`, and a set is never reused, so two enqueues never share a
/// key, even of one name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimKey {
    /// The queue.
    pub queue: QueueName,
    /// The message's name.
    pub name: MessageName,
    /// The set the payload belongs to.
    pub set: PartSetId,
}

impl ClaimKey {
    /// The key of a message's claim-checked payload, if it has one: a live message or
    /// a dead letter.
    pub fn of(message: &Message) -> Option<ClaimKey> {
        let parts = message.parts.as_ref().filter(|p| p.is_claim())?;
        Some(ClaimKey {
            queue: message.queue.clone(),
            name: message.name.clone(),
            set: parts.set.clone(),
        })
    }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.queue, self.name, self.set)
    }
}

/// A delivered message's claim check: where its payload is and what it must be.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    /// Where the payload is.
    pub key: ClaimKey,
    /// The payload's length in bytes.
    pub bytes: u64,
    /// The payload's hash ([`payload_hash`](super::payload_hash)).
    pub hash: String,
}

impl Claim {
    /// Checks what the claim store returned for this claim (`None`: nothing under the
    /// key): the payload, if its length and hash agree.
    ///
    /// ```
    /// use leasehold_engine::lock::LockToken;
    /// use leasehold_engine::queue::{Claim, ClaimKey, MessageName, PartSetId, PartsProblem, QueueName, payload_hash};
    /// use leasehold_engine::{HostId, Incarnation};
    /// let token = LockToken { holder: HostId::from("producer"), incarnation: Incarnation(1), seq: 1 };
    /// let key = ClaimKey {
    ///     queue: QueueName::new("orders").unwrap(),
    ///     name: MessageName::new("order-17").unwrap(),
    ///     set: PartSetId::of(&token),
    /// };
    /// assert_eq!(key.to_string(), "orders/order-17/producer.1.1");
    /// let claim = Claim { key, bytes: 5, hash: payload_hash(b"hello") };
    /// assert_eq!(claim.check(Some("hello".into())), Ok("hello".to_string()));
    /// assert_eq!(claim.check(Some("jello".into())), Err(PartsProblem::Damaged));
    /// assert_eq!(claim.check(None), Err(PartsProblem::Unclaimed));
    /// ```
    pub fn check(&self, payload: Option<String>) -> Result<String, PartsProblem> {
        let payload = payload.ok_or(PartsProblem::Unclaimed)?;
        if !super::parts::payload_agrees(self.bytes, &self.hash, &payload) {
            return Err(PartsProblem::Damaged);
        }
        Ok(payload)
    }
}
