//! Why a simulated run cannot be set up. Its own module, below the configuration and
//! the flag parsers that both report it, so that neither depends on the other for it.

use leasehold_engine::balance::UnknownStrategy;
use leasehold_engine::lease::{ConfigError, UnknownLiveness};

/// A run that cannot be set up.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimError {
    /// No such scenario.
    #[error(
        "unknown scenario {0:?}; the scenarios are steady, scale-out, scale-in, rolling-restart, crash, flapping-host, skewed-clocks, throttled-store, hot-partition, queue, queue-crash, queue-poison, swarm"
    )]
    UnknownScenario(String),
    /// No such strategy.
    #[error(transparent)]
    UnknownStrategy(#[from] UnknownStrategy),
    /// A liveness name that does not exist.
    #[error(transparent)]
    Liveness(#[from] UnknownLiveness),
    /// A size or interval out of range.
    #[error("{0}")]
    Size(&'static str),
    /// The lease settings are refused by the engine.
    #[error("invalid lease settings: {0}")]
    Lease(ConfigError),
    /// A `--faults` list that cannot be read.
    #[error("{0}")]
    Faults(String),
    /// No such known-bad variant.
    #[error("{0}")]
    UnknownBug(String),
    /// An output file that cannot be written.
    #[error("{0}")]
    Output(String),
    /// A queue run's settings are refused.
    #[error("{0}")]
    Queue(String),
    /// A flag that does not apply to the scenario.
    #[error("{flag} does not apply to {scenario}")]
    NotApplicable {
        /// The flag.
        flag: String,
        /// The scenario.
        scenario: String,
    },
    /// A setting the run's configuration refuses: a value its flag cannot take.
    #[error("{0}")]
    Setting(String),
    /// A `--seeds` range that cannot be read.
    #[error("--seeds {0:?}: write a range such as 0..500 (end excluded)")]
    Seeds(String),
}
