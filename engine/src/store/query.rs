//! Selective reads: the documents of one partition key under an id prefix that pass a
//! small typed filter, in the order of one field, at most N of them.
//!
//! This is the reference semantics of a Cosmos DB query of the form
//! `SELECT TOP @n * FROM c WHERE STARTSWITH(c.id, @prefix) AND c.F1 <= @v1 AND ...
//! ORDER BY c.F`, run in one logical partition. The rules are chosen so that Cosmos DB
//! and the reference store agree on documents whose compared fields hold integers
//! (within ±2^53, where Cosmos DB's doubles are exact), strings, booleans, null,
//! objects or arrays; leasehold's documents hold nothing else:
//! - a condition holds only if the field is present and holds a value of the same
//!   type as the one compared with (Cosmos DB's comparisons across types, or with a
//!   missing field, are undefined, and a filter drops undefined);
//! - a document whose ordering field is missing, an object or an array is not
//!   returned (the Cosmos DB store adds a type check for it), and values of different
//!   types order by type first: null, booleans, numbers, strings, as Cosmos DB orders
//!   them;
//! - documents tied on the ordering field come back in an order the store picks (the
//!   reference store: by id). One ordering field, never two, because Cosmos DB serves
//!   an `ORDER BY` on two fields only with a composite index the container may lack;
//! - without an ordering field, documents come back ordered by id.
//!
//! Only integers, strings, booleans and null are comparable; a field holding anything
//! else passes no condition and orders nowhere. (A fraction is where the two stores
//! part: Cosmos DB compares it as a number.)

use super::{Container, Document, Stored};
use crate::ids::PartitionKey;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// A property path of a stored document, such as `Status` or `Lock.LockedUntil`.
///
/// Each segment is an identifier (`[A-Za-z_][A-Za-z0-9_]*`), so a path can be written
/// into a query's text safely: Cosmos DB cannot take a property name as a parameter.
///
/// ```
/// use leasehold_engine::store::FieldPath;
/// assert!(FieldPath::new("Lock.LockedUntil").is_ok());
/// assert!(FieldPath::new("x) OR (1=1").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FieldPath(Cow<'static, str>);

/// Why a field path was refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldPathError {
    /// The path given.
    pub path: String,
}

impl fmt::Display for FieldPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid field path {:?}: it must be identifiers ([A-Za-z_][A-Za-z0-9_]*) joined by dots",
            self.path
        )
    }
}

impl std::error::Error for FieldPathError {}

const fn is_valid_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let mut i = 0;
    let mut segment_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        let ok = if segment_start {
            b.is_ascii_alphabetic() || b == b'_'
        } else {
            b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
        };
        if !ok {
            return false;
        }
        segment_start = b == b'.';
        i += 1;
    }
    !segment_start
}

impl FieldPath {
    /// A path, checked.
    pub fn new(path: impl Into<String>) -> Result<FieldPath, FieldPathError> {
        let path = path.into();
        if is_valid_path(&path) {
            Ok(FieldPath(Cow::Owned(path)))
        } else {
            Err(FieldPathError { path })
        }
    }

    /// A path known when compiling; an invalid one fails the build where it is a
    /// constant.
    ///
    /// ```
    /// use leasehold_engine::store::FieldPath;
    /// const STATUS: FieldPath = FieldPath::from_static("Status");
    /// assert_eq!(STATUS.as_str(), "Status");
    /// ```
    pub const fn from_static(path: &'static str) -> FieldPath {
        assert!(is_valid_path(path), "invalid field path");
        FieldPath(Cow::Borrowed(path))
    }

    /// The path as written, segments joined by dots.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The property names, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }
}

impl TryFrom<String> for FieldPath {
    type Error = FieldPathError;
    fn try_from(path: String) -> Result<Self, Self::Error> {
        FieldPath::new(path)
    }
}

impl From<FieldPath> for String {
    fn from(path: FieldPath) -> String {
        path.0.into_owned()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A comparable value of a document's field. The variants are declared in Cosmos DB's
/// order of types, so the derived order is the store's order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Value {
    /// JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Number(i64),
    /// A string.
    String(String),
}

impl Value {
    fn same_type(&self, other: &Value) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }

    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Number(n) => serde_json::Value::from(*n),
            Value::String(s) => serde_json::Value::String(s.clone()),
        }
    }

    /// The comparable value of a JSON value, if it is one.
    pub fn from_json(json: &serde_json::Value) -> Option<Value> {
        match json {
            serde_json::Value::Null => Some(Value::Null),
            serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
            serde_json::Value::Number(n) => n.as_i64().map(Value::Number),
            serde_json::Value::String(s) => Some(Value::String(s.clone())),
            _ => None,
        }
    }
}

/// How a condition compares a field with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Compare {
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Compare {
    /// The operator as Cosmos DB SQL writes it.
    pub fn sql(self) -> &'static str {
        match self {
            Compare::Eq => "=",
            Compare::Lt => "<",
            Compare::Le => "<=",
            Compare::Gt => ">",
            Compare::Ge => ">=",
        }
    }
}

/// One condition of a filter: `field compare value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Condition {
    /// The field compared.
    pub field: FieldPath,
    /// The comparison.
    pub compare: Compare,
    /// The value compared with.
    pub value: Value,
}

impl Condition {
    /// `field compare value`.
    pub fn new(field: FieldPath, compare: Compare, value: Value) -> Condition {
        Condition {
            field,
            compare,
            value,
        }
    }

    /// Whether `doc` passes: the field is present, of the value's type, and compares.
    pub fn holds<D: Document>(&self, doc: &D) -> bool {
        let Some(found) = doc.field(&self.field) else {
            return false;
        };
        if !found.same_type(&self.value) {
            return false;
        }
        let order = found.cmp(&self.value);
        match self.compare {
            Compare::Eq => order.is_eq(),
            Compare::Lt => order.is_lt(),
            Compare::Le => order.is_le(),
            Compare::Gt => order.is_gt(),
            Compare::Ge => order.is_ge(),
        }
    }
}

/// A selective read: the documents of one partition key under an id prefix that pass
/// a small typed filter, in the order of one field, at most N of them.
///
/// ```
/// use leasehold_engine::queue::{Message, MessageName, QueueName};
/// use leasehold_engine::store::{Compare, Condition, Container, FieldPath, Query, Value};
/// use leasehold_engine::{Millis, PartitionKey, WallTime};
///
/// let queue = QueueName::new("q").unwrap();
/// let mut store = Container::new();
/// for (name, at) in [("a", 30), ("b", 10), ("c", 20)] {
///     let name = MessageName::new(name).unwrap();
///     store.create(Message::new(queue.clone(), name, "".into(), WallTime(at), Millis::ZERO)).unwrap();
/// }
/// let query = Query {
///     pk: Some(PartitionKey::new("q")),
///     prefix: queue.prefix(),
///     filter: vec![Condition::new(
///         FieldPath::from_static("NextVisibleTime"),
///         Compare::Le,
///         Value::Number(25),
///     )],
///     order_by: Some(FieldPath::from_static("NextVisibleTime")),
///     limit: Some(1),
/// };
/// let found = store.query(&query);
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].doc.name.as_str(), "b");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Query {
    /// The one partition key read; `None` reads across every partition (on Cosmos DB
    /// a cross-partition query, which fans out to every physical partition and
    /// merges the answers in order).
    pub pk: Option<PartitionKey>,
    /// Only ids starting with this (empty for every id).
    pub prefix: String,
    /// Conditions, all of which must hold.
    pub filter: Vec<Condition>,
    /// The field ordered by, ascending; `None` orders by id.
    pub order_by: Option<FieldPath>,
    /// At most this many documents; `None` for all.
    pub limit: Option<usize>,
}

impl Query {
    /// Whether `doc` is one this query selects, ignoring the limit.
    pub fn selects<D: Document>(&self, doc: &D) -> bool {
        self.pk.as_ref().is_none_or(|pk| doc.partition_key() == *pk)
            && doc.id().as_str().starts_with(&self.prefix)
            && self.filter.iter().all(|c| c.holds(doc))
            && self
                .order_by
                .as_ref()
                .is_none_or(|field| doc.field(field).is_some())
    }
}

impl<D: Document> Container<D> {
    /// Runs a selective read. The reference store breaks ties on the ordering field by
    /// id; callers must not rely on that, since Cosmos DB does not.
    pub fn query(&self, query: &Query) -> Vec<Stored<D>> {
        let mut found: Vec<(Option<Value>, &Stored<D>)> = self
            .iter_from(&query.prefix)
            .filter(|stored| query.selects(&stored.doc))
            .map(|stored| {
                let key = query.order_by.as_ref().and_then(|f| stored.doc.field(f));
                (key, stored)
            })
            .collect();
        // Stable: documents arrive in id order, so ties stay in id order.
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let limit = query.limit.unwrap_or(usize::MAX);
        found
            .into_iter()
            .take(limit)
            .map(|(_, stored)| stored.clone())
            .collect()
    }
}

/// The comparable value at `path` in `doc`'s JSON form. Documents without a faster way
/// of their own implement [`Document::field`] with it.
pub fn json_field<T: Serialize>(doc: &T, path: &FieldPath) -> Option<Value> {
    let json = serde_json::to_value(doc).ok()?;
    let mut at = &json;
    for segment in path.segments() {
        at = at.get(segment)?;
    }
    Value::from_json(at)
}
