//! Fails: a `with` merge function of the wrong shape.

use graph_runtime::prelude::*;

#[reducer]
fn keep_longest(current: &mut String, written: String) -> bool {
    if written.len() > current.len() {
        *current = written;
    }
    true
}

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(with = keep_longest)]
    pub best: String,
}

fn main() {}
