//! Each lease's work runs in a tracing span with its lease and epoch. Alone in its
//! binary: tracing caches whether a callsite is enabled across threads, and a test
//! running beside it without a subscriber could disable the span for this one.

mod common_obs;

use common_obs::{feed, run_a};
use leasehold_adapters::MemoryStore;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// A span's name and fields, as recorded.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Span>>>);

/// A span's name and its fields.
type Span = (String, BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.to_string());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_string();
        self.0.lock().unwrap().push((name, fields));
    }
}

#[tokio::test(start_paused = true)]
async fn each_leases_work_runs_in_a_span_with_its_lease_and_epoch() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    run_a(feed(), MemoryStore::new(), 10).await;
    let leases: BTreeSet<(String, String)> = spans
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _)| name == "lease")
        .map(|(_, f)| (f["lease"].clone(), f["epoch"].clone()))
        .collect();
    let expected: BTreeSet<(String, String)> = [("0", "1"), ("1", "1")]
        .map(|(l, e)| (l.into(), e.into()))
        .into();
    assert_eq!(leases, expected);
}
