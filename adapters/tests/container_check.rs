//! The container check a processor runs before it starts: a container partitioned
//! by another path than the documents', or one that deletes items by a default time
//! to live, is a typed error, on the emulator.

mod common;

use azure_data_cosmos::models::{ContainerProperties, TimeToLive};
use common::Emulator;
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
