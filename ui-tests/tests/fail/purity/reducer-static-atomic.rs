//! Fails: a merge function counting in an `AtomicU64` static of the file.

use graph_runtime::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

static MERGES: AtomicU64 = AtomicU64::new(0);

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    MERGES.fetch_add(1, Ordering::Relaxed);
    current.extend(written);
}

fn main() {
    // The body of a merge function with errors is replaced; the import stays in use here.
    let _ = MERGES.load(Ordering::Relaxed);
}
