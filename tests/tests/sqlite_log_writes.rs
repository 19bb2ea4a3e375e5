//! A SQLite store, `Sync` or `Async`, writes each commit's write-ahead-log frames in one system call
//! (feature `sqlite`; docs/stores.md, "The log's frames in one write"), and with
//! `coalesce_log_writes(false)` SQLite's two a frame. The count is the process's (Linux's `/proc/self/io`), so this file holds one
//! test: no other test's writes run beside it.
#![cfg(all(feature = "sqlite", target_os = "linux"))]

use graph_runtime::store::conformance::commit_steps;
use graph_runtime::store::{Durability, SqliteOptions, SqliteStore};

/// Write system calls this process has made so far.
fn writes_of_this_process() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    io.lines().find_map(|l| l.strip_prefix("syscw: ")).unwrap().trim().parse().unwrap()
}

/// The write calls of `commits` sequential commits on a new store opened with `options`.
async fn writes_of_commits(options: SqliteOptions, commits: u64) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path().join("store.sqlite"), options).unwrap();
    let before = writes_of_this_process();
    commit_steps(&store, "r", 0..commits).await;
    writes_of_this_process() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_writes_its_log_in_one_call() {
    let commits = 50;
    for durability in [Durability::Sync, Durability::Async] {
        let options = SqliteOptions::default().durability(durability);
        let coalesced = writes_of_commits(options.clone(), commits).await;
        let plain = writes_of_commits(options.coalesce_log_writes(false), commits).await;
        println!("{durability:?}, {commits} commits: {coalesced} write calls, {plain} with SQLite's own VFS");
        // A commit here is four or five frames: eight to ten calls through SQLite's VFS, one through the store's.
        assert!(
            plain >= 5 * commits,
            "{durability:?}: {plain} write calls for {commits} commits with SQLite's VFS"
        );
        assert!(coalesced <= 2 * commits, "{durability:?}: {coalesced} write calls for {commits} commits");
    }
}
