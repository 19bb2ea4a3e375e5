//! `graphctl`: a command line for the runs of a graph-runtime store.
//!
//! Most of what a store holds can be read without the graph's code: run rows, checkpoint metadata, the
//! event log (whose `RUN_STARTED` or `FORKED` event records the graph's shape, so it can be drawn), the
//! effect journal. A state stored as deltas, though, can only be rebuilt with the graph's reducer. So
//! graphctl is a library: [`Cli`] is a builder that a user turns into *their* graphctl by registering
//! their graphs. This crate's binary registers none; the workspace's `graphctl-examples` registers the
//! example graphs.
//!
//! ```no_run
//! # use graph_runtime::prelude::*;
//! # use graph_runtime::node::BoxFuture;
//! # fn hop<'a>(_s: &'a (), _c: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
//! #     Box::pin(async { Ok(((), Route::Declared)) })
//! # }
//! # mod my_flows { use super::*; pub fn graph() -> Graph<()> {
//! #     Graph::<()>::builder("hops").node("hop", hop).entry("hop").edge("hop", END).build().unwrap() } }
//! fn main() -> std::process::ExitCode {
//!     graphctl::Cli::new().graph(my_flows::graph()).main()
//! }
//! ```
//!
//! # What it keeps
//!
//! - **It never creates a store.** A store folder that does not exist (or is not a store) is an error;
//!   `SledStore::open` would create one.
//! - **One line per error.** Every failure is one line on stderr and a distinct exit code ([`Exit`]):
//!   a missing store or run, a store held by a running process, damaged data or a log that does not
//!   verify. Never a panic or a backtrace: sled's panics on damaged files are caught by the store, and
//!   [`Cli::main`] silences the panic hook so they are not printed twice.
//! - **Reads change nothing**, except what opening a sled store does anyway (its commit log replayed
//!   into the index); a SQLite store is opened read-only for them. `prune` and `resume` write, through
//!   the store's own operations.
//!
//! See `docs/graphctl.md` for every command, with real output.

mod args;
mod commands;
mod diff;
mod exit;
mod open;
mod registry;
mod render;
mod serve;
mod svg;

/// What the fuzz targets in `fuzz/` call (feature `fuzzing`): not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use clap::Parser as _;

    /// Parses a command line (`argv[0]` is the program's name) as `main_from` does: a typed usage error
    /// or a command, never a panic.
    pub fn parse_args(argv: &[std::ffi::OsString]) {
        if let Ok(args) = crate::args::Args::try_parse_from(argv) {
            let _ = args.command.writes();
        }
    }
}

pub use serve::BODY_LIMIT;

use std::ffi::OsString;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{CommandFactory, FromArgMatches};

pub use exit::Exit;
use graph_runtime::graph::Graph;
use graph_runtime::policy::EngineOptions;
use graph_runtime::state::Reducer;
use graph_runtime::store::Store;
use registry::Registry;

pub use exit::DEFAULT_STORE;

/// Builds a graphctl: register the graphs whose states it should rebuild and whose runs it may resume,
/// then call [`Cli::main`] from `main`.
///
/// # Examples
///
/// ```no_run
/// # use graph_runtime::prelude::*;
/// # use graph_runtime::node::BoxFuture;
/// # fn hop<'a>(_s: &'a (), _c: &'a mut Ctx) -> BoxFuture<'a, NodeResult<(), Route>> {
/// #     Box::pin(async { Ok(((), Route::Declared)) })
/// # }
/// # fn orders() -> Graph<()> {
/// #     Graph::<()>::builder("orders").node("hop", hop).entry("hop").edge("hop", END).build().unwrap() }
/// # fn refunds() -> Graph<()> {
/// #     Graph::<()>::builder("refunds").node("hop", hop).entry("hop").edge("hop", END).build().unwrap() }
/// fn main() -> std::process::ExitCode {
///     graphctl::Cli::new()
///         .default_store("var/workflows") // what `--store` defaults to
///         .graph(orders())
///         .graph(refunds())
///         .main()
/// }
/// ```
#[derive(Default)]
pub struct Cli {
    graphs: Registry,
    default_store: Option<String>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("graphs", &self.graphs.names().collect::<Vec<_>>())
            .field("default_store", &self.default_store)
            .finish()
    }
}

impl Cli {
    /// A graphctl that knows no graph: every command but `state` and `diff` of delta-stored steps, and
    /// `resume`, works.
    pub fn new() -> Self {
        Cli::default()
    }

    /// Registers a graph: the runs it started (same fingerprint) get `state`, `diff` and `resume`, which
    /// uses default [`EngineOptions`] (see [`Cli::graph_with_options`]). A second graph with the same
    /// fingerprint replaces the first.
    pub fn graph<S: Reducer>(self, graph: Graph<S>) -> Self {
        self.graph_with_options(graph, EngineOptions::default())
    }

    /// [`Cli::graph`] with the engine options `resume` runs the graph with (its timeouts, budgets,
    /// concurrency: what your application runs it with).
    pub fn graph_with_options<S: Reducer>(mut self, graph: Graph<S>, options: EngineOptions) -> Self {
        self.graphs.insert(graph, options);
        self
    }

    /// Registers a migration between two versions of a graph, for `graphctl migrate`; both graphs are
    /// registered too (as [`Cli::graph`] does) unless they already are.
    pub fn migration<A: Reducer, B: Reducer>(
        mut self,
        migration: graph_runtime::engine::Migration<A, B>,
    ) -> Self {
        if !self.graphs.has(migration.from_graph().fingerprint()) {
            self.graphs.insert(migration.from_graph().clone(), EngineOptions::default());
        }
        if !self.graphs.has(migration.to_graph().fingerprint()) {
            self.graphs.insert(migration.to_graph().clone(), EngineOptions::default());
        }
        self.graphs.migrations.push(migration.into());
        self
    }

    /// The HTTP JSON API of `graphctl serve` over `store`, with this graphctl's graphs, as an axum
    /// router to mount in an application's own server (`Router::nest`, `axum::serve`). With `token`,
    /// actions need it as `Authorization: Bearer <token>`; without, the API is read-only. What each
    /// endpoint returns is what the matching command prints with `--json`; `/api/openapi.json`
    /// describes them.
    pub fn router(self, store: Arc<dyn Store>, token: Option<String>) -> axum::Router {
        serve::router(Arc::new(serve::App { store, graphs: self.graphs, token, hide: Vec::new() }))
    }

    /// The store `--store` defaults to (a sled folder path or a store URL; default [`DEFAULT_STORE`]).
    pub fn default_store(mut self, store: impl Into<String>) -> Self {
        self.default_store = Some(store.into());
        self
    }

    /// Parses the process's arguments, runs the command and returns its exit code ([`Exit`]). Call it
    /// from `main`: it owns the process's stdout, stderr and panic hook.
    pub fn main(self) -> ExitCode {
        self.main_from(std::env::args_os())
    }

    /// [`Cli::main`] with the given arguments (the first is the program's name).
    pub fn main_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        // A panic that the store catches (sled's, on damaged files) is reported as a typed error; the
        // default hook would print it first. Keep the last one's text for a panic that escapes (a bug).
        static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
        std::panic::set_hook(Box::new(|info| {
            *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.to_string().replace('\n', " "));
        }));
        let exit = match catch_unwind(AssertUnwindSafe(|| self.run(args))) {
            Ok(exit) => exit,
            Err(_) => {
                let what = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
                eprintln!("error: graphctl stopped on an internal error (a bug, please report it): {what}");
                Exit::Failure
            }
        };
        exit.into()
    }

    fn run<I, T>(self, args: I) -> Exit
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        // Leaked once per process: clap takes a `&'static str` default without its `string` feature.
        let default_store: &'static str = match &self.default_store {
            Some(s) => Box::leak(s.clone().into_boxed_str()),
            None => DEFAULT_STORE,
        };
        let command = args::Args::command().mut_arg("store", |a| a.default_value(default_store));
        let parsed = command.try_get_matches_from(args).and_then(|m| args::Args::from_arg_matches(&m));
        let args = match parsed {
            Ok(args) => args,
            Err(e) => {
                // Help and version go to stdout with success; usage errors to stderr, exit 2.
                let _ = e.print();
                return if e.use_stderr() { Exit::Usage } else { Exit::Ok };
            }
        };
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return Exit::Failure;
            }
        };
        let graphs = self.graphs;
        let result = runtime.block_on(async {
            // `restore` reads the backup; `--store` names where it goes, which must not exist yet.
            let source = match &args.command {
                args::Command::Restore { from, .. } => from,
                _ => &args.store,
            };
            let store: Arc<dyn Store> = match &args.command {
                args::Command::Rebuild => open::open_rebuilt(source)?,
                _ => open::open_store(source, args.command.writes()).await?,
            };
            if let args::Command::Serve { listen, token_file } = &args.command {
                let token = match token_file {
                    Some(path) => Some(commands::read_token(path)?),
                    None => None,
                };
                let hide = vec![
                    args.store.clone(),
                    std::fs::canonicalize(&args.store).map(|p| p.display().to_string()).unwrap_or_default(),
                ];
                return serve::serve(Arc::new(serve::App { store, graphs, token, hide }), *listen).await;
            }
            let session = commands::Session { store, graphs: &graphs, json: args.json, spec: &args.store };
            session.execute(args.command).await
        });
        match result {
            Ok(exit) => exit,
            Err(f) => {
                eprintln!("error: {}", f.message.replace('\n', " "));
                f.exit
            }
        }
    }
}

/// The graphctl guide, its examples compiled as doctests.
#[doc = include_str!("../../docs/graphctl.md")]
#[cfg(doctest)]
pub struct GraphctlDoctests;
