//! Lease containers exported from a running .NET or Java change feed processor.
//!
//! The input is a JSON array of lease documents in the processor's own format. Fields
//! read: `id`, `LeaseToken` (or the older `PartitionId`), `Owner`, `timestamp`,
//! `ContinuationToken`, `properties` and `_etag`; anything else (`FeedRange`, `_ts`,
//! `version`, ...) is ignored.

use chrono::{DateTime, NaiveDateTime};
use leasehold_engine::{Etag, HostId, LeaseToken, WallTime};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use thiserror::Error;

/// One lease as the change feed processor stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CfpLease {
    /// The document id.
    pub id: String,
    /// The partition (feed range) the lease covers.
    pub token: LeaseToken,
    /// The owner; `None` when absent, null, empty or blank.
    pub owner: Option<HostId>,
    /// The last writer's wall clock.
    pub timestamp: WallTime,
    /// The checkpoint.
    pub continuation: Option<String>,
    /// Free-form properties.
    pub properties: BTreeMap<String, String>,
    /// The document's etag, if the export kept it.
    pub etag: Option<Etag>,
}

/// Why an export could not be read. Every variant names the document and the field.
#[derive(Debug, Error)]
pub enum SnapshotError {
    /// The text is not JSON.
    #[error("invalid JSON: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said, with the position.
        message: String,
    },
    /// The top level is not an array.
    #[error("expected a JSON array of lease documents, found {found}")]
    NotArray {
        /// What was found instead.
        found: &'static str,
    },
    /// An element of the array is not an object.
    #[error("lease document {index}: expected a JSON object, found {found}")]
    NotObject {
        /// 0-based index in the array.
        index: usize,
        /// What was found instead.
        found: &'static str,
    },
    /// A required field is absent.
    #[error("lease document {index}: missing field `{field}`")]
    Missing {
        /// 0-based index in the array.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// A field has the wrong type or an unreadable value.
    #[error("lease document {index}: field `{field}`: {problem}")]
    Field {
        /// 0-based index in the array.
        index: usize,
        /// The field.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Two documents cover the same partition.
    #[error(
        "lease document {index}: field `LeaseToken`: {token:?} is also the token of document {first}"
    )]
    DuplicateToken {
        /// 0-based index of the second document.
        index: usize,
        /// The token.
        token: String,
        /// 0-based index of the first document.
        first: usize,
    },
}

/// Parses an export.
///
/// ```
/// let json = r#"[{"id": "p..0", "LeaseToken": "0", "Owner": null,
///                 "timestamp": "2024-05-01T10:00:00.1234567Z"}]"#;
/// let leases = leasehold_sims::snapshot::parse(json).unwrap();
/// assert_eq!(leases[0].token.as_str(), "0");
/// assert!(leases[0].owner.is_none());
/// ```
pub fn parse(json: &str) -> Result<Vec<CfpLease>, SnapshotError> {
    let value: Value = serde_json::from_str(json).map_err(|e| SnapshotError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let Value::Array(items) = value else {
        return Err(SnapshotError::NotArray {
            found: kind(&value),
        });
    };
    let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut leases = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Value::Object(doc) = item else {
            return Err(SnapshotError::NotObject {
                index,
                found: kind(item),
            });
        };
        let lease = lease(index, doc)?;
        if let Some(&first) = first_seen.get(lease.token.as_str()) {
            return Err(SnapshotError::DuplicateToken {
                index,
                token: lease.token.to_string(),
                first,
            });
        }
        first_seen.insert(lease.token.to_string(), index);
        leases.push(lease);
    }
    Ok(leases)
}

fn lease(index: usize, doc: &Map<String, Value>) -> Result<CfpLease, SnapshotError> {
    let field_error = |field: &str, problem: String| SnapshotError::Field {
        index,
        field: field.to_string(),
        problem,
    };
    let token_field = if doc.contains_key("LeaseToken") {
        "LeaseToken"
    } else {
        "PartitionId"
    };
    let token = match optional_string(doc, token_field).map_err(|p| field_error(token_field, p))? {
        None => {
            return Err(SnapshotError::Missing {
                index,
                field: "LeaseToken",
            });
        }
        Some(t) if t.is_empty() => {
            return Err(field_error(token_field, "must not be empty".into()));
        }
        Some(t) => LeaseToken::from(t),
    };
    let id = optional_string(doc, "id")
        .map_err(|p| field_error("id", p))?
        .unwrap_or_else(|| token.to_string());
    let owner = optional_string(doc, "Owner")
        .map_err(|p| field_error("Owner", p))?
        .map(HostId::from)
        .filter(|o| !o.is_blank());
    let timestamp = match doc.get("timestamp") {
        None | Some(Value::Null) => {
            return Err(SnapshotError::Missing {
                index,
                field: "timestamp",
            });
        }
        Some(Value::String(text)) => parse_time(text).map_err(|p| field_error("timestamp", p))?,
        Some(other) => {
            let problem = format!("expected an ISO-8601 string, found {}", kind(other));
            return Err(field_error("timestamp", problem));
        }
    };
    let continuation = match doc.get("ContinuationToken") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(n @ Value::Number(_)) => Some(n.to_string()),
        Some(other) => {
            let problem = format!("expected a string, found {}", kind(other));
            return Err(field_error("ContinuationToken", problem));
        }
    };
    let mut properties = BTreeMap::new();
    match doc.get("properties") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (key, value) in map {
                let Value::String(v) = value else {
                    let problem = format!("expected a string, found {}", kind(value));
                    return Err(field_error(&format!("properties.{key}"), problem));
                };
                properties.insert(key.clone(), v.clone());
            }
        }
        Some(other) => {
            let problem = format!("expected an object, found {}", kind(other));
            return Err(field_error("properties", problem));
        }
    }
    let etag = optional_string(doc, "_etag")
        .map_err(|p| field_error("_etag", p))?
        .map(Etag::opaque);
    Ok(CfpLease {
        id,
        token,
        owner,
        timestamp,
        continuation,
        properties,
        etag,
    })
}

fn optional_string(doc: &Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match doc.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("expected a string, found {}", kind(other))),
    }
}

/// Reads an ISO-8601 / RFC 3339 time. A time without an offset is taken as UTC, as
/// .NET writes `DateTime.UtcNow` when its kind is lost.
pub fn parse_time(text: &str) -> Result<WallTime, String> {
    let millis = match DateTime::parse_from_rfc3339(text) {
        Ok(t) => t.timestamp_millis(),
        Err(_) => NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
            .map_err(|_| format!("not an ISO-8601 time: {text:?}"))?
            .and_utc()
            .timestamp_millis(),
    };
    Ok(WallTime::from_unix_millis(millis))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotnet_timestamps_with_seven_fraction_digits_are_read() {
        let t = parse_time("2018-08-01T20:43:54.9476294Z").unwrap();
        assert_eq!(t.as_unix_millis(), 1_533_156_234_947);
    }

    #[test]
    fn a_timestamp_without_offset_is_utc_and_offsets_are_honoured() {
        let utc = parse_time("2018-08-01T20:43:54Z").unwrap();
        assert_eq!(parse_time("2018-08-01T20:43:54").unwrap(), utc);
        assert_eq!(parse_time("2018-08-01T22:43:54+02:00").unwrap(), utc);
    }

    #[test]
    fn a_blank_owner_is_no_owner() {
        let json = r#"[{"LeaseToken":"1","Owner":"  ","timestamp":"2020-01-01T00:00:00Z"}]"#;
        assert_eq!(parse(json).unwrap()[0].owner, None);
    }

    #[test]
    fn the_older_partition_id_field_is_accepted() {
        let json = r#"[{"PartitionId":"7","timestamp":"2020-01-01T00:00:00Z"}]"#;
        assert_eq!(parse(json).unwrap()[0].token.as_str(), "7");
    }
}
