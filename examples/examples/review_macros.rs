//! The pull-request review workflow of `review.rs`, written with the macros: `#[reducer]` derives the
//! state's delta and merge, `#[graph]` + `#[node]` declare the nodes, their edges and policies.
//!
//! plan → (style ∥ security) → summarize → revise ↺ | END: the same nodes in the same order, the same
//! edges with the same indices, the same 5 s timeout on `summarize` and the same simulated model calls
//! (the run's deterministic RNG), so a run of this graph commits the same history and ends in the same
//! state bytes as a run of the hand-built one with the same run id (`examples/tests/review_twin.rs`
//! checks it). The graph is checked at compile time: a typo in an edge or an undeclared route does not
//! build.
//!
//! This variant runs on an in-memory store (nothing is written to disk):
//!
//! ```text
//! cargo run -p graph-examples --example review_macros [-- <pr-number>]
//! ```

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

/// A stand-in for a model call: a little latency and a deterministic "answer" from the run's RNG.
async fn model(ctx: &mut Ctx, what: &str) -> (u64, u64) {
    tokio::time::sleep(Duration::from_millis(40 + ctx.rng().next_u64() % 80)).await;
    let score = ctx.rng().next_u64() % 100;
    let tokens = 200 + ctx.rng().next_u64() % 300;
    println!("  step {:>2}  {:<10} {what:<28} score {score:>2}", ctx.step(), ctx.node());
    (score, tokens)
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
        let (_, tokens) = model(ctx, &format!("planning review of PR #{}", s.pr)).await;
        Ok(ReviewDelta::default().tokens(tokens))
    }

    #[node(to = summarize)]
    async fn style(s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (score, tokens) = model(ctx, "checking style").await;
        let mut d = ReviewDelta::default().tokens(tokens);
        if score + s.revisions * 30 < 60 {
            d = d.findings(vec![format!("style: naming issues (score {score})")]).labels(label("style"));
        }
        Ok(d)
    }

    #[node(to = summarize)]
    async fn security(s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (score, tokens) = model(ctx, "checking security").await;
        let mut d = ReviewDelta::default().tokens(tokens);
        if score + s.revisions * 30 < 50 {
            d = d
                .findings(vec![format!("security: unchecked input (score {score})")])
                .labels(label("security"));
        }
        Ok(d)
    }

    #[node(to = [revise, END], timeout = "5s")]
    async fn summarize(s: &Review, ctx: &mut Ctx) -> NodeResult<Review, summarize::Next> {
        let (_, tokens) = model(ctx, "summarizing findings").await;
        let open = s.findings.len() as u64 > s.revisions * 2;
        if open && s.revisions < 3 {
            Ok((ReviewDelta::default().tokens(tokens), summarize::Next::Revise))
        } else {
            let verdict = if open { "changes requested" } else { "approved" };
            Ok((
                ReviewDelta::default().tokens(tokens).verdict(Some(verdict.to_owned())),
                summarize::Next::End,
            ))
        }
    }

    #[node(to = [style, security])]
    async fn revise(_s: &Review, ctx: &mut Ctx) -> NodeResult<Review> {
        let (_, tokens) = model(ctx, "revising the patch").await;
        Ok(ReviewDelta::default().tokens(tokens).revisions(1))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pr = std::env::args().nth(1).unwrap_or_else(|| "3".to_owned());
    let run_id = format!("review-pr-{pr}");
    let engine = Engine::builder(review::graph()).store(MemoryStore::new()).build();
    println!("run {run_id}: reviewing PR #{pr} (in-memory store, graph {})", &review::FINGERPRINT[..12]);
    let out = engine.run(&run_id, Review { pr, ..Review::default() }).await?;
    println!("run {} {:?} after {} steps", out.run_id, out.status, out.steps);
    println!("verdict:   {}", out.state.verdict.as_deref().unwrap_or("-"));
    println!("findings:  {}", out.state.findings.len());
    for f in &out.state.findings {
        println!("  - {f}");
    }
    println!("labels:    {:?}", out.state.labels);
    println!("revisions: {}", out.state.revisions);
    println!("tokens:    {}", out.state.tokens);
    Ok(())
}
