//! Store wrappers that make races happen on demand, and a known-bad store.

use leasehold_adapters::{Charges, Response, Store};
use leasehold_engine::store::{Document, Op, Reply};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Barrier;

/// A store whose first `parties` full reads, or a dequeue's reads of the visible
/// messages (the one query with a limit), wait until all of them have read, so that
/// competing clients decide on the same snapshot. Later reads pass: a consumer that
/// lost claims reads again on its own, and would wait for a partner that never
/// comes. `blind` makes it drop every if-match, the known-bad store the sibling
/// tests run.
#[derive(Clone)]
pub struct Racing<S> {
    inner: S,
    gate: Arc<Barrier>,
    parties: usize,
    gated: Arc<AtomicUsize>,
    blind: bool,
}

impl<S> Racing<S> {
    pub fn new(inner: S, parties: usize) -> Self {
        Racing {
            inner,
            gate: Arc::new(Barrier::new(parties)),
            parties,
            gated: Arc::new(AtomicUsize::new(0)),
            blind: false,
        }
    }

    pub fn blind(mut self) -> Self {
        self.blind = true;
        self
    }
}

impl<D, S> Store<D> for Racing<S>
where
    D: Document + Send + Sync + 'static,
    S: Store<D>,
{
    async fn execute(&self, op: Op<D>) -> Response<D> {
        let scan = match &op {
            Op::ReadAll { .. } => true,
            Op::Query(q) => q.limit.is_some(),
            _ => false,
        } && self.gated.fetch_add(1, Ordering::SeqCst) < self.parties;
        let op = match op {
            Op::Replace { doc, .. } if self.blind => Op::Replace {
                doc,
                if_match: None,
            },
            Op::Delete { pk, id, .. } if self.blind => Op::Delete {
                pk,
                id,
                if_match: None,
            },
            op => op,
        };
        let response = self.inner.execute(op).await;
        if scan {
            self.gate.wait().await;
        }
        response
    }

    fn charges(&self) -> &Charges {
        self.inner.charges()
    }
}

/// A store that counts the documents its queries return.
#[derive(Clone)]
pub struct Counting<S> {
    inner: S,
    returned: Arc<AtomicUsize>,
}

impl<S> Counting<S> {
    pub fn new(inner: S) -> Self {
        Counting {
            inner,
            returned: Arc::default(),
        }
    }

    /// Documents returned by queries and full reads so far.
    pub fn returned(&self) -> usize {
        self.returned.load(Ordering::Relaxed)
    }
}

impl<D, S> Store<D> for Counting<S>
where
    D: Document + Send + Sync + 'static,
    S: Store<D>,
{
    async fn execute(&self, op: Op<D>) -> Response<D> {
        let response = self.inner.execute(op).await;
        if let Ok(Reply::Query(found) | Reply::ReadAll(found)) = &response.result {
            self.returned.fetch_add(found.len(), Ordering::Relaxed);
        }
        response
    }

    fn charges(&self) -> &Charges {
        self.inner.charges()
    }
}
