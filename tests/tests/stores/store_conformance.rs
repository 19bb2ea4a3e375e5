//! The store conformance suite on every backend built in: `MemoryStore` (the model), `SledStore`, and
//! the SQL stores of the enabled features (`--features postgres,mysql`).

use graph_runtime::store::conformance::{self as suite, Op};
use graph_tests::backends::{Memory, Sled};
use proptest::prelude::*;

graph_tests::for_backends! {
    suite: [
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
        mailboxes_deliver_each_message_once,
        schedules_are_written_under_a_version_check,
        commits_move_the_runs_graph,
        list_runs_pages,
        hostile_run_ids_round_trip_or_are_refused,
    ];
    memory => Memory::new(),
    sled => Sled::new(),
    #[cfg(feature = "postgres")]
    postgres => graph_tests::backends::Postgres::new(),
    #[cfg(feature = "mysql")]
    mysql => graph_tests::backends::MySql::new(),
}

/// Leases and fencing: the stores that lease runs to workers.
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod lease_cases {
    use graph_runtime::store::conformance::leases;

    graph_tests::for_backends! {
        leases: [
            concurrent_claimers_one_winner,
            claims_take_their_graphs_runs,
            claims_take_due_parked_runs,
            claims_follow_a_moved_run,
            stale_token_is_fenced,
            effect_writes_under_a_lost_lease_are_fenced,
            takeover_after_expiry,
        ];
        #[cfg(feature = "postgres")]
        postgres => graph_tests::backends::Postgres::new(),
        #[cfg(feature = "mysql")]
        mysql => graph_tests::backends::MySql::new(),
    }
}

#[cfg(feature = "sqlite")]
graph_tests::for_backends! {
    suite: [
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
        mailboxes_deliver_each_message_once,
        schedules_are_written_under_a_version_check,
        commits_move_the_runs_graph,
        list_runs_pages,
        hostile_run_ids_round_trip_or_are_refused,
    ];
    sqlite => graph_tests::backends::Sqlite::new(),
    // The smallest page SQLite allows: records and events span overflow pages.
    sqlite_512_byte_pages =>
        graph_tests::backends::Sqlite::with(graph_runtime::store::SqliteOptions::default().page_size(512)),
}

/// Says, in a run without the feature, that the PostgreSQL suite did not run.
#[cfg(not(feature = "postgres"))]
#[test]
#[ignore = "built without feature postgres: run cargo test -p graph-tests --features postgres,mysql"]
fn postgres_conformance_not_run() {}

/// Says, in a run without the feature, that the MySQL suite did not run.
#[cfg(not(feature = "mysql"))]
#[test]
#[ignore = "built without feature mysql: run cargo test -p graph-tests --features postgres,mysql"]
fn mysql_conformance_not_run() {}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, 0u8..5, 0u8..3, proptest::option::weighted(0.2, 0u8..6), proptest::option::of(0u8..4))
            .prop_map(|(run, step, value, version, base)| Op::Save { run, step, value, version, base }),
        1 => (0u8..3, any::<bool>(), 0u8..6).prop_map(|(run, cancelled, version)| Op::Status { run, cancelled, version }),
        2 => (0u8..3, 0u8..5).prop_map(|(run, step)| Op::Load { run, step }),
        1 => (0u8..3).prop_map(|run| Op::Latest { run }),
        1 => (0u8..3, 0u8..4).prop_map(|(run, keep)| Op::Prune { run, keep }),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn sled_matches_the_memory_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(suite::matches_the_model(&Sled::new(), &ops));
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn sqlite_matches_the_memory_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(suite::matches_the_model(&graph_tests::backends::Sqlite::new(), &ops));
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
proptest! {
    // Each case is a database of its own: fewer cases than sled's.
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_matches_the_memory_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(suite::matches_the_model(&graph_tests::backends::Postgres::new(), &ops));
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn mysql_matches_the_memory_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(suite::matches_the_model(&graph_tests::backends::MySql::new(), &ops));
    }
}
