//! The store conformance suite on every backend built in: `MemoryStore` (the model) and `SledStore`.

use graph_runtime::MemoryStore;
use graph_runtime::store::conformance::{self as suite, Backend, Op};
use graph_runtime::store::{FailPoint, SledStore};
use proptest::prelude::*;

struct Memory(MemoryStore);

impl Backend for Memory {
    type Store = MemoryStore;
    fn open(&self) -> MemoryStore {
        self.0.clone()
    }
    fn reopen(&self, store: MemoryStore) -> MemoryStore {
        drop(store);
        self.0.clone()
    }
    fn fail_point(store: &MemoryStore) -> FailPoint {
        store.fail_point().clone()
    }
}

struct Sled(tempfile::TempDir);

impl Sled {
    fn new() -> Self {
        Sled(tempfile::tempdir().unwrap())
    }
}

impl Backend for Sled {
    type Store = SledStore;
    fn open(&self) -> SledStore {
        SledStore::open(self.0.path()).unwrap()
    }
    fn reopen(&self, store: SledStore) -> SledStore {
        drop(store);
        self.open()
    }
    fn fail_point(store: &SledStore) -> FailPoint {
        store.fail_point().clone()
    }
}

macro_rules! conformance {
    ($($check:ident),* $(,)?) => {
        mod memory {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                suite::$check(&Memory(MemoryStore::new())).await;
            })*
        }
        mod sled {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                suite::$check(&Sled::new()).await;
            })*
        }
    };
}

conformance!(
    concurrent_same_key,
    step_taken_keeps_the_stored_row,
    version_conflicts,
    thousand_commits,
    injected_failures_leave_nothing,
    restarts_between_operations,
    effect_journal_is_compare_and_set,
    outbox_rows_come_with_their_commit,
    events_and_pending_steps_go_with_their_writes,
);

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
}
