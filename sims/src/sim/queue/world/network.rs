//! The network between consumers and the store, and ground truth of every write
//! the store applies.

use super::*;

impl QueueWorld {
    pub(super) fn latency(&mut self) -> u64 {
        let extra = self.weather.extra_latency(self.now);
        self.cfg.network.draw_latency(&mut self.rng, extra)
    }

    pub(super) fn send(&mut self, c: usize, mut request: QueueRequest) {
        self.requests += 1;
        leasehold_model::queue::tamper(self.cfg.bug, request.intent, &mut request.op);
        let doc = target(&request.op);
        let client = &self.clients[c];
        let (name, life) = (client.name.clone(), client.life);
        let (cut, lose) = (client.cut_until > self.now, client.lose_until > self.now);
        self.note(QueueEvent::Request(name, request.intent, doc));
        let timeout = self.cfg.network.request_timeout.as_millis();
        let id = request.id;
        let go = self.latency();
        let back = self.latency();
        if cut {
            let result = Err(StoreError::Timeout);
            self.push(
                self.now + timeout,
                Event::Answer {
                    c,
                    life,
                    id,
                    result,
                },
            );
        } else if lose || go + back > timeout {
            // Applied, but the answer never comes back in time: an unknown outcome.
            self.push(
                self.now + go,
                Event::Arrive {
                    c,
                    life,
                    request,
                    answer: false,
                },
            );
            let result = Err(StoreError::Timeout);
            self.push(
                self.now + timeout,
                Event::Answer {
                    c,
                    life,
                    id,
                    result,
                },
            );
        } else {
            let at = self.now + go;
            self.push(
                at,
                Event::Arrive {
                    c,
                    life,
                    request,
                    answer: true,
                },
            );
        }
    }

    /// A request reaches the store, which applies it whether or not anyone hears.
    pub(super) fn arrive(&mut self, c: usize, life: u64, request: QueueRequest, answer: bool) {
        let throttled = self.weather.throttling(self.now) && self.rng.random_bool(0.5);
        let kind = Kind::of(&request.op);
        let result = if throttled {
            Err(StoreError::Throttled {
                retry_after: Millis(500),
            })
        } else {
            let retrying = request.op.is_write()
                && self
                    .clients
                    .get(c)
                    .is_some_and(|client| client.retry_until > self.now);
            let (first, landed) = self.apply(c, life, &request);
            crate::sim::faults::sdk_retry(retrying && landed, first, || {
                self.apply(c, life, &request).0
            })
        };
        if c != PRODUCER {
            self.ru += request_units(kind, &result);
            if let Ok(Reply::Query(found)) = &result
                && matches!(request.intent, QueueIntent::Scan | QueueIntent::Watch)
            {
                let docs = found.len() as u64;
                self.dequeues += u64::from(request.intent == QueueIntent::Scan);
                self.docs_read += docs;
                if let Some(client) = self.clients.get_mut(c) {
                    client.dequeue_docs += docs;
                }
            }
        }
        if answer {
            let back = self.latency();
            let id = request.id;
            self.push(
                self.now + back,
                Event::Answer {
                    c,
                    life,
                    id,
                    result,
                },
            );
        }
    }

    /// Serves `request` for consumer `c`'s life `life`, as a lagging replica may serve
    /// a read, and records what a write applied did; and whether it was applied.
    fn apply(
        &mut self,
        c: usize,
        life: u64,
        request: &QueueRequest,
    ) -> (Result<Reply<Message>, StoreError>, bool) {
        let before = target(&request.op).and_then(|id| self.current(&id));
        let op = request.op.clone();
        let reader = crate::sim::faults::session(c, life);
        let lagging = self.weather.lagging(self.now);
        let result =
            crate::sim::faults::serve(&mut self.store, reader, op.clone(), lagging, &mut self.rng);
        // A failed batch is still an answer (207), but nothing of it was applied.
        let applied = match &result {
            Ok(Reply::Batch(batch)) => batch.is_success(),
            other => other.is_ok(),
        };
        if applied {
            self.fence(c, request.lock.as_ref(), &op, before.as_ref());
            if request.intent == QueueIntent::Claim
                && let Some(doc) = &before
            {
                self.truth.claimed(c, doc, self.now);
            }
            self.observe(&op, before, (c, life));
        }
        (result, applied)
    }

    /// The stored version of message `id`, before a write changes it.
    pub(super) fn current(&self, id: &DocId) -> Option<Message> {
        let pk = leasehold_engine::PartitionKey::new(self.consumer_config.queue.as_str());
        self.store.read(&pk, id).ok().map(|s| s.doc)
    }

    /// A holder's write (complete, abandon, dead-letter, renew) may take effect only
    /// while the stored lock is still the holder's own.
    pub(super) fn fence(
        &mut self,
        c: usize,
        lock: Option<&LockToken>,
        op: &Op<Message>,
        before: Option<&Message>,
    ) {
        let Some(token) = lock else {
            return;
        };
        if matches!(op, Op::Create(_))
            || before
                .and_then(Message::lock)
                .is_some_and(|l| &l.token == token)
        {
            return;
        }
        // A claim writes a new lock over an old one; only writes by a holder count.
        if let Op::Replace { doc, .. } = op
            && doc.lock().is_some_and(|l| &l.token == token)
            && doc.dequeue_count > before.map_or(0, |b| b.dequeue_count)
        {
            return;
        }
        let Some(id) = target(op) else { return };
        let stored = before.and_then(Message::lock).map(|l| l.token.to_string());
        self.truth.fenced(
            self.now,
            format!(
                "the store accepted c{c}'s write to {id} under lock {token}, but the stored lock was {}",
                stored.unwrap_or_else(|| "gone".to_string())
            ),
        );
    }

    /// Ground truth of what a successful write did.
    pub(super) fn observe(&mut self, op: &Op<Message>, before: Option<Message>, by: Holder) {
        match op {
            _ if ops_delete(op).is_some()
                && before.as_ref().is_some_and(Message::is_dead_lettered) =>
            {
                // An operator's delete of a dead letter.
                if let Some(letter) = before {
                    self.note(QueueEvent::DeadLetterDeleted(letter.id.clone()));
                    let id = Message::id_for(&letter.queue, &letter.name);
                    self.truth.discarded(&id, self.now);
                }
            }
            Op::Delete { id, .. } => self.truth.deleted(id, by, self.now),
            Op::Batch { ops, .. } => {
                // A large payload's message, written with its set's head.
                if let Some(BatchOp::Create(doc)) = ops.first()
                    && doc.parts.is_some()
                    && !doc.is_dead_lettered()
                {
                    self.truth.written(doc, self.now);
                }
                let moved = matches!(ops.first(), Some(BatchOp::Create(d)) if d.is_dead_lettered());
                if moved && let Some(message) = before {
                    self.note(QueueEvent::DeadLettered(message.id.clone()));
                    self.truth.dead_lettered(&message, self.now);
                }
                // A large payload's completion: its message's delete, with its head.
                if let Some(BatchOp::Delete { id, .. }) = ops.first() {
                    self.truth.deleted(id, by, self.now);
                }
            }
            Op::Create(doc) => self.truth.written(doc, self.now),
            Op::Replace { doc, .. } => {
                self.truth.written(doc, self.now);
                if let MessageState::DeadLettered { .. } = doc.state
                    && !before.is_some_and(|b| b.is_dead_lettered())
                {
                    self.note(QueueEvent::DeadLettered(doc.id.clone()));
                    self.truth.dead_lettered(doc, self.now);
                }
            }
            _ => {}
        }
    }
}

/// The document a request deletes: a delete's, or a batch's whose first operation is
/// a delete (a completion, or a dead letter's delete, with its head).
fn ops_delete(op: &Op<Message>) -> Option<&DocId> {
    match op {
        Op::Delete { id, .. } => Some(id),
        Op::Batch { ops, .. } => match ops.first() {
            Some(BatchOp::Delete { id, .. }) => Some(id),
            _ => None,
        },
        _ => None,
    }
}

/// The message a request writes: a batch's is the one it deletes (a move to the dead
/// letters).
fn target(op: &Op<Message>) -> Option<DocId> {
    match op {
        Op::Delete { id, .. } => Some(id.clone()),
        Op::Replace { doc, .. } | Op::Create(doc) => Some(doc.id.clone()),
        Op::Batch { ops, .. } => ops.iter().find_map(|op| match op {
            BatchOp::Delete { id, .. } => Some(id.clone()),
            _ => None,
        }),
        Op::Read { .. } | Op::ReadAll { .. } | Op::Query(_) => None,
    }
}
