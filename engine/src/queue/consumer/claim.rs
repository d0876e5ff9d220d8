//! The consumer's part of claim checks ([`crate::queue::claim`]): a part set whose
//! payload the driver keeps in the user's claim store.

use super::Consumer;
use super::large::ClaimPhase;
use crate::queue::{
    ClaimKey, Message, MessageName, Output, PartSetId, PartsRef, QueueError, head_id,
};
use crate::time::Millis;
use std::collections::VecDeque;

impl Consumer {
    /// Starts an enqueue whose payload goes to the claim store: the head first.
    pub(super) fn enqueue_claimed(
        &mut self,
        name: MessageName,
        bytes: u64,
        hash: String,
        delay: Millis,
    ) -> Result<(), QueueError> {
        if self.config.large.is_none() {
            return Err(QueueError::NoSweep);
        }
        let set = PartSetId::of(&self.client.next_token());
        let queue = self.config.queue.clone();
        let mut manifest = Message::new(queue, name, String::new(), self.now.wall, delay);
        let head = self.head_for(&manifest, &set);
        manifest.parts = Some(PartsRef {
            set: set.clone(),
            count: 0,
            bytes,
            hash,
        });
        self.stage(set, manifest, head, VecDeque::new(), ClaimPhase::ToStore);
        Ok(())
    }

    /// The driver answered [`Output::StoreClaim`].
    /// An answer for no waiting enqueue changes nothing.
    pub(super) fn claim_stored(&mut self, key: ClaimKey, stored: bool) {
        let in_time = self.claim_in_time(&key.set);
        let Some(staging) = self.staging.get_mut(&key.set) else {
            return;
        };
        if staging.claim != ClaimPhase::Storing {
            return;
        }
        if stored && !in_time {
            // Stored, but answered past the head's authority: it may have landed after
            // a sweep dropped the key. No message names it yet: discard it, and leave
            // the head to the sweep.
            self.staging_failed(&key.set, None);
            self.out.push_back(Output::DiscardClaim(key));
            return;
        }
        if !stored {
            // The head stays, naming nothing: the sweep removes it. The put's outcome
            // is unknown, and it may land after that sweep: discard it now too.
            self.staging.remove(&key.set);
            self.out.push_back(Output::DiscardClaim(key));
            return;
        }
        staging.claim = ClaimPhase::Stored;
        self.write_next_part(key.set);
    }

    /// The driver answered [`Output::DropClaim`]: the
    /// head goes once the payload is gone.
    pub(super) fn claim_dropped(&mut self, key: ClaimKey, dropped: bool) {
        // Only the cleanup of this very claim: an answer for a parts set, or for a
        // key of another name, must not count as a part deleted.
        let head = head_id(&key.queue, &key.name, &key.set);
        if self.awaits_claim(&key.set, &head) {
            self.part_gone(key.set, false, dropped);
        }
    }

    /// The claim key of this queue's set `set` of message `name`.
    pub(super) fn claim_key(&self, name: &MessageName, set: &PartSetId) -> ClaimKey {
        ClaimKey {
            queue: self.config.queue.clone(),
            name: name.clone(),
            set: set.clone(),
        }
    }
}
