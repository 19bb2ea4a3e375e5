//! Fails: a `HashSet` nested in a field's type (a map of them); the `HashMap` itself is fine.

use graph_runtime::prelude::*;
use std::collections::{HashMap, HashSet};

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(union)]
    pub seen: HashMap<String, Option<HashSet<u64>>>,
}

fn main() {}
