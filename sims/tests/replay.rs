//! A replay command rebuilds exactly the run it was printed for. The run's
//! configuration and the command line share one declaration (`sims/src/sim/flags.rs`):
//! flags are laid over the scenario's defaults, and the replay prints the settings
//! that differ from them.

use clap::Parser;
use leasehold_engine::Millis;
use leasehold_sims::cli::queue as queue_cli;
use leasehold_sims::cli::sim::{SimArgs, config_of};
use leasehold_sims::sim::queue::{QueueScenario, replay_command as queue_replay};
use leasehold_sims::sim::{Scenario, SimConfig, SimError, flags, replay_command, swarm};

#[derive(Parser)]
struct Sim {
    #[command(flatten)]
    args: SimArgs,
}

/// `leasehold sim …` read by the command line's own parser.
fn parse(command: &str) -> Result<SimArgs, String> {
    let words = command.split_whitespace().skip(2);
    Sim::try_parse_from(std::iter::once("sim").chain(words))
        .map(|s| s.args)
        .map_err(|e| format!("{command}: {e}"))
}

fn rebuild(command: &str) -> Result<SimConfig, String> {
    let args = parse(command)?;
    let scenario: Scenario = args.scenario.parse().map_err(|e: SimError| e.to_string())?;
    config_of(&args, scenario, &args.strategy).map_err(|e| e.to_string())
}

#[test]
fn every_swarm_runs_replay_command_rebuilds_that_run() {
    let (mut lease, mut queue) = (0, 0);
    for seed in 0..400 {
        if swarm::is_queue_seed(seed) {
            let cfg = swarm::draw_queue(seed);
            let command = queue_replay(&cfg);
            let args = parse(&command).unwrap();
            let scenario: QueueScenario = args.scenario.parse().unwrap();
            let rebuilt = queue_cli::config_of(&args, scenario).unwrap();
            assert_eq!(rebuilt, cfg, "seed {seed}: {command}");
            queue += 1;
        } else {
            let cfg = swarm::draw(seed);
            let command = replay_command(&cfg);
            assert_eq!(rebuild(&command), Ok(cfg), "seed {seed}");
            lease += 1;
        }
    }
    assert!(
        lease > 100 && queue > 20,
        "{lease} lease and {queue} queue runs"
    );
}

/// The sibling: a setting no flag carries does not survive the replay, and the
/// comparison above would say so.
#[test]
fn a_setting_without_a_flag_is_caught() {
    let mut cfg = swarm::draw(0);
    cfg.network.tail_one_in = 7;
    assert_ne!(rebuild(&replay_command(&cfg)), Ok(cfg.clone()));
    // A changed setting with no flag shows in the command, which the parser refuses.
    cfg.workload.per_event_us += 1;
    let refused = rebuild(&replay_command(&cfg)).unwrap_err();
    assert!(refused.contains("--per-event-us"), "{refused}");
}

#[test]
fn every_lease_flag_reaches_its_setting() {
    let command = "leasehold sim scale-out --seed 3 --strategy cfp --hosts 7 --duration 3m \
        --settle 9m --faults crash=2 --drift-bound 20000 --margin 3s --poll 4s --max-batch 50 \
        --bug blind-acquire --trace 12 --partitions 31 --from 2 --affected 2 --interval 45s \
        --warmup 90s --liveness lease --audit 2m --expiry timestamp --expiration 50s \
        --renew 10s --acquire 11s --rate 2.5 --hot-factor 3";
    let args = parse(command).unwrap();
    let cfg = rebuild(command).unwrap();
    let base = SimConfig::scenario(Scenario::ScaleOut, 3);
    let differs = |name: &str| {
        let a = serde_json::to_value(&cfg).unwrap();
        let b = serde_json::to_value(&base).unwrap();
        a[name] != b[name]
    };
    let given: Vec<String> = [flags::given(&args.run), flags::given(&args.lease)].concat();
    assert_eq!(given.len(), 23, "{given:?}");
    for name in given {
        assert!(differs(&name), "--{name} changed nothing");
    }
    assert_eq!(cfg.margin, Millis::from_secs(3));
    // And the replay of that run names every one of them again.
    assert_eq!(rebuild(&replay_command(&cfg)), Ok(cfg));
}

#[test]
fn every_queue_flag_reaches_its_setting() {
    let command = "leasehold sim queue --seed 5 --hosts 3 --messages 80 --backlog 20 --lock 20s \
        --lock-watch 2s --max-dequeue 4 --poison-every 9 --fail-one-in 11 --max-batch 3 \
        --settle 4m --duration 2m --poll 700ms --margin 1s --drift-bound 5000 --trace 9 \
        --bug blind-claim --faults pause=3";
    let args = parse(command).unwrap();
    let scenario: QueueScenario = args.scenario.parse().unwrap();
    let cfg = queue_cli::config_of(&args, scenario).unwrap();
    let command_again = queue_replay(&cfg);
    for flag in command.split_whitespace().filter(|w| w.starts_with("--")) {
        assert!(command_again.contains(flag), "{flag} lost: {command_again}");
    }
    let again = parse(&command_again).unwrap();
    assert_eq!(queue_cli::config_of(&again, scenario).unwrap(), cfg);
}

#[test]
fn a_flag_that_names_no_setting_is_refused() {
    let base = SimConfig::scenario(Scenario::Steady, 1);
    let mut settings = serde_json::Map::new();
    settings.insert("lock".into(), serde_json::Value::String("30s".into()));
    let refused = flags::overlay(&base, settings).unwrap_err();
    assert_eq!(
        refused,
        SimError::Setting("--lock sets nothing here".into())
    );
}

#[test]
fn flags_of_the_other_kind_of_scenario_are_refused_by_name() {
    let lease = rebuild("leasehold sim steady --lock 30s").unwrap_err();
    assert_eq!(lease, "--lock does not apply to steady");
    let args = parse("leasehold sim queue --expiration 30s").unwrap();
    let queue = queue_cli::config_of(&args, QueueScenario::Queue).unwrap_err();
    assert_eq!(queue.to_string(), "--expiration does not apply to queue");
}
