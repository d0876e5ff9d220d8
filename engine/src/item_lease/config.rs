//! A leaser's settings, and the rule `next_for_state` picks items by.

use super::Item;
use crate::lock::{LockPolicy, Named};
use crate::time::Now;

/// What `next_for_state` knows of one stored item in the wanted state.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// The item.
    pub item: &'a Item,
    /// Whether its lease, if any, counts as expired under the lock rule.
    pub lease_expired: bool,
    /// Whether its lease, if any, is this very leaser's (same name, same life).
    pub own: bool,
    /// The leaser's name.
    pub me: &'a crate::ids::HostId,
    /// The leaser's clocks.
    pub now: Now,
}

/// Decides whether `next_for_state` may take an item. Pluggable so that the model
/// checker can run EDC's early predicate against the same engine; only
/// [`Selector::AVAILABLE`] ships. Selectors compare by name.
pub type Selector = Named<fn(&Candidate<'_>) -> bool>;

impl Selector {
    /// leasehold's rule, [`available`].
    pub const AVAILABLE: Selector = Selector {
        name: "available",
        pick: available,
    };
}

/// leasehold's rule: no lease, an expired lease, or this leaser's own.
pub fn available(c: &Candidate<'_>) -> bool {
    c.item.lease.is_none() || c.lease_expired || c.own
}

/// The settings of an item leaser.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaserConfig {
    /// `next_for_state` reads the items whose id starts with this.
    pub prefix: String,
    /// The lock rule and clock assumptions.
    pub policy: LockPolicy,
    /// Which items `next_for_state` takes.
    pub select: Selector,
    /// An earlier behaviour switched back on, for the checkers to reproduce; `None` in
    /// production.
    #[doc(hidden)]
    pub known_bad: Option<ItemKnownBad>,
}

/// The item leaser's earlier behaviours, which the model checker reproduces as
/// known-bad variants. Production leaves `LeaserConfig::known_bad` unset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItemKnownBad {
    /// An acquire's, a `next_for_state` lease's, a renewal's, a save's or a break's
    /// answer acts on the lease this
    /// leaser holds when it comes. If the reply was held while the leaser leased the
    /// item again, the answer puts the earlier lease's token and etag back, or
    /// changes or drops the new lease: its next write is refused, and the item waits
    /// out a lease nobody works under.
    AnswersReadHeld,
    /// Renewals, saves and breaks name the item only, and act under whatever lease
    /// this leaser holds on it when they come. A task that overran its lease, whose
    /// item this leaser has leased again for another task, saves or breaks under the
    /// other task's lease.
    GrantNamesItem,
    /// The leaser forgets a lease it let go of while a request about its item is
    /// still unanswered. An acquire that landed with its reply held, answered after
    /// the leaser leased the item again and broke or saved that later lease, grants
    /// the earlier lease with authority while the store holds no lease: another
    /// leaser takes the item, and two act on it.
    ForgetsLetGo,
}

impl ItemKnownBad {
    /// The behaviour's name on the checkers' command lines (`--bug NAME`).
    pub fn name(self) -> &'static str {
        match self {
            ItemKnownBad::AnswersReadHeld => "item-answers-read-held",
            ItemKnownBad::GrantNamesItem => "item-grant-names-item",
            ItemKnownBad::ForgetsLetGo => "item-forgets-let-go",
        }
    }
}

impl LeaserConfig {
    /// Defaults for the items whose ids start with `prefix`.
    pub fn new(prefix: impl Into<String>) -> LeaserConfig {
        LeaserConfig {
            prefix: prefix.into(),
            policy: LockPolicy::default(),
            select: Selector::AVAILABLE,
            known_bad: None,
        }
    }
}
