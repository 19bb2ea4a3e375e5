//! Versioned graphs on every store: a build serving versions 1 and 2 of `ticket`
//! ([`graph_tests::versions`]) finishes version 1's runs on version 1 and starts new runs on
//! version 2; migrating parked version 1 runs to version 2 (a renamed field, a renamed node, a
//! removed node whose runs resume at its replacement, a new node) resumes them with the mapped
//! state; a migration that fails at any write of its commit leaves the run as it was; refused
//! migrations are typed errors with nothing written.

use std::sync::Arc;
use std::time::Duration;

use graph_runtime::store::conformance::Backend;
use graph_runtime::{
    Engine, EngineOptions, Error, EventType, InterruptKind, Migration, ReplayVerdict, RunStatus, Store,
    TestClock,
};
use graph_tests::versions::{self, TicketV1, TicketV2, ticket, v1, v2};

graph_tests::for_backends! {
    super: [
        a_build_serving_two_versions_finishes_old_runs_on_theirs_and_starts_new_runs_on_the_newest,
        parked_runs_migrated_to_the_new_version_resume_with_the_mapped_state,
        a_migration_failing_at_any_write_leaves_the_run_as_it_was,
        refused_migrations_are_typed_and_change_nothing,
    ];
    memory => graph_tests::backends::Memory::new(),
    sled => graph_tests::backends::Sled::new(),
    #[cfg(feature = "postgres")]
    postgres => graph_tests::backends::Postgres::new(),
    #[cfg(feature = "mysql")]
    mysql => graph_tests::backends::MySql::new(),
}

#[cfg(feature = "sqlite")]
graph_tests::for_backends! {
    super: [
        a_build_serving_two_versions_finishes_old_runs_on_theirs_and_starts_new_runs_on_the_newest,
        parked_runs_migrated_to_the_new_version_resume_with_the_mapped_state,
        a_migration_failing_at_any_write_leaves_the_run_as_it_was,
        refused_migrations_are_typed_and_change_nothing,
    ];
    sqlite => graph_tests::backends::Sqlite::new(),
}

const HOUR: Duration = Duration::from_secs(3600);

/// No retries: a failed store call is the test's to see.
fn options() -> EngineOptions {
    EngineOptions::default().store_retry_timeout(Duration::ZERO)
}

fn old_engine(store: Arc<dyn Store>, clock: &TestClock) -> Engine<TicketV1> {
    Engine::builder(v1::graph()).shared_store(store).clock(clock.clone()).options(options()).build()
}

fn new_engine(store: Arc<dyn Store>, clock: &TestClock) -> Engine<TicketV2> {
    Engine::builder(v2::graph())
        .serves(v1::graph())
        .migration(versions::migration())
        .shared_store(store)
        .clock(clock.clone())
        .options(options())
        .build()
}

/// Two runs of version 1, parked: `{p}asks` at `review`'s question, `{p}sleeps` asleep in `wait`.
async fn parked_v1_runs(store: Arc<dyn Store>, clock: &TestClock, p: &str) {
    let old = old_engine(store, clock);
    let asks = old.run(&format!("{p}asks"), ticket("ada")).await.unwrap();
    assert!(matches!(asks.status, RunStatus::Interrupted(_)), "{:?}", asks.status);
    old.run(&format!("{p}sleeps"), ticket("bob")).await.unwrap();
    let sleeps = old.resume_with_input(&format!("{p}sleeps"), &true).await.unwrap();
    assert!(matches!(&sleeps.status, RunStatus::Waiting(w) if w[0].node == "wait"), "{:?}", sleeps.status);
}

async fn a_build_serving_two_versions_finishes_old_runs_on_theirs_and_starts_new_runs_on_the_newest<
    B: Backend,
>(
    b: &B,
) {
    let store: Arc<dyn Store> = Arc::new(b.open().await);
    let clock = TestClock::at_ms(1_000_000);
    parked_v1_runs(store.clone(), &clock, "s-").await;
    let engine = new_engine(store.clone(), &clock);
    assert_eq!(engine.versions(), vec![1, 2]);
    // The engine's timer index is read from the store now: what a served version parks later is
    // noted in it (by the version's engine), or the timer service would never wake it.
    assert!(engine.wake_due().await.unwrap().is_empty());
    // A call typed by version 2's state on a version 1 run says so, and does nothing.
    let before = store.run_info("s-asks").await.unwrap().unwrap();
    match engine.resume_with_input("s-asks", &true).await {
        Err(Error::OtherVersion { version: 1, current: 2, .. }) => {}
        other => panic!("expected OtherVersion, got {other:?}"),
    }
    assert_eq!(store.run_info("s-asks").await.unwrap().unwrap().version, before.version);
    // Version 1's typed engine answers it, on version 1.
    let old = engine.version::<TicketV1>(1).expect("version 1 is served");
    assert!(engine.version::<TicketV2>(1).is_none(), "another state type");
    let out = old.resume_with_input("s-asks", &false).await.unwrap();
    assert!(matches!(&out.status, RunStatus::Waiting(w) if w[0].node == "wait"), "{:?}", out.status);
    // The engine's timer service (here: wake_due) wakes both version 1 runs when due, on version 1.
    clock.advance(HOUR + Duration::from_secs(1));
    engine.wake_due().await.unwrap();
    for (run, customer, approved) in [("s-asks", "ada", false), ("s-sleeps", "bob", true)] {
        let done = old.outcome(run).await.unwrap().unwrap();
        assert!(done.is_completed(), "{run}: {:?}", done.status);
        let notes = vec![format!("intake:{customer}"), "review:v1".into(), "slept:v1".into()];
        assert_eq!(done.state, TicketV1 { customer: customer.into(), notes, approved });
        let info = store.run_info(run).await.unwrap().unwrap();
        assert_eq!(info.graph_fingerprint, v1::FINGERPRINT);
    }
    // New runs start on version 2.
    let new = engine.run("s-new", TicketV2 { client: "cy".into(), ..TicketV2::default() }).await.unwrap();
    assert!(matches!(&new.status, RunStatus::Interrupted(w) if w[0].node == "approve"), "{:?}", new.status);
    let info = store.run_info("s-new").await.unwrap().unwrap();
    assert_eq!((info.graph_fingerprint.as_str(), v2::VERSION), (v2::FINGERPRINT, 2));
    assert!(v2::FINGERPRINT.starts_with("v2:"), "{}", v2::FINGERPRINT);
    // An engine of version 2 alone refuses version 1's runs as before.
    let alone = Engine::builder(v2::graph()).shared_store(store.clone()).build();
    assert!(matches!(alone.outcome("s-asks").await, Err(Error::GraphChanged { .. })));
}

async fn parked_runs_migrated_to_the_new_version_resume_with_the_mapped_state<B: Backend>(b: &B) {
    let store: Arc<dyn Store> = Arc::new(b.open().await);
    let clock = TestClock::at_ms(2_000_000);
    // Run ids of this backend's own: the notice counter is the process's.
    let p = format!("m-{}-", std::any::type_name::<B>().rsplit("::").next().unwrap_or("b"));
    let (ask, sleep) = (format!("{p}asks"), format!("{p}sleeps"));
    parked_v1_runs(store.clone(), &clock, &p).await;
    let engine = new_engine(store.clone(), &clock);
    let asked = store.run_info(&ask).await.unwrap().unwrap();
    let question = asked.status.waits()[0].clone();
    // A dry run says what it would do and writes nothing.
    let dry = engine.migrate_dry_run(&ask, 2).await.unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.frontier, (vec!["review".to_owned()], vec!["approve".to_owned()]));
    assert_eq!(dry.state_after["client"], "ada");
    assert_eq!(store.run_info(&ask).await.unwrap().unwrap(), asked);
    // The question is asked again of version 2's `approve`, under the same id.
    let migrated = engine.migrate(&ask, 2).await.unwrap();
    assert_eq!((migrated.from, migrated.to, migrated.step), (1, 2, asked.latest_step + 1));
    let info = store.run_info(&ask).await.unwrap().unwrap();
    assert_eq!(info.graph_fingerprint, v2::FINGERPRINT);
    let waits = info.status.waits();
    assert_eq!(
        (waits[0].id.as_str(), waits[0].node.as_str(), waits[0].kind, waits[0].step),
        (question.id.as_str(), "approve", InterruptKind::Input, migrated.step)
    );
    let out = engine.resume_with_input(&ask, &true).await.unwrap();
    assert!(matches!(&out.status, RunStatus::Waiting(w) if w[0].node == "nap"), "{:?}", out.status);
    // The sleeping run keeps its due time, now in `nap`.
    let sleeping = store.run_info(&sleep).await.unwrap().unwrap();
    let due = sleeping.status.wake_at_ms().expect("a due time");
    engine.migrate(&sleep, 2).await.unwrap();
    let info = store.run_info(&sleep).await.unwrap().unwrap();
    assert_eq!((info.status.wake_at_ms(), info.status.waits()[0].node.as_str()), (Some(due), "nap"));
    clock.advance(HOUR + Duration::from_secs(1));
    engine.wake_due().await.unwrap();
    let asks = engine.outcome(&ask).await.unwrap().unwrap();
    assert!(asks.is_completed(), "{:?}", asks.status);
    let notes = ["intake:ada", "approve:v2", "triage:v2", "slept:v2"].map(String::from).to_vec();
    assert_eq!(asks.state, TicketV2 { client: "ada".into(), notes, approved: true, priority: 1 });
    let sleeps = engine.outcome(&sleep).await.unwrap().unwrap();
    assert!(sleeps.is_completed(), "{:?}", sleeps.status);
    let notes = ["intake:bob", "review:v1", "slept:v2"].map(String::from).to_vec();
    assert_eq!(sleeps.state, TicketV2 { client: "bob".into(), notes, approved: true, priority: 0 });
    // `approve` ran on version 2 for the question version 1's `review` asked: its notice was the one
    // journaled then (one per run), not sent again.
    assert_eq!((versions::notices(&ask), versions::notices(&sleep)), (1, 1), "one notice per run");
    // The log records the migration and verifies; the history shows both versions' checkpoints.
    for run in [&ask, &sleep] {
        let run = run.as_str();
        let report = engine.verify(run).await.unwrap();
        assert!(report.events > 0);
        let events = engine.events(run, 0, 1000).await.unwrap();
        assert_eq!(events.iter().filter(|e| e.event_type == EventType::Migrated).count(), 1, "{run}");
        // The replay check says the run spans two versions.
        let check = engine.check_replay(run).await.unwrap();
        assert!(matches!(check.verdict, ReplayVerdict::Migrated { .. }), "{check:?}");
    }
}

async fn a_migration_failing_at_any_write_leaves_the_run_as_it_was<B: Backend>(b: &B) {
    let inner = b.open().await;
    let store: Arc<dyn Store> = Arc::new(inner.clone());
    let clock = TestClock::at_ms(3_000_000);
    parked_v1_runs(store.clone(), &clock, "f-").await;
    let engine = new_engine(store.clone(), &clock);
    let before = store.run_info("f-asks").await.unwrap().unwrap();
    let cp = store.latest("f-asks").await.unwrap().unwrap();
    for n in 1..=3 {
        B::fail_point(&inner).fail_after(n);
        let failed = engine.migrate("f-asks", 2).await;
        B::fail_point(&inner).fail_after(0);
        assert!(failed.is_err(), "write {n}: {failed:?}");
        assert_eq!(store.run_info("f-asks").await.unwrap().unwrap(), before, "write {n}");
        assert_eq!(store.latest("f-asks").await.unwrap().unwrap(), cp, "write {n}");
    }
    // And then it migrates.
    engine.migrate("f-asks", 2).await.unwrap();
    assert_eq!(store.run_info("f-asks").await.unwrap().unwrap().graph_fingerprint, v2::FINGERPRINT);
}

async fn refused_migrations_are_typed_and_change_nothing<B: Backend>(b: &B) {
    let store: Arc<dyn Store> = Arc::new(b.open().await);
    let clock = TestClock::at_ms(4_000_000);
    parked_v1_runs(store.clone(), &clock, "r-").await;
    let before = store.run_info("r-asks").await.unwrap().unwrap();
    let refused = |e: Result<graph_runtime::Migrated, Error>, says: &str| match e {
        Err(Error::Migration { reason, .. }) => {
            assert!(reason.contains(says), "{reason:?} should say {says:?}")
        }
        other => panic!("expected a refused migration, got {other:?}"),
    };
    // No node mapping for `review`, which version 2 does not have.
    let unmapped = Engine::builder(v2::graph())
        .serves(v1::graph())
        .migration(v2::migration())
        .shared_store(store.clone())
        .build();
    refused(unmapped.migrate("r-asks", 2).await, "`review`");
    // A mapping to a node version 2 does not have.
    let wrong = Engine::builder(v2::graph())
        .migration(v2::migration().node("review", "reveiw"))
        .shared_store(store.clone())
        .build();
    refused(wrong.migrate("r-asks", 2).await, "`reveiw`");
    // A state mapping that refuses.
    let picky = Engine::builder(v2::graph())
        .migration(Migration::try_new(v1::graph(), v2::graph(), |t: TicketV1| {
            Err(format!("{} has no client record", t.customer))
        }))
        .shared_store(store.clone())
        .build();
    refused(picky.migrate("r-asks", 2).await, "ada has no client record");
    // A version nothing migrates to; the version it runs; back to an earlier one.
    let engine = new_engine(store.clone(), &clock);
    refused(engine.migrate("r-asks", 3).await, "no migration starts from version 2");
    refused(engine.migrate("r-asks", 1).await, "already runs version 1");
    assert_eq!(store.run_info("r-asks").await.unwrap().unwrap(), before);
    // A completed run keeps its version.
    let old = engine.version::<TicketV1>(1).unwrap();
    old.resume_with_input("r-asks", &true).await.unwrap();
    clock.advance(HOUR + Duration::from_secs(1));
    engine.wake_due().await.unwrap();
    assert!(old.outcome("r-asks").await.unwrap().unwrap().is_completed());
    refused(engine.migrate("r-asks", 2).await, "completed");
    assert!(matches!(engine.migrate("nobody", 2).await, Err(Error::RunNotFound { .. })));
}
