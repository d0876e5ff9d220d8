//! Deploys: a host believed crashed that acts on until its authority ends (a zombie)
//! while a new life starts under its name, and a deploy half done, whose hosts run
//! leases of two lengths. Each is checked under session liveness, lease liveness and
//! `cfp`, beside the known-bad variant that trusts the name, or its own settings.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::Liveness;
use leasehold_model::check::{self, Options, Outcome, Search, Stop};
use leasehold_model::{Bounds, Bug, PartitionModel, properties as p, trace};
use std::time::Duration;

fn model(bounds: Bounds) -> PartitionModel {
    PartitionModel::new(bounds).expect("valid bounds")
}

/// Every state of `bounds`; every safety and liveness property holds.
fn proven(bounds: Bounds) {
    let model = model(bounds);
    let options = Options {
        search: Search::Dfs,
        threads: 2,
        ..Options::default()
    };
    let report = check::check(&model, &options, Duration::from_secs(600), |_| {});
    println!(
        "{:?}\n  {} states, {} unique, {:.1} s",
        model.bounds, report.progress.states, report.progress.unique, report.progress.seconds
    );
    assert!(report.complete, "the check must explore every state");
    for property in p::SAFETY.iter().chain(&p::LIVENESS) {
        assert_eq!(
            report.verdict(property).outcome,
            Outcome::Holds,
            "{property}"
        );
    }
}

/// A counterexample to `property` under `bounds`, breadth first on one thread (the
/// shortest), printed and replayed to a state that breaks it; its length in steps.
fn broken(bounds: Bounds, property: &'static str) -> usize {
    let model = model(bounds);
    let options = Options {
        search: Search::Bfs,
        threads: 1,
        stop: Stop::At(property),
        ..Options::default()
    };
    let report = check::check(&model, &options, Duration::from_secs(600), |_| {});
    let verdict = report.verdict(property);
    assert_eq!(verdict.outcome, Outcome::Counterexample, "{property}");
    let path = verdict.path.as_ref().expect("a counterexample has a path");
    println!(
        "COUNTEREXAMPLE to {property:?} in {:?}:\n{}",
        model.bounds,
        trace::render(&model, path)
    );
    let encoded = verdict.encoded.as_ref().expect("an encoded path");
    let replayed = check::replay(&model, encoded).expect("the path replays");
    let last = &replayed.last().expect("a last state").0;
    assert!(p::broken(&model, last).contains(&property));
    path.len() - 1
}

/// The three protocols a group may run.
const PROTOCOLS: [(Strategy, Option<Liveness>); 3] = [
    (Strategy::Handoff, Some(Liveness::Session)),
    (Strategy::Handoff, Some(Liveness::Lease)),
    (Strategy::CFP, None),
];

/// One host, one partition, no crash: the host becomes a zombie, cut off from the
/// store with its lease's call running, and its name may start again.
fn zombie(strategy: Strategy, liveness: Option<Liveness>) -> Bounds {
    Bounds {
        hosts: 1,
        partitions: 1,
        crashes: 0,
        zombies: 1,
        lost_replies: 0,
        delays: 0,
        strategy,
        liveness,
        ..Bounds::default()
    }
}

#[test]
fn a_new_life_under_a_zombies_name_never_processes_beside_it() {
    for (strategy, liveness) in PROTOCOLS {
        proven(zombie(strategy, liveness));
    }
}

#[test]
fn a_new_life_that_takes_its_name_as_proof_of_death_processes_beside_its_zombie() {
    for (strategy, liveness) in PROTOCOLS {
        let bounds = Bounds {
            bug: Some(Bug::NameProvesDeath),
            ..zombie(strategy, liveness)
        };
        assert!(broken(bounds, p::EXCLUSIVITY) > 0);
    }
}

/// Two hosts, one partition: h1 runs the next build's lease, twice as long as h0's,
/// and becomes a zombie while it holds the lease.
fn deploy(strategy: Strategy, liveness: Option<Liveness>) -> Bounds {
    Bounds {
        hosts: 2,
        deploy: true,
        ..zombie(strategy, liveness)
    }
}

#[test]
fn hosts_of_two_builds_wait_out_each_others_leases() {
    for (strategy, liveness) in PROTOCOLS {
        proven(deploy(strategy, liveness));
    }
}

#[test]
fn a_host_that_judges_a_lease_by_its_own_settings_takes_it_from_a_longer_holder() {
    for (strategy, liveness) in PROTOCOLS {
        let bounds = Bounds {
            bug: Some(Bug::OwnSettingsOnly),
            ..deploy(strategy, liveness)
        };
        assert_eq!(broken(bounds, p::EXCLUSIVITY), 12);
    }
}

/// The new life's own renewal lands and is answered 412 by the SDK's retry: it loses
/// the lease and finds it again, named after it. The fence it owed its zombie is in
/// the document, so it still waits (the long swarm found the new life processing
/// beside its zombie; the model at this bound, in 8 steps, under lease liveness).
#[test]
fn a_new_life_whose_own_write_comes_back_412_still_waits_out_its_zombie() {
    for (strategy, liveness) in PROTOCOLS {
        proven(Bounds {
            retries: 1,
            ..zombie(strategy, liveness)
        });
    }
}
