//! A deterministic swarm of the real runtime: three `Processor`s on one paused-time
//! tokio runtime share the engine's reference store through a seeded faulty wrapper
//! (latency and spikes, 429s, writes applied with their reply lost, writes lost,
//! network cuts, and reads served by lagging replicas at Session consistency: each
//! life is one session, `Replicated`'s rule), and hosts stop gracefully or crash
//! (their `run()` future dropped) and come back under a new or the same name. Every handler call is recorded in virtual time and checked as the
//! simulator checks its own: no two lives process one partition at once, no stored
//! checkpoint goes back, and after the heal every item is handled.
//!
//! `cargo test` runs a fixed set of seeds; `LEASEHOLD_RUNTIME_SWARM=A..B cargo test
//! -p leasehold-adapters --test runtime_swarm -- --ignored` runs a range, printing
//! each failing seed and the command that replays it (with
//! `LEASEHOLD_RUNTIME_SWARM_IGNORING=1`, handlers that ignore their cancellation).
//! To read one seed: `LEASEHOLD_RUNTIME_SWARM_CALLS=1` prints the draws, the calls
//! and the documents at the end; `LEASEHOLD_RUNTIME_SWARM_LOG=1` also every write and
//! the runtime's log lines, in virtual time.

use leasehold_adapters::engine::lease::{KnownBad, Record};
use leasehold_adapters::engine::store::{Container, Op, Reader, Replicated, Reply, StoreError};
use leasehold_adapters::runtime::{Handler, ProcessorBuilder, RuntimeBad};
use leasehold_adapters::{Charges, MemoryFeed, PartitionSource, Processor, Response, Store};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const PARTITIONS: [&str; 4] = ["0", "1", "2", "3"];
const ITEMS: usize = 20;
const HOSTS: usize = 3;
/// Faults are drawn for this long; then the heal, and this long again to finish.
const FAULTY: Duration = Duration::from_secs(90);
const CALM: Duration = Duration::from_secs(180);
/// Older versions of each document a lagging replica may serve.
const STALE_DEPTH: u8 = 3;
/// While faults run, the share of reads served by a lagging replica; such a read
/// shows each document it covers, one time in two, some version its reader has not
/// seen past (Session promises nothing more).
const STALE_READS: f64 = 0.2;

/// One host's view of the shared store, with its own seeded faults.
#[derive(Clone)]
struct Faulty {
    /// The store every host shares, as Session consistency shows it.
    shared: Arc<Mutex<Replicated<Record>>>,
    /// This life's session.
    reader: Reader,
    charges: Arc<Charges>,
    rng: Arc<Mutex<ChaCha8Rng>>,
    /// Cut off from the store: calls hang until the driver gives up on them.
    cut: Arc<AtomicBool>,
    healed: Arc<AtomicBool>,
    /// Known-bad: the store throttles every call after the heal.
    throttled_for_good: bool,
    /// Checkpoints that went back, as "lease: from → to".
    back: Arc<Mutex<Vec<String>>>,
    /// Documents served older than the current version.
    stale_served: Arc<AtomicUsize>,
}

fn position(doc: &Record) -> Option<(String, u64)> {
    let Record::Lease(lease) = doc else {
        return None;
    };
    let at = lease
        .checkpoint
        .as_ref()?
        .as_str()
        .trim_matches('"')
        .parse()
        .ok()?;
    Some((lease.token.as_str().to_string(), at))
}

impl Store<Record> for Faulty {
    async fn execute(&self, op: Op<Record>) -> Response<Record> {
        let none = Response {
            result: Err(StoreError::Timeout),
            charge: 0.0,
        };
        if self.cut.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        let calm = self.healed.load(Ordering::Relaxed);
        let (latency, fault) = {
            let mut rng = self.rng.lock().unwrap();
            let spike = !calm && rng.random_bool(0.03);
            let latency = if spike {
                rng.random_range(1_000..8_000)
            } else {
                rng.random_range(2..40)
            };
            // Calm: no fault (99 falls in no arm below), or, for the liveness
            // check's sibling, every call throttled.
            let fault = match (calm, self.throttled_for_good) {
                (true, true) => 0,
                (true, false) => 99,
                _ => rng.random_range(0..100),
            };
            (Duration::from_millis(latency), fault)
        };
        tokio::time::sleep(latency / 2).await;
        let write = op.is_write();
        match fault {
            // Throttled before anything happened.
            0..=2 => {
                tokio::time::sleep(latency / 2).await;
                return Response {
                    result: Err(StoreError::Throttled {
                        retry_after: leasehold_engine::Millis(200),
                    }),
                    charge: 0.0,
                };
            }
            // A write lost on the way: the sender cannot tell.
            3..=4 if write => {
                tokio::time::sleep(latency / 2).await;
                return none;
            }
            _ => {}
        }
        let stale = !calm && !write && self.rng.lock().unwrap().random_bool(STALE_READS);
        let (before, response) = {
            let mut shared = self.shared.lock().unwrap();
            let before = match &op {
                Op::Replace { doc, .. } => {
                    let id = leasehold_engine::store::Document::id(doc);
                    let pk = leasehold_engine::store::Document::partition_key(doc);
                    shared.read(&pk, id).ok().and_then(|s| position(&s.doc))
                }
                _ => None,
            };
            let mut rng = self.rng.lock().unwrap();
            let result = shared.execute(self.reader, op.clone(), &mut |_, n| {
                if stale && rng.random_bool(0.5) {
                    self.stale_served.fetch_add(1, Ordering::Relaxed);
                    rng.random_range(1..=n)
                } else {
                    0
                }
            });
            (
                before,
                Response {
                    result,
                    charge: 0.0,
                },
            )
        };
        if let (Some((lease, from)), Ok(Reply::Replaced(_)), Op::Replace { doc, .. }) =
            (&before, &response.result, &op)
            && let Some((_, to)) = position(doc)
            && to < *from
        {
            self.back
                .lock()
                .unwrap()
                .push(format!("{lease}: {from} → {to}"));
        }
        if std::env::var("LEASEHOLD_RUNTIME_SWARM_LOG").is_ok() && write {
            let what = match &op {
                Op::Replace { doc, .. } => format!("replace {doc:?}"),
                Op::Create(doc) => format!("create {doc:?}"),
                other => format!("{other:?}"),
            };
            tracing::info!(
                reader = self.reader.0,
                fault,
                ok = response.result.is_ok(),
                "write {}",
                &what[..what.len().min(420)]
            );
        }
        tokio::time::sleep(latency / 2).await;
        // Applied, and the reply lost.
        if (5..=7).contains(&fault) && write {
            return none;
        }
        response
    }

    fn charges(&self) -> &Charges {
        &self.charges
    }
}

/// One handler call of a life: partition, life, start and end in virtual time.
#[derive(Clone, Debug)]
struct Call {
    lease: String,
    life: usize,
    start: Instant,
    end: Option<Instant>,
}

/// Marks a call ended when its future ends or is dropped (an abort, a crash).
struct Ends(Arc<Mutex<Vec<Call>>>, usize);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.lock().unwrap()[self.1].end = Some(Instant::now());
    }
}

#[derive(Debug, Default)]
struct Verdict {
    overlaps: Vec<String>,
    back: Vec<String>,
    unhandled: Vec<String>,
    /// Documents lagging replicas served (a measure, not a failure).
    stale_served: usize,
    /// Graceful stops that ran to their end.
    graceful_stops: usize,
}

impl Verdict {
    fn safe(&self) -> bool {
        self.overlaps.is_empty() && self.back.is_empty()
    }

    fn clean(&self) -> bool {
        self.safe() && self.unhandled.is_empty()
    }
}

/// What a run breaks on purpose, to show the checks catch it.
#[derive(Clone, Copy, PartialEq)]
enum Bad {
    None,
    /// The runtime's old 5 s grace, with handlers that ignore their cancellation.
    Grace,
    /// A store that throttles every call after the heal.
    Store,
    /// No bug: handlers that ignore their cancellation, under the shipped grace, which
    /// must abort them before any rival starts (the stop contract's bound: none).
    Ignoring,
    /// Such handlers, and the engine's earlier rule that releases or hands off a lost
    /// lease while its call may still run (`KnownBad::FreeBesideLostCall`).
    FreeBeside,
}

/// A running host: its task, whose abort is its crash, and the token that stops it
/// gracefully.
struct Host {
    task: tokio::task::JoinHandle<()>,
    stop: tokio_util::sync::CancellationToken,
}

/// Builds a host and runs it in its own task.
async fn launch<S, St, H>(builder: ProcessorBuilder<S, St, H>) -> Host
where
    S: PartitionSource,
    St: Store<Record>,
    H: Handler<S::Item>,
{
    let p = builder.build().await.expect("valid settings");
    let stop = p.cancellation();
    let task = tokio::spawn(async move {
        let _ = p.run().await;
    });
    Host { task, stop }
}

/// Runs seed `seed`.
async fn run(seed: u64, bad: Bad) -> Verdict {
    run_with(seed, bad, None).await
}

/// Runs seed `seed`, with `notice` as every host's leave notice if given (the
/// runtime's default otherwise).
async fn run_with(seed: u64, bad: Bad, notice: Option<Duration>) -> Verdict {
    use tracing_subscriber::layer::SubscriberExt;
    let _guard = std::env::var("LEASEHOLD_RUNTIME_SWARM_LOG")
        .is_ok()
        .then(|| {
            tracing::subscriber::set_default(
                tracing_subscriber::registry().with(debug_log::Log(Instant::now())),
            )
        });
    let throttled_for_good = bad == Bad::Store;
    let ignoring = matches!(bad, Bad::Grace | Bad::Ignoring | Bad::FreeBeside);
    let engine_bad = match bad {
        Bad::FreeBeside => Some(KnownBad::FreeBesideLostCall),
        _ => None,
    };
    let bad = bad == Bad::Grace;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let store = Arc::new(Mutex::new(Replicated::new(
        Container::<Record>::new(),
        STALE_DEPTH,
    )));
    let feed = MemoryFeed::new(PARTITIONS);
    for p in PARTITIONS {
        for i in 0..ITEMS {
            feed.push(p, format!("{p}-{i}"));
        }
    }
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let handled: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let back: Arc<Mutex<Vec<String>>> = Arc::default();
    let stale_served: Arc<AtomicUsize> = Arc::default();
    let healed = Arc::new(AtomicBool::new(false));
    let cuts: Vec<Arc<AtomicBool>> = (0..HOSTS).map(|_| Arc::default()).collect();
    let mut lives = 0usize;
    let start = |host: usize, name: String, life: usize, rng_seed: u64| {
        let (calls, handled) = (calls.clone(), handled.clone());
        let faulty = Faulty {
            shared: store.clone(),
            // One session per life: a new life has seen nothing.
            reader: Reader(life as u32),
            charges: Arc::default(),
            rng: Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(rng_seed))),
            cut: cuts[host].clone(),
            healed: healed.clone(),
            throttled_for_good,
            back: back.clone(),
            stale_served: stale_served.clone(),
        };
        let mut builder = Processor::builder()
            .instance(name)
            .processor_name("swarm")
            .acquire_interval(Duration::from_secs(2))
            .renew_interval(Duration::from_secs(3))
            .expiration_interval(Duration::from_secs(12))
            // A take that landed after its sender gave up on it (a spike beyond the
            // request timeout) is found by the audit: each host reads the table once
            // per interval times the group's size, so 20 s keeps that within the calm
            // (seed 16630 waited for the default 5 min one).
            .audit_interval(Duration::from_secs(20))
            .request_timeout(Duration::from_secs(5))
            .poll_interval(Duration::from_millis(500))
            .max_batch(2)
            .source(feed.clone())
            .store(faulty)
            .handler(move |ctx, batch| {
                let (calls, handled) = (calls.clone(), handled.clone());
                async move {
                    let index = {
                        let mut calls = calls.lock().unwrap();
                        calls.push(Call {
                            lease: ctx.lease().as_str().to_string(),
                            life,
                            start: Instant::now(),
                            end: None,
                        });
                        calls.len() - 1
                    };
                    let _ends = Ends(calls, index);
                    for item in &batch.items {
                        // Every fifth item is slow (6 s): a call may outlive its
                        // authority. A cooperative handler checks its cancellation
                        // every 100 ms; the known-bad one never does.
                        let slow = item.ends_with('0') || item.ends_with('5');
                        let steps = if slow { 60 } else { 2 };
                        for _ in 0..steps {
                            if !ignoring && ctx.is_lost() {
                                return Err("stopped".into());
                            }
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        handled.lock().unwrap().insert(item.clone());
                    }
                    Ok(batch.checkpoint)
                }
            });
        if bad {
            builder = builder.runtime_bad(RuntimeBad::LongGrace);
        }
        if let Some(known_bad) = engine_bad {
            builder = builder.known_bad(known_bad);
        }
        if let Some(notice) = notice {
            builder = builder.leave_notice(notice);
        }
        builder
    };
    let mut running: Vec<Option<Host>> = Vec::new();
    let mut graceful_stops = 0;
    let mut names: Vec<String> = Vec::new();
    for host in 0..HOSTS {
        let name = format!("h{host}");
        running.push(Some(
            launch(start(host, name.clone(), lives, rng.random())).await,
        ));
        lives += 1;
        names.push(name);
    }
    let began = Instant::now();
    let verbose = std::env::var("LEASEHOLD_RUNTIME_SWARM_CALLS").is_ok();
    let say = |what: String| {
        if verbose {
            eprintln!("{:.3} s: {what}", (Instant::now() - began).as_secs_f64());
        }
    };
    while began.elapsed() < FAULTY {
        tokio::time::sleep(Duration::from_millis(rng.random_range(500..4_000))).await;
        let host = rng.random_range(0..HOSTS);
        let draw = rng.random_range(0..10);
        say(format!(
            "host {host} ({}) draws {draw}, {}",
            names[host],
            if running[host].is_some() {
                "up"
            } else {
                "down"
            }
        ));
        match draw {
            // A crash: the run() future dropped, every call aborted.
            0..=1 => {
                if let Some(h) = running[host].take() {
                    h.task.abort();
                    let _ = h.task.await;
                }
            }
            // A restart under the old name or a new one.
            2..=4 if running[host].is_none() => {
                if rng.random_bool(0.5) {
                    names[host] = format!("h{host}-{lives}");
                }
                running[host] =
                    Some(launch(start(host, names[host].clone(), lives, rng.random())).await);
                lives += 1;
            }
            // A network cut of a few seconds to half a minute.
            5..=6 => {
                let cut = cuts[host].clone();
                let window = Duration::from_millis(rng.random_range(2_000..30_000));
                cut.store(true, Ordering::Relaxed);
                tokio::spawn(async move {
                    tokio::time::sleep(window).await;
                    cut.store(false, Ordering::Relaxed);
                });
            }
            // A graceful stop (a deploy, a scale-in): batches in flight finish and
            // checkpoint, leases are released; the host stays down until a restart.
            7 => {
                if let Some(h) = running[host].take() {
                    h.stop.cancel();
                    let _ = h.task.await;
                    graceful_stops += 1;
                }
            }
            _ => {}
        }
    }
    // The heal: no more faults; every host that is down comes back.
    healed.store(true, Ordering::Relaxed);
    for cut in &cuts {
        cut.store(false, Ordering::Relaxed);
    }
    for host in 0..HOSTS {
        if running[host].is_none() {
            running[host] =
                Some(launch(start(host, names[host].clone(), lives, rng.random())).await);
            lives += 1;
        }
    }
    tokio::time::sleep(CALM).await;
    for h in running.into_iter().flatten() {
        h.task.abort();
        let _ = h.task.await;
    }
    let mut verdict = Verdict::default();
    let calls = calls.lock().unwrap().clone();
    let mut by_lease: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for call in &calls {
        by_lease.entry(&call.lease).or_default().push(call);
    }
    let t = |i: Instant| (i - began).as_secs_f64();
    for (lease, calls) in by_lease {
        for (i, a) in calls.iter().enumerate() {
            for b in &calls[i + 1..] {
                let a_end = a.end.unwrap_or_else(Instant::now);
                let b_end = b.end.unwrap_or_else(Instant::now);
                if a.life != b.life && a.start < b_end && b.start < a_end {
                    verdict.overlaps.push(format!(
                        "partition {lease}: life {} ran {:.3}–{:.3} s and life {} ran {:.3}–{:.3} s",
                        a.life,
                        t(a.start),
                        t(a_end),
                        b.life,
                        t(b.start),
                        t(b_end)
                    ));
                }
            }
        }
    }
    if std::env::var("LEASEHOLD_RUNTIME_SWARM_CALLS").is_ok() {
        for d in store.lock().unwrap().read_all("") {
            eprintln!("doc {:?}", d.doc);
        }
        eprintln!("names {names:?}, lives {lives}");
        for c in &calls {
            eprintln!(
                "call {} life {} {:.3}–{:?}",
                c.lease,
                c.life,
                t(c.start),
                c.end.map(t)
            );
        }
    }
    verdict.back = back.lock().unwrap().clone();
    verdict.stale_served = stale_served.load(Ordering::Relaxed);
    verdict.graceful_stops = graceful_stops;
    let handled = handled.lock().unwrap();
    for p in PARTITIONS {
        for i in 0..ITEMS {
            let item = format!("{p}-{i}");
            if !handled.contains(&item) {
                verdict.unhandled.push(item);
            }
        }
    }
    verdict
}

/// Runs seed `seed` on a paused runtime of its own.
fn one(seed: u64, bad: Bad) -> Verdict {
    paused().block_on(run(seed, bad))
}

/// Seed `seed` as the long range ran it when it was found, before the runtime gave a
/// leave notice by default (a graceful stop then releases at once).
fn as_found(seed: u64, bad: Bad) -> Verdict {
    paused().block_on(run_with(seed, bad, Some(Duration::ZERO)))
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

/// Runs `seeds`, each on its own paused runtime; returns the failing ones: unsafe
/// ones, and with `live` those where some item was never handled too.
fn swarm(seeds: std::ops::Range<u64>, bad: Bad, live: bool) -> Vec<(u64, Verdict)> {
    seeds
        .filter_map(|seed| {
            let verdict = one(seed, bad);
            let failed = if live {
                !verdict.clean()
            } else {
                !verdict.safe()
            };
            failed.then_some((seed, verdict))
        })
        .collect()
}

fn report(failed: &[(u64, Verdict)], bad: Bad) {
    let mode = match bad {
        Bad::Grace => "LEASEHOLD_RUNTIME_SWARM_BAD=1 ",
        Bad::Ignoring => "LEASEHOLD_RUNTIME_SWARM_IGNORING=1 ",
        Bad::FreeBeside => "LEASEHOLD_RUNTIME_SWARM_FREE_BESIDE=1 ",
        Bad::None | Bad::Store => "",
    };
    for (seed, verdict) in failed {
        eprintln!("seed {seed}: {verdict:?}");
        eprintln!(
            "replay: {mode}LEASEHOLD_RUNTIME_SWARM={seed}..{} cargo test -p leasehold-adapters --test runtime_swarm -- --ignored",
            seed + 1
        );
    }
}

#[test]
fn the_runtime_keeps_each_partition_to_one_life_under_faults_and_finishes_after_the_heal() {
    let failed = swarm(0..12, Bad::None, true);
    report(&failed, Bad::None);
    assert!(failed.is_empty(), "{} failing seeds", failed.len());
}

/// The newer faults are live: lagging replicas serve old versions to the runtime, and
/// hosts stop gracefully (else the swarm above would claim what it never tried).
#[test]
fn lagging_replicas_and_graceful_stops_happen() {
    let verdict = one(0, Bad::None);
    assert!(verdict.stale_served > 0, "{verdict:?}");
    assert!(verdict.graceful_stops > 0, "{verdict:?}");
}

/// The sibling: the old 5 s grace, with handlers that ignore their cancellation, lets
/// a lost call run beside the next owner on some seed of the same set.
#[test]
fn with_the_old_grace_a_lost_call_runs_beside_the_next_owner() {
    let failed = swarm(0..12, Bad::Grace, false);
    assert!(
        failed.iter().any(|(_, v)| !v.overlaps.is_empty()),
        "no overlap in 12 seeds"
    );
}

/// Handlers that ignore their cancellation, under the shipped grace (half the
/// margin): the abort lands at their next `.await`, before any rival may start, so
/// they never run beside the next owner either. The old 5 s grace is the sibling.
#[test]
fn handlers_that_ignore_their_cancellation_are_aborted_before_the_next_owner_starts() {
    let failed = swarm(0..12, Bad::Ignoring, true);
    report(&failed, Bad::Ignoring);
    assert!(failed.is_empty(), "{} failing seeds", failed.len());
}

/// Seed 84112 of the long range: a host drained two leases for a handoff, its
/// authority lapsed meanwhile (a late heartbeat), and it handed them off at once
/// while their calls, which ignore their cancellation, ran on until aborted: the
/// recipient started 0.3 s before. The handoff now waits for the calls to end. (Run
/// as found, without the default leave notice. Since a refused take re-reads its
/// lease, the run takes another path and `free-beside-lost-call` no longer overlaps
/// here: the model keeps the variant, `model/tests/partitions.rs`'s
/// `read_the_earlier_way_a_lost_lease_is_handed_off_beside_its_call`.)
#[test]
fn a_handoff_after_a_lapse_waits_for_the_lost_calls_to_end() {
    let verdict = as_found(84_112, Bad::Ignoring);
    assert!(verdict.clean(), "{verdict:?}");
}

/// Seed 114165 of the long range: a host drained a lease for a handoff, the handler
/// returned the batch and the host sent its checkpoint (20); the claimant had
/// meanwhile stopped claiming, so the handoff was called off and the lease started
/// again before that write was answered, from the stored checkpoint (14). The new
/// session wrote 16 over 20. A lease now starts only once no write of it is on the
/// way. Since the lease counts share out every lease the view knows, this run takes
/// another path and the variant no longer breaks it: `engine/tests/session_liveness.rs`
/// keeps the variant (`a_handoff_called_off_starts_before_its_checkpoint_lands_under_the_old_rule`).
#[test]
fn a_handoff_called_off_restarts_only_after_the_last_checkpoint_lands() {
    let verdict = one(114_165, Bad::Ignoring);
    assert!(verdict.clean(), "{verdict:?}");
}

/// The liveness check's sibling: a store that never serves again after the heal
/// leaves items unhandled (on the seeds whose faults kept some partition from
/// finishing before the heal).
#[test]
fn a_store_that_never_heals_leaves_items_unhandled() {
    let failed = swarm(0..6, Bad::Store, true);
    assert!(!failed.is_empty());
    assert!(
        failed
            .iter()
            .all(|(_, v)| !v.unhandled.is_empty() && v.safe())
    );
}

/// A long range: `LEASEHOLD_RUNTIME_SWARM=A..B`.
#[test]
#[ignore = "a long range, on demand"]
fn a_range_of_seeds() {
    let range = std::env::var("LEASEHOLD_RUNTIME_SWARM").unwrap_or_else(|_| "0..100".into());
    let (a, b) = range.split_once("..").expect("A..B");
    let seeds = a.parse().expect("A")..b.parse().expect("B");
    let bad = match (
        std::env::var("LEASEHOLD_RUNTIME_SWARM_BAD"),
        std::env::var("LEASEHOLD_RUNTIME_SWARM_IGNORING"),
        std::env::var("LEASEHOLD_RUNTIME_SWARM_FREE_BESIDE"),
    ) {
        (Ok(_), _, _) => Bad::Grace,
        (_, Ok(_), _) => Bad::Ignoring,
        // The engine's `free-beside-lost-call`, to look for a seed that shows it.
        (_, _, Ok(_)) => Bad::FreeBeside,
        _ => Bad::None,
    };
    let started = std::time::Instant::now();
    let n = seeds.end - seeds.start;
    let failed = swarm(seeds, bad, !matches!(bad, Bad::Grace | Bad::FreeBeside));
    report(&failed, bad);
    eprintln!(
        "{n} seeds, {} failing, {:.1} s",
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failed.is_empty());
}

mod debug_log {
    use std::collections::BTreeMap;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::layer::{Context, Layer};
    use tracing_subscriber::registry::LookupSpan;

    pub struct Log(pub tokio::time::Instant);
    struct F(BTreeMap<String, String>);
    struct V<'a>(&'a mut BTreeMap<String, String>);
    impl Visit for V<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.insert(field.name().into(), format!("{value:?}"));
        }
    }
    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Log {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let mut f = BTreeMap::new();
            attrs.record(&mut V(&mut f));
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(F(f));
            }
        }
        fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
            let mut f = BTreeMap::new();
            event.record(&mut V(&mut f));
            let mut scope = String::new();
            if let Some(s) = ctx.event_scope(event) {
                for span in s.from_root() {
                    if let Some(F(m)) = span.extensions().get::<F>() {
                        for (k, v) in m {
                            scope.push_str(&format!("{k}={v} "));
                        }
                    }
                }
            }
            eprintln!(
                "{:.3} s [{}] {scope}{:?}",
                (tokio::time::Instant::now() - self.0).as_secs_f64(),
                event.metadata().level(),
                f
            );
        }
    }
}
