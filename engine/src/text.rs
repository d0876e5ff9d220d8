//! An immutable string that keeps short values inline.
//!
//! Host ids, lease tokens and document ids are cloned with every state a model
//! checker or simulator copies. Kept inline, a short id is copied like an integer:
//! no allocation, and no shared reference count for threads to fight over. Longer
//! values are shared behind an `Arc`.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

const INLINE: usize = 22;

#[derive(Clone)]
pub(crate) enum Text {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<str>),
}

impl Text {
    pub(crate) fn new(value: &str) -> Text {
        if value.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..value.len()].copy_from_slice(value.as_bytes());
            Text::Inline {
                len: value.len() as u8,
                bytes,
            }
        } else {
            Text::Shared(Arc::from(value))
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Text::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Text::Shared(s) => s.as_bytes(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Built from a `&str`, so always valid UTF-8.
            Text::Inline { .. } => std::str::from_utf8(self.bytes()).unwrap_or_default(),
            Text::Shared(s) => s,
        }
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// An inline value as two big-endian words: comparing the words compares the
/// zero-padded bytes in order, without a call to `memcmp` (ids are compared on every
/// map lookup, and that call dominated large simulations).
#[inline]
fn words(bytes: &[u8; INLINE]) -> (u128, u64) {
    let mut head = [0; 16];
    head.copy_from_slice(&bytes[..16]);
    let mut tail = [0; 8];
    tail[..INLINE - 16].copy_from_slice(&bytes[16..]);
    (u128::from_be_bytes(head), u64::from_be_bytes(tail))
}

impl PartialEq for Text {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Text::Inline { len: a, bytes: x }, Text::Inline { len: b, bytes: y }) => {
                a == b && words(x) == words(y)
            }
            _ => self.bytes() == other.bytes(),
        }
    }
}

impl Eq for Text {}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    /// Byte order, which is `str`'s order.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            // Padding is zero, so a value ties with its zero-extensions on the words;
            // the length then puts the shorter (the prefix) first, as `str` does.
            (Text::Inline { len: a, bytes: x }, Text::Inline { len: b, bytes: y }) => {
                words(x).cmp(&words(y)).then(a.cmp(b))
            }
            _ => self.bytes().cmp(other.bytes()),
        }
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.bytes());
        state.write_u8(0xff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_values_compare_and_order_as_strings() {
        let short = Text::new("host-1");
        let long = Text::new("orders-processor.contoso_orders_items..0");
        assert!(matches!(short, Text::Inline { .. }));
        assert!(matches!(long, Text::Shared(_)));
        assert_eq!(short.as_str(), "host-1");
        assert_eq!(long.as_str(), "orders-processor.contoso_orders_items..0");
        let mut all = [long.clone(), short.clone(), Text::new("")];
        all.sort();
        let sorted: Vec<&str> = all.iter().map(Text::as_str).collect();
        let mut expected = vec!["orders-processor.contoso_orders_items..0", "host-1", ""];
        expected.sort();
        assert_eq!(sorted, expected);
        assert_eq!(Text::new("héllo"), Text::new("héllo"));
    }

    #[test]
    fn inline_values_order_exactly_as_their_strings_even_with_nul_and_prefixes() {
        let values = [
            "",
            "a",
            "a\0",
            "a\0\0",
            "ab",
            "b",
            "p0009",
            "p0010",
            "p00100",
            "zzzzzzzzzzzzzzzzzzzzzz",
            "zzzzzzzzzzzzzzzzzzzzz",
            "é",
            "\u{7f}",
        ];
        for x in values {
            for y in values {
                assert_eq!(Text::new(x).cmp(&Text::new(y)), x.cmp(y), "{x:?} vs {y:?}");
                assert_eq!(Text::new(x) == Text::new(y), x == y, "{x:?} vs {y:?}");
            }
        }
    }
}
