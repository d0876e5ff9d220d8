//! The message document and the names that address it.

use super::parts::{Naming, PartSetId, PartsRef};
use super::tag::token_tag;
use crate::ids::{DocId, PartitionKey};
use crate::lock::LockToken;
use crate::store::{Document, FieldPath, Value, json_field, json_size};
use crate::time::{Millis, WallTime};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A queue's name. It is the partition key of its messages, so that one queue's
/// messages are read, and batched, within one logical partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QueueName(String);

/// A message's name within its queue, chosen by the producer: enqueueing the same name
/// twice stores one message, so an enqueue of unknown outcome can simply be retried.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageName(String);

/// Why a queue or message name was refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NameError {
    /// The name given.
    pub name: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid name {:?}: {}", self.name, self.problem)
    }
}

impl std::error::Error for NameError {}

/// Cosmos DB refuses ids with `/`, `\`, `?` or `#`; `:` separates queue and message.
fn check_name(name: &str) -> Result<(), NameError> {
    let problem = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if name.contains(['/', '\\', '?', '#', ':']) {
        Some("it contains one of / \\ ? # :")
    } else {
        None
    };
    match problem {
        Some(p) => Err(NameError {
            name: name.to_string(),
            problem: p,
        }),
        None => Ok(()),
    }
}

impl QueueName {
    /// A queue name, checked.
    ///
    /// ```
    /// use leasehold_engine::queue::QueueName;
    /// assert!(QueueName::new("orders").is_ok());
    /// assert!(QueueName::new("a/b").is_err());
    /// ```
    pub fn new(name: impl Into<String>) -> Result<QueueName, NameError> {
        let name = name.into();
        check_name(&name)?;
        Ok(QueueName(name))
    }

    /// The control queue of one partition, for queues owned through partition leases
    /// (DurableTask's control queues).
    pub fn control(hub: &str, lease: &crate::ids::LeaseToken) -> Result<QueueName, NameError> {
        QueueName::new(format!("{hub}-control-{lease}"))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id prefix shared by every message of this queue.
    pub fn prefix(&self) -> String {
        format!("{}:", self.0)
    }
}

impl MessageName {
    /// A message name, checked.
    pub fn new(name: impl Into<String>) -> Result<MessageName, NameError> {
        let name = name.into();
        check_name(&name)?;
        Ok(MessageName(name))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for MessageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A consumer's lock on a message.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageLock {
    /// Who took it; completing needs the document version this lock wrote.
    #[serde(rename = "LockToken")]
    pub token: LockToken,
    /// The holder's wall clock at the lock's write, plus the duration. Informational
    /// under the `observed` rule.
    #[serde(rename = "LockedUntil")]
    pub until: WallTime,
    /// The lock duration, which readers wait out (plus drift) before taking over.
    #[serde(rename = "LockDurationMs")]
    pub duration: Millis,
}

/// Where a message is in its life. Completed messages are deleted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "Status")]
pub enum MessageState {
    /// Waiting to be delivered (again).
    Pending,
    /// Delivered and locked by a consumer.
    InProgress {
        /// The lock.
        #[serde(rename = "Lock")]
        lock: MessageLock,
    },
    /// Given up on: kept for inspection, never delivered again.
    DeadLettered {
        /// Why.
        #[serde(rename = "DeadLetterReason")]
        reason: String,
    },
    /// The head of a large payload's part set ([`super::parts`]): never delivered.
    PartSet {
        /// The set.
        #[serde(rename = "Set")]
        set: PartSetId,
        /// How many parts it has.
        #[serde(rename = "Count")]
        count: u32,
        /// A sweep found it abandoned: no write of its producer lands any more.
        #[serde(rename = "Sweeping")]
        sweeping: bool,
        /// The one document that names the set, kept in the same batch as every
        /// write that moves it, so that a sweep judges the set by this head alone.
        #[serde(
            rename = "NamedBy",
            default,
            skip_serializing_if = "Naming::is_unrecorded"
        )]
        named_by: Naming,
    },
    /// One part of a large payload: never delivered.
    Part {
        /// The set.
        #[serde(rename = "Set")]
        set: PartSetId,
        /// Its place in the payload, from 0.
        #[serde(rename = "Index")]
        index: u32,
    },
}

/// A queue message as stored. Field names follow DurableTask's Cosmos DB provider
/// where it has the field.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// The document id: the queue's prefix, then the message name.
    pub id: DocId,
    /// The queue.
    #[serde(rename = "QueueName")]
    pub queue: QueueName,
    /// The message's name within the queue.
    #[serde(rename = "Name")]
    pub name: MessageName,
    /// Status, and the lock or dead-letter reason that goes with it.
    #[serde(flatten)]
    pub state: MessageState,
    /// The producer's wall clock at enqueue.
    #[serde(rename = "CreatedDate")]
    pub created: WallTime,
    /// Not delivered before this wall-clock time.
    #[serde(rename = "NextVisibleTime")]
    pub next_visible_at: WallTime,
    /// How many times the message has been delivered.
    #[serde(rename = "DequeueCount")]
    pub dequeue_count: u32,
    /// The payload, as the producer gave it; empty when it is kept in parts.
    #[serde(rename = "Data")]
    pub payload: String,
    /// Where the payload is when it is too large for one document.
    #[serde(rename = "Parts", default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<PartsRef>,
}

/// The stored fields a dequeue selects and orders by.
impl Message {
    /// `Status`: `Pending`, `InProgress`, `DeadLettered`, `PartSet` or `Part`.
    pub const STATUS: FieldPath = FieldPath::from_static("Status");
    /// `NextVisibleTime`, in wall-clock milliseconds.
    pub const NEXT_VISIBLE: FieldPath = FieldPath::from_static("NextVisibleTime");
    /// `CreatedDate`, in wall-clock milliseconds.
    pub const CREATED: FieldPath = FieldPath::from_static("CreatedDate");
    /// `Name`, the message's name within its queue.
    pub const NAME: FieldPath = FieldPath::from_static("Name");
    /// `Parts.Set`: the part set a manifest names.
    pub const PARTS_SET: FieldPath = FieldPath::from_static("Parts.Set");
}

impl Message {
    /// The document id of message `name` in `queue`.
    pub fn id_for(queue: &QueueName, name: &MessageName) -> DocId {
        DocId::from(format!("{}{}", queue.prefix(), name))
    }

    /// The document id of the dead letter that `delivery` made of message `name`.
    ///
    /// It shares the queue's id prefix and partition key, so that one transactional
    /// batch can create it and delete the message, and it can never be a live
    /// message's id: names have no `:`, and this id has two after the queue's. The lock
    /// token makes it unique per delivery, so a name dead-lettered twice keeps both.
    /// Characters Cosmos DB refuses in ids are escaped, so any holder name fits.
    ///
    /// ```
    /// use leasehold_engine::queue::{Message, MessageName, QueueName};
    /// use leasehold_engine::lock::LockToken;
    /// use leasehold_engine::{HostId, Incarnation};
    ///
    /// let token = LockToken { holder: HostId::from("worker/1"), incarnation: Incarnation(2), seq: 7 };
    /// let id = Message::dead_letter_id(
    ///     &QueueName::new("orders").unwrap(),
    ///     &MessageName::new("m1").unwrap(),
    ///     &token,
    /// );
    /// assert_eq!(id.as_str(), "orders:m1:worker%2F1.2.7");
    /// ```
    pub fn dead_letter_id(queue: &QueueName, name: &MessageName, delivery: &LockToken) -> DocId {
        DocId::from(format!(
            "{}{}:{}",
            queue.prefix(),
            name,
            token_tag(delivery)
        ))
    }

    /// This message as a dead letter made by `delivery`: a document of its own, kept
    /// for inspection and never delivered.
    pub fn into_dead_letter(mut self, delivery: &LockToken, reason: String) -> Message {
        self.id = Self::dead_letter_id(&self.queue, &self.name, delivery);
        self.state = MessageState::DeadLettered { reason };
        self
    }

    /// The live message a requeue of this dead letter creates: pending, visible at
    /// `now`, its deliveries counted afresh.
    pub fn requeued(&self, now: WallTime) -> Message {
        Message {
            id: Self::id_for(&self.queue, &self.name),
            state: MessageState::Pending,
            next_visible_at: now,
            dequeue_count: 0,
            ..self.clone()
        }
    }

    /// A new pending message.
    pub fn new(
        queue: QueueName,
        name: MessageName,
        payload: String,
        now: WallTime,
        delay: Millis,
    ) -> Message {
        Message {
            id: Self::id_for(&queue, &name),
            queue,
            name,
            state: MessageState::Pending,
            created: now,
            next_visible_at: now + delay,
            dequeue_count: 0,
            payload,
            parts: None,
        }
    }

    /// The lock on the message, if it is in progress.
    pub fn lock(&self) -> Option<&MessageLock> {
        match &self.state {
            MessageState::InProgress { lock } => Some(lock),
            _ => None,
        }
    }

    /// Whether the message is dead-lettered.
    pub fn is_dead_lettered(&self) -> bool {
        matches!(self.state, MessageState::DeadLettered { .. })
    }
}

impl Document for Message {
    const PARTITION_KEY_PATH: &'static str = "/QueueName";

    fn id(&self) -> &DocId {
        &self.id
    }

    fn partition_key(&self) -> PartitionKey {
        PartitionKey::new(self.queue.as_str())
    }

    fn stored_size(&self) -> usize {
        json_size(self)
    }

    /// The fields a dequeue reads directly, any other through its JSON form; a test
    /// holds the two ways to agreeing.
    fn field(&self, path: &FieldPath) -> Option<Value> {
        let status = |s: &str| Some(Value::String(s.to_string()));
        match path.as_str() {
            "Status" => match self.state {
                MessageState::Pending => status("Pending"),
                MessageState::InProgress { .. } => status("InProgress"),
                MessageState::DeadLettered { .. } => status("DeadLettered"),
                MessageState::PartSet { .. } => status("PartSet"),
                MessageState::Part { .. } => status("Part"),
            },
            "Name" => Some(Value::String(self.name.as_str().to_string())),
            "Parts.Set" => self
                .parts
                .as_ref()
                .map(|p| Value::String(p.set.as_str().to_string())),
            "NextVisibleTime" => Some(Value::Number(self.next_visible_at.0)),
            "CreatedDate" => Some(Value::Number(self.created.0)),
            "DequeueCount" => Some(Value::Number(i64::from(self.dequeue_count))),
            _ => json_field(self, path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{HostId, Incarnation};

    #[test]
    fn a_locked_message_round_trips_with_the_providers_field_names() {
        let queue = QueueName::new("hub-control-00").unwrap();
        let mut msg = Message::new(
            queue,
            MessageName::new("m1").unwrap(),
            "{}".into(),
            WallTime(1_000),
            Millis(0),
        );
        msg.state = MessageState::InProgress {
            lock: MessageLock {
                token: LockToken {
                    holder: HostId::from("c1"),
                    incarnation: Incarnation(2),
                    seq: 7,
                },
                until: WallTime(61_000),
                duration: Millis::from_secs(60),
            },
        };
        let json = serde_json::to_value(&msg).unwrap();
        assert_eq!(json["Status"], "InProgress");
        assert_eq!(json["QueueName"], "hub-control-00");
        assert_eq!(json["Lock"]["LockedUntil"], 61_000);
        assert_eq!(json["id"], "hub-control-00:m1");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn the_fields_a_dequeue_reads_directly_agree_with_the_stored_json() {
        let queue = QueueName::new("q").unwrap();
        let mut msg = Message::new(
            queue,
            MessageName::new("m").unwrap(),
            "x".into(),
            WallTime(5),
            Millis(7),
        );
        msg.dequeue_count = 3;
        let token = LockToken {
            holder: HostId::from("c"),
            incarnation: Incarnation(1),
            seq: 2,
        };
        let locked = MessageState::InProgress {
            lock: MessageLock {
                token: token.clone(),
                until: WallTime(9),
                duration: Millis(4),
            },
        };
        let dead = msg.clone().into_dead_letter(&token, "r".into());
        let set = PartSetId::of(&token);
        let head = MessageState::PartSet {
            set: set.clone(),
            count: 2,
            sweeping: false,
            named_by: Naming::Nobody,
        };
        let part = MessageState::Part {
            set: set.clone(),
            index: 1,
        };
        for state in [MessageState::Pending, locked, dead.state, head, part] {
            msg.state = state;
            for path in [
                "Status",
                "NextVisibleTime",
                "CreatedDate",
                "DequeueCount",
                "Name",
            ] {
                let path = FieldPath::new(path).unwrap();
                assert_eq!(msg.field(&path), json_field(&msg, &path), "{path}");
                assert!(msg.field(&path).is_some(), "{path}");
            }
        }
        // A manifest's set, and its absence elsewhere.
        let path = Message::PARTS_SET;
        assert_eq!(msg.field(&path), None);
        msg.parts = Some(PartsRef {
            set,
            count: 2,
            bytes: 5,
            hash: "0".into(),
        });
        assert_eq!(msg.field(&path), json_field(&msg, &path));
        assert!(msg.field(&path).is_some());
    }

    #[test]
    fn a_dead_letter_id_fits_cosmos_whatever_the_holder_is_called() {
        let long = |c: char| c.to_string().repeat(200);
        let (queue, name) = (
            QueueName::new(long('q')).unwrap(),
            MessageName::new(long('m')).unwrap(),
        );
        let token = |holder: String| LockToken {
            holder: HostId::from(holder),
            incarnation: Incarnation(u64::MAX),
            seq: u64::MAX,
        };
        let slashes = Message::dead_letter_id(&queue, &name, &token("/".repeat(2_000)));
        let other = Message::dead_letter_id(&queue, &name, &token("/".repeat(1_999)));
        assert!(
            slashes.as_str().len() <= 1_023,
            "{}",
            slashes.as_str().len()
        );
        assert_ne!(slashes, other);
        assert!(!slashes.as_str().contains('/'));
        // A short holder is kept as written, escaped.
        let short = Message::dead_letter_id(&queue, &name, &token("w/1".into()));
        assert!(
            short
                .as_str()
                .ends_with(":w%2F1.18446744073709551615.18446744073709551615")
        );
    }

    #[test]
    fn names_that_cosmos_refuses_or_that_would_collide_are_rejected() {
        for bad in ["", "a/b", "a\\b", "a?b", "a#b", "a:b"] {
            assert!(QueueName::new(bad).is_err(), "{bad:?}");
            assert!(MessageName::new(bad).is_err(), "{bad:?}");
        }
        assert!(QueueName::new("x".repeat(201)).is_err());
    }
}
