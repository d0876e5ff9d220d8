//! The reference store, status code by status code. These are the semantics the
//! Cosmos DB adapter is differential-tested against.

use leasehold_engine::store::{
    BadRequest, BatchOp, Container, Document, FieldPath, Limits, Op, Reply, StatusCode, StoreError,
    Value,
};
use leasehold_engine::{DocId, Etag, PartitionKey};

/// A document with its own partition key, like a queue message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Item {
    id: DocId,
    pk: PartitionKey,
    body: String,
}

impl Document for Item {
    const PARTITION_KEY_PATH: &'static str = "/pk";

    fn id(&self) -> &DocId {
        &self.id
    }
    fn partition_key(&self) -> PartitionKey {
        self.pk.clone()
    }
    fn stored_size(&self) -> usize {
        self.id.as_str().len() + self.body.len()
    }
    fn field(&self, path: &FieldPath) -> Option<Value> {
        match path.as_str() {
            "id" => Some(Value::String(self.id.as_str().into())),
            "body" => Some(Value::String(self.body.clone())),
            _ => None,
        }
    }
}

fn item(pk: &str, id: &str, body: &str) -> Item {
    Item {
        id: DocId::from(id),
        pk: PartitionKey::from(pk),
        body: body.into(),
    }
}

fn pk(s: &str) -> PartitionKey {
    PartitionKey::from(s)
}

fn id(s: &str) -> DocId {
    DocId::from(s)
}

#[test]
fn create_if_absent_succeeds_once_then_conflicts_with_409() {
    let mut store = Container::new();
    store.create(item("p", "a", "1")).unwrap();
    let err = store.create(item("p", "a", "2")).unwrap_err();
    assert_eq!(err, StoreError::Conflict);
    assert_eq!(err.status().code(), 409);
    assert_eq!(store.read(&pk("p"), &id("a")).unwrap().doc.body, "1");
}

#[test]
fn the_same_id_under_another_partition_key_is_another_document() {
    let mut store = Container::new();
    store.create(item("p", "a", "1")).unwrap();
    store.create(item("q", "a", "2")).unwrap();
    assert_eq!(store.read(&pk("q"), &id("a")).unwrap().doc.body, "2");
    assert_eq!(store.len(), 2);
}

#[test]
fn reading_a_missing_document_is_404() {
    let store = Container::<Item>::new();
    let err = store.read(&pk("p"), &id("nope")).unwrap_err();
    assert_eq!(
        (err.clone(), err.status().code()),
        (StoreError::NotFound, 404)
    );
}

#[test]
fn read_all_returns_exactly_the_id_prefix_in_id_order_across_partition_keys() {
    let mut store = Container::new();
    for (p, i) in [
        ("z", "grp.2"),
        ("a", "grp.1"),
        ("m", "grp.10"),
        ("a", "other.1"),
        ("a", "gr"),
    ] {
        store.create(item(p, i, "")).unwrap();
    }
    let ids: Vec<String> = store
        .read_all("grp.")
        .into_iter()
        .map(|s| s.doc.id.to_string())
        .collect();
    assert_eq!(ids, ["grp.1", "grp.10", "grp.2"]);
    assert_eq!(store.read_all("").len(), 5);
    assert!(store.read_all("nothing").is_empty());
}

#[test]
fn every_write_issues_a_fresh_etag() {
    let mut store = Container::new();
    let mut seen = vec![store.create(item("p", "a", "0")).unwrap()];
    for n in 1..20 {
        let etag = store
            .replace(item("p", "a", &n.to_string()), seen.last())
            .unwrap();
        assert!(!seen.contains(&etag));
        seen.push(etag);
    }
    assert_eq!(
        store.read(&pk("p"), &id("a")).unwrap().etag,
        *seen.last().unwrap()
    );
}

#[test]
fn replace_with_a_stale_etag_is_refused_with_412_and_changes_nothing() {
    let mut store = Container::new();
    let first = store.create(item("p", "a", "1")).unwrap();
    store.replace(item("p", "a", "2"), Some(&first)).unwrap();
    let err = store
        .replace(item("p", "a", "3"), Some(&first))
        .unwrap_err();
    assert_eq!(
        (err.clone(), err.status().code()),
        (StoreError::PreconditionFailed, 412)
    );
    assert_eq!(store.read(&pk("p"), &id("a")).unwrap().doc.body, "2");
}

#[test]
fn replace_without_if_match_is_a_blind_write() {
    let mut store = Container::new();
    store.create(item("p", "a", "1")).unwrap();
    store.replace(item("p", "a", "2"), None).unwrap();
    assert_eq!(store.read(&pk("p"), &id("a")).unwrap().doc.body, "2");
}

#[test]
fn replacing_a_missing_document_is_404_even_with_if_match() {
    let mut store = Container::new();
    let etag = store.create(item("p", "a", "1")).unwrap();
    assert_eq!(
        store.replace(item("p", "b", "1"), Some(&etag)),
        Err(StoreError::NotFound)
    );
    assert_eq!(
        store.replace(item("p", "b", "1"), None),
        Err(StoreError::NotFound)
    );
}

#[test]
fn delete_with_if_match_honours_the_etag() {
    let mut store = Container::new();
    let first = store.create(item("p", "a", "1")).unwrap();
    let second = store.replace(item("p", "a", "2"), Some(&first)).unwrap();
    assert_eq!(
        store.delete(&pk("p"), &id("a"), Some(&first)),
        Err(StoreError::PreconditionFailed)
    );
    store.delete(&pk("p"), &id("a"), Some(&second)).unwrap();
    assert_eq!(
        store.delete(&pk("p"), &id("a"), None),
        Err(StoreError::NotFound)
    );
    assert!(store.is_empty());
}

#[test]
fn an_oversized_document_is_refused_with_413_and_never_stored() {
    let limits = Limits {
        max_document_bytes: 10,
        ..Limits::default()
    };
    let mut store = Container::with_limits(limits);
    let big = item("p", "a", "0123456789");
    let err = store.create(big.clone()).unwrap_err();
    assert_eq!(
        err,
        StoreError::TooLarge {
            size: 11,
            limit: 10
        }
    );
    assert_eq!(err.status().code(), 413);
    assert!(store.is_empty());
    let etag = store.create(item("p", "a", "")).unwrap();
    assert!(matches!(
        store.replace(big, Some(&etag)),
        Err(StoreError::TooLarge { .. })
    ));
    assert_eq!(store.read(&pk("p"), &id("a")).unwrap().doc.body, "");
}

#[test]
fn the_default_limit_is_cosmos_dbs_two_megabytes() {
    assert_eq!(Limits::default().max_document_bytes, 2 * 1024 * 1024);
}

#[test]
fn a_successful_batch_applies_everything_with_per_operation_statuses() {
    let mut store = Container::new();
    let a = store.create(item("p", "a", "1")).unwrap();
    store.create(item("p", "gone", "")).unwrap();
    let response = store
        .batch(
            &pk("p"),
            vec![
                BatchOp::Create(item("p", "b", "new")),
                BatchOp::Replace {
                    doc: item("p", "a", "2"),
                    if_match: Some(a),
                },
                BatchOp::Read(id("b")),
                BatchOp::Delete {
                    id: id("gone"),
                    if_match: None,
                },
                BatchOp::Upsert(item("p", "c", "up")),
            ],
        )
        .unwrap();
    assert!(response.is_success());
    assert_eq!(response.status.code(), 200);
    let codes: Vec<u16> = response.outcomes.iter().map(|o| o.status.code()).collect();
    assert_eq!(codes, [201, 200, 200, 204, 201]);
    // A read inside the batch sees the batch's own earlier writes.
    assert_eq!(response.outcomes[2].doc.as_ref().unwrap().body, "new");
    assert_eq!(response.outcomes[2].etag, response.outcomes[0].etag);
    assert_eq!(store.read(&pk("p"), &id("a")).unwrap().doc.body, "2");
    assert_eq!(store.read(&pk("p"), &id("gone")), Err(StoreError::NotFound));
    assert_eq!(store.len(), 3);
}

#[test]
fn a_failed_batch_applies_nothing_and_reports_207_with_412_and_424() {
    let mut store = Container::new();
    let stale = store.create(item("p", "a", "1")).unwrap();
    store.replace(item("p", "a", "2"), Some(&stale)).unwrap();
    let before = store.clone();
    let response = store
        .batch(
            &pk("p"),
            vec![
                BatchOp::Create(item("p", "b", "new")),
                BatchOp::Replace {
                    doc: item("p", "a", "3"),
                    if_match: Some(stale),
                },
                BatchOp::Upsert(item("p", "c", "")),
            ],
        )
        .unwrap();
    assert_eq!(response.status, StatusCode::MultiStatus);
    let codes: Vec<u16> = response.outcomes.iter().map(|o| o.status.code()).collect();
    assert_eq!(codes, [424, 412, 424]);
    assert_eq!(
        response.failure(),
        Some((1, StatusCode::PreconditionFailed))
    );
    assert_eq!(store, before, "nothing of a failed batch is applied");
}

#[test]
fn a_batch_create_conflict_reports_409_in_place() {
    let mut store = Container::new();
    store.create(item("p", "a", "1")).unwrap();
    let response = store
        .batch(
            &pk("p"),
            vec![
                BatchOp::Upsert(item("p", "x", "")),
                BatchOp::Create(item("p", "a", "again")),
            ],
        )
        .unwrap();
    let codes: Vec<u16> = response.outcomes.iter().map(|o| o.status.code()).collect();
    assert_eq!(codes, [424, 409]);
    assert_eq!(store.read(&pk("p"), &id("x")), Err(StoreError::NotFound));
}

#[test]
fn a_batch_that_reads_a_missing_document_fails_with_404() {
    let mut store = Container::<Item>::new();
    let response = store
        .batch(&pk("p"), vec![BatchOp::Read(id("nope"))])
        .unwrap();
    assert_eq!(response.failure(), Some((0, StatusCode::NotFound)));
}

#[test]
fn malformed_batches_are_refused_whole_with_400() {
    let mut store = Container::<Item>::new();
    assert_eq!(
        store.batch(&pk("p"), vec![]),
        Err(StoreError::BadRequest(BadRequest::EmptyBatch))
    );
    let ops = vec![
        BatchOp::Upsert(item("p", "a", "")),
        BatchOp::Upsert(item("q", "b", "")),
    ];
    let err = store.batch(&pk("p"), ops).unwrap_err();
    assert_eq!(
        err,
        StoreError::BadRequest(BadRequest::CrossPartitionBatch { index: 1 })
    );
    assert_eq!(err.status().code(), 400);
    let many = (0..101)
        .map(|n| BatchOp::Upsert(item("p", &n.to_string(), "")))
        .collect();
    assert!(matches!(
        store.batch(&pk("p"), many),
        Err(StoreError::BadRequest(BadRequest::BatchTooLarge {
            operations: 101,
            limit: 100
        }))
    ));
    assert!(store.is_empty());
}

#[test]
fn etags_issued_inside_a_failed_batch_never_become_visible() {
    let mut store = Container::new();
    let first = store.create(item("p", "a", "1")).unwrap();
    let failed = store
        .batch(
            &pk("p"),
            vec![
                BatchOp::Upsert(item("p", "b", "")),
                BatchOp::Delete {
                    id: id("missing"),
                    if_match: None,
                },
            ],
        )
        .unwrap();
    assert!(!failed.is_success());
    let next = store.replace(item("p", "a", "2"), Some(&first)).unwrap();
    assert_ne!(next, first);
}

#[test]
fn operations_as_data_give_the_same_answers_as_the_methods() {
    let mut store = Container::new();
    let Ok(Reply::Created(etag)) = store.execute(Op::Create(item("p", "a", "1"))) else {
        panic!("create")
    };
    let replaced = store.execute(Op::Replace {
        doc: item("p", "a", "2"),
        if_match: Some(etag.clone()),
    });
    assert!(matches!(replaced, Ok(Reply::Replaced(_))));
    let stale = store.execute(Op::Replace {
        doc: item("p", "a", "3"),
        if_match: Some(etag),
    });
    assert_eq!(stale, Err(StoreError::PreconditionFailed));
    let Ok(Reply::Read(read)) = store.execute(Op::Read {
        pk: pk("p"),
        id: id("a"),
    }) else {
        panic!("read")
    };
    assert_eq!(read.doc.body, "2");
    assert!(matches!(
        store.execute(Op::ReadAll { prefix: "a".into() }),
        Ok(Reply::ReadAll(items)) if items.len() == 1
    ));
    assert_eq!(
        store.execute(Op::Delete {
            pk: pk("p"),
            id: id("a"),
            if_match: Some(Etag::opaque("\"nope\""))
        }),
        Err(StoreError::PreconditionFailed)
    );
    assert!(matches!(
        store.execute(Op::Batch {
            pk: pk("p"),
            ops: vec![BatchOp::Read(id("a"))]
        }),
        Ok(Reply::Batch(b)) if b.is_success()
    ));
}

#[test]
fn errors_the_reference_store_never_produces_still_map_to_cosmos_statuses() {
    use leasehold_engine::Millis;
    let throttled = StoreError::Throttled {
        retry_after: Millis(500),
    };
    assert_eq!(throttled.status().code(), 429);
    assert!(!throttled.is_ambiguous());
    assert_eq!(StoreError::Timeout.status().code(), 408);
    assert!(StoreError::Timeout.is_ambiguous());
    assert_eq!(StoreError::Unavailable.status().code(), 503);
    assert!(StoreError::Unavailable.is_ambiguous());
    assert!(throttled.to_string().contains("retry after 500ms"));
}

#[test]
fn a_recreated_document_never_repeats_an_etag_a_reader_may_still_hold() {
    let mut store = Container::new();
    let old = store.create(item("p", "a", "1")).unwrap();
    store.delete(&pk("p"), &id("a"), Some(&old)).unwrap();
    store.create(item("p", "a", "again")).unwrap();
    assert_eq!(
        store.replace(item("p", "a", "stale"), Some(&old)),
        Err(StoreError::PreconditionFailed)
    );
}

#[test]
fn writes_to_different_documents_commute() {
    let mut one = Container::new();
    let mut other = Container::new();
    for store in [&mut one, &mut other] {
        store.create(item("p", "a", "0")).unwrap();
        store.create(item("p", "b", "0")).unwrap();
    }
    one.replace(item("p", "a", "1"), None).unwrap();
    one.replace(item("p", "b", "1"), None).unwrap();
    other.replace(item("p", "b", "1"), None).unwrap();
    other.replace(item("p", "a", "1"), None).unwrap();
    assert_eq!(
        one, other,
        "etags are per document, so order leaves no trace"
    );
}

/// A write whose answer its sender never hears (its driver gave up on the request
/// before it landed) leaves the sender's session where it was: the sender may be
/// shown the version before that write, never one older than its own earlier write.
#[test]
fn an_unheard_write_leaves_its_senders_session_where_it_was() {
    use leasehold_engine::lease::{LeaseDocument, Record};
    use leasehold_engine::store::{Reader, Replicated};
    use leasehold_engine::{LeaseToken, WallTime};

    let writer = Reader(0);
    let mut store = Replicated::new(Container::<Record>::new(), 2);
    let mut doc = LeaseDocument::new("p", LeaseToken::from("0"), WallTime(0));
    let (pk, id) = (PartitionKey::new(doc.id.as_str()), doc.id.clone());
    store
        .fresh(writer, Op::Create(Record::Lease(doc.clone())))
        .unwrap();
    doc.checkpoint = Some("1".into());
    store
        .fresh(
            writer,
            Op::Replace {
                doc: Record::Lease(doc.clone()),
                if_match: None,
            },
        )
        .unwrap();
    let read = Op::Read { pk, id };
    assert!(
        store.options(writer, &read).is_empty(),
        "it reads its own write"
    );
    doc.checkpoint = Some("2".into());
    store
        .unheard(Op::Replace {
            doc: Record::Lease(doc),
            if_match: None,
        })
        .unwrap();
    // One version back (its own write) may be shown, and no further.
    let options = store.options(writer, &read);
    assert_eq!(options.len(), 1);
    assert_eq!(options[0].1, 1);
    let shown = store.execute(writer, read, &mut |_, n| n);
    let Ok(Reply::Read(stored)) = shown else {
        panic!("the document exists");
    };
    assert_eq!(
        stored.doc.as_lease().and_then(|l| l.checkpoint.clone()),
        Some("1".into())
    );
}
