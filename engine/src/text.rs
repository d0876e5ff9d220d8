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

    fn bytes(&self) -> &[u8] {
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

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
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
    fn cmp(&self, other: &Self) -> Ordering {
        self.bytes().cmp(other.bytes())
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
}
