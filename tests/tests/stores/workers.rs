//! Many workers on one database, with real processes (`src/bin/worker_child.rs`):
//!
//! - 4 worker processes share 200 submitted runs of a fan-out graph while the test SIGKILLs one at
//!   random every few hundred ms and starts a new one in its place (at least 20 kills): every run
//!   completes; every run's committed history and final state equal an uninterrupted run's; every step is
//!   committed once (checkpoint and key rows); every node execution of the reference happened (re-runs
//!   after a kill are counted, not committed); and the claim log shows no run held by two workers at once
//!   (every claim of a run came after the lease it replaced ended, in database time) and that expired
//!   leases were taken over.
//! - A worker stopped (SIGSTOP) longer than its lease, its run taken over, then continued (SIGCONT): it
//!   is fenced and commits nothing after the takeover. A worker stopped inside a transaction, its run
//!   row locked, does not keep the run from the next claim once its lease has expired.
//!
//! Needs the servers: `cargo test -p graph-tests --features postgres,mysql --test stores -- workers::`
//! (GRAPH_TEST_POSTGRES_URL / GRAPH_TEST_MYSQL_URL, by default the local ones). An unreachable server
//! fails the tests.

/// Says, in a run without the features, that these tests did not run.
#[cfg(not(all(feature = "postgres", feature = "mysql")))]
#[test]
#[ignore = "built without features postgres and mysql: run cargo test -p graph-tests --features postgres,mysql"]
fn worker_tests_not_run() {}

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod servers {
    use graph_runtime::{Engine, Store};
    use graph_tests::graphs::{ExecutionLog, no_log, worker_fanout, worker_fanout_version};
    use graph_tests::{Trace, history_hash, random_delay, state_hash};
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// The database a test runs on, with the few queries the checks need.
    enum Db {
        #[cfg(feature = "postgres")]
        Pg(graph_tests::backends::Postgres, graph_runtime::store::PostgresStore),
        #[cfg(feature = "mysql")]
        My(graph_tests::backends::MySql, graph_runtime::store::MySqlStore),
    }

    use graph_runtime::store::server::sqlx;

    impl Db {
        #[cfg(feature = "postgres")]
        async fn postgres() -> Db {
            use graph_runtime::store::conformance::Backend;
            let b = graph_tests::backends::Postgres::new();
            let store = b.open().await;
            let db = Db::Pg(b, store);
            db.exec(
                "CREATE TABLE worker_execs (run_id TEXT COLLATE \"C\" NOT NULL, step BIGINT NOT NULL, \
                 node TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (run_id, step, node))",
            )
            .await;
            db
        }

        #[cfg(feature = "mysql")]
        async fn mysql() -> Db {
            use graph_runtime::store::conformance::Backend;
            let b = graph_tests::backends::MySql::new();
            let store = b.open().await;
            let db = Db::My(b, store);
            db.exec(
                "CREATE TABLE worker_execs (run_id VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, step BIGINT NOT NULL, \
                 node VARCHAR(64) NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (run_id, step, node)) ENGINE = InnoDB",
            )
            .await;
            db
        }

        fn url(&self) -> String {
            match self {
                #[cfg(feature = "postgres")]
                Db::Pg(b, _) => b.url(),
                #[cfg(feature = "mysql")]
                Db::My(b, _) => b.url(),
            }
        }

        fn store(&self) -> Arc<dyn Store> {
            match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => Arc::new(s.clone()),
                #[cfg(feature = "mysql")]
                Db::My(_, s) => Arc::new(s.clone()),
            }
        }

        async fn exec(&self, sql: &'static str) {
            let done = match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => sqlx::query(sql).execute(s.pool()).await.map(drop),
                #[cfg(feature = "mysql")]
                Db::My(_, s) => sqlx::query(sql).execute(s.pool()).await.map(drop),
            };
            done.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }

        /// One integer (a count).
        async fn count(&self, sql: &'static str) -> i64 {
            let n: Result<i64, _> = match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await,
                #[cfg(feature = "mysql")]
                Db::My(_, s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await,
            };
            n.unwrap_or_else(|e| panic!("{sql}: {e}"))
        }

        /// (run, step, node) → executions, from `worker_execs`.
        async fn executions(&self) -> BTreeMap<(String, u64, String), i64> {
            let rows: Vec<(Vec<u8>, i64, Vec<u8>, i64)> = match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => sqlx::query_as(
                    "SELECT convert_to(run_id, 'UTF8'), step, convert_to(node, 'UTF8'), n FROM worker_execs",
                )
                .fetch_all(s.pool())
                .await
                .expect("executions"),
                #[cfg(feature = "mysql")]
                Db::My(_, s) => sqlx::query_as(
                    "SELECT CAST(run_id AS BINARY), step, CAST(node AS BINARY), n FROM worker_execs",
                )
                .fetch_all(s.pool())
                .await
                .expect("executions"),
            };
            let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
            rows.into_iter().map(|(r, s, n, c)| ((text(r), s as u64, text(n)), c)).collect()
        }

        /// Who took the run's first claim, from the claim log.
        async fn claimer(&self, run: &str) -> String {
            let owner: Result<Vec<u8>, _> = match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => {
                    sqlx::query_scalar(
                        "SELECT convert_to(owner, 'UTF8') FROM graph_lease_claims WHERE run_id = $1 AND token = 1",
                    )
                    .bind(run)
                    .fetch_one(s.pool())
                    .await
                }
                #[cfg(feature = "mysql")]
                Db::My(_, s) => {
                    sqlx::query_scalar(
                        "SELECT CAST(owner AS BINARY) FROM graph_lease_claims WHERE run_id = ? AND token = 1",
                    )
                    .bind(run)
                    .fetch_one(s.pool())
                    .await
                }
            };
            String::from_utf8(owner.expect("a claim row")).expect("utf-8")
        }

        /// The lease of a run: (owner, token).
        async fn lease(&self, run: &str) -> Option<(String, u64)> {
            use graph_runtime::worker::LeaseStore;
            let l = match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => s.lease_of(run).await,
                #[cfg(feature = "mysql")]
                Db::My(_, s) => s.lease_of(run).await,
            };
            l.expect("lease").map(|(l, _)| (l.owner, l.token))
        }
    }

    /// A transaction left open on one of a store's own connections (its session set up as the store
    /// sets every session up), holding a run row's lock.
    enum Held {
        #[cfg(feature = "postgres")]
        Pg(sqlx::Transaction<'static, sqlx::Postgres>),
        #[cfg(feature = "mysql")]
        My(sqlx::Transaction<'static, sqlx::MySql>),
    }

    impl Held {
        /// Whether the transaction's session still answers.
        async fn answers(&mut self) -> bool {
            match self {
                #[cfg(feature = "postgres")]
                Held::Pg(tx) => sqlx::query("SELECT 1").execute(&mut **tx).await.is_ok(),
                #[cfg(feature = "mysql")]
                Held::My(tx) => sqlx::query("SELECT 1").execute(&mut **tx).await.is_ok(),
            }
        }
    }

    impl Db {
        /// Opens a transaction on the store's pool that locks `run`'s row as a commit does, and leaves
        /// it open.
        async fn lock_run_row(&self, run: &str) -> Held {
            match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => {
                    let mut tx = s.pool().begin().await.expect("begin");
                    let rows = sqlx::query("SELECT run_id FROM graph_runs WHERE run_id = $1 FOR UPDATE")
                        .bind(run)
                        .fetch_all(&mut *tx)
                        .await
                        .expect("lock");
                    assert_eq!(rows.len(), 1);
                    Held::Pg(tx)
                }
                #[cfg(feature = "mysql")]
                Db::My(_, s) => {
                    let mut tx = s.pool().begin().await.expect("begin");
                    let rows = sqlx::query("SELECT run_id FROM graph_runs WHERE run_id = ? FOR UPDATE")
                        .bind(run)
                        .fetch_all(&mut *tx)
                        .await
                        .expect("lock");
                    assert_eq!(rows.len(), 1);
                    Held::My(tx)
                }
            }
        }

        /// Claims up to `n` runs of graph `fp` for `owner`.
        async fn claim(&self, owner: &str, fp: &str, n: usize, lease: Duration) -> Vec<String> {
            use graph_runtime::worker::LeaseStore;
            let taken = match self {
                #[cfg(feature = "postgres")]
                Db::Pg(_, s) => s.claim(owner, fp, n, lease).await,
                #[cfg(feature = "mysql")]
                Db::My(_, s) => s.claim(owner, fp, n, lease).await,
            };
            taken.expect("claim").into_iter().map(|l| l.run_id).collect()
        }
    }

    /// A worker process.
    struct Proc {
        child: Child,
        id: String,
    }

    impl Drop for Proc {
        /// A worker left behind by a failed test is killed.
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Starts a worker process on `url`.
    fn spawn(url: &str, id: &str, args: &[String]) -> Proc {
        spawn_with(url, id, args, None)
    }

    /// Starts a worker process on `url`, with a heartbeat interval when given.
    fn spawn_with(url: &str, id: &str, args: &[String], heartbeat_ms: Option<u64>) -> Proc {
        spawn_env(url, id, args, heartbeat_ms.map(|ms| ("WORKER_HEARTBEAT_MS", ms.to_string())))
    }

    /// Starts a worker process on `url` with one more environment variable.
    fn spawn_env(url: &str, id: &str, args: &[String], env: Option<(&str, String)>) -> Proc {
        let mut command = Command::new(env!("CARGO_BIN_EXE_worker_child"));
        if let Some((key, value)) = env {
            command.env(key, value);
        }
        let mut child = command
            .arg(url)
            .arg(id)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("worker_child starts");
        // Wait for it to be connected (migrations done), so a kill lands on a working worker.
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        out.read_line(&mut line).expect("worker_child writes");
        assert!(line.starts_with("ready"), "worker_child said {line:?}");
        child.stdout = Some(out.into_inner());
        Proc { child, id: id.to_owned() }
    }

    /// Closes the worker's stdin (a graceful shutdown) and returns its report line.
    fn finish(mut p: Proc) -> String {
        drop(p.child.stdin.take());
        let mut text = String::new();
        std::io::Read::read_to_string(&mut p.child.stdout.take().expect("stdout"), &mut text).expect("read");
        let status = p.child.wait().expect("worker_child exits");
        assert!(status.success(), "worker {} exited with {status}", p.id);
        text.lines()
            .find(|l| l.starts_with("report"))
            .unwrap_or_else(|| panic!("no report from {}: {text}", p.id))
            .to_owned()
    }

    /// `key=value` of a report line.
    fn field(report: &str, key: &str) -> u64 {
        report
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {report:?}"))
    }

    const RUNS: usize = 200;
    const WIDTH: usize = 3;
    const ITERATIONS: usize = 4;
    const DELAY_MS: u64 = 40;
    const LEASE_MS: u64 = 1000;
    const CONCURRENCY: usize = 3;

    /// The uninterrupted reference of every run: history hash, final state hash, and the node executions.
    async fn reference(
        runs: &[String],
    ) -> (BTreeMap<String, (String, String)>, BTreeSet<(String, u64, String)>) {
        reference_of(runs, WIDTH, ITERATIONS).await
    }

    /// [`reference`] for another shape of the graph.
    async fn reference_of(
        runs: &[String],
        width: usize,
        iterations: usize,
    ) -> (BTreeMap<String, (String, String)>, BTreeSet<(String, u64, String)>) {
        let seen: Arc<Mutex<BTreeSet<(String, u64, String)>>> = Arc::default();
        let record = seen.clone();
        let log: ExecutionLog = Arc::new(move |run, step, node| {
            record.lock().unwrap().insert((run, step, node));
            Box::pin(async {})
        });
        let engine =
            Engine::builder(worker_fanout(width, iterations, Duration::ZERO, String::new(), log)).build();
        let mut out = BTreeMap::new();
        for run in runs {
            let done = engine.run(run, Trace::default()).await.expect("reference run");
            assert!(done.is_completed());
            let history = history_hash(&**engine.store(), run).await;
            out.insert(run.clone(), (history, state_hash(&done.state)));
        }
        let seen = seen.lock().unwrap().clone();
        (out, seen)
    }

    async fn killed_workers_finish_every_run_once(db: Db) {
        let started = Instant::now();
        let url = db.url();
        let store = db.store();
        let runs: Vec<String> = (0..RUNS).map(|i| format!("r{i:03}")).collect();
        let submitter =
            Engine::builder(worker_fanout(WIDTH, ITERATIONS, Duration::ZERO, String::new(), no_log()))
                .shared_store(store.clone())
                .build();
        for run in &runs {
            submitter.submit(run, Trace::default()).await.expect("submit");
        }
        let (expected, executions) = reference(&runs).await;
        let args: Vec<String> = [CONCURRENCY, LEASE_MS as usize, WIDTH, ITERATIONS, DELAY_MS as usize]
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut generation = 0;
        let mut workers: Vec<Proc> = (0..4)
            .map(|slot| {
                generation += 1;
                spawn(&url, &format!("w{slot}-{generation}"), &args)
            })
            .collect();
        let mut kills = 0u32;
        let deadline = Instant::now() + Duration::from_secs(150);
        loop {
            let done = db.count("SELECT COUNT(*) FROM graph_runs WHERE status = 'completed'").await;
            if done as usize == RUNS {
                break;
            }
            let stuck = db
                .count("SELECT COUNT(*) FROM graph_runs WHERE status NOT IN ('running', 'completed')")
                .await;
            assert_eq!(stuck, 0, "runs ended neither running nor completed (failed, paused, …)");
            assert!(
                Instant::now() < deadline,
                "only {done} of {RUNS} runs completed after {:?}",
                started.elapsed()
            );
            // Kill one at random, 100–400 ms apart, and start another in its place.
            std::thread::sleep(
                Duration::from_millis(100) + random_delay(Duration::from_millis(300), u64::from(kills)),
            );
            let slot = (random_delay(Duration::from_nanos(4), u64::from(kills) + 7).as_nanos() % 4) as usize;
            let mut victim = std::mem::replace(&mut workers[slot], {
                generation += 1;
                spawn(&url, &format!("w{slot}-{generation}"), &args)
            });
            victim.child.kill().expect("SIGKILL");
            victim.child.wait().expect("reaped");
            kills += 1;
        }
        let reports: Vec<String> = workers.into_iter().map(finish).collect();
        eprintln!("{kills} kills; {RUNS} runs done in {:?}; last workers: {reports:?}", started.elapsed());
        assert!(kills >= 20, "only {kills} kills happened before the runs completed: make the runs longer");

        // Every run completed, with the uninterrupted run's history and final state.
        let outcomes =
            Engine::builder(worker_fanout(WIDTH, ITERATIONS, Duration::ZERO, String::new(), no_log()))
                .shared_store(store.clone())
                .build();
        let mut steps = 0;
        for run in &runs {
            let out = outcomes.outcome(run).await.expect("outcome").expect("stored");
            assert!(out.is_completed(), "{run}: {:?}", out.status);
            let (history, state) = &expected[run];
            assert_eq!(
                &state_hash(&out.state),
                state,
                "{run}: the final state differs from an uninterrupted run's"
            );
            assert_eq!(&history_hash(&*store, run).await, history, "{run}: the committed history differs");
            steps += store.history(run).await.expect("history").len() as i64;
        }
        // Every step committed once: one checkpoint and one key per step, nothing else.
        assert_eq!(db.count("SELECT COUNT(*) FROM graph_checkpoints").await, steps);
        assert_eq!(db.count("SELECT COUNT(*) FROM graph_keys").await, steps);
        // Every execution of the reference happened (at least once), and no other.
        let counted = db.executions().await;
        let keys: BTreeSet<(String, u64, String)> = counted.keys().cloned().collect();
        assert_eq!(keys, executions, "the node executions differ from the reference's");
        let reruns: i64 = counted.values().map(|n| n - 1).sum();
        // No run held by two workers at once: each claim came after the lease it replaced had ended, and
        // tokens of a run follow each other.
        let overlapping = db
            .count(
                "SELECT COUNT(*) FROM graph_lease_claims WHERE token > 1 \
                 AND (prev_expires IS NULL OR prev_expires > claimed_at)",
            )
            .await;
        assert_eq!(overlapping, 0, "claims of a run while its lease was live");
        let gaps = db
            .count(
                "SELECT COUNT(*) FROM graph_lease_claims c WHERE c.token > 1 AND NOT EXISTS \
                 (SELECT 1 FROM graph_lease_claims p WHERE p.run_id = c.run_id AND p.token = c.token - 1)",
            )
            .await;
        assert_eq!(gaps, 0, "a claim without its predecessor in the log");
        let first = db.count("SELECT COUNT(*) FROM graph_lease_claims WHERE token = 1").await;
        assert_eq!(first as usize, RUNS, "every run claimed (once with token 1)");
        let takeovers =
            db.count("SELECT COUNT(*) FROM graph_lease_claims WHERE token > 1 AND prev_owner <> ''").await;
        let claims = db.count("SELECT COUNT(*) FROM graph_lease_claims").await;
        assert!(takeovers > 0, "no expired lease was taken over: the kills did not hit held runs");
        eprintln!(
            "{claims} claims, {takeovers} takeovers of expired leases, {reruns} node re-executions, {steps} steps \
             committed once; {:?}",
            started.elapsed()
        );
    }

    /// The run of the SIGSTOP test: one run, slow steps, labelled per worker.
    /// The SIGSTOP test's worker arguments (concurrency, lease ms, width, iterations, delay ms, label).
    fn stop_args(lease_ms: u64, label: &str) -> Vec<String> {
        ["1", &lease_ms.to_string(), "2", "8", "250", label].iter().map(ToString::to_string).collect()
    }

    /// A worker stopped longer than its lease is fenced when it continues. With `heartbeats`, A heartbeats
    /// as usual (a 1 s lease; its first beat after SIGCONT, or its next commit, finds the lease gone); without,
    /// A never extends its 3 s lease, so what stops it is the fencing check inside its next commit alone.
    async fn a_stopped_worker_is_fenced(db: Db, heartbeats: bool) {
        let url = db.url();
        let store = db.store();
        // Submitted with the unlabelled graph: the label is not part of the graph's fingerprint.
        let submitter = Engine::builder(worker_fanout(2, 8, Duration::ZERO, String::new(), no_log()))
            .shared_store(store.clone())
            .build();
        submitter.submit("s", Trace::default()).await.expect("submit");
        let a = if heartbeats {
            spawn(&url, "A", &stop_args(1000, "A:"))
        } else {
            spawn_with(&url, "A", &stop_args(3000, "A:"), Some(600_000))
        };
        let latest = || async { store.run_info("s").await.expect("run").expect("stored").latest_step };
        // Stop A just after one of its commits (so it is in a node, not holding the run row).
        let wait_from = Instant::now();
        let before = loop {
            let step = latest().await;
            if step >= 2 {
                break step;
            }
            assert!(wait_from.elapsed() < Duration::from_secs(30), "A made no progress");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let at = loop {
            let step = latest().await;
            if step > before {
                break step;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        signal(&a, "STOP");
        // B takes the run over once A's lease has expired. B's own lease (5 s, heartbeated) only has to
        // outlast a loaded machine's stalls: with 1 s, one full-suite run stalled B's heartbeats past it,
        // A (fenced, claiming again) took the run back and completed it, and B was fenced.
        let b = spawn(&url, "B", &stop_args(5000, "B:"));
        let stopped = Instant::now();
        let resumed_from = loop {
            if db.lease("s").await.is_some_and(|(owner, token)| owner == "B" && token == 2) {
                break latest().await;
            }
            assert!(stopped.elapsed() < Duration::from_secs(20), "B never took the run over");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        // B claimed it only once A's lease had ended, in the database's clock (the claim log records the
        // expiry it replaced). A bound in the test's clock (the takeover at least 500 ms after B started)
        // failed once on a new VM: A's last heartbeat may come up to a third of its lease before the
        // SIGSTOP, later if the machine stalls it, and B's start (a process, its connection and
        // migrations) is part of that time.
        let after_expiry = db
            .count(
                "SELECT COUNT(*) FROM graph_lease_claims WHERE run_id = 's' AND token = 2 \
                 AND prev_owner = 'A' AND prev_expires <= claimed_at",
            )
            .await;
        assert_eq!(after_expiry, 1, "B took the run over before A's lease had expired");
        assert_eq!(resumed_from, at, "A committed while stopped");
        // A continues at once, its node done and its lease gone: it must commit nothing.
        signal(&a, "CONT");
        let wait_from = Instant::now();
        loop {
            let info = store.run_info("s").await.expect("run").expect("stored");
            if info.status == graph_runtime::RunStatus::Completed {
                break;
            }
            assert!(wait_from.elapsed() < Duration::from_secs(60), "the run did not complete: {info:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (report_a, report_b) = (finish(a), finish(b));
        eprintln!("A stopped after step {at}; A: {report_a}; B: {report_b}");
        assert_eq!(field(&report_a, "fenced"), 1, "A was not fenced: {report_a}");
        assert_eq!(field(&report_a, "completed"), 0);
        assert_eq!(field(&report_b, "completed"), 1);
        // Every step from the takeover on is B's; A's entries end before it.
        let outcomes = Engine::builder(worker_fanout(2, 8, Duration::ZERO, String::new(), no_log()))
            .shared_store(store.clone())
            .build();
        let state = outcomes.outcome("s").await.expect("outcome").expect("stored").state;
        let step_of = |entry: &str| entry.rsplit(':').next().and_then(|s| s.parse::<u64>().ok());
        let a_steps: Vec<u64> =
            state.log.iter().filter(|l| l.starts_with("A:")).filter_map(|l| step_of(l)).collect();
        let b_steps: Vec<u64> =
            state.log.iter().filter(|l| l.starts_with("B:")).filter_map(|l| step_of(l)).collect();
        assert!(!a_steps.is_empty() && !b_steps.is_empty(), "{:?}", state.log);
        // Entries of step n are committed with checkpoint n + 1.
        assert!(
            a_steps.iter().all(|&s| s < resumed_from),
            "A's work was committed after B resumed from step {resumed_from}: {:?}",
            state.log
        );
        assert!(b_steps.iter().all(|&s| s >= resumed_from), "{:?}", state.log);
        let final_steps = outcomes.outcome("s").await.unwrap().unwrap().steps;
        assert_eq!(db.count("SELECT COUNT(*) FROM graph_checkpoints").await, final_steps as i64 + 1);
    }

    /// A worker shut down gracefully (stdin closed) stops its runs at a step boundary and releases their
    /// leases: a second worker takes them at once (long before the 30 s lease would expire) and
    /// completes them with the uninterrupted runs' histories.
    async fn a_graceful_shutdown_hands_runs_back(db: Db) {
        let url = db.url();
        let store = db.store();
        let graph = || worker_fanout(2, 6, Duration::ZERO, String::new(), no_log());
        let submitter = Engine::builder(graph()).shared_store(store.clone()).build();
        let runs: Vec<String> = (0..4).map(|i| format!("g{i}")).collect();
        for run in &runs {
            submitter.submit(run, Trace::default()).await.expect("submit");
        }
        let args = |lease_ms: u64| -> Vec<String> {
            ["4", &lease_ms.to_string(), "2", "6", "200"].iter().map(ToString::to_string).collect()
        };
        let a = spawn(&url, "A", &args(30_000));
        // Wait until A holds every run and has committed a step of one.
        let wait_from = Instant::now();
        loop {
            let mut held = 0;
            for run in &runs {
                if db.lease(run).await.is_some_and(|(owner, _)| owner == "A") {
                    held += 1;
                }
            }
            let progressed = store.run_info("g0").await.expect("run").expect("stored").latest_step >= 1;
            if held == runs.len() && progressed {
                break;
            }
            assert!(wait_from.elapsed() < Duration::from_secs(30), "A did not take the runs");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let stopping = Instant::now();
        let report_a = finish(a);
        eprintln!("A: {report_a} (stopped in {:?})", stopping.elapsed());
        assert_eq!(field(&report_a, "handed_back"), runs.len() as u64, "{report_a}");
        for run in &runs {
            let (owner, token) = db.lease(run).await.expect("a lease row");
            assert_eq!((owner.as_str(), token), ("", 1), "{run}: the lease is released");
            let info = store.run_info(run).await.expect("run").expect("stored");
            assert_eq!(info.status, graph_runtime::RunStatus::Running, "{run}: left running");
        }
        let b = spawn(&url, "B", &args(30_000));
        let taking_over = Instant::now();
        loop {
            let done = db.count("SELECT COUNT(*) FROM graph_runs WHERE status = 'completed'").await;
            if done as usize == runs.len() {
                break;
            }
            assert!(taking_over.elapsed() < Duration::from_secs(20), "B did not complete the runs at once");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let report_b = finish(b);
        eprintln!("B: {report_b} (completed in {:?})", taking_over.elapsed());
        assert_eq!(field(&report_b, "claimed"), runs.len() as u64, "{report_b}");
        let (expected, _) = reference_of(&runs, 2, 6).await;
        for run in &runs {
            assert_eq!(
                &history_hash(&*store, run).await,
                &expected[run].0,
                "{run}: the committed history differs"
            );
        }
    }

    /// Two graphs' runs in one database, a worker for each: every run is claimed once, by its own
    /// graph's worker, and completes; no worker claims a run of the other graph (which would fail its
    /// fingerprint check, be released and be claimed again, a row in the claim log each time).
    async fn workers_of_two_graphs_share_a_database(db: Db) {
        let url = db.url();
        let store = db.store();
        let graph = |width| worker_fanout(width, 3, Duration::ZERO, String::new(), no_log());
        assert_ne!(graph(2).fingerprint(), graph(3).fingerprint(), "two graphs");
        let runs: Vec<String> = (0..16).map(|i| format!("m{i:02}")).collect();
        // Interleaved in run-id order: each worker's candidates start with the other graph's runs.
        for (i, run) in runs.iter().enumerate() {
            let submitter = Engine::builder(graph(2 + i % 2)).shared_store(store.clone()).build();
            submitter.submit(run, Trace::default()).await.expect("submit");
        }
        let args = |width: usize| -> Vec<String> {
            ["4", "30000", &width.to_string(), "3", "20"].iter().map(ToString::to_string).collect()
        };
        let two = spawn(&url, "two", &args(2));
        let three = spawn(&url, "three", &args(3));
        let started = Instant::now();
        loop {
            let done = db.count("SELECT COUNT(*) FROM graph_runs WHERE status = 'completed'").await;
            if done as usize == runs.len() {
                break;
            }
            let other = db
                .count("SELECT COUNT(*) FROM graph_runs WHERE status NOT IN ('running', 'completed')")
                .await;
            assert_eq!(other, 0, "runs ended neither running nor completed (failed, …)");
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "only {done} of {} runs completed",
                runs.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (p, label) in [(two, "two"), (three, "three")] {
            let report = finish(p);
            eprintln!("{label}: {report}");
            assert_eq!(field(&report, "claimed"), runs.len() as u64 / 2, "{label}: {report}");
            assert_eq!(field(&report, "completed"), runs.len() as u64 / 2, "{label}: {report}");
            assert_eq!(field(&report, "failed"), 0, "{label}: {report}");
        }
        assert_eq!(
            db.count("SELECT COUNT(*) FROM graph_lease_claims").await,
            runs.len() as i64,
            "one claim a run"
        );
        for (i, run) in runs.iter().enumerate() {
            let (owner, token) = db.lease(run).await.expect("a lease row");
            let expected = if i % 2 == 0 { "two" } else { "three" };
            assert_eq!((owner.as_str(), token), ("", 1), "{run}: released after one claim");
            let holder = db.claimer(run).await;
            assert_eq!(holder, expected, "{run}: claimed by its graph's worker");
        }
    }

    /// Workers serving versions 1 and 2 of the workflow, SIGKILLed at random and replaced, finish
    /// every run of both versions, each on its own version (a version 2 run's entries say `v2/`),
    /// with the uninterrupted run's final state; no run changes version.
    async fn versioned_workers_finish_each_run_on_its_version(db: Db) {
        const EACH: usize = 12;
        let url = db.url();
        let store = db.store();
        let graph = |version| {
            worker_fanout_version(version, WIDTH, ITERATIONS, Duration::ZERO, String::new(), no_log())
        };
        let mut expected = BTreeMap::new();
        for version in [1, 2] {
            let submitter = Engine::builder(graph(version)).shared_store(store.clone()).build();
            let reference = Engine::builder(graph(version)).build();
            for i in 0..EACH {
                let run = format!("v{version}-{i:02}");
                submitter.submit(&run, Trace::default()).await.expect("submit");
                let done = reference.run(&run, Trace::default()).await.expect("reference run");
                expected.insert(run, (version, state_hash(&done.state)));
            }
        }
        let args: Vec<String> = [CONCURRENCY, LEASE_MS as usize, WIDTH, ITERATIONS, DELAY_MS as usize]
            .iter()
            .map(ToString::to_string)
            .collect();
        let versioned = || Some(("WORKER_VERSIONS", "2".to_owned()));
        let mut generation = 0;
        let mut workers: Vec<Proc> = (0..3)
            .map(|slot| {
                generation += 1;
                spawn_env(&url, &format!("w{slot}-{generation}"), &args, versioned())
            })
            .collect();
        let (mut kills, deadline) = (0u32, Instant::now() + Duration::from_secs(150));
        loop {
            let done = db.count("SELECT COUNT(*) FROM graph_runs WHERE status = 'completed'").await;
            if done as usize == 2 * EACH {
                break;
            }
            assert!(Instant::now() < deadline, "only {done} of {} runs completed", 2 * EACH);
            std::thread::sleep(
                Duration::from_millis(150) + random_delay(Duration::from_millis(200), u64::from(kills)),
            );
            if kills < 6 {
                let slot = kills as usize % workers.len();
                generation += 1;
                let fresh = spawn_env(&url, &format!("w{slot}-{generation}"), &args, versioned());
                let mut victim = std::mem::replace(&mut workers[slot], fresh);
                victim.child.kill().expect("SIGKILL");
                victim.child.wait().expect("reaped");
                kills += 1;
            }
        }
        let _: Vec<String> = workers.into_iter().map(finish).collect();
        assert!(kills >= 3, "only {kills} kills happened before the runs completed");
        let served = Engine::builder(graph(2)).serves(graph(1)).shared_store(store.clone()).build();
        for (run, (version, state)) in &expected {
            let out = served.outcome(run).await.expect("outcome").expect("stored");
            assert!(out.is_completed(), "{run}: {:?}", out.status);
            assert_eq!(&state_hash(&out.state), state, "{run}: the uninterrupted run's final state");
            let v2_entries = out.state.log.iter().any(|l| l.starts_with("v2/"));
            assert_eq!(v2_entries, *version == 2, "{run} ran on version {version}: {:?}", out.state.log);
            let info = store.run_info(run).await.unwrap().unwrap();
            assert_eq!(info.graph_fingerprint, graph(*version).fingerprint(), "{run} kept its version");
        }
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_versioned_workers_finish_each_run_on_its_version() {
        versioned_workers_finish_each_run_on_its_version(Db::postgres().await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_versioned_workers_finish_each_run_on_its_version() {
        versioned_workers_finish_each_run_on_its_version(Db::mysql().await).await;
    }

    fn signal(p: &Proc, sig: &str) {
        let status =
            Command::new("kill").arg(format!("-{sig}")).arg(p.child.id().to_string()).status().expect("kill");
        assert!(status.success(), "kill -{sig} {}", p.child.id());
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_killed_workers_finish_every_run_once() {
        killed_workers_finish_every_run_once(Db::postgres().await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_killed_workers_finish_every_run_once() {
        killed_workers_finish_every_run_once(Db::mysql().await).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_graceful_shutdown_hands_runs_back() {
        a_graceful_shutdown_hands_runs_back(Db::postgres().await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_a_graceful_shutdown_hands_runs_back() {
        a_graceful_shutdown_hands_runs_back(Db::mysql().await).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_workers_of_two_graphs_share_a_database() {
        workers_of_two_graphs_share_a_database(Db::postgres().await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_workers_of_two_graphs_share_a_database() {
        workers_of_two_graphs_share_a_database(Db::mysql().await).await;
    }

    /// A worker stopped between the statements of a commit (its run row locked, its transaction open)
    /// does not keep its run from the others once its lease has expired: the server ends its session
    /// after `IDLE_IN_TRANSACTION`, releasing the row, and the next claim takes the run. (Without the
    /// session setting, the row stays locked for as long as the process is stopped, and every claim
    /// skips it.)
    async fn a_worker_stopped_inside_a_transaction_does_not_hold_its_run(db: Db) {
        use graph_runtime::store::conformance::checkpoint;
        use graph_runtime::store::server::IDLE_IN_TRANSACTION;
        let store = db.store();
        store
            .save_checkpoint(&checkpoint("s", 0, 0), &[], &graph_runtime::RunStatus::Running, 0)
            .await
            .expect("commit");
        assert_eq!(db.claim("A", "fp", 1, Duration::from_millis(200)).await, ["s"]);
        let mut held = db.lock_run_row("s").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        loop {
            if db.claim("B", "fp", 1, Duration::from_secs(60)).await == ["s"] {
                break;
            }
            assert!(
                started.elapsed() < IDLE_IN_TRANSACTION + Duration::from_secs(20),
                "no claim took the run while a stopped session held its row ({:?})",
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(db.lease("s").await, Some(("B".to_owned(), 2)));
        assert!(!held.answers().await, "the session that held the row was not ended");
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_worker_stopped_inside_a_transaction_does_not_hold_its_run() {
        a_worker_stopped_inside_a_transaction_does_not_hold_its_run(Db::postgres().await).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_a_worker_stopped_inside_a_transaction_does_not_hold_its_run() {
        a_worker_stopped_inside_a_transaction_does_not_hold_its_run(Db::mysql().await).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_stopped_worker_is_fenced() {
        a_stopped_worker_is_fenced(Db::postgres().await, true).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_stopped_worker_without_heartbeats_is_fenced_by_its_commit() {
        a_stopped_worker_is_fenced(Db::postgres().await, false).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_a_stopped_worker_is_fenced() {
        a_stopped_worker_is_fenced(Db::mysql().await, true).await;
    }

    #[cfg(feature = "mysql")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_a_stopped_worker_without_heartbeats_is_fenced_by_its_commit() {
        a_stopped_worker_is_fenced(Db::mysql().await, false).await;
    }
}
