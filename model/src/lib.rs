//! Stateright models of the leasehold engine.
//!
//! The models drive the engine's own state machines (there is no second
//! implementation) under crashes, clock skew, drift and every interleaving of store
//! requests. They arrive with the model-checking issue; this crate exists so that the
//! workspace has its final shape.

pub use leasehold_engine as engine;
