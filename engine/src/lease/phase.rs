//! Where a host is in its life: running, shutting down gracefully, or finished.

/// A host's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    Running,
    ShuttingDown,
    Finished,
}
