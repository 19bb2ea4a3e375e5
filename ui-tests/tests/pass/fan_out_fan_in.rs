//! Static fan-out and join: `plan -> [style, security] -> summarize -> END`. Both reviewers run in one
//! step, their findings merge in edge order (style, then security) whatever finishes first, and
//! `summarize` runs once for the two incoming routes.

use std::time::Duration;

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub pr: String,
    #[reduce(append)]
    pub findings: Vec<String>,
    #[reduce(sum)]
    pub summaries: u32,
}

#[graph(state = Review, name = "review")]
mod review {
    use super::*;

    #[node(entry, to = [style, security])]
    async fn plan(_s: &Review, _ctx: &mut Ctx) -> NodeResult<Review> {
        Ok(ReviewDelta::default())
    }

    #[node(to = summarize)]
    async fn style(s: &Review, _ctx: &mut Ctx) -> NodeResult<Review> {
        // finishes last, merges first: merge order is edge order, not completion order
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(ReviewDelta::default().push_findings(format!("style ok for #{}", s.pr)))
    }

    #[node(to = summarize)]
    async fn security(s: &Review, _ctx: &mut Ctx) -> NodeResult<Review> {
        Ok(ReviewDelta::default().push_findings(format!("no secrets in #{}", s.pr)))
    }

    #[node(to = END)]
    async fn summarize(s: &Review, _ctx: &mut Ctx) -> NodeResult<Review> {
        assert_eq!(s.findings.len(), 2, "the join sees both reviewers' merged findings");
        Ok(ReviewDelta::default().summaries(1))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let graph = review::graph();
    assert_eq!(graph.name(), "review");
    assert_eq!(graph.edges("plan"), Some(vec![Some("style"), Some("security")]));
    let engine = Engine::builder(graph).build();
    let out = engine.run("fan-1", Review { pr: "42".into(), ..Default::default() }).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.findings, ["style ok for #42", "no secrets in #42"]);
    assert_eq!(out.state.summaries, 1, "the join ran once");
    assert_eq!(out.steps, 3);
}
