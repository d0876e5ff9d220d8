//! The I/O shell around the leasehold engine: the async [`Store`] trait with its
//! in-memory and Cosmos DB implementations, partition sources (a generic trait and the
//! Cosmos DB change feed), and the tokio [`Processor`] that drives the engine's
//! partition-lease host with real time, a store and your handler.
//!
//! Nothing here decides anything about leases: every decision is the engine's
//! (`leasehold_engine::lease::LeaseHost`), the same code the model checker and the
//! simulator drive.
//!
//! ```
//! use leasehold_adapters::{MemoryFeed, MemoryStore, Processor};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let feed = MemoryFeed::new(["0", "1"]);
//! feed.push("0", "hello");
//! let processor = Processor::builder()
//!     .instance("host-a")
//!     .processor_name("orders")
//!     .source(feed.clone())
//!     .store(MemoryStore::new())
//!     .handler(|ctx, batch| async move {
//!         println!("{} items at epoch {:?}", batch.items.len(), ctx.epoch());
//!         Ok(batch.checkpoint)
//!     })
//!     .build()
//!     .await?;
//! let stop = processor.cancellation();
//! let run = tokio::spawn(processor.run());
//! stop.cancel();
//! run.await??;
//! # Ok(())
//! # }
//! ```

mod charge;
mod claim;
mod clock;
pub mod cosmos;
mod drive;
mod exchange;
mod item_lease;
mod memory;
mod queue;
pub mod runtime;
pub mod source;
mod store;

pub use charge::{Charges, OpKind};
pub use claim::{ClaimError, ClaimStore, MemoryClaims};
pub use clock::Clock;
pub use cosmos::{Account, AccountError, AccountFacts, Consistency, CosmosStore};
pub use item_lease::{ItemLeaseClient, ItemLeaseClientError};
pub use leasehold_engine as engine;
pub use memory::MemoryStore;
pub use queue::{Dequeued, Enqueued, QueueClient, QueueClientError, Swept};
pub use runtime::{
    BuildError, Estimate, EstimateError, Estimator, Handler, HandlerError, LeaseContext, LeaseLag,
    Metrics, MetricsSnapshot, Processor, ProcessorBuilder, RunError,
};
pub use source::{Backlog, Batch, MemoryFeed, PartitionSource, SourceError};
pub use store::{ContainerError, Response, Store};
