//! The workload: handlers start with authority, poll their partition, commit and
//! checkpoint, and the checker sees each step.

use super::*;

impl World {
    /// Removes a handler and takes it off the ground truth.
    pub(super) fn end_handler(&mut self, host: usize, partition: u32) {
        let Some(handler) = self.hosts[host].handlers.remove(&partition) else {
            return;
        };
        if let Some(replay) = &mut self.replay {
            replay.ended(host, partition, self.now);
        }
        if handler.lost {
            self.checker.unlinger(partition, host, false);
        }
        if handler.running {
            self.checker.halt(partition, host, self.now);
            if let Some(t) = &mut self.timeline {
                t.end(partition, host, self.now);
            }
        }
    }

    /// A lost call's batch ended, or its grace ran out: the call is over, and the
    /// engine hears that its session stopped.
    fn end_lost_call(&mut self, host: usize, partition: u32, aborted: bool) {
        let Some(handler) = self.hosts[host].handlers.remove(&partition) else {
            return;
        };
        if let Some(replay) = &mut self.replay {
            replay.ended(host, partition, self.now);
        }
        self.checker.unlinger(partition, host, aborted);
        self.feed(
            host,
            Input::Stopped {
                lease: handler.token,
                session: handler.session,
            },
        );
    }

    /// The runtime aborts a lost call that outlived its grace; a stuck call returns
    /// at last.
    pub(super) fn abort(&mut self, host: usize, partition: u32, session: Session) {
        let call = self.hosts[host]
            .handlers
            .get(&partition)
            .filter(|h| h.session == session && h.lost);
        if let Some(call) = call {
            let aborted = !call.stuck;
            self.end_lost_call(host, partition, aborted);
        }
    }

    /// Whether another host than `host` is entitled to process `partition` now.
    pub(super) fn rival_authority(
        &self,
        host: usize,
        partition: u32,
        token: &LeaseToken,
    ) -> Option<String> {
        self.checker
            .running(partition)
            .iter()
            .filter(|r| r.host != host)
            .find_map(|r| {
                let other = &self.hosts[r.host];
                let local = other.clock.local(self.now);
                let epoch = other.engine.as_ref()?.authority(token, local)?;
                Some(format!("{} (epoch {})", other.name, epoch.0))
            })
    }

    pub(super) fn start(
        &mut self,
        host: usize,
        lease: LeaseToken,
        epoch: Epoch,
        session: Session,
        checkpoint: Option<Checkpoint>,
    ) {
        let Some(&partition) = self.index.get(&lease) else {
            return;
        };
        let name = self.hosts[host].name.clone();
        let from = match checkpoint.as_ref().map(|c| c.as_str().parse::<u64>()) {
            None => 0,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                self.violate(
                    ViolationKind::Driver,
                    format!(
                        "{name} resumed {lease} from an unreadable checkpoint \"{}\"",
                        checkpoint.as_ref().map_or("", |c| c.as_str())
                    ),
                );
                0
            }
        };
        if let Some(rival) = self.rival_authority(host, partition, &lease) {
            self.violate(
                ViolationKind::Exclusivity,
                format!(
                    "{name} starts partition {partition} at epoch {} while {rival} still holds authority",
                    epoch.0
                ),
            );
        }
        if let Some(other) = self.overlapping_run(partition) {
            self.violate(
                ViolationKind::Exclusivity,
                format!("{name} starts partition {partition} ({lease}) while {other}, an overlapping range"),
            );
        }
        if let Some(clash) = self.checker.clash(partition, host, epoch.0) {
            self.violate(ViolationKind::Session, format!("{name}: {clash}"));
        }
        let committed = self.checker.committed(partition);
        if let Some(beyond) = self
            .replay
            .as_mut()
            .and_then(|r| r.beyond_bound(partition, from, committed, self.now))
        {
            self.violate(
                ViolationKind::Replay,
                format!(
                    "{name} starts partition {partition} at {from}: {beyond} events committed beyond the last checkpoint sent, more than the checkpoint policy holds back ({:?})",
                    self.lease.checkpoint
                ),
            );
        }
        // A call still lingering here is replaced in the map; the ground truth
        // forgets it only when it would have ended.
        if self.hosts[host]
            .handlers
            .get(&partition)
            .is_some_and(|h| h.lost)
        {
            self.checker.unlinger(partition, host, false);
        }
        self.note(TraceEvent::Start {
            host: name,
            partition,
            epoch: epoch.0,
            from,
        });
        self.hosts[host].handlers.insert(
            partition,
            Handler {
                token: lease,
                session,
                epoch,
                next: from,
                batch: None,
                draining: false,
                lost: false,
                stuck: false,
                running: true,
            },
        );
        self.checker.run(partition, host, epoch.0, true, self.now);
        if let Some(t) = &mut self.timeline {
            t.start(partition, host, self.now);
        }
        let life = self.hosts[host].life;
        self.push(
            self.now,
            Event::Poll {
                host,
                life,
                partition,
                session,
            },
        );
    }

    pub(super) fn poll(&mut self, host: usize, life: u64, partition: u32, session: Session) {
        let idle = self.hosts[host]
            .handlers
            .get(&partition)
            .is_some_and(|h| h.session == session && h.batch.is_none() && !h.draining);
        if idle && self.found_split(host, partition, session) {
            return;
        }
        let produced = self.produced(partition, self.now);
        let w = &self.cfg.workload;
        let (max_batch, poll) = (w.max_batch, w.poll.as_millis());
        let Some(handler) = self.hosts[host].handlers.get_mut(&partition) else {
            return;
        };
        if handler.session != session || handler.batch.is_some() || handler.draining {
            return;
        }
        let available = produced.saturating_sub(handler.next);
        if available == 0 {
            self.push(
                self.now + poll,
                Event::Poll {
                    host,
                    life,
                    partition,
                    session,
                },
            );
        } else {
            let n = available.min(max_batch);
            handler.batch = Some(n);
            let at = self.now + self.cfg.workload.batch_time(n);
            self.push(
                at,
                Event::BatchDone {
                    host,
                    life,
                    partition,
                    session,
                },
            );
        }
    }

    pub(super) fn batch_done(&mut self, host: usize, life: u64, partition: u32, session: Session) {
        let lapsed = {
            let h = &self.hosts[host];
            let local = h.clock.local(self.now);
            h.handlers.get(&partition).is_some_and(|handler| {
                let held = h
                    .engine
                    .as_ref()
                    .and_then(|e| e.authority(&handler.token, local));
                held != Some(handler.epoch)
            })
        };
        // A runtime asks the engine before the batch takes effect: a lease whose
        // authority ran out is told lost first.
        if lapsed {
            self.feed(host, Input::Tick);
        }
        let lost = self.hosts[host]
            .handlers
            .get(&partition)
            .filter(|h| h.session == session && h.lost);
        if lost.is_some_and(|h| h.stuck) {
            // Stuck in blocking code: the batch does not end.
            return;
        }
        if lost.is_some() {
            // The call returns. Its writes reach the downstream, which refuses them:
            // a newer epoch has started, or will, before any of its work counts.
            self.checker.fenced_batches += 1;
            self.end_lost_call(host, partition, false);
            return;
        }
        let h = &self.hosts[host];
        let Some(handler) = h.handlers.get(&partition) else {
            return;
        };
        let Some(n) = handler.batch.filter(|_| handler.session == session) else {
            return;
        };
        let (token, epoch, from, draining) = (
            handler.token.clone(),
            handler.epoch,
            handler.next,
            handler.draining,
        );
        let name = h.name.clone();
        let local = h.clock.local(self.now);
        let entitled = h.engine.as_ref().and_then(|e| e.authority(&token, local));
        let waits = h
            .engine
            .as_ref()
            .is_some_and(|e| e.writes_wait(&token, local));
        if entitled != Some(epoch) {
            self.violate(
                ViolationKind::Exclusivity,
                format!(
                    "{name}'s batch on partition {partition} took effect without authority (epoch {})",
                    epoch.0
                ),
            );
        }
        if let Some(rival) = self.rival_authority(host, partition, &token) {
            self.violate(
                ViolationKind::Exclusivity,
                format!(
                    "{name}'s batch on partition {partition} took effect at epoch {} while {rival} holds authority",
                    epoch.0
                ),
            );
        }
        let to = from + n;
        if let Some(replay) = &mut self.replay {
            let first = self.checker.committed(partition).max(from)..to;
            replay.committed(host, partition, n, first, self.now, waits);
        }
        let arrival = self.arrival(partition, from);
        if let Err((kind, detail)) = self
            .checker
            .commit(partition, epoch.0, from, to, arrival, self.now)
        {
            self.violate(kind, detail);
        }
        self.pass_down(partition);
        self.note(TraceEvent::Commit {
            host: name,
            partition,
            epoch: epoch.0,
            from,
            to,
        });
        if let Some(handler) = self.hosts[host].handlers.get_mut(&partition) {
            handler.next = to;
            handler.batch = None;
        }
        let checkpoint = Checkpoint::from(to.to_string());
        self.feed(
            host,
            Input::Checkpoint {
                lease: token.clone(),
                session,
                checkpoint,
                items: u32::try_from(n).unwrap_or(u32::MAX),
            },
        );
        if draining {
            self.end_handler(host, partition);
            self.feed(
                host,
                Input::Stopped {
                    lease: token,
                    session,
                },
            );
        } else {
            self.push(
                self.now,
                Event::Poll {
                    host,
                    life,
                    partition,
                    session,
                },
            );
        }
    }
}
