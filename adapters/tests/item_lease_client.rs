//! The item-lease client on the Cosmos DB emulator: contention for the next items in
//! a state, held leases, breaking, and a crashed holder's lease taken over only after
//! its duration. Time is tokio's paused clock; the clients' wall clocks follow it.

mod common;

use common::Emulator;
use common::stores::Racing;
use leasehold_adapters::{
    Clock, CosmosStore, ItemLeaseClient, ItemLeaseClientError, MemoryStore, Store,
};
use leasehold_engine::item_lease::{
    Grant, Item, ItemError, ItemKey, ItemKnownBad, ItemState, LeaserConfig,
};
use leasehold_engine::store::{Op, Reply};
use leasehold_engine::{DocId, HostId, PartitionKey, WallTime};
use std::collections::BTreeMap;
use std::time::Duration;

const START: WallTime = WallTime(1_800_000_000_000);
const MINUTE: Duration = Duration::from_secs(60);

fn requested() -> ItemState {
    ItemState::from("REQUESTED")
}

fn key(id: &str) -> ItemKey {
    ItemKey {
        pk: PartitionKey::from(id),
        id: DocId::from(id),
    }
}

fn leaser<St: Store<Item>>(store: St, name: &str) -> ItemLeaseClient<St> {
    ItemLeaseClient::new(store, name, LeaserConfig::new("tp-"))
        .with_clock(Clock::following_tokio(START))
}

async fn item_store(emulator: &Emulator, name: &str, items: usize) -> CosmosStore<Item> {
    // EDC's containers are partitioned by /partitionKey.
    emulator.container(name, "/partitionKey", 2);
    let store = CosmosStore::new(emulator.client(name, Vec::new()).await);
    seed(&store, items).await;
    store
}

async fn seed<St: Store<Item>>(store: &St, items: usize) {
    for i in 0..items {
        let id = format!("tp-{i:02}");
        // Older items first: their state timestamps rise with i.
        let at = WallTime(START.0 - 1_000_000 + i as i64);
        let item = Item::new(
            DocId::from(id.as_str()),
            PartitionKey::from(id.as_str()),
            requested(),
            at,
        );
        assert!(store.execute(Op::Create(item)).await.result.is_ok());
    }
}

fn shared_items(a: &[Grant], b: &[Grant]) -> Vec<DocId> {
    a.iter()
        .filter(|g| b.iter().any(|h| h.item == g.item))
        .map(|g| g.item.clone())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn leasers_taking_the_next_items_each_start_every_item_exactly_once() {
    let emulator = Emulator::new();
    let store = item_store(&emulator, "contend", 30).await;
    let mut runs = Vec::new();
    for i in 0..3 {
        let leaser = leaser(store.clone(), &format!("connector-{i}"));
        runs.push(tokio::spawn(async move {
            let mut started = Vec::new();
            loop {
                let grants = leaser.next_for_state(requested(), 4, MINUTE).await.unwrap();
                if grants.is_empty() {
                    return started;
                }
                for g in grants {
                    assert!(leaser.has_authority(&g));
                    leaser
                        .save(&g, ItemState::from("STARTED"), true)
                        .await
                        .unwrap();
                    started.push(g.item);
                }
            }
        }));
    }
    let mut counts: BTreeMap<DocId, usize> = BTreeMap::new();
    for run in runs {
        for id in run.await.unwrap() {
            *counts.entry(id).or_default() += 1;
        }
    }
    assert_eq!(counts.len(), 30);
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let Ok(Reply::ReadAll(items)) = store
        .execute(Op::ReadAll {
            prefix: "tp-".into(),
        })
        .await
        .result
    else {
        panic!("read all")
    };
    assert!(
        items
            .iter()
            .all(|s| s.doc.state == ItemState::from("STARTED") && s.doc.lease.is_none())
    );
}

/// Two leasers that read at the same moment race for the same items; the if-match
/// lets one lease of each through.
#[tokio::test(start_paused = true)]
async fn leasers_scanning_at_the_same_moment_never_share_an_item() {
    let emulator = Emulator::new();
    let store = Racing::new(item_store(&emulator, "racing", 8).await, 2);
    let (a, b) = race(store).await;
    assert_eq!(a.len() + b.len(), 8);
    assert_eq!(shared_items(&a, &b), Vec::<DocId>::new());
}

/// The sibling: a store that ignores if-match lets both leasers have the same items.
#[tokio::test(start_paused = true)]
async fn the_sharing_check_catches_a_store_that_ignores_etags() {
    let store = MemoryStore::new();
    seed(&store, 8).await;
    let (a, b) = race(Racing::new(store, 2).blind()).await;
    assert!(!shared_items(&a, &b).is_empty());
}

async fn race<St: Store<Item>>(store: St) -> (Vec<Grant>, Vec<Grant>) {
    let a = leaser(store.clone(), "a");
    let b = leaser(store, "b");
    let (x, y) = tokio::join!(
        a.next_for_state(requested(), 8, MINUTE),
        b.next_for_state(requested(), 8, MINUTE)
    );
    (x.unwrap(), y.unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_held_item_is_refused_with_its_holder_named_and_only_the_holder_may_break_it() {
    let emulator = Emulator::new();
    let store = item_store(&emulator, "held", 1).await;
    let a = leaser(store.clone(), "a");
    let b = leaser(store, "b");
    let item = key("tp-00");
    let grant = a.acquire(&item, MINUTE).await.unwrap();
    assert_eq!(grant.token.holder, HostId::from("a"));

    let err = b.acquire(&item, MINUTE).await.unwrap_err();
    assert!(
        matches!(&err, ItemLeaseClientError::Item(ItemError::LeaseHeld { holder, .. }) if holder == &HostId::from("a")),
        "{err}"
    );
    // b names a's very grant: a name is not the lease.
    let err = b.break_lease(&grant).await.unwrap_err();
    assert!(
        matches!(&err, ItemLeaseClientError::Item(ItemError::NotHolder { holder: Some(h) }) if h == &HostId::from("a")),
        "{err}"
    );
    a.renew(&grant).await.unwrap();
    a.break_lease(&grant).await.unwrap();
    b.acquire(&item, MINUTE).await.unwrap();

    let missing = a.acquire(&key("tp-99"), MINUTE).await.unwrap_err();
    assert!(
        matches!(missing, ItemLeaseClientError::Item(ItemError::NotFound)),
        "{missing}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_crashed_holders_lease_is_taken_over_only_after_its_duration_and_the_old_holder_changes_nothing()
 {
    let emulator = Emulator::new();
    let store = item_store(&emulator, "crash", 1).await;
    let crashed = leaser(store.clone(), "crashed");
    let survivor = leaser(store, "survivor");
    let item = key("tp-00");
    let stale = crashed
        .acquire(&item, Duration::from_secs(30))
        .await
        .unwrap();

    assert!(
        survivor.acquire(&item, MINUTE).await.is_err(),
        "first sight"
    );
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(survivor.acquire(&item, MINUTE).await.is_err());
    assert!(
        !crashed.has_authority(&stale),
        "authority ends before takeover"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let grant = survivor.acquire(&item, MINUTE).await.unwrap();
    assert_eq!(grant.token.holder, HostId::from("survivor"));

    let err = crashed
        .save(&stale, ItemState::from("DONE"), true)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ItemLeaseClientError::Item(ItemError::LockLost)),
        "{err}"
    );
    survivor
        .save(&grant, ItemState::from("DONE"), true)
        .await
        .unwrap();
}

/// A task that overran its grant holds a lease its client has since taken again, for
/// another task (`next_for_state` takes the client's own items): the first task's
/// save names its own grant, so it is refused and the second task's lease goes on.
#[tokio::test(start_paused = true)]
async fn an_overrun_task_cannot_save_under_its_items_next_lease() {
    let (err, next_goes_on) = overrun_task_saves(None).await;
    assert!(
        matches!(err, Some(ItemLeaseClientError::Item(ItemError::NotHeld))),
        "{err:?}"
    );
    assert!(next_goes_on);
}

/// Its sibling: named by the item only (`item-grant-names-item`), the overrun task's
/// save lands under the next lease and releases it.
#[tokio::test(start_paused = true)]
async fn an_overrun_task_naming_the_item_saves_under_its_next_lease() {
    let (err, next_goes_on) = overrun_task_saves(Some(ItemKnownBad::GrantNamesItem)).await;
    assert!(err.is_none(), "{err:?}");
    assert!(!next_goes_on);
}

/// One client leases tp-00 for a task that overruns, and leases it again for
/// another; the overrun task then saves. Returns its error, if any, and whether the
/// second task still has authority and saves.
async fn overrun_task_saves(
    known_bad: Option<ItemKnownBad>,
) -> (Option<ItemLeaseClientError>, bool) {
    let store = MemoryStore::new();
    seed(&store, 1).await;
    let config = LeaserConfig {
        known_bad,
        ..LeaserConfig::new("tp-")
    };
    let client =
        ItemLeaseClient::new(store, "only", config).with_clock(Clock::following_tokio(START));
    let overrun = client.next_for_state(requested(), 1, MINUTE).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let next = client.next_for_state(requested(), 1, MINUTE).await.unwrap();
    assert_eq!(next.len(), 1, "its own item, leased again");
    assert_ne!(next[0].token, overrun[0].token);
    let err = client
        .save(&overrun[0], ItemState::from("DONE"), true)
        .await
        .err();
    let next_goes_on = client.has_authority(&next[0])
        && client
            .save(&next[0], ItemState::from("DONE"), true)
            .await
            .is_ok();
    (err, next_goes_on)
}
