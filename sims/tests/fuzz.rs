//! Bad input never panics: arbitrary JSON, and valid documents mutated field by field,
//! fed to `balance`'s export reader and to the engine's document decoding. Every
//! refusal of a lease names its document.

use leasehold_engine::item_lease::Item;
use leasehold_engine::lease::Record;
use leasehold_engine::queue::Message;
use leasehold_sims::snapshot::{self, SnapshotError};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, a few levels deep, with the field names the documents use so that
/// objects often look like documents.
fn any_json() -> impl Strategy<Value = Value> {
    let names = prop::sample::select(vec![
        "id",
        "LeaseToken",
        "PartitionId",
        "Owner",
        "timestamp",
        "_ts",
        "_etag",
        "ContinuationToken",
        "properties",
        "Epoch",
        "Status",
        "QueueName",
        "Name",
        "NextVisibleTime",
        "Lock",
        "Data",
        "kind",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(Value::String("2024-05-01T10:00:00.1234567Z".into())),
        Just(Value::String("p..0".into())),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((names.clone(), inner), 0..8).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

/// Valid documents of each kind, as stored.
fn valid_documents() -> Vec<Value> {
    vec![
        json!({"id": "p..0", "LeaseToken": "0", "Owner": "a", "Epoch": 2, "timestamp": 1_714_557_600_000_i64,
               "ContinuationToken": "\"7\"", "properties": {"k": "v"}, "_etag": "\"e\"", "_ts": 1_714_557_600}),
        json!({"id": "p..1", "LeaseToken": "1", "Owner": null, "timestamp": "2024-05-01T10:00:00Z"}),
        json!({"id": "p.info", "_ts": 1_714_557_600}),
        json!({"id": "q:m1", "QueueName": "q", "Name": "m1", "Status": "Pending", "CreatedDate": 5,
               "NextVisibleTime": 5, "DequeueCount": 0, "Data": "{}"}),
    ]
}

/// One mutation of one field: removed, nulled, or replaced by any value.
fn mutated() -> impl Strategy<Value = Value> {
    (
        0..valid_documents().len(),
        any::<prop::sample::Index>(),
        0..3u8,
        any_json(),
    )
        .prop_map(|(doc, field, how, value)| {
            let mut doc = valid_documents().swap_remove(doc);
            if let Value::Object(map) = &mut doc {
                let keys: Vec<String> = map.keys().cloned().collect();
                let key = field.get(&keys).clone();
                match how {
                    0 => {
                        map.remove(&key);
                    }
                    1 => {
                        map.insert(key, Value::Null);
                    }
                    _ => {
                        map.insert(key, value);
                    }
                }
            }
            doc
        })
}

/// Whether a refusal says which document it is about (an error about the whole
/// input names none).
fn names_its_document(e: &SnapshotError) -> bool {
    match e {
        SnapshotError::Json { .. }
        | SnapshotError::NotArray { .. }
        | SnapshotError::SeveralGroups { .. }
        | SnapshotError::NoSuchGroup { .. } => true,
        other => other.to_string().starts_with("lease document "),
    }
}

fn decode_every_kind(value: &Value) {
    // The results do not matter here, only that decoding returns.
    let _ = serde_json::from_value::<Record>(value.clone());
    let _ = serde_json::from_value::<Message>(value.clone());
    let _ = serde_json::from_value::<Item>(value.clone());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_json_is_read_or_refused_by_name_never_panicked_on(value in any_json()) {
        for input in [value.clone(), Value::Array(vec![value.clone()])] {
            let text = input.to_string();
            for prefix in [None, Some("p")] {
                if let Err(e) = snapshot::read(&text, prefix) {
                    prop_assert!(names_its_document(&e), "{e}");
                }
            }
        }
        decode_every_kind(&value);
    }

    #[test]
    fn a_valid_document_with_one_field_broken_is_read_or_refused_by_name(doc in mutated()) {
        let mut export = valid_documents();
        export.push(doc.clone());
        if let Err(e) = snapshot::read(&Value::Array(export).to_string(), Some("p")) {
            prop_assert!(names_its_document(&e), "{e}");
        }
        decode_every_kind(&doc);
    }

    #[test]
    fn text_that_is_not_json_is_refused_with_its_position(text in "[ -~]{0,40}") {
        match snapshot::read(&text, None) {
            Err(SnapshotError::Json { line, column, .. }) => prop_assert!(line >= 1 && column <= text.len() + 1),
            Err(e) => prop_assert!(names_its_document(&e), "{e}"),
            Ok(_) => {}
        }
    }
}

/// The sibling: the same inputs break a reader that trusts its input, so the tests
/// above would see a panic if the real readers had one.
#[test]
fn the_generated_inputs_break_a_reader_that_trusts_them() {
    use proptest::test_runner::{Config, TestRunner};
    fn trusting(value: &Value) -> i64 {
        let doc = &value.as_array().expect("an array")[0];
        doc["timestamp"].as_i64().expect("a number")
            + doc["id"].as_str().expect("a string").len() as i64
    }
    let mut runner = TestRunner::new(Config::with_cases(512));
    let outcome = runner.run(&mutated(), |doc| {
        let input = Value::Array(vec![doc]);
        let panicked = std::panic::catch_unwind(|| trusting(&input)).is_err();
        prop_assert!(!panicked);
        Ok(())
    });
    assert!(
        outcome.is_err(),
        "no generated document broke the trusting reader"
    );
}
