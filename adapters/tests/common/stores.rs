//! Store wrappers that make races happen on demand, and a known-bad store.

use leasehold_adapters::{Charges, Response, Store};
use leasehold_engine::store::{Document, Op};
use std::sync::Arc;
use tokio::sync::Barrier;

/// A store whose full reads wait until `parties` of them have read, so that
/// competing clients decide on the same snapshot. `blind` makes it drop every
/// if-match, the known-bad store the sibling tests run.
#[derive(Clone)]
pub struct Racing<S> {
    inner: S,
    gate: Arc<Barrier>,
    blind: bool,
}

impl<S> Racing<S> {
    pub fn new(inner: S, parties: usize) -> Self {
        Racing {
            inner,
            gate: Arc::new(Barrier::new(parties)),
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
        let scan = matches!(op, Op::ReadAll { .. });
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
