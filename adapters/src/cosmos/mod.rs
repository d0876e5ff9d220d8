//! The Cosmos DB store, on `azure_data_cosmos`.
//!
//! # Container layout
//! - One container holds the documents of any number of processor groups: every id
//!   starts with its group's prefix (`orders..3` for lease `3` of group `orders`,
//!   `orders.host.a` for host `a`'s heartbeat), as the change feed processor's lease
//!   prefix allows. A group reads its documents with `STARTSWITH(c.id, prefix)`.
//! - The partition key path is `/id`, as for the change feed processor's lease
//!   containers: every document is its own logical partition, so writes to different
//!   leases never contend for one partition's throughput, and a point read or
//!   if-match write needs only the id. The cost is that a transactional batch covers
//!   one document, which is all the lease protocol needs.

mod account;
mod change_feed;
mod query;
mod status;

use crate::charge::{Charges, OpKind};
use crate::store::{Response, Store};
use azure_core::http::HttpClient;
use azure_data_cosmos::options::{
    BatchDeleteOptions, BatchOptions, BatchReplaceOptions, BatchUpsertOptions, ItemReadOptions,
    ItemWriteOptions, OperationOptions, Precondition, QueryOptions, ThrottlingRetryOptionsBuilder,
};
use azure_data_cosmos::{ContainerClient, FeedScope, Query, TransactionalBatch};
use futures::StreamExt;
use leasehold_engine::store::{
    BatchOp, BatchOutcome, BatchResponse, Document, Limits, Op, Query as StoreQuery, Reply,
    StoreError, Stored, check_batch,
};
use leasehold_engine::{Etag, PartitionKey};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::marker::PhantomData;
use std::sync::Arc;

pub use account::{Account, AccountError, AccountFacts, Consistency};
pub use change_feed::ChangeFeedSource;
pub use status::store_error;

/// A Cosmos DB container seen as an engine store of documents `D`.
///
/// ```no_run
/// # async fn f(container: azure_data_cosmos::ContainerClient) {
/// use leasehold_adapters::{CosmosStore, Store};
/// use leasehold_engine::lease::Record;
/// let store: CosmosStore<Record> = CosmosStore::new(container);
/// println!("{} RU so far", store.charges().total_units());
/// # }
/// ```
pub struct CosmosStore<D> {
    container: ContainerClient,
    charges: Arc<Charges>,
    limits: Limits,
    /// The account to read and judge before first use, and the client to read it with.
    account: Option<(Account, Arc<dyn HttpClient>)>,
    _docs: PhantomData<fn() -> D>,
}

impl<D> Clone for CosmosStore<D> {
    fn clone(&self) -> Self {
        CosmosStore {
            container: self.container.clone(),
            charges: self.charges.clone(),
            limits: self.limits,
            account: self.account.clone(),
            _docs: PhantomData,
        }
    }
}

impl<D> std::fmt::Debug for CosmosStore<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CosmosStore")
            .field("charges", &self.charges)
            .finish_non_exhaustive()
    }
}

impl<D> CosmosStore<D> {
    /// A store on `container`, whose partition key path must be the documents'
    /// ([`Document::PARTITION_KEY_PATH`]); [`Store::check`] checks it, and the
    /// processor does so before it starts.
    pub fn new(container: ContainerClient) -> Self {
        CosmosStore {
            container,
            charges: Arc::default(),
            limits: Limits::default(),
            account: None,
            _docs: PhantomData,
        }
    }

    /// Has [`Store::check`], which a processor or client runs before its first
    /// request, also read `account` through `http` and refuse it unless the proof
    /// covers it ([`AccountFacts::check`]): multi-region writes and reads weaker than
    /// Session are refused with
    /// [`ContainerError::Account`](crate::ContainerError::Account), before anything
    /// is written.
    ///
    /// ```no_run
    /// # async fn f(container: azure_data_cosmos::ContainerClient, http: std::sync::Arc<dyn azure_core::http::HttpClient>) {
    /// use azure_core::credentials::Secret;
    /// use azure_core::http::Url;
    /// use leasehold_adapters::{Account, CosmosStore, Store};
    /// use leasehold_engine::lease::Record;
    /// let endpoint = Url::parse("https://myaccount.documents.azure.com/").expect("a url");
    /// let store: CosmosStore<Record> = CosmosStore::new(container)
    ///     .with_account_check(Account::with_key(endpoint, Secret::new("a key")), http);
    /// store.check().await.expect("a single write region, Session reads");
    /// # }
    /// ```
    pub fn with_account_check(mut self, account: Account, http: Arc<dyn HttpClient>) -> Self {
        self.account = Some((account, http));
        self
    }
}

/// A response's charge, or 0 when the service sent none.
fn charge_of(headers: &azure_data_cosmos::models::ResponseHeaders) -> f64 {
    headers.request_charge().map_or(0.0, |c| c.value())
}

fn etag_of(headers: &azure_data_cosmos::models::ResponseHeaders) -> Option<Etag> {
    headers.etag().map(|e| Etag::opaque(e.to_string()))
}

/// Every request's options: the SDK's own retries off wherever they can be.
///
/// The engine resolves an unknown outcome itself (it reads before it writes again),
/// and waits out a 429 for as long as the service asks: beneath it, the SDK would
/// retry a 429 for up to 270 s and an applied write after a 408, 503 or transport
/// error, answering 412 or 409 for a write that won. What cannot be turned off (449,
/// one resend after a transport error, a 403/3 failover, a partition split's 410) the
/// model covers as a retried write (`--retries`, the simulator's `retry` fault).
pub(crate) fn no_sdk_retries() -> OperationOptions {
    let mut options = OperationOptions::default();
    options.throttling_retry_options = Some(
        ThrottlingRetryOptionsBuilder::new()
            .with_max_retry_count(0)
            .build(),
    );
    options.max_failover_retry_count = Some(0);
    options
}

fn write_options(if_match: Option<&Etag>) -> Option<ItemWriteOptions> {
    let options = ItemWriteOptions::default().with_operation_options(no_sdk_retries());
    Some(match if_match {
        Some(etag) => options.with_precondition(Precondition::if_match(etag.to_string())),
        None => options,
    })
}

fn read_options() -> Option<ItemReadOptions> {
    Some(ItemReadOptions::default().with_operation_options(no_sdk_retries()))
}

/// Reads `value` as a `D`, or says why not. System properties (`_etag`, `_ts`, ...)
/// are ignored by the documents' own deserialisers.
fn parse<D: DeserializeOwned>(value: Value) -> Result<D, (String, serde_json::Error)> {
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("<no id>")
        .to_string();
    serde_json::from_value(value).map_err(|e| (id, e))
}

impl<D> CosmosStore<D>
where
    D: Document + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    async fn run(&self, op: Op<D>) -> (Result<Reply<D>, StoreError>, f64) {
        let c = &self.container;
        match op {
            Op::Create(doc) => {
                if let Err(e) = self.limits.check_size(&doc) {
                    return (Err(e), 0.0);
                }
                let pk = doc.partition_key();
                match c
                    .create_item(
                        pk.as_str().to_string(),
                        doc.id().as_str(),
                        &doc,
                        write_options(None),
                    )
                    .await
                {
                    Ok(r) => {
                        let charge = charge_of(r.headers());
                        (
                            etag_of(r.headers())
                                .ok_or_else(missing_etag)
                                .map(Reply::Created),
                            charge,
                        )
                    }
                    Err(e) => (Err(store_error(&e)), status::charge(&e)),
                }
            }
            Op::Read { pk, id } => match c
                .read_item(pk.as_str().to_string(), id.as_str(), read_options())
                .await
            {
                Ok(r) => {
                    let charge = charge_of(r.headers());
                    let etag = etag_of(r.headers());
                    let read = match (r.into_model::<Value>(), etag) {
                        (Ok(value), Some(etag)) => match parse::<D>(value) {
                            Ok(doc) => Ok(Reply::Read(Stored { doc, etag })),
                            Err((id, e)) => {
                                // Never handed to the engine, so never overwritten.
                                tracing::error!(%id, error = %e, "a stored document cannot be read");
                                Err(StoreError::Malformed {
                                    id,
                                    reason: e.to_string(),
                                })
                            }
                        },
                        (Err(e), _) => Err(store_error(&e)),
                        (_, None) => Err(missing_etag()),
                    };
                    (read, charge)
                }
                Err(e) => (Err(store_error(&e)), status::charge(&e)),
            },
            Op::ReadAll { prefix } => self.read_all(&prefix).await,
            Op::Query(query) => self.query(&query).await,
            Op::Replace { doc, if_match } => {
                if let Err(e) = self.limits.check_size(&doc) {
                    return (Err(e), 0.0);
                }
                let pk = doc.partition_key();
                let options = write_options(if_match.as_ref());
                match c
                    .replace_item(pk.as_str().to_string(), doc.id().as_str(), &doc, options)
                    .await
                {
                    Ok(r) => {
                        let charge = charge_of(r.headers());
                        (
                            etag_of(r.headers())
                                .ok_or_else(missing_etag)
                                .map(Reply::Replaced),
                            charge,
                        )
                    }
                    Err(e) => (Err(store_error(&e)), status::charge(&e)),
                }
            }
            Op::Delete { pk, id, if_match } => {
                let options = write_options(if_match.as_ref());
                match c
                    .delete_item(pk.as_str().to_string(), id.as_str(), options)
                    .await
                {
                    Ok(r) => (Ok(Reply::Deleted), charge_of(r.headers())),
                    Err(e) => (Err(store_error(&e)), status::charge(&e)),
                }
            }
            Op::Batch { pk, ops } => self.batch(pk, ops).await,
        }
    }

    async fn read_all(&self, prefix: &str) -> (Result<Reply<D>, StoreError>, f64) {
        let query = match Query::from("SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)")
            .with_parameter("@prefix", prefix)
        {
            Ok(q) => q,
            Err(e) => return (Err(store_error(&e)), 0.0),
        };
        let (found, charge) = match self.fetch(query, FeedScope::full_container(), None).await {
            Ok(fetched) => fetched,
            Err(failed) => return failed,
        };
        let mut found = found;
        // The reference store lists by id, then partition key.
        found.sort_by(|a, b| {
            (a.doc.id(), a.doc.partition_key()).cmp(&(b.doc.id(), b.doc.partition_key()))
        });
        (Ok(Reply::ReadAll(found)), charge)
    }

    /// A selective read, as one parameterized query in one logical partition, or
    /// across all of them.
    async fn query(&self, q: &StoreQuery) -> (Result<Reply<D>, StoreError>, f64) {
        let (sql, parameters) = query::query_text(q);
        let mut query = Query::from(sql);
        for (name, value) in parameters {
            query = match query.with_parameter(name, value) {
                Ok(query) => query,
                Err(e) => return (Err(store_error(&e)), 0.0),
            };
        }
        let scope = match &q.pk {
            Some(pk) => FeedScope::partition(pk.as_str().to_string()),
            None => FeedScope::full_container(),
        };
        match self.fetch(query, scope, q.limit).await {
            Ok((found, charge)) => (Ok(Reply::Query(found)), charge),
            Err(failed) => failed,
        }
    }

    /// Runs `query` page by page, stopping once `limit` documents are in.
    async fn fetch(
        &self,
        query: Query,
        scope: FeedScope,
        limit: Option<usize>,
    ) -> Result<(Vec<Stored<D>>, f64), (Result<Reply<D>, StoreError>, f64)> {
        let mut pages = match self
            .container
            .query_items::<Value>(
                query,
                scope,
                Some(QueryOptions::default().with_operation_options(no_sdk_retries())),
            )
            .await
        {
            Ok(items) => items.into_pages(),
            Err(e) => return Err((Err(store_error(&e)), status::charge(&e))),
        };
        let mut charge = 0.0;
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            if limit.is_some_and(|n| found.len() >= n) {
                break;
            }
            let page = match page {
                Ok(page) => page,
                Err(e) => return Err((Err(store_error(&e)), charge + status::charge(&e))),
            };
            charge += charge_of(page.headers());
            for value in page.into_items() {
                let etag = value.get("_etag").and_then(Value::as_str).map(Etag::opaque);
                match (parse::<D>(value), etag) {
                    (Ok(doc), Some(etag)) => found.push(Stored { doc, etag }),
                    (Err((id, e)), _) => {
                        tracing::warn!(%id, error = %e, "skipping a malformed document");
                    }
                    (Ok(doc), None) => {
                        tracing::warn!(id = %doc.id(), "skipping a document without an etag");
                    }
                }
            }
        }
        if let Some(n) = limit {
            found.truncate(n);
        }
        Ok((found, charge))
    }

    async fn batch(
        &self,
        pk: PartitionKey,
        ops: Vec<BatchOp<D>>,
    ) -> (Result<Reply<D>, StoreError>, f64) {
        if let Err(e) = check_batch(&self.limits, &pk, &ops) {
            return (Err(e), 0.0);
        }
        for op in &ops {
            if let BatchOp::Create(doc) | BatchOp::Upsert(doc) | BatchOp::Replace { doc, .. } = op
                && let Err(e) = self.limits.check_size(doc)
            {
                return (Err(e), 0.0);
            }
        }
        let mut batch = TransactionalBatch::new(pk.as_str().to_string());
        let reads: Vec<bool> = ops
            .iter()
            .map(|op| matches!(op, BatchOp::Read(_)))
            .collect();
        for op in ops {
            let added = match op {
                BatchOp::Create(doc) => batch.create_item(&doc),
                BatchOp::Upsert(doc) => batch.upsert_item(&doc, None::<BatchUpsertOptions>),
                BatchOp::Read(id) => Ok(batch.read_item(id.as_str().to_string(), None)),
                BatchOp::Replace { doc, if_match } => {
                    let options = if_match.map(|etag| {
                        BatchReplaceOptions::default()
                            .with_precondition(Precondition::if_match(etag.to_string()))
                    });
                    batch.replace_item(doc.id().as_str().to_string(), &doc, options)
                }
                BatchOp::Delete { id, if_match } => {
                    let options = if_match.map(|etag| {
                        BatchDeleteOptions::default()
                            .with_precondition(Precondition::if_match(etag.to_string()))
                    });
                    Ok(batch.delete_item(id.as_str().to_string(), options))
                }
            };
            batch = match added {
                Ok(batch) => batch,
                Err(e) => return (Err(store_error(&e)), 0.0),
            };
        }
        let response = match self
            .container
            .execute_transactional_batch(
                batch,
                Some(BatchOptions::default().with_operation_options(no_sdk_retries())),
            )
            .await
        {
            Ok(r) => r,
            Err(e) => return (Err(store_error(&e)), status::charge(&e)),
        };
        let charge = charge_of(response.headers());
        // A failed batch is still `Ok`, with 207 and per-operation statuses.
        let model = match response.into_model() {
            Ok(m) => m,
            Err(e) => return (Err(store_error(&e)), charge),
        };
        let mut outcomes = Vec::with_capacity(model.results().len());
        for (result, is_read) in model.results().iter().zip(reads) {
            let status = status::code(result.status_code());
            let doc = if is_read && result.is_success() {
                match result.into_model::<Value>() {
                    Ok(Some(value)) => parse::<D>(value).ok(),
                    _ => None,
                }
            } else {
                None
            };
            outcomes.push(BatchOutcome {
                status,
                etag: result.etag().map(Etag::opaque),
                doc,
            });
        }
        let all_ok = outcomes.iter().all(|o| o.status.is_success());
        let status = if all_ok {
            leasehold_engine::store::StatusCode::Ok
        } else {
            leasehold_engine::store::StatusCode::MultiStatus
        };
        (Ok(Reply::Batch(BatchResponse { status, outcomes })), charge)
    }
}

fn missing_etag() -> StoreError {
    StoreError::BadRequest(leasehold_engine::store::BadRequest::Rejected(
        "the response carried no etag".into(),
    ))
}

impl<D> Store<D> for CosmosStore<D>
where
    D: Document + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    async fn execute(&self, op: Op<D>) -> Response<D> {
        let kind = OpKind::of(&op);
        let (result, charge) = self.run(op).await;
        self.charges.record(kind, charge);
        Response { result, charge }
    }

    async fn check(&self) -> Result<(), crate::store::ContainerError> {
        use crate::store::ContainerError;
        use azure_data_cosmos::models::{ContainerProperties, TimeToLive};
        if let Some((account, http)) = &self.account {
            account.read(http.as_ref()).await?.check()?;
        }
        let properties: ContainerProperties = self
            .container
            .read(None)
            .await
            .and_then(|r| r.into_model())
            .map_err(|e| ContainerError::Unreadable(store_error(&e)))?;
        let container = properties.id.to_string();
        let found: Vec<String> = properties
            .partition_key
            .paths()
            .iter()
            .map(|p| p.to_string())
            .collect();
        if found != [D::PARTITION_KEY_PATH] {
            return Err(ContainerError::PartitionKey {
                container,
                expected: D::PARTITION_KEY_PATH,
                found,
            });
        }
        match properties.default_ttl {
            TimeToLive::Seconds(seconds) => Err(ContainerError::DefaultTtl { container, seconds }),
            _ => Ok(()),
        }
    }

    fn charges(&self) -> &Charges {
        &self.charges
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use leasehold_engine::lease::Record;
    use leasehold_engine::queue::Message;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A field's value as a foreign writer might leave it.
    fn odd_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[ -~]{0,8}".prop_map(Value::from),
            Just(json!([1, "x"])),
            Just(json!({"nested": {"deeper": null}})),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// What the store reads from the service is decoded or refused with the
        /// document's id, never panicked on; a refused document is skipped by the
        /// store, so it is never handed to the engine, nor overwritten.
        #[test]
        fn a_stored_document_with_any_field_broken_is_decoded_or_refused_with_its_id(
            field in prop::sample::select(vec![
                "LeaseToken", "Owner", "Epoch", "timestamp", "ContinuationToken", "properties",
                "Fenced", "Status", "NextVisibleTime", "DequeueCount", "Lock", "Data", "kind",
            ]),
            value in odd_value(),
        ) {
            let mut docs = [
                json!({"id": "g..0", "LeaseToken": "0", "Owner": "a", "Epoch": 1, "timestamp": 5,
                       "_rid": "r", "_etag": "\"e\"", "_ts": 1, "_self": "s", "_attachments": "a"}),
                json!({"id": "q:m", "QueueName": "q", "Name": "m", "Status": "Pending",
                       "CreatedDate": 1, "NextVisibleTime": 1, "DequeueCount": 0, "Data": "",
                       "_etag": "\"e\"", "_ts": 1}),
            ];
            for doc in &mut docs {
                doc[field] = value.clone();
                let id = doc["id"].as_str().unwrap_or_default().to_string();
                if let Err((named, _)) = parse::<Record>(doc.clone()) {
                    prop_assert_eq!(&named, &id);
                }
                if let Err((named, _)) = parse::<Message>(doc.clone()) {
                    prop_assert_eq!(&named, &id);
                }
            }
        }
    }

    /// The sibling: a document without an id is refused under a placeholder, so the
    /// check above compares ids it can tell apart.
    #[test]
    fn a_document_without_an_id_is_refused_under_a_placeholder() {
        let refused = parse::<Record>(json!({"LeaseToken": 7}));
        assert!(
            matches!(refused, Err((ref id, _)) if id == "<no id>"),
            "{refused:?}"
        );
    }
}
