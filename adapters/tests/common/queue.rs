//! What the large-message tests share: the queue's documents, and payloads whose
//! every byte says where it belongs.

use leasehold_adapters::Store;
use leasehold_engine::queue::Message;
use leasehold_engine::store::{Op, Reply};

/// Every document of the `orders` queue, by id.
pub async fn documents<St: Store<Message>>(store: &St) -> Vec<String> {
    let op = Op::ReadAll {
        prefix: "orders:".into(),
    };
    match store.execute(op).await.result {
        Ok(Reply::ReadAll(found)) => found.into_iter().map(|s| s.doc.id.to_string()).collect(),
        other => panic!("{other:?}"),
    }
}

/// A payload of `bytes`, varied so that a part out of place would change it.
pub fn payload(bytes: usize) -> String {
    (0..bytes)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect()
}
