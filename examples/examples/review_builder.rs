//! The pull-request review workflow of `review.rs`, built by hand: a hand-written reducer and
//! `Graph::builder`, which is what the macros generate. Same nodes in the same order, same edges with the
//! same indices, same timeout, same simulated model calls, so a run of this graph commits the same
//! history and ends in the same state bytes as a run of the macro graph with the same run id
//! (`examples/tests/review_twin.rs` checks it).
//!
//! This variant runs on an in-memory store (nothing is written to disk):
//!
//! ```text
//! cargo run -p graph-examples --example review_builder [-- <pr-number>]
//! ```

use std::collections::BTreeSet;
use std::time::Duration;

use graph_runtime::node::BoxFuture;
use graph_runtime::prelude::*;
use graph_runtime::state::{FieldWrite, Strategy, merge};

/// The review's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// The pull request under review (overwrite).
    pub pr: String,
    /// Findings of every reviewer, in edge order (append).
    pub findings: Vec<String>,
    /// Simulated model tokens spent (sum).
    pub tokens: u64,
    /// Labels to put on the PR (union).
    pub labels: BTreeSet<String>,
    /// Revision rounds so far (sum).
    pub revisions: u64,
    /// The final verdict (overwrite).
    pub verdict: Option<String>,
}

/// The partial update a review node returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReviewDelta {
    findings: Option<Vec<String>>,
    tokens: Option<u64>,
    labels: Option<BTreeSet<String>>,
    revisions: Option<u64>,
    verdict: Option<Option<String>>,
}

impl ReviewDelta {
    fn finding(mut self, f: impl Into<String>) -> Self {
        self.findings.get_or_insert_with(Vec::new).push(f.into());
        self
    }
    fn tokens(mut self, n: u64) -> Self {
        self.tokens = Some(n);
        self
    }
    fn label(mut self, l: &str) -> Self {
        self.labels.get_or_insert_with(BTreeSet::new).insert(l.to_owned());
        self
    }
    fn revision(mut self) -> Self {
        self.revisions = Some(1);
        self
    }
    fn verdict(mut self, v: impl Into<String>) -> Self {
        self.verdict = Some(Some(v.into()));
        self
    }
}

impl Delta for ReviewDelta {
    fn writes(&self, visit: &mut dyn FnMut(FieldWrite)) {
        let parts = [
            (self.findings.is_some(), "findings", Strategy::Append),
            (self.tokens.is_some(), "tokens", Strategy::Sum),
            (self.labels.is_some(), "labels", Strategy::Union),
            (self.revisions.is_some(), "revisions", Strategy::Sum),
            (self.verdict.is_some(), "verdict", Strategy::Overwrite),
        ];
        for (set, field, strategy) in parts {
            if set {
                visit(FieldWrite::new(field, strategy));
            }
        }
    }
}

impl Reducer for Review {
    type Delta = ReviewDelta;
    fn apply(&mut self, d: ReviewDelta) -> Result<(), graph_runtime::MergeError> {
        if let Some(v) = d.findings {
            merge::append(&mut self.findings, v, "findings")?;
        }
        if let Some(v) = d.tokens {
            merge::sum(&mut self.tokens, v, "tokens")?;
        }
        if let Some(v) = d.labels {
            merge::union(&mut self.labels, v, "labels")?;
        }
        if let Some(v) = d.revisions {
            merge::sum(&mut self.revisions, v, "revisions")?;
        }
        if let Some(v) = d.verdict {
            merge::overwrite(&mut self.verdict, v, "verdict")?;
        }
        Ok(())
    }
}

type Fut<'a> = BoxFuture<'a, NodeResult<Review, Route>>;

/// A stand-in for a model call: a little latency and a deterministic "answer" from the run's RNG.
async fn model(ctx: &mut Ctx, what: &str) -> (u64, u64) {
    tokio::time::sleep(Duration::from_millis(ctx.random_range(40..120u64))).await;
    let score = ctx.random_range(0..100u64);
    let tokens = ctx.random_range(200..500u64);
    println!("  step {:>2}  {:<10} {what:<28} score {score:>2}", ctx.step(), ctx.node());
    (score, tokens)
}

fn plan<'a>(s: &'a Review, ctx: &'a mut Ctx) -> Fut<'a> {
    Box::pin(async move {
        let (_, tokens) = model(ctx, &format!("planning review of PR #{}", s.pr)).await;
        Ok((ReviewDelta::default().tokens(tokens), Route::Declared))
    })
}

fn style<'a>(s: &'a Review, ctx: &'a mut Ctx) -> Fut<'a> {
    Box::pin(async move {
        let (score, tokens) = model(ctx, "checking style").await;
        let mut d = ReviewDelta::default().tokens(tokens);
        if score + s.revisions * 30 < 60 {
            d = d.finding(format!("style: naming issues (score {score})")).label("style");
        }
        Ok((d, Route::Declared))
    })
}

fn security<'a>(s: &'a Review, ctx: &'a mut Ctx) -> Fut<'a> {
    Box::pin(async move {
        let (score, tokens) = model(ctx, "checking security").await;
        let mut d = ReviewDelta::default().tokens(tokens);
        if score + s.revisions * 30 < 50 {
            d = d.finding(format!("security: unchecked input (score {score})")).label("security");
        }
        Ok((d, Route::Declared))
    })
}

fn summarize<'a>(s: &'a Review, ctx: &'a mut Ctx) -> Fut<'a> {
    Box::pin(async move {
        let (_, tokens) = model(ctx, "summarizing findings").await;
        let open = s.findings.len() as u64 > s.revisions * 2;
        if open && s.revisions < 3 {
            Ok((ReviewDelta::default().tokens(tokens), Route::Goto(0))) // edge 0: revise
        } else {
            let verdict = if open { "changes requested" } else { "approved" };
            Ok((ReviewDelta::default().tokens(tokens).verdict(verdict), Route::Goto(1))) // edge 1: END
        }
    })
}

fn revise<'a>(_s: &'a Review, ctx: &'a mut Ctx) -> Fut<'a> {
    Box::pin(async move {
        let (_, tokens) = model(ctx, "revising the patch").await;
        Ok((ReviewDelta::default().tokens(tokens).revision(), Route::Declared))
    })
}

/// The review graph.
pub fn graph() -> Graph<Review> {
    Graph::builder("review")
        .node("plan", plan)
        .node("style", style)
        .node("security", security)
        .node_with("summarize", summarize, NodePolicy::default().timeout(Duration::from_secs(5)))
        .node("revise", revise)
        .entry("plan")
        .edge("plan", "style")
        .edge("plan", "security")
        .edge("style", "summarize")
        .edge("security", "summarize")
        .edge("summarize", "revise")
        .edge("summarize", END)
        .edge("revise", "style")
        .edge("revise", "security")
        .build()
        .expect("the review graph is valid")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pr = std::env::args().nth(1).unwrap_or_else(|| "3".to_owned());
    let run_id = format!("review-pr-{pr}");
    let engine = Engine::builder(graph()).store(MemoryStore::new()).build();
    println!(
        "run {run_id}: reviewing PR #{pr} (in-memory store, graph {})",
        &engine.graph().fingerprint()[..12]
    );
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
