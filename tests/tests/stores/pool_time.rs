//! Runs that wait, on a worker pool (PostgreSQL and MySQL): a run asleep is woken by the pool once it
//! is due, by a test clock the workers read and by the database's own clock; an answered run is handed
//! back to the pool and completed by a worker; an answered run driven beside the pool (the old recipe)
//! never ends `Failed`.
//!
//! Needs the servers: `cargo test -p graph-tests --features postgres,mysql --test stores -- pool_time::`.

/// Says, in a run without the features, that these tests did not run.
#[cfg(not(all(feature = "postgres", feature = "mysql")))]
#[test]
#[ignore = "built without features postgres and mysql: run cargo test -p graph-tests --features postgres,mysql"]
fn pool_time_tests_not_run() {}

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod servers {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use graph_runtime::engine::fired_run_id;
    use graph_runtime::prelude::*;
    use graph_runtime::store::conformance::Backend;
    use graph_runtime::store::lease::LeaseStore;
    use graph_runtime::store::schedule::Missed;
    use graph_runtime::worker::{Worker, WorkerReport};
    use graph_runtime::{Error, TestClock};

    /// How many times each run's node body ran past its wait (`woke`) or made its charge (`charge`),
    /// across the test's engines and workers, by run id.
    static COUNTS: Mutex<BTreeMap<(String, &'static str), u32>> = Mutex::new(BTreeMap::new());

    fn count(run: &str, what: &'static str) {
        *COUNTS.lock().unwrap().entry((run.to_owned(), what)).or_default() += 1;
    }

    fn counted(run: &str, what: &'static str) -> u32 {
        COUNTS.lock().unwrap().get(&(run.to_owned(), what)).copied().unwrap_or(0)
    }

    #[reducer]
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    pub(super) struct Job {
        /// How long the node sleeps, ms.
        pub sleep_ms: u64,
        /// When it woke (overwrite).
        pub woke_at_ms: Option<u64>,
        /// The charge's receipt (overwrite).
        pub receipt: Option<String>,
    }

    #[graph(state = Job, name = "pool_sleeper")]
    pub mod sleeper {
        use super::*;

        #[node(entry, to = END)]
        async fn nap(s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
            let woke = ctx.sleep(Duration::from_millis(s.sleep_ms))?;
            count(ctx.run_id(), "woke");
            let at = woke.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
            Ok(JobDelta::default().woke_at_ms(Some(at)))
        }
    }

    #[graph(state = Job, name = "pool_approval")]
    pub mod approval {
        use super::*;

        /// Asks, then makes a non-idempotent charge: two drivers of one run race on its journal entry.
        #[node(entry, to = END)]
        async fn approve(_s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
            let yes: bool = ctx.interrupt(&"charge?")?;
            if !yes {
                return Ok(JobDelta::default());
            }
            let run = ctx.run_id().to_owned();
            let receipt: String = ctx
                .effect("charge", &"card")
                .run(|key| async move {
                    count(&run, "charge");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, std::io::Error>(format!("receipt-{key}"))
                })
                .await?;
            Ok(JobDelta::default().receipt(Some(receipt)))
        }
    }

    #[graph(state = Job, name = "pool_flaky")]
    pub mod flaky {
        use super::*;

        /// A non-idempotent charge whose first call fails for good: the run ends `Failed`, and `resume`
        /// calls it again.
        #[node(entry, to = END)]
        async fn pay(_s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
            let run = ctx.run_id().to_owned();
            let receipt: String = ctx
                .effect("charge", &"card")
                .run(|key| async move {
                    count(&run, "charge");
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    if counted(&run, "charge") == 1 {
                        return Err(graph_runtime::NodeError::fatal("the card was declined"));
                    }
                    Ok(format!("receipt-{key}"))
                })
                .await?;
            Ok(JobDelta::default().receipt(Some(receipt)))
        }
    }

    #[graph(state = Job, name = "pool_mail")]
    pub mod mail {
        use super::*;

        /// Waits for a `receipt` event, then records it.
        #[node(entry, to = END)]
        async fn settle(_s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
            let receipt: String = ctx.wait_event("receipt")?;
            count(ctx.run_id(), "settled");
            Ok(JobDelta::default().receipt(Some(receipt)))
        }
    }

    #[graph(state = Job, name = "pool_report")]
    pub mod report {
        use super::*;

        #[node(entry, to = END)]
        async fn make(_s: &Job, ctx: &mut Ctx) -> NodeResult<Job> {
            count(ctx.run_id(), "made");
            Ok(JobDelta::default().receipt(Some(ctx.run_id().to_owned())))
        }
    }

    /// Starts `n` in-process workers of `graph` on `store`; cancel the token and await the handles to
    /// stop them.
    fn workers<S: Reducer, L: LeaseStore>(
        graph: impl Fn() -> graph_runtime::Graph<S>,
        store: &L,
        clock: Option<&TestClock>,
        n: usize,
    ) -> (CancellationToken, Vec<tokio::task::JoinHandle<WorkerReport>>) {
        let stop = CancellationToken::new();
        let handles = (0..n)
            .map(|i| {
                let mut b = Worker::builder(graph(), store.clone())
                    .id(format!("w{i}"))
                    .poll(Duration::from_millis(20))
                    .lease(Duration::from_secs(10))
                    .concurrency(4);
                if let Some(c) = clock {
                    b = b.clock(c.clone());
                }
                let (w, stop) = (b.build(), stop.clone());
                tokio::spawn(async move { w.run(stop).await.unwrap() })
            })
            .collect();
        (stop, handles)
    }

    async fn stop_all(
        stop: CancellationToken,
        handles: Vec<tokio::task::JoinHandle<WorkerReport>>,
    ) -> WorkerReport {
        stop.cancel();
        let mut total = WorkerReport::default();
        for h in handles {
            let r = h.await.unwrap();
            total.claimed += r.claimed;
            total.completed += r.completed;
            total.failed += r.failed;
            total.fenced += r.fenced;
        }
        total
    }

    /// Polls until the run exists and `done` holds of its stored status (generous bound).
    async fn until<S: Reducer>(
        engine: &Engine<S>,
        run: &str,
        done: impl Fn(&RunStatus) -> bool,
    ) -> RunStatus {
        for _ in 0..3000 {
            if let Some(out) = engine.outcome(run).await.unwrap()
                && done(&out.status)
            {
                return out.status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("run {run}: {:?}", engine.outcome(run).await.unwrap().map(|o| o.status))
    }

    async fn sleeping_runs_are_woken_by_the_pool_when_due_by_the_test_clock<L: LeaseStore>(
        p: &str,
        store: L,
    ) {
        let start = 1_796_115_600_000;
        let clock = TestClock::at_ms(start);
        let engine = Engine::builder(sleeper::graph()).store(store.clone()).clock(clock.clone()).build();
        let day = 24 * 3600 * 1000;
        for i in 0..6u64 {
            let out = engine
                .run(&format!("{p}-nap-{i}"), Job { sleep_ms: day * (1 + i % 2), ..Job::default() })
                .await
                .unwrap();
            assert!(matches!(out.status, RunStatus::Waiting(_)), "{:?}", out.status);
        }
        let (stop, handles) = workers(sleeper::graph, &store, Some(&clock), 3);
        // Not due yet: the pool leaves them parked.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 0..6 {
            assert!(matches!(
                engine.outcome(&format!("{p}-nap-{i}")).await.unwrap().unwrap().status,
                RunStatus::Waiting(_)
            ));
        }
        // One day: the three one-day sleepers wake, once each.
        clock.advance(Duration::from_millis(day));
        for i in (0..6).step_by(2) {
            until(&engine, &format!("{p}-nap-{i}"), |s| *s == RunStatus::Completed).await;
        }
        for i in (1..6).step_by(2) {
            assert!(matches!(
                engine.outcome(&format!("{p}-nap-{i}")).await.unwrap().unwrap().status,
                RunStatus::Waiting(_)
            ));
        }
        clock.advance(Duration::from_millis(day));
        for i in (1..6).step_by(2) {
            until(&engine, &format!("{p}-nap-{i}"), |s| *s == RunStatus::Completed).await;
        }
        let report = stop_all(stop, handles).await;
        assert_eq!(report.failed, 0, "{report:?}");
        assert_eq!(report.completed, 6, "{report:?}");
        for i in 0..6u64 {
            assert_eq!(counted(&format!("{p}-nap-{i}"), "woke"), 1, "each run woke once");
            let out = engine.outcome(&format!("{p}-nap-{i}")).await.unwrap().unwrap();
            let due = start + day * (1 + i % 2);
            let woke = out.state.woke_at_ms.unwrap();
            assert!(woke >= due && woke <= start + 2 * day, "run {i} woke at {woke}, due {due}");
        }
    }

    async fn a_sleeping_run_is_woken_by_the_pool_in_the_databases_clock<L: LeaseStore>(p: &str, store: L) {
        let engine = Engine::builder(sleeper::graph()).store(store.clone()).build();
        let out = engine.run(&format!("{p}-db-nap"), Job { sleep_ms: 800, ..Job::default() }).await.unwrap();
        let due = out.interrupts()[0].wake_at_ms.unwrap();
        let (stop, handles) = workers(sleeper::graph, &store, None, 2);
        until(&engine, &format!("{p}-db-nap"), |s| *s == RunStatus::Completed).await;
        let report = stop_all(stop, handles).await;
        assert_eq!((report.completed, report.failed), (1, 0), "{report:?}");
        let woke = engine.outcome(&format!("{p}-db-nap")).await.unwrap().unwrap().state.woke_at_ms.unwrap();
        assert!(woke >= due, "woke at {woke}, due at {due}");
    }

    async fn answered_runs_handed_back_are_completed_by_the_pool<L: LeaseStore>(p: &str, store: L) {
        let engine = Engine::builder(approval::graph()).store(store.clone()).build();
        for i in 0..8 {
            engine.submit(&format!("{p}-hb-{i}"), Job::default()).await.unwrap();
        }
        let (stop, handles) = workers(approval::graph, &store, None, 2);
        for i in 0..8 {
            until(&engine, &format!("{p}-hb-{i}"), |s| matches!(s, RunStatus::Interrupted(_))).await;
        }
        for i in 0..8 {
            let out = engine
                .resume_with_inputs_with(
                    &format!("{p}-hb-{i}"),
                    [(approve_id(), serde_json::json!(true))],
                    RunOptions::default().hand_back(),
                )
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Running, "handed back, not driven here");
        }
        for i in 0..8 {
            until(&engine, &format!("{p}-hb-{i}"), |s| *s == RunStatus::Completed).await;
        }
        let report = stop_all(stop, handles).await;
        assert_eq!(report.failed, 0, "{report:?}");
        for i in 0..8 {
            assert_eq!(counted(&format!("{p}-hb-{i}"), "charge"), 1, "one charge a run");
            assert!(engine.outcome(&format!("{p}-hb-{i}")).await.unwrap().unwrap().state.receipt.is_some());
        }
    }

    /// The recipe the docs gave before hand-back: `resume` makes the run `running` and drives it here,
    /// and a worker claims it too. Both reach the effect's journal entry; the one that loses stops
    /// (`Superseded` here, fenced or superseded on the worker), and no run ends `Failed`.
    async fn runs_resumed_beside_the_pool_never_fail<L: LeaseStore>(p: &str, store: L) {
        let engine = Engine::builder(flaky::graph()).store(store.clone()).build();
        let runs = 12;
        for i in 0..runs {
            let failed = engine.run(&format!("{p}-race-{i}"), Job::default()).await;
            assert!(matches!(failed, Err(Error::NodeFailed { .. })), "{failed:?}");
        }
        let (stop, handles) = workers(flaky::graph, &store, None, 2);
        let (mut driven_here, mut stopped_here) = (0, 0);
        for i in 0..runs {
            match engine.resume(&format!("{p}-race-{i}")).await {
                Ok(out) => {
                    assert!(out.is_completed(), "{:?}", out.status);
                    driven_here += 1;
                }
                Err(Error::Superseded { .. } | Error::VersionConflict { .. }) => stopped_here += 1,
                Err(e) => panic!("run race-{i}: {e}"),
            }
        }
        let mut paused = 0;
        for i in 0..runs {
            let run = format!("{p}-race-{i}");
            let status = until(&engine, &run, |s| !matches!(s, RunStatus::Running)).await;
            match status {
                RunStatus::Completed => {}
                // The worker met the charge `Started` by this engine, mid-call, and paused the run for a
                // person (what a crash mid-call looks like). The call completed meanwhile: handed back,
                // the run goes on with its journaled response.
                RunStatus::Paused(PauseReason::NeedsConfirmation { .. }) => {
                    paused += 1;
                    engine.resume_with(&run, RunOptions::default().hand_back()).await.unwrap();
                    assert_eq!(
                        until(&engine, &run, |s| *s == RunStatus::Completed).await,
                        RunStatus::Completed
                    );
                }
                other => panic!("{run} ended {other:?}"),
            }
            assert!(counted(&run, "charge") <= 2, "at most one charge after the failed one");
        }
        let report = stop_all(stop, handles).await;
        eprintln!(
            "{p}: {driven_here} of {runs} runs driven here, {stopped_here} stopped meeting a worker, {paused} \
             paused for confirmation; {report:?}"
        );
        assert_eq!(report.failed, 0, "{report:?} ({driven_here} driven here, {stopped_here} stopped here)");
        assert!(stopped_here + report.fenced > 0 || report.claimed == 0, "{report:?}");
    }

    /// The recipe the docs give now: hand the resumed run back; the pool alone drives it.
    async fn runs_resumed_and_handed_back_are_completed_by_the_pool<L: LeaseStore>(p: &str, store: L) {
        let engine = Engine::builder(flaky::graph()).store(store.clone()).build();
        let runs = 6;
        for i in 0..runs {
            assert!(engine.run(&format!("{p}-back-{i}"), Job::default()).await.is_err());
        }
        let (stop, handles) = workers(flaky::graph, &store, None, 2);
        for i in 0..runs {
            let out = engine
                .resume_with(&format!("{p}-back-{i}"), RunOptions::default().hand_back())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Running);
        }
        for i in 0..runs {
            until(&engine, &format!("{p}-back-{i}"), |s| *s == RunStatus::Completed).await;
            assert_eq!(counted(&format!("{p}-back-{i}"), "charge"), 2, "the failed call and one more");
        }
        let report = stop_all(stop, handles).await;
        assert_eq!((report.failed, report.fenced, report.completed), (0, 0, runs), "{report:?}");
    }

    /// Events sent to runs the pool parked: each run is made due by its message and a worker delivers
    /// it, once; a message sent before the run waits is taken when it parks.
    async fn events_sent_to_parked_runs_are_delivered_by_the_pool<L: LeaseStore>(p: &str, store: L) {
        let engine = Engine::builder(mail::graph()).store(store.clone()).build();
        let runs = 6;
        let (stop, handles) = workers(mail::graph, &store, None, 2);
        for i in 0..runs {
            engine.submit(&format!("{p}-mail-{i}"), Job::default()).await.unwrap();
        }
        // One message sent before its run is even claimed.
        engine.send_event(&format!("{p}-mail-0"), "receipt", &"early").await.unwrap();
        for i in 1..runs {
            until(&engine, &format!("{p}-mail-{i}"), |s| matches!(s, RunStatus::Waiting(_))).await;
        }
        for i in 1..runs {
            let sent =
                engine.send_event_once(&format!("{p}-mail-{i}"), "receipt", "hook", &format!("r{i}")).await;
            assert!(!sent.unwrap().duplicate);
            // The webhook retried: one message.
            let again = engine.send_event_once(&format!("{p}-mail-{i}"), "receipt", "hook", &"dup").await;
            assert!(again.unwrap().duplicate);
        }
        for i in 0..runs {
            let run = format!("{p}-mail-{i}");
            until(&engine, &run, |s| *s == RunStatus::Completed).await;
            let want = if i == 0 { "early".to_owned() } else { format!("r{i}") };
            assert_eq!(engine.outcome(&run).await.unwrap().unwrap().state.receipt, Some(want));
            assert_eq!(counted(&run, "settled"), 1, "{run} settled once");
        }
        let report = stop_all(stop, handles).await;
        assert_eq!(report.failed, 0, "{report:?}");
    }

    /// A schedule fired by 4 workers while the test aborts one every few firings (mid-claim,
    /// mid-firing, mid-run) and starts another: every firing starts exactly one run, and each completes.
    async fn a_schedule_on_four_workers_fires_each_time_exactly_once<L: LeaseStore>(p: &str, store: L) {
        let start = 1_796_083_200_000;
        let clock = TestClock::at_ms(start);
        let engine = Engine::builder(report::graph()).store(store.clone()).clock(clock.clone()).build();
        let name = format!("{p}-tick");
        engine.schedule_with(&name, "@every 1m", &Job::default(), Missed::CatchUpAll).await.unwrap();
        let spawn = |i: usize| {
            let w = Worker::builder(report::graph(), store.clone())
                .id(format!("{p}-sched-{i}"))
                .poll(Duration::from_millis(10))
                .lease(Duration::from_millis(600))
                .clock(clock.clone())
                .build();
            tokio::spawn(async move { w.run(CancellationToken::new()).await })
        };
        let mut pool: Vec<_> = (0..4).map(spawn).collect();
        let minutes = 16u64;
        for m in 1..=minutes {
            clock.advance(Duration::from_secs(60));
            if m % 3 == 0 {
                // A worker dies, whatever it was doing; another starts.
                let victim = (m as usize) % pool.len();
                pool[victim].abort();
                pool[victim] = spawn(10 + m as usize);
            }
            let run = fired_run_id(&name, start + m * 60_000);
            until(&engine, &run, |_| true).await;
            until(&engine, &run, |s| *s == RunStatus::Completed).await;
        }
        for w in &pool {
            w.abort();
        }
        let ours: Vec<String> = engine
            .store()
            .list_runs(&graph_runtime::store::RunFilter::all())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .filter(|r| r.starts_with(&format!("{name}@")))
            .collect();
        let expected: Vec<String> = (1..=minutes).map(|m| fired_run_id(&name, start + m * 60_000)).collect();
        assert_eq!(ours, expected, "one run a firing, no more");
        for run in &expected {
            assert!(counted(run, "made") >= 1, "{run}");
            assert_eq!(engine.history(run).await.unwrap().len(), 2, "{run}: step 0 and its one step, once");
        }
    }

    /// A schedule (`@every 1s`, missed firings caught up) fired by four worker processes while the test
    /// SIGKILLs one every 1.2 s, at random, for ten seconds, and starts another: every second from the
    /// first firing on has exactly one run, and each completes once (its two checkpoints).
    async fn a_schedule_fired_by_worker_processes_through_sigkills_starts_each_run_once<L: LeaseStore>(
        p: &str,
        store: L,
        url: String,
    ) {
        use std::process::{Child, Command, Stdio};
        let graph = || graph_tests::graphs::schedule_tick(Duration::from_millis(150));
        let engine = Engine::builder(graph()).store(store.clone()).build();
        let name = format!("{p}-proc");
        let first = engine
            .schedule_with(&name, "@every 1s", &graph_tests::Trace::default(), Missed::CatchUpAll)
            .await
            .unwrap()
            .next_fire_ms;
        let spawn = |i: usize| -> Child {
            Command::new(env!("CARGO_BIN_EXE_schedule_child"))
                .arg(&url)
                .arg(format!("{p}-child-{i}"))
                .stdin(Stdio::piped())
                .spawn()
                .expect("the child starts")
        };
        let mut pool: Vec<Child> = (0..4).map(spawn).collect();
        let mut seed = first;
        let started = std::time::Instant::now();
        let mut kills = 0;
        while started.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(1200)).await;
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let victim = (seed >> 33) as usize % pool.len();
            pool[victim].kill().unwrap();
            pool[victim].wait().unwrap();
            pool[victim] = spawn(100 + kills);
            kills += 1;
        }
        let cutoff = graph_runtime::Clock::now_ms(&graph_runtime::SystemClock);
        // Every firing up to the cutoff has its run, completed.
        let mut at = first;
        while at <= cutoff {
            until(&engine, &fired_run_id(&name, at), |s| *s == RunStatus::Completed).await;
            at += 1000;
        }
        engine.delete_schedule(&name).await.unwrap();
        // A worker that read the schedule before the delete may fire once more: wait for its run too.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let prefix = format!("{name}@");
        let ours: Vec<String> = engine
            .store()
            .list_runs(&graph_runtime::store::RunFilter::all())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .filter(|r| r.starts_with(&prefix))
            .collect();
        for run in &ours {
            until(&engine, run, |s| *s == RunStatus::Completed).await;
        }
        for mut child in pool {
            drop(child.stdin.take());
            child.wait().unwrap();
        }
        let expected: Vec<String> =
            (0..ours.len() as u64).map(|i| fired_run_id(&name, first + i * 1000)).collect();
        assert_eq!(ours, expected, "one run a second from the first firing, none twice, none missing");
        assert!(ours.len() as u64 > (cutoff - first) / 1000, "{} runs", ours.len());
        for run in &ours {
            let status = engine.outcome(run).await.unwrap().unwrap().status;
            assert_eq!(status, RunStatus::Completed, "{run}");
            assert_eq!(engine.history(run).await.unwrap().len(), 2, "{run}: committed once");
        }
        eprintln!("{p}: {} firings, {kills} kills", ours.len());
    }

    fn approve_id() -> String {
        // The entry item's path and the first waiting call.
        graph_runtime::keys::PathId::entry("approve").as_str().to_owned() + "#0"
    }

    async fn all<L: LeaseStore>(p: &str, store: L) {
        sleeping_runs_are_woken_by_the_pool_when_due_by_the_test_clock(p, store.clone()).await;
        a_sleeping_run_is_woken_by_the_pool_in_the_databases_clock(p, store.clone()).await;
        answered_runs_handed_back_are_completed_by_the_pool(p, store.clone()).await;
        runs_resumed_beside_the_pool_never_fail(p, store.clone()).await;
        runs_resumed_and_handed_back_are_completed_by_the_pool(p, store.clone()).await;
        events_sent_to_parked_runs_are_delivered_by_the_pool(p, store.clone()).await;
        a_schedule_on_four_workers_fires_each_time_exactly_once(p, store).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_schedule_processes() {
        let b = graph_tests::backends::Postgres::new();
        let store = b.open().await;
        a_schedule_fired_by_worker_processes_through_sigkills_starts_each_run_once("pgp", store, b.url())
            .await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_schedule_processes() {
        let b = graph_tests::backends::MySql::new();
        let store = b.open().await;
        a_schedule_fired_by_worker_processes_through_sigkills_starts_each_run_once("myp", store, b.url())
            .await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let b = graph_tests::backends::Postgres::new();
        all("pg", b.open().await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql() {
        let b = graph_tests::backends::MySql::new();
        all("my", b.open().await).await;
    }
}
