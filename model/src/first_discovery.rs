//! Keeping each property's first discovery.
//!
//! Stateright's checkers record a discovery each time a state breaks an `always`
//! property or reaches a `sometimes` one, and each record replaces the one before. A
//! breadth-first search finishes its block of states before it looks at its stop
//! condition, and without one it explores everything, so it reported the *last*
//! breaking state it met: on one thread, a path deeper than the shortest (25 steps for
//! `name-proves-death`, whose shortest is 4). [`FirstDiscovery`] wraps a model so
//! that each property reports its first discovery only. Breadth first on one thread
//! then meets the shortest first, and keeps it.

use crate::check::Checkable;
use stateright::{Expectation, Model, Property};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The most properties a wrapped model may have: one condition per index, below.
const MOST: usize = 32;

/// `inner`, whose properties each report their first discovery and no later one.
///
/// One wrapper serves one check: its discoveries are shared by its clones (the
/// checker's threads) and never reset.
#[derive(Clone)]
pub(crate) struct FirstDiscovery<M: Model> {
    inner: M,
    properties: Arc<Vec<Property<M>>>,
    found: Arc<Vec<AtomicBool>>,
}

impl<M: Model> FirstDiscovery<M> {
    /// Wraps `inner` for one check; `None` if it has more than 32 properties (no model
    /// of this crate has more than 24, and a test checks each).
    pub(crate) fn new(inner: M) -> Option<Self> {
        let properties = inner.properties();
        if properties.len() > MOST {
            return None;
        }
        let found = properties.iter().map(|_| AtomicBool::new(false)).collect();
        Some(FirstDiscovery {
            inner,
            properties: Arc::new(properties),
            found: Arc::new(found),
        })
    }

    /// Whether property `index` holds in `state`, as the checker is to see it: a
    /// discovery counts once.
    fn judged<const INDEX: usize>(&self, state: &M::State) -> bool {
        let property = &self.properties[INDEX];
        let holds = (property.condition)(&self.inner, state);
        let first =
            |discovered: bool| discovered && !self.found[INDEX].swap(true, Ordering::Relaxed);
        match property.expectation {
            Expectation::Always => !first(!holds),
            Expectation::Sometimes => first(holds),
            // The checker judges these along paths, by terminal states, not by a record
            // it replaces; none of this crate's models has one.
            Expectation::Eventually => holds,
        }
    }
}

/// The condition that judges property `INDEX` of the wrapped model.
fn condition<M: Model, const INDEX: usize>(model: &FirstDiscovery<M>, state: &M::State) -> bool {
    model.judged::<INDEX>(state)
}

/// One condition per index below [`MOST`]: a property's condition is a plain function,
/// so its index is a constant of the function, not a value it captures.
macro_rules! conditions {
    ($($index:literal)*) => {
        fn conditions<M: Model>() -> [fn(&FirstDiscovery<M>, &M::State) -> bool; MOST] {
            [$(condition::<M, $index>),*]
        }
    };
}
conditions!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);

impl<M: Model> Model for FirstDiscovery<M> {
    type State = M::State;
    type Action = M::Action;

    fn init_states(&self) -> Vec<Self::State> {
        self.inner.init_states()
    }

    fn actions(&self, state: &Self::State, actions: &mut Vec<Self::Action>) {
        self.inner.actions(state, actions)
    }

    fn next_state(&self, last: &Self::State, action: Self::Action) -> Option<Self::State> {
        self.inner.next_state(last, action)
    }

    fn format_action(&self, action: &Self::Action) -> String
    where
        Self::Action: Debug,
    {
        self.inner.format_action(action)
    }

    fn format_step(&self, last: &Self::State, action: Self::Action) -> Option<String>
    where
        Self::State: Debug,
    {
        self.inner.format_step(last, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.properties
            .iter()
            .zip(conditions::<M>())
            .map(|(property, condition)| Property {
                expectation: property.expectation.clone(),
                name: property.name,
                condition,
            })
            .collect()
    }

    fn within_boundary(&self, state: &Self::State) -> bool {
        self.inner.within_boundary(state)
    }
}

impl<M: Checkable> Checkable for FirstDiscovery<M>
where
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq + Send + Sync + 'static,
{
    fn is_fault(&self, action: &Self::Action) -> bool {
        self.inner.is_fault(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{self, Options, Outcome, Search};
    use std::time::Duration;

    /// A count that goes up by one or two, to 40: it should stay under 3, and sometimes
    /// passes 30.
    #[derive(Clone)]
    struct Count;

    impl Model for Count {
        type State = u8;
        type Action = u8;

        fn init_states(&self) -> Vec<u8> {
            vec![0]
        }

        fn actions(&self, _: &u8, actions: &mut Vec<u8>) {
            actions.extend([1, 2]);
        }

        fn next_state(&self, last: &u8, step: u8) -> Option<u8> {
            Some(last + step)
        }

        fn properties(&self) -> Vec<Property<Self>> {
            vec![
                Property::always("under 3", |_, count| *count < 3),
                Property::sometimes("past 30", |_, count| *count > 30),
            ]
        }

        fn within_boundary(&self, count: &u8) -> bool {
            *count <= 40
        }
    }

    impl Checkable for Count {}

    /// `Count` with 33 copies of its `always` property: more than the wrapper keeps.
    #[derive(Clone)]
    struct Crowded;

    impl Model for Crowded {
        type State = u8;
        type Action = u8;

        fn init_states(&self) -> Vec<u8> {
            Count.init_states()
        }

        fn actions(&self, count: &u8, actions: &mut Vec<u8>) {
            Count.actions(count, actions)
        }

        fn next_state(&self, last: &u8, step: u8) -> Option<u8> {
            Count.next_state(last, step)
        }

        fn properties(&self) -> Vec<Property<Self>> {
            (0..=MOST)
                .map(|_| Property::always("under 3", |_, count: &u8| *count < 3))
                .collect()
        }

        fn within_boundary(&self, count: &u8) -> bool {
            Count.within_boundary(count)
        }
    }

    impl Checkable for Crowded {}

    #[test]
    fn a_model_with_more_properties_than_the_wrapper_keeps_is_checked_as_stateright_checks_it() {
        assert!(FirstDiscovery::new(Crowded).is_none());
        let report = check::check(
            &Crowded,
            &Options::default(),
            Duration::from_secs(1),
            |_| {},
        );
        let verdict = report.verdict("under 3");
        assert_eq!(verdict.outcome, Outcome::Counterexample);
        // A counterexample of at least two steps, not necessarily the shortest.
        let steps = verdict.path.as_ref().expect("a path").len() - 1;
        assert!(steps >= 2, "{steps}");
    }

    #[test]
    fn breadth_first_on_one_thread_reports_the_shortest_counterexample_and_example() {
        let report = check::check(&Count, &Options::default(), Duration::from_secs(1), |_| {});
        let steps = |name| {
            let verdict = report.verdict(name);
            assert_ne!(verdict.outcome, Outcome::Incomplete, "{name}");
            verdict.path.as_ref().expect("a discovery").len() - 1
        };
        // 0 → 2 → 3 (or 0 → 1 → 3), and fifteen steps of two and one of one to 31.
        assert_eq!(steps("under 3"), 2);
        assert_eq!(steps("past 30"), 16);
    }

    #[test]
    fn stateright_alone_reports_a_later_discovery_than_the_first() {
        use stateright::Checker;
        let checker = Count.checker().spawn_bfs().join();
        let steps = |name| {
            checker
                .discovery(name)
                .expect("a discovery")
                .into_vec()
                .len()
                - 1
        };
        // It stops once "past 30" is reached too, 16 steps in, keeping the last state
        // under 3's counterexample it met on the way.
        assert!(steps("under 3") > 10, "{}", steps("under 3"));
    }

    #[test]
    fn depth_first_reports_the_first_counterexample_it_meets() {
        let options = Options {
            search: Search::Dfs,
            ..Options::default()
        };
        let report = check::check(&Count, &options, Duration::from_secs(1), |_| {});
        let path = report
            .verdict("under 3")
            .path
            .clone()
            .expect("a counterexample");
        // Every state before the last keeps the property: the path ends where it first broke.
        let last = path.len() - 1;
        assert!(path[..last].iter().all(|(count, _)| *count < 3));
        assert!(path[last].0 >= 3);
    }

    #[test]
    fn every_model_of_the_crate_fits_the_wrapper() {
        use crate::{ItemModel, LockBounds, PartitionModel, QueueModel};
        let splits = crate::Bounds {
            splits: 1,
            ..crate::Bounds::default()
        };
        let counts = [
            PartitionModel::new(crate::Bounds::default()).map(|m| m.properties().len()),
            PartitionModel::new(splits).map(|m| m.properties().len()),
            QueueModel::new(LockBounds::default()).map(|m| m.properties().len()),
            ItemModel::new(LockBounds::default()).map(|m| m.properties().len()),
        ];
        for count in counts {
            assert!(count.expect("valid bounds") <= MOST);
        }
    }
}
