//! An approval that lives in time, told in one process under a test clock (three days pass in a
//! moment): the manager does not answer within 72 hours, the request is escalated to the director, the
//! payout sleeps a day, and the bank's confirmation arrives as an external event.
//!
//! ```text
//! cargo run -p graph-examples --example escalation
//! ```
//!
//! The graph is in `graph_examples::escalation`; the run is stored on sled in a fresh temp folder, and
//! the engine's timer service (`Engine::run_timers`) wakes it as the clock moves.

use std::time::Duration;

use graph_examples::escalation::{self, CONFIRMED, MANAGER_DEADLINE, PAYOUT_DELAY, escalation_flow};
use graph_runtime::prelude::*;
use graph_runtime::{Clock as _, TestClock, cron::utc};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("graph-runtime-escalation-{}", std::process::id()));
    let clock = TestClock::at(std::time::SystemTime::now());
    let engine =
        Engine::builder(escalation_flow::graph()).store(SledStore::open(&dir)?).clock(clock.clone()).build();
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    let say = |what: &str| println!("[{}] {what}", utc(clock.now_ms()));

    let out = engine.run("expense-1", escalation::sample_request()).await?;
    let asked = &out.interrupts()[0];
    say(&format!("the manager is asked {} (deadline {})", asked.payload, utc(asked.wake_at_ms.unwrap_or(0))));

    clock.advance(MANAGER_DEADLINE);
    let out = wait_until(&engine, |s| s.waits().iter().any(|i| i.node == "director")).await?;
    say(&format!("nobody answered: {}", out.state.log.last().unwrap()));
    say(&format!("the director is asked {}", out.interrupts()[0].payload));

    let out = engine.resume_with_input("expense-1", &true).await?;
    say(&format!(
        "the director said yes; the payout sleeps until {}",
        utc(out.status.wake_at_ms().unwrap_or(0))
    ));

    clock.advance(PAYOUT_DELAY);
    wait_until(&engine, |s| s.waits().iter().any(|i| i.topic.as_deref() == Some(CONFIRMED))).await?;
    say("paid out; waiting for the bank's confirmation");

    // What the bank's webhook handler does (twice: a retry is the same message).
    for _ in 0..2 {
        engine.send_event_once("expense-1", CONFIRMED, "bank-tx-991", &"BNK-991").await?;
    }
    let done = wait_until(&engine, |s| *s == RunStatus::Completed).await?;
    say(&format!("completed: {}", done.state.log.join("; ")));
    shutdown.cancel();
    service.await??;
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Waits (a little wall time: the timer service works on its own task) until the stored status is `done`.
async fn wait_until(
    engine: &Engine<escalation::Request>,
    done: impl Fn(&RunStatus) -> bool,
) -> Result<RunOutcome<escalation::Request>, Box<dyn std::error::Error>> {
    for _ in 0..1000 {
        let out = engine.outcome("expense-1").await?.ok_or("the run is stored")?;
        if done(&out.status) {
            return Ok(out);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("the run did not get there".into())
}
