//! Fails: a field named like the one-item setter (`push_log`) of an `append` field (`log`).

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct S {
    #[reduce(append)]
    pub log: Vec<String>,
    pub push_log: bool,
}

fn main() {
    let _ = SDelta::default().push_log(true).log(vec!["x".to_owned()]);
}
