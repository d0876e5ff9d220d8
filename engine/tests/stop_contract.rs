//! The stop contract: a session lasts from its start until the driver reports its
//! call ended, whatever stopped it, and a session that starts after a lost authority
//! never shares the epoch of a call that may still be running.

mod common;

use common::{Cluster, config};
use leasehold_engine::lease::{
    Input, InputError, Intent, KnownBad, LeaseConfig, LossCause, Output, StopReason,
};
use leasehold_engine::{Checkpoint, Epoch, LeaseToken, Millis, Session};

/// Every start `name` made: lease, epoch, session.
fn starts(c: &Cluster, name: &str) -> Vec<(String, Epoch, Session)> {
    c.events_of(name)
        .into_iter()
        .filter_map(|o| match o {
            Output::Start {
                lease,
                epoch,
                session,
                ..
            } => Some((lease.to_string(), *epoch, *session)),
            _ => None,
        })
        .collect()
}

fn lost(c: &Cluster, name: &str) -> usize {
    c.events_of(name)
        .into_iter()
        .filter(|o| {
            matches!(
                o,
                Output::Stop {
                    reason: StopReason::Lost(_),
                    ..
                }
            )
        })
        .count()
}

/// `a` processes lease 0, then is cut off from the store until its authority lapses;
/// its handler's call does not end.
fn lapsed_with_a_call_still_running(config: LeaseConfig) -> Cluster {
    let mut c = Cluster::new();
    c.add("a", config);
    c.nodes.get_mut("a").unwrap().auto_ack = false;
    c.run_for(100);
    assert_eq!(starts(&c, "a").len(), 1);
    c.nodes.get_mut("a").unwrap().reachable = false;
    c.run_for(10_000);
    assert_eq!(lost(&c, "a"), 1, "authority lapsed");
    c.nodes.get_mut("a").unwrap().reachable = true;
    c
}

#[test]
fn a_lost_lease_does_not_start_again_until_its_call_has_ended() {
    let mut c = lapsed_with_a_call_still_running(config(1));
    let first = c.session("a", "0");
    // Renewals succeed again, but the old call still runs.
    c.run_for(5_000);
    assert_eq!(
        starts(&c, "a").len(),
        1,
        "no second session while the first runs"
    );
    assert_eq!(c.lease("0").owner.as_ref().map(|o| o.as_str()), Some("a"));
    assert_eq!(c.lease("0").epoch, Epoch(2), "the resume raised the epoch");
    // Its checkpoints are refused: it has no authority.
    let late = Input::Checkpoint {
        lease: LeaseToken::from("0"),
        session: first,
        checkpoint: Checkpoint::from("9"),
        items: 1,
    };
    assert!(matches!(
        c.input("a", late),
        Err(InputError::NotProcessing { .. })
    ));
    c.stopped("a", "0");
    c.run_for(100);
    let all = starts(&c, "a");
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[1].1,
        Epoch(2),
        "the new session starts at the new epoch"
    );
    assert_ne!(all[1].2, first);
}

/// The race the issue names: a renewal sent before the lapse lands after it, so
/// authority at the old epoch comes back while the lost call may still run.
fn renewal_landing_after_the_lapse(config: LeaseConfig) -> Cluster {
    let mut c = Cluster::new();
    c.add("a", config);
    c.run_for(100);
    c.time = 3_000;
    c.input("a", Input::Tick).unwrap();
    let renew = c.intercept("a", Intent::Renew);
    // Authority from the acquire ends at 9.4 s; the renewal would carry it to 12.4 s.
    c.time = 10_000;
    c.input("a", Input::Tick).unwrap();
    assert_eq!(
        lost(&c, "a"),
        1,
        "authority lapsed while the renewal was in flight"
    );
    let result = c.store.execute(renew.op.clone());
    c.answer("a", &renew, result);
    c.run_for(1_000);
    c
}

#[test]
fn a_renewal_that_lands_after_the_lapse_restarts_the_lease_at_a_new_epoch() {
    let c = renewal_landing_after_the_lapse(config(1));
    let epochs: Vec<Epoch> = starts(&c, "a").iter().map(|s| s.1).collect();
    assert_eq!(epochs, [Epoch(1), Epoch(2)]);
    assert!(c.sent.iter().any(|(_, _, r)| r.intent == Intent::Resume));
}

#[test]
fn the_old_lifecycle_restarts_at_the_same_epoch_and_is_caught() {
    let mut bad = config(1);
    bad.known_bad = Some(KnownBad::RestartSameEpoch);
    let c = renewal_landing_after_the_lapse(bad);
    let epochs: Vec<Epoch> = starts(&c, "a").iter().map(|s| s.1).collect();
    assert_eq!(epochs, [Epoch(1), Epoch(1)], "two sessions share epoch 1");

    let mut bad = config(1);
    bad.known_bad = Some(KnownBad::RestartSameEpoch);
    let mut c = lapsed_with_a_call_still_running(bad);
    c.run_for(5_000);
    assert_eq!(
        starts(&c, "a").len(),
        2,
        "restarted while the lost call was still running"
    );
}

#[test]
fn a_call_that_never_ends_makes_the_host_give_the_lease_up_after_the_stop_timeout() {
    let mut cfg = config(1);
    cfg.stop_timeout = Millis::from_secs(20);
    let mut c = lapsed_with_a_call_still_running(cfg.clone());
    c.add("b", cfg);
    c.run_for(15_000);
    assert_eq!(c.lease("0").owner.as_ref().map(|o| o.as_str()), Some("a"));
    assert_eq!(
        starts(&c, "b").len(),
        0,
        "a still holds the lease it cannot process"
    );
    // The lapse was at about 9.4 s; the stop timeout runs out at about 29.4 s, and
    // the lease goes to the other live member, under a new epoch.
    c.run_for(10_000);
    let doc = c.lease("0");
    assert_eq!(
        doc.owner.as_ref().map(|o| o.as_str()),
        Some("b"),
        "given up"
    );
    // The handoff raised the epoch past a's resume (3); b, given a lease it never
    // claimed, cannot tell it from one an earlier life of its own left, and resumes
    // it at a new epoch once that version would have expired.
    assert!(
        doc.epoch >= Epoch(3),
        "the handoff raised the epoch past the resume: {doc:?}"
    );
    c.run_for(30_000);
    assert_eq!(c.lease("0").owner.as_ref().map(|o| o.as_str()), Some("b"));
    assert_eq!(
        starts(&c, "a").len(),
        1,
        "the stuck host never takes it back"
    );
    let b_starts = starts(&c, "b");
    assert_eq!(b_starts.len(), 1);
    assert!(b_starts[0].1 > Epoch(1));
}

#[test]
fn a_stop_timeout_of_zero_is_refused() {
    let mut cfg = config(1);
    cfg.stop_timeout = Millis::ZERO;
    assert_eq!(
        cfg.validate(),
        Err(leasehold_engine::lease::ConfigError::ZeroStopTimeout)
    );
}

#[test]
fn a_drain_told_it_is_lost_stays_stopping_until_it_ends() {
    let mut c = Cluster::new();
    c.add("a", config(1));
    c.nodes.get_mut("a").unwrap().auto_ack = false;
    c.run_for(100);
    let session = c.session("a", "0");
    c.input("a", Input::Shutdown).unwrap();
    c.run_for(20_000);
    let host = &c.nodes["a"].host;
    let runs: Vec<_> = host.sessions().map(|(t, r)| (t.to_string(), *r)).collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].1.session, session);
    assert!(runs[0].1.is_lost());
    assert!(matches!(
        runs[0].1.stage,
        leasehold_engine::lease::Stage::Stopping {
            reason: StopReason::Lost(LossCause::AuthorityLapsed),
            ..
        }
    ));
}

/// Alone in its group under session liveness, a host whose lost call outlived the
/// stop timeout keeps the lease: nobody else could take it, and freed, the plans
/// would give it back to this host, which cannot take it while the call runs (the
/// model's `stuck-call-strands`). Once the call finally stops, it processes the
/// lease again. (It used to give the lease up to nobody and take it back then; its
/// plan had once settled while the session ran and nothing planned again, found by
/// the runtime's test of a call blocked in synchronous code,
/// `adapters/tests/authority.rs`.)
#[test]
fn a_lone_host_keeps_the_lease_past_the_stop_timeout_and_processes_it_once_the_call_stops() {
    let mut cfg = common::session_config(1);
    cfg.stop_timeout = Millis::from_secs(6);
    let mut c = lapsed_with_a_call_still_running(cfg);
    c.run_for(10_000);
    assert_eq!(
        c.lease("0").owner.as_ref().map(|o| o.as_str()),
        Some("a"),
        "kept past the stop timeout"
    );
    assert_eq!(starts(&c, "a").len(), 1);
    c.stopped("a", "0");
    c.run_for(30_000);
    let all = starts(&c, "a");
    assert_eq!(
        all.len(),
        2,
        "processed again once the call stopped: {all:?}"
    );
    assert!(all[1].1 > all[0].1);
}
