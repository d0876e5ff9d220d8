//! The I/O shell around the leasehold engine: the async store trait, the in-memory
//! and Cosmos DB stores, and the tokio runtime. They arrive with the production-path
//! issue; this crate exists so that the workspace has its final shape.

pub use leasehold_engine as engine;
