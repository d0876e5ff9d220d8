//! A work queue kept as documents, as DurableTask's Cosmos DB provider keeps it, with
//! the seed's known bugs left out.
//!
//! Each message is one document, partitioned by its queue's name. A dequeue reads the
//! queue, picks the messages that are visible and either pending or locked by a lock
//! that has expired (oldest `next_visible_at` first, then oldest `created`), and claims
//! each with its own conditional write that sets a fresh lock and bumps the dequeue
//! count. Completing deletes the message, conditional on the version the consumer's
//! lock wrote, so a consumer whose lock was taken over gets `LockLost` and changes
//! nothing. A completion retried after an unknown outcome (a lost reply, or the SDK
//! sending it again) that finds the message gone answers `Completed` while the lock
//! still excludes every other consumer: only this consumer's own completion can have
//! deleted it then. A message delivered `max_dequeue_count` times is dead-lettered with its
//! reason instead of delivered again.
//!
//! Lock expiry follows [`crate::lock`]: safe under any clock skew.
//!
//! Two ways to consume:
//! - competing consumers: any number of [`Consumer`]s on one queue;
//! - partitioned queues: one queue per partition ([`QueueName::control`]), consumed by
//!   whichever host owns the partition's lease; a new owner still waits out the
//!   previous owner's message locks.

pub mod claim;
mod config;
mod consumer;
mod dead_letter;
mod io;
mod message;
pub mod parts;
mod tag;

pub use claim::{Claim, ClaimKey};
pub use config::{
    Candidate, ConsumerConfig, ConsumerConfigError, LargeMessages, QueueKnownBad, Selector,
    deliverable,
};
pub use consumer::{Consumer, claim_lost};
pub use dead_letter::move_lost;
pub use io::{Delivery, Handle, Input, Output, QueueError, QueueIntent, QueueRequest};
pub use message::{Message, MessageLock, MessageName, MessageState, NameError, QueueName};
pub use parts::{
    Naming, PartSetId, PartsProblem, PartsRef, head_id, join_parts, part_id, payload_hash,
    split_payload,
};
