//! The leases a host is creating: the table's missing leases, and a split's
//! children.

use crate::ids::LeaseToken;
use std::collections::BTreeSet;

/// The creates a host has sent and not yet heard back from, and those of this life
/// in its own name whose outcome it never learned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Creates {
    /// Sent, not yet answered: not sent again meanwhile.
    sent: BTreeSet<LeaseToken>,
    /// Created in this life's own name (a split's child) with an unknown outcome:
    /// found named after this host, the lease is this life's.
    unknown: BTreeSet<LeaseToken>,
}

impl Creates {
    /// A create of `token` went out.
    pub fn sent(&mut self, token: LeaseToken) {
        self.sent.insert(token);
    }

    /// Whether a create of `token` is in flight.
    pub fn is_creating(&self, token: &LeaseToken) -> bool {
        self.sent.contains(token)
    }

    /// The create of `token` was answered. `own`: it named this host as the
    /// owner; `ambiguous`: its outcome is unknown.
    pub fn answered(&mut self, token: &LeaseToken, own: bool, ambiguous: bool) {
        self.sent.remove(token);
        if own {
            if ambiguous {
                self.unknown.insert(token.clone());
            } else {
                self.unknown.remove(token);
            }
        }
    }

    /// Whether this life created `token` in its own name without learning the
    /// outcome; it is the last time it asks.
    pub fn take_unknown(&mut self, token: &LeaseToken) -> bool {
        self.unknown.remove(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_in_flight_is_not_sent_again_until_answered() {
        let mut creates = Creates::default();
        let token = LeaseToken::from("7");
        creates.sent(token.clone());
        assert!(creates.is_creating(&token));
        creates.answered(&token, false, false);
        assert!(!creates.is_creating(&token));
    }

    #[test]
    fn only_an_own_create_with_an_unknown_outcome_makes_a_lease_found_in_its_name_this_lifes_once()
    {
        let mut creates = Creates::default();
        let (own, other) = (LeaseToken::from("1"), LeaseToken::from("2"));
        creates.sent(own.clone());
        creates.sent(other.clone());
        creates.answered(&own, true, true);
        creates.answered(&other, false, true);
        assert!(creates.take_unknown(&own));
        assert!(!creates.take_unknown(&own), "asked once");
        assert!(
            !creates.take_unknown(&other),
            "not created in this host's name"
        );
    }

    #[test]
    fn a_later_known_outcome_clears_an_unknown_one() {
        let mut creates = Creates::default();
        let token = LeaseToken::from("3");
        creates.answered(&token, true, true);
        creates.answered(&token, true, false);
        assert!(!creates.take_unknown(&token));
    }
}
