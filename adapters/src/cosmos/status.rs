//! Cosmos DB statuses mapped onto the engine's store errors.

use azure_data_cosmos::CosmosError;
use leasehold_engine::Millis;
use leasehold_engine::store::{BadRequest, Denial, StatusCode, StoreError};

/// How long to wait after a 429 that named no retry-after (injected faults, some
/// gateways): the service's own windows are one second.
const DEFAULT_RETRY_AFTER: Millis = Millis(1_000);

/// The engine's view of a failed call.
///
/// - 404, 409, 412 and 429 map to their store errors; a 429 carries the service's
///   retry-after.
/// - 408, and every failure that did not come from the service (a transport timeout, a
///   connection reset), is `Timeout`: the write may or may not have been applied, and
///   the engine resolves it by reading.
/// - 401, and 403 but for a write refused by a region that no longer takes writes
///   (sub-status 3, a failover), are `Denied`: a revoked key or a missing role, which
///   no retry mends. The processor stops with it.
/// - 503 and other server errors are `Unavailable`, also ambiguous.
pub fn store_error(e: &CosmosError) -> StoreError {
    let status = e.status();
    if !e.is_from_wire() {
        return StoreError::Timeout;
    }
    match u16::from(status.status_code()) {
        // The service may send a plain 404 with sub-status 0; the others (1002,
        // session not yet available, ...) are not "no such document".
        404 if status.sub_status().is_none_or(|s| s.value() == 0) => StoreError::NotFound,
        409 => StoreError::Conflict,
        412 => StoreError::PreconditionFailed,
        413 => StoreError::TooLarge {
            size: 0,
            limit: leasehold_engine::store::Limits::default().max_document_bytes,
        },
        429 => StoreError::Throttled {
            retry_after: e
                .response()
                .and_then(|r| r.headers().retry_after_ms)
                .map_or(DEFAULT_RETRY_AFTER, Millis),
        },
        408 => StoreError::Timeout,
        400 => StoreError::BadRequest(BadRequest::Rejected(e.to_string())),
        401 => StoreError::Denied {
            status: Denial::Unauthorized,
            message: e.to_string(),
        },
        // 403 with sub-status 3 is a write sent to a region that no longer takes
        // writes (a failover under way): it passes, as a 503 does.
        403 if status.sub_status().is_some_and(|s| s.value() == 3) => StoreError::Unavailable,
        403 => StoreError::Denied {
            status: Denial::Forbidden,
            message: e.to_string(),
        },
        _ => StoreError::Unavailable,
    }
}

/// What a failed call cost.
pub(super) fn charge(e: &CosmosError) -> f64 {
    e.response()
        .and_then(|r| r.headers().request_charge)
        .map_or(0.0, |c| c.value())
}

/// A batch operation's status code.
pub(super) fn code(status: u16) -> StatusCode {
    match status {
        200 => StatusCode::Ok,
        201 => StatusCode::Created,
        204 => StatusCode::NoContent,
        404 => StatusCode::NotFound,
        408 => StatusCode::RequestTimeout,
        409 => StatusCode::Conflict,
        412 => StatusCode::PreconditionFailed,
        413 => StatusCode::PayloadTooLarge,
        424 => StatusCode::FailedDependency,
        429 => StatusCode::TooManyRequests,
        400 => StatusCode::BadRequest,
        401 => StatusCode::Unauthorized,
        403 => StatusCode::Forbidden,
        _ => StatusCode::ServiceUnavailable,
    }
}
