//! The partition model as stateright sees it: its first states, the actions each state
//! allows, the step, and the properties checked.

use super::cluster::PartitionModel;
use super::state::{Action, Ghost, State};
use crate::world::{self, Fault};

/// Faults can hit any of a step's first few writes or requests.
const MAX_FAULT_INDEX: u8 = 3;

impl crate::check::Checkable for PartitionModel {
    fn is_fault(&self, action: &Action) -> bool {
        action.is_fault()
    }
}

impl stateright::Model for PartitionModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let ghost = Ghost::default();
        let skew = if self.fold_wall_clocks {
            0
        } else {
            self.bounds.skew
        };
        let mut states = world::initial(
            self.bounds.hosts,
            skew,
            &self.bounds.budget(),
            &self.initial_store(),
            &ghost,
            |h| self.engine(h, 0),
        );
        if self.zombie_slot().is_some() {
            for state in &mut states {
                let mut slot = state.clients[0].clone();
                slot.engine = None;
                slot.cut = true;
                state.clients.push(slot);
            }
        }
        states
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let faults = Fault::menu(&self.bounds.budget(), state, MAX_FAULT_INDEX);
        let pairs = if self.bounds.faults_per_step >= 2 {
            Fault::pairs(&self.bounds.budget(), state, MAX_FAULT_INDEX)
        } else {
            Vec::new()
        };
        let quiescent = self.quiescent(state);
        let zombie = self.zombie_slot();
        for (h, host) in state.clients.iter().enumerate() {
            let h = h as u8;
            let is_zombie = Some(h) == zombie;
            if host.engine.is_none() {
                // A crashed host restarts at a tick boundary, or stays down.
                if quiescent && !is_zombie {
                    actions.push(Action::Restart(h));
                }
                continue;
            }
            if self.due(state, usize::from(h)) {
                if is_zombie {
                    // Cut off: nothing it sends arrives, so no fault can hit it.
                    actions.push(Action::Step(h, None));
                } else {
                    actions.extend(faults.iter().map(|f| Action::Step(h, *f)));
                    actions.extend(pairs.iter().map(|(a, b)| Action::StepTwice(h, *a, *b)));
                    if !host.throttled && state.throttles < self.bounds.throttled_reads {
                        actions.push(Action::Throttle(h));
                    }
                }
            }
            let calls = host.handler.lingering.iter().zip(&host.handler.draining);
            for (p, (lost, draining)) in calls.enumerate() {
                if lost.is_some() || draining.is_some() {
                    actions.push(Action::Return(h, p as u8));
                }
                let stuck = host.handler.stuck & 1 << p != 0;
                if lost.is_some() && !stuck && state.ghost.stuck_calls < self.bounds.stuck_calls {
                    actions.push(Action::Stick(h, p as u8));
                }
            }
            if is_zombie {
                continue;
            }
            if quiescent && state.crashes < self.bounds.crashes {
                actions.push(Action::Crash(h));
            }
            let running = host.engine.as_ref().is_some_and(|e| e.is_running());
            if quiescent && running && state.ghost.shutdowns < self.bounds.shutdowns {
                actions.push(Action::Shutdown(h));
            }
            let slot_free = zombie.is_some_and(|z| state.clients[usize::from(z)].engine.is_none());
            if quiescent && running && slot_free && state.ghost.zombies < self.bounds.zombies {
                actions.push(Action::Zombie(h));
            }
        }
        // The write a reply sets off may be held in turn, while the delay budget lasts.
        let holds: &[Option<Fault>] = if state.delays < self.bounds.delays {
            &[None, Some(Fault::Hold(0))]
        } else {
            &[None]
        };
        for (h, id) in state.net.keys() {
            actions.extend(holds.iter().map(|f| Action::Serve(*h, *id, *f)));
        }
        let unheard = world::may_give_up(state).into_iter();
        actions.extend(unheard.map(|(h, id)| Action::GiveUp(h, id)));
        for (h, id) in state.replies.keys() {
            actions.extend(holds.iter().map(|f| Action::Deliver(*h, *id, *f)));
        }
        if quiescent && state.ghost.feed.splits() < usize::from(self.bounds.splits) {
            actions.push(Action::Split);
        }
        if state.time < self.bounds.horizon {
            if quiescent {
                actions.push(Action::Advance);
            } else if state.pauses < self.bounds.pauses {
                actions.push(Action::Late);
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        self.step(last, action, &mut None)
    }

    fn properties(&self) -> Vec<stateright::Property<Self>> {
        super::properties::all(self)
    }

    fn within_boundary(&self, state: &State) -> bool {
        state.time <= self.bounds.horizon
    }

    fn format_action(&self, action: &Action) -> String {
        super::trace::describe_action(action)
    }

    fn as_svg(&self, path: stateright::Path<State, Action>) -> Option<String> {
        Some(crate::svg::sequence_diagram(self, path))
    }
}

/// What a check of the partition model found.
pub type PartitionReport = crate::check::Report<State, Action>;
