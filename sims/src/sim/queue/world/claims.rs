//! Claim checks in a queue run: the run's claim store, which the producer and the
//! consumers reach after a network latency, and which fails now and then until the
//! heal. The run's drivers do with it what `QueueClient` does.

use super::{Event, PRODUCER, QueueWorld, SECOND};
use crate::sim::queue::config::{CLAIM_FAIL_ONE_IN, LargeKept};
use leasehold_engine::Millis;
use leasehold_engine::queue::{ClaimKey, Delivery, Input, Message, MessageName, payload_hash};
use rand::Rng;

impl QueueWorld {
    /// The enqueue of message `i`: claim-checked when it is large and the run keeps
    /// large payloads in claims.
    pub(super) fn enqueue_input(&self, i: u32, name: MessageName) -> Input {
        let payload = self.cfg.payload(i);
        let large = self.cfg.large_every > 0 && i.is_multiple_of(self.cfg.large_every);
        if large && self.cfg.large_kept == LargeKept::Claims {
            return Input::EnqueueClaimed {
                name,
                bytes: payload.len() as u64,
                hash: payload_hash(payload.as_bytes()),
                delay: Millis::ZERO,
            };
        }
        Input::Enqueue {
            name,
            payload,
            delay: Millis::ZERO,
        }
    }

    /// Whether this call to the claim store fails.
    fn claim_store_fails(&mut self) -> bool {
        !self.healed && self.rng.random_ratio(1, CLAIM_FAIL_ONE_IN)
    }

    /// The producer's payload under `key` reaches the claim store, or fails to; a
    /// failed enqueue is made again a second later, as for a failed request.
    pub(super) fn claim_put(&mut self, key: ClaimKey) {
        let id = Message::id_for(&key.queue, &key.name);
        let number = self.truth.number(&id);
        let stored = !self.claim_store_fails();
        // Half the failed puts land all the same: their outcome was unknown.
        if stored || self.rng.random_bool(0.5) {
            self.claims.insert(key.clone(), self.cfg.payload(number));
        }
        self.feed_producer(Input::ClaimStored { key, stored });
        if !stored {
            self.push(self.now + SECOND, Event::Produce(number));
        }
    }

    /// A client's delete of `key` reaches the claim store, or fails to.
    pub(super) fn claim_drop(&mut self, c: usize, key: ClaimKey) {
        let dropped = !self.claim_store_fails();
        if dropped {
            self.claims.remove(&key);
        }
        let input = Input::ClaimDropped { key, dropped };
        if c == PRODUCER {
            self.feed_producer(input);
        } else {
            self.feed(c, input);
        }
    }

    /// The producer's discard of `key` reaches the claim store: deleted, unless the
    /// call fails; nothing answers.
    pub(super) fn claim_discard(&mut self, key: ClaimKey) {
        if !self.claim_store_fails() {
            self.claims.remove(&key);
        }
    }

    /// Schedules a delete of `key` by client `c` (or the producer).
    pub(super) fn send_claim_drop(&mut self, c: usize, key: ClaimKey) {
        let life = if c == PRODUCER {
            0
        } else {
            self.clients[c].life
        };
        let at = self.now + self.latency();
        self.push(at, Event::ClaimDrop { c, life, key });
    }

    /// Fetches and checks a delivery's claim-checked payload, as the client does: a
    /// payload missing or changed sends the message to the dead letters, one the
    /// claim store fails to read gives it back. `None` if it is not delivered.
    pub(super) fn fetch_claim(&mut self, c: usize, delivery: Delivery) -> Option<Delivery> {
        let Some(claim) = delivery.claim.clone() else {
            return Some(delivery);
        };
        if self.claim_store_fails() {
            let handle = delivery.handle();
            let message = handle.message.clone();
            self.clients[c]
                .settling
                .insert(message.clone(), handle.lock.clone());
            let input = Input::Abandon {
                delivery: handle,
                delay: Millis::ZERO,
            };
            if !self.feed(c, input) {
                self.settled(c, &message);
            }
            return None;
        }
        match claim.check(self.claims.get(&claim.key).cloned()) {
            Ok(payload) => Some(Delivery {
                payload,
                ..delivery
            }),
            Err(problem) => {
                let input = Input::DeadLetter {
                    delivery: delivery.handle(),
                    reason: problem.to_string(),
                };
                self.feed(c, input);
                None
            }
        }
    }
}
