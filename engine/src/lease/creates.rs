//! The leases a host is creating: the table's missing leases, and a split's
//! children.

use crate::ids::LeaseToken;
use std::collections::BTreeSet;

/// The creates a host has sent and not yet heard back from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Creates {
    /// Sent, not yet answered: not sent again meanwhile.
    sent: BTreeSet<LeaseToken>,
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

    /// The create of `token` was answered. A child created in this life's name
    /// that it later finds names this life (`LeaseDocument::owner_life`), so an
    /// unknown outcome needs no memory here.
    pub fn answered(&mut self, token: &LeaseToken) {
        self.sent.remove(token);
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
        creates.answered(&token);
        assert!(!creates.is_creating(&token));
    }
}
