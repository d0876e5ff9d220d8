//! Planning again without walking the table when nothing a plan reads has changed.
//!
//! A plan reads every lease, so making one costs a walk of the whole table. Under
//! session liveness a host plans again whenever a member's heartbeat could expire
//! (the plan timer), and in a steady group every such moment passes with the member
//! renewed: at 100 hosts × 10,000 leases those walks were most of the simulator's
//! time. A walk is skipped when its plan would be the last one, which asked for
//! nothing: the leases have not changed since (the host unsettles its plan on any
//! news of a lease, see `TableReads`), and what the verdicts read of the group is
//! as it was (who is a member, alive, fenced, in which tenure, claiming what).
//!
//! The skip must be exact, or the model would check another engine than the one
//! that runs: debug builds walk anyway and compare.

use super::LeaseHost;
use crate::lease::memo::Plans;
use crate::time::{LocalTime, Now};

impl LeaseHost {
    /// Plans again when the plan timer is due: walks the table unless the walk would give the
    /// last plan, which asked for nothing; then only the next moment to look again
    /// is new, and it is a member's expiry, found without the walk.
    pub(super) fn replan(&mut self, now: Now) {
        if !(self.table.is_settled() && self.group_unchanged(now)) {
            self.rebalance(now);
            return;
        }
        let next = self.member_expiries(now);
        #[cfg(debug_assertions)]
        self.check_skipped_walk(now, next);
        self.table.plan_at(next);
        self.memo.reused();
    }

    /// How this host has made its plans in this life.
    pub fn plans(&self) -> Plans {
        self.memo.plans()
    }

    /// The earliest future moment at which a live member's heartbeat counts as
    /// expired, as it stands now.
    pub(super) fn member_expiries(&self, now: Now) -> Option<LocalTime> {
        let policy = &self.config.expiry;
        self.live_members(now)
            .map(|m| policy.expires_at(&m.observation(), now))
            .filter(|t| *t > now.local)
            .min()
    }

    /// Remembers the group as the plan just made saw it, if that plan may be
    /// `reusable`: it asked for nothing, and no lease's verdict moves with time
    /// alone.
    pub(super) fn remember_plan(&mut self, now: Now, reusable: bool) {
        let expiry = &self.config.expiry;
        self.memo.walked(&self.membership, expiry, now, reusable);
    }

    pub(super) fn group_unchanged(&self, now: Now) -> bool {
        let expiry = &self.config.expiry;
        self.memo.group_unchanged(&self.membership, expiry, now)
    }

    /// The walk skipped, made after all: it must plan nothing. Under session
    /// liveness a read of the heartbeats that shows no change skips it too, and
    /// that skip is checked the same way whenever the group is as the last plan saw
    /// it (otherwise the walk the plan timer calls settles it).
    #[cfg(debug_assertions)]
    pub(super) fn check_reused_plan(&self, now: Now) -> Option<LocalTime> {
        let judged = self.judge(now);
        let plan = self.config.strategy.plan(&judged.view, &self.me);
        assert!(
            plan.actions.is_empty(),
            "a skipped walk would plan {:?}",
            plan.actions
        );
        judged.next
    }

    /// The same when the plan timer is due, which must also look again at the same moment.
    #[cfg(debug_assertions)]
    fn check_skipped_walk(&self, now: Now, next: Option<LocalTime>) {
        let walked = self.check_reused_plan(now);
        assert_eq!(walked, next, "a skipped walk would look again then");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{Input, LeaseConfig, Liveness, Output, Record};
    use crate::store::Container;
    use crate::time::WallTime;
    use crate::{Incarnation, LeaseToken, Millis};

    /// Two hosts and the reference store, every request answered at once, the
    /// clocks the same: just enough to reach a steady group.
    struct Group {
        hosts: Vec<LeaseHost>,
        store: Container<Record>,
        time: u64,
    }

    fn now(t: u64) -> Now {
        Now::new(LocalTime(t), WallTime(1_700_000_000_000 + t as i64))
    }

    impl Group {
        fn new() -> Group {
            let config = LeaseConfig {
                prefix: "t".into(),
                partitions: vec![LeaseToken::from("0"), LeaseToken::from("1")],
                renew_interval: Millis::from_secs(3),
                acquire_interval: Millis::from_secs(2),
                liveness: Some(Liveness::Session),
                ..LeaseConfig::default()
            };
            let hosts = ["a", "b"]
                .map(|h| LeaseHost::new(h.into(), config.clone(), Incarnation(0)).unwrap());
            Group {
                hosts: hosts.into(),
                store: Container::new(),
                time: 0,
            }
        }

        fn input(&mut self, i: usize, input: Input) {
            let mut inputs = vec![input];
            while let Some(input) = inputs.pop() {
                self.hosts[i].handle_input(now(self.time), input).unwrap();
                while let Some(output) = self.hosts[i].poll_output() {
                    match output {
                        Output::Request(req) => inputs.push(Input::Response {
                            id: req.id,
                            result: self.store.execute(req.op),
                        }),
                        Output::Stop { lease, session, .. } => {
                            inputs.push(Input::Stopped { lease, session })
                        }
                        _ => {}
                    }
                }
            }
        }

        fn run_until(&mut self, end: u64) {
            while let Some((at, i)) = (0..self.hosts.len())
                .filter_map(|i| Some((self.hosts[i].poll_timeout()?.as_millis(), i)))
                .min()
                .filter(|(at, _)| *at <= end)
            {
                self.time = self.time.max(at);
                self.input(i, Input::Tick);
            }
            self.time = end;
        }
    }

    /// A member's heartbeat could expire about every minute (the default duration):
    /// ten minutes give every host several moments to plan again.
    #[test]
    fn a_steady_group_reuses_its_plans() {
        let mut g = Group::new();
        g.run_until(600_000);
        for host in &g.hosts {
            assert_eq!(
                host.leases()
                    .filter(|l| l.doc.is_owned_by(&host.me))
                    .count(),
                1
            );
            assert!(host.plans().reused > 0, "{:?}", host.plans());
        }
    }

    /// Reuse never hides a death: the member's expiry is a moment to plan again,
    /// and its heartbeat standing still makes that plan a walk, which takes over.
    #[test]
    fn a_member_that_dies_is_planned_for_by_a_walk() {
        let mut g = Group::new();
        g.run_until(600_000);
        let before = g.hosts[0].plans();
        g.hosts.truncate(1);
        g.run_until(780_000);
        let a = &g.hosts[0];
        assert!(a.plans().walked > before.walked);
        assert_eq!(a.leases().filter(|l| l.doc.is_owned_by(&a.me)).count(), 2);
    }

    /// The check behind every reused plan catches a plan that is not what a walk
    /// would make: here a lease's release landed without unsettling the plan.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "a skipped walk would plan")]
    fn a_plan_reused_after_an_unnoticed_change_is_caught() {
        let mut g = Group::new();
        g.run_until(600_000);
        let a = &mut g.hosts[0];
        let (at, _) = (a.table.timers())
            .find(|(_, timer)| *timer == crate::lease::Timer::Replan)
            .expect("a member's expiry to plan again at");
        assert!(a.table.is_settled() && a.group_unchanged(now(at.as_millis())));
        let held = a.slots.values_mut().find(|s| s.is_owned()).unwrap();
        held.forget_owner();
        a.replan(now(at.as_millis()));
    }
}
