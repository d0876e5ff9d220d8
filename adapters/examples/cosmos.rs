//! The quickstart against a real Cosmos DB account: the change feed of one container
//! processed by this host, with leases in another. Not run by CI.
//!
//! ```sh
//! export COSMOS_ENDPOINT=https://<account>.documents.azure.com:443/
//! export COSMOS_KEY=<primary key>
//! export COSMOS_DATABASE=db COSMOS_MONITORED=orders COSMOS_LEASES=leases
//! cargo run -p leasehold-adapters --features transport --example cosmos -- host-1
//! ```
//!
//! The lease container must be partitioned by `/id`. Only key authentication is wired
//! here; Entra ID needs the `azure_identity` crate, which this workspace does not take
//! on yet.

use azure_core::credentials::Secret;
use azure_data_cosmos::options::Region;
use azure_data_cosmos::{AccountEndpoint, AccountReference, CosmosClientBuilder, RoutingStrategy};
use leasehold_adapters::cosmos::ChangeFeedSource;
use leasehold_adapters::{Batch, CosmosStore, HandlerError, Processor};
use leasehold_engine::lease::Record;
use leasehold_engine::{Checkpoint, Epoch, LeaseToken};

fn var(name: &str) -> Result<String, Box<dyn std::error::Error>> {
    std::env::var(name).map_err(|_| format!("set {name}").into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if cfg!(not(feature = "transport")) {
        return Err("build with --features transport to reach a real account".into());
    }
    let instance = std::env::args().nth(1).unwrap_or_else(|| "host-1".into());
    let endpoint: AccountEndpoint = var("COSMOS_ENDPOINT")?.parse()?;
    let account =
        AccountReference::with_authentication_key(endpoint, Secret::new(var("COSMOS_KEY")?));
    let client = CosmosClientBuilder::new()
        .build(account, RoutingStrategy::ProximityTo(Region::EAST_US))
        .await?;
    let database = client.database_client(&var("COSMOS_DATABASE")?);
    let monitored = database
        .container_client(&var("COSMOS_MONITORED")?, None)
        .await?;
    let leases = database
        .container_client(&var("COSMOS_LEASES")?, None)
        .await?;
    let store: CosmosStore<Record> = CosmosStore::new(leases);
    let processor = Processor::builder()
        .instance(instance)
        .processor_name("leasehold-example")
        .source(ChangeFeedSource::new(monitored))
        .store(store.clone())
        .handler(
            |lease: LeaseToken, epoch: Epoch, batch: Batch<serde_json::Value>| async move {
                println!(
                    "lease {lease} epoch {}: {} changes",
                    epoch.0,
                    batch.items.len()
                );
                Ok::<Checkpoint, HandlerError>(batch.checkpoint)
            },
        )
        .build()
        .await?;
    let stop = processor.cancellation();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    processor.run().await?;
    println!(
        "{:.1} RU spent on leases",
        leasehold_adapters::Store::charges(&store).total_units()
    );
    Ok(())
}
