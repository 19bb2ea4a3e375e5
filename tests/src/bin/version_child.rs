//! The process the versioning tests start and kill: runs of [`graph_tests::versions`]' `ticket`
//! graph on a store ([`graph_tests::backends::open_spec`]), with a test clock at a fixed time so that
//! processes agree on due times.
//!
//! - `version_child <store> setup <prefix>`: version 1 parks `{prefix}asks` at its question and
//!   `{prefix}sleeps` asleep for an hour; prints `ready`.
//! - `... migrate <run>`: an engine of version 2 serving version 1 migrates the run to version 2 and
//!   prints `migrated <step>`. With `CRASH_AT=1:<before|after>` the process aborts just before or
//!   just after the migration's commit.
//! - `... finish <run> [<run>...]`: two hours later, an engine of version 2 serving version 1
//!   migrates each run still on version 1, answers a waiting question `true`, wakes what is due, and
//!   again two hours later, and prints `state <run> <final state JSON>` for each.

use std::sync::Arc;

use graph_runtime::{Engine, Store, TestClock};
use graph_tests::backends::open_spec;
use graph_tests::faults::{CrashAt, hooked};
use graph_tests::versions::{self, TicketV1, TicketV2, ticket, v1, v2};

/// The setup's time; `finish` runs two hours later.
const T0_MS: u64 = 10_000_000;

fn new_engine(store: Arc<dyn Store>, clock: TestClock) -> Engine<TicketV2> {
    Engine::builder(v2::graph())
        .serves(v1::graph())
        .migration(versions::migration())
        .shared_store(store)
        .clock(clock)
        .build()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opened = open_spec(&args[0]).await.expect("open the store");
    let store: Arc<dyn Store> = match CrashAt::from_env(false) {
        Some(hooks) => hooked(opened, hooks),
        None => opened.shared(),
    };
    match args[1].as_str() {
        "setup" => {
            let p = &args[2];
            let old = Engine::builder(v1::graph()).shared_store(store).clock(TestClock::at_ms(T0_MS)).build();
            old.run(&format!("{p}asks"), ticket("ada")).await.unwrap();
            old.run(&format!("{p}sleeps"), ticket("bob")).await.unwrap();
            old.resume_with_input(&format!("{p}sleeps"), &true).await.unwrap();
            println!("ready");
        }
        "migrate" => {
            let engine = new_engine(store, TestClock::at_ms(T0_MS + 60_000));
            let migrated = engine.migrate(&args[2], 2).await.unwrap();
            println!("migrated {}", migrated.step);
        }
        "finish" => {
            let clock = TestClock::at_ms(T0_MS + 7_200_000);
            let engine = new_engine(store.clone(), clock.clone());
            for run in &args[2..] {
                let info = store.run_info(run).await.unwrap().expect("the run");
                if info.graph_fingerprint == v1::FINGERPRINT {
                    engine.migrate(run, 2).await.unwrap();
                }
                if engine
                    .outcome(run)
                    .await
                    .unwrap()
                    .unwrap()
                    .interrupts()
                    .iter()
                    .any(|i| i.node == "approve")
                {
                    engine.resume_with_input(run, &true).await.unwrap();
                }
            }
            engine.wake_due().await.unwrap();
            // A question answered now sleeps an hour from now.
            clock.advance(std::time::Duration::from_secs(7_200));
            engine.wake_due().await.unwrap();
            for run in &args[2..] {
                let out = engine.outcome(run).await.unwrap().unwrap();
                assert!(out.is_completed(), "{run}: {:?}", out.status);
                println!("state {run} {}", serde_json::to_string(&out.state).unwrap());
            }
            // Version 1's typed engine no longer has these runs: they are version 2's.
            let old = engine.version::<TicketV1>(1).expect("served");
            assert!(old.outcome(&args[2]).await.is_err());
        }
        other => panic!("unknown command {other}"),
    }
}
