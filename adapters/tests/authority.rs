//! Authority in the handler's hands, on the real runtime: a lost call that ignores
//! its cancellation is aborted before any other host may start the lease, a handler
//! that acts only while its deadline is ahead never acts beside the next owner, and a
//! session is reported stopped only once its call's task has ended.

use leasehold_adapters::engine::lease::Record;
use leasehold_adapters::engine::store::Op;
use leasehold_adapters::runtime::RuntimeBad;
use leasehold_adapters::{BuildError, MemoryFeed, MemoryStore, Processor, Response, Store};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A view of the shared store whose calls hang once `cut` is set (a host partitioned
/// away) or take `slow` longer while it is set.
#[derive(Clone)]
struct Faulty {
    inner: MemoryStore<Record>,
    cut: Arc<AtomicBool>,
    slow: Arc<AtomicBool>,
}

impl Faulty {
    fn new(inner: MemoryStore<Record>) -> Faulty {
        Faulty {
            inner,
            cut: Arc::default(),
            slow: Arc::default(),
        }
    }
}

impl Store<Record> for Faulty {
    async fn execute(&self, op: Op<Record>) -> Response<Record> {
        if self.cut.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
        if self.slow.load(Ordering::Relaxed) && !matches!(op, Op::Read { .. }) {
            tokio::time::sleep(Duration::from_secs(4)).await;
        }
        self.inner.execute(op).await
    }

    fn charges(&self) -> &leasehold_adapters::Charges {
        self.inner.charges()
    }
}

fn feed() -> MemoryFeed {
    let feed = MemoryFeed::new(["0"]);
    for i in 0..200 {
        feed.push("0", format!("item-{i}"));
    }
    feed
}

/// What the first host's one call saw and when it ended; when the second host's
/// first call started.
#[derive(Debug, Default)]
struct Seen {
    /// The last instant the first host's call found its authority ahead.
    last_with_authority: Option<Instant>,
    /// Whether its deadline was ever published.
    had_deadline: bool,
    /// When the first host's call ended (returned or aborted).
    first_ended: Option<Instant>,
    /// When the second host's first call started.
    second_started: Option<Instant>,
}

/// Marks the first host's call ended when its future is dropped (an abort).
struct Ends(Arc<Mutex<Seen>>);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.lock().unwrap().first_ended = Some(Instant::now());
    }
}

/// Host a holds the lease; its handler ignores its cancellation and only checks its
/// authority every 100 ms. After 3 s a's store calls hang; host b, of the same
/// settings as `adapters/tests/stop_contract.rs` (expiration 12 s, renew 3 s,
/// acquire 2 s), then takes the lease over.
async fn a_call_ignores_its_loss(bad: Option<RuntimeBad>) -> Seen {
    let shared = MemoryStore::new();
    let feed = feed();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let build = |name: &'static str, store: Faulty| {
        let seen = seen.clone();
        let mut builder = Processor::builder()
            .instance(name)
            .processor_name("authority")
            .acquire_interval(Duration::from_secs(2))
            .renew_interval(Duration::from_secs(3))
            .expiration_interval(Duration::from_secs(12))
            .request_timeout(Duration::from_secs(5))
            .poll_interval(Duration::from_millis(500))
            .max_batch(1)
            .source(feed.clone())
            .store(store)
            .handler(move |ctx, batch| {
                let seen = seen.clone();
                async move {
                    if name == "b" {
                        let mut s = seen.lock().unwrap();
                        s.second_started.get_or_insert(Instant::now());
                        return Ok(batch.checkpoint);
                    }
                    let _ends = Ends(seen.clone());
                    // Ignores `ctx.cancellation()`: only an abort ends it.
                    loop {
                        {
                            let mut s = seen.lock().unwrap();
                            s.had_deadline |= ctx.deadline().is_some();
                            if ctx.has_authority() {
                                s.last_with_authority = Some(Instant::now());
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            });
        if let Some(bad) = bad {
            builder = builder.runtime_bad(bad);
        }
        builder
    };
    let a_store = Faulty::new(shared.clone());
    let cut = a_store.cut.clone();
    let a = build("a", a_store).build().await.expect("valid settings");
    let (a_stop, a_run) = (a.cancellation(), tokio::spawn(a.run()));
    // b runs beside a before a is cut off, so that it sees a's last heartbeat soon
    // after it was written: the takeover comes as early as the protocol allows.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b = build("b", Faulty::new(shared))
        .build()
        .await
        .expect("valid settings");
    let (b_stop, b_run) = (b.cancellation(), tokio::spawn(b.run()));
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    cut.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(60)).await;
    a_stop.cancel();
    b_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(60), a_run).await;
    let _ = tokio::time::timeout(Duration::from_secs(60), b_run).await;
    std::mem::take(&mut *seen.lock().unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_lost_call_that_ignores_its_cancellation_is_aborted_before_the_next_owner_starts() {
    let seen = a_call_ignores_its_loss(None).await;
    let (ended, started) = (seen.first_ended.unwrap(), seen.second_started.unwrap());
    eprintln!(
        "b's first call started {:?} after a's lost call was aborted",
        started - ended
    );
    assert!(ended < started, "{seen:?}");
}

/// The handler's deadline was published while it held the lease and had run out
/// before the next owner started: a handler that acts only while it is ahead never
/// acts beside another owner.
#[tokio::test(start_paused = true)]
async fn a_handler_that_acts_only_before_its_deadline_never_acts_beside_the_next_owner() {
    let seen = a_call_ignores_its_loss(None).await;
    assert!(seen.had_deadline, "{seen:?}");
    let (last, started) = (
        seen.last_with_authority.expect("it had authority"),
        seen.second_started.unwrap(),
    );
    eprintln!("a's authority ended {:?} before b started", started - last);
    assert!(last < started, "{seen:?}");
}

/// The old default grace, 5 s, is longer than the 2 s safety margin: the lost call
/// still runs when the next owner starts.
#[tokio::test(start_paused = true)]
async fn a_grace_longer_than_the_margin_lets_a_lost_call_run_beside_the_next_owner() {
    let seen = a_call_ignores_its_loss(Some(RuntimeBad::LongGrace)).await;
    let (ended, started) = (seen.first_ended.unwrap(), seen.second_started.unwrap());
    eprintln!(
        "b's first call started {:?} before a's lost call ended",
        ended - started
    );
    assert!(started < ended, "{seen:?}");
}

/// What building a processor with `grace` gives.
async fn built_with_grace(grace: Duration) -> Result<(), BuildError> {
    Processor::builder()
        .instance("a")
        .processor_name("p")
        .abort_grace(grace)
        .source(MemoryFeed::new(["0"]))
        .store(MemoryStore::new())
        .handler(|_, b| async move { Ok(b.checkpoint) })
        .build()
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_grace_not_shorter_than_the_safety_margin_is_refused() {
    let built = built_with_grace(Duration::from_secs(2)).await;
    assert!(
        matches!(built, Err(BuildError::AbortGrace { grace, margin }) if grace == margin),
        "{built:?}"
    );
    assert!(built_with_grace(Duration::from_millis(1_500)).await.is_ok());
}

/// One host on a multi-threaded runtime: its first call blocks a worker thread for
/// 15 s (synchronous code, which an abort cannot interrupt) while the store is slowed
/// until the lease's authority lapses; the lease comes back once it is fast again.
/// Returns how many calls ever ran at once with another on this host, and how many
/// calls there were. Real time: a multi-threaded runtime cannot pause tokio's clock;
/// the verdict depends on no timing but the known-bad run's window (about 6 s).
async fn blocked_in_synchronous_code(bad: Option<RuntimeBad>) -> (usize, usize) {
    let store = Faulty::new(MemoryStore::new());
    let slow = store.slow.clone();
    let running = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    struct Running(Arc<AtomicUsize>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let (r, o, c) = (running.clone(), overlaps.clone(), calls.clone());
    let mut builder = Processor::builder()
        .instance("a")
        .processor_name("blocked")
        .acquire_interval(Duration::from_secs(1))
        .renew_interval(Duration::from_secs(1))
        .expiration_interval(Duration::from_secs(6))
        .request_timeout(Duration::from_secs(20))
        .poll_interval(Duration::from_millis(100))
        .max_batch(5)
        .source(feed())
        .store(store)
        .handler(move |_ctx, batch| {
            let (running, overlaps, calls) = (r.clone(), o.clone(), c.clone());
            async move {
                if running.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let _running = Running(running);
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    // Synchronous code: an abort cannot stop it, and the runtime's
                    // other tasks move to another thread meanwhile.
                    tokio::task::block_in_place(|| std::thread::sleep(Duration::from_secs(15)));
                    tokio::task::yield_now().await;
                }
                Ok(batch.checkpoint)
            }
        });
    if let Some(bad) = bad {
        builder = builder.runtime_bad(bad);
    }
    let processor = builder.build().await.expect("valid settings");
    let (stop, run) = (processor.cancellation(), tokio::spawn(processor.run()));
    while calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    slow.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(5)).await;
    slow.store(false, Ordering::Relaxed);
    for _ in 0..300 {
        if calls.load(Ordering::SeqCst) > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), run).await;
    (
        overlaps.load(Ordering::SeqCst),
        calls.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_starts_again_on_its_host_only_once_the_aborted_call_has_ended() {
    let (overlaps, calls) = blocked_in_synchronous_code(None).await;
    assert!(calls > 1, "the lease was processed again");
    assert_eq!(overlaps, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_reported_before_the_call_ends_lets_two_calls_of_a_lease_run_on_one_host() {
    let (overlaps, calls) =
        blocked_in_synchronous_code(Some(RuntimeBad::StoppedBeforeTheCallEnds)).await;
    assert!(calls > 1, "the lease was processed again");
    assert!(overlaps > 0);
}

/// A store that refuses every write with `error` once `after` writes have passed, as
/// Cosmos DB does once a key is revoked or a role removed.
#[derive(Clone)]
struct Refusing {
    inner: MemoryStore<Record>,
    writes: Arc<AtomicUsize>,
    after: usize,
    error: leasehold_engine::store::StoreError,
}

impl Store<Record> for Refusing {
    async fn execute(&self, op: Op<Record>) -> Response<Record> {
        let write = !matches!(op, Op::Read { .. } | Op::ReadAll { .. } | Op::Query(_));
        if write && self.writes.fetch_add(1, Ordering::SeqCst) >= self.after {
            // Answered at once, as a gateway's refusal is: a millisecond.
            tokio::time::sleep(Duration::from_millis(1)).await;
            return Response {
                result: Err(self.error.clone()),
                charge: 0.0,
            };
        }
        self.inner.execute(op).await
    }

    fn charges(&self) -> &leasehold_adapters::Charges {
        self.inner.charges()
    }
}

/// What a processor whose store began to refuse its writes did in ten minutes.
struct Refused {
    /// What `run()` returned (`None`: it ran on).
    ended: Option<Result<(), leasehold_adapters::RunError>>,
    /// Calls still running at the end.
    running: usize,
    /// Writes sent.
    writes: usize,
}

/// A processor that holds its lease, then whose store refuses its writes with
/// `error`.
async fn refused_with(error: leasehold_engine::store::StoreError) -> Refused {
    let writes = Arc::new(AtomicUsize::new(0));
    let store = Refusing {
        inner: MemoryStore::new(),
        writes: writes.clone(),
        after: 10,
        error,
    };
    let running = Arc::new(AtomicUsize::new(0));
    let r = running.clone();
    let processor = Processor::builder()
        .instance("a")
        .processor_name("refused")
        .source(feed())
        .store(store)
        .handler(move |ctx, _batch| {
            let running = r.clone();
            async move {
                running.fetch_add(1, Ordering::SeqCst);
                ctx.cancellation().cancelled().await;
                running.fetch_sub(1, Ordering::SeqCst);
                Err("stopped".into())
            }
        })
        .build()
        .await
        .expect("valid settings");
    let ended = tokio::time::timeout(Duration::from_secs(600), processor.run())
        .await
        .ok();
    tokio::time::sleep(Duration::from_secs(5)).await;
    Refused {
        ended,
        running: running.load(Ordering::SeqCst),
        writes: writes.load(Ordering::SeqCst),
    }
}

/// A revoked key (401) or a missing role (403) ends `run()` at once with a typed
/// error, and no call runs on: no retry would mend it.
#[tokio::test(start_paused = true)]
async fn a_host_the_store_refuses_stops_with_the_refusal() {
    use leasehold_adapters::RunError;
    use leasehold_engine::store::{Denial, StoreError};
    let refusal = StoreError::Denied {
        status: Denial::Unauthorized,
        message: "the key was revoked".into(),
    };
    let Refused { ended, running, .. } = refused_with(refusal.clone()).await;
    let ended = ended.expect("run() returned");
    assert!(
        matches!(&ended, Err(RunError::Denied(e)) if *e == refusal),
        "{ended:?}"
    );
    assert!(ended.unwrap_err().to_string().contains("401"));
    assert_eq!(running, 0);
}

/// The sibling: an outage of the same shape is retried, and the processor runs on,
/// pacing its writes: a write that failed at once is read back and sent again only
/// after a backoff. Before, a lease's resume was sent again at once after each
/// failure, every 2 ms here: about 300,000 writes in the ten minutes.
#[tokio::test(start_paused = true)]
async fn a_host_whose_store_is_unavailable_runs_on_and_paces_its_writes() {
    let Refused { ended, writes, .. } =
        refused_with(leasehold_engine::store::StoreError::Unavailable).await;
    assert!(ended.is_none(), "{ended:?}");
    eprintln!("{writes} writes in ten minutes of outage");
    assert!(writes < 2_000, "{writes} writes");
}

/// Host a runs the lease alone on `clock`; its handler notes, every 100 ms, whether
/// it still has authority. At 6 s the machine is suspended for 30 s (a VM saved and
/// restored): `suspend` plays it on the processor's clock, as the machine's clock
/// that counts suspend would show it, or not, as tokio's clock alone would. Returns
/// what the handler's first check after the wake-up found.
async fn authority_after_a_suspend(counted: bool) -> bool {
    use leasehold_adapters::Clock;
    use leasehold_engine::WallTime;
    let clock = Clock::following_tokio(WallTime(1_700_000_000_000));
    let after: Arc<Mutex<Option<bool>>> = Arc::default();
    let woke = Arc::new(AtomicBool::new(false));
    let (note, seen_woke) = (after.clone(), woke.clone());
    let a = Processor::builder()
        .instance("a")
        .processor_name("suspend")
        .acquire_interval(Duration::from_secs(2))
        .renew_interval(Duration::from_secs(3))
        .expiration_interval(Duration::from_secs(12))
        .poll_interval(Duration::from_millis(500))
        .max_batch(1)
        .clock(clock.clone())
        .source(feed())
        .store(MemoryStore::new())
        .handler(move |ctx, batch| {
            let (note, seen_woke) = (note.clone(), seen_woke.clone());
            async move {
                loop {
                    if seen_woke.load(Ordering::Relaxed) {
                        note.lock().unwrap().get_or_insert(ctx.has_authority());
                        return Ok(batch.checkpoint);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .build()
        .await
        .expect("valid settings");
    let (stop, run) = (a.cancellation(), tokio::spawn(a.run()));
    tokio::time::sleep(Duration::from_secs(6)).await;
    if counted {
        clock.suspend(Duration::from_secs(30));
    }
    woke.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(150)).await;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(60), run).await;
    let found = *after.lock().unwrap();
    found.expect("the handler checked after the wake-up")
}

/// A suspend longer than the lease: the handler's first check after the wake-up,
/// before any of the runtime's timers has fired, finds its authority over, because
/// the runtime's clock counts the suspend (`CLOCK_BOOTTIME` on Linux).
#[tokio::test(start_paused = true)]
async fn after_a_suspend_longer_than_the_lease_a_handler_finds_its_authority_over() {
    assert!(!authority_after_a_suspend(true).await);
}

/// The sibling: on a clock that does not count the suspend (tokio's, `CLOCK_MONOTONIC`
/// on Linux), the same handler believes it still holds the lease 30 s into a 12 s
/// expiration.
#[tokio::test(start_paused = true)]
async fn on_a_clock_that_stops_in_a_suspend_a_handler_believes_it_still_holds_the_lease() {
    assert!(authority_after_a_suspend(false).await);
}
