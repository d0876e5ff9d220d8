//! `leasehold balance`: which leases would a host take from an exported lease
//! container, and why.

use crate::snapshot::{CfpLease, Snapshot};
use leasehold_engine::balance::{CfpConfig, LeaseStatus, LeaseView, Plan, Strategy, TableView};
use leasehold_engine::lease::ConfigError;
use leasehold_engine::{HostId, LocalTime, Millis, Now, WallTime};
use serde::Serialize;
use thiserror::Error;

/// The question asked of a snapshot.
#[derive(Clone, Debug)]
pub struct Question {
    /// The strategy that decides.
    pub strategy: Strategy,
    /// The host asking.
    pub host: HostId,
    /// The moment the decision is made, on the asking host's wall clock.
    pub now: WallTime,
    /// CFP's lease expiration interval.
    pub expiration: Millis,
}

/// A question that cannot be asked.
#[derive(Debug, Error)]
pub enum QuestionError {
    /// The host name is empty or blank.
    #[error("--host must not be blank: CFP reads a blank owner as no owner")]
    BlankHost,
    /// CFP's bounds were given to another strategy.
    #[error("--min and --max are CFP's partition counts; they apply to --strategy cfp only")]
    BoundsWithoutCfp,
    /// The expiration is zero.
    #[error("--expiration must be above 0")]
    ZeroExpiration,
    /// No strategy has this name.
    #[error("unknown strategy; the strategies are cfp, handoff, eh-balanced, eh-greedy and kcl")]
    UnknownStrategy,
    /// The strategy's settings are inconsistent.
    #[error("{0}")]
    Config(#[from] ConfigError),
}

impl Question {
    /// Builds a question from command-line values, checking them.
    pub fn new(
        strategy: &str,
        host: &str,
        now: WallTime,
        expiration: Millis,
        min: u32,
        max: u32,
    ) -> Result<Question, QuestionError> {
        let host = HostId::from(host);
        if host.is_blank() {
            return Err(QuestionError::BlankHost);
        }
        if expiration == Millis::ZERO {
            return Err(QuestionError::ZeroExpiration);
        }
        let strategy = match strategy {
            "cfp" => Strategy::Cfp(CfpConfig {
                min_leases: min,
                max_leases: max,
            }),
            _ if min != 0 || max != 0 => return Err(QuestionError::BoundsWithoutCfp),
            other => Strategy::named(other).ok_or(QuestionError::UnknownStrategy)?,
        };
        strategy.validate()?;
        Ok(Question {
            strategy,
            host,
            now,
            expiration,
        })
    }
}

/// The answer, as printed: `{"take":[{"lease":..., "reason":...}]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The processor group decided for.
    pub prefix: String,
    /// Documents of the export that are not leases of the group, and were skipped.
    pub skipped: usize,
    /// The leases to take, in the order the strategy picked them.
    pub take: Vec<Take>,
}

/// One lease to take.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Take {
    /// The lease token.
    pub lease: String,
    /// Why, in words.
    pub reason: String,
}

/// Judges each lease as CFP does (blank owner: unowned; `timestamp + expiration <
/// now`: expired) and asks the strategy.
pub fn decide(snapshot: &Snapshot, question: &Question) -> Answer {
    let plan = plan(&snapshot.leases, question);
    let take = plan
        .takes()
        .map(|(lease, reason)| Take {
            lease: lease.to_string(),
            reason: reason.to_string(),
        })
        .collect();
    Answer {
        prefix: snapshot.prefix.clone(),
        skipped: snapshot.skipped,
        take,
    }
}

/// The strategy's full plan for the snapshot.
pub fn plan(leases: &[CfpLease], question: &Question) -> Plan {
    let view = TableView {
        leases: leases
            .iter()
            .map(|lease| LeaseView {
                token: lease.token.clone(),
                owner: lease.owner.clone(),
                status: match &lease.owner {
                    None => LeaseStatus::Unowned,
                    Some(_) if lease.timestamp + question.expiration < question.now => {
                        LeaseStatus::Expired
                    }
                    Some(_) => LeaseStatus::Held,
                },
                claimants: Vec::new(),
            })
            .collect(),
        // A CFP export has no heartbeats: the live hosts are the owners of live leases.
        members: Vec::new(),
        now: Now::new(LocalTime::ZERO, question.now),
    };
    question.strategy.plan(&view, &question.host)
}
