//! Balancing strategies: pure functions from a view of the lease table to the leases
//! a host should take, claim or hand over.
//!
//! ```
//! use leasehold_engine::balance::{CfpConfig, LeaseStatus, LeaseView, Strategy, TableView};
//! use leasehold_engine::{HostId, LeaseToken, Now};
//!
//! let lease = |token: &str, owner: Option<&str>, status| LeaseView {
//!     token: LeaseToken::from(token),
//!     owner: owner.map(HostId::from),
//!     status,
//!     claimants: vec![],
//! };
//! let view = TableView {
//!     leases: vec![
//!         lease("1", Some("a"), LeaseStatus::Held),
//!         lease("2", Some("a"), LeaseStatus::Held),
//!         lease("3", None, LeaseStatus::Unowned),
//!     ],
//!     members: vec![],
//!     now: Now::default(),
//! };
//! let plan = Strategy::Cfp(CfpConfig::default()).plan(&view, &HostId::from("b"));
//! let taken: Vec<String> = plan.takes().map(|(lease, why)| format!("{lease}: {why}")).collect();
//! assert_eq!(taken, ["3: unowned"]);
//! ```

mod cfp;
mod eventhubs;
mod handoff;

pub(crate) use handoff::ranked_targets;
mod kcl;

use crate::ids::{HostId, LeaseToken};
use crate::lease::ConfigError;
use crate::time::Now;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How one host sees one lease when it plans.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseView {
    /// The partition.
    pub token: LeaseToken,
    /// The recorded owner, if any.
    pub owner: Option<HostId>,
    /// Whether the lease is free, expired or held, by the planning host's expiry rule.
    pub status: LeaseStatus,
    /// Live hosts that claim the lease for a handoff, sorted by id.
    pub claimants: Vec<HostId>,
}

/// A lease's state as the planning host judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseStatus {
    /// No owner.
    Unowned,
    /// Owned, but the owner stopped renewing long enough that anyone may take it.
    Expired,
    /// Owned and live.
    Held,
}

/// A snapshot of the lease table, as one host sees it at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableView {
    /// Every lease, in the store's listing order.
    pub leases: Vec<LeaseView>,
    /// Hosts known to be alive through their heartbeats (the planner need not be one).
    pub members: Vec<HostId>,
    /// When the snapshot was judged; strategies may use it for time-based hysteresis.
    pub now: Now,
}

/// Why a host takes or claims a lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The lease has no owner.
    Unowned,
    /// The owner stopped renewing.
    Expired {
        /// The owner that stopped.
        owner: HostId,
    },
    /// Taken from a live owner to even out the load (CFP). The taker waits out the
    /// victim's authority before processing.
    Steal {
        /// The victim.
        from: HostId,
        /// The victim's lease count.
        count: usize,
        /// The per-host target.
        target: usize,
        /// How many leases the taker still needs.
        need: usize,
    },
    /// Claimed from an over-target owner, which hands it over cooperatively.
    Handoff {
        /// The owner.
        from: HostId,
        /// The owner's lease count.
        count: usize,
        /// The owner's target.
        target: usize,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Unowned => f.write_str("unowned"),
            Reason::Expired { .. } => f.write_str("expired"),
            Reason::Steal {
                from,
                count,
                target,
                need,
            } => {
                if *need > 1 {
                    write!(f, "steal from {from} ({count} >= target {target})")
                } else {
                    write!(f, "steal from {from} ({count} > target {target})")
                }
            }
            Reason::Handoff {
                from,
                count,
                target,
            } => write!(f, "handoff from {from} ({count} > target {target})"),
        }
    }
}

/// One step a plan asks the planning host to make.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Acquire the lease now.
    Take {
        /// The lease.
        lease: LeaseToken,
        /// Why.
        reason: Reason,
    },
    /// Claim the lease (in the planner's heartbeat), so that its owner hands it over.
    /// A plan lists every claim the planner should hold; claims it no longer lists
    /// are withdrawn.
    Claim {
        /// The lease.
        lease: LeaseToken,
        /// Why.
        reason: Reason,
    },
    /// Hand one of the planner's own leases over to the host that claimed it.
    Release {
        /// The lease.
        lease: LeaseToken,
        /// The claimant.
        to: HostId,
    },
}

/// What a strategy decided, in the order it decided it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The actions, in order.
    pub actions: Vec<Action>,
}

impl Plan {
    /// The leases the planner would take or claim, with the reason, in order.
    pub fn takes(&self) -> impl Iterator<Item = (&LeaseToken, &Reason)> {
        self.actions.iter().filter_map(|action| match action {
            Action::Take { lease, reason } | Action::Claim { lease, reason } => {
                Some((lease, reason))
            }
            _ => None,
        })
    }
}

/// CFP's partition count bounds. Zero means unset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CfpConfig {
    /// A host always aims for at least this many leases.
    pub min_leases: u32,
    /// A host never aims for more than this many leases.
    pub max_leases: u32,
}

/// The Kinesis Client Library's lease-taker settings. Zero means the library's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KclConfig {
    /// `maxLeasesForWorker`: a cap on the target (default: none).
    pub max_leases_for_worker: u32,
    /// `maxLeasesToStealAtOneTime` (default 1).
    pub max_leases_to_steal_at_one_time: u32,
}

/// A balancing strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Strategy {
    /// The .NET change feed processor's `EqualPartitionsBalancingStrategy`: one steal
    /// per cycle, membership inferred from lease owners.
    Cfp(CfpConfig),
    /// Ours: heartbeat membership, floor/ceil targets, minimum moves in one cycle, and
    /// cooperative handoff instead of steals.
    #[default]
    Handoff,
    /// A baseline: the Event Hubs processor's balanced mode, one claim per cycle.
    EventHubsBalanced,
    /// A baseline: the Event Hubs processor's greedy mode, every claim it is allowed in
    /// one cycle.
    EventHubsGreedy,
    /// A baseline: the Kinesis Client Library 2.x lease taker.
    Kcl(KclConfig),
}

/// The name of a strategy: [`Strategy::name`]. Its settings (CFP's bounds, KCL's
/// limits) are not part of the name.
impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses one of [`STRATEGY_NAMES`], with default settings.
///
/// ```
/// use leasehold_engine::balance::Strategy;
/// assert_eq!("cfp".parse::<Strategy>(), Ok(Strategy::CFP));
/// assert_eq!(Strategy::Handoff.to_string(), "handoff");
/// let refused = "round-robin".parse::<Strategy>().unwrap_err();
/// assert!(refused.to_string().contains("cfp, handoff, eh-balanced, eh-greedy, kcl"));
/// ```
impl std::str::FromStr for Strategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Strategy, UnknownStrategy> {
        Strategy::named(s).ok_or_else(|| UnknownStrategy(s.to_string()))
    }
}

/// A strategy name that does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownStrategy(pub String);

impl fmt::Display for UnknownStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown strategy {:?}; the strategies are {}",
            self.0,
            STRATEGY_NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownStrategy {}

/// Every strategy's name on the command line, in the order reports list them.
pub const STRATEGY_NAMES: [&str; 5] = ["cfp", "handoff", "eh-balanced", "eh-greedy", "kcl"];

impl Strategy {
    /// Decides what host `me` should do about `view`.
    pub fn plan(&self, view: &TableView, me: &HostId) -> Plan {
        match self {
            Strategy::Cfp(config) => cfp::plan(config, view, me),
            Strategy::Handoff => handoff::plan(view, me),
            Strategy::EventHubsBalanced => eventhubs::plan(eventhubs::Mode::Balanced, view, me),
            Strategy::EventHubsGreedy => eventhubs::plan(eventhubs::Mode::Greedy, view, me),
            Strategy::Kcl(config) => kcl::plan(config, view, me),
        }
    }

    /// The strategy named `name` (one of [`STRATEGY_NAMES`]) with default settings.
    ///
    /// ```
    /// use leasehold_engine::balance::Strategy;
    /// assert_eq!(Strategy::named("kcl").map(|s| s.name()), Some("kcl"));
    /// assert!(Strategy::named("round-robin").is_none());
    /// ```
    pub fn named(name: &str) -> Option<Strategy> {
        Some(match name {
            "cfp" => Strategy::Cfp(CfpConfig::default()),
            "handoff" => Strategy::Handoff,
            "eh-balanced" => Strategy::EventHubsBalanced,
            "eh-greedy" => Strategy::EventHubsGreedy,
            "kcl" => Strategy::Kcl(KclConfig::default()),
            _ => return None,
        })
    }

    /// The change feed processor's strategy with its default settings.
    pub const CFP: Strategy = Strategy::Cfp(CfpConfig {
        min_leases: 0,
        max_leases: 0,
    });

    /// The Kinesis Client Library's lease taker with its default settings.
    pub const KCL: Strategy = Strategy::Kcl(KclConfig {
        max_leases_for_worker: 0,
        max_leases_to_steal_at_one_time: 0,
    });

    /// One line on where the strategy comes from, for help texts.
    pub fn about(&self) -> &'static str {
        match self {
            Strategy::Cfp(_) => "the .NET change feed processor's EqualPartitionsBalancingStrategy",
            Strategy::Handoff => "leasehold's cooperative handoff",
            Strategy::EventHubsBalanced => {
                "the Event Hubs processor's balanced mode: one claim per cycle"
            }
            Strategy::EventHubsGreedy => {
                "the Event Hubs processor's greedy mode: every allowed claim in one cycle"
            }
            Strategy::Kcl(_) => "the Kinesis Client Library 2.x lease taker",
        }
    }

    /// Whether hosts running this strategy must publish heartbeats.
    pub fn needs_membership(&self) -> bool {
        matches!(self, Strategy::Handoff)
    }

    /// The strategy's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Cfp(_) => "cfp",
            Strategy::Handoff => "handoff",
            Strategy::EventHubsBalanced => "eh-balanced",
            Strategy::EventHubsGreedy => "eh-greedy",
            Strategy::Kcl(_) => "kcl",
        }
    }

    /// Checks the strategy's own settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Strategy::Cfp(CfpConfig {
                min_leases,
                max_leases,
            }) if *min_leases > 0 && *max_leases > 0 && min_leases > max_leases => {
                Err(ConfigError::MinAboveMax {
                    min: *min_leases,
                    max: *max_leases,
                })
            }
            _ => Ok(()),
        }
    }
}

/// A per-host order over leases, standing in for the random choices of the peers'
/// balancers: hosts that plan on the same view pick different leases, as with a random
/// generator, but the engine stays a function of its inputs.
fn scatter(me: &HostId, lease: &LeaseToken) -> u64 {
    spread(me.as_str(), lease.as_str())
}

/// A well-mixed hash of two strings, the same on every machine and run: what the
/// engine uses where a peer would draw a random number.
pub(crate) fn spread(a: &str, b: &str) -> u64 {
    // FNV-1a over both ids, then splitmix64's finaliser so that ids differing only in a
    // last character land far apart.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.bytes().chain([0xff]).chain(b.bytes()) {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Takes a lease that is free: unowned (or with a blank owner), or expired. The same
/// rule for CFP and the peers, which all read a blank owner as none.
fn take_free(lease: &LeaseView) -> Action {
    Action::Take {
        lease: lease.token.clone(),
        reason: match &lease.owner {
            Some(owner) if !owner.is_blank() => Reason::Expired {
                owner: owner.clone(),
            },
            _ => Reason::Unowned,
        },
    }
}

/// A lease of `owner` (held) or of nobody, for the strategies' unit tests.
#[cfg(test)]
fn test_lease(token: &str, owner: Option<&str>) -> LeaseView {
    LeaseView {
        token: LeaseToken::from(token),
        owner: owner.map(HostId::from),
        status: if owner.is_some() {
            LeaseStatus::Held
        } else {
            LeaseStatus::Unowned
        },
        claimants: vec![],
    }
}

/// The first `n` of `candidates` (indices into `view.leases`) in [`scatter`] order,
/// hashing each once and sorting only the ones picked: the candidate list can be the
/// whole table.
fn pick(view: &TableView, me: &HostId, candidates: &[usize], n: usize) -> Vec<usize> {
    let mut keyed: Vec<(u64, usize)> = candidates
        .iter()
        .map(|&li| (scatter(me, &view.leases[li].token), li))
        .collect();
    if n == 0 {
        return Vec::new();
    }
    if n < keyed.len() {
        keyed.select_nth_unstable(n - 1);
        keyed.truncate(n);
    }
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, li)| li).collect()
}
