//! The text of a selective read: one parameterized Cosmos DB SQL query.

use leasehold_engine::store::{FieldPath, Query};
use serde_json::Value;

/// The SQL and its parameters for `q`. Every value is a parameter; only field paths,
/// which [`leasehold_engine::store::FieldPath`] limits to identifiers, are written
/// into the text, in brackets (`c['Lock']['LockedUntil']`), which any property name
/// may use, keywords such as `Value` included; the emulator takes single quotes only.
///
/// Across partitions (no partition key) the ordering field is written as a dotted
/// path, the only form the SDK's query plan takes, so it cannot be an SQL keyword.
///
/// The ordering field must hold a primitive (a number, string, boolean or null), as the reference
/// semantics say; without one, the order is by id, so a limit always cuts the same
/// documents.
pub(crate) fn query_text(q: &Query) -> (String, Vec<(String, Value)>) {
    let path = |field: &FieldPath| {
        let mut text = "c".to_string();
        for segment in field.segments() {
            text.push_str(&format!("['{segment}']"));
        }
        text
    };
    let mut parameters = vec![("@prefix".to_string(), Value::from(q.prefix.clone()))];
    let mut clauses = vec!["STARTSWITH(c.id, @prefix)".to_string()];
    for (i, condition) in q.filter.iter().enumerate() {
        let name = format!("@v{i}");
        clauses.push(format!(
            "{} {} {name}",
            path(&condition.field),
            condition.compare.sql()
        ));
        parameters.push((name, condition.value.to_json()));
    }
    let order = match &q.order_by {
        Some(field) => {
            // IS_PRIMITIVE, spelt out: the emulator does not know that function.
            let f = path(field);
            clauses.push(format!(
                "(IS_NUMBER({f}) OR IS_STRING({f}) OR IS_BOOL({f}) OR IS_NULL({f}))"
            ));
            // Across partitions the SDK plans the merge itself, and takes an ordering
            // field only as a dotted path (a keyword there is refused, 400).
            if q.pk.is_none() {
                format!("c.{field}")
            } else {
                f
            }
        }
        None => "c.id".to_string(),
    };
    let top = match q.limit {
        Some(n) => {
            parameters.push(("@limit".to_string(), Value::from(n)));
            "TOP @limit "
        }
        None => "",
    };
    let sql = format!(
        "SELECT {top}* FROM c WHERE {} ORDER BY {order} ASC",
        clauses.join(" AND ")
    );
    (sql, parameters)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_engine::PartitionKey;
    use leasehold_engine::store::{Compare, Condition, Value as Field};

    #[test]
    fn values_travel_as_parameters_and_never_in_the_text() {
        let q = Query {
            pk: Some(PartitionKey::new("q")),
            prefix: "q:' OR 1=1 --".into(),
            filter: vec![
                Condition::new(
                    FieldPath::from_static("Status"),
                    Compare::Eq,
                    Field::String("Pending\" OR true".into()),
                ),
                Condition::new(
                    FieldPath::from_static("NextVisibleTime"),
                    Compare::Le,
                    Field::Number(42),
                ),
            ],
            order_by: Some(FieldPath::from_static("NextVisibleTime")),
            limit: Some(3),
        };
        let (sql, parameters) = query_text(&q);
        assert_eq!(
            sql,
            "SELECT TOP @limit * FROM c WHERE STARTSWITH(c.id, @prefix) AND c['Status'] = @v0 \
             AND c['NextVisibleTime'] <= @v1 AND (IS_NUMBER(c['NextVisibleTime']) \
             OR IS_STRING(c['NextVisibleTime']) OR IS_BOOL(c['NextVisibleTime']) \
             OR IS_NULL(c['NextVisibleTime'])) ORDER BY c['NextVisibleTime'] ASC"
        );
        assert!(
            !sql.contains("OR true") && !sql.contains("1=1") && !sql.contains("42"),
            "{sql}"
        );
        assert_eq!(parameters.len(), 4);
        assert_eq!(parameters[1].1, Value::from("Pending\" OR true"));
    }
}
