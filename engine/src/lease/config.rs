//! The settings of a partition-lease host, and their validation.

use crate::balance::Strategy;
use crate::expiry::ExpiryPolicy;
use crate::ids::{HostId, LeaseToken};
use crate::time::{Drift, Millis};
use std::fmt;

/// The settings of a partition-lease host. The defaults are the change feed
/// processor's intervals (acquire 13 s, renew 17 s, expiration 60 s), the `observed`
/// expiry rule and the `handoff` strategy.
///
/// ```
/// use leasehold_engine::lease::{ConfigError, LeaseConfig};
/// use leasehold_engine::Millis;
///
/// let mut config = LeaseConfig::default();
/// assert!(config.validate().is_ok());
/// config.renew_interval = Millis::from_secs(90);
/// assert!(matches!(config.validate(), Err(ConfigError::RenewNotBelowExpiration { .. })));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseConfig {
    /// The processor group's prefix; every document id of the group starts with it.
    pub prefix: String,
    /// Partitions whose leases a host creates if they are missing.
    pub partitions: Vec<LeaseToken>,
    /// Lease duration, expiry rule, drift bound and safety margin.
    pub expiry: ExpiryPolicy,
    /// How often an owner renews each lease it holds.
    pub renew_interval: Millis,
    /// How often a host reads the lease table and rebalances.
    pub acquire_interval: Millis,
    /// The balancing strategy.
    pub strategy: Strategy,
    /// Where a holder's authority comes from; `None` is the strategy's default. See
    /// [`liveness`](Self::liveness).
    pub liveness: Option<Liveness>,
    /// Under session liveness, how often the group as a whole reads the entire
    /// lease table to catch anything the heartbeats did not tell (each host audits
    /// once per this interval times the group's size). Default 5 minutes.
    pub audit_interval: Millis,
    /// How long a lost session may take to report [`Stopped`](super::Input::Stopped)
    /// while this host still owns the lease (its authority came back, say). Past it,
    /// the host gives the lease up, raising its epoch, so that a handler call that
    /// never ends cannot wedge the lease. Defaults to the lease duration.
    pub stop_timeout: Millis,
    /// When a checkpoint the handler reports is written: after every batch (the
    /// default), at most once per interval, or at most once per so many items. See
    /// [`CheckpointPolicy`].
    pub checkpoint: CheckpointPolicy,
    /// How long a host that is told to shut down keeps processing after it marks its
    /// heartbeat as leaving, before it releases its leases; `None` is the default,
    /// see [`leave_notice`](Self::leave_notice). `Some(Millis::ZERO)` releases at
    /// once, as every host did before.
    pub leave_notice: Option<Millis>,
    /// A known-bad behaviour, for the model checker and the simulator to show what
    /// it breaks. Never set it in production.
    #[doc(hidden)]
    pub known_bad: Option<KnownBad>,
}

/// When the host writes the checkpoints its handler reports.
///
/// Checkpoints are most of what a busy processor pays for: one write per batch. An
/// interval trades them for replay: a new owner starts from the last checkpoint
/// written, so it may deliver again what the handler finished in up to one interval
/// before the lease moved. A checkpoint still rides along on every other write of the
/// lease at once (a renewal, a release, a handoff, a split's mark), so a lease handed
/// on or released gracefully replays nothing; only a crash or a lost lease does.
///
/// # The replay bound
/// A new owner starts from the newest checkpoint that landed, so it delivers again
/// what the handler reported after that. What the policy holds back is the *lag*: the
/// items reported but not yet sent while the lease has no write in flight. It is
/// none under [`EveryBatch`](Self::EveryBatch), fewer than `n` items under
/// [`AtMostEveryItems(n)`](Self::AtMostEveryItems), and what was reported within the
/// last interval under [`AtMostEvery`](Self::AtMostEvery). On top of the lag, the one
/// write a lease has in flight at a time may fail to land: what it carried and what
/// was reported while it flew (until its answer or the request timeout) are delivered
/// again too, under every policy. The model checker and the simulator check the lag.
///
/// ```
/// use leasehold_engine::lease::{CheckpointPolicy, ConfigError, LeaseConfig};
/// use leasehold_engine::Millis;
///
/// let mut config = LeaseConfig {
///     checkpoint: CheckpointPolicy::AtMostEvery(Millis::from_secs(5)),
///     ..LeaseConfig::default()
/// };
/// assert!(config.validate().is_ok());
/// config.checkpoint = CheckpointPolicy::AtMostEvery(Millis::ZERO);
/// assert_eq!(config.validate(), Err(ConfigError::ZeroCheckpointInterval));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CheckpointPolicy {
    /// Every checkpoint reported is written as soon as the lease has no write in
    /// flight: the .NET change feed processor's behaviour.
    #[default]
    EveryBatch,
    /// The first checkpoint of an ownership is written at once, each later one no
    /// sooner than this long after the previous write that carried one; the newest
    /// report wins.
    AtMostEvery(Millis),
    /// A checkpoint goes once the handler has reported this many items since the last
    /// write that carried one (the items named by [`Input::Checkpoint`]); the newest
    /// report wins.
    ///
    /// [`Input::Checkpoint`]: super::Input::Checkpoint
    AtMostEveryItems(u32),
}

impl CheckpointPolicy {
    /// The lag the policy allows, in items: how many reported items may wait unsent
    /// while the lease has no write in flight (none after every batch, fewer than `n`
    /// under a count). `None` under an interval, whose bound is a time. The model
    /// checker and the simulator check replays against it.
    ///
    /// ```
    /// use leasehold_engine::lease::CheckpointPolicy;
    /// use leasehold_engine::Millis;
    ///
    /// assert_eq!(CheckpointPolicy::EveryBatch.lag_allowance(), Some(0));
    /// assert_eq!(CheckpointPolicy::AtMostEveryItems(8).lag_allowance(), Some(7));
    /// assert_eq!(CheckpointPolicy::AtMostEvery(Millis::from_secs(5)).lag_allowance(), None);
    /// ```
    pub fn lag_allowance(self) -> Option<u32> {
        match self {
            CheckpointPolicy::EveryBatch => Some(0),
            CheckpointPolicy::AtMostEveryItems(n) => Some(n.saturating_sub(1)),
            CheckpointPolicy::AtMostEvery(_) => None,
        }
    }

    /// The lag the policy allows in time, on the holder's clock: how long a reported
    /// checkpoint may wait unsent while the lease has no write in flight. `None` under
    /// every batch and a count, whose bound is in items. The simulator checks replays
    /// against it.
    ///
    /// ```
    /// use leasehold_engine::lease::CheckpointPolicy;
    /// use leasehold_engine::Millis;
    ///
    /// let every = CheckpointPolicy::AtMostEvery(Millis::from_secs(5));
    /// assert_eq!(every.lag_window(), Some(Millis::from_secs(5)));
    /// assert_eq!(CheckpointPolicy::AtMostEveryItems(8).lag_window(), None);
    /// ```
    pub fn lag_window(self) -> Option<Millis> {
        match self {
            CheckpointPolicy::AtMostEvery(every) => Some(every),
            CheckpointPolicy::EveryBatch | CheckpointPolicy::AtMostEveryItems(_) => None,
        }
    }
}

/// Earlier behaviours of the lease host, kept only so that the checkers can reproduce
/// the defects they had (the model's `--bug NAME`, with [`KnownBad::name`]). They are
/// the host's own lifecycle and reading of its answers, which no driver or network
/// can fake, so the switch is the engine's. Production leaves
/// `LeaseConfig::known_bad` unset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KnownBad {
    /// A lost session is forgotten at once, its call left running, and the lease
    /// restarts at the same epoch once a renewal succeeds.
    RestartSameEpoch,
    /// Under session liveness, a dead host's leases are taken without first fencing
    /// its session, so a renewal it had in flight can keep it processing.
    UnfencedTakeover,
    /// A split range's lease is deleted before its children's leases are created, so
    /// a crash or a failed create in between loses the range's checkpoint.
    DeleteParentFirst,
    /// A split range's lease is deleted once its children's leases exist, as the
    /// change feed processor does, instead of being kept as a finished split: its id
    /// can then be created again (by a late or repeated create, or a host whose view
    /// lacks the lineage), and a late read can bring it back into a host's view.
    DeleteSplitLease,
    /// Under session liveness, a take answered after the tenure it named ended keeps
    /// the lease as it is, named after that tenure, instead of resuming it in the
    /// next: nobody processes it for good (the swarm's rolling-restart seed 20293).
    TakeKeepsEndedTenure,
    /// Under session liveness, a resume of this host's that landed in a tenure since
    /// ended counts as done: the lease stays named after the ended tenure, processed
    /// by nobody (the swarm's rolling-restart seed 36321).
    ResumeKeepsEndedTenure,
    /// Under session liveness, a lease is judged free when its owner's heartbeat,
    /// read after this version of the lease was learned, shows another tenure. At
    /// Session consistency that read may describe an older heartbeat than the lease
    /// implies, so a live tenure is judged over.
    TenureByReadOrder,
    /// Under session liveness, a heartbeat that shows an earlier tenure than a lease
    /// names is waited on until a later read of it shows more. A fencer whose view of
    /// the lease was old can leave it so for good, and the lease is processed by
    /// nobody (the swarm's rolling-restart seed 951625).
    EarlierTenureWaits,
    /// Under session liveness, the lease counts the heartbeats publish are not
    /// compared with the host's view of the table: a host whose read of the table
    /// missed a lease its peers' plans give to it never takes it, until its audit
    /// (the swarm's flapping-host seed 957203).
    UncountedTable,
    /// Under session liveness, a host whose view gives a member more leases than
    /// that member's heartbeat says it holds does not read the table even when it
    /// is the member's successor: a lease the member could not process and gave to
    /// it without a claim is processed by nobody (the swarm's seed 1012240).
    SilentSuccessor,
    /// Under session liveness, the comparison of the heartbeats' lease counts with
    /// the view shares out, on the heartbeats' side, only the leases they hold and
    /// those the view shows free: a lease its holder handed to a name that had left
    /// (its heartbeat read from a lagging replica) leaves every share but the
    /// giver's as it was, and the host the plans give it to never reads the table,
    /// until its audit (the swarm's rolling-restart seed 3382147).
    OrphanUncounted,
    /// A new life takes its name as proof that every earlier life under it is dead:
    /// under session liveness it writes its tenure over an earlier life's unfenced
    /// heartbeat at once (and every other host then judges that tenure over); under
    /// lease liveness it processes a lease named after it as soon as its own renewal
    /// lands. An earlier life that is paused or partitioned, not dead, is still within
    /// its authority.
    NameProvesDeath,
    /// Only the host whose plan takes a lease of a dead host fences or frees it: one
    /// the plan gives it to that has not yet watched it expire (a newcomer) leaves it
    /// be for up to an expiry more, and a run of newcomers can put the takeover off
    /// again and again.
    NewcomerWaits,
    /// A fenced lease is written under its writer's terms alone, not the wider of
    /// those and the earlier holder's it is fenced against: a later life of a host
    /// that stole a lease from a holder with a longer lease (a deploy that shortened
    /// it) inherits the fence from the document, waits out only its own shorter
    /// lease, and processes while the holder still has authority (the swarm's
    /// rolling-restart seed 2234772).
    FenceForgetsTerms,
    /// Under lease liveness, a lease named after this host that it claimed counts as
    /// handed to this very life, although a claim names only the host: a handoff
    /// answering an earlier life's claim, found by a new life whose stale read of
    /// the lease made it claim the lease too, is processed at once beside the
    /// earlier life, a zombie (the swarm's skewed-clocks seed 2584798).
    ClaimByName,
    /// A lease whose session was lost is released or handed off at once, while the
    /// lost call may still run until the driver aborts it: the recipient (or anyone,
    /// after a release) starts at once, beside that call. Found by the runtime
    /// swarm's seed 84112: a drain for a handoff outlived the authority, and the
    /// handoff then went out 0.3 s before the call was aborted.
    FreeBesideLostCall,
    /// A lease whose write left this host unsure (a 412, an unknown outcome) takes
    /// the version a table scan sent before that write lists, if the re-read that
    /// would tell failed: the scan cannot show the write, which may have landed. A
    /// host whose handoff landed (answered 412 by the SDK's retry, its re-read
    /// throttled) took the lease back at its old epoch beside the recipient (the
    /// swarm's skewed-clocks seed 2888576). As then, a version refused (412) is not
    /// remembered either (see [`KnownBad::RewriteRefusedVersion`]), which since
    /// also keeps a scan's listing of it from being taken as current.
    ScanBeforeOwnWrite,
    /// A lease is started again while one of its writes is in flight: a checkpoint
    /// on the way, taken out of the host's state and not yet stored, is behind the
    /// new session, which then writes a lower one after it lands (the runtime
    /// swarm's seed 114165: a handoff called off while the drained batch's final
    /// checkpoint was being written).
    StartBeforeCheckpointLands,
    /// A version of a lease the store refused a write on (412) is taken as current
    /// again when a read from a replica that lags still shows it: the host writes
    /// it again at once, is refused again, reads again, and so on for as long as the
    /// replica lags, with no backoff (the two-region emulator run with a leave
    /// notice: a take, its 412 and a re-scan, over and over on a paused clock).
    RewriteRefusedVersion,
    /// Under lease liveness, a take whose outcome is unknown counts as landed when
    /// the read that follows shows the lease named after this host at the take's
    /// epoch, although an earlier life of its name (a zombie) may have written that
    /// version: taken on the same version, the two takes write the same name at the
    /// same epoch, and only the life in the document tells them apart. The new life
    /// processes beside its zombie (the swarm's hot-partition seed 4308821, with
    /// reused names under `cfp`).
    TakeByName,
    /// A host whose lost call of a lease outlived the stop timeout (a call its
    /// driver cannot abort) strands the lease: with no live member to give it to,
    /// it releases it to nobody, and it never takes the lease again while the call
    /// runs, though the plans, which all hosts share, give it back to this host.
    /// Nobody processes it until the call ends: found by the model with stuck calls
    /// (`--stuck-calls`) at 2 hosts × 1 partition with a crash.
    StuckCallStrands,
    /// Under session liveness, a take whose outcome is unknown is settled by the
    /// re-read that follows it: if that read shows the version the take was sent on,
    /// the take is forgotten, though the request may still land. Landed after the
    /// re-read, it makes this host the owner unknown to itself, which reads only the
    /// heartbeats; the host the plans give the lease to sees it held, and nobody
    /// processes it until the audit. Found by the model's random walks
    /// (`--walks`) at 2 hosts × 1 partition with a shutdown and a delayed write,
    /// horizon 20 s.
    TakeLandsUnseen,
    /// A read that shows a lease named after this host at another epoch than the
    /// one it holds is taken as a takeover: the host stops processing the lease and
    /// forgets it, though the version is its own resume that landed after the
    /// re-read that followed its timeout. Under session liveness it then reads only
    /// the heartbeats, the others see the lease held, and nobody processes it until
    /// the audit. Found by the model's random walks at 3 hosts × 1 partition with a
    /// crash, a shutdown, a late reply and a stale read, horizon 25 s.
    DropsOwnLanding,
    /// Under session liveness, a lease a stuck call held back, handed to the
    /// giver's successor without a claim, is announced by nothing but the giver's
    /// lower count of leases: a recipient whose view of the table or of the members
    /// differs from the giver's (a handoff between two others it has not read, a
    /// member the giver thought dead) sees no count it can blame, never reads the
    /// table, and nobody processes the lease until its audit (the swarm's seeds
    /// 5005496 and 5011530).
    GiftUnannounced,
    /// Under `handoff`, a claim a host begins on a read of the heartbeats alone is
    /// published at once, naming a lease from its view of the table, which is as old
    /// as its last read of the table: a handoff since may have moved that lease to a
    /// host at its share, which keeps it, and the claimant names the right lease only
    /// at its next read of the table, an interval later. Found by the model's random
    /// walks at 3 hosts × 3 partitions with a pause: owned counts stayed a tick past
    /// the balance bound.
    StaleClaim,
    /// Under session liveness, a lease a host learns it holds once its shutdown
    /// began (a scan or an answer on the way) is released to nobody although the
    /// host has no tenure to write the release in, and will begin none: the shutdown
    /// waits for that write for good, and the host never stops, so it never restarts
    /// (the swarm's seed 5321510; the model finds it at 1 host × 1 partition with a
    /// crash, a shutdown and a late reply).
    ShutdownReleasesUnwritable,
    /// A read that shows the version of a lease the store refused this host's write
    /// on (412), which a replica that lags may still serve, is set aside as stale,
    /// yet the lease it names is taken up again: a host whose handoff was refused
    /// because it had landed unheard (given up on, then sent again) lost the lease,
    /// and the stale read named it the owner once more, so it processed beside the
    /// recipient (found by a sweep of small bounds in the model: 2 hosts × 2
    /// partitions under `handoff`, one held write and one stale read).
    OwnsRefusedVersion,
}

impl KnownBad {
    /// Every earlier behaviour, in the order they are declared.
    pub const ALL: [KnownBad; 27] = [
        KnownBad::RestartSameEpoch,
        KnownBad::UnfencedTakeover,
        KnownBad::DeleteParentFirst,
        KnownBad::DeleteSplitLease,
        KnownBad::TakeKeepsEndedTenure,
        KnownBad::ResumeKeepsEndedTenure,
        KnownBad::TenureByReadOrder,
        KnownBad::EarlierTenureWaits,
        KnownBad::UncountedTable,
        KnownBad::SilentSuccessor,
        KnownBad::OrphanUncounted,
        KnownBad::NameProvesDeath,
        KnownBad::NewcomerWaits,
        KnownBad::FenceForgetsTerms,
        KnownBad::ClaimByName,
        KnownBad::FreeBesideLostCall,
        KnownBad::ScanBeforeOwnWrite,
        KnownBad::StartBeforeCheckpointLands,
        KnownBad::RewriteRefusedVersion,
        KnownBad::TakeByName,
        KnownBad::StuckCallStrands,
        KnownBad::TakeLandsUnseen,
        KnownBad::DropsOwnLanding,
        KnownBad::GiftUnannounced,
        KnownBad::StaleClaim,
        KnownBad::ShutdownReleasesUnwritable,
        KnownBad::OwnsRefusedVersion,
    ];

    /// The behaviour's name on the checkers' command lines (`--bug NAME`).
    pub fn name(self) -> &'static str {
        match self {
            KnownBad::RestartSameEpoch => "restart-same-epoch",
            KnownBad::UnfencedTakeover => "unfenced-takeover",
            KnownBad::DeleteParentFirst => "delete-parent-first",
            KnownBad::DeleteSplitLease => "delete-split-lease",
            KnownBad::TakeKeepsEndedTenure => "take-keeps-ended-tenure",
            KnownBad::ResumeKeepsEndedTenure => "resume-keeps-ended-tenure",
            KnownBad::TenureByReadOrder => "tenure-read-order",
            KnownBad::EarlierTenureWaits => "earlier-tenure-waits",
            KnownBad::UncountedTable => "uncounted-table",
            KnownBad::SilentSuccessor => "silent-successor",
            KnownBad::OrphanUncounted => "orphan-uncounted",
            KnownBad::NameProvesDeath => "name-proves-death",
            KnownBad::NewcomerWaits => "newcomer-waits",
            KnownBad::FenceForgetsTerms => "fence-forgets-terms",
            KnownBad::ClaimByName => "claim-by-name",
            KnownBad::FreeBesideLostCall => "free-beside-lost-call",
            KnownBad::ScanBeforeOwnWrite => "scan-before-own-write",
            KnownBad::StartBeforeCheckpointLands => "start-before-checkpoint-lands",
            KnownBad::RewriteRefusedVersion => "rewrite-refused-version",
            KnownBad::TakeByName => "take-by-name",
            KnownBad::StuckCallStrands => "stuck-call-strands",
            KnownBad::TakeLandsUnseen => "take-lands-unseen",
            KnownBad::DropsOwnLanding => "drops-own-landing",
            KnownBad::GiftUnannounced => "gift-unannounced",
            KnownBad::StaleClaim => "stale-claim",
            KnownBad::ShutdownReleasesUnwritable => "shutdown-releases-unwritable",
            KnownBad::OwnsRefusedVersion => "owns-refused-version",
        }
    }
}

/// Where a holder's authority over its leases comes from, and so what it must write
/// to keep them.
///
/// ```
/// use leasehold_engine::balance::{CfpConfig, Strategy};
/// use leasehold_engine::lease::{ConfigError, LeaseConfig, Liveness};
///
/// let handoff = LeaseConfig::default();
/// assert_eq!(handoff.liveness(), Liveness::Session);
/// let lease = LeaseConfig { liveness: Some(Liveness::Lease), ..handoff };
/// assert!(lease.validate().is_ok());
/// let cfp = LeaseConfig {
///     strategy: Strategy::Cfp(CfpConfig::default()),
///     ..LeaseConfig::default()
/// };
/// assert_eq!(cfp.liveness(), Liveness::Lease);
/// let mixed = LeaseConfig { liveness: Some(Liveness::Session), ..cfp };
/// assert!(matches!(mixed.validate(), Err(ConfigError::SessionNeedsMembership { .. })));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Liveness {
    /// Each lease is renewed on its own, every renew interval: the change feed
    /// processor's way, and its document format.
    Lease,
    /// One conditional write of the host's heartbeat renews every lease it holds.
    /// Lease documents are written only when their owner changes or a checkpoint is
    /// stored. Before taking a dead host's leases, the taker fences its session with a
    /// conditional write to its heartbeat, which makes the dead host's next renewal
    /// fail.
    Session,
}

impl Liveness {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Liveness::Lease => "lease",
            Liveness::Session => "session",
        }
    }
}

impl fmt::Display for Liveness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Liveness {
    type Err = UnknownLiveness;
    fn from_str(s: &str) -> Result<Liveness, UnknownLiveness> {
        match s {
            "lease" => Ok(Liveness::Lease),
            "session" => Ok(Liveness::Session),
            other => Err(UnknownLiveness(other.to_string())),
        }
    }
}

/// A liveness name that does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownLiveness(pub String);

impl fmt::Display for UnknownLiveness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown liveness {:?}: expected lease or session",
            self.0
        )
    }
}

impl std::error::Error for UnknownLiveness {}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            prefix: String::new(),
            partitions: Vec::new(),
            expiry: ExpiryPolicy::default(),
            renew_interval: Millis::from_secs(17),
            acquire_interval: Millis::from_secs(13),
            strategy: Strategy::default(),
            liveness: None,
            audit_interval: Millis::from_secs(300),
            stop_timeout: Millis::from_secs(60),
            checkpoint: CheckpointPolicy::EveryBatch,
            leave_notice: None,
            known_bad: None,
        }
    }
}

/// How often a host reads the heartbeats while another host's heartbeat says it is
/// leaving: the most a released lease waits, beyond the reads' own latency, before
/// the host the plan gives it to learns that its holder is gone.
pub const LEAVE_POLL: Millis = Millis(500);

impl LeaseConfig {
    /// The liveness in force: the one set, else [`Liveness::Session`] for
    /// `handoff` and [`Liveness::Lease`] for every other strategy. Session liveness
    /// needs every host's heartbeat, which only `handoff` has.
    pub fn liveness(&self) -> Liveness {
        self.liveness.unwrap_or(match self.strategy {
            Strategy::Handoff => Liveness::Session,
            _ => Liveness::Lease,
        })
    }

    /// Whether a new life waits out a heartbeat of another life under its name that
    /// still vouches for a tenure, as a fencer would, before writing over it: under
    /// session liveness, unless the known-bad rule takes the name as proof of death.
    pub fn waits_out_earlier_life(&self) -> bool {
        self.liveness() == Liveness::Session && self.known_bad != Some(KnownBad::NameProvesDeath)
    }

    /// The leave notice in force: the one set, else one acquire interval and one
    /// [`LEAVE_POLL`] more, so that every other host has read the heartbeat that says
    /// this one is leaving, at its own interval, before the leases are released. Only
    /// strategies with heartbeats (`handoff`) announce a leave; under the others a
    /// host releases at once.
    ///
    /// ```
    /// use leasehold_engine::lease::{LeaseConfig, LEAVE_POLL};
    /// use leasehold_engine::Millis;
    ///
    /// let config = LeaseConfig::default();
    /// assert_eq!(config.leave_notice(), config.acquire_interval + LEAVE_POLL);
    /// let at_once = LeaseConfig { leave_notice: Some(Millis::ZERO), ..config };
    /// assert_eq!(at_once.leave_notice(), Millis::ZERO);
    /// ```
    pub fn leave_notice(&self) -> Millis {
        self.leave_notice
            .unwrap_or(self.acquire_interval + LEAVE_POLL)
    }

    /// Under session liveness, where in each audit period (the audit interval times
    /// the group's `hosts`, this one included) host `me` reads the whole table: it
    /// audits whenever its local clock passes this offset of a period. Each name has
    /// its own phase, so that a group does not audit all at once.
    ///
    /// ```
    /// use leasehold_engine::lease::LeaseConfig;
    /// use leasehold_engine::{HostId, Millis};
    ///
    /// let config = LeaseConfig::default();
    /// let phase = config.audit_phase(&HostId::from("a"), 3);
    /// assert!(phase < Millis(config.audit_interval.as_millis() * 3));
    /// ```
    pub fn audit_phase(&self, me: &HostId, hosts: u64) -> Millis {
        let every = self.audit_period(hosts).as_millis();
        Millis(crate::balance::spread(me.as_str(), "audit") % every)
    }

    /// Under session liveness, how often each host of a group of `hosts` audits: the
    /// audit interval times the group's size, so that the group as a whole reads the
    /// table about once per audit interval.
    ///
    /// ```
    /// use leasehold_engine::lease::LeaseConfig;
    /// use leasehold_engine::Millis;
    ///
    /// let config = LeaseConfig::default();
    /// assert_eq!(config.audit_period(3), Millis(config.audit_interval.as_millis() * 3));
    /// ```
    pub fn audit_period(&self, hosts: u64) -> Millis {
        Millis(self.audit_interval.as_millis().saturating_mul(hosts).max(1))
    }

    /// Checks that the settings make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let expiration = self.expiry.duration;
        if expiration == Millis::ZERO {
            return Err(ConfigError::ZeroExpiration);
        }
        if self.renew_interval == Millis::ZERO {
            return Err(ConfigError::ZeroRenewInterval);
        }
        if self.renew_interval >= expiration {
            return Err(ConfigError::RenewNotBelowExpiration {
                renew: self.renew_interval,
                expiration,
            });
        }
        if self.acquire_interval == Millis::ZERO {
            return Err(ConfigError::ZeroAcquireInterval);
        }
        if self.stop_timeout == Millis::ZERO {
            return Err(ConfigError::ZeroStopTimeout);
        }
        if self.audit_interval == Millis::ZERO {
            return Err(ConfigError::ZeroAuditInterval);
        }
        if self.checkpoint == CheckpointPolicy::AtMostEvery(Millis::ZERO) {
            return Err(ConfigError::ZeroCheckpointInterval);
        }
        if self.checkpoint == CheckpointPolicy::AtMostEveryItems(0) {
            return Err(ConfigError::ZeroCheckpointItems);
        }
        if self.expiry.drift.as_ppm() >= Drift::MAX_PPM {
            return Err(ConfigError::DriftTooLarge {
                ppm: self.expiry.drift.as_ppm(),
            });
        }
        if self.liveness() == Liveness::Session && !self.strategy.needs_membership() {
            return Err(ConfigError::SessionNeedsMembership {
                strategy: self.strategy.name(),
            });
        }
        let authority = self.expiry.authority_span();
        if self.renew_interval >= authority {
            return Err(ConfigError::RenewNotBelowAuthority {
                renew: self.renew_interval,
                authority,
            });
        }
        self.strategy.validate()
    }
}

/// A configuration that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// The lease duration is zero.
    ZeroExpiration,
    /// The renew interval is zero.
    ZeroRenewInterval,
    /// Leases would expire before their owner renews them.
    RenewNotBelowExpiration {
        /// The renew interval.
        renew: Millis,
        /// The lease duration.
        expiration: Millis,
    },
    /// The acquire interval is zero.
    ZeroAcquireInterval,
    /// The stop timeout is zero: every lost lease would be given up at once.
    ZeroStopTimeout,
    /// The audit interval is zero: every scan would read the whole table.
    ZeroAuditInterval,
    /// A checkpoint interval of zero: say [`CheckpointPolicy::EveryBatch`] instead.
    ZeroCheckpointInterval,
    /// A checkpoint item count of zero: say [`CheckpointPolicy::EveryBatch`] instead.
    ZeroCheckpointItems,
    /// CFP's minimum lease count is above its maximum.
    MinAboveMax {
        /// The minimum.
        min: u32,
        /// The maximum.
        max: u32,
    },
    /// The drift bound is 100% or more: a clock might stand still.
    DriftTooLarge {
        /// The bound, in parts per million.
        ppm: u32,
    },
    /// An owner's authority (duration minus drift allowance minus margin) would lapse
    /// before its next renewal, so it would stop and restart processing every cycle.
    RenewNotBelowAuthority {
        /// The renew interval.
        renew: Millis,
        /// How long authority lasts after a successful write.
        authority: Millis,
    },
    /// The host id is empty or blank, which CFP reads as "no owner".
    BlankHostId(HostId),
    /// Session liveness was asked of a strategy that keeps no heartbeats (and whose
    /// leases other processors renew one by one).
    SessionNeedsMembership {
        /// The strategy's name.
        strategy: &'static str,
    },
    /// The group's documents were written under another liveness than this host's:
    /// a lease held under session liveness is never renewed on its own, so a host
    /// under lease liveness would judge it expired while its holder still holds it.
    /// Every host of a group must run the same liveness; changing it takes a full
    /// stop of the group, or a new processor name.
    LivenessMismatch {
        /// This host's liveness.
        mine: Liveness,
        /// The liveness the document was written under.
        theirs: Liveness,
        /// The document that says so.
        document: crate::ids::DocId,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroExpiration => write!(f, "the lease expiration must be above 0"),
            ConfigError::ZeroRenewInterval => write!(f, "the renew interval must be above 0"),
            ConfigError::RenewNotBelowExpiration { renew, expiration } => write!(
                f,
                "the renew interval ({renew}) must be below the lease expiration ({expiration})"
            ),
            ConfigError::ZeroAcquireInterval => {
                write!(f, "the acquire interval must be above 0")
            }
            ConfigError::ZeroStopTimeout => write!(f, "the stop timeout must be above 0"),
            ConfigError::ZeroAuditInterval => write!(f, "the audit interval must be above 0"),
            ConfigError::ZeroCheckpointInterval => write!(
                f,
                "the checkpoint interval must be above 0 (every batch is the default policy)"
            ),
            ConfigError::ZeroCheckpointItems => write!(
                f,
                "the checkpoint item count must be above 0 (every batch is the default policy)"
            ),
            ConfigError::MinAboveMax { min, max } => write!(
                f,
                "the minimum lease count ({min}) must not exceed the maximum ({max})"
            ),
            ConfigError::DriftTooLarge { ppm } => {
                write!(f, "the drift bound ({ppm} ppm) must be below 1,000,000 ppm")
            }
            ConfigError::RenewNotBelowAuthority { renew, authority } => write!(
                f,
                "the renew interval ({renew}) must be below the holder's authority \
                 (expiration minus drift allowance minus safety margin: {authority})"
            ),
            ConfigError::BlankHostId(id) => {
                write!(f, "the host id {id:?} is blank; CFP reads that as no owner")
            }
            ConfigError::SessionNeedsMembership { strategy } => write!(
                f,
                "session liveness needs the handoff strategy's heartbeats; \
                 {strategy} renews each lease (liveness lease)"
            ),
            ConfigError::LivenessMismatch {
                mine,
                theirs,
                document,
            } => write!(
                f,
                "this host runs {mine} liveness, but document {document} of its group \
                 was written under {theirs} liveness: every host of a group must run \
                 the same one (stop the whole group to change it, or use a new \
                 processor name)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::CfpConfig;

    fn with(change: impl FnOnce(&mut LeaseConfig)) -> Result<(), ConfigError> {
        let mut config = LeaseConfig::default();
        change(&mut config);
        config.validate()
    }

    #[test]
    fn the_cfp_defaults_are_valid() {
        assert_eq!(with(|_| {}), Ok(()));
    }

    #[test]
    fn a_renew_interval_at_or_above_the_expiration_is_refused() {
        let err = with(|c| c.renew_interval = Millis::from_secs(60)).unwrap_err();
        assert!(matches!(err, ConfigError::RenewNotBelowExpiration { .. }));
        assert!(
            err.to_string()
                .contains("must be below the lease expiration")
        );
    }

    #[test]
    fn a_zero_acquire_interval_is_refused() {
        assert_eq!(
            with(|c| c.acquire_interval = Millis::ZERO),
            Err(ConfigError::ZeroAcquireInterval)
        );
    }

    #[test]
    fn a_cfp_minimum_above_its_maximum_is_refused_but_unset_bounds_are_fine() {
        let cfp = |min, max| {
            with(|c| {
                c.strategy = Strategy::Cfp(CfpConfig {
                    min_leases: min,
                    max_leases: max,
                })
            })
        };
        assert_eq!(cfp(5, 3), Err(ConfigError::MinAboveMax { min: 5, max: 3 }));
        assert_eq!(cfp(5, 0), Ok(()));
        assert_eq!(cfp(3, 3), Ok(()));
    }

    #[test]
    fn a_margin_that_leaves_no_time_to_renew_is_refused() {
        let err = with(|c| c.expiry.safety_margin = Millis::from_secs(50)).unwrap_err();
        assert!(matches!(err, ConfigError::RenewNotBelowAuthority { .. }));
    }

    #[test]
    fn zero_durations_and_a_stopped_clock_are_refused() {
        assert_eq!(
            with(|c| c.expiry.duration = Millis::ZERO),
            Err(ConfigError::ZeroExpiration)
        );
        assert_eq!(
            with(|c| c.renew_interval = Millis::ZERO),
            Err(ConfigError::ZeroRenewInterval)
        );
        assert_eq!(
            with(|c| c.stop_timeout = Millis::ZERO),
            Err(ConfigError::ZeroStopTimeout)
        );
        assert_eq!(
            with(|c| c.audit_interval = Millis::ZERO),
            Err(ConfigError::ZeroAuditInterval)
        );
        assert!(matches!(
            with(|c| c.expiry.drift = Drift::ppm(1_000_000)),
            Err(ConfigError::DriftTooLarge { .. })
        ));
    }
}
