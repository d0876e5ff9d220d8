//! stateright's Explorer, showing the domain rather than the engine's internals.
//!
//! The Explorer prints a state with `{:#?}`. For a world of real engines that is the
//! whole of every host's bookkeeping: 263 lines for the first 2 × 2 partition state.
//! [`Explored`] wraps a model so that a state prints as its facts, the same ones
//! `leasehold check --replay` shows (clocks, beliefs and authority, stored documents,
//! requests on the wire), and a step prints as what happened inside it, followed by
//! the facts of the state it reaches. States, actions and properties are the wrapped
//! model's own, so the Explorer walks exactly the state space the checker does.
//!
//! ```
//! use leasehold_model::explore::{Explored, view};
//! use leasehold_model::{Bounds, PartitionModel};
//! use stateright::Model;
//!
//! let model = PartitionModel::new(Bounds::default()).unwrap();
//! let first = model.init_states().remove(0);
//! let text = view(&model, &first);
//! assert!(text.starts_with("time: 0 s\nh0: up, life 0"));
//! // The Explorer prints a state with `{:#?}`; wrapped, that is the same view.
//! let explored = Explored::new(model).unwrap();
//! assert_eq!(format!("{:#?}", explored.show(first)), text);
//! ```

use crate::trace::Explain;
use stateright::{Model, Path, Property};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The most properties a model served by the Explorer may have.
pub const MAX_PROPERTIES: usize = 24;

/// A model that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    /// The wrapper forwards each property through a function of its own, and has
    /// [`MAX_PROPERTIES`] of them.
    #[error("the model has {0} properties; the Explorer serves at most {MAX_PROPERTIES}")]
    TooManyProperties(usize),
}

/// `M`, as the Explorer shows it.
pub struct Explored<M: Model> {
    inner: Arc<M>,
    properties: Vec<Property<M>>,
}

impl<M: Model> Clone for Explored<M> {
    fn clone(&self) -> Self {
        Explored {
            inner: Arc::clone(&self.inner),
            properties: self.inner.properties(),
        }
    }
}

impl<M: Explain> Explored<M> {
    /// Wraps `model`.
    pub fn new(model: M) -> Result<Self, ExploreError> {
        let properties = model.properties();
        if properties.len() > MAX_PROPERTIES {
            return Err(ExploreError::TooManyProperties(properties.len()));
        }
        Ok(Explored {
            inner: Arc::new(model),
            properties,
        })
    }

    /// The wrapped model.
    pub fn model(&self) -> &M {
        &self.inner
    }

    /// `state`, ready to be shown.
    pub fn show(&self, state: M::State) -> Shown<M> {
        Shown {
            state,
            model: Arc::clone(&self.inner),
        }
    }
}

/// One of the wrapped model's states. It hashes and compares as that state; it
/// prints as its facts.
pub struct Shown<M: Model> {
    /// The wrapped model's state.
    pub state: M::State,
    model: Arc<M>,
}

impl<M: Model<State: Clone>> Clone for Shown<M> {
    fn clone(&self) -> Self {
        Shown {
            state: self.state.clone(),
            model: Arc::clone(&self.model),
        }
    }
}

impl<M: Model<State: Hash>> Hash for Shown<M> {
    fn hash<H: Hasher>(&self, hasher: &mut H) {
        self.state.hash(hasher);
    }
}

impl<M: Model<State: PartialEq>> PartialEq for Shown<M> {
    fn eq(&self, other: &Self) -> bool {
        self.state == other.state
    }
}

impl<M: Explain> fmt::Debug for Shown<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&view(&*self.model, &self.state))
    }
}

/// The domain view of `state`: one line per fact, in the order a trace lists them.
pub fn view<M: Explain>(model: &M, state: &M::State) -> String {
    model
        .facts(state)
        .iter()
        .map(|(key, value)| format!("{}: {value}\n", key.trim()))
        .collect()
}

/// What `action` does from `state`, in the domain's words, then the facts of the
/// state it reaches; `None` when the model refuses the action there.
pub fn step_view<M: Explain>(model: &M, state: &M::State, action: &M::Action) -> Option<String> {
    let (next, journal) = model.explain(state, action);
    let next = next?;
    let mut out = format!("{}\n", model.format_action(action));
    for line in journal {
        out.push_str(&format!("  > {line}\n"));
    }
    out.push('\n');
    out.push_str(&view(model, &next));
    Some(out)
}

/// Forwards property `I` of the wrapper to the wrapped model's.
fn forward<M: Explain, const I: usize>(wrapper: &Explored<M>, state: &Shown<M>) -> bool {
    (wrapper.properties[I].condition)(&wrapper.inner, &state.state)
}

type Forward<M> = fn(&Explored<M>, &Shown<M>) -> bool;

/// One forwarding function per property index: `Property` holds a plain `fn`, which
/// cannot capture which of the wrapped model's properties it stands for.
fn forwards<M: Explain>() -> [Forward<M>; MAX_PROPERTIES] {
    [
        forward::<M, 0>,
        forward::<M, 1>,
        forward::<M, 2>,
        forward::<M, 3>,
        forward::<M, 4>,
        forward::<M, 5>,
        forward::<M, 6>,
        forward::<M, 7>,
        forward::<M, 8>,
        forward::<M, 9>,
        forward::<M, 10>,
        forward::<M, 11>,
        forward::<M, 12>,
        forward::<M, 13>,
        forward::<M, 14>,
        forward::<M, 15>,
        forward::<M, 16>,
        forward::<M, 17>,
        forward::<M, 18>,
        forward::<M, 19>,
        forward::<M, 20>,
        forward::<M, 21>,
        forward::<M, 22>,
        forward::<M, 23>,
    ]
}

/// Checked as the model it shows, whose faults are its faults.
impl<M> crate::check::Checkable for Explored<M>
where
    M: crate::check::Checkable + Explain<State: Clone + PartialEq, Action: Clone + PartialEq>,
    M::State: Clone + fmt::Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
    Self: Clone + Send + Sync + 'static,
    Shown<M>: Clone + fmt::Debug + Hash + PartialEq + Send + Sync + 'static,
{
    fn is_fault(&self, action: &M::Action) -> bool {
        self.inner.is_fault(action)
    }
}

impl<M> Model for Explored<M>
where
    M: Explain<State: Clone + PartialEq, Action: Clone + PartialEq>,
{
    type State = Shown<M>;
    type Action = M::Action;

    fn init_states(&self) -> Vec<Shown<M>> {
        self.inner
            .init_states()
            .into_iter()
            .map(|s| self.show(s))
            .collect()
    }

    fn actions(&self, state: &Shown<M>, actions: &mut Vec<M::Action>) {
        self.inner.actions(&state.state, actions);
    }

    fn next_state(&self, last: &Shown<M>, action: M::Action) -> Option<Shown<M>> {
        self.inner
            .next_state(&last.state, action)
            .map(|s| self.show(s))
    }

    fn format_action(&self, action: &M::Action) -> String {
        self.inner.format_action(action)
    }

    fn format_step(&self, last: &Shown<M>, action: M::Action) -> Option<String> {
        step_view(&*self.inner, &last.state, &action)
    }

    fn as_svg(&self, path: Path<Shown<M>, M::Action>) -> Option<String> {
        let steps = path.into_vec();
        let first = steps.first()?.0.state.clone();
        let actions: Vec<M::Action> = steps.into_iter().filter_map(|(_, a)| a).collect();
        self.inner
            .as_svg(Path::from_actions(&*self.inner, first, actions.iter())?)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let forwards = forwards::<M>();
        self.properties
            .iter()
            .zip(forwards)
            .map(|(p, condition)| Property {
                expectation: p.expectation.clone(),
                name: p.name,
                condition,
            })
            .collect()
    }

    fn within_boundary(&self, state: &Shown<M>) -> bool {
        self.inner.within_boundary(&state.state)
    }
}

/// Serves stateright's Explorer for `model` on `address` and blocks. Each state
/// shows its facts, each step what happened in it, and each path a sequence diagram
/// of the actors and the store.
pub fn serve<M>(model: M, address: std::net::SocketAddr) -> Result<(), ExploreError>
where
    M: Explain<
            State: Clone + PartialEq + Hash + Send + Sync,
            Action: Clone + PartialEq + Send + Sync,
        > + Send
        + Sync
        + 'static,
{
    let explored = Explored::new(model)?;
    let _ = explored.checker().serve(address);
    Ok(())
}
