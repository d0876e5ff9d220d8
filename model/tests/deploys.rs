//! Deploys: a host believed crashed that acts on until its authority ends (a zombie)
//! while a new life starts under its name, and a deploy half done, whose hosts run
//! leases of two lengths. Each is checked under session liveness, lease liveness and
//! `cfp`, beside the known-bad variant that trusts the name, or its own settings.

/// The checks allocate and free states at a high rate; the CLI uses the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use common::broken;
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::Liveness;
use leasehold_model::check::Outcome;
use leasehold_model::{Bounds, Bug, KnownBad, PartitionReport, properties as p};

/// Every state of `bounds`; every safety and liveness property holds.
fn proven(bounds: Bounds) -> PartitionReport {
    common::proven_for(bounds, p::SAFETY.iter().chain(&p::LIVENESS))
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
            bug: Some(Bug::Engine(KnownBad::NameProvesDeath)),
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
    let steps = PROTOCOLS.map(|(strategy, liveness)| {
        let bounds = Bounds {
            bug: Some(Bug::OwnSettingsOnly),
            ..deploy(strategy, liveness)
        };
        broken(bounds, p::EXCLUSIVITY)
    });
    assert_eq!(steps, [10, 10, 9]);
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

/// Two hosts, two partitions under `cfp`, a deploy half done: h0, of the build with
/// the shorter lease, steals one of h1's leases while h1's write to it is held on
/// the wire, then crashes and starts again under its name. Its new life inherits
/// the fence from the document. A horizon of 6 s covers the steal, the restart and
/// the shorter wait; liveness needs a longer one and is checked elsewhere.
fn a_thief_restarts(bug: Option<Bug>) -> Bounds {
    Bounds {
        hosts: 2,
        partitions: 2,
        crashes: 1,
        lost_replies: 0,
        delays: 1,
        deploy: true,
        horizon: 6,
        strategy: Strategy::CFP,
        bug,
        ..Bounds::default()
    }
}

/// The fenced lease keeps the longer terms of the holder it was stolen from, so the
/// thief's new life waits them out (the long swarm found it processing beside the
/// holder: rolling-restart seed 2234772, a deploy that shortened the lease).
#[test]
fn a_restarted_thief_waits_out_the_longer_lease_it_stole() {
    common::proven_for(a_thief_restarts(None), &p::SAFETY);
}

#[test]
fn a_fence_written_under_the_thiefs_terms_alone_lets_its_new_life_process_beside_the_holder() {
    let steps = broken(
        a_thief_restarts(Some(Bug::Engine(KnownBad::FenceForgetsTerms))),
        p::EXCLUSIVITY,
    );
    assert_eq!(steps, 12);
}

/// Two hosts, two partitions under handoff with lease liveness: h0 claims a lease of
/// h1's, is handed it, renews it and becomes a zombie. Its new life's first read of
/// the table comes from a replica two writes behind (a new session has seen
/// nothing), which still shows h1 as the owner, so the new life claims the lease too.
fn a_zombie_was_handed_a_lease(bug: Option<Bug>, stale_depth: u8) -> Bounds {
    Bounds {
        hosts: 2,
        partitions: 2,
        crashes: 0,
        zombies: 1,
        lost_replies: 0,
        delays: 0,
        stale_reads: 1,
        stale_depth,
        horizon: 6,
        strategy: Strategy::Handoff,
        liveness: Some(Liveness::Lease),
        bug,
        ..Bounds::default()
    }
}

/// A handoff names the life it answers, so the new life waits out the version its
/// zombie was handed (the long swarm's skewed-clocks seed 2584798: the new life
/// renewed the lease at the zombie's epoch and processed beside it).
#[test]
fn a_new_life_never_takes_a_handoff_its_zombie_was_given() {
    common::proven_for(a_zombie_was_handed_a_lease(None, 2), &p::SAFETY);
}

#[test]
fn a_new_life_that_takes_its_claim_by_name_as_the_handoff_processes_beside_its_zombie() {
    let bounds = a_zombie_was_handed_a_lease(Some(Bug::Engine(KnownBad::ClaimByName)), 2);
    assert!(broken(bounds, p::EXCLUSIVITY) > 0);
}

/// The model gap that hid it: a replica one write behind shows the new life the
/// handoff itself, never the earlier owner, and the claim is never made.
#[test]
fn a_replica_one_write_behind_cannot_show_the_claim_by_name_bug() {
    let report = common::proven_for(
        a_zombie_was_handed_a_lease(Some(Bug::Engine(KnownBad::ClaimByName)), 1),
        &p::SAFETY,
    );
    assert!(report.complete());
}

/// Two hosts, one partition under `cfp`: h0 becomes a zombie while a new life starts
/// under its name. The new life's read of the lease comes from a replica behind,
/// and its take of that version, sent beside the zombie's, has its reply lost: two
/// faults in one host step.
fn a_new_lifes_take_races_its_zombies(bug: Option<Bug>, faults_per_step: u8) -> Bounds {
    Bounds {
        hosts: 2,
        partitions: 1,
        crashes: 0,
        zombies: 1,
        lost_replies: 1,
        delays: 0,
        stale_reads: 1,
        faults_per_step,
        horizon: 6,
        strategy: Strategy::CFP,
        bug,
        ..Bounds::default()
    }
}

/// A lease names the life it was written for, so the new life's read after its lost
/// take tells the zombie's take of the same version from its own (the long swarm's
/// hot-partition seed 4308821).
#[test]
fn a_new_life_whose_take_was_lost_never_runs_beside_its_zombies_take_of_one_version() {
    common::proven_for(a_new_lifes_take_races_its_zombies(None, 2), &p::SAFETY);
}

#[test]
fn a_new_life_that_takes_its_name_at_its_takes_epoch_for_its_own_take_runs_beside_its_zombie() {
    let bounds = a_new_lifes_take_races_its_zombies(Some(Bug::Engine(KnownBad::TakeByName)), 2);
    assert!(broken(bounds, p::EXCLUSIVITY) > 0);
}

/// The model gap that hid it: with one fault a step, the stale read and the lost
/// reply never fall in the same step, and the variant holds.
#[test]
fn one_fault_a_step_cannot_show_the_take_by_name_bug() {
    let report = common::proven_for(
        a_new_lifes_take_races_its_zombies(Some(Bug::Engine(KnownBad::TakeByName)), 1),
        &p::SAFETY,
    );
    assert!(report.complete());
}

/// Two hosts, two partitions, one graceful shutdown and no other fault: the host
/// told to stop marks its heartbeat as leaving, processes on through its notice
/// while the other polls, then releases.
fn announced_leave(strategy: Strategy, liveness: Option<Liveness>) -> Bounds {
    Bounds {
        crashes: 0,
        shutdowns: 1,
        lost_replies: 0,
        delays: 0,
        strategy,
        liveness,
        ..Bounds::default()
    }
}

#[test]
fn a_host_that_announces_its_leave_hands_its_leases_over_safely_and_in_time() {
    for (strategy, liveness) in PROTOCOLS {
        let report = proven(announced_leave(strategy, liveness));
        // Only `handoff` has heartbeats to announce a leave in.
        let expected = match strategy {
            Strategy::Handoff => Outcome::Reached,
            _ => Outcome::NotReached,
        };
        assert_eq!(
            report.verdict(p::LEAVE_NOTICE).outcome,
            expected,
            "{strategy:?} {liveness:?}"
        );
    }
}

/// The sibling: a host alone has nobody to hand its leases to, and leaves at once.
#[test]
fn a_host_alone_leaves_without_a_notice() {
    let bounds = Bounds {
        hosts: 1,
        ..announced_leave(Strategy::Handoff, None)
    };
    let report = proven(bounds);
    assert_eq!(report.verdict(p::LEAVE_NOTICE).outcome, Outcome::NotReached);
}
