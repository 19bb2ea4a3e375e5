//! The event log: an append-only, hash-chained record of what happened to a run (the store contract's
//! [`graph_store::events`], re-exported here whole, and [`verify`] with the engine's error).
//!
//! See [`graph_store::events`] for the chain's formula, its keyed mode and the byte forms.

pub use graph_store::events::*;

use crate::error::Error;

/// Verifies `events` (consecutive, from `from`'s successor, or from genesis with `from = None`) and,
/// with `head`, that they end exactly there (a truncated tail, or events past it, break it):
/// [`graph_store::events::verify`] with the engine's error.
///
/// # Errors
///
/// [`Error::ExecutionCorrupted`] naming the first event that does not verify (or the first missing
/// one); `UnsupportedSchemaVersion` for an event of an unknown format.
pub fn verify(
    run: &str,
    from: Option<&ChainHead>,
    events: &[Event],
    head: Option<&ChainHead>,
    key: Option<&ChainKey>,
) -> Result<(), Error> {
    Ok(graph_store::events::verify(run, from, events, head, key)?)
}

/// A [`Payload`] from `serde_json::json!` syntax.
macro_rules! payload {
    ($($json:tt)+) => {
        $crate::events::Payload::from(serde_json::json!($($json)+))
    };
}
pub(crate) use payload;
