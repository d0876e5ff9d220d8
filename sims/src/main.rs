//! The `leasehold` command line.

use clap::{Parser, Subcommand, ValueEnum};
use leasehold_engine::{Millis, WallTime};
use leasehold_sims::balance::{self, Question};
use leasehold_sims::snapshot;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "leasehold",
    version,
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
}

#[derive(clap::Args)]
struct BalanceArgs {
    /// The balancing strategy.
    #[arg(long, value_enum, default_value_t = StrategyName::Handoff)]
    strategy: StrategyName,
    /// The instance name of the host that decides.
    #[arg(long)]
    host: String,
    /// A JSON array of lease documents in the change feed processor's format; `-` reads stdin.
    #[arg(long, value_name = "FILE")]
    leases: PathBuf,
    /// The decision time [default: this machine's clock].
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

#[derive(Clone, Copy, ValueEnum)]
enum StrategyName {
    /// The .NET change feed processor's EqualPartitionsBalancingStrategy.
    Cfp,
    /// leasehold's cooperative handoff.
    Handoff,
}

fn parse_now(text: &str) -> Result<WallTime, String> {
    snapshot::parse_time(text)
}

fn parse_duration(text: &str) -> Result<Millis, String> {
    humantime::parse_duration(text)
        .map(Millis::from)
        .map_err(|e| format!("{e} (write a unit, such as 60s or 10m)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Balance(args) => run_balance(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_balance(args: BalanceArgs) -> Result<(), String> {
    let strategy = match args.strategy {
        StrategyName::Cfp => "cfp",
        StrategyName::Handoff => "handoff",
    };
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
    let leases = snapshot::parse(&text).map_err(|e| format!("{source}: {e}"))?;
    let answer = balance::decide(&leases, &question);
    let json = serde_json::to_string(&answer).map_err(|e| e.to_string())?;
    println!("{json}");
    Ok(())
}

fn read_input(path: &PathBuf) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read stdin: {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}
