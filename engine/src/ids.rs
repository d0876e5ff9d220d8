//! Identifiers, epochs, etags and checkpoints.
//!
//! String identifiers keep short values inline (see `text`): model checkers and
//! simulators clone whole host states millions of times.

use crate::text::Text;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Text);

        impl $name {
            /// Wraps `value` without validation.
            pub fn new(value: impl AsRef<str>) -> Self {
                Self(Text::new(value.as_ref()))
            }

            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }

            /// The identifier's bytes, without the UTF-8 check `as_str` makes.
            #[allow(dead_code)]
            pub(crate) fn as_bytes(&self) -> &[u8] {
                self.0.bytes()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.as_str(), f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map(Self::new)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::new(value)
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self::new(value)
            }
        }
    };
}

string_id!(
    /// The name of one host (one processor instance). It must be unique per running
    /// instance; CFP calls it the instance name.
    HostId
);
string_id!(
    /// The partition (feed range) a lease covers; CFP's `LeaseToken`.
    LeaseToken
);
string_id!(
    /// A document's `id` inside a container.
    DocId
);
string_id!(
    /// A document's partition key value.
    PartitionKey
);
string_id!(
    /// An opaque position in a partition's stream, such as a change feed continuation.
    Checkpoint
);

impl HostId {
    /// Whether this id is empty or only whitespace, which CFP reads as "no owner".
    pub fn is_blank(&self) -> bool {
        // Every lease of every scan asks this: an id that starts with a visible ASCII
        // character is answered without the UTF-8 check of `as_str`.
        match self.as_bytes().first() {
            Some(b) if b.is_ascii() && !b.is_ascii_whitespace() => false,
            _ => self.as_str().trim().is_empty(),
        }
    }
}

/// A lease's ownership generation. It is bumped on every change of owner, so a handler
/// can use it as a fencing token.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The epoch that follows this one.
    pub fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// One life of a host process. A restarted host must get a number that differs from
/// every earlier incarnation of the same host id (a restart counter, or a random
/// number drawn by the driver), so that replies and handler calls meant for the
/// previous life are told apart.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Incarnation(pub u64);

/// Identifies one store request issued by a host, so that its response can be matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId {
    /// The incarnation that sent it.
    pub incarnation: Incarnation,
    /// Its number within that incarnation.
    pub seq: u64,
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.incarnation.0, self.seq)
    }
}

/// One processing session of one lease: from an `Output::Start` to the matching stop.
/// A host may start the same lease at the same epoch more than once (after its
/// authority lapsed and was regained); handler calls name the session, so a late call
/// from an earlier session is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Session {
    /// The incarnation that started it.
    pub incarnation: Incarnation,
    /// Its number within that incarnation.
    pub seq: u64,
}

impl fmt::Display for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}.{}", self.incarnation.0, self.seq)
    }
}

/// One tenure of a host's heartbeat: the span during which that document vouches for
/// every lease the host holds under session liveness. A host starts a new tenure when
/// it first writes its heartbeat in a life, and again after another host fenced the
/// old one; a lease document names the tenure its owner held it under, so a lease
/// from a tenure that is over is free to take.
///
/// Tenures of one host name are ordered: each is proposed above both its life's
/// earlier proposals and the tenure its heartbeat showed when last read, and written
/// only over that very version (if-match). So a heartbeat showing a later tenure than
/// a lease names proves that tenure over, whichever replica answered, and one showing
/// an earlier tenure is merely an old read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Tenure {
    /// Orders the tenures of different lives: the incarnation of the life that began
    /// it, unless the heartbeat it replaced showed a higher one.
    pub incarnation: Incarnation,
    /// Its number within that incarnation.
    pub seq: u64,
}

impl Tenure {
    /// The least tenure above this one.
    pub fn next(self) -> Tenure {
        Tenure {
            incarnation: self.incarnation,
            seq: self.seq + 1,
        }
    }
}

impl fmt::Display for Tenure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}.{}", self.incarnation.0, self.seq)
    }
}

/// An entity tag issued by the store on every write. Etags are opaque: they are only
/// ever compared for equality, never ordered.
///
/// The reference store issues compact sequence-based etags; a real store's etags are
/// kept verbatim as opaque strings.
///
/// ```
/// use leasehold_engine::Etag;
/// let from_cosmos = Etag::opaque("\"00000000-0000-0000-eb4f-ee670b8d01d3\"");
/// assert_eq!(from_cosmos.to_string(), "\"00000000-0000-0000-eb4f-ee670b8d01d3\"");
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Etag(EtagRepr);

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum EtagRepr {
    Seq(u64),
    Opaque(Arc<str>),
}

impl Etag {
    /// An etag as a real store returned it.
    pub fn opaque(value: impl Into<Arc<str>>) -> Etag {
        Etag(EtagRepr::Opaque(value.into()))
    }

    /// A compact etag issued by the reference store.
    pub(crate) fn seq(n: u64) -> Etag {
        Etag(EtagRepr::Seq(n))
    }
}

impl fmt::Display for Etag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            EtagRepr::Seq(n) => write!(f, "\"{n:08x}\""),
            EtagRepr::Opaque(s) => f.write_str(s),
        }
    }
}

impl fmt::Debug for Etag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            EtagRepr::Seq(n) => write!(f, "etag:{n}"),
            EtagRepr::Opaque(s) => write!(f, "etag:{s}"),
        }
    }
}

impl Serialize for Etag {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Etag {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Etag::opaque)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_host_id_reads_as_no_owner() {
        assert!(HostId::from("").is_blank());
        assert!(HostId::from("  \t").is_blank());
        assert!(!HostId::from("host-1").is_blank());
        // Past the ASCII shortcut: Unicode whitespace is blank, as `str::trim` says.
        assert!(HostId::from("\u{3000}\u{a0}").is_blank());
        assert!(!HostId::from(" host-1").is_blank());
        assert!(!HostId::from("\u{3000}h\u{e9}te").is_blank());
        assert!(!HostId::from("\u{e9}").is_blank());
    }

    #[test]
    fn etags_compare_only_for_equality_and_keep_cosmos_text_verbatim() {
        assert_eq!(Etag::seq(7), Etag::seq(7));
        assert_ne!(Etag::seq(7), Etag::seq(8));
        let json = serde_json::to_string(&Etag::opaque("\"abc\"")).unwrap();
        let back: Etag = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Etag::opaque("\"abc\""));
    }

    #[test]
    fn epochs_only_move_forward() {
        assert!(Epoch(3).next() > Epoch(3));
    }
}
