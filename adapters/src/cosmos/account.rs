//! The account a lease container lives in, read before a processor starts.
//!
//! The proof assumes two things of the account that no container setting shows:
//! - **One write region.** On an account with several, if-match is checked in each
//!   region and conflicts are settled last-writer-wins, so two hosts in two regions
//!   both take one lease (`adapters/tests/regions.rs` shows it on the emulator).
//! - **Session or Strong reads.** The model's store answers a host's read with any
//!   version no older than the newest that host has read or written of the document:
//!   Session's monotonic reads and read-your-writes. Bounded staleness promises only a
//!   consistent prefix within its lag to a client outside the write region, and
//!   consistent prefix and eventual less still, so none of the three is covered.
//!
//! `azure_data_cosmos 1.1.0-beta.1` keeps the account's properties to itself, so
//! [`Account::read`] asks the service for them with its own signed request, through
//! any `azure_core` HTTP client (the SDK's, or the in-memory emulator in tests).

use azure_core::credentials::{Secret, TokenCredential};
use azure_core::http::{HttpClient, Method, Request, Url};
use serde::Deserialize;
use std::fmt;
use std::sync::Arc;

/// The REST API version of the account read: the one the service's gateway has
/// answered with the same account document since 2018.
const API_VERSION: &str = "2020-07-15";

/// The scope of an Entra ID token for Cosmos DB's data plane.
const SCOPE: &str = "https://cosmos.azure.com/.default";

/// A Cosmos DB account: its endpoint and how to sign in to it.
///
/// ```no_run
/// # async fn f(http: std::sync::Arc<dyn azure_core::http::HttpClient>) -> Result<(), leasehold_adapters::AccountError> {
/// use azure_core::credentials::Secret;
/// use azure_core::http::Url;
/// use leasehold_adapters::Account;
/// let endpoint = Url::parse("https://myaccount.documents.azure.com/").expect("a url");
/// let account = Account::with_key(endpoint, Secret::new("a key"));
/// let facts = account.read(http.as_ref()).await?;
/// facts.check()?; // refuses multi-region writes and weak consistency
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Account {
    endpoint: Url,
    auth: Auth,
}

#[derive(Clone)]
enum Auth {
    Key(Secret),
    Credential(Arc<dyn TokenCredential>),
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match self.auth {
            Auth::Key(_) => "key",
            Auth::Credential(_) => "credential",
        };
        f.debug_struct("Account")
            .field("endpoint", &self.endpoint.as_str())
            .field("auth", &auth)
            .finish()
    }
}

impl Account {
    /// The account at `endpoint`, signed in to with one of its keys.
    pub fn with_key(endpoint: Url, key: Secret) -> Account {
        Account {
            endpoint,
            auth: Auth::Key(key),
        }
    }

    /// The account at `endpoint`, signed in to with an Entra ID credential.
    pub fn with_credential(endpoint: Url, credential: Arc<dyn TokenCredential>) -> Account {
        Account {
            endpoint,
            auth: Auth::Credential(credential),
        }
    }

    /// Reads the account's regions and default consistency, with one request sent
    /// through `http`, given up as `Unreadable` after the requests' timeout (10 s) so
    /// that a start cannot hang on an account out of reach.
    pub async fn read(&self, http: &dyn HttpClient) -> Result<AccountFacts, AccountError> {
        tokio::time::timeout(crate::store::REQUEST_TIMEOUT, self.read_now(http))
            .await
            .unwrap_or_else(|_| {
                Err(AccountError::Unreadable(format!(
                    "no answer within {:?}",
                    crate::store::REQUEST_TIMEOUT
                )))
            })
    }

    async fn read_now(&self, http: &dyn HttpClient) -> Result<AccountFacts, AccountError> {
        let unreadable = |e: azure_core::Error| AccountError::Unreadable(e.to_string());
        let date = azure_core::time::to_rfc7231(&azure_core::time::OffsetDateTime::now_utc());
        let mut request = Request::new(self.endpoint.clone(), Method::Get);
        request.insert_header("x-ms-date", date.clone());
        request.insert_header("x-ms-version", API_VERSION);
        request.insert_header("authorization", self.authorization(&date).await?);
        let response = http.execute_request(&request).await.map_err(unreadable)?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(unreadable)?;
        if !status.is_success() {
            return Err(AccountError::Unreadable(format!(
                "the service answered {} to the account read",
                u16::from(status)
            )));
        }
        AccountFacts::from_json(&body)
    }

    /// The `authorization` header of a read of the account itself (resource type and
    /// link both empty), sent with `x-ms-date: date`.
    async fn authorization(&self, date: &str) -> Result<String, AccountError> {
        let token = match &self.auth {
            Auth::Key(key) => {
                let payload = format!("get\n\n\n{}\n\n", date.to_lowercase());
                let signature = azure_core::hmac::hmac_sha256(&payload, key)
                    .map_err(|e| AccountError::Unreadable(format!("signing: {e}")))?;
                format!("type=master&ver=1.0&sig={signature}")
            }
            Auth::Credential(credential) => {
                let token = credential
                    .get_token(&[SCOPE], None)
                    .await
                    .map_err(|e| AccountError::Unreadable(format!("signing in: {e}")))?;
                format!("type=aad&ver=1.0&sig={}", token.token.secret())
            }
        };
        Ok(url::form_urlencoded::byte_serialize(token.as_bytes()).collect())
    }
}

/// An account's default consistency level, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Consistency {
    /// Linearizable reads.
    Strong,
    /// A consistent prefix, at most a bounded lag behind the writes.
    BoundedStaleness,
    /// Monotonic reads and read-your-writes within a client's session.
    Session,
    /// Some prefix of the writes, with no gaps.
    ConsistentPrefix,
    /// Eventually every write.
    Eventual,
}

impl Consistency {
    /// Whether the proof covers reads at this level: Session, and anything that
    /// promises each client at least as much.
    pub fn is_covered(self) -> bool {
        matches!(self, Consistency::Strong | Consistency::Session)
    }

    /// The level the service names (`"Session"`, ...), in any case.
    fn parse(name: &str) -> Option<Consistency> {
        Some(match name.to_ascii_lowercase().as_str() {
            "strong" => Consistency::Strong,
            "boundedstaleness" => Consistency::BoundedStaleness,
            "session" => Consistency::Session,
            "consistentprefix" => Consistency::ConsistentPrefix,
            "eventual" => Consistency::Eventual,
            _ => return None,
        })
    }
}

/// What an account says of its regions and consistency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountFacts {
    /// The regions that take writes now, the write region first.
    pub write_regions: Vec<String>,
    /// The regions that serve reads.
    pub read_regions: Vec<String>,
    /// Writes are accepted in every region (multi-region writes).
    pub multiple_write_locations: bool,
    /// The default consistency, at which every read leasehold sends is served.
    pub consistency: Consistency,
}

impl AccountFacts {
    /// The facts in an account document, as the service sends it.
    pub fn from_json(body: &[u8]) -> Result<AccountFacts, AccountError> {
        let raw: RawAccount =
            serde_json::from_slice(body).map_err(|e| AccountError::Malformed(e.to_string()))?;
        let level = raw.user_consistency_policy.default_consistency_level;
        let consistency = Consistency::parse(&level).ok_or_else(|| {
            AccountError::Malformed(format!("unknown default consistency level {level:?}"))
        })?;
        let names = |locations: Vec<RawLocation>| locations.into_iter().map(|l| l.name).collect();
        Ok(AccountFacts {
            write_regions: names(raw.writable_locations),
            read_regions: names(raw.readable_locations),
            multiple_write_locations: raw.enable_multiple_write_locations,
            consistency,
        })
    }

    /// Refuses an account the proof does not cover: one that takes writes in several
    /// regions, or whose reads are weaker than Session.
    ///
    /// Multi-region writes are refused by the account's setting, not by the regions
    /// that take writes today: a second write region can be added while the
    /// processors run, and a failover lists two write regions for a moment on an
    /// account that has only one. Strong consistency rules multi-region writes out.
    pub fn check(&self) -> Result<(), AccountError> {
        if self.multiple_write_locations && self.consistency != Consistency::Strong {
            return Err(AccountError::MultiRegionWrites {
                write_regions: self.write_regions.clone(),
            });
        }
        if !self.consistency.is_covered() {
            return Err(AccountError::Consistency(self.consistency));
        }
        Ok(())
    }
}

/// Why an account cannot hold leasehold's documents safely, or could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// The account takes writes in several regions: if-match is checked in each, and
    /// two hosts in two regions can both take one lease.
    #[error(
        "the account takes writes in several regions ({write_regions:?}): if-match is checked per \
         region there, and two hosts could both take one lease; use an account with a single \
         write region"
    )]
    MultiRegionWrites {
        /// The regions that take writes now.
        write_regions: Vec<String>,
    },
    /// The account's default consistency is weaker than the proof assumes.
    #[error(
        "the account's default consistency is {0:?}: leasehold's proof covers Session and Strong \
         reads (each host never reads older than what it has read or written); set the account's \
         default consistency to Session"
    )]
    Consistency(Consistency),
    /// The account document could not be fetched.
    #[error("the account's properties could not be read: {0}")]
    Unreadable(String),
    /// The account document is not what the service sends.
    #[error("the account's properties are malformed: {0}")]
    Malformed(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAccount {
    #[serde(default)]
    writable_locations: Vec<RawLocation>,
    #[serde(default)]
    readable_locations: Vec<RawLocation>,
    #[serde(default)]
    enable_multiple_write_locations: bool,
    user_consistency_policy: RawConsistency,
}

#[derive(Deserialize)]
struct RawLocation {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawConsistency {
    default_consistency_level: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn account(multi: bool, level: &str) -> Vec<u8> {
        json!({
            "id": "acct",
            "writableLocations": [{"name": "East US", "databaseAccountEndpoint": "https://e/"}],
            "readableLocations": [
                {"name": "East US", "databaseAccountEndpoint": "https://e/"},
                {"name": "West US", "databaseAccountEndpoint": "https://w/"}
            ],
            "enableMultipleWriteLocations": multi,
            "userConsistencyPolicy": {"defaultConsistencyLevel": level}
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_single_write_session_account_passes() {
        let facts = AccountFacts::from_json(&account(false, "Session")).expect("facts");
        assert_eq!(facts.write_regions, ["East US"]);
        assert_eq!(facts.read_regions, ["East US", "West US"]);
        assert_eq!(facts.consistency, Consistency::Session);
        assert_eq!(facts.check(), Ok(()));
    }

    #[test]
    fn multi_region_writes_are_refused_whatever_the_regions_today() {
        let facts = AccountFacts::from_json(&account(true, "Session")).expect("facts");
        assert_eq!(
            facts.check(),
            Err(AccountError::MultiRegionWrites {
                write_regions: vec!["East US".into()]
            })
        );
        let strong = AccountFacts::from_json(&account(true, "Strong")).expect("facts");
        assert_eq!(
            strong.check(),
            Ok(()),
            "Strong rules multi-region writes out"
        );
    }

    #[test]
    fn every_level_weaker_than_session_and_bounded_staleness_are_refused() {
        for (level, verdict) in [
            ("Strong", true),
            ("BoundedStaleness", false),
            ("Session", true),
            ("ConsistentPrefix", false),
            ("Eventual", false),
            ("eventual", false),
        ] {
            let facts = AccountFacts::from_json(&account(false, level)).expect("facts");
            assert_eq!(facts.check().is_ok(), verdict, "{level}");
            if !verdict {
                let error = facts.check().unwrap_err();
                assert!(error.to_string().contains("Session"), "{error}");
            }
        }
    }

    #[test]
    fn a_malformed_account_document_is_a_typed_error() {
        for body in [
            b"not json".to_vec(),
            br#"{"writableLocations": []}"#.to_vec(),
            account(false, "Linearizable"),
        ] {
            assert!(matches!(
                AccountFacts::from_json(&body),
                Err(AccountError::Malformed(_))
            ));
        }
    }

    #[tokio::test]
    async fn a_key_signature_is_url_encoded_and_never_shown() {
        let endpoint = Url::parse("https://acct.documents.azure.com/").expect("a url");
        let account = Account::with_key(endpoint, Secret::new("dGVzdGtleQ=="));
        let header = account
            .authorization("Sat, 28 Nov 2026 12:00:00 GMT")
            .await
            .expect("signed");
        assert!(
            header.starts_with("type%3Dmaster%26ver%3D1.0%26sig%3D"),
            "{header}"
        );
        assert!(!header.contains('+') && !header.contains('/'), "{header}");
        assert!(!format!("{account:?}").contains("dGVzdGtleQ"));
    }
}
