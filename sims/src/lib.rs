//! The `leasehold` command line and the deterministic simulator.
//!
//! - [`snapshot`]: reads lease containers exported from a change feed processor.
//! - [`balance`]: answers "which leases would this host take, and why".
//! - [`sim`]: the deterministic simulator.
//! - [`cli`]: the command line above them: its flags, the defaults `--help` shows,
//!   the reports of `check` and `explore` ([`cli::check`]), and what Ctrl-C does to a
//!   long command ([`cli::interrupt`]).

pub mod balance;
pub mod cli;
pub mod sim;
pub mod snapshot;
