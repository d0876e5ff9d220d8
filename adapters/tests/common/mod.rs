//! The in-memory Cosmos DB emulator, as the SDK's own tests build it, plus helpers
//! shared by the adapter tests.
#![allow(dead_code)]

pub mod queue;
pub mod stores;

use azure_core::credentials::Secret;
use azure_core::http::Url;
use azure_data_cosmos::fault_injection::FaultInjectionRule;
use azure_data_cosmos::models::PartitionKeyDefinition;
use azure_data_cosmos::options::{OperationOptions, Region, ThrottlingRetryOptionsBuilder};
use azure_data_cosmos::{
    AccountEndpoint, AccountReference, ContainerClient, CosmosClientBuilder, CosmosRuntimeBuilder,
    RoutingStrategy,
};
use azure_data_cosmos_driver::in_memory_emulator::{
    ConsistencyLevel, ContainerConfig, InMemoryEmulatorHttpClient, ReplicationConfig,
    VirtualAccountConfig, VirtualRegion, WriteMode,
};
use std::sync::Arc;

const URL: &str = "https://eastus.emulator.local";
const WEST: &str = "https://westus.emulator.local";
const DB: &str = "leasehold";

/// One emulated account with a database.
pub struct Emulator {
    http: Arc<InMemoryEmulatorHttpClient>,
    /// Request units per second each container gets, where throttling is on.
    throughput: Option<u32>,
}

impl Emulator {
    pub fn new() -> Emulator {
        Emulator::at(ConsistencyLevel::Session)
    }

    /// An account that throttles: each container gets `ru` request units a second, and
    /// a request past them is answered 429 with the service's retry-after.
    pub fn throttling(ru: u32) -> Emulator {
        let config = VirtualAccountConfig::new(vec![VirtualRegion::new(
            "East US",
            Url::parse(URL).expect("a valid url"),
        )])
        .expect("a valid account")
        .with_consistency(ConsistencyLevel::Session)
        .with_throttling_enabled(true);
        let http = Arc::new(InMemoryEmulatorHttpClient::new(config));
        http.store().create_database(DB);
        Emulator {
            http,
            throughput: Some(ru),
        }
    }

    /// A one-region account whose default consistency is `level`.
    pub fn at(level: ConsistencyLevel) -> Emulator {
        let config = VirtualAccountConfig::new(vec![VirtualRegion::new(
            "East US",
            Url::parse(URL).expect("a valid url"),
        )])
        .expect("a valid account")
        .with_consistency(level);
        let http = Arc::new(InMemoryEmulatorHttpClient::new(config));
        http.store().create_database(DB);
        Emulator {
            http,
            throughput: None,
        }
    }

    /// The emulated account, as [`leasehold_adapters::Account`] sees it.
    pub fn account(&self) -> leasehold_adapters::Account {
        leasehold_adapters::Account::with_key(
            Url::parse(URL).expect("a valid url"),
            Secret::new("dGVzdGtleQ=="),
        )
    }

    /// An `azure_core` HTTP client whose requests the emulator serves.
    pub fn http(&self) -> Arc<dyn azure_core::http::HttpClient> {
        Arc::new(EmulatorHttp(self.http.clone()))
    }

    /// A geo-replicated account: East US is the hub, West US a second region that
    /// receives every write 50 to 1,500 ms later (seeded), at Session consistency.
    /// `multi` lets both regions take writes.
    pub fn two_regions(multi: bool, seed: u64) -> Emulator {
        let regions = vec![
            VirtualRegion::new("East US", Url::parse(URL).expect("a valid url")),
            VirtualRegion::new("West US", Url::parse(WEST).expect("a valid url")),
        ];
        let lag = ReplicationConfig::range(
            std::time::Duration::from_millis(50),
            std::time::Duration::from_millis(1_500),
        )
        .expect("a valid range")
        .with_jitter_seed(seed);
        let config = VirtualAccountConfig::new(regions)
            .expect("a valid account")
            .with_write_mode(if multi {
                WriteMode::Multi
            } else {
                WriteMode::Single
            })
            .with_consistency(ConsistencyLevel::Session)
            .with_replication_config(lag);
        let http = Arc::new(InMemoryEmulatorHttpClient::new(config));
        http.store().create_database(DB);
        Emulator {
            http,
            throughput: None,
        }
    }

    /// A client of container `name` that reads from the region nearest to `near`.
    pub async fn client_near(&self, name: &str, near: Region) -> ContainerClient {
        let runtime = CosmosRuntimeBuilder::from(self.http.runtime_builder())
            .build()
            .await
            .expect("an emulator runtime");
        let builder = CosmosClientBuilder::new().with_runtime(runtime);
        container_of(builder, name, near).await
    }

    /// Provisions `name`, partitioned by `path`, over `partitions` physical partitions.
    pub fn container(&self, name: &str, path: &str, partitions: u32) {
        let mut config = ContainerConfig::new().with_partition_count(partitions);
        if let Some(ru) = self.throughput {
            config = config.with_throughput(ru.into());
        }
        let config = config.build().expect("a valid container config");
        self.http.store().create_container_with_config(
            DB,
            name,
            PartitionKeyDefinition::from(path),
            config,
        );
    }

    /// A client of container `name`, with fault rules if any.
    pub async fn client(&self, name: &str, rules: Vec<Arc<FaultInjectionRule>>) -> ContainerClient {
        self.client_with(name, rules, false).await
    }

    /// A client whose 429s reach the caller: the SDK's own throttling retries are off.
    pub async fn client_with(
        &self,
        name: &str,
        rules: Vec<Arc<FaultInjectionRule>>,
        no_throttle_retries: bool,
    ) -> ContainerClient {
        let runtime = CosmosRuntimeBuilder::from(self.http.runtime_builder())
            .build()
            .await
            .expect("an emulator runtime");
        let mut builder = CosmosClientBuilder::new().with_runtime(runtime);
        if no_throttle_retries {
            let mut options = OperationOptions::default();
            options.throttling_retry_options = Some(
                ThrottlingRetryOptionsBuilder::new()
                    .with_max_retry_count(0)
                    .build(),
            );
            builder = builder.with_default_operation_options(options);
        }
        if !rules.is_empty() {
            builder = builder
                .with_fault_injection_rules(rules)
                .expect("valid fault rules");
        }
        container_of(builder, name, Region::EAST_US).await
    }
}

/// Container `name` of the emulated account's database, through a client built by
/// `builder` that reads from the region nearest to `near`.
async fn container_of(builder: CosmosClientBuilder, name: &str, near: Region) -> ContainerClient {
    let account = AccountReference::with_authentication_key(
        URL.parse::<AccountEndpoint>().expect("a valid endpoint"),
        Secret::new("dGVzdGtleQ=="),
    );
    let client = builder
        .build(account, RoutingStrategy::ProximityTo(near))
        .await
        .expect("a client");
    client
        .database_client(DB)
        .container_client(name, None)
        .await
        .expect("a provisioned container")
}

impl Emulator {
    /// Splits physical partition `partition` of container `name` in two, and waits for
    /// the split; returns the children's ids.
    pub async fn split(&self, name: &str, partition: u32) -> Vec<u32> {
        let store = self.http.store();
        store.split_partition(DB, name, partition, std::time::Duration::from_millis(100));
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let children = store.child_partition_ids(DB, name, &[partition]);
            if !children.is_empty() {
                return children;
            }
        }
        panic!("partition {partition} of {name} did not split");
    }

    /// Merges adjacent physical partitions `a` and `b` of container `name`; returns
    /// the merged partition's id.
    pub async fn merge(&self, name: &str, a: u32, b: u32) -> u32 {
        self.http
            .store()
            .merge_partitions_and_wait(DB, name, a, b, std::time::Duration::from_millis(100))
            .await
            .expect("adjacent partitions merge")
    }
}

/// The emulator behind `azure_core`'s HTTP client trait, which it no longer
/// implements itself (its own method returns the driver's errors).
#[derive(Debug)]
struct EmulatorHttp(Arc<InMemoryEmulatorHttpClient>);

#[async_trait::async_trait]
impl azure_core::http::HttpClient for EmulatorHttp {
    async fn execute_request(
        &self,
        request: &azure_core::http::Request,
    ) -> azure_core::Result<azure_core::http::AsyncRawResponse> {
        self.0.execute_request(request).await.map_err(|e| {
            azure_core::Error::with_message(azure_core::error::ErrorKind::Io, e.to_string())
        })
    }
}

/// An `azure_core` HTTP client that never reaches a service: the connection is
/// refused at once, or the request never answered.
#[derive(Debug)]
pub enum Unreachable {
    Refused,
    Silent,
}

#[async_trait::async_trait]
impl azure_core::http::HttpClient for Unreachable {
    async fn execute_request(
        &self,
        _: &azure_core::http::Request,
    ) -> azure_core::Result<azure_core::http::AsyncRawResponse> {
        match self {
            Unreachable::Refused => Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Io,
                "connection refused",
            )),
            Unreachable::Silent => std::future::pending().await,
        }
    }
}
