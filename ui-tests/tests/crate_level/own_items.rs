//! The user's own items named like std's are the user's: a `struct Instant` with `now()`, a `mod env`
//! and a `mod rand` of the file (seen through `use super::*` and `crate::`, and from a merge function), a
//! `struct SystemTime` of the graph module, and the recorded time measured from `UNIX_EPOCH` are all
//! accepted by the purity lints.
#![deny(warnings)]

use graph_runtime::prelude::*;
use std::time::UNIX_EPOCH;

/// A logical clock: `now()` is the step count, not the wall clock.
pub struct Instant(u64);

impl Instant {
    fn now(step: u64) -> Self {
        Instant(step)
    }
}

/// Settings of the run, not the process environment.
mod env {
    pub fn var(key: &str) -> Option<String> {
        (key == "MODE").then(|| "batch".to_owned())
    }
}

/// A fixed "random" pick, for the example.
mod rand {
    pub fn random() -> u64 {
        4
    }
}

/// Keeps the first mode unless the settings allow a change (`env` is the module above).
#[reducer]
fn merge_mode(current: &mut String, written: String) {
    if current.is_empty() || env::var("MODE_CHANGES").is_some() {
        *current = written;
    }
}

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct S {
    #[reduce(with = merge_mode)]
    pub mode: String,
    #[reduce(sum)]
    pub n: u64,
    pub since_epoch: u64,
}

#[graph(state = S)]
mod flow {
    use super::*;

    /// The graph module's own `SystemTime`.
    struct SystemTime;

    impl SystemTime {
        fn now() -> u64 {
            7
        }
    }

    #[node(entry, to = count)]
    async fn plan(_s: &S, ctx: &mut Ctx) -> NodeResult<S> {
        let mode = env::var("MODE").unwrap_or_default();
        let Instant(step) = Instant::now(ctx.step());
        let since = ctx.now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        Ok(SDelta::default().mode(mode).n(step).since_epoch(since))
    }

    #[node(to = END)]
    async fn count(_s: &S, _ctx: &mut Ctx) -> NodeResult<S> {
        Ok(SDelta::default().n(crate::rand::random() + SystemTime::now()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let out = Engine::builder(flow::graph()).build().run("own-1", S::default()).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.mode, "batch");
    assert_eq!(out.state.n, 4 + 7);
}

/// The case as a test: it compiles as a crate of its own and `main` runs to its assertions.
#[test]
fn compiles_and_runs() {
    main();
}
