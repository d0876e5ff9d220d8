//! Lease containers exported from a running .NET or Java change feed processor, or
//! from leasehold.
//!
//! The input is a JSON array of the container's documents. A lease is a document with
//! a `LeaseToken` (or the older `PartitionId`); its group is the part of its id before
//! `..` (ids are `{prefix}..{token}`). Fields read: `id`, the token, `Owner`,
//! `timestamp`, `_ts`, `ContinuationToken`, `properties` and `_etag`; anything else
//! (`FeedRange`, `version`, `Mode`, `_rid`, ...) is ignored. Documents that are not
//! leases of the chosen group (the processor's `{prefix}.info` and `{prefix}.lock`,
//! leasehold's heartbeats, other groups' leases) are skipped and counted.
//!
//! A lease's time follows CFP: its `timestamp` (ISO-8601, or leasehold's milliseconds
//! since the epoch) if present and not null, else the server's `_ts` (seconds since the
//! epoch), as .NET does for a lease never acquired.

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
    /// A lease has neither a `timestamp` nor a `_ts`.
    #[error("lease document {index} ({id}): neither `timestamp` nor `_ts` is set")]
    NoTime {
        /// 0-based index in the array.
        index: usize,
        /// The document's id.
        id: String,
    },
    /// Leases of several groups, and no `--prefix` to choose one.
    #[error(
        "the export holds the leases of several processor groups; choose one with --prefix: {}",
        .prefixes.join(", ")
    )]
    SeveralGroups {
        /// The groups' prefixes.
        prefixes: Vec<String>,
    },
    /// No lease of the chosen group.
    #[error("no lease of group {prefix:?}; the groups present are: {}", .present.join(", "))]
    NoSuchGroup {
        /// The prefix asked for.
        prefix: String,
        /// The groups present.
        present: Vec<String>,
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

/// The leases of one processor group in an export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The group's prefix.
    pub prefix: String,
    /// Its leases, in the export's order.
    pub leases: Vec<CfpLease>,
    /// Documents skipped: not leases, or leases of another group.
    pub skipped: usize,
}

/// The group of a lease id: the part before `..`, or the empty prefix.
fn group_of(id: &str) -> &str {
    id.split_once("..").map_or("", |(prefix, _)| prefix)
}

fn is_lease(doc: &Map<String, Value>) -> bool {
    ["LeaseToken", "PartitionId"]
        .iter()
        .any(|f| doc.get(*f).is_some_and(|v| !v.is_null()))
}

/// Reads the leases of group `prefix` from an export; without a prefix, of the only
/// group present.
///
/// ```
/// let json = r#"[{"id": "p.info", "_ts": 1714557600},
///                {"id": "p..0", "LeaseToken": "0", "Owner": null,
///                 "timestamp": "2024-05-01T10:00:00.1234567Z"},
///                {"id": "p..1", "LeaseToken": "1", "timestamp": null, "_ts": 1714557600}]"#;
/// let snapshot = leasehold_sims::snapshot::read(json, None).unwrap();
/// assert_eq!(snapshot.prefix, "p");
/// assert_eq!(snapshot.leases[0].token.as_str(), "0");
/// assert!(snapshot.leases[0].owner.is_none());
/// assert_eq!(snapshot.leases[1].timestamp.as_unix_millis(), 1_714_557_600_000);
/// assert_eq!(snapshot.skipped, 1);
/// ```
pub fn read(json: &str, prefix: Option<&str>) -> Result<Snapshot, SnapshotError> {
    let items = documents(json)?;
    let mut groups: Vec<String> = Vec::new();
    for item in &items {
        if let Value::Object(doc) = item
            && is_lease(doc)
        {
            let id = doc.get("id").and_then(Value::as_str).unwrap_or("");
            let group = group_of(id).to_string();
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
    }
    groups.sort();
    let prefix = match prefix {
        Some(p) if groups.iter().any(|g| g == p) => p.to_string(),
        Some(p) => {
            return Err(SnapshotError::NoSuchGroup {
                prefix: p.to_string(),
                present: groups,
            });
        }
        None if groups.len() > 1 => return Err(SnapshotError::SeveralGroups { prefixes: groups }),
        None => groups.pop().unwrap_or_default(),
    };
    let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut leases = Vec::with_capacity(items.len());
    let mut skipped = 0;
    for (index, item) in items.iter().enumerate() {
        let Value::Object(doc) = item else {
            return Err(SnapshotError::NotObject {
                index,
                found: kind(item),
            });
        };
        let id = doc.get("id").and_then(Value::as_str).unwrap_or("");
        if !is_lease(doc) || group_of(id) != prefix {
            skipped += 1;
            continue;
        }
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
    Ok(Snapshot {
        prefix,
        leases,
        skipped,
    })
}

/// The array of documents in an export.
fn documents(json: &str) -> Result<Vec<Value>, SnapshotError> {
    let value: Value = serde_json::from_str(json).map_err(|e| SnapshotError::Json {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    match value {
        Value::Array(items) => Ok(items),
        other => Err(SnapshotError::NotArray {
            found: kind(&other),
        }),
    }
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
        None | Some(Value::Null) => match doc.get("_ts") {
            // CFP's rule for a lease never acquired: the server's last-modified time.
            Some(Value::Number(n)) => match n.as_i64().and_then(|s| s.checked_mul(1_000)) {
                Some(ms) => WallTime::from_unix_millis(ms),
                None => {
                    let problem = format!("expected whole seconds since the epoch, found {n}");
                    return Err(field_error("_ts", problem));
                }
            },
            None | Some(Value::Null) => {
                return Err(SnapshotError::NoTime {
                    index,
                    id: id.clone(),
                });
            }
            Some(other) => {
                let problem = format!("expected a number, found {}", kind(other));
                return Err(field_error("_ts", problem));
            }
        },
        Some(Value::String(text)) => parse_time(text).map_err(|p| field_error("timestamp", p))?,
        // leasehold's own lease documents keep milliseconds since the epoch.
        Some(Value::Number(n)) => match n.as_i64() {
            Some(ms) => WallTime::from_unix_millis(ms),
            None => {
                let problem = format!("expected whole milliseconds since the epoch, found {n}");
                return Err(field_error("timestamp", problem));
            }
        },
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
        assert_eq!(read(json, None).unwrap().leases[0].owner, None);
    }

    #[test]
    fn the_older_partition_id_field_is_accepted() {
        let json = r#"[{"PartitionId":"7","timestamp":"2020-01-01T00:00:00Z"}]"#;
        assert_eq!(read(json, None).unwrap().leases[0].token.as_str(), "7");
    }

    /// A .NET v3 lease container: the group's `.info` marker and `.lock` document, a
    /// lease never acquired (`timestamp: null`, so `_ts`), a lease with no `timestamp`
    /// at all, an EPK lease's extra fields, system properties, leasehold's own lease
    /// (milliseconds) and heartbeat, and another group's lease.
    #[test]
    fn a_real_container_export_is_read_and_what_is_not_a_lease_of_the_group_is_skipped() {
        let json = r#"[
          {"id": "p.info", "_rid": "x", "_self": "s", "_etag": "\"1\"", "_attachments": "a/", "_ts": 1714557600},
          {"id": "p.lock", "ttl": 10, "_ts": 1714557601},
          {"id": "p..0", "LeaseToken": "0", "Owner": null, "timestamp": null, "ContinuationToken": null,
           "properties": {}, "version": 0, "_ts": 1714557600, "_lsn": 5},
          {"id": "p..1", "LeaseToken": "1", "Owner": "a", "_ts": 1714557700,
           "FeedRange": {"Range": {"min": "", "max": "FF", "isMinInclusive": true, "isMaxInclusive": false}},
           "Mode": "IncrementalFeed", "version": 1},
          {"id": "p..2", "LeaseToken": "2", "Owner": "b", "Epoch": 3, "timestamp": 1714557800123},
          {"id": "p.host.b", "Host": "b", "Tenure": 1},
          {"id": "q..0", "LeaseToken": "0", "Owner": "c", "timestamp": "2024-05-01T10:00:00Z"}
        ]"#;
        let several = read(json, None).unwrap_err();
        assert!(
            matches!(&several, SnapshotError::SeveralGroups { prefixes } if prefixes == &["p", "q"]),
            "{several}"
        );
        let p = read(json, Some("p")).unwrap();
        let times: Vec<i64> = p
            .leases
            .iter()
            .map(|l| l.timestamp.as_unix_millis())
            .collect();
        assert_eq!(
            times,
            [1_714_557_600_000, 1_714_557_700_000, 1_714_557_800_123]
        );
        assert_eq!(p.skipped, 4);
        assert_eq!(read(json, Some("q")).unwrap().leases.len(), 1);
        assert!(matches!(
            read(json, Some("r")),
            Err(SnapshotError::NoSuchGroup { .. })
        ));
    }

    #[test]
    fn a_lease_with_neither_timestamp_nor_ts_is_an_error_that_names_it() {
        let json = r#"[{"id": "p..0", "LeaseToken": "0", "timestamp": null}]"#;
        let err = read(json, None).unwrap_err().to_string();
        assert!(err.contains("p..0") && err.contains("_ts"), "{err}");
    }
}
