//! The `leasehold` command line.

/// The model checker allocates and frees small states at a high rate; mimalloc does
/// that faster than the system allocator (BENCHMARKS.md, model checking).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::{ConfigError, Liveness};
use leasehold_engine::{ExpiryRule, Millis, WallTime};
use leasehold_model::check::{Checkable, Options, Search, Stop, available_bytes};
use leasehold_model::explore;
use leasehold_model::trace::Explain;
use leasehold_model::{Bounds, BoundsError, Bug, PartitionModel};
use leasehold_model::{ItemModel, LockBounds, LockBug, LockKind, QueueModel};
use leasehold_sims::balance::{self, Question};
use leasehold_sims::cli::check;
use leasehold_sims::cli::defaults;
use leasehold_sims::snapshot;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "leasehold",
    version,
    propagate_version = true,
    about = "Leases shared through Azure Cosmos DB, checked and simulated"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Which leases would a host take from an exported lease container, and why.
    Balance(BalanceArgs),
    /// Model-check a protocol exhaustively within bounds (exit 1 on a counterexample,
    /// 3 when stopped at a limit).
    Check(ModelArgs),
    /// Simulate a scenario over virtual time with seeded faults, or a swarm of seeds
    /// (exit 1 on a violation).
    Sim(Box<leasehold_sims::cli::sim::SimArgs>),
    /// Serve stateright's Explorer for a model on 127.0.0.1, to walk its states by hand:
    /// each state as its facts, each step in the domain's words, each path as a
    /// sequence diagram.
    Explore(ExploreArgs),
    /// Print a completion script for a shell, generated from this command line's own
    /// definitions; for bash: `leasehold completions bash > /etc/bash_completion.d/leasehold`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from this command line's own definitions:
    /// `leasehold man | man -l -`, or `leasehold man check` for one subcommand's.
    Man {
        /// The subcommand whose page to print; without one, the top-level page.
        subcommand: Option<String>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Target {
    /// Partition leases: hosts, the lease table, crashes, skew and drift.
    Partitions,
    /// The work queue: consumers (--hosts) and messages (--partitions).
    Queue,
    /// Item leases: holders (--hosts) and items (--partitions).
    Items,
}

#[derive(clap::Args)]
struct ModelArgs {
    /// What to check.
    #[arg(value_enum, default_value_t = Target::Partitions)]
    target: Target,
    /// Hosts in the cluster; consumers (queue) or holders (items) (1-4).
    #[arg(long, visible_aliases = ["consumers", "holders"])]
    hosts: Option<u8>,
    /// Partitions, one lease each (1-4); messages (queue, 1-5) or items (items, 1-4).
    #[arg(long, visible_aliases = ["messages", "items"])]
    partitions: Option<u8>,
    /// Crashes allowed; a crashed host may restart as a new life.
    #[arg(long)]
    crashes: Option<u8>,
    /// Partitions: graceful shutdowns allowed; the host releases its leases, leaves,
    /// and may restart as a new life under the same name.
    #[arg(long)]
    shutdowns: Option<u8>,
    /// Partitions: zombies allowed (0-1). A host believed crashed acts on, cut off
    /// from the store, until its authority ends, while a new life may start under its
    /// name (a paused VM, a partitioned pod its orchestrator replaced).
    #[arg(long)]
    zombies: Option<u8>,
    /// Partitions: a deploy half done: every host but h0 runs the next build, whose
    /// lease is twice as long.
    #[arg(long)]
    deploy: bool,
    /// Each wall clock is off true time by up to this many seconds, either way (0-3).
    #[arg(long, value_name = "SECONDS")]
    skew: Option<u8>,
    /// Partitions: explore every wall-clock set-up even under the observed expiry
    /// rule, which never reads a wall clock and so, by default, checks one set-up for
    /// all of them (docs/model-checking.md, "Model-checking speed").
    #[arg(long)]
    unreduced: bool,
    /// Partitions: splits of the feed allowed (0-2). Partition 0's range may split
    /// into two children, and then the first child into two; the leases must fit in
    /// 5, so at most 3 partitions with one split and 1 with two.
    #[arg(long)]
    splits: Option<u8>,
    /// Each clock gains or loses up to this many milliseconds per second (0-200).
    #[arg(long, default_value_t = defaults::check_bounds().drift_ms, value_name = "MS_PER_S")]
    drift: u16,
    /// Seconds of true time explored, in 1 s ticks.
    #[arg(long, value_name = "SECONDS")]
    horizon: Option<u8>,
    /// The balancing strategy.
    #[arg(long, value_parser = flags::strategy_parser())]
    strategy: Option<Strategy>,
    /// The expiry rule.
    #[arg(long, value_parser = flags::expiry_parser(), default_value_t = defaults::check_bounds().expiry)]
    expiry: ExpiryRule,
    /// How much earlier than strictly needed a holder gives up its authority, such as
    /// 4s.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    margin: Option<Millis>,
    /// Where a holder's authority comes from. Session needs handoff.
    #[arg(long, value_parser = flags::liveness_parser())]
    liveness: Option<Liveness>,
    /// Run a known-bad variant; stops at its first counterexample. A variant runs, for
    /// every bound not given here, the least bound known to show it under the
    /// `--strategy` given (the bounds `model/tests` find it at); those not shown in
    /// seconds say so.
    #[arg(long, value_name = "NAME")]
    bug: Option<String>,
    /// Late ticks allowed: time passes while a host has due work (a GC pause).
    #[arg(long)]
    pauses: Option<u8>,
    /// Writes that may be applied with their reply lost (ambiguous outcomes).
    #[arg(long)]
    lost_replies: Option<u8>,
    /// Writes that may be held on the wire and delivered later, in any order.
    #[arg(long)]
    delays: Option<u8>,
    /// Documents that reads may serve one version old, as a replica lagging behind
    /// at Session consistency may (never older than what the reader has seen).
    #[arg(long)]
    stale_reads: Option<u8>,
    /// How many writes back a stale read may go (a new life's session has seen
    /// nothing, so a lagging replica may serve it a version older than the last
    /// write).
    #[arg(long)]
    stale_depth: Option<u8>,
    /// Partitions and the queue: replies, to reads and writes, that may be held on
    /// the way back and delivered later.
    #[arg(long)]
    late_replies: Option<u8>,
    /// Queue: the one message is a payload larger than a document, produced by
    /// consumer 0 as a part set while the others poll and sweep (the part-set
    /// variants imply it).
    #[arg(long)]
    large: bool,
    /// Queue: as --large, the payload kept in a claim store through the queue's claim
    /// check rather than in parts.
    #[arg(long)]
    claims: bool,
    /// Queue, with --claims: claim-store calls (puts, drops, discards) that may fail;
    /// a failed put has landed all the same.
    #[arg(long)]
    claim_failures: Option<u8>,
    /// Writes that may be applied and then answered as the SDK's own retry of them
    /// finds the store (412, 409 or 404 where the write won).
    #[arg(long)]
    retries: Option<u8>,
    /// Partitions: bursts of throttled reads: from a moment the checker chooses until
    /// the next tick, a host's reads are answered 429 unserved while its writes go
    /// through.
    #[arg(long)]
    throttled_reads: Option<u8>,
    /// Partitions: faults one host step may suffer (1-2). With 2, a step may also take
    /// two faults on two of its requests, such as a late reply to a scan sent beside a
    /// write the SDK retries; each still counts against its own budget.
    #[arg(long)]
    faults_per_step: Option<u8>,
    /// Partitions: slow drains: a call told to stop for a release or a handoff
    /// finishes its batch past the tick, reaching checkpoints meanwhile, until it
    /// returns (by default a drain ends within the step that asks for it).
    #[arg(long)]
    slow_drains: Option<u8>,
    /// Partitions: lost handler calls that the driver cannot abort, so they run on
    /// past the tick, for good or until they return, and the stop timeout may
    /// elapse (by default a lost call ends before the next tick).
    #[arg(long)]
    stuck_calls: Option<u8>,
    /// Checkpoints each handler reports per lease.
    #[arg(long)]
    progress: Option<u8>,
    /// Partitions: write a lease's checkpoint at most once per N reported (each counts
    /// as one item), and check that a new call replays fewer than N beyond what a
    /// write in flight carried (0, the default: after every batch).
    #[arg(long, value_name = "N")]
    checkpoint_items: Option<u8>,
    /// Queue and items: abandons or breaks clients may choose, in all.
    #[arg(long)]
    give_backs: Option<u8>,
    /// Queue and items: renewals clients may choose, in all.
    #[arg(long)]
    renewals: Option<u8>,
    /// Queue: how long an abandoned message stays invisible, in seconds (0-10). A
    /// message abandoned for later is out of every dequeue's read meanwhile.
    #[arg(long, value_name = "SECONDS")]
    abandon_delay: Option<u8>,
    /// Queue: dequeue batch size; items: next_for_state limit.
    #[arg(long)]
    batch: Option<u8>,
    /// Queue: deliveries after which a message is dead-lettered.
    #[arg(long)]
    max_dequeue: Option<u8>,
    /// Queue: dead letters an operator may ask consumer 0 to delete, in all (0-3).
    #[arg(long, value_name = "N")]
    dead_letter_deletes: Option<u8>,
    /// Queue and items: handlers that may overrun their delivery's or lease's authority and complete it
    /// after their consumer polled on, in all (0-2).
    #[arg(long, value_name = "N")]
    overruns: Option<u8>,
    /// Queue and items: how long a lock or lease lasts, in seconds (2-4). Longer
    /// leases reach paths with more polls of one client inside one lease.
    #[arg(long, value_name = "SECONDS")]
    lock_duration: Option<u8>,
    /// Checker threads (1 to 64; more than the machine has are not used).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: Option<u16>,
    /// Depth-first search (the default without --bug: faster, less memory).
    #[arg(long, conflicts_with = "bfs")]
    dfs: bool,
    /// Breadth-first search (the default with --bug: with one thread, counterexamples
    /// are shortest).
    #[arg(long, conflicts_with = "walks")]
    bfs: bool,
    /// Seeded random walks instead of an exhaustive search: they reach counterexamples
    /// too deep for one, but never prove anything. They never end on their own: without
    /// --timeout or --max-states they stop after 10 minutes. The first failing walk is
    /// the same for a seed on any thread count.
    #[arg(long, value_name = "SEED", conflicts_with = "dfs")]
    walks: Option<u64>,
    /// Stop after this long; the check is then incomplete. Without it (and without
    /// --max-states), random walks and the search for a variant the model does not
    /// show in seconds stop after 10 minutes; anything else runs to its end.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Millis>,
    /// Stop after this many states; the check is then incomplete.
    #[arg(long, value_name = "N")]
    max_states: Option<usize>,
    /// Stop once the check holds this many GiB of memory; the check is then
    /// incomplete, instead of killed when memory runs out.
    #[arg(long, value_name = "GIB", value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_memory: Option<u32>,
    /// Stop at the first counterexample (the default with --bug).
    #[arg(long)]
    first: bool,
    /// Print the trace of a path a check printed, instead of checking.
    #[arg(long, value_name = "PATH")]
    replay: Option<String>,
}

#[derive(clap::Args)]
struct ExploreArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The port on 127.0.0.1 to serve the Explorer on.
    #[arg(long, default_value_t = 3000)]
    port: u16,
}

/// Turns the engine's refusal of session liveness for a strategy without heartbeats
/// into a usage error (exit 2), before any work starts.
fn refuse_unsupported_liveness(bounds: &Bounds) {
    if let Err(e @ BoundsError::Protocol(ConfigError::SessionNeedsMembership { .. })) =
        bounds.lease_config()
    {
        let message = format!("--liveness session needs --strategy handoff: {e}");
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, message)
            .exit();
    }
}

#[derive(clap::Args)]
struct BalanceArgs {
    /// The balancing strategy.
    #[arg(long, value_parser = flags::strategy_parser(), default_value_t = Strategy::Handoff)]
    strategy: Strategy,
    /// The instance name of the host that decides.
    #[arg(long)]
    host: String,
    /// A JSON array of a lease container's documents, as the .NET or Java change feed
    /// processor or leasehold wrote them; `-` reads stdin. Documents that are not
    /// leases of the group (`{prefix}.info`, `{prefix}.lock`, heartbeats, other groups)
    /// are skipped and counted.
    #[arg(long, value_name = "FILE")]
    leases: PathBuf,
    /// The processor group: leases have ids `{prefix}..{token}`; without it, the only
    /// group in the export.
    #[arg(long)]
    prefix: Option<String>,
    /// The decision time; without it, this machine's clock.
    #[arg(long, value_name = "RFC3339", value_parser = parse_now)]
    now: Option<WallTime>,
    /// The lease expiration interval, such as 60s or 10m.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    expiration: Millis,
    /// CFP's minimum partition count per host (0: unset).
    #[arg(long, default_value_t = 0)]
    min: u32,
    /// CFP's maximum partition count per host (0: unset).
    #[arg(long, default_value_t = 0)]
    max: u32,
}

fn parse_now(text: &str) -> Result<WallTime, String> {
    snapshot::parse_time(text)
}

use leasehold_sims::sim::flags::{self, parse_duration};

/// The command line as users see it: its definitions, with every default in the help
/// read from the code ([`defaults::annotate`]).
fn command() -> clap::Command {
    defaults::annotate(Cli::command())
}

/// Exit code when the reader of stdout went away (`leasehold check | head`): 128 plus
/// SIGPIPE's number, as a shell reports a process the signal ended.
const READER_GONE: i32 = 141;

/// A closed stdout ends the command quietly with [`READER_GONE`]: `print!` panics
/// on a broken pipe, since Rust ignores SIGPIPE, and the panic's message and
/// backtrace were printed after the reader had what it wanted.
fn end_quietly_on_a_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        // EPIPE on Unix; ERROR_NO_DATA (232, "the pipe is being closed") on Windows.
        let gone = text.contains("Broken pipe") || text.contains("os error 232");
        if text.starts_with("failed printing to stdout") && gone {
            std::process::exit(READER_GONE);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    end_quietly_on_a_broken_pipe();
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    // Every refusal is a usage or input error, like clap's: exit 2, so that exit 1
    // always means a violation or a counterexample. `balance` finds neither: any
    // error of its is a flag or a file it cannot use.
    let result = match cli.command {
        Command::Balance(args) => run_balance(args).map(|()| ExitCode::SUCCESS),
        Command::Check(args) => run_check(args),
        // Including a port the Explorer cannot serve on.
        Command::Explore(args) => run_explore(args),
        Command::Sim(args) => Ok(leasehold_sims::cli::sim::run(&args)),
        Command::Completions { shell } => {
            let mut cli = command();
            clap_complete::generate(shell, &mut cli, "leasehold", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { subcommand } => run_man(subcommand.as_deref()),
    };
    result.unwrap_or_else(|message| {
        eprintln!("error: {message}");
        ExitCode::from(2)
    })
}

/// The man page of `leasehold`, or of one of its subcommands (`leasehold-check`).
fn run_man(subcommand: Option<&str>) -> Result<ExitCode, String> {
    let mut cli = command();
    cli.build();
    let page = match subcommand {
        None => cli,
        Some(name) => {
            let names: Vec<String> = cli
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .filter(|n| n != "help")
                .collect();
            cli.find_subcommand(name).cloned().ok_or_else(|| {
                format!(
                    "no subcommand {name:?}; the subcommands are {}",
                    names.join(", ")
                )
            })?
        }
    };
    clap_mangen::Man::new(page)
        .render(&mut std::io::stdout())
        .map_err(|e| format!("could not write the man page: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

fn run_balance(args: BalanceArgs) -> Result<(), String> {
    let strategy = args.strategy.name();
    let now = args
        .now
        .unwrap_or_else(|| WallTime::from_unix_millis(chrono::Utc::now().timestamp_millis()));
    let question = Question::new(
        strategy,
        &args.host,
        now,
        args.expiration,
        args.min,
        args.max,
    )
    .map_err(|e| e.to_string())?;
    let text = read_input(&args.leases)?;
    let source = match args.leases.to_str() {
        Some("-") => "stdin".to_string(),
        _ => args.leases.display().to_string(),
    };
    let snapshot = match snapshot::read(&text, args.prefix.as_deref()) {
        Ok(snapshot) => snapshot,
        // Which group to decide for is the caller's choice to make: a usage error.
        Err(
            e @ (snapshot::SnapshotError::SeveralGroups { .. }
            | snapshot::SnapshotError::NoSuchGroup { .. }),
        ) => {
            eprintln!("error: {source}: {e}");
            std::process::exit(2);
        }
        Err(e) => return Err(format!("{source}: {e}")),
    };
    let answer = balance::decide(&snapshot, &question);
    let json = serde_json::to_string(&answer).map_err(|e| e.to_string())?;
    println!("{json}");
    Ok(())
}

fn model_of(args: &ModelArgs) -> Result<PartitionModel, String> {
    // The lock models' bounds mean nothing to the partition model: refused, as
    // `check queue` refuses the partition-only ones, rather than ignored.
    let lock_only = [
        ("--give-backs", args.give_backs.is_some()),
        ("--renewals", args.renewals.is_some()),
        ("--abandon-delay", args.abandon_delay.is_some()),
        ("--batch", args.batch.is_some()),
        ("--max-dequeue", args.max_dequeue.is_some()),
        ("--dead-letter-deletes", args.dead_letter_deletes.is_some()),
        ("--overruns", args.overruns.is_some()),
        ("--lock-duration", args.lock_duration.is_some()),
        ("--large", args.large),
        ("--claims", args.claims),
        ("--claim-failures", args.claim_failures.is_some()),
    ];
    if let Some((flag, _)) = lock_only.into_iter().find(|(_, given)| *given) {
        return Err(format!(
            "{flag} applies to the work queue and item leases, not to partitions"
        ));
    }
    let bug = match &args.bug {
        Some(name) => Some(name.parse::<Bug>().map_err(|e| e.to_string())?),
        None => None,
    };
    // Every bound not given: the variant's least bound where it has one, else the
    // general default.
    let least = bug
        .map(|b| b.least_bound_under(args.strategy))
        .unwrap_or_default();
    let d = least.over(defaults::check_bounds());
    let mut bounds = Bounds {
        hosts: args.hosts.unwrap_or(d.hosts),
        partitions: args.partitions.unwrap_or(d.partitions),
        crashes: args.crashes.unwrap_or(d.crashes),
        shutdowns: args.shutdowns.unwrap_or(d.shutdowns),
        zombies: args.zombies.unwrap_or(d.zombies),
        deploy: args.deploy || d.deploy,
        pauses: args.pauses.unwrap_or(d.pauses),
        lost_replies: args.lost_replies.unwrap_or(d.lost_replies),
        delays: args.delays.unwrap_or(d.delays),
        stale_reads: args.stale_reads.unwrap_or(d.stale_reads),
        stale_depth: args.stale_depth.unwrap_or(d.stale_depth),
        late_replies: args.late_replies.unwrap_or(d.late_replies),
        retries: args.retries.unwrap_or(d.retries),
        throttled_reads: args.throttled_reads.unwrap_or(d.throttled_reads),
        faults_per_step: args.faults_per_step.unwrap_or(d.faults_per_step),
        slow_drains: args.slow_drains.unwrap_or(d.slow_drains),
        stuck_calls: args.stuck_calls.unwrap_or(d.stuck_calls),
        skew: args.skew.unwrap_or(d.skew),
        drift_ms: args.drift,
        horizon: 1,
        progress: args.progress.unwrap_or(d.progress),
        checkpoint_items: args.checkpoint_items.unwrap_or(d.checkpoint_items),
        strategy: args.strategy.unwrap_or(d.strategy),
        expiry: args.expiry,
        liveness: args.liveness.or(d.liveness),
        bug,
        margin_ms: match args.margin {
            Some(m) => Some(
                u32::try_from(m.as_millis()).map_err(|_| "--margin is too large".to_string())?,
            ),
            None => None,
        },
        unreduced: args.unreduced,
        splits: args.splits.unwrap_or(d.splits),
    };
    refuse_unsupported_liveness(&bounds);
    bounds.horizon = match args.horizon.or(least.horizon) {
        Some(h) => h,
        None => {
            bounds.lease_config().map_err(|e| e.to_string())?;
            bounds
                .liveness_ticks()
                .saturating_add(defaults::PARTITION_HORIZON_PAST_LIVENESS)
                .min(defaults::HORIZON_CAP)
        }
    };
    PartitionModel::new(bounds).map_err(|e| e.to_string())
}

/// The partition variant `args` names, if it does and is one.
fn partition_bug(args: &ModelArgs) -> Option<Bug> {
    matches!(args.target, Target::Partitions)
        .then(|| args.bug.as_deref()?.parse::<Bug>().ok())
        .flatten()
}

/// The queue or item variant `args` names, if it does and is one.
fn lock_bug(args: &ModelArgs) -> Option<LockBug> {
    let kind = match args.target {
        Target::Queue => LockKind::Queue,
        Target::Items => LockKind::Items,
        _ => return None,
    };
    LockBug::parse(args.bug.as_deref()?, kind).ok()
}

/// `asked` checker threads, capped at the machine's parallelism: more only contend.
fn machine_threads(asked: u16) -> usize {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    usize::from(asked).clamp(1, available.max(1))
}

fn options_of(args: &ModelArgs) -> Options {
    // A variant whose counterexample lies deep is searched depth first unless told
    // otherwise: breadth first would hold every state up to that depth.
    let least = match partition_bug(args) {
        Some(b) => b.least_bound_under(args.strategy),
        None => lock_bug(args).map(LockBug::least_bound).unwrap_or_default(),
    };
    let deep = least.depth_first;
    let depth_first = args.dfs || (deep && !args.bfs);
    // A variant only random walks reach is walked unless a search is named.
    let walks = args
        .walks
        .or(least.walks.filter(|_| !args.dfs && !args.bfs));
    Options {
        // Depth-first is several times faster here; breadth-first finds the shortest
        // counterexample, which is what a known-bad variant is run for.
        search: match (depth_first, args.bfs, args.bug.is_some()) {
            _ if walks.is_some() => Search::Walks {
                seed: walks.unwrap_or_default(),
            },
            (true, _, _) => Search::Dfs,
            (_, true, _) | (_, _, true) => Search::Bfs,
            _ => Search::Dfs,
        },
        // A known-bad variant is run for one trace, the same on every run, which only a
        // single thread guarantees (breadth first, it is also the shortest). Threads
        // race, and the first to meet a counterexample reports it.
        threads: match args.threads {
            Some(asked) => machine_threads(asked),
            None if args.bug.is_some() && walks.is_none() => 1,
            None => machine_threads(defaults::THREADS),
        },
        // Walks never end on their own, and a variant out of the model's reach is
        // searched at a bound too big to finish: both get the time within which the
        // model is to find any variant (issue 42's bound).
        timeout: args
            .timeout
            .map(|t| Duration::from_millis(t.as_millis()))
            .or(
                ((walks.is_some() || least.out_of_reach) && args.max_states.is_none())
                    .then_some(defaults::WALK_TIMEOUT),
            ),
        max_states: args.max_states,
        max_memory: match args.max_memory {
            Some(gib) => Some(u64::from(gib) << 30),
            None => {
                available_bytes().map(|available| available / 100 * defaults::MEMORY_SHARE_PERCENT)
            }
        },
        stop: if args.first || args.bug.is_some() {
            Stop::FirstCounterexample
        } else {
            Stop::Never
        },
        interrupt: Some(leasehold_sims::cli::interrupt::flag()),
    }
}

/// The note a check whose horizon ends before its liveness bound prints first: no
/// state is old enough for a liveness property to be judged, so their verdicts are
/// vacuous (`check --horizon 1` reported every property as holding without a word).
fn short_horizon(horizon: u8, liveness_ticks: u8) -> String {
    if horizon >= liveness_ticks {
        return String::new();
    }
    format!(
        "  note: the horizon ({horizon} s) ends before the liveness bound ({liveness_ticks} s \
         after the last fault): no state is judged for liveness, so its verdicts are vacuous\n"
    )
}

/// The note a variant the model does not show prints before it runs, so that a clean
/// verdict is not taken for the variant's.
///
/// `cap` is the default limit the command line applied because neither `--timeout` nor
/// `--max-states` was given; `shown_by` a path built by hand that shows the variant at
/// its least bound.
fn out_of_reach(target: &str, bug: &str, cap: Option<Duration>, shown_by: Option<&str>) -> String {
    let cap = cap.map_or(String::new(), |t| {
        format!(
            " The search stops after {} s unless --timeout or --max-states says otherwise.",
            t.as_secs()
        )
    });
    let shown = shown_by.map_or(String::new(), |path| {
        format!(
            "\n  a path built by hand shows it at its least bound (no search found it there): \
             leasehold check {target} --bug {bug} --replay {path}"
        )
    });
    format!(
        "  note: the model does not show {bug} in seconds: no bound that fits on these machines \
         is known to, the least one known takes minutes (BENCHMARKS.md), or it breaks no property \
         the model has; the engine's tests and the simulator keep it (docs/limitations.md).{cap}\
         {shown}\n"
    )
}

fn run_check(args: ModelArgs) -> Result<ExitCode, String> {
    let options = options_of(&args);
    match args.target {
        Target::Partitions => {
            let model = model_of(&args)?;
            let command = format!("leasehold check partitions {}", check::flags(&model.bounds));
            let mut header = check::header(&model, &options);
            header.push_str(&short_horizon(model.bounds.horizon, model.liveness_ticks));
            if let Some(bug) = partition_bug(&args).filter(|b| b.least_bound().out_of_reach) {
                let cap = options.timeout.filter(|_| args.timeout.is_none());
                let shown_by = bug.least_bound().shown_by;
                header.push_str(&out_of_reach("partitions", bug.name(), cap, shown_by));
            }
            check_or_replay(&model, &args, &options, &header, &command)
        }
        Target::Queue => {
            let bounds = lock_bounds_of(&args, LockKind::Queue)?;
            let model = QueueModel::new(bounds).map_err(|e| e.to_string())?;
            let command = format!("leasehold check queue {}", check::lock_flags(&model.bounds));
            let mut header = check::lock_header(
                LockKind::Queue,
                &model.bounds,
                model.liveness_ticks,
                &options,
            );
            header.push_str(&short_horizon(model.bounds.horizon, model.liveness_ticks));
            if let Some(bug) = model.bounds.bug.filter(|b| b.least_bound().out_of_reach) {
                header.push_str(&out_of_reach(
                    "queue",
                    bug.name(),
                    None,
                    bug.least_bound().shown_by,
                ));
            }
            check_or_replay(&model, &args, &options, &header, &command)
        }
        Target::Items => {
            let bounds = lock_bounds_of(&args, LockKind::Items)?;
            let model = ItemModel::new(bounds).map_err(|e| e.to_string())?;
            let command = format!("leasehold check items {}", check::lock_flags(&model.bounds));
            let mut header = check::lock_header(
                LockKind::Items,
                &model.bounds,
                model.liveness_ticks,
                &options,
            );
            header.push_str(&short_horizon(model.bounds.horizon, model.liveness_ticks));
            check_or_replay(&model, &args, &options, &header, &command)
        }
    }
}

fn check_or_replay<M>(
    model: &M,
    args: &ModelArgs,
    options: &Options,
    header: &str,
    command: &str,
) -> Result<ExitCode, String>
where
    M: Checkable + Explain,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + PartialEq + Send + Sync + 'static,
{
    if let Some(encoded) = &args.replay {
        let (text, broken) = check::replay(model, encoded)?;
        print!("{text}");
        return Ok(ExitCode::from(if broken { 1 } else { 0 }));
    }
    print!("{header}");
    let report = leasehold_model::check::check(model, options, Duration::from_secs(5), |p| {
        eprintln!("{}", check::progress_line(p));
    });
    print!("{}", check::render_report(model, &report, command));
    if options
        .interrupt
        .as_ref()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    {
        println!("interrupted (Ctrl-C): the counts above are what was explored");
        return Ok(ExitCode::from(leasehold_sims::cli::interrupt::EXIT));
    }
    Ok(ExitCode::from(check::verdict(&report).exit_code()))
}

fn lock_bounds_of(args: &ModelArgs, kind: LockKind) -> Result<LockBounds, String> {
    if args.unreduced {
        return Err(
            "--unreduced applies to partitions: the lock models read wall clocks, so they fold nothing"
                .into(),
        );
    }
    // The partition model's bounds mean nothing to the lock models: refused, rather
    // than ignored without a word.
    let partition_only = [
        ("--splits", args.splits.is_some()),
        ("--shutdowns", args.shutdowns.is_some()),
        ("--zombies", args.zombies.is_some()),
        ("--deploy", args.deploy),
        ("--throttled-reads", args.throttled_reads.is_some()),
        ("--faults-per-step", args.faults_per_step.is_some()),
        ("--slow-drains", args.slow_drains.is_some()),
        ("--stuck-calls", args.stuck_calls.is_some()),
        ("--progress", args.progress.is_some()),
        ("--checkpoint-items", args.checkpoint_items.is_some()),
        ("--margin", args.margin.is_some()),
        ("--liveness", args.liveness.is_some()),
    ];
    if let Some((flag, _)) = partition_only.into_iter().find(|(_, given)| *given) {
        return Err(format!(
            "{flag} applies to partitions, not to the {}",
            match kind {
                LockKind::Queue => "work queue",
                LockKind::Items => "item leases",
            }
        ));
    }
    let bug = match &args.bug {
        Some(name) => Some(LockBug::parse(name, kind).map_err(|e| e.to_string())?),
        None => None,
    };
    // Every bound not given: the variant's least bound where it has one.
    let least = bug.map(LockBug::least_bound).unwrap_or_default();
    let d = defaults::lock_bounds();
    let mut bounds = LockBounds {
        clients: args.hosts.or(least.hosts).unwrap_or(d.clients),
        // A large payload is the one message its producer writes.
        docs: args
            .partitions
            .or(least.partitions)
            .unwrap_or(if args.large || args.claims { 1 } else { d.docs }),
        crashes: args.crashes.or(least.crashes).unwrap_or(d.crashes),
        pauses: args.pauses.or(least.pauses).unwrap_or(d.pauses),
        lost_replies: args
            .lost_replies
            .or(least.lost_replies)
            .unwrap_or(d.lost_replies),
        delays: args.delays.or(least.delays).unwrap_or(d.delays),
        skew: args.skew.or(least.skew).unwrap_or(d.skew),
        drift_ms: args.drift,
        horizon: 1,
        give_backs: args.give_backs.or(least.give_backs).unwrap_or(d.give_backs),
        renewals: args.renewals.unwrap_or(d.renewals),
        abandon_delay: args.abandon_delay.unwrap_or(d.abandon_delay),
        batch: args.batch.unwrap_or(d.batch),
        max_dequeue: args
            .max_dequeue
            .or(least.max_dequeue)
            .unwrap_or(d.max_dequeue),
        late_replies: args
            .late_replies
            .or(least.late_replies)
            .unwrap_or(d.late_replies),
        large: args.large,
        claims: args.claims,
        claim_failures: args.claim_failures.unwrap_or(d.claim_failures),
        stale_reads: args
            .stale_reads
            .or(least.stale_reads)
            .unwrap_or(d.stale_reads),
        stale_depth: args
            .stale_depth
            .or(least.stale_depth)
            .unwrap_or(d.stale_depth),
        retries: args.retries.or(least.retries).unwrap_or(d.retries),
        dead_letter_deletes: args
            .dead_letter_deletes
            .or(least.dead_letter_deletes)
            .unwrap_or(d.dead_letter_deletes),
        overruns: args.overruns.or(least.overruns).unwrap_or(d.overruns),
        lock_ticks: args
            .lock_duration
            .or(least.lock_ticks)
            .unwrap_or(d.lock_ticks),
        bug,
    };
    bounds.horizon = match args.horizon.or(least.horizon) {
        Some(h) => h,
        None => bounds
            .liveness_ticks(kind)
            .saturating_add(defaults::LOCK_HORIZON_PAST_LIVENESS)
            .min(defaults::HORIZON_CAP),
    };
    Ok(bounds)
}

fn run_explore(args: ExploreArgs) -> Result<ExitCode, String> {
    if args.model.replay.is_some() {
        return Err("--replay is for `leasehold check`: the Explorer walks states by hand".into());
    }
    let asked = std::net::SocketAddr::from(([127, 0, 0, 1], args.port));
    // The Explorer panics on a port in use; ask first, to say so plainly. The probe
    // also learns the port the system chose for `--port 0`, which is then announced
    // (it printed port 0 before).
    let probe =
        std::net::TcpListener::bind(asked).map_err(|e| format!("cannot serve on {asked}: {e}"))?;
    let address = probe
        .local_addr()
        .map_err(|e| format!("cannot serve on {asked}: {e}"))?;
    drop(probe);
    // The Explorer serves until stopped: no time limit applies to it, nor is one shown.
    let options = Options {
        timeout: None,
        ..options_of(&args.model)
    };
    let announce = |header: String| {
        print!("{header}");
        println!("serving the Explorer on http://{address}/ (Ctrl-C to stop)");
    };
    let lock_header =
        |kind, bounds: &LockBounds, ticks| check::lock_header(kind, bounds, ticks, &options);
    let served = match args.model.target {
        Target::Partitions => {
            let model = model_of(&args.model)?;
            announce(check::header(&model, &options));
            explore::serve(model, address)
        }
        Target::Queue => {
            let bounds = lock_bounds_of(&args.model, LockKind::Queue)?;
            let model = QueueModel::new(bounds).map_err(|e| e.to_string())?;
            announce(lock_header(
                LockKind::Queue,
                &model.bounds,
                model.liveness_ticks,
            ));
            explore::serve(model, address)
        }
        Target::Items => {
            let bounds = lock_bounds_of(&args.model, LockKind::Items)?;
            let model = ItemModel::new(bounds).map_err(|e| e.to_string())?;
            announce(lock_header(
                LockKind::Items,
                &model.bounds,
                model.liveness_ticks,
            ));
            explore::serve(model, address)
        }
    };
    served.map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

/// The text of `path` (`-` for stdin), without the UTF-8 byte order mark that files
/// saved by Windows tools often start with.
fn read_input(path: &PathBuf) -> Result<String, String> {
    let text = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read stdin: {e}"))?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
    };
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument id of `sub` in the command line.
    fn ids(sub: &str) -> Vec<String> {
        let cli = command();
        let sub = cli.find_subcommand(sub).expect("the subcommand exists");
        sub.get_arguments()
            .map(|a| a.get_id().to_string())
            .collect()
    }

    #[test]
    fn no_flag_states_its_default_by_hand() {
        assert_eq!(
            defaults::stated_by_hand(&Cli::command()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_model_default_names_a_flag_of_check_and_explore() {
        for sub in ["check", "explore"] {
            let ids = ids(sub);
            for (id, _) in defaults::model_defaults() {
                assert!(ids.iter().any(|i| i == id), "{sub} has no --{id}");
            }
        }
    }

    #[test]
    fn every_valued_flag_of_sim_shows_one_default_from_the_code() {
        let cli = command();
        let sim = cli.find_subcommand("sim").expect("sim exists");
        // Flags whose absence means "not asked for", not a value.
        let unvalued = [
            "scenario", "seeds", "faults", "bug", "json", "svg", "quiet", "help", "version",
        ];
        for arg in sim.get_arguments() {
            let id = arg.get_id().as_str();
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let stated = help.matches("[default").count();
            assert!(stated <= 1, "--{id} states {stated} defaults: {help}");
            if unvalued.contains(&id) || !arg.get_default_values().is_empty() {
                continue;
            }
            assert_eq!(stated, 1, "--{id}: {help}");
        }
    }

    #[test]
    fn every_flag_of_check_without_a_clap_default_shows_one_from_the_code() {
        let cli = command();
        let check = cli.find_subcommand("check").expect("check exists");
        // Flags whose absence means "not asked for", not a value.
        let unvalued = [
            "deploy",
            "unreduced",
            "large",
            "claims",
            "bug",
            "dfs",
            "bfs",
            "walks",
            "timeout",
            "max_states",
            "first",
            "replay",
            "help",
            "version",
        ];
        for arg in check.get_arguments() {
            let id = arg.get_id().as_str();
            if unvalued.contains(&id) || !arg.get_default_values().is_empty() {
                continue;
            }
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(help.contains("[default: "), "--{id}: {help}");
        }
    }
}
