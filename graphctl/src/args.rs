//! The command line, as clap parses it. Only parsing lives here; each command is in `commands.rs`.

use std::path::PathBuf;

use clap::{ArgGroup, Parser, Subcommand, ValueEnum};

/// Inspect and operate the runs of a graph-runtime store.
///
/// Exit codes: 0 ok, 1 other failure, 2 usage, 3 not found (store, run, step, graph), 4 store locked by
/// another process, 5 damaged data or a log that does not verify, 6 not possible in this graphctl (graph
/// not registered, store kind not built in), 7 store unavailable for now (a server down or not
/// answering: try again), 8 a replay that differs or a version not registered (`replay`), a run not
/// migrated (`migrate`).
#[derive(Debug, Parser)]
#[command(name = "graphctl", version)]
pub(crate) struct Args {
    /// The store: a sled folder (never created), or `sqlite://PATH`, `postgres://...`, `mysql://...`.
    #[arg(long, global = true, value_name = "PATH|URL", default_value = super::exit::DEFAULT_STORE)]
    pub(crate) store: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the runs, most recently committed first; with `--prefix` or `--after`, a page in run-id
    /// order (as `graphctl serve` lists them), whose JSON names the cursor of the next page.
    Runs {
        /// Only runs with this status.
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
        /// At most this many.
        #[arg(long)]
        limit: Option<usize>,
        /// Only runs whose id starts with this (a page in run-id order).
        #[arg(long)]
        prefix: Option<String>,
        /// Only runs whose id sorts after this one: the `next` of the page before (a page in run-id order).
        #[arg(long)]
        after: Option<String>,
    },
    /// A run: status (questions, pause reason, error), steps, commit times, graph, events.
    Show {
        /// The run id.
        run: String,
    },
    /// A run's stored checkpoints: step, time, label, nodes run, nodes next, state hash.
    History {
        /// The run id.
        run: String,
    },
    /// The state at a step, as JSON (steps stored as deltas need the run's graph registered).
    State {
        /// The run id.
        run: String,
        /// The step (default: the latest).
        #[arg(long)]
        step: Option<u64>,
        /// One line instead of pretty-printed.
        #[arg(long)]
        compact: bool,
    },
    /// What changed in the state between two steps, field by field.
    Diff {
        /// The run id.
        run: String,
        /// The earlier step.
        from: u64,
        /// The later step.
        to: u64,
    },
    /// Draw a run's graph (Mermaid; `--dot` for Graphviz) from the shape its log recorded.
    #[command(group(ArgGroup::new("which").required(true).args(["run", "registered"])))]
    Graph {
        /// The run id.
        run: Option<String>,
        /// Draw a graph registered in this graphctl, by name, instead.
        #[arg(long, value_name = "NAME")]
        registered: Option<String>,
        /// Graphviz DOT instead of Mermaid.
        #[arg(long)]
        dot: bool,
    },
    /// A run's event log.
    Events {
        /// The run id.
        run: String,
        /// The first event's seq.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// At most this many events.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Verify a run's hash-chained event log (or every run's) and its checkpoints against it.
    #[command(group(ArgGroup::new("which").required(true).args(["run", "all"])))]
    Verify {
        /// The run id.
        run: Option<String>,
        /// Every run of the store.
        #[arg(long)]
        all: bool,
        /// The key of a keyed log (HMAC-SHA256): the file's bytes, exactly.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
        /// With `--all`: skip the store's whole-store check (`Store::check_integrity`, which reads
        /// every page of a SQLite file or every index of a server's tables).
        #[arg(long)]
        no_store_check: bool,
    },
    /// A run's effect journal.
    Effects {
        /// The run id.
        run: String,
    },
    /// The outbox rows a run's stored checkpoints carry, each delivered or not yet.
    Outbox {
        /// The run id.
        run: String,
    },
    /// Delete all but the latest checkpoints of a run (or of every run).
    #[command(group(ArgGroup::new("which").required(true).args(["run", "all"])))]
    Prune {
        /// The run id.
        run: Option<String>,
        /// Every run of the store.
        #[arg(long)]
        all: bool,
        /// How many of the latest checkpoints to keep (the snapshots they need are kept too).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        keep: u64,
    },
    /// Send an external event to a run (`Ctx::wait_event`): the payload (JSON) goes into the run's
    /// mailbox; a run that waits for the topic becomes due, and its timer service or a worker delivers it.
    SendEvent {
        /// The run id.
        run: String,
        /// The topic.
        topic: String,
        /// The payload, as JSON (`'{"amount": 300}'`, `'"text"'`, `42`).
        payload: String,
        /// A dedupe key: a second send with it is the same message.
        #[arg(long)]
        key: Option<String>,
    },
    /// The store's schedules: spec, next firing, policy, whether paused, and their graph.
    Schedules,
    /// A consistent copy of the whole store (sled folder or SQLite file) at a new path, taken while
    /// other processes may go on committing to a SQLite store (a sled store is held by the one process
    /// that has it open: back it up from there with `Store::backup_to`). The copy is itself a store.
    Backup {
        /// Where the copy goes: a path that does not exist yet (a folder for sled, a file for SQLite).
        #[arg(long, value_name = "PATH")]
        to: PathBuf,
    },
    /// Copies every run that reads back intact (its record, checkpoints and event log, verified as
    /// `verify` does) from a damaged store into a new store at `--to`, and lists each run it could not,
    /// with why: one damaged record costs its run, not the store. Exits 5 when any run was left out.
    Salvage {
        /// Where the new store goes: a path that does not exist yet.
        #[arg(long, value_name = "PATH")]
        to: PathBuf,
        /// The key of a keyed log (HMAC-SHA256): the file's bytes, exactly.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Rebuilds a sled store's index (sled's files in `db/`) from its commit log, which holds the
    /// store's whole history while it is under `SledOptions::history_bytes` (1 GiB by default): for
    /// damage sled reports only when it reads a page (`reading sled: Read corrupted data`). An open
    /// rebuilds by itself when sled refuses its files. The old files are kept in `db.damaged-<n>`.
    /// Exits 2, changing nothing, when the log does not hold the whole history: restore a backup.
    Rebuild,
    /// Checks a backup (every run's event log and checkpoints, as `verify --all`) and copies it to
    /// `--store`, a path that must not exist yet (move a damaged store aside first). Runs resume from
    /// their last backed-up step.
    Restore {
        /// The backup: a store `backup` wrote (a sled folder or a SQLite file).
        #[arg(long, value_name = "PATH")]
        from: String,
        /// The key of a keyed log (HMAC-SHA256): the file's bytes, exactly.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// A run's mailbox: the external events sent to it and where each stands.
    Mailbox {
        /// The run id.
        run: String,
    },
    /// Move runs to another version of their graph (`Engine::migrate`): the registered migrations map
    /// each run's state and where it stands, committed as one checkpoint of the new version.
    #[command(group(ArgGroup::new("which").required(true).args(["run", "all"])))]
    Migrate {
        /// The run id.
        run: Option<String>,
        /// Every run of the store not yet on `--to` (with `--status`: of that status; completed and
        /// cancelled runs keep their version).
        #[arg(long)]
        all: bool,
        /// With `--all`: only runs with this status.
        #[arg(long, value_enum, requires = "all")]
        status: Option<StatusArg>,
        /// The version to move to (registered under the run's graph name).
        #[arg(long)]
        to: u32,
        /// Say what would change, write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Replay stored runs with this graphctl's registered graphs (this build's code) in strict mode and
    /// report, per run, the first step whose state, routes or effect calls differ, or that its version
    /// is not registered. Writes nothing. A gate to put before a deploy: exit 8 when anything differs.
    #[command(group(ArgGroup::new("which").required(true).args(["run", "all"])))]
    Replay {
        /// The run id.
        run: Option<String>,
        /// Every run of the store (with `--status`: of that status).
        #[arg(long)]
        all: bool,
        /// With `--all`: only runs with this status.
        #[arg(long, value_enum, requires = "all")]
        status: Option<StatusArg>,
    },
    /// Answer a run's question (`Engine::resume_with_inputs`) with a JSON value and continue the run
    /// (its graph must be registered); the node reads the answer as the type it asks for.
    Answer {
        /// The run id.
        run: String,
        /// The answer, as JSON (`true`, `'"text"'`, `'{"approved": true}'`).
        input: String,
        /// The question's id (`Interrupt::id`, in `show`); needed when several questions wait.
        #[arg(long)]
        interrupt: Option<String>,
        /// The key of a keyed log (HMAC-SHA256): the file's bytes, exactly.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Fork a run at a step (`Engine::fork`; its graph must be registered): a new run from that
    /// checkpoint, left `running` (`resume` drives it).
    Fork {
        /// The run id.
        run: String,
        /// The step to fork at.
        step: u64,
        /// The new run's id.
        new_run: String,
    },
    /// Say what happened to an effect a crash left unknown (`Engine::resolve_effect`; the run is
    /// paused for confirmation): exactly one of `--completed JSON`, `--retry`, `--fail MESSAGE`. Then
    /// `resume` continues the run.
    #[command(group(ArgGroup::new("what").required(true).args(["completed", "retry", "fail"])))]
    ResolveEffect {
        /// The run id.
        run: String,
        /// The effect's key (`effects` lists them).
        key: String,
        /// It happened, with this response (what the call would have returned, as JSON).
        #[arg(long)]
        completed: Option<String>,
        /// It did not happen: call it again.
        #[arg(long)]
        retry: bool,
        /// It failed for good: the node gets this error.
        #[arg(long)]
        fail: Option<String>,
    },
    /// Hand a run back to a worker pool (`RunOptions::hand_back`): what continues it is written, it is
    /// left `Running`, and a worker claims it.
    HandBack {
        /// The run id.
        run: String,
    },
    /// Cancel a run (`Engine::cancel_run`; its graph must be registered): it stops at once, the
    /// children it spawned are closed by their policy.
    Cancel {
        /// The run id.
        run: String,
        /// The key of a keyed log (HMAC-SHA256): the file's bytes, exactly.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Serve the store's runs as an HTTP JSON API (described at /api/openapi.json) until stopped:
    /// read-only unless given a token, on 127.0.0.1 unless told otherwise.
    Serve {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:7070", value_name = "ADDR:PORT")]
        listen: std::net::SocketAddr,
        /// A file holding the token actions need (`Authorization: Bearer <token>`); without it the
        /// server is read-only.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
    /// Resume a run from its last committed step (its graph must be registered) and print the outcome.
    Resume {
        /// The run id.
        run: String,
        /// The key of a keyed log (HMAC-SHA256): the file's bytes, exactly.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
}

impl Command {
    /// Whether the command writes to the store (the others open a SQLite store read-only).
    pub(crate) fn writes(&self) -> bool {
        match self {
            Command::Migrate { dry_run, .. } => !dry_run,
            // Its actions write (when it has a token).
            Command::Serve { token_file, .. } => token_file.is_some(),
            other => matches!(
                other,
                Command::Prune { .. }
                    | Command::Resume { .. }
                    | Command::SendEvent { .. }
                    | Command::Answer { .. }
                    | Command::Cancel { .. }
                    | Command::Fork { .. }
                    | Command::ResolveEffect { .. }
                    | Command::HandBack { .. }
                    | Command::Rebuild
            ),
        }
    }
}

/// A run status, as `--status` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StatusArg {
    Running,
    Completed,
    Paused,
    Interrupted,
    Waiting,
    Failed,
    Cancelled,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn a_run_or_all_is_required_but_not_both() {
        let parse = |args: &[&str]| Args::try_parse_from([&["graphctl"][..], args].concat());
        assert!(parse(&["verify"]).is_err());
        assert!(parse(&["verify", "r", "--all"]).is_err());
        assert!(parse(&["prune", "--all", "--keep", "0"]).is_err());
        let args = parse(&["prune", "--all", "--keep", "2", "--store", "x", "--json"]).unwrap();
        assert_eq!((args.store.as_str(), args.json), ("x", true));
        assert!(matches!(args.command, Command::Prune { run: None, all: true, keep: 2 }));
        assert_eq!(parse(&["runs"]).unwrap().store, super::super::exit::DEFAULT_STORE);
    }
}
