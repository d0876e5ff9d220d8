//! The ranges of a partitioned feed as they split: the reference semantics the model
//! checker and the simulator run their handlers against.
//!
//! A range that split is gone: a handler reading it learns its children instead of
//! reading items (the change feed's "partition gone"), and processes nothing more of
//! it. Merges need nothing here: a lease whose range merged with another keeps
//! reading its own range from its own continuation.

use crate::ids::LeaseToken;
use std::collections::BTreeMap;

/// Which ranges have split, and into what.
///
/// ```
/// use leasehold_engine::feed::{FeedRanges, Read};
/// use leasehold_engine::LeaseToken;
///
/// let mut feed = FeedRanges::default();
/// let (p, a, b) = (LeaseToken::from("0"), LeaseToken::from("0a"), LeaseToken::from("0b"));
/// assert_eq!(feed.read(&p), Read::Current);
/// feed.split(&p, vec![a.clone(), b.clone()]).unwrap();
/// assert_eq!(feed.read(&p), Read::Gone(&[a.clone(), b.clone()]));
/// assert!(feed.overlaps(&p, &a) && !feed.overlaps(&a, &b));
/// assert!(feed.split(&p, vec![a]).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FeedRanges {
    children: BTreeMap<LeaseToken, Vec<LeaseToken>>,
}

/// What a handler finds when it reads a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read<'a> {
    /// The range is current: its items can be read.
    Current,
    /// The range split into these children.
    Gone(&'a [LeaseToken]),
}

/// A split the feed cannot make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitError {
    /// The range split already.
    AlreadySplit(LeaseToken),
    /// A child is empty, repeated, or a range the feed already knows.
    BadChildren {
        /// The range.
        range: LeaseToken,
        /// The children asked for.
        children: Vec<LeaseToken>,
    },
}

impl std::fmt::Display for SplitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SplitError::AlreadySplit(range) => write!(f, "range {range} has already split"),
            SplitError::BadChildren { range, children } => write!(
                f,
                "range {range} cannot split into {children:?}: children must be new and distinct"
            ),
        }
    }
}

impl std::error::Error for SplitError {}

impl FeedRanges {
    /// Splits `range` into `children`.
    pub fn split(
        &mut self,
        range: &LeaseToken,
        children: Vec<LeaseToken>,
    ) -> Result<(), SplitError> {
        if self.children.contains_key(range) {
            return Err(SplitError::AlreadySplit(range.clone()));
        }
        let known = |c: &LeaseToken| {
            c == range
                || self.children.contains_key(c)
                || self.children.values().flatten().any(|k| k == c)
        };
        let mut distinct = children.clone();
        distinct.sort();
        distinct.dedup();
        if children.is_empty() || distinct.len() != children.len() || children.iter().any(known) {
            return Err(SplitError::BadChildren {
                range: range.clone(),
                children,
            });
        }
        self.children.insert(range.clone(), children);
        Ok(())
    }

    /// What reading `range` finds.
    pub fn read(&self, range: &LeaseToken) -> Read<'_> {
        match self.children.get(range) {
            Some(children) => Read::Gone(children),
            None => Read::Current,
        }
    }

    /// Whether `a` and `b` cover common items: equal, or one descends from the other.
    pub fn overlaps(&self, a: &LeaseToken, b: &LeaseToken) -> bool {
        a == b || self.descends(a, b) || self.descends(b, a)
    }

    /// Whether `child` descends from `ancestor` by splits.
    fn descends(&self, child: &LeaseToken, ancestor: &LeaseToken) -> bool {
        self.children
            .get(ancestor)
            .is_some_and(|cs| cs.iter().any(|c| c == child || self.descends(child, c)))
    }

    /// Whether any range has split.
    pub fn has_split(&self) -> bool {
        !self.children.is_empty()
    }

    /// How many ranges have split.
    pub fn splits(&self) -> usize {
        self.children.len()
    }
}
