//! The network between hosts and the store: latency, timeouts with unknown
//! outcomes, throttling, and the ground-truth checks on every write the store applies.

use super::*;

impl World {
    pub(super) fn latency(&mut self) -> u64 {
        let extra = self.weather.extra_latency(self.now);
        self.cfg.network.draw_latency(&mut self.rng, extra)
    }

    pub(super) fn send(&mut self, host: usize, request: StoreRequest) {
        if self.metered() {
            self.requests += 1;
            self.by_purpose
                .entry(request.intent.purpose())
                .or_default()
                .0 += 1;
        }
        let doc = match &request.op {
            Op::Read { id, .. } | Op::Delete { id, .. } => Some(id.clone()),
            Op::Replace { doc, .. } | Op::Create(doc) => Some(doc.id().clone()),
            Op::ReadAll { .. } | Op::Query(_) | Op::Batch { .. } => None,
        };
        if let (
            Some(replay),
            Op::Replace {
                doc: Record::Lease(lease),
                ..
            },
        ) = (&mut self.replay, &request.op)
            && let Some(&partition) = self.index.get(&lease.token)
        {
            let carried = lease
                .checkpoint
                .as_ref()
                .and_then(|c| c.as_str().parse::<u64>().ok())
                .unwrap_or(0);
            let committed = self.checker.committed(partition);
            replay.sent(host, request.id, partition, carried, committed);
        }
        let h = &self.hosts[host];
        let (name, life, cut) = (h.name.clone(), h.life, h.cut_until > self.now);
        if let Some(doc) = self.refusals.sent(host, life, request.id, &request.op) {
            let message = format!(
                "{name} sent a {} of {doc} on a version the store had refused it (412)",
                request.intent
            );
            self.violate(ViolationKind::Rewrite, message);
        }
        self.note(TraceEvent::Request {
            host: name,
            intent: request.intent,
            doc,
        });
        let timeout = self.cfg.network.request_timeout.as_millis();
        if cut {
            self.timeouts += 1;
            let event = Event::Answer {
                host,
                life,
                id: request.id,
                intent: request.intent,
                result: Err(StoreError::Timeout),
            };
            self.push(self.now + timeout, event);
        } else {
            let at = self.now + self.latency();
            let sent = self.now;
            self.push(
                at,
                Event::Arrive {
                    host,
                    life,
                    request,
                    sent,
                },
            );
        }
    }

    /// A request reaches the store, which applies it (whether or not its sender is
    /// still alive to hear the answer).
    pub(super) fn arrive(&mut self, host: usize, life: u64, mut request: StoreRequest, sent: u64) {
        if let Some(bug) = self.cfg.bug {
            let before = leasehold_model::lease_before(&self.store, &request.op);
            bug.tamper(request.intent, &mut request.op, before.as_ref());
        }
        let Request { id, intent, op, .. } = request;
        let result = if self.weather.throttling(self.now) && self.rng.random_bool(0.5) {
            self.throttled += 1;
            let retry_after = Millis(self.rng.random_range(100..=2_000));
            Err(StoreError::Throttled { retry_after })
        } else {
            let retrying = op.is_write() && self.hosts[host].retry_until > self.now;
            let first = self.apply(host, life, intent, op.clone());
            let landed = first.is_ok();
            crate::sim::faults::sdk_retry(retrying && landed, first, || {
                self.apply(host, life, intent, op)
            })
        };
        let h = &self.hosts[host];
        let lost = h.lose_until > self.now || h.cut_until > self.now;
        let at = self.now + self.latency();
        let deadline = sent + self.cfg.network.request_timeout.as_millis();
        let (at, result) = if lost || at > deadline {
            self.timeouts += 1;
            (deadline.max(self.now), Err(StoreError::Timeout))
        } else {
            (at, result)
        };
        self.push(
            at,
            Event::Answer {
                host,
                life,
                id,
                intent,
                result,
            },
        );
    }

    /// Executes `op` for `host`'s life `life` on the store, as a lagging replica may
    /// serve a read, and checks what it did to a lease.
    pub(super) fn apply(
        &mut self,
        host: usize,
        life: u64,
        intent: Intent,
        op: Op<Record>,
    ) -> Result<Reply<Record>, StoreError> {
        let kind = Kind::of(&op);
        let written = match &op {
            Op::Replace {
                doc: Record::Lease(doc),
                ..
            } => {
                let before = self
                    .store
                    .read(&PartitionKey::new(doc.id.as_str()), &doc.id)
                    .ok()
                    .and_then(|s| s.doc.as_lease().cloned());
                Some((doc.clone(), before))
            }
            _ => None,
        };
        let reader = faults::session(host, life);
        let lagging = self.weather.lagging(self.now);
        let result = faults::serve(&mut self.store, reader, op, lagging, &mut self.rng);
        if self.metered() {
            let ru = cost::request_units(kind, &result);
            self.ru += ru;
            self.by_purpose.entry(intent.purpose()).or_default().1 += ru;
        }
        if let (Ok(_), Some((after, before))) = (&result, written) {
            self.check_lease_write(host, intent, &after, before.as_ref());
        }
        result
    }

    pub(super) fn check_lease_write(
        &mut self,
        host: usize,
        intent: Intent,
        after: &LeaseDocument,
        before: Option<&LeaseDocument>,
    ) {
        let Some(&partition) = self.index.get(&after.token) else {
            return;
        };
        let position = |d: &LeaseDocument| {
            d.checkpoint
                .as_ref()
                .and_then(|c| c.as_str().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let new = position(after);
        let sender = self.hosts[host].name.clone();
        if let Some(before) = before {
            let old = position(before);
            for fault in audit_write(intent, &sender, before, after, position) {
                let what = match fault {
                    WriteFault::CheckpointBack => {
                        let message = format!(
                            "{sender}'s {intent} moved partition {partition}'s checkpoint back from {old} to {new}"
                        );
                        self.violate(ViolationKind::CheckpointMonotonicity, message);
                        continue;
                    }
                    WriteFault::EpochNotRaised => format!(
                        "{sender}'s {intent} gave partition {partition} to {} at epoch {}, not above {}'s epoch {}: the epoch no longer fences the former owner",
                        owner_name(after),
                        after.epoch.0,
                        owner_name(before),
                        before.epoch.0
                    ),
                    WriteFault::StaleOwnerWrite => format!(
                        "the store accepted {sender}'s {intent} of partition {partition} at epoch {} over epoch {} owned by {}",
                        after.epoch.0,
                        before.epoch.0,
                        owner_name(before)
                    ),
                };
                self.violate(ViolationKind::Fencing, what);
            }
        }
        let committed = self.checker.committed(partition);
        if new > committed {
            self.violate(
                ViolationKind::EventLost,
                format!(
                    "{sender} stored checkpoint {new} for partition {partition}, but events from {committed} on were never processed"
                ),
            );
        }
        self.note(TraceEvent::Stored {
            partition,
            owner: after.owner.clone(),
            epoch: after.epoch.0,
            checkpoint: new,
        });
    }

    pub(super) fn answer(
        &mut self,
        host: usize,
        id: RequestId,
        intent: Intent,
        result: Result<Reply<Record>, StoreError>,
    ) {
        let status = match &result {
            Ok(_) => 200,
            Err(e) => e.status().code(),
        };
        if let Some(replay) = &mut self.replay {
            replay.answered(host, id, result.is_ok());
        }
        let life = self.hosts[host].life;
        self.refusals.answered(host, life, id, &result);
        let name = self.hosts[host].name.clone();
        self.note(TraceEvent::Reply {
            host: name,
            intent,
            status,
        });
        self.feed(host, Input::Response { id, result });
    }
}

/// A lease's owner in a message: its name, or "nobody" (the Debug form read
/// `Some("h00")` and `None's epoch 0`).
fn owner_name(doc: &LeaseDocument) -> String {
    doc.owner
        .as_ref()
        .map_or_else(|| "nobody".to_string(), |o| o.to_string())
}
