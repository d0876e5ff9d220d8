//! The Cosmos DB store on Microsoft's in-memory emulator: status mapping, request
//! charges, malformed documents, and a differential test against the reference store.

mod common;

use common::Emulator;
use leasehold_adapters::{CosmosStore, MemoryStore, OpKind, Store};
use leasehold_engine::lease::{HostDocument, LeaseDocument, Record};
use leasehold_engine::store::{BatchOp, Op, Reply, StatusCode, StoreError};
use leasehold_engine::{Checkpoint, DocId, Etag, HostId, LeaseToken, PartitionKey, WallTime};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

async fn lease_store(emulator: &Emulator, name: &str) -> CosmosStore<Record> {
    emulator.container(name, "/id", 2);
    CosmosStore::new(emulator.client(name, vec![]).await)
}

fn lease(group: &str, token: &str) -> Record {
    Record::Lease(LeaseDocument::new(
        group,
        LeaseToken::from(token),
        WallTime(0),
    ))
}

fn etag_of(reply: &Result<Reply<Record>, StoreError>) -> Etag {
    match reply {
        Ok(Reply::Created(e) | Reply::Replaced(e)) => e.clone(),
        Ok(Reply::Read(stored)) => stored.etag.clone(),
        other => panic!("no etag in {other:?}"),
    }
}

#[tokio::test]
async fn a_stale_etag_gets_412_and_a_duplicate_create_409_and_a_missing_id_404() {
    let emulator = Emulator::new();
    let store = lease_store(&emulator, "statuses").await;
    let doc = lease("g", "0");
    let first = store.execute(Op::Create(doc.clone())).await.result;
    let etag = etag_of(&first);
    assert_eq!(
        store.execute(Op::Create(doc.clone())).await.result,
        Err(StoreError::Conflict)
    );

    let Record::Lease(mut newer) = doc.clone() else {
        unreachable!()
    };
    newer.owner = Some(HostId::from("a"));
    let replaced = store
        .execute(Op::Replace {
            doc: Record::Lease(newer.clone()),
            if_match: Some(etag.clone()),
        })
        .await
        .result;
    assert!(matches!(replaced, Ok(Reply::Replaced(_))));
    // The first etag is stale now.
    newer.owner = Some(HostId::from("b"));
    let stale = store
        .execute(Op::Replace {
            doc: Record::Lease(newer),
            if_match: Some(etag.clone()),
        })
        .await
        .result;
    assert_eq!(stale, Err(StoreError::PreconditionFailed));
    let id = doc_id(&doc);
    let stale_delete = store
        .execute(Op::Delete {
            pk: PartitionKey::new(id.as_str()),
            id: id.clone(),
            if_match: Some(etag),
        })
        .await
        .result;
    assert_eq!(stale_delete, Err(StoreError::PreconditionFailed));
    let missing = DocId::from("g..nope");
    let read = store
        .execute(Op::Read {
            pk: PartitionKey::new(missing.as_str()),
            id: missing,
        })
        .await
        .result;
    assert_eq!(read, Err(StoreError::NotFound));
}

fn doc_id(doc: &Record) -> DocId {
    use leasehold_engine::store::Document;
    doc.id().clone()
}

#[tokio::test]
async fn a_failed_batch_is_not_applied_and_reports_412_and_424() {
    let emulator = Emulator::new();
    let store = lease_store(&emulator, "batches").await;
    let doc = lease("g", "0");
    let etag = etag_of(&store.execute(Op::Create(doc.clone())).await.result);
    let id = doc_id(&doc);
    let Record::Lease(mut changed) = doc.clone() else {
        unreachable!()
    };
    changed.checkpoint = Some(Checkpoint::from("7"));
    let ops = vec![
        BatchOp::Replace {
            doc: Record::Lease(changed.clone()),
            if_match: Some(etag.clone()),
        },
        BatchOp::Replace {
            doc: Record::Lease(changed),
            if_match: Some(Etag::opaque("\"stale\"")),
        },
    ];
    let reply = store
        .execute(Op::Batch {
            pk: PartitionKey::new(id.as_str()),
            ops,
        })
        .await
        .result;
    let Ok(Reply::Batch(batch)) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(batch.status, StatusCode::MultiStatus);
    let statuses: Vec<_> = batch.outcomes.iter().map(|o| o.status).collect();
    assert_eq!(
        statuses,
        [StatusCode::FailedDependency, StatusCode::PreconditionFailed]
    );
    // Nothing was applied: the etag is unchanged.
    let read = store
        .execute(Op::Read {
            pk: PartitionKey::new(id.as_str()),
            id,
        })
        .await
        .result;
    assert_eq!(etag_of(&read), etag);
}

#[tokio::test]
async fn malformed_and_foreign_documents_are_skipped_and_left_untouched() {
    let emulator = Emulator::new();
    emulator.container("mixed", "/id", 1);
    let raw = emulator.client("mixed", vec![]).await;
    let store: CosmosStore<Record> = CosmosStore::new(raw.clone());
    store
        .execute(Op::Create(lease("g", "0")))
        .await
        .result
        .expect("created");
    // Missing fields, a wrong type, and someone else's document under our prefix.
    for bad in [
        serde_json::json!({"id": "g..1", "LeaseToken": "1"}),
        serde_json::json!({"id": "g..2", "LeaseToken": 2, "timestamp": "yesterday"}),
        serde_json::json!({"id": "g..orders", "customer": "x"}),
    ] {
        let id = bad["id"].as_str().unwrap().to_string();
        raw.create_item(id.clone(), &id, &bad, None)
            .await
            .expect("raw create");
    }
    let all = store
        .execute(Op::ReadAll {
            prefix: "g.".into(),
        })
        .await
        .result;
    let Ok(Reply::ReadAll(found)) = all else {
        panic!("{all:?}")
    };
    let ids: Vec<String> = found.iter().map(|s| doc_id(&s.doc).to_string()).collect();
    assert_eq!(ids, ["g..0"]);
    // Untouched: still readable as raw JSON, unchanged.
    let raw_read = raw
        .read_item("g..1", "g..1", None)
        .await
        .expect("still there");
    let value: serde_json::Value = raw_read.into_model().unwrap();
    assert_eq!(value["LeaseToken"], "1");
    assert!(value.get("Owner").is_none());
    // A point read names the document and why, instead of saying it is not there
    // (a host whose own heartbeat was broken so created, got 409, read, got 404, and
    // never got a tenure).
    let read = store
        .execute(Op::Read {
            pk: PartitionKey::new("g..2"),
            id: DocId::from("g..2"),
        })
        .await
        .result;
    assert!(
        matches!(&read, Err(StoreError::Malformed { id, .. }) if id == "g..2"),
        "{read:?}"
    );
    let absent = store
        .execute(Op::Read {
            pk: PartitionKey::new("g..9"),
            id: DocId::from("g..9"),
        })
        .await
        .result;
    assert_eq!(absent, Err(StoreError::NotFound));
}

#[tokio::test]
async fn every_call_is_charged_and_the_charges_are_kept_by_kind() {
    let emulator = Emulator::new();
    let store = lease_store(&emulator, "charges").await;
    let doc = lease("g", "0");
    let etag = etag_of(&store.execute(Op::Create(doc.clone())).await.result);
    store
        .execute(Op::Replace {
            doc: doc.clone(),
            if_match: Some(etag),
        })
        .await;
    store.execute(Op::ReadAll { prefix: "g".into() }).await;
    let c = store.charges();
    for kind in [OpKind::Create, OpKind::Replace, OpKind::ReadAll] {
        assert_eq!(c.calls(kind), 1, "{kind}");
        assert!(c.units(kind) > 0.0, "{kind} cost nothing");
    }
    println!(
        "RU: create {:.2}, replace {:.2}, read-all {:.2}",
        c.units(OpKind::Create),
        c.units(OpKind::Replace),
        c.units(OpKind::ReadAll)
    );
}

/// What a store answered, without etags (they differ between stores by design).
fn shape(reply: &Result<Reply<Record>, StoreError>) -> String {
    match reply {
        Ok(Reply::Created(_)) => "created".into(),
        Ok(Reply::Replaced(_)) => "replaced".into(),
        Ok(Reply::Deleted) => "deleted".into(),
        Ok(Reply::Read(s)) => format!("read {:?}", s.doc),
        Ok(Reply::ReadAll(all) | Reply::Query(all)) => {
            format!("all {:?}", all.iter().map(|s| &s.doc).collect::<Vec<_>>())
        }
        Ok(Reply::Batch(b)) => format!(
            "batch {} {:?}",
            b.status,
            b.outcomes.iter().map(|o| o.status).collect::<Vec<_>>()
        ),
        Err(e) => format!("error {}", e.status()),
    }
}

/// The same seeded sequence of creates, reads, replaces, deletes and batches (with
/// current and stale etags) against both stores gives the same statuses and the same
/// documents.
#[tokio::test]
async fn the_cosmos_store_and_the_reference_store_agree_on_random_operations() {
    let emulator = Emulator::new();
    let cosmos = lease_store(&emulator, "differential").await;
    let memory: MemoryStore<Record> = MemoryStore::new();
    let differs = first_disagreement(Either::M(&memory), Either::C(&cosmos)).await;
    assert_eq!(differs, None);
}

/// The differential check catches a store that ignores if-match.
#[tokio::test]
async fn the_differential_check_catches_a_store_that_ignores_etags() {
    let emulator = Emulator::new();
    let cosmos = lease_store(&emulator, "blind").await;
    let memory: MemoryStore<Record> = MemoryStore::new();
    let differs = first_disagreement(Either::M(&memory), Either::Blind(&cosmos)).await;
    assert!(differs.is_some_and(|d| d.contains("412")));
}

async fn first_disagreement(a: Either<'_>, b: Either<'_>) -> Option<String> {
    let (memory, cosmos) = (a, b);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // Per document: the last etag each store gave, and one it gave before.
    let mut etags: std::collections::HashMap<(usize, DocId), (Etag, Option<Etag>)> =
        Default::default();
    let ids = ["0", "1", "2"];
    for step in 0..300 {
        let token = ids[rng.random_range(0..ids.len())];
        let make = |rng: &mut ChaCha8Rng| -> Record {
            if rng.random_bool(0.2) {
                let mut h = HostDocument::new("g", HostId::from(token), WallTime(step));
                h.claims.push(LeaseToken::from("x"));
                Record::Host(h)
            } else {
                let mut l = LeaseDocument::new("g", LeaseToken::from(token), WallTime(step));
                l.owner = Some(HostId::from(format!("h{}", rng.random_range(0..3))));
                l.checkpoint = Some(Checkpoint::from(step.to_string()));
                Record::Lease(l)
            }
        };
        let doc = make(&mut rng);
        let id = doc_id(&doc);
        let pk = PartitionKey::new(id.as_str());
        let kind = rng.random_range(0..7);
        let stale = rng.random_bool(0.3);
        let mut results = Vec::new();
        for (which, store) in [(0usize, &memory), (1, &cosmos)] {
            let remembered = etags.get(&(which, id.clone())).cloned();
            let if_match = remembered.as_ref().map(|(current, old)| {
                if stale {
                    old.clone().unwrap_or_else(|| Etag::opaque("\"never\""))
                } else {
                    current.clone()
                }
            });
            let op = match kind {
                0 => Op::Create(doc.clone()),
                1 => Op::Read {
                    pk: pk.clone(),
                    id: id.clone(),
                },
                2 => Op::ReadAll { prefix: "g".into() },
                3 | 4 => Op::Replace {
                    doc: doc.clone(),
                    if_match: if_match.clone(),
                },
                5 => Op::Delete {
                    pk: pk.clone(),
                    id: id.clone(),
                    if_match: if_match.clone(),
                },
                _ => Op::Batch {
                    pk: pk.clone(),
                    ops: vec![
                        BatchOp::Replace {
                            doc: doc.clone(),
                            if_match: if_match.clone(),
                        },
                        BatchOp::Read(id.clone()),
                    ],
                },
            };
            let reply = store.execute(op).await;
            match &reply {
                Ok(Reply::Created(e) | Reply::Replaced(e)) => {
                    let old = remembered.map(|(current, _)| current);
                    etags.insert((which, id.clone()), (e.clone(), old));
                }
                Ok(Reply::Batch(b)) if b.is_success() => {
                    if let Some(e) = &b.outcomes[0].etag {
                        let old = remembered.map(|(current, _)| current);
                        etags.insert((which, id.clone()), (e.clone(), old));
                    }
                }
                Ok(Reply::Deleted) => {
                    etags.remove(&(which, id.clone()));
                }
                _ => {}
            }
            results.push(shape(&reply));
        }
        if results[0] != results[1] {
            return Some(format!(
                "step {step}: kind {kind}, stale {stale}, doc {id}: {} vs {}",
                results[0], results[1]
            ));
        }
    }
    None
}

enum Either<'a> {
    M(&'a MemoryStore<Record>),
    C(&'a CosmosStore<Record>),
    /// Known-bad: drops every if-match, so stale writes succeed.
    Blind(&'a CosmosStore<Record>),
}

impl Either<'_> {
    async fn execute(&self, op: Op<Record>) -> Result<Reply<Record>, StoreError> {
        match self {
            Either::M(s) => s.execute(op).await.result,
            Either::C(s) => s.execute(op).await.result,
            Either::Blind(s) => {
                let op = match op {
                    Op::Replace { doc, .. } => Op::Replace {
                        doc,
                        if_match: None,
                    },
                    Op::Delete { pk, id, .. } => Op::Delete {
                        pk,
                        id,
                        if_match: None,
                    },
                    other => other,
                };
                s.execute(op).await.result
            }
        }
    }
}

/// A fault rule on `operation` that answers `result`, at most `times` times.
fn fault(
    id: &str,
    operation: azure_data_cosmos::fault_injection::FaultOperationType,
    result: azure_data_cosmos::fault_injection::FaultInjectionResult,
    times: u32,
) -> std::sync::Arc<azure_data_cosmos::fault_injection::FaultInjectionRule> {
    use azure_data_cosmos::fault_injection::{
        FaultInjectionConditionBuilder, FaultInjectionRuleBuilder,
    };
    std::sync::Arc::new(
        FaultInjectionRuleBuilder::new(id, result)
            .with_condition(
                FaultInjectionConditionBuilder::new()
                    .with_operation_type(operation)
                    .build(),
            )
            .with_hit_limit(times)
            .build(),
    )
}

/// The SDK retries a 429 for minutes and a write after a 503, answering 412 or 409
/// for a write that had won. The store turns those retries off on every request, so
/// the engine hears the first answer: 429 as `Throttled`, 503 as ambiguous. The
/// client here keeps the SDK's defaults, as a user's would.
#[tokio::test]
async fn the_sdk_retries_nothing_beneath_the_store() {
    use azure_data_cosmos::fault_injection::{
        FaultInjectionErrorType, FaultInjectionResultBuilder, FaultOperationType,
    };
    let emulator = Emulator::new();
    emulator.container("no-retries", "/id", 1);
    let throttle = fault(
        "replace-429",
        FaultOperationType::ReplaceItem,
        FaultInjectionResultBuilder::new()
            .with_error(FaultInjectionErrorType::TooManyRequests)
            .build(),
        1,
    );
    let unavailable = fault(
        "create-503",
        FaultOperationType::CreateItem,
        FaultInjectionResultBuilder::new()
            .with_error(FaultInjectionErrorType::ServiceUnavailable)
            .build(),
        1,
    );
    let client = emulator
        .client("no-retries", vec![throttle.clone(), unavailable.clone()])
        .await;
    let store: CosmosStore<Record> = CosmosStore::new(client);
    let doc = lease("g", "0");
    let created = store.execute(Op::Create(doc.clone())).await.result;
    assert_eq!(
        created,
        Err(StoreError::Unavailable),
        "the 503, not a retry"
    );
    assert_eq!(unavailable.hit_count(), 1);
    let etag = etag_of(&store.execute(Op::Create(doc.clone())).await.result);
    let replaced = store
        .execute(Op::Replace {
            doc,
            if_match: Some(etag),
        })
        .await
        .result;
    // An injected 429 names no retry-after: the store's one-second default applies.
    assert!(
        matches!(replaced, Err(StoreError::Throttled { retry_after }) if retry_after.as_millis() == 1_000),
        "{replaced:?}"
    );
    assert_eq!(throttle.hit_count(), 1, "the SDK did not retry the 429");
}

/// The service's own 429 carries how long to wait; the engine hears it as sent.
#[tokio::test]
async fn a_throttled_request_reaches_the_engine_with_the_services_retry_after() {
    let emulator = Emulator::throttling(400);
    emulator.container("throttled", "/id", 1);
    let store: CosmosStore<Record> = CosmosStore::new(emulator.client("throttled", vec![]).await);
    let mut waits = Vec::new();
    for i in 0..200 {
        let result = store
            .execute(Op::Create(lease("g", &i.to_string())))
            .await
            .result;
        if let Err(StoreError::Throttled { retry_after }) = result {
            waits.push(retry_after.as_millis());
        }
    }
    assert!(
        !waits.is_empty(),
        "400 RU/s cannot take 200 creates in a second"
    );
    assert!(
        waits.iter().all(|ms| (1..=1_000).contains(ms)),
        "the service's retry-after, within its one-second window: {waits:?}"
    );
}

/// The service may send a plain "no such document" with sub-status 0: it is a 404,
/// not an ambiguous failure (which would make the engine read forever).
#[tokio::test]
async fn a_404_with_sub_status_0_is_not_found() {
    use azure_core::http::StatusCode as Http;
    use azure_data_cosmos::fault_injection::{
        CustomResponseBuilder, FaultInjectionResultBuilder, FaultOperationType,
    };
    let emulator = Emulator::new();
    emulator.container("substatus", "/id", 1);
    let not_found = fault(
        "read-404-0",
        FaultOperationType::ReadItem,
        FaultInjectionResultBuilder::new()
            .with_custom_response(
                CustomResponseBuilder::new(Http::NotFound)
                    .with_sub_status(0)
                    .build(),
            )
            .build(),
        1,
    );
    let client = emulator.client("substatus", vec![not_found.clone()]).await;
    let store: CosmosStore<Record> = CosmosStore::new(client);
    let id = DocId::from("g..0");
    let read = store
        .execute(Op::Read {
            pk: PartitionKey::new(id.as_str()),
            id,
        })
        .await
        .result;
    assert_eq!(not_found.hit_count(), 1);
    assert_eq!(read, Err(StoreError::NotFound));
}
