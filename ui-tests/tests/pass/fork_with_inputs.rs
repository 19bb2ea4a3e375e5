//! Fork with per-branch input (LangGraph's `Send`): `split` returns a generated `split::Fork` that can
//! only name its declared edges; every `worker_with(&input)` branch is its own activation of `worker`,
//! reading its input with `ctx.input()`. Branches merge in the order they were added.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub chunks: Vec<u64>,
    #[reduce(sum)]
    pub total: u64,
    #[reduce(append)]
    pub done: Vec<u64>,
    #[reduce(sum)]
    pub plain: u32,
}

#[graph(state = Job)]
mod map_reduce {
    use super::*;

    #[node(entry, to = [worker, tally])]
    async fn split(s: &Job, _ctx: &mut Ctx) -> NodeResult<Job, split::Fork> {
        let mut fork = split::Fork::new();
        for chunk in &s.chunks {
            fork = fork.worker_with(chunk)?;
        }
        Ok((JobDelta::default(), fork.tally()))
    }

    #[node(to = END)]
    async fn worker(_s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
        let chunk: u64 = ctx.input()?.ok_or_else(|| NodeError::fatal("worker needs an input"))?;
        Ok(JobDelta::default().total(chunk * 10).push_done(chunk))
    }

    #[node(to = END)]
    async fn tally(_s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
        assert!(ctx.input::<u64>().unwrap().is_none(), "a plain branch has no input");
        Ok(JobDelta::default().plain(1))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let engine = Engine::builder(map_reduce::graph()).build();
    let out = engine.run("fork-1", Job { chunks: vec![3, 1, 2], ..Default::default() }).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.total, 60);
    assert_eq!(out.state.done, [3, 1, 2], "branches merge in the order they were forked");
    assert_eq!(out.state.plain, 1);
}
