//! Selective reads on the emulator against the reference store: ties in the ordering,
//! limits, missing fields, nulls and type mismatches, on seeded random documents and
//! queries. Also the request charge of a query by documents returned, which the
//! simulator's cost model is calibrated on.

mod common;

use common::Emulator;
use leasehold_adapters::{CosmosStore, MemoryStore, OpKind, Store};
use leasehold_engine::store::{
    Compare, Condition, Document, FieldPath, Op, Query, Reply, Stored, Value, json_field, json_size,
};
use leasehold_engine::{DocId, PartitionKey};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Deserializer, Serialize};

/// A field value of any comparable type; `Null` is stored as JSON `null`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
enum Val {
    Null,
    B(bool),
    N(i64),
    S(String),
    A(Vec<i64>),
    O(std::collections::BTreeMap<String, i64>),
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Val>, D::Error> {
    Val::deserialize(d).map(Some)
}

/// A document whose two fields may be missing, null, or of any type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Doc {
    id: DocId,
    pk: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    a: Option<Val>,
    /// Stored as `Value`, an SQL keyword, which the query must still read as a field.
    #[serde(
        rename = "Value",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    b: Option<Val>,
}

impl Document for Doc {
    const PARTITION_KEY_PATH: &'static str = "/pk";

    fn id(&self) -> &DocId {
        &self.id
    }
    fn partition_key(&self) -> PartitionKey {
        PartitionKey::new(&self.pk)
    }
    fn stored_size(&self) -> usize {
        json_size(self)
    }
    fn field(&self, path: &FieldPath) -> Option<Value> {
        json_field(self, path)
    }
}

/// Few distinct values, so that ties and type mixes are common.
fn val(rng: &mut ChaCha8Rng) -> Option<Val> {
    match rng.random_range(0..10) {
        0 => None,
        1 => Some(Val::Null),
        2 => Some(Val::B(rng.random())),
        3 => Some(Val::S(["x", "y"][rng.random_range(0..2)].into())),
        4 => Some(Val::A(vec![1])),
        5 => Some(Val::O([("k".to_string(), 1)].into())),
        _ => Some(Val::N(rng.random_range(-2..3))),
    }
}

fn value(rng: &mut ChaCha8Rng) -> Value {
    match val(rng) {
        None | Some(Val::Null | Val::A(_) | Val::O(_)) => Value::Null,
        Some(Val::B(b)) => Value::Bool(b),
        Some(Val::N(n)) => Value::Number(n),
        Some(Val::S(s)) => Value::String(s),
    }
}

fn field(rng: &mut ChaCha8Rng) -> FieldPath {
    [FieldPath::from_static("a"), FieldPath::from_static("Value")][rng.random_range(0..2)].clone()
}

fn random_query(rng: &mut ChaCha8Rng) -> Query {
    let compares = [
        Compare::Eq,
        Compare::Lt,
        Compare::Le,
        Compare::Gt,
        Compare::Ge,
    ];
    let filter = (0..rng.random_range(0..3))
        .map(|_| {
            let compare = compares[rng.random_range(0..compares.len())];
            Condition::new(field(rng), compare, value(rng))
        })
        .collect();
    // One read in three across both partitions: a cross-partition query, whose
    // ordering field cannot be a keyword (`Value`).
    let pk = [Some("p"), Some("q"), None][rng.random_range(0..3)].map(PartitionKey::new);
    let order_by = rng.random_bool(0.7).then(|| match pk {
        Some(_) => field(rng),
        None => FieldPath::from_static("a"),
    });
    Query {
        pk,
        prefix: ["", "d1", "d2"][rng.random_range(0..3)].into(),
        filter,
        order_by,
        limit: [None, Some(1), Some(3), Some(10)][rng.random_range(0..4)],
    }
}

/// Whether `got` is an answer the reference semantics allow for `q`. Ties on the
/// ordering field may come in any order, and a limit may cut a tie anywhere.
fn allowed(
    memory: &[Stored<Doc>],
    unlimited: &[Stored<Doc>],
    got: &[Stored<Doc>],
    q: &Query,
) -> Result<(), String> {
    let ids = |docs: &[Stored<Doc>]| docs.iter().map(|s| s.doc.id.clone()).collect::<Vec<_>>();
    let Some(order) = &q.order_by else {
        return (ids(memory) == ids(got))
            .then_some(())
            .ok_or_else(|| format!("by id: reference {:?}, cosmos {:?}", ids(memory), ids(got)));
    };
    let key = |s: &Stored<Doc>| s.doc.field(order);
    let keys = |docs: &[Stored<Doc>]| docs.iter().map(key).collect::<Vec<_>>();
    if keys(memory) != keys(got) {
        return Err(format!(
            "order values: reference {:?}, cosmos {:?}",
            keys(memory),
            keys(got)
        ));
    }
    // Each document returned is one the reference selects, with the same key, once.
    let mut seen = std::collections::BTreeSet::new();
    for s in got {
        let Some(r) = unlimited.iter().find(|r| r.doc.id == s.doc.id) else {
            return Err(format!(
                "cosmos returned {} which the reference does not select",
                s.doc.id
            ));
        };
        if r.doc != s.doc || !seen.insert(s.doc.id.clone()) {
            return Err(format!("cosmos returned {} wrongly or twice", s.doc.id));
        }
    }
    Ok(())
}

async fn documents(rng: &mut ChaCha8Rng, stores: (&MemoryStore<Doc>, &CosmosStore<Doc>)) {
    for i in 0..40 {
        let doc = Doc {
            id: DocId::from(format!("d{}{i:02}", i % 3)),
            pk: ["p", "q"][i % 2].into(),
            a: val(rng),
            b: val(rng),
        };
        let m = stores.0.execute(Op::Create(doc.clone())).await.result;
        let c = stores.1.execute(Op::Create(doc)).await.result;
        assert_eq!(m.is_ok(), c.is_ok());
    }
}

async fn query_docs<S: Store<Doc>>(store: &S, q: &Query) -> Vec<Stored<Doc>> {
    match store.execute(Op::Query(q.clone())).await.result {
        Ok(Reply::Query(found)) => found,
        other => panic!("query {q:?}: {other:?}"),
    }
}

#[tokio::test]
async fn a_selective_read_on_cosmos_gives_an_answer_the_reference_semantics_allow() {
    let emulator = Emulator::new();
    emulator.container("query", "/pk", 2);
    let cosmos = CosmosStore::<Doc>::new(emulator.client("query", vec![]).await);
    let memory = MemoryStore::<Doc>::new();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    documents(&mut rng, (&memory, &cosmos)).await;
    let (mut ties_cut, mut returned) = (0, 0);
    for step in 0..300 {
        let q = random_query(&mut rng);
        let reference = query_docs(&memory, &q).await;
        let unlimited = query_docs(
            &memory,
            &Query {
                limit: None,
                ..q.clone()
            },
        )
        .await;
        let got = query_docs(&cosmos, &q).await;
        if let Err(why) = allowed(&reference, &unlimited, &got, &q) {
            panic!("step {step}, {q:?}: {why}");
        }
        returned += got.len();
        if let (Some(order), Some(last)) = (&q.order_by, reference.last()) {
            let tied = unlimited
                .iter()
                .filter(|s| s.doc.field(order) == last.doc.field(order));
            ties_cut += usize::from(
                tied.count()
                    > reference
                        .iter()
                        .filter(|s| s.doc.field(order) == last.doc.field(order))
                        .count(),
            );
        }
    }
    // The seeded queries exercise what they claim to.
    assert!(
        ties_cut > 5 && returned > 300,
        "ties cut {ties_cut}, returned {returned}"
    );
}

#[test]
fn the_answer_check_catches_a_wrong_order_a_dropped_document_and_an_extra_one() {
    let doc = |id: &str, a: i64| Stored {
        doc: Doc {
            id: DocId::from(id),
            pk: "p".into(),
            a: Some(Val::N(a)),
            b: None,
        },
        etag: leasehold_engine::Etag::opaque("e"),
    };
    let q = Query {
        pk: Some(PartitionKey::new("p")),
        prefix: String::new(),
        filter: vec![],
        order_by: Some(FieldPath::from_static("a")),
        limit: Some(2),
    };
    let all = vec![doc("x", 1), doc("y", 2), doc("z", 2)];
    let reference = all[..2].to_vec();
    // A tie cut differently is allowed.
    assert!(allowed(&reference, &all, &[doc("x", 1), doc("z", 2)], &q).is_ok());
    assert!(allowed(&reference, &all, &[doc("y", 2), doc("x", 1)], &q).is_err());
    assert!(allowed(&reference, &all, &[doc("x", 1)], &q).is_err());
    assert!(allowed(&reference, &all, &[doc("x", 1), doc("w", 2)], &q).is_err());
}

/// The simulator's cost model charges a query a base plus a share per document
/// returned. The emulator's charging model has no query term: it charges a point
/// read's base (1 RU) per page whatever a page holds, so it calibrates the base only.
/// This records that, so a change in the emulator shows here.
#[tokio::test]
async fn the_emulator_charges_a_query_per_page_not_per_document() {
    let emulator = Emulator::new();
    emulator.container("charge", "/pk", 1);
    let cosmos = CosmosStore::<Doc>::new(emulator.client("charge", vec![]).await);
    for i in 0..200 {
        let doc = Doc {
            id: DocId::from(format!("d{i:03}")),
            pk: "p".into(),
            a: Some(Val::N(i)),
            b: None,
        };
        assert!(cosmos.execute(Op::Create(doc)).await.result.is_ok());
    }
    let mut charges = Vec::new();
    for limit in [1, 10, 50, 200] {
        let q = Query {
            pk: Some(PartitionKey::new("p")),
            prefix: "d".into(),
            filter: vec![Condition::new(
                FieldPath::from_static("a"),
                Compare::Ge,
                Value::Number(0),
            )],
            order_by: Some(FieldPath::from_static("a")),
            limit: Some(limit),
        };
        let before = cosmos.charges().units(OpKind::Query);
        assert_eq!(query_docs(&cosmos, &q).await.len(), limit);
        charges.push((limit, cosmos.charges().units(OpKind::Query) - before));
    }
    println!("query RU by documents returned: {charges:?}");
    assert!(
        charges
            .iter()
            .all(|&(_, ru)| ru == charges[0].1 && ru > 0.0),
        "{charges:?}"
    );
}
