//! The pull-request review workflow of the main job (`examples/review.rs`): plan → (style ∥ security) →
//! summarize → revise ↺ | END, written with the macros. Here so that graphctl can register it and the
//! tests can run it; the example file drives it and prints.

use std::collections::BTreeSet;
use std::time::Duration;

use graph_runtime::prelude::*;

/// The review's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// The pull request under review (overwrite).
    pub pr: String,
    /// Findings of every reviewer, in edge order (append).
    #[reduce(append)]
    pub findings: Vec<String>,
    /// Simulated model tokens spent (sum).
    #[reduce(sum)]
    pub tokens: u64,
    /// Labels to put on the PR (union).
    #[reduce(union)]
    pub labels: BTreeSet<String>,
    /// Revision rounds so far (sum).
    #[reduce(sum)]
    pub revisions: u64,
    /// The final verdict (overwrite).
    pub verdict: Option<String>,
}

/// A stand-in for a model call: a little latency and a deterministic "answer" from the run's RNG. What it
/// is doing goes to the run's stream (`ctx.stream`), which `main` prints as it arrives.
async fn model(ctx: &mut Ctx, what: &str) -> Result<(u64, u64), NodeError> {
    tokio::time::sleep(Duration::from_millis(ctx.random_range(40..120u64))).await;
    let score = ctx.random_range(0..100u64);
    let tokens = ctx.random_range(200..500u64);
    ctx.stream(&format!("{what:<28} score {score:>2}")).await?;
    Ok((score, tokens))
}

/// One label.
fn label(l: &str) -> BTreeSet<String> {
    BTreeSet::from([l.to_owned()])
}

/// The review graph: `review::graph()`.
#[graph(state = Review, name = "review")]
pub mod review {
    use super::*;

    #[node(entry, to = [style, security])]
    async fn plan(s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (_, tokens) = model(ctx, &format!("planning review of PR #{}", s.pr)).await?;
        Ok(ReviewDelta::default().tokens(tokens))
    }

    #[node(to = summarize)]
    async fn style(s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (score, tokens) = model(ctx, "checking style").await?;
        let mut d = ReviewDelta::default().tokens(tokens);
        if score + s.revisions * 30 < 60 {
            d = d.push_findings(format!("style: naming issues (score {score})")).labels(label("style"));
        }
        Ok(d)
    }

    #[node(to = summarize)]
    async fn security(s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (score, tokens) = model(ctx, "checking security").await?;
        let mut d = ReviewDelta::default().tokens(tokens);
        if score + s.revisions * 30 < 50 {
            d = d
                .push_findings(format!("security: unchecked input (score {score})"))
                .labels(label("security"));
        }
        Ok(d)
    }

    #[node(to = [revise, END], timeout = "5s")]
    async fn summarize(s: &Review, ctx: &mut Ctx) -> NodeResult<Review, summarize::Next> {
        let (_, tokens) = model(ctx, "summarizing findings").await?;
        let open = s.findings.len() as u64 > s.revisions * 2;
        if open && s.revisions < 3 {
            Ok((ReviewDelta::default().tokens(tokens), summarize::Next::Revise))
        } else {
            let verdict = if open { "changes requested" } else { "approved" };
            Ok((ReviewDelta::default().tokens(tokens).verdict(verdict.to_owned()), summarize::Next::End))
        }
    }

    #[node(to = [style, security])]
    async fn revise(_s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (_, tokens) = model(ctx, "revising the patch").await?;
        Ok(ReviewDelta::default().tokens(tokens).revisions(1))
    }
}
