//! Status codes and errors, as Cosmos DB reports them.

use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The HTTP status codes of the store operations the engine uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum StatusCode {
    /// 200: read, replace or a successful batch.
    Ok,
    /// 201: created.
    Created,
    /// 204: deleted.
    NoContent,
    /// 207: a transactional batch that failed; see each operation's status.
    MultiStatus,
    /// 400: the request is malformed.
    BadRequest,
    /// 401: the caller's credentials were refused.
    Unauthorized,
    /// 403: the caller may not do this (a missing role, an account not found).
    Forbidden,
    /// 404: no such document.
    NotFound,
    /// 408: the request timed out; it may or may not have been applied.
    RequestTimeout,
    /// 409: a document with this id already exists.
    Conflict,
    /// 412: the if-match etag is stale.
    PreconditionFailed,
    /// 413: the document exceeds the store's size limit.
    PayloadTooLarge,
    /// 424: this batch operation was not applied because another one failed.
    FailedDependency,
    /// 429: throttled; retry after the given delay.
    TooManyRequests,
    /// 503: the store could not be reached.
    ServiceUnavailable,
}

impl StatusCode {
    /// The numeric HTTP status.
    pub fn code(self) -> u16 {
        match self {
            StatusCode::Ok => 200,
            StatusCode::Created => 201,
            StatusCode::NoContent => 204,
            StatusCode::MultiStatus => 207,
            StatusCode::BadRequest => 400,
            StatusCode::Unauthorized => 401,
            StatusCode::Forbidden => 403,
            StatusCode::NotFound => 404,
            StatusCode::RequestTimeout => 408,
            StatusCode::Conflict => 409,
            StatusCode::PreconditionFailed => 412,
            StatusCode::PayloadTooLarge => 413,
            StatusCode::FailedDependency => 424,
            StatusCode::TooManyRequests => 429,
            StatusCode::ServiceUnavailable => 503,
        }
    }

    /// Whether this is a 2xx status.
    pub fn is_success(self) -> bool {
        (200..300).contains(&self.code())
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// Why the store rejected a request as malformed (400).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BadRequest {
    /// A transactional batch with no operations.
    EmptyBatch,
    /// A transactional batch with more operations than the store allows.
    BatchTooLarge {
        /// Operations in the batch.
        operations: usize,
        /// The store's limit.
        limit: usize,
    },
    /// A batch operation whose document lives under another partition key.
    CrossPartitionBatch {
        /// Index of the offending operation.
        index: usize,
    },
    /// A real store refused the request for a reason of its own (the reference store
    /// never does).
    Rejected(String),
}

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadRequest::EmptyBatch => {
                write!(f, "a transactional batch needs at least one operation")
            }
            BadRequest::BatchTooLarge { operations, limit } => write!(
                f,
                "a transactional batch holds at most {limit} operations, this one has {operations}"
            ),
            BadRequest::CrossPartitionBatch { index } => write!(
                f,
                "batch operation {index} targets another partition key than the batch"
            ),
            BadRequest::Rejected(why) => write!(f, "the store rejected the request: {why}"),
        }
    }
}

/// A failed store request.
///
/// The reference store only ever produces the first five variants. The others come
/// from a real store or from a simulated network, and the engine must handle them:
/// `Throttled` means "not applied, retry later"; `Timeout` and `Unavailable` are
/// ambiguous: the write may or may not have been applied.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StoreError {
    /// 404: no such document.
    NotFound,
    /// 409: a document with this id already exists.
    Conflict,
    /// 412: the document changed since the etag given in if-match.
    PreconditionFailed,
    /// 413: the document is larger than the store accepts.
    TooLarge {
        /// The document's size in bytes.
        size: usize,
        /// The store's limit in bytes.
        limit: usize,
    },
    /// 400: the request is malformed.
    BadRequest(BadRequest),
    /// 429: throttled; nothing was applied.
    Throttled {
        /// How long the store asked the caller to wait.
        retry_after: Millis,
    },
    /// 401 or 403: the store refused the caller (a revoked key, a missing
    /// data-plane role, an account that no longer exists); nothing was applied, and
    /// nothing will be until an operator acts.
    Denied {
        /// 401 or 403.
        status: Denial,
        /// What the store said.
        message: String,
    },
    /// The store holds the document, but it cannot be read as one (a field a foreign
    /// writer broke). It is never handed on, so never written over: an operator
    /// mends or deletes it.
    Malformed {
        /// The document's id.
        id: String,
        /// Why it could not be read.
        reason: String,
    },
    /// 408, or no reply: the outcome is unknown.
    Timeout,
    /// 503, or a network partition: the outcome is unknown.
    Unavailable,
}

impl StoreError {
    /// The status code Cosmos DB returns for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            StoreError::NotFound => StatusCode::NotFound,
            StoreError::Conflict => StatusCode::Conflict,
            StoreError::PreconditionFailed => StatusCode::PreconditionFailed,
            StoreError::TooLarge { .. } => StatusCode::PayloadTooLarge,
            StoreError::BadRequest(_) => StatusCode::BadRequest,
            StoreError::Throttled { .. } => StatusCode::TooManyRequests,
            StoreError::Denied { status, .. } => match status {
                Denial::Unauthorized => StatusCode::Unauthorized,
                Denial::Forbidden => StatusCode::Forbidden,
            },
            // The store answered; the document it holds is what is malformed.
            StoreError::Malformed { .. } => StatusCode::BadRequest,
            StoreError::Timeout => StatusCode::RequestTimeout,
            StoreError::Unavailable => StatusCode::ServiceUnavailable,
        }
    }

    /// Whether the request may have been applied although it failed.
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, StoreError::Timeout | StoreError::Unavailable)
    }

    /// Whether the store refused the caller itself: no retry helps until an operator
    /// acts, so a driver stops rather than retry for ever.
    ///
    /// ```
    /// use leasehold_engine::store::{Denial, StoreError};
    ///
    /// let revoked = StoreError::Denied { status: Denial::Unauthorized, message: "bad key".into() };
    /// assert!(revoked.is_denied());
    /// assert_eq!(revoked.status().code(), 401);
    /// assert!(!StoreError::Unavailable.is_denied());
    /// ```
    pub fn is_denied(&self) -> bool {
        matches!(self, StoreError::Denied { .. })
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.status();
        match self {
            StoreError::NotFound => write!(f, "{code} not found"),
            StoreError::Conflict => write!(f, "{code} conflict: the id already exists"),
            StoreError::PreconditionFailed => {
                write!(f, "{code} precondition failed: the etag is stale")
            }
            StoreError::TooLarge { size, limit } => write!(
                f,
                "{code} document too large: {size} bytes, the limit is {limit}"
            ),
            StoreError::BadRequest(why) => write!(f, "{code} bad request: {why}"),
            StoreError::Throttled { retry_after } => {
                write!(f, "{code} throttled: retry after {retry_after}")
            }
            StoreError::Denied { message, .. } => write!(
                f,
                "{code} denied: {message}; nothing was applied (check the key or the role)"
            ),
            StoreError::Malformed { id, reason } => write!(
                f,
                "document {id:?} cannot be read ({reason}); it is left as it is"
            ),
            StoreError::Timeout => write!(f, "{code} timed out; the outcome is unknown"),
            StoreError::Unavailable => write!(f, "{code} unavailable; the outcome is unknown"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Which refusal of the caller a [`StoreError::Denied`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Denial {
    /// 401: the credentials were refused.
    Unauthorized,
    /// 403: the caller may not do this.
    Forbidden,
}
