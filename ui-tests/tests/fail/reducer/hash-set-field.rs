//! Fails: a `HashSet` field (its serialized order is random per process), even with `union`.

use graph_runtime::prelude::*;
use std::collections::HashSet;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(union)]
    pub tags: HashSet<String>,
}

fn main() {}
