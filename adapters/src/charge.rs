//! Request-unit accounting, by kind of store operation.

use leasehold_engine::store::Op;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A kind of store operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// Create if absent.
    Create,
    /// Point read.
    Read,
    /// Read every document of a prefix (a query).
    ReadAll,
    /// A selective read of one partition key (a filtered, ordered, limited query).
    Query,
    /// Replace, usually if-match.
    Replace,
    /// Delete, usually if-match.
    Delete,
    /// Transactional batch.
    Batch,
}

impl OpKind {
    /// Every kind, in report order.
    pub const ALL: [OpKind; 7] = [
        OpKind::Create,
        OpKind::Read,
        OpKind::ReadAll,
        OpKind::Query,
        OpKind::Replace,
        OpKind::Delete,
        OpKind::Batch,
    ];

    /// The kind of `op`.
    pub fn of<D>(op: &Op<D>) -> OpKind {
        match op {
            Op::Create(_) => OpKind::Create,
            Op::Read { .. } => OpKind::Read,
            Op::ReadAll { .. } => OpKind::ReadAll,
            Op::Query(_) => OpKind::Query,
            Op::Replace { .. } => OpKind::Replace,
            Op::Delete { .. } => OpKind::Delete,
            Op::Batch { .. } => OpKind::Batch,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Create => "create",
            OpKind::Read => "read",
            OpKind::ReadAll => "read-all",
            OpKind::Query => "query",
            OpKind::Replace => "replace",
            OpKind::Delete => "delete",
            OpKind::Batch => "batch",
        })
    }
}

/// Calls and request units, by [`OpKind`]; shared by every clone of a store.
///
/// ```
/// use leasehold_adapters::{Charges, OpKind};
/// let charges = Charges::default();
/// charges.record(OpKind::Replace, 10.5);
/// assert_eq!(charges.calls(OpKind::Replace), 1);
/// assert_eq!(charges.units(OpKind::Replace), 10.5);
/// ```
#[derive(Debug, Default)]
pub struct Charges {
    calls: [AtomicU64; OpKind::ALL.len()],
    // Milli-RU: Cosmos DB reports charges to two decimals.
    milli: [AtomicU64; OpKind::ALL.len()],
}

impl Charges {
    /// Records one call of `kind` that cost `units`.
    pub fn record(&self, kind: OpKind, units: f64) {
        let i = kind as usize;
        self.calls[i].fetch_add(1, Ordering::Relaxed);
        let milli = (units.max(0.0) * 1_000.0).round() as u64;
        self.milli[i].fetch_add(milli, Ordering::Relaxed);
    }

    /// Calls of `kind` so far.
    pub fn calls(&self, kind: OpKind) -> u64 {
        self.calls[kind as usize].load(Ordering::Relaxed)
    }

    /// Request units spent on `kind` so far.
    pub fn units(&self, kind: OpKind) -> f64 {
        self.milli[kind as usize].load(Ordering::Relaxed) as f64 / 1_000.0
    }

    /// Request units spent on everything so far.
    pub fn total_units(&self) -> f64 {
        OpKind::ALL.iter().map(|&k| self.units(k)).sum()
    }
}
