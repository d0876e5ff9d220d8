//! Deploys on the real runtime: a host that loses the store while its handler runs
//! on, and a second processor that comes up beside it, under its name (a new life of
//! a host its orchestrator believed dead) or with other settings (a rolling deploy
//! that changed the expiration). The second's calls must never overlap the first's.
//! Time is tokio's paused clock; both processors share one in-memory store.

use leasehold_adapters::engine::lease::{KnownBad, Record};
use leasehold_adapters::engine::store::Op;
use leasehold_adapters::{MemoryFeed, MemoryStore, Processor, Response, Store};
use leasehold_engine::balance::Strategy;
use leasehold_engine::lease::{LEAVE_POLL, Liveness};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A view of the shared store that can be cut off: once `cut` is set, every call
/// hangs until the runtime's request timeout, as for a host partitioned away.
/// `blank` strips the expiry terms from every document written through it, as
/// documents were before they carried them.
#[derive(Clone)]
struct Cuttable {
    inner: MemoryStore<Record>,
    cut: Arc<AtomicBool>,
    blank: bool,
}

impl Store<Record> for Cuttable {
    async fn execute(&self, mut op: Op<Record>) -> Response<Record> {
        if self.cut.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        if self.blank
            && let Op::Create(doc) | Op::Replace { doc, .. } = &mut op
        {
            match doc {
                Record::Lease(d) => d.terms = None,
                Record::Host(d) => d.terms = None,
            }
        }
        self.inner.execute(op).await
    }

    fn charges(&self) -> &leasehold_adapters::Charges {
        self.inner.charges()
    }
}

/// One handler call of one processor: when it started, and when it ended (returned
/// at its cancellation, or aborted).
#[derive(Clone, Debug)]
struct Call {
    who: &'static str,
    lease: String,
    start: Instant,
    end: Option<Instant>,
}

type Log = Arc<Mutex<Vec<Call>>>;

struct Ends(Log, usize);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.lock().unwrap()[self.1].end = Some(Instant::now());
    }
}

/// What the run gets wrong on purpose.
#[derive(Clone, Copy)]
enum Bad {
    /// The engine's switch.
    Engine(KnownBad),
    /// Documents carry no expiry terms.
    Blank,
}

/// How the second processor differs from the first.
#[derive(Clone, Copy)]
struct Second {
    name: &'static str,
    expiration: Duration,
}

/// The first processor, "a" with `first_expiration`, holds the only lease; its
/// cooperative handler runs each call until cancelled. Then a's store is cut off and
/// the second processor starts. Returns every call, in start order.
async fn deploy(
    first_expiration: Duration,
    second: Second,
    liveness: Liveness,
    bad: Option<Bad>,
) -> Vec<Call> {
    let feed = MemoryFeed::new(["0"]);
    for i in 0..200 {
        feed.push("0", format!("item-{i}"));
    }
    let shared = MemoryStore::new();
    let log: Log = Arc::default();
    let processor = |who: &'static str, name: &str, expiration, store: Cuttable| {
        let log = log.clone();
        let mut builder = Processor::builder()
            .instance(name)
            .processor_name("deploy")
            .strategy(Strategy::Handoff)
            .liveness(liveness)
            .acquire_interval(Duration::from_secs(2))
            .renew_interval(Duration::from_secs(3))
            .expiration_interval(expiration)
            .request_timeout(Duration::from_secs(5))
            .abort_grace(Duration::from_secs(1))
            .poll_interval(Duration::from_millis(500))
            .max_batch(1)
            .source(feed.clone())
            .store(store)
            .handler(move |ctx, _batch| {
                let log = log.clone();
                async move {
                    let index = {
                        let mut all = log.lock().unwrap();
                        all.push(Call {
                            who,
                            lease: ctx.lease().to_string(),
                            start: Instant::now(),
                            end: None,
                        });
                        all.len() - 1
                    };
                    let _ends = Ends(log, index);
                    // Cooperative: works until told to stop, then returns at once.
                    ctx.cancellation().cancelled().await;
                    Err("stopped".into())
                }
            });
        if let Some(Bad::Engine(bad)) = bad {
            builder = builder.known_bad(bad);
        }
        builder
    };
    let cut = Arc::new(AtomicBool::new(false));
    let first = processor(
        "first",
        "a",
        first_expiration,
        Cuttable {
            inner: shared.clone(),
            cut: cut.clone(),
            blank: matches!(bad, Some(Bad::Blank)),
        },
    )
    .build()
    .await
    .expect("valid settings");
    let first_stop = first.cancellation();
    let first_run = tokio::spawn(first.run());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(log.lock().unwrap().len(), 1, "the first host processes");
    cut.store(true, Ordering::Relaxed);
    let second = processor(
        "second",
        second.name,
        second.expiration,
        Cuttable {
            inner: shared.clone(),
            cut: Arc::new(AtomicBool::new(false)),
            blank: matches!(bad, Some(Bad::Blank)),
        },
    )
    .build()
    .await
    .expect("valid settings");
    let second_stop = second.cancellation();
    let second_run = tokio::spawn(second.run());
    tokio::time::sleep(Duration::from_secs(90)).await;
    first_stop.cancel();
    second_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(60), first_run).await;
    let _ = tokio::time::timeout(Duration::from_secs(60), second_run).await;
    log.lock().unwrap().clone()
}

/// How long the second processor's first call ran beside the first's last call
/// (zero when it started after that call ended).
fn overlap(calls: &[Call]) -> Duration {
    let first_end = calls
        .iter()
        .filter(|c| c.who == "first")
        .filter_map(|c| c.end)
        .max()
        .expect("the first host's call ended");
    let second_start = calls
        .iter()
        .find(|c| c.who == "second")
        .unwrap_or_else(|| panic!("the second host never processed: {calls:?}"))
        .start;
    let overlap = first_end.saturating_duration_since(second_start);
    let gap = second_start.saturating_duration_since(first_end);
    eprintln!(
        "the second host's first call: {overlap:?} before, {gap:?} after the first's last call ended"
    );
    overlap
}

const SAME_NAME: Second = Second {
    name: "a",
    expiration: Duration::from_secs(12),
};

#[tokio::test(start_paused = true)]
async fn a_new_life_under_a_name_waits_out_its_earlier_lifes_authority_under_session_liveness() {
    let calls = deploy(Duration::from_secs(12), SAME_NAME, Liveness::Session, None).await;
    assert_eq!(overlap(&calls), Duration::ZERO, "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_new_life_under_a_name_waits_out_its_earlier_lifes_authority_under_lease_liveness() {
    let calls = deploy(Duration::from_secs(12), SAME_NAME, Liveness::Lease, None).await;
    assert_eq!(overlap(&calls), Duration::ZERO, "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_new_life_that_trusts_its_name_runs_beside_its_earlier_life() {
    let bad = Some(Bad::Engine(KnownBad::NameProvesDeath));
    let calls = deploy(Duration::from_secs(12), SAME_NAME, Liveness::Session, bad).await;
    assert!(overlap(&calls) > Duration::from_secs(1), "{calls:?}");
}

const SHORTER: Second = Second {
    name: "b",
    expiration: Duration::from_secs(12),
};

#[tokio::test(start_paused = true)]
async fn a_host_with_a_shorter_expiration_waits_out_the_holders_longer_one_under_session_liveness()
{
    let calls = deploy(Duration::from_secs(24), SHORTER, Liveness::Session, None).await;
    assert_eq!(overlap(&calls), Duration::ZERO, "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_host_with_a_shorter_expiration_waits_out_the_holders_longer_one_under_lease_liveness() {
    let calls = deploy(Duration::from_secs(24), SHORTER, Liveness::Lease, None).await;
    assert_eq!(overlap(&calls), Duration::ZERO, "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_host_that_trusts_its_own_expiration_runs_beside_a_holder_with_a_longer_one() {
    let bad = Some(Bad::Blank);
    let calls = deploy(Duration::from_secs(24), SHORTER, Liveness::Session, bad).await;
    assert!(overlap(&calls) > Duration::from_secs(1), "{calls:?}");
}

/// A group of one host under `running` liveness; a second host starts under
/// `joining`. Returns how the joiner's run ended, and whether the first host still
/// processes afterwards.
async fn join_with(running: Liveness, joining: Liveness) -> (String, bool) {
    let feed = MemoryFeed::new(["0", "1"]);
    let store = MemoryStore::new();
    let calls = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let host = |name: &'static str, liveness: Liveness| {
        let calls = calls.clone();
        Processor::builder()
            .instance(name)
            .processor_name("deploy")
            .liveness(liveness)
            .acquire_interval(Duration::from_secs(2))
            .renew_interval(Duration::from_secs(3))
            .expiration_interval(Duration::from_secs(12))
            .poll_interval(Duration::from_millis(500))
            .source(feed.clone())
            .store(store.clone())
            .handler(move |_ctx, batch| {
                calls.lock().unwrap().push(name);
                async move { Ok(batch.checkpoint) }
            })
    };
    let first = host("a", running).build().await.expect("valid settings");
    let first_stop = first.cancellation();
    let first_run = tokio::spawn(first.run());
    feed.push("0", "x");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let joiner = host("b", joining).build().await.expect("valid settings");
    let ended = tokio::time::timeout(Duration::from_secs(60), joiner.run())
        .await
        .expect("the joiner stops by itself");
    calls.lock().unwrap().clear();
    feed.push("0", "y");
    feed.push("1", "z");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let first_processes = calls.lock().unwrap().contains(&"a");
    first_stop.cancel();
    first_run.await.unwrap().unwrap();
    let ended = match ended {
        Ok(()) => "ran".to_string(),
        Err(e) => e.to_string(),
    };
    (ended, first_processes)
}

#[tokio::test(start_paused = true)]
async fn a_host_under_lease_liveness_refuses_to_join_a_group_under_session_liveness() {
    let (ended, first_processes) = join_with(Liveness::Session, Liveness::Lease).await;
    assert!(
        ended.contains("this host runs lease liveness")
            && ended.contains("written under session liveness"),
        "{ended}"
    );
    assert!(first_processes, "the group runs on");
}

#[tokio::test(start_paused = true)]
async fn a_host_under_session_liveness_refuses_to_join_a_group_under_lease_liveness() {
    let (ended, first_processes) = join_with(Liveness::Lease, Liveness::Session).await;
    assert!(
        ended.contains("this host runs session liveness")
            && ended.contains("written under lease liveness"),
        "{ended}"
    );
    assert!(first_processes, "the group runs on");
}

/// A host of one lease shuts down with its store `cut` off (or not) at the moment
/// it is told to stop; returns how `run` ended and how long it took.
async fn shut_down(cut_off: bool) -> (Result<(), String>, Duration) {
    let feed = MemoryFeed::new(["0", "1"]);
    let cut = Arc::new(AtomicBool::new(false));
    let store = Cuttable {
        inner: MemoryStore::new(),
        cut: cut.clone(),
        blank: false,
    };
    let processor = Processor::builder()
        .instance("a")
        .processor_name("deploy")
        .acquire_interval(Duration::from_secs(2))
        .renew_interval(Duration::from_secs(3))
        .expiration_interval(Duration::from_secs(12))
        .request_timeout(Duration::from_secs(5))
        .shutdown_deadline(Duration::from_secs(20))
        .source(feed)
        .store(store)
        .handler(|_ctx, batch| async move { Ok(batch.checkpoint) })
        .build()
        .await
        .expect("valid settings");
    let stop = processor.cancellation();
    let run = tokio::spawn(processor.run());
    tokio::time::sleep(Duration::from_secs(5)).await;
    cut.store(cut_off, Ordering::Relaxed);
    let from = Instant::now();
    stop.cancel();
    let ended = run.await.expect("the run does not panic");
    (ended.map_err(|e| e.to_string()), from.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_that_cannot_reach_the_store_ends_at_its_deadline_naming_what_was_left() {
    let (ended, took) = shut_down(true).await;
    let error = ended.expect_err("the shutdown cannot finish");
    assert!(
        error.contains("did not finish within 20s")
            && error.contains("2 lease(s) still held (0, 1)"),
        "{error}"
    );
    assert!(error.contains("heartbeat still stored"), "{error}");
    assert_eq!(took, Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_that_reaches_the_store_releases_everything_well_before_its_deadline() {
    let (ended, took) = shut_down(false).await;
    assert_eq!(ended, Ok(()));
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// The acquire interval of the leave runs.
const ACQUIRE: Duration = Duration::from_secs(2);

/// The engine's poll of a leaving host's heartbeat.
fn poll() -> Duration {
    Duration::from_millis(LEAVE_POLL.as_millis())
}

/// Hosts `a` and `b` share two leases, each call running until cancelled; then `a`
/// is told to stop, with `notice` as its leave notice (`None`: the runtime's). Returns
/// the longest time from the end of `a`'s last call of a lease to the start of
/// `b`'s next one, and how long after the stop `a`'s calls ended.
async fn handover(notice: Option<Duration>) -> (Duration, Duration) {
    let feed = MemoryFeed::new(["0", "1"]);
    for i in 0..200 {
        feed.push((i % 2).to_string(), format!("item-{i}"));
    }
    let store = MemoryStore::new();
    let log: Log = Arc::default();
    let processor = |who: &'static str| {
        let log = log.clone();
        let mut builder = Processor::builder()
            .instance(who)
            .processor_name("leave")
            .strategy(Strategy::Handoff)
            .acquire_interval(ACQUIRE)
            .renew_interval(Duration::from_secs(3))
            .expiration_interval(Duration::from_secs(12))
            .poll_interval(Duration::from_millis(500))
            .max_batch(1)
            .source(feed.clone())
            .store(store.clone())
            .handler(move |ctx, _batch| {
                let log = log.clone();
                async move {
                    let index = {
                        let mut all = log.lock().unwrap();
                        all.push(Call {
                            who,
                            lease: ctx.lease().to_string(),
                            start: Instant::now(),
                            end: None,
                        });
                        all.len() - 1
                    };
                    let _ends = Ends(log, index);
                    ctx.cancellation().cancelled().await;
                    Err("stopped".into())
                }
            });
        if let Some(notice) = notice {
            builder = builder.leave_notice(notice);
        }
        builder
    };
    let a = processor("a").build().await.expect("valid settings");
    let a_stop = a.cancellation();
    let a_run = tokio::spawn(a.run());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let b = processor("b").build().await.expect("valid settings");
    let b_stop = b.cancellation();
    let b_run = tokio::spawn(b.run());
    tokio::time::sleep(Duration::from_secs(30)).await;
    let asked = Instant::now();
    a_stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(60), a_run).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "a stops cleanly");
    tokio::time::sleep(Duration::from_secs(10)).await;
    b_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(60), b_run).await;
    let calls = log.lock().unwrap().clone();
    let mut longest = Duration::ZERO;
    let mut a_ended = Duration::ZERO;
    let mut held = false;
    for lease in ["0", "1"] {
        let a_end = calls
            .iter()
            .filter(|c| c.who == "a" && c.lease == lease)
            .filter_map(|c| c.end)
            .filter(|end| *end >= asked)
            .max();
        let Some(a_end) = a_end else { continue };
        held = true;
        let b_start = calls
            .iter()
            .filter(|c| c.who == "b" && c.lease == lease && c.start >= a_end)
            .map(|c| c.start)
            .min()
            .unwrap_or_else(|| panic!("b takes lease {lease} over: {calls:?}"));
        longest = longest.max(b_start - a_end);
        a_ended = a_ended.max(a_end - asked);
    }
    assert!(held, "a held a lease when told to stop");
    eprintln!("longest handover {longest:?}; a's calls ended {a_ended:?} after the stop");
    (longest, a_ended)
}

#[tokio::test(start_paused = true)]
async fn a_host_told_to_stop_processes_through_its_notice_and_hands_over_within_a_poll() {
    // The default notice at these settings: the engine's, one acquire interval and
    // a poll (under half the shutdown deadline, here the expiration, 12 s).
    let notice = ACQUIRE + poll();
    let (longest, a_ended) = handover(None).await;
    assert!(a_ended >= notice, "{a_ended:?}");
    assert!(longest <= poll(), "{longest:?}");
}

/// The sibling: without a notice (`leave_notice(Duration::ZERO)`) the lease waits
/// for the other host's next read.
#[tokio::test(start_paused = true)]
async fn a_host_that_leaves_at_once_leaves_its_lease_to_the_others_next_read() {
    let (longest, a_ended) = handover(Some(Duration::ZERO)).await;
    assert!(a_ended < poll(), "{a_ended:?}");
    assert!(longest > poll(), "{longest:?}");
}
