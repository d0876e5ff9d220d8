//! Readable traces: numbered steps, each listing only what changed.

use std::collections::BTreeMap;
use std::fmt::Write;

/// What a trace needs of a model: what happens inside a step, and the facts of a
/// state, keyed so that steps can print only what changed.
pub trait Explain: stateright::Model<Action: std::fmt::Debug> {
    /// Takes `action` from `state`, telling what happened inside the step.
    fn explain(
        &self,
        state: &Self::State,
        action: &Self::Action,
    ) -> (Option<Self::State>, Vec<String>);
    /// Every fact shown in a trace.
    fn facts(&self, state: &Self::State) -> BTreeMap<String, String>;
    /// The actors' names, one lifeline each in a sequence diagram (`h0`, `c1`).
    fn lanes(&self) -> Vec<String>;
    /// Whose lifeline `action` is drawn on.
    fn lane(&self, action: &Self::Action) -> Lane;
}

/// Where a step is drawn in a sequence diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// An actor acts: it steps, its held request is served, it restarts.
    Actor(u8),
    /// An actor crashes.
    Crash(u8),
    /// Time passes for everyone.
    Time,
}

/// Renders a path as numbered steps listing only what changed.
pub fn render<M: Explain>(model: &M, path: &[(M::State, Option<M::Action>)]) -> String {
    let mut out = String::new();
    let Some((first, _)) = path.first() else {
        return out;
    };
    let mut shown = model.facts(first);
    let _ = writeln!(out, "  0. start");
    for (key, value) in &shown {
        let _ = writeln!(out, "       {}: {value}", key.trim());
    }
    for (i, window) in path.windows(2).enumerate() {
        let (before, action) = &window[0];
        let (after, _) = &window[1];
        let Some(action) = action else { continue };
        let _ = writeln!(out, "{:3}. {}", i + 1, model.format_action(action));
        let (_, journal) = model.explain(before, action);
        for line in journal {
            let _ = writeln!(out, "       > {line}");
        }
        let now = model.facts(after);
        for (key, value) in &now {
            if shown.get(key) != Some(value) {
                let _ = writeln!(out, "       {}: {value}", key.trim());
            }
        }
        for key in shown.keys() {
            if !now.contains_key(key) {
                let _ = writeln!(out, "       {}: forgotten", key.trim());
            }
        }
        shown = now;
    }
    out
}

/// A reading of a local clock in a trace: seconds, to a tenth.
pub(crate) fn seconds(t: leasehold_engine::LocalTime) -> String {
    format!("{:.1} s", t.as_millis() as f64 / 1000.0)
}
