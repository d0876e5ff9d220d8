//! Ctrl-C during a long `check` or `swarm`: the work stops, reports what it has done,
//! and the process exits 130 (128 + SIGINT), as shells expect of an interrupted
//! command.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

/// The exit code of an interrupted command.
pub const EXIT: u8 = 130;

/// The flag Ctrl-C sets, its handler installed on first use. If no handler can be
/// installed (one already is), the flag is never set and Ctrl-C kills the process
/// as before.
///
/// ```
/// use std::sync::atomic::Ordering;
/// let flag = leasehold_sims::cli::interrupt::flag();
/// assert!(!flag.load(Ordering::Relaxed));
/// ```
pub fn flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        let _ = ctrlc::set_handler(move || {
            set.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        flag
    })
    .clone()
}
