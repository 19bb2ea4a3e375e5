//! The escalation example under a test clock: a 72-hour deadline that passes, one that does not, an
//! answer that comes too late, a day's durable sleep across engines on one sled store, and a replay that
//! waits for nothing.

use std::time::Duration;

use graph_examples::escalation::{self, CONFIRMED, MANAGER_DEADLINE, PAYOUT_DELAY, Request, escalation_flow};
use graph_runtime::prelude::*;
use graph_runtime::{Error, EventType, Store, TestClock};

/// 2026-12-01 09:00 UTC.
const START_MS: u64 = 1_796_115_600_000;

fn engine_on(store: impl Store, clock: &TestClock) -> Engine<Request> {
    Engine::builder(escalation_flow::graph()).store(store).clock(clock.clone()).build()
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[tokio::test]
async fn nobody_answers_in_72_hours_so_the_director_decides_and_the_payout_sleeps_a_day() {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::at_ms(START_MS);
    let engine = engine_on(SledStore::open(dir.path()).unwrap(), &clock);
    let out = engine.run("e1", escalation::sample_request()).await.unwrap();
    let [asked] = out.interrupts() else { panic!("{:?}", out.status) };
    assert!(matches!(out.status, RunStatus::Interrupted(_)), "a person is asked: {:?}", out.status);
    assert_eq!(asked.node, "manager");
    assert_eq!(asked.wake_at_ms, Some(START_MS + ms(MANAGER_DEADLINE)));

    // A minute before the deadline nothing is due.
    clock.advance(MANAGER_DEADLINE - Duration::from_secs(60));
    assert!(engine.wake_due().await.unwrap().is_empty());
    assert!(matches!(engine.outcome("e1").await.unwrap().unwrap().status, RunStatus::Interrupted(_)));

    // At the deadline the timer wakes the run: the manager node times out and the run escalates.
    clock.advance(Duration::from_secs(60));
    let woken = engine.wake_due().await.unwrap();
    assert_eq!(woken.len(), 1);
    let out = woken.into_iter().next().unwrap().1.unwrap();
    let [asked] = out.interrupts() else { panic!("{:?}", out.status) };
    assert_eq!(asked.node, "director");
    assert_eq!(asked.wake_at_ms, None, "the director has no deadline");
    assert!(out.state.log.iter().any(|l| l == "escalated to the director"), "{:?}", out.state.log);

    // The director approves; the payout parks for a day: `Waiting`, not a question for a person.
    let out = engine.resume_with_input("e1", &true).await.unwrap();
    let RunStatus::Waiting(list) = &out.status else { panic!("{:?}", out.status) };
    let booked_at = START_MS + ms(MANAGER_DEADLINE);
    assert_eq!(list[0].wake_at_ms, Some(booked_at + ms(PAYOUT_DELAY)));
    assert!(matches!(
        engine.resume_with_input("e1", &true).await,
        Err(Error::ResumeInput { detail, .. }) if detail.contains("asleep")
    ));
    // A plain resume leaves a sleeping run as it is.
    assert!(matches!(engine.resume("e1").await.unwrap().status, RunStatus::Waiting(_)));

    // The process goes away; another engine on the same store finds the sleeping run and, a day later,
    // its timer service wakes it.
    drop(engine);
    let engine = engine_on(SledStore::open(dir.path()).unwrap(), &clock);
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    clock.advance(PAYOUT_DELAY);
    let confirming =
        wait_for(&engine, "e1", |s| s.waits().iter().any(|i| i.topic.as_deref() == Some(CONFIRMED))).await;
    assert!(matches!(confirming, RunStatus::Waiting(_)), "{confirming:?}");
    // The bank's webhook, delivered twice; the timer service delivers the one message.
    for _ in 0..2 {
        engine.send_event_once("e1", CONFIRMED, "bank-tx-991", &"BNK-991").await.unwrap();
    }
    let done = wait_for_completion(&engine, "e1").await;
    shutdown.cancel();
    service.await.unwrap().unwrap();
    assert_eq!(done.state.decided_by.as_deref(), Some("director"));
    assert_eq!(done.state.paid_at_ms, Some(booked_at + ms(PAYOUT_DELAY)), "the recorded wake time");
    assert_eq!(
        done.state.log,
        [
            "dana asks for 125000 cents",
            "manager did not answer in 72 h",
            "escalated to the director",
            "director said yes",
            "booked",
            "paid out",
            "the bank confirmed: BNK-991",
        ]
    );
    assert_eq!(done.state.bank_reference.as_deref(), Some("BNK-991"));

    // The log records both wakes as the timer's; replay makes the same checkpoints and waits for nothing
    // (the clock no longer moves).
    let events = engine.store().events("e1", 0, 1000).await.unwrap();
    let by_timer = events
        .iter()
        .filter(|e| e.event_type == EventType::Resumed && e.payload.value()["by"] == "timer")
        .count();
    assert_eq!(by_timer, 2);
    let replayed = tokio::time::timeout(Duration::from_secs(30), engine.replay("e1", ReplayMode::Strict))
        .await
        .expect("a replay never waits")
        .unwrap();
    assert!(replayed.divergences.is_empty(), "{:?}", replayed.divergences);
    assert_eq!(replayed.state, done.state);
    assert_eq!(engine.verify("e1").await.unwrap().events, events.len() as u64);
}

#[tokio::test]
async fn an_answer_in_time_is_taken_and_one_after_the_deadline_is_refused() {
    let clock = TestClock::at_ms(START_MS);
    let engine = engine_on(MemoryStore::new(), &clock);
    engine.run("in-time", escalation::sample_request()).await.unwrap();
    engine.run("late", escalation::sample_request()).await.unwrap();
    clock.advance(MANAGER_DEADLINE - Duration::from_millis(1));
    let out = engine.resume_with_input("in-time", &false).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.decided_by.as_deref(), Some("manager"));

    clock.advance(Duration::from_millis(1));
    let refused = engine.resume_with_input("late", &true).await;
    let Err(Error::DeadlinePassed { interrupt, deadline_ms, now_ms, .. }) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!((deadline_ms, now_ms), (START_MS + ms(MANAGER_DEADLINE), START_MS + ms(MANAGER_DEADLINE)));
    assert!(interrupt.ends_with("#0"), "{interrupt}");
    // Nothing changed: the timer gives the node its timeout.
    let woken = engine.wake_due().await.unwrap();
    assert_eq!(woken.len(), 1, "only the late run was still due");
    let out = woken.into_iter().next().unwrap().1.unwrap();
    assert_eq!(out.interrupts()[0].node, "director");
}

/// Polls the stored outcome until the run completes (generous bound: the timer service runs on its own
/// task).
async fn wait_for_completion(engine: &Engine<Request>, run: &str) -> RunOutcome<Request> {
    wait_for(engine, run, |s| *s == RunStatus::Completed).await;
    engine.outcome(run).await.unwrap().unwrap()
}

/// Polls the stored status until `done` holds of it.
async fn wait_for(engine: &Engine<Request>, run: &str, done: impl Fn(&RunStatus) -> bool) -> RunStatus {
    for _ in 0..2000 {
        let status = engine.outcome(run).await.unwrap().unwrap().status;
        if done(&status) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {run}: {:?}", engine.outcome(run).await.unwrap().unwrap().status)
}
