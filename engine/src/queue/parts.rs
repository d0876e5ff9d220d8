//! Payloads larger than a document, kept as a set of parts beside the message.
//!
//! A Cosmos DB item holds at most 2 MB, and so does a transactional batch. A payload
//! past that is written as a *part set*: a small head document, then the parts, each
//! written in one batch with a conditional rewrite of the head, then the message (the
//! manifest) in one batch with a last conditional rewrite of the head. The manifest
//! names the set, the payload's length and its hash; it is the only document a
//! dequeue sees, and it exists only once every part does.
//!
//! Every write of a producer is fenced by the head's etag, so a sweeper that has
//! marked a set as abandoned (a rewrite of the head) stops every later write of it:
//! no part lands outside a set that the sweep can find, and no manifest lands for a
//! set being swept. A consumer that dequeues the manifest reads the parts with point
//! reads and delivers the payload only if the length and hash agree: it never hands
//! out a partial or mixed payload. Completing deletes the manifest (under its lock),
//! then the parts, then the head.
//!
//! The head records which document names its set ([`Naming`]): nobody while the
//! producer writes, the manifest from the batch that writes it, the dead letter from
//! the batch that moves the message there, and so on, each in the batch that moves
//! the naming document, which rewrites the head too. A set left behind (its producer
//! stopped half-way, or a completion cut short) is swept: a head that names nobody,
//! seen unchanged for `orphan_after` plus the drift allowance, is marked with
//! if-match, then its parts and the head are deleted. The mark's if-match alone
//! stands for the whole decision. A query of the documents that name the set would
//! not: at Session consistency a replica that lags can answer it without a message
//! that exists (the known-bad `unrecorded-heads`, which heads written before heads
//! kept their naming document still follow).

use super::{Message, MessageName, QueueName};
use crate::ids::DocId;
use crate::lock::LockToken;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Names one part set: the producer's life and a number it never reuses, so that two
/// attempts to enqueue one name never share parts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PartSetId(String);

impl PartSetId {
    /// The set a producer's token names: its holder name escaped for ids, its life
    /// and the token's number.
    pub fn of(token: &LockToken) -> PartSetId {
        PartSetId(super::tag::token_tag(token))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PartSetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which document names a part set, as its head records it.
///
/// Stored as the head's `NamedBy`: absent on a head written before heads recorded
/// it, `null` while nothing names the set, else the id of the message or dead letter.
///
/// ```
/// use leasehold_engine::DocId;
/// use leasehold_engine::queue::Naming;
/// let by: Naming = serde_json::from_str("\"orders:m1\"").unwrap();
/// assert_eq!(by, Naming::By(DocId::from("orders:m1")));
/// assert_eq!(serde_json::from_str::<Naming>("null").unwrap(), Naming::Nobody);
/// assert_eq!(serde_json::to_string(&Naming::Nobody).unwrap(), "null");
/// assert!(serde_json::to_string(&Naming::Unrecorded).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Naming {
    /// Written by a version before heads recorded their naming document: only a
    /// query of the messages and dead letters can tell, and a lagging replica can
    /// answer it wrongly.
    #[default]
    Unrecorded,
    /// No message or dead letter names the set: not yet (its producer writes), or
    /// not any more (its message completed).
    Nobody,
    /// This message or dead letter names the set.
    By(DocId),
}

impl Naming {
    /// Whether the head predates the record (its `NamedBy` is absent).
    pub fn is_unrecorded(&self) -> bool {
        *self == Naming::Unrecorded
    }
}

impl Serialize for Naming {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Naming::By(id) => serializer.serialize_some(id),
            Naming::Nobody => serializer.serialize_none(),
            // Only ever skipped: written as `null` it would read back as nobody, and a
            // sweep would take the set without the query an unrecorded head needs.
            Naming::Unrecorded => Err(serde::ser::Error::custom(
                "an unrecorded naming is written by leaving the field out",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Naming {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<DocId>::deserialize(deserializer)? {
            Some(id) => Naming::By(id),
            None => Naming::Nobody,
        })
    }
}

/// The head of `named`'s part set, recording `named_by` as the document that names
/// it: what a batch that moves `named` (a manifest, a message, a dead letter) writes
/// beside it. `None` if `named` keeps its payload in itself.
pub(super) fn head_of(named: &Message, named_by: Naming) -> Option<Message> {
    let parts = named.parts.as_ref()?;
    Some(Message {
        id: head_id(&named.queue, &named.name, &parts.set),
        state: super::MessageState::PartSet {
            set: parts.set.clone(),
            count: parts.count,
            sweeping: false,
            named_by,
        },
        payload: String::new(),
        parts: None,
        dequeue_count: 0,
        ..named.clone()
    })
}

/// What a message whose payload is kept in parts says of them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartsRef {
    /// The set.
    #[serde(rename = "Set")]
    pub set: PartSetId,
    /// How many parts; 0 for a claim check, whose payload is in the user's claim
    /// store ([`super::claim`]).
    #[serde(rename = "Count")]
    pub count: u32,
    /// The payload's length in bytes.
    #[serde(rename = "Bytes")]
    pub bytes: u64,
    /// The payload's hash ([`payload_hash`]), in hex: a mixed or damaged payload is
    /// refused, never delivered.
    #[serde(rename = "Hash")]
    pub hash: String,
}

impl PartsRef {
    /// Whether the payload is in the user's claim store rather than in parts.
    pub fn is_claim(&self) -> bool {
        self.count == 0
    }
}

/// The id of a set's head. Message names hold no `:`, and the set's tag no `.`, so
/// this id is neither a message's (no second `:`) nor a dead letter's (whose tag is
/// followed by two `.`-separated numbers, not three parts).
pub fn head_id(queue: &QueueName, name: &MessageName, set: &PartSetId) -> DocId {
    DocId::from(format!("{}{name}:{set}.set", queue.prefix()))
}

/// The id of part `index` of a set.
pub fn part_id(queue: &QueueName, name: &MessageName, set: &PartSetId, index: u32) -> DocId {
    DocId::from(format!("{}{name}:{set}.{index}", queue.prefix()))
}

/// The bytes `c` takes in a JSON string as serde_json writes it: quotes, backslashes
/// and control characters are escaped, everything else is written as UTF-8.
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Splits `payload` into pieces that each take at most `budget` bytes inside a JSON
/// string, at character boundaries; `None` if `budget` cannot hold one character.
///
/// ```
/// use leasehold_engine::queue::split_payload;
/// assert_eq!(split_payload("abcde", 2), Some(vec!["ab", "cd", "e"]));
/// // A quote takes two bytes once escaped.
/// assert_eq!(split_payload("a\"b", 2), Some(vec!["a", "\"", "b"]));
/// assert_eq!(split_payload("\u{1}", 5), None);
/// ```
pub fn split_payload(payload: &str, budget: usize) -> Option<Vec<&str>> {
    let mut pieces = Vec::new();
    let (mut start, mut used) = (0, 0);
    for (at, c) in payload.char_indices() {
        let len = json_len(c);
        if len > budget {
            return None;
        }
        if used + len > budget {
            pieces.push(&payload[start..at]);
            (start, used) = (at, 0);
        }
        used += len;
    }
    if start < payload.len() || pieces.is_empty() {
        pieces.push(&payload[start..]);
    }
    Some(pieces)
}

/// The hash a manifest carries of its payload: 64-bit FNV-1a, in hex. It detects
/// parts mixed from two sets or damaged in the store, not tampering.
///
/// ```
/// use leasehold_engine::queue::payload_hash;
/// assert_eq!(payload_hash(b""), "cbf29ce484222325");
/// assert_ne!(payload_hash(b"ab"), payload_hash(b"ba"));
/// ```
pub fn payload_hash(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// What is wrong with parts read back for a manifest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PartsProblem {
    /// Part `index` is not in the store.
    Missing(u32),
    /// Part `index` is not a part of this set, or not at its place.
    Foreign(u32),
    /// The parts join to a payload of another length or hash.
    Damaged,
    /// The claim store holds nothing under the message's claim key.
    Unclaimed,
}

impl fmt::Display for PartsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartsProblem::Missing(i) => write!(f, "part {i} of its payload is missing"),
            PartsProblem::Foreign(i) => {
                write!(f, "part {i} of its payload belongs to another set")
            }
            PartsProblem::Damaged => f.write_str("its payload's parts do not match its hash"),
            PartsProblem::Unclaimed => f.write_str("its payload is missing from the claim store"),
        }
    }
}

/// Joins the parts read for `parts`, in order, and checks them against it. A piece
/// is `None` if its read found nothing.
pub fn join_parts(parts: &PartsRef, pieces: &[Option<Message>]) -> Result<String, PartsProblem> {
    let mut payload = String::with_capacity(usize::try_from(parts.bytes).unwrap_or(0));
    for (index, piece) in (0u32..).zip(pieces) {
        let Some(part) = piece else {
            return Err(PartsProblem::Missing(index));
        };
        match &part.state {
            super::MessageState::Part { set, index: i } if *set == parts.set && *i == index => {
                payload.push_str(&part.payload);
            }
            _ => return Err(PartsProblem::Foreign(index)),
        }
    }
    if pieces.len() != parts.count as usize || !payload_agrees(parts.bytes, &parts.hash, &payload) {
        return Err(PartsProblem::Damaged);
    }
    Ok(payload)
}

/// Whether `payload` has the length and hash its message names.
pub(super) fn payload_agrees(bytes: u64, hash: &str, payload: &str) -> bool {
    u64::try_from(payload.len()).ok() == Some(bytes) && payload_hash(payload.as_bytes()) == hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_written_before_the_record_reads_as_unrecorded_and_is_written_back_so() {
        use crate::queue::{MessageState, QueueName};
        use crate::time::{Millis, WallTime};
        let queue = QueueName::new("q").unwrap();
        let name = MessageName::new("m").unwrap();
        let mut head = Message::new(queue, name, String::new(), WallTime(5), Millis::ZERO);
        for (named_by, field) in [
            (Naming::Unrecorded, None),
            (Naming::Nobody, Some(serde_json::Value::Null)),
            (Naming::By(DocId::from("q:m")), Some("q:m".into())),
        ] {
            head.state = MessageState::PartSet {
                set: PartSetId("p.0.1".into()),
                count: 2,
                sweeping: false,
                named_by,
            };
            let json = serde_json::to_value(&head).unwrap();
            assert_eq!(json.get("NamedBy"), field.as_ref(), "{json}");
            assert_eq!(serde_json::from_value::<Message>(json).unwrap(), head);
        }
    }

    #[test]
    fn the_escaped_length_of_every_ascii_and_some_wide_characters_is_serde_jsons() {
        let wide = ['é', '€', '𝄞', '\u{7f}', '\u{2028}'];
        for c in (0u8..0x80).map(char::from).chain(wide) {
            let written = serde_json::to_string(&c.to_string()).unwrap().len() - 2;
            assert_eq!(json_len(c), written, "{c:?}");
        }
    }

    #[test]
    fn pieces_join_back_to_the_payload_and_each_fits_its_budget() {
        let payload: String = "ab\"c\\\u{1}é𝄞\n".repeat(40);
        for budget in [6, 7, 13, 100, 10_000] {
            let pieces = split_payload(&payload, budget).unwrap();
            assert_eq!(pieces.concat(), payload);
            for piece in &pieces {
                let escaped = serde_json::to_string(piece).unwrap().len() - 2;
                assert!(escaped <= budget, "{escaped} > {budget}");
                assert!(!piece.is_empty());
            }
        }
        assert_eq!(split_payload("", 4), Some(vec![""]));
    }
}
