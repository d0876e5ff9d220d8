//! The partition model's traces: the facts of a state and a short name for each
//! action.

use super::cluster::{PartitionModel, index, number, request};
use super::state::{Action, State};
use crate::trace::{Explain, Lane, seconds};
use crate::world::{self, Fault};
use leasehold_engine::HostId;
use leasehold_engine::lease::Record;
use std::collections::BTreeMap;

/// One lease as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseLine {
    /// Partition index.
    pub partition: usize,
    /// Recorded owner.
    pub owner: Option<HostId>,
    /// Epoch.
    pub epoch: u64,
    /// Etag, as the store shows it.
    pub etag: String,
    /// Checkpoint (0 when none).
    pub checkpoint: u8,
    /// Whether the lease carries a fence.
    pub fenced: bool,
}

/// The stored leases, by partition.
pub(crate) fn leases(state: &State) -> Vec<LeaseLine> {
    state
        .store
        .iter()
        .filter_map(|stored| match &stored.doc {
            Record::Lease(doc) => Some(LeaseLine {
                partition: index(&doc.token),
                owner: doc.owner.clone(),
                epoch: doc.epoch.0,
                etag: format!("{:?}", stored.etag),
                checkpoint: number(doc.checkpoint.as_ref()),
                fenced: doc.fenced,
            }),
            Record::Host(_) => None,
        })
        .collect()
}

/// A short name for an action without context.
pub(crate) fn describe_action(action: &Action) -> String {
    match action {
        Action::Step(h, f) => format!("h{h}'s timers fire{}", Fault::describe(f)),
        Action::StepTwice(h, a, b) => format!(
            "h{h}'s timers fire{}{}",
            Fault::describe(&Some(*a)),
            Fault::describe(&Some(*b))
        ),
        Action::Serve(h, id, f) => format!(
            "the store serves h{h}'s held request {id}{}",
            Fault::describe(f)
        ),
        Action::Deliver(h, id, f) => {
            format!("h{h}'s held reply to {id} arrives{}", Fault::describe(f))
        }
        Action::GiveUp(h, id) => format!("h{h}'s driver gives up on its held request {id}"),
        Action::Crash(h) => format!("h{h} CRASHES"),
        Action::Shutdown(h) => format!("h{h} is told to SHUT DOWN"),
        Action::Restart(h) => format!("h{h} restarts as a new life"),
        Action::Zombie(h) => format!("h{h} is believed CRASHED but acts on, cut off (a ZOMBIE)"),
        Action::Throttle(h) => format!("the store THROTTLES h{h}'s reads until the next tick"),
        Action::Return(h, p) => format!("h{h}'s lost call for lease {p} ends"),
        Action::Stick(h, p) => format!("h{h}'s lost call for lease {p} gets stuck"),
        Action::Advance => "1 s passes".into(),
        Action::Late => "1 s passes while work is overdue (a PAUSE)".into(),
        Action::Split => "the next range SPLITS in the feed".into(),
    }
}

impl Explain for PartitionModel {
    fn explain(&self, state: &State, action: &Action) -> (Option<State>, Vec<String>) {
        PartitionModel::explain(self, state, action)
    }

    fn facts(&self, state: &State) -> BTreeMap<String, String> {
        facts(self, state)
    }

    fn lanes(&self) -> Vec<String> {
        world::lanes(self.bounds.hosts + self.bounds.zombies.min(1), 'h')
    }

    fn lane(&self, action: &Action) -> Lane {
        match *action {
            Action::Crash(h) | Action::Zombie(h) => Lane::Crash(h),
            Action::Step(h, _)
            | Action::StepTwice(h, ..)
            | Action::Shutdown(h)
            | Action::Serve(h, ..)
            | Action::Deliver(h, ..)
            | Action::GiveUp(h, _)
            | Action::Restart(h)
            | Action::Throttle(h)
            | Action::Return(h, _)
            | Action::Stick(h, _) => Lane::Actor(h),
            Action::Advance | Action::Late | Action::Split => Lane::Time,
        }
    }
}

/// Every fact shown in a trace, keyed so that steps can print only what changed.
fn facts(model: &PartitionModel, state: &State) -> BTreeMap<String, String> {
    let mut facts = world::client_facts(&model.bounds.budget(), state, 'h', |h, engine, now| {
        let mut facts = Vec::new();
        for lease in engine.leases() {
            let p = index(&lease.doc.token);
            let belief = match (lease.owned, lease.processing) {
                (Some(e), true) => match lease.authority_until {
                    Some(until) if now.local < until => format!(
                        "owns at e{}, processing, authority until {}",
                        e.0,
                        seconds(until)
                    ),
                    _ => format!("owns at e{}, processing, authority LAPSED", e.0),
                },
                (Some(e), false) => format!("owns at e{}, not processing", e.0),
                (None, _) => match &lease.doc.owner {
                    Some(o) => format!("sees owner {o} at e{}", lease.doc.epoch.0),
                    None => "sees it unowned".into(),
                },
            };
            facts.push((format!("h{h} lease {p}"), belief));
        }
        let calls = &state.clients[usize::from(h)].handler;
        for (p, call) in calls.lingering.iter().enumerate() {
            if let Some(call) = call {
                let why = if calls.stuck & 1 << p != 0 {
                    "told to stop; STUCK, it cannot be aborted"
                } else {
                    "told to stop"
                };
                facts.push((
                    format!("h{h} lost call {p}"),
                    format!("still running at e{} ({why})", call.epoch),
                ));
            }
        }
        for (p, call) in calls.draining.iter().enumerate() {
            if let Some(call) = call {
                facts.push((
                    format!("h{h} draining call {p}"),
                    format!("finishing its batch at e{} (told to stop)", call.epoch),
                ));
            }
        }
        facts
    });
    for stored in state.store.iter() {
        if let Record::Host(doc) = &stored.doc {
            let claims: Vec<&str> = doc.claims.iter().map(|c| c.as_str()).collect();
            let claims = if claims.is_empty() {
                "no claims".to_string()
            } else {
                format!("claims lease {}", claims.join(", "))
            };
            facts.insert(
                format!("heartbeat {}", doc.host),
                format!("{:?}, {claims}", stored.etag),
            );
        }
    }
    facts.extend(world::wire_facts(state, 'h', request));
    for lease in leases(state) {
        let owner = lease
            .owner
            .as_ref()
            .map_or("none".to_string(), |o| o.to_string());
        let fence = if lease.fenced { ", fenced" } else { "" };
        facts.insert(
            format!("lease {}", lease.partition),
            format!(
                "owner {owner}, e{}, {}, checkpoint {}{fence}",
                lease.epoch, lease.etag, lease.checkpoint
            ),
        );
    }
    facts
}
