//! A linear graph: `load -> count -> finish -> END`, with overwrite, append and sum fields.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Doc {
    pub text: String,
    #[reduce(append)]
    pub log: Vec<String>,
    #[reduce(sum)]
    pub words: u64,
}

#[graph(state = Doc)]
mod pipeline {
    use super::*;

    #[node(entry, to = count)]
    async fn load(s: &Doc, _ctx: &mut Ctx) -> NodeResult<Doc> {
        Ok(DocDelta::default().text(s.text.trim()).push_log("load"))
    }

    #[node(to = finish, timeout = "5s", retry(attempts = 3, backoff = fixed("10ms")))]
    async fn count(s: &Doc, _ctx: &mut Ctx) -> NodeResult<Doc> {
        let n = s.text.split_whitespace().count() as u64;
        Ok(DocDelta::default().words(n).push_log("count"))
    }

    #[node(to = END, max_concurrency = 1)]
    async fn finish(_s: &Doc, _ctx: &mut Ctx) -> NodeResult<Doc> {
        Ok(DocDelta::default().push_log("finish"))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let graph = pipeline::graph();
    assert_eq!(graph.entry(), "load");
    assert_eq!(graph.node_names().collect::<Vec<_>>(), ["load", "count", "finish"]);
    assert_eq!(graph.edges("count"), Some(vec![Some("finish")]));
    assert_eq!(graph.fingerprint(), pipeline::FINGERPRINT, "compile-time and runtime fingerprints agree");
    assert!(pipeline::mermaid().contains("load -->|0| count"));
    assert!(pipeline::dot().contains("\"count\" -> \"finish\""));

    let engine = Engine::builder(pipeline::graph()).build();
    let input = Doc { text: "  three little words ".into(), ..Default::default() };
    let out = engine.run("linear-1", input).await.expect("the run completes");
    assert!(out.is_completed());
    assert_eq!(
        out.state,
        Doc {
            text: "three little words".into(),
            log: vec!["load".into(), "count".into(), "finish".into()],
            words: 3
        }
    );
}
