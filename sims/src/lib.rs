//! The `leasehold` command line and, with the simulator issue, the deterministic
//! simulator.
//!
//! - [`snapshot`]: reads lease containers exported from a change feed processor.
//! - [`balance`]: answers "which leases would this host take, and why".
//! - [`check`]: model-checks the partition-lease protocol and explains counterexamples.
//! - [`interrupt`]: what Ctrl-C does to a long command.
//! - [`defaults`]: the defaults `--help` shows, read from the settings the commands run with.

pub mod balance;
pub mod check;
pub mod defaults;
pub mod interrupt;
pub mod sim;
pub mod snapshot;
