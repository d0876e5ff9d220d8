//! A lock token as a segment of a document id: the dead letters and part sets a
//! holder writes are named after its token.

use crate::lock::LockToken;

/// The most bytes of a holder name a dead letter's id keeps as written: with a queue
/// and a message name of 200 bytes each, the id stays within Cosmos DB's 1,023.
const MAX_HOLDER_BYTES: usize = 560;

/// A token as an id segment: its holder name with the characters Cosmos DB refuses in
/// ids (and `%`, `:`, `.`) escaped, then `.life.seq`. It holds no `:`, and exactly two
/// `.`, so ids built from it never meet a message's.
pub(crate) fn token_tag(token: &LockToken) -> String {
    let mut holder = String::new();
    for c in token.holder.as_str().chars() {
        match c {
            '/' | '\\' | '?' | '#' | '%' | ':' | '.' => {
                holder.push_str(&format!("%{:02X}", u32::from(c)));
            }
            c => holder.push(c),
        }
    }
    // Cosmos DB refuses ids over 1,023 bytes. A holder name long enough to pass it
    // is replaced by `~h` and its hash: 18 bytes, which no name this long escapes
    // to, so the two forms never meet.
    if holder.len() > MAX_HOLDER_BYTES {
        holder = format!(
            "~h{:016x}",
            crate::balance::spread(token.holder.as_str(), "")
        );
    }
    format!("{holder}.{}.{}", token.incarnation.0, token.seq)
}
