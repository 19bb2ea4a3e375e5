//! The conformance suite of graph-store, unchanged, on [`RowStore`]: what a backend outside this
//! workspace runs to show it keeps the contract.

use graph_examples_custom_store::{Disk, RowStore};
use graph_store::FailPoint;
use graph_store::conformance::{self as suite, Backend, Op};

/// Opens stores on one disk; a restart opens a new store on the same disk.
struct Rows(Disk);

impl Backend for Rows {
    type Store = RowStore;

    async fn open(&self) -> RowStore {
        RowStore::open(&self.0)
    }

    async fn reopen(&self, store: RowStore) -> RowStore {
        drop(store);
        RowStore::open(&self.0)
    }

    fn fail_point(store: &RowStore) -> FailPoint {
        store.fail_point().clone()
    }
}

fn rows() -> Rows {
    Rows(Disk::default())
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                suite::$case(&rows()).await;
            }
        )*
    };
}

suite![
    concurrent_same_key,
    step_taken_keeps_the_stored_row,
    version_conflicts,
    thousand_commits,
    injected_failures_leave_nothing,
    restarts_between_operations,
    effect_journal_is_compare_and_set,
    outbox_rows_come_with_their_commit,
    events_and_pending_steps_go_with_their_writes,
    parked_runs_keep_their_due_times,
    commits_move_the_runs_graph,
    mailboxes_deliver_each_message_once,
    schedules_are_written_under_a_version_check,
    list_runs_pages,
    hostile_run_ids_round_trip_or_are_refused,
];

/// `n` operations of every kind, on a few runs and steps so that they collide, drawn from a fixed
/// seed (the workspace's store tests draw such sequences with proptest).
fn operations(n: usize, seed: u64) -> Vec<Op> {
    let mut x = seed;
    let mut next = |below: u8| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((x >> 33) % u64::from(below)) as u8
    };
    (0..n)
        .map(|_| match next(12) {
            0..=5 => Op::Save {
                run: next(3),
                step: next(5),
                value: next(3),
                version: (next(5) == 0).then(|| next(6)),
                base: (next(2) == 0).then(|| next(4)),
            },
            6 => Op::Status { run: next(3), cancelled: next(2) == 1, version: next(6) },
            7 | 8 => Op::Load { run: next(3), step: next(5) },
            9 => Op::Latest { run: next(3) },
            10 => Op::Prune { run: next(3), keep: next(4) },
            _ => Op::Reopen,
        })
        .collect()
}

/// The model-based check against the memory store: every observable result of the same operations
/// agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_memory_model() {
    for seed in 1..=8 {
        suite::matches_the_model(&rows(), &operations(60, seed)).await;
    }
}
