//! Faults in queue runs: crashes and shutdowns drop a consumer's locks, pauses
//! stall it, clocks step, the store throttles or slows, and the heal ends it all.

use super::*;

impl QueueWorld {
    pub(super) fn fault(&mut self, kind: FaultKind) {
        if self.healed {
            return;
        }
        if let Some((c, size)) = self.strike(kind) {
            *self.faults.entry(kind).or_default() += 1;
            let name = c.map(|c| self.clients[c].name.clone());
            self.note(QueueEvent::Fault(kind, name, size));
        }
        let gap = self.fault_gap(kind);
        self.push(self.now + gap, Event::Fault(kind));
    }

    pub(super) fn random_up(&mut self) -> Option<usize> {
        let up: Vec<usize> = (0..self.clients.len())
            .filter(|c| {
                self.clients[*c].consumer.is_some() && self.clients[*c].paused_until.is_none()
            })
            .collect();
        (!up.is_empty()).then(|| up[self.rng.random_range(0..up.len())])
    }

    pub(super) fn strike(&mut self, kind: FaultKind) -> Option<(Option<usize>, i64)> {
        let now = self.now;
        match kind {
            // A consumer dies holding its messages; a graceful shutdown of a queue
            // consumer is the same as far as its locks go.
            FaultKind::Crash | FaultKind::Shutdown => {
                let c = self.random_up()?;
                let down = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                let client = &mut self.clients[c];
                client.consumer = None;
                client.working.clear();
                client.settling.clear();
                client.dequeuing = false;
                self.push(now + down, Event::Boot { c });
                Some((Some(c), down as i64))
            }
            FaultKind::Pause => {
                let c = self.random_up()?;
                let stall = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                let life = self.clients[c].life;
                self.clients[c].paused_until = Some(now + stall);
                self.push(now + stall, Event::Resume { c, life });
                Some((Some(c), stall as i64))
            }
            FaultKind::Jump => {
                let c = self.random_up()?;
                let step = kind.draw_size(&mut self.rng);
                self.clients[c].clock.offset_ms += step;
                Some((Some(c), step))
            }
            FaultKind::Throttle | FaultKind::Spike | FaultKind::Stale => {
                let window = kind.draw_size(&mut self.rng);
                let window_ms = u64::try_from(window).unwrap_or(0);
                self.weather.open(kind, now, window_ms, &mut self.rng);
                Some((None, window))
            }
            FaultKind::Timeout => {
                let c = self.random_up()?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.clients[c].lose_until = now + window;
                Some((Some(c), window as i64))
            }
            FaultKind::Partition => {
                let c = self.random_up()?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.clients[c].cut_until = now + window;
                Some((Some(c), window as i64))
            }
            FaultKind::Retry => {
                let c = self.random_up()?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.clients[c].retry_until = now + window;
                Some((Some(c), window as i64))
            }
            // Queue runs have no feed to split and no handler calls to get stuck, and
            // zombies under a reused name are the partition leases' fault so far.
            FaultKind::Skew
            | FaultKind::Drift
            | FaultKind::Split
            | FaultKind::Zombie
            | FaultKind::Stuck => None,
        }
    }

    pub(super) fn heal(&mut self) {
        self.healed = true;
        self.weather.clear();
        self.note(QueueEvent::Heal);
        self.truth.heal(self.now);
        for c in 0..self.clients.len() {
            let client = &mut self.clients[c];
            client.cut_until = 0;
            client.lose_until = 0;
            client.retry_until = 0;
            if let Some(until) = client.paused_until {
                client.paused_until = Some(self.now);
                let life = client.life;
                self.push(self.now, Event::Resume { c, life });
                self.end_deferral(c, until);
            }
        }
    }

    /// The pause of consumer `c` that was to last until `until` ends now: what it
    /// deferred to then happens now, in the same order, as after any pause.
    fn end_deferral(&mut self, c: usize, until: u64) {
        if until <= self.now {
            return;
        }
        let deferred: Vec<(u64, u64)> = self
            .queue
            .range((until, 0)..=(until, u64::MAX))
            .filter(|(_, e)| {
                matches!(e, Event::Poll { c: k, .. }
                    | Event::Answer { c: k, .. }
                    | Event::WorkDone { c: k, .. }
                    | Event::Retry { c: k, .. } if *k == c)
            })
            .map(|(key, _)| *key)
            .collect();
        for key in deferred {
            if let Some(event) = self.queue.remove(&key) {
                self.push(self.now, event);
            }
        }
    }
}
