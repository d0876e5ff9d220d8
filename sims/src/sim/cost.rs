//! Estimated request units (RU) of store requests.
//!
//! These are estimates for ~1 KB documents with default indexing, in the ranges Azure
//! Cosmos DB documents (a point read of 1 KB costs 1 RU; writes cost several). The
//! adapters record the real charge of every call; until a run against the emulator
//! calibrates them, the simulator's RU figures compare strategies, not bills.

use leasehold_engine::store::{Op, Reply, StoreError};

/// What a request is, for costing; taken before the store consumes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A point read.
    Read,
    /// A prefix query.
    ReadAll,
    /// A selective read of one partition key.
    Query,
    /// A create.
    Create,
    /// A replace.
    Replace,
    /// A delete.
    Delete,
    /// A transactional batch of this many operations.
    Batch(usize),
}

impl Kind {
    /// The kind of `op`.
    pub fn of<D>(op: &Op<D>) -> Kind {
        match op {
            Op::Read { .. } => Kind::Read,
            Op::ReadAll { .. } => Kind::ReadAll,
            Op::Query(_) => Kind::Query,
            Op::Create(_) => Kind::Create,
            Op::Replace { .. } => Kind::Replace,
            Op::Delete { .. } => Kind::Delete,
            Op::Batch { ops, .. } => Kind::Batch(ops.len()),
        }
    }
}

/// The estimated charge of a request of `kind` that got `result`.
pub fn request_units<D>(kind: Kind, result: &Result<Reply<D>, StoreError>) -> f64 {
    match (kind, result) {
        (_, Err(StoreError::Throttled { .. })) => 0.0,
        // A refused precondition, a missing document or a conflict is charged like a read.
        (_, Err(_)) => 1.0,
        (Kind::Read, Ok(_)) => 1.0,
        (Kind::ReadAll, Ok(Reply::ReadAll(docs))) => 2.5 + 0.35 * docs.len() as f64,
        (Kind::ReadAll, Ok(_)) => 2.5,
        // Charged like a prefix read: the emulator charges a query a flat 1 RU per page
        // (tests/cosmos_query.rs), so it cannot calibrate the share per document.
        (Kind::Query, Ok(Reply::Query(docs))) => 2.5 + 0.35 * docs.len() as f64,
        (Kind::Query, Ok(_)) => 2.5,
        (Kind::Create, Ok(_)) => 6.5,
        (Kind::Replace, Ok(_)) => 10.5,
        (Kind::Delete, Ok(_)) => 6.5,
        (Kind::Batch(n), Ok(_)) => 10.5 * n as f64,
    }
}
