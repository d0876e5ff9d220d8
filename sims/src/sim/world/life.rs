//! Host lives and faults: boots, graceful shutdowns, crashes, pauses, the fault
//! draws, the heal and the liveness deadline.

use super::*;

impl World {
    pub(super) fn boot(&mut self, host: usize) {
        if self.hosts[host].state != Life::Down {
            return;
        }
        if !self.hosts[host].clock_drawn {
            let skew = (self.cfg.faults.get(FaultKind::Skew) * 1_000.0) as i64;
            let drift = self.cfg.faults.get(FaultKind::Drift) as i32;
            let offset_ms = if skew > 0 {
                self.rng.random_range(-skew..=skew)
            } else {
                0
            };
            let drift_ppm = if drift > 0 {
                self.rng.random_range(-drift..=drift)
            } else {
                0
            };
            let h = &mut self.hosts[host];
            h.clock.offset_ms = offset_ms;
            h.clock.drift_ppm = drift_ppm;
            h.clock_drawn = true;
        }
        let now = self.now;
        let h = &mut self.hosts[host];
        h.life += 1;
        h.clock.boot = now;
        h.state = Life::Up;
        h.up_since = Some(now);
        h.restart_pending = false;
        h.paused_until = None;
        h.wake = None;
        let config = match h.upgrade_at {
            Some(at) if now >= at => self.deployed.clone(),
            _ => self.lease.clone(),
        };
        h.engine = Some(
            LeaseHost::new(h.name.clone(), config, Incarnation(h.life))
                .expect("the lease settings were validated with the run"),
        );
        let (name, life) = (h.name.clone(), h.life);
        self.checker.set_live(host, true, now);
        self.note(TraceEvent::Boot {
            host: name.clone(),
            life,
        });
        if life > 1 {
            self.mark(format!("{name} restarts"));
        }
        self.feed(host, Input::Tick);
    }

    /// The host stops existing: handlers end, nothing in flight is heard.
    pub(super) fn down(&mut self, host: usize) {
        if let Some(replay) = &mut self.replay {
            replay.forget(host);
        }
        let partitions: Vec<u32> = self.hosts[host].handlers.keys().copied().collect();
        for partition in partitions {
            self.end_handler(host, partition);
        }
        let now = self.now;
        // Its session with the store ends with it.
        let reader = faults::session(host, self.hosts[host].life);
        self.store.forget(reader);
        let h = &mut self.hosts[host];
        h.engine = None;
        h.state = Life::Down;
        h.wake = None;
        h.paused_until = None;
        if let Some(since) = h.up_since.take() {
            self.count_up(since, now);
        }
        self.checker.set_live(host, false, now);
    }

    pub(super) fn crash(&mut self, host: usize, restart_in: Option<u64>) {
        if self.hosts[host].state == Life::Down {
            return;
        }
        let name = self.hosts[host].name.clone();
        self.note(TraceEvent::Crash { host: name.clone() });
        self.mark(format!("{name} crashes"));
        self.checker.orphan(host, false, self.now);
        self.down(host);
        if let Some(after) = restart_in {
            self.hosts[host].restart_pending = true;
            self.push(self.now + after, Event::Boot { host });
        }
    }

    pub(super) fn pause(&mut self, host: usize, for_ms: u64) {
        let until = self.now + for_ms;
        if let Some(replay) = &mut self.replay {
            replay.paused(host, for_ms);
        }
        let h = &mut self.hosts[host];
        h.paused_until = Some(until);
        let life = h.life;
        let mut halted = Vec::new();
        for (partition, handler) in &mut h.handlers {
            if handler.running {
                handler.running = false;
                halted.push(*partition);
            }
        }
        halted.sort_unstable();
        for partition in halted {
            self.checker.halt(partition, host, self.now);
        }
        self.push(until, Event::Resume { host, life });
    }

    pub(super) fn resume(&mut self, host: usize, life: u64) {
        if !self.alive(host, life) || self.hosts[host].paused_until.is_none() {
            return;
        }
        self.hosts[host].paused_until = None;
        // The engine runs first: whatever lapsed during the pause stops before any
        // handler continues.
        self.feed(host, Input::Tick);
        let mut resumed: Vec<(u32, LeaseToken, u64)> = self.hosts[host]
            .handlers
            .iter_mut()
            .filter(|(_, h)| !h.running && !h.lost)
            .map(|(p, h)| {
                h.running = true;
                (*p, h.token.clone(), h.epoch.0)
            })
            .collect();
        resumed.sort_unstable_by_key(|(p, _, _)| *p);
        for (partition, token, epoch) in resumed {
            if let Some(rival) = self.rival_authority(host, partition, &token) {
                let name = self.hosts[host].name.clone();
                self.violate(
                    ViolationKind::Exclusivity,
                    format!(
                        "{name} resumes partition {partition} at epoch {epoch} after a pause while {rival} holds authority"
                    ),
                );
            }
            self.checker.run(partition, host, epoch, false, self.now);
        }
    }

    pub(super) fn random_host(&mut self, up_only: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.hosts.len())
            .filter(|h| !self.hosts[*h].doomed)
            .filter(|h| match self.hosts[*h].state {
                Life::Up => self.hosts[*h].paused_until.is_none(),
                Life::Leaving => !up_only,
                Life::Down => false,
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        Some(candidates[self.rng.random_range(0..candidates.len())])
    }

    pub(super) fn fault(&mut self, kind: FaultKind) {
        if self.healed {
            return;
        }
        let struck = self.strike(kind);
        if let Some((host, size_ms)) = struck {
            *self.fault_counts.entry(kind).or_default() += 1;
            let name = host.map(|h| self.hosts[h].name.clone());
            // Crashes and shutdowns mark themselves, as scripted ones do.
            if !matches!(kind, FaultKind::Crash | FaultKind::Shutdown) {
                let label = match &name {
                    Some(n) => format!("{kind} {n}"),
                    None => kind.to_string(),
                };
                self.mark(label);
            }
            self.note(TraceEvent::Fault {
                kind,
                host: name,
                size_ms,
            });
        }
        let gap = self.fault_gap(kind);
        self.push(self.now + gap, Event::Fault(kind));
    }

    /// Applies one fault of `kind`; returns the host it hit and its size.
    pub(super) fn strike(&mut self, kind: FaultKind) -> Option<(Option<usize>, i64)> {
        let now = self.now;
        match kind {
            FaultKind::Crash => {
                let host = self.random_host(false)?;
                let down = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.crash(host, Some(down));
                Some((Some(host), down as i64))
            }
            FaultKind::Shutdown => {
                let host = self.random_host(true)?;
                let down = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.handle(Event::Shutdown {
                    host,
                    restart_in: Some(down),
                });
                Some((Some(host), down as i64))
            }
            FaultKind::Pause => {
                let host = self.random_host(false)?;
                let stall = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.pause(host, stall);
                Some((Some(host), stall as i64))
            }
            FaultKind::Jump => {
                let host = self.random_host(false)?;
                let step = kind.draw_size(&mut self.rng);
                self.hosts[host].clock.offset_ms += step;
                Some((Some(host), step))
            }
            FaultKind::Split => self.split_some_partition(),
            FaultKind::Throttle | FaultKind::Spike | FaultKind::Stale => {
                let window = kind.draw_size(&mut self.rng);
                let window_ms = u64::try_from(window).unwrap_or(0);
                self.weather.open(kind, now, window_ms, &mut self.rng);
                Some((None, window))
            }
            FaultKind::Timeout => {
                let host = self.random_host(false)?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.hosts[host].lose_until = now + window;
                Some((Some(host), window as i64))
            }
            FaultKind::Partition => {
                let host = self.random_host(false)?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.hosts[host].cut_until = now + window;
                Some((Some(host), window as i64))
            }
            FaultKind::Retry => {
                let host = self.random_host(false)?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.hosts[host].retry_until = now + window;
                Some((Some(host), window as i64))
            }
            FaultKind::Stuck => {
                let host = self.random_host(false)?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                self.hosts[host].stuck_until = now + window;
                Some((Some(host), window as i64))
            }
            FaultKind::Zombie => {
                let host = self.random_host(true)?;
                let window = u64::try_from(kind.draw_size(&mut self.rng)).unwrap_or(0);
                // Cut off, it acts on until it dies at the window's end.
                let life = self.hosts[host].life;
                self.hosts[host].cut_until = now + window;
                self.hosts[host].doomed = true;
                self.push(now + window, Event::Die { host, life });
                // Its replacement: a new slot under the same name, whose life numbers
                // go on from the old one's, as a host's incarnations do.
                let name = self.hosts[host].name.to_string();
                let new = self.add_host(name);
                self.hosts[new].life = life;
                self.hosts[new].upgrade_at = self.hosts[host].upgrade_at;
                self.hosts[new].clock = self.hosts[host].clock;
                self.hosts[new].clock_drawn = true;
                self.boot(new);
                Some((Some(host), window as i64))
            }
            FaultKind::Skew | FaultKind::Drift => None,
        }
    }

    /// Every fault ends; hosts a fault took down come back.
    pub(super) fn heal(&mut self) {
        self.healed = true;
        self.weather.clear();
        self.note(TraceEvent::Heal);
        self.mark("heal".into());
        for host in 0..self.hosts.len() {
            // A zombie still acting is cut off until it dies: the heal ends it now.
            if self.hosts[host].doomed && self.hosts[host].state != Life::Down {
                self.crash(host, None);
            }
            let h = &mut self.hosts[host];
            h.cut_until = 0;
            h.lose_until = 0;
            h.retry_until = 0;
            h.stuck_until = 0;
            if h.paused_until.is_some() {
                h.paused_until = Some(self.now);
                let life = h.life;
                self.push(self.now, Event::Resume { host, life });
            }
            if self.hosts[host].restart_pending {
                self.push(self.now, Event::Boot { host });
            }
        }
    }

    /// The liveness deadline: the work must have settled, and nothing may be lost.
    pub(super) fn deadline(&mut self) {
        if !self.checker.covered() {
            let missing = self.checker.spread();
            self.violate(
                ViolationKind::Liveness,
                format!(
                    "{:.0} s after the heal and the last change, some partition is not processed by exactly one live host (spread {missing})",
                    self.cfg.settle().as_millis() as f64 / 1_000.0
                ),
            );
        } else if self.cfg.strategy.needs_membership() && !self.checker.balanced() {
            let spread = self.checker.spread();
            self.violate(
                ViolationKind::Liveness,
                format!(
                    "{:.0} s after the heal and the last change, the live hosts' loads still differ by {spread}",
                    self.cfg.settle().as_millis() as f64 / 1_000.0
                ),
            );
        }
        let mut behind = Vec::new();
        for p in 0..self.feeds.len() {
            // A range that split is its children's to finish.
            if !self.children_of(p as u32).is_empty() {
                continue;
            }
            let produced = self.produced(p as u32, self.now);
            let committed = self.checker.committed(p as u32);
            if committed < produced {
                behind.push((p, committed, produced));
                let waited = self.now - self.arrival(p as u32, committed);
                self.checker.max_lag_ms = self.checker.max_lag_ms.max(waited);
            }
        }
        if let Some((p, committed, produced)) = behind.first() {
            self.violate(
                ViolationKind::EventLost,
                format!(
                    "at the end, {} partitions have unprocessed events; partition {p}: events {committed}..{produced}",
                    behind.len()
                ),
            );
        }
    }
}
