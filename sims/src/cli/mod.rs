//! The `leasehold` command line, above the library it runs: its flags, the
//! defaults its help shows, the reports of `check` and `explore`, the runners of
//! `sim`, and Ctrl-C. Nothing below (`sim`, `balance`, `snapshot`) uses it.

pub mod args;
pub mod check;
pub mod defaults;
pub mod interrupt;
pub mod queue;
pub mod sim;
