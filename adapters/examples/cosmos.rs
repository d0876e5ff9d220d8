//! The quickstart against a real Cosmos DB account: the change feed of one container
//! processed by this host, with leases in another. Not run by CI.
//!
//! ```sh
//! export COSMOS_ENDPOINT=https://<account>.documents.azure.com:443/
//! export COSMOS_DATABASE=db COSMOS_MONITORED=orders COSMOS_LEASES=leases
//! # Then one of:
//! export COSMOS_KEY=<primary key>            # key authentication
//! export COSMOS_CREDENTIAL=developer         # Entra ID: `az login` / `azd auth login`
//! export COSMOS_CREDENTIAL=managed-identity  # Entra ID: the host's managed identity
//! # Optionally the region to prefer (East US by default):
//! export COSMOS_REGION="West Europe"
//! cargo run -p leasehold-adapters --features transport --example cosmos -- host-1
//! ```
//!
//! The lease container must be partitioned by `/id`. With Entra ID the identity needs
//! a Cosmos DB data-plane role (such as "Cosmos DB Built-in Data Contributor") on the
//! account.

use azure_core::credentials::{Secret, TokenCredential};
use azure_core::http::Url;
use azure_data_cosmos::options::Region;
use azure_data_cosmos::{AccountEndpoint, AccountReference, CosmosClientBuilder, RoutingStrategy};
use azure_identity::{DeveloperToolsCredential, ManagedIdentityCredential};
use leasehold_adapters::cosmos::ChangeFeedSource;
use leasehold_adapters::{Account, CosmosStore, Processor};
use leasehold_engine::lease::Record;
use std::sync::Arc;

fn var(name: &str) -> Result<String, Box<dyn std::error::Error>> {
    std::env::var(name).map_err(|_| format!("set {name}").into())
}

/// The account and how to authenticate to it, for the SDK and for leasehold's
/// account check: a key if `COSMOS_KEY` is set, else the Entra ID credential
/// `COSMOS_CREDENTIAL` names.
fn account() -> Result<(AccountReference, Account), Box<dyn std::error::Error>> {
    let url: Url = var("COSMOS_ENDPOINT")?.parse()?;
    let endpoint: AccountEndpoint = url.as_str().parse()?;
    if let Ok(key) = std::env::var("COSMOS_KEY") {
        return Ok((
            AccountReference::with_authentication_key(endpoint, Secret::new(key.clone())),
            Account::with_key(url, Secret::new(key)),
        ));
    }
    let credential: Arc<dyn TokenCredential> = match var("COSMOS_CREDENTIAL")?.as_str() {
        "developer" => DeveloperToolsCredential::new(None)?,
        "managed-identity" => ManagedIdentityCredential::new(None)?,
        other => {
            return Err(format!(
                "COSMOS_CREDENTIAL is {other:?}; use developer or managed-identity, or set COSMOS_KEY"
            )
            .into());
        }
    };
    Ok((
        AccountReference::with_credential(endpoint, credential.clone()),
        Account::with_credential(url, credential),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if cfg!(not(feature = "transport")) {
        return Err("build with --features transport to reach a real account".into());
    }
    let instance = std::env::args().nth(1).unwrap_or_else(|| "host-1".into());
    let (account, checked) = account()?;
    let region = std::env::var("COSMOS_REGION").map_or(Region::EAST_US, Region::from);
    let client = CosmosClientBuilder::new()
        .build(account, RoutingStrategy::ProximityTo(region))
        .await?;
    let database = client.database_client(&var("COSMOS_DATABASE")?);
    let monitored = database
        .container_client(&var("COSMOS_MONITORED")?, None)
        .await?;
    let leases = database
        .container_client(&var("COSMOS_LEASES")?, None)
        .await?;
    // The processor reads the account before it starts and refuses multi-region
    // writes and reads weaker than Session, which the proof does not cover.
    let store: CosmosStore<Record> = CosmosStore::new(leases)
        .with_account_check(checked, azure_core::http::new_http_client(None));
    let processor = Processor::builder()
        .instance(instance)
        .processor_name("leasehold-example")
        .source(ChangeFeedSource::new(monitored))
        .store(store.clone())
        .handler(|ctx, batch| async move {
            println!(
                "lease {} epoch {}: {} changes",
                ctx.lease(),
                ctx.epoch().0,
                batch.items.len()
            );
            Ok(batch.checkpoint)
        })
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
