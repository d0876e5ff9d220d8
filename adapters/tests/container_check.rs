//! The container check a processor runs before it starts: a container partitioned
//! by another path than the documents', or one that deletes items by a default time
//! to live, is a typed error, on the emulator.

mod common;

use azure_data_cosmos::models::{ContainerProperties, TimeToLive};
use common::{Emulator, Unreachable};
use leasehold_adapters::{ContainerError, CosmosStore, MemoryStore, Store};
use leasehold_engine::lease::Record;
use leasehold_engine::queue::Message;

#[tokio::test]
async fn a_container_partitioned_by_the_documents_path_passes() {
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    emulator.container("queue", "/QueueName", 1);
    let leases = CosmosStore::<Record>::new(emulator.client("leases", vec![]).await);
    let queue = CosmosStore::<Message>::new(emulator.client("queue", vec![]).await);
    assert_eq!(leases.check().await, Ok(()));
    assert_eq!(queue.check().await, Ok(()));
    assert_eq!(MemoryStore::<Record>::new().check().await, Ok(()));
}

#[tokio::test]
async fn a_container_partitioned_by_another_path_is_refused_with_both_paths() {
    let emulator = Emulator::new();
    emulator.container("leases", "/pk", 1);
    let store = CosmosStore::<Record>::new(emulator.client("leases", vec![]).await);
    let error = store.check().await.unwrap_err();
    assert_eq!(
        error,
        ContainerError::PartitionKey {
            container: "leases".into(),
            expected: "/id",
            found: vec!["/pk".into()],
        }
    );
    assert!(
        error.to_string().contains("partition key path /id"),
        "{error}"
    );
}

#[tokio::test]
async fn a_container_with_a_default_time_to_live_is_refused() {
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    let client = emulator.client("leases", vec![]).await;
    let store = CosmosStore::<Record>::new(client.clone());
    let mut properties: ContainerProperties = client
        .read(None)
        .await
        .and_then(|r| r.into_model())
        .expect("the container's settings");
    properties.default_ttl = TimeToLive::Seconds(3_600);
    client
        .replace(properties.clone(), None)
        .await
        .expect("the emulator replaces a container's settings");
    let error = store.check().await.unwrap_err();
    assert_eq!(
        error,
        ContainerError::DefaultTtl {
            container: "leases".into(),
            seconds: 3_600
        }
    );
    // No default (items may carry their own TTL; leasehold's carry none) is fine.
    properties.default_ttl = TimeToLive::NoDefault;
    client.replace(properties, None).await.expect("replaced");
    assert_eq!(store.check().await, Ok(()));
}

/// The queue and item-lease clients check the container before their first request,
/// as the processor does before it starts: a container partitioned by the lease
/// documents' path refuses both, naming the path each needs, and nothing is written.
#[tokio::test]
async fn the_queue_and_item_clients_refuse_a_container_partitioned_for_other_documents() {
    use leasehold_adapters::{
        ItemLeaseClient, ItemLeaseClientError, QueueClient, QueueClientError,
    };
    use leasehold_engine::item_lease::{ItemState, LeaserConfig};
    use leasehold_engine::queue::{ConsumerConfig, QueueName};
    use std::time::Duration;

    let emulator = Emulator::new();
    emulator.container("by-id", "/id", 1);
    let config = ConsumerConfig::new(QueueName::new("orders").expect("a queue name"));
    let store = CosmosStore::<Message>::new(emulator.client("by-id", vec![]).await);
    let queue = QueueClient::new(store.clone(), "worker-1", config).expect("valid settings");
    let refused = queue.enqueue("order-17", "{}", Duration::ZERO).await;
    assert!(
        matches!(
            &refused,
            Err(QueueClientError::Container(ContainerError::PartitionKey {
                expected: "/QueueName",
                ..
            }))
        ),
        "{refused:?}"
    );
    let items = CosmosStore::new(emulator.client("by-id", vec![]).await);
    let leaser = ItemLeaseClient::new(items, "connector-a", LeaserConfig::new("tp-"));
    let refused = leaser
        .next_for_state(ItemState::from("REQUESTED"), 10, Duration::from_secs(60))
        .await;
    assert!(
        matches!(
            &refused,
            Err(ItemLeaseClientError::Container(
                ContainerError::PartitionKey {
                    expected: "/partitionKey",
                    ..
                }
            ))
        ),
        "{refused:?}"
    );
    let sent: u64 = leasehold_adapters::OpKind::ALL
        .iter()
        .map(|&k| store.charges().calls(k))
        .sum();
    assert_eq!(sent, 0, "nothing was sent but the check");
}

/// The sibling: on containers partitioned as each needs, the same calls go through.
#[tokio::test]
async fn the_queue_and_item_clients_run_on_containers_partitioned_as_they_need() {
    use leasehold_adapters::{ItemLeaseClient, QueueClient};
    use leasehold_engine::item_lease::{ItemState, LeaserConfig};
    use leasehold_engine::queue::{ConsumerConfig, QueueName};
    use std::time::Duration;

    let emulator = Emulator::new();
    emulator.container("queue", "/QueueName", 1);
    emulator.container("items", "/partitionKey", 1);
    let config = ConsumerConfig::new(QueueName::new("orders").expect("a queue name"));
    let store = CosmosStore::<Message>::new(emulator.client("queue", vec![]).await);
    let queue = QueueClient::new(store, "worker-1", config).expect("valid settings");
    queue
        .enqueue("order-17", "{}", Duration::ZERO)
        .await
        .expect("enqueued");
    let items = CosmosStore::new(emulator.client("items", vec![]).await);
    let leaser = ItemLeaseClient::new(items, "connector-a", LeaserConfig::new("tp-"));
    let grants = leaser
        .next_for_state(ItemState::from("REQUESTED"), 10, Duration::from_secs(60))
        .await
        .expect("no items, no error");
    assert!(grants.is_empty());
}

/// The account's facts, read through the emulator: regions and default consistency.
#[tokio::test]
async fn the_account_check_reads_the_regions_and_the_default_consistency() {
    use azure_data_cosmos_driver::in_memory_emulator::ConsistencyLevel;
    use leasehold_adapters::{AccountFacts, Consistency};
    let emulator = Emulator::two_regions(false, 7);
    let facts = emulator
        .account()
        .read(emulator.http().as_ref())
        .await
        .expect("the account reads");
    assert_eq!(
        facts,
        AccountFacts {
            write_regions: vec!["East US".into()],
            read_regions: vec!["East US".into(), "West US".into()],
            multiple_write_locations: false,
            consistency: Consistency::Session,
        }
    );
    let strong = Emulator::at(ConsistencyLevel::Strong);
    let facts = strong.account().read(strong.http().as_ref()).await;
    assert_eq!(facts.map(|f| f.consistency), Ok(Consistency::Strong));
}

/// An account whose default consistency is weaker than Session (bounded staleness
/// promises a client outside the write region only a consistent prefix) is refused
/// by the store's check, naming the level, before anything is read or written; the
/// same container on a Session or Strong account passes.
#[tokio::test]
async fn a_store_refuses_an_account_whose_reads_are_weaker_than_session() {
    use azure_data_cosmos_driver::in_memory_emulator::ConsistencyLevel;
    use leasehold_adapters::{AccountError, Consistency};
    for (level, refused) in [
        (ConsistencyLevel::Strong, None),
        (
            ConsistencyLevel::BoundedStaleness,
            Some(Consistency::BoundedStaleness),
        ),
        (ConsistencyLevel::Session, None),
        (
            ConsistencyLevel::ConsistentPrefix,
            Some(Consistency::ConsistentPrefix),
        ),
        (ConsistencyLevel::Eventual, Some(Consistency::Eventual)),
    ] {
        let emulator = Emulator::at(level);
        emulator.container("leases", "/id", 1);
        let store = CosmosStore::<Record>::new(emulator.client("leases", vec![]).await)
            .with_account_check(emulator.account(), emulator.http());
        let verdict = store.check().await;
        match refused {
            None => assert_eq!(verdict, Ok(()), "{level:?}"),
            Some(level) => {
                assert_eq!(
                    verdict,
                    Err(ContainerError::Account(AccountError::Consistency(level)))
                );
                let error = verdict.unwrap_err().to_string();
                assert!(
                    error.contains("set the account's default consistency to Session"),
                    "{error}"
                );
            }
        }
        // Without the check, the same store is taken as it is: what the check adds.
        let unchecked = CosmosStore::<Record>::new(emulator.client("leases", vec![]).await);
        assert_eq!(unchecked.check().await, Ok(()), "{level:?}");
    }
}

/// An account that cannot be read (here a transport that fails) is a typed error
/// too, and nothing starts on it.
#[tokio::test]
async fn an_account_that_cannot_be_read_is_a_typed_error() {
    use leasehold_adapters::AccountError;
    let emulator = Emulator::new();
    emulator.container("leases", "/id", 1);
    let store = CosmosStore::<Record>::new(emulator.client("leases", vec![]).await)
        .with_account_check(
            emulator.account(),
            std::sync::Arc::new(Unreachable::Refused),
        );
    let verdict = store.check().await;
    assert!(
        matches!(&verdict, Err(ContainerError::Account(AccountError::Unreadable(why))) if why.contains("connection refused")),
        "{verdict:?}"
    );
}

/// An account that never answers does not hang the start: the read is given up
/// after the requests' timeout, as `Unreadable`.
#[tokio::test(start_paused = true)]
async fn an_account_that_never_answers_is_given_up_after_the_request_timeout() {
    use leasehold_adapters::AccountError;
    let emulator = Emulator::new();
    let started = tokio::time::Instant::now();
    // Without the read's own timeout this one ends the test, as a failure.
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        emulator.account().read(&Unreachable::Silent),
    )
    .await;
    assert_eq!(
        read,
        Ok(Err(AccountError::Unreadable("no answer within 10s".into())))
    );
    assert_eq!(started.elapsed(), std::time::Duration::from_secs(10));
}
