//! The check that no host writes again on a version the store refused it (412): only
//! a read from a lagging replica, or the late answer of a read sent before the write,
//! can show such a version again, and a host that took it as current wrote, was
//! refused and read again with no backoff, for as long as the replica lagged. The model's `store: no host writes again on a version the
//! store refused it`, here over whole runs.

use leasehold_engine::lease::Record;
use leasehold_engine::store::{Op, StoreError};
use leasehold_engine::{DocId, Etag, RequestId};
use std::collections::{HashMap, HashSet};

/// The conditional writes on the wire and the versions refused so far, by host.
#[derive(Default)]
pub(super) struct Refusals {
    /// Conditional writes awaiting their answer: what they are conditional on.
    pending: HashMap<(usize, RequestId), (DocId, Etag)>,
    /// Versions a life heard refused: (host, life, document, etag).
    refused: HashSet<(usize, u64, DocId, Etag)>,
}

impl Refusals {
    /// `host`'s life `life` sends request `id`; the document, if it is a conditional
    /// write on a version of it that life heard refused.
    pub fn sent(
        &mut self,
        host: usize,
        life: u64,
        id: RequestId,
        op: &Op<Record>,
    ) -> Option<DocId> {
        let (doc, etag) = op.conditional_on()?;
        let etag = etag.clone();
        let again = self
            .refused
            .contains(&(host, life, doc.clone(), etag.clone()))
            .then(|| doc.clone());
        self.pending.insert((host, id), (doc, etag));
        again
    }

    /// `host`'s life `life` hears the answer to request `id`.
    pub fn answered(
        &mut self,
        host: usize,
        life: u64,
        id: RequestId,
        result: &Result<impl Sized, StoreError>,
    ) {
        let Some((doc, etag)) = self.pending.remove(&(host, id)) else {
            return;
        };
        if matches!(result, Err(StoreError::PreconditionFailed)) {
            self.refused.insert((host, life, doc, etag));
        }
    }
}
