//! Nodes named like what the module's code already names keep those paths working: a conditional node
//! `tokio` (its routing module `tokio`, holding `tokio::Next`, glob-imports the crate, so
//! `tokio::time::sleep` and `use tokio::time::Duration` still reach it), a static node `serde_json` (a
//! function, so the crate's paths were never hidden), a conditional node `report` named like a module of
//! this file that `use super::*` imports, a conditional node `mem` beside the module's own
//! `use std::mem;` (the import moves into the routing module), and a fork node `batch` beside the
//! module's own `mod batch` (the routing items are added to it). `#![deny(warnings)]`: none of this may
//! warn either.
#![deny(warnings)]

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Job {
    #[reduce(append)]
    pub log: Vec<String>,
    #[reduce(sum)]
    pub rounds: u32,
    #[reduce(sum)]
    pub bytes: u64,
}

/// A module of this file named like a node of the graph below.
mod report {
    pub fn line(rounds: u32) -> String {
        format!("report: {rounds} rounds")
    }
}

#[graph(state = Job)]
mod jobs {
    use super::*;
    use std::mem;
    use tokio::time::Duration;

    /// A module of the graph named like its fork node `batch`.
    mod batch {
        pub(super) const SIZE: u64 = 2;
    }

    #[node(entry, to = tokio)]
    async fn serde_json(s: &Job, _ctx: &mut Ctx) -> NodeResult<Job> {
        let rounds = serde_json::to_string(&s.rounds).map_err(NodeError::fatal)?;
        Ok(JobDelta::default().push_log(format!("serde_json: {rounds}")))
    }

    #[node(to = [tokio, mem])]
    async fn tokio(s: &Job, _ctx: &mut Ctx) -> NodeResult<Job, tokio::Next> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let next = if s.rounds < 1 { tokio::Next::Tokio } else { tokio::Next::Mem };
        Ok((JobDelta::default().rounds(1).push_log("tokio: slept"), next))
    }

    #[node(to = [batch])]
    async fn mem(s: &Job, _ctx: &mut Ctx) -> NodeResult<Job, mem::Next> {
        let mut log = s.log.clone();
        let taken = mem::take(&mut log);
        let bytes = (taken.len() * mem::size_of::<u64>()) as u64;
        Ok((JobDelta::default().bytes(bytes), mem::Next::Batch))
    }

    #[node(to = [report, END])]
    async fn batch(_s: &Job, _ctx: &mut Ctx) -> NodeResult<Job, batch::Fork> {
        let mut fork = batch::Fork::new();
        for part in 0..batch::SIZE {
            fork = fork.report_with(&part)?;
        }
        Ok((JobDelta::default(), fork))
    }

    #[node(to = END)]
    async fn report(s: &Job, _ctx: &mut Ctx) -> NodeResult<Job, report::Next> {
        Ok((JobDelta::default().push_log(report::line(s.rounds)), report::Next::End))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let out = Engine::builder(jobs::graph()).build().run("names", Job::default()).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.rounds, 2);
    assert_eq!(out.state.bytes, 3 * 8, "three log lines when `mem` ran");
    assert_eq!(
        out.state.log,
        ["serde_json: 0", "tokio: slept", "tokio: slept", "report: 2 rounds", "report: 2 rounds"]
    );
    assert_eq!(jobs::tokio::Next::Mem.edge(), 1);
    assert_eq!(jobs::FINGERPRINT, jobs::graph().fingerprint());
}

/// The case as a test: it compiles as a crate of its own and `main` runs to its assertions.
#[test]
fn compiles_and_runs() {
    main();
}
