//! External events: `engine.send_event` and `ctx.wait_event` — messages sent before the wait and after
//! it, delivered in send order per topic and each once; dedupe keys; timeouts; a run the store does not
//! have; a payload the node cannot read (rejected, kept, the run waiting on); delivery across a restart
//! on sled; a replay that waits for nothing.

use std::time::Duration;

use graph_runtime::prelude::*;
use graph_runtime::store::mailbox::MessageState;
use graph_runtime::{Error, EventType, TestClock};

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Orders {
    /// What arrived, in order (append).
    #[reduce(append)]
    pub got: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Item {
    sku: String,
}

#[graph(state = Orders, name = "mail_orders")]
mod orders {
    use super::*;

    /// Takes three `item` events, then a `paid` one with a timeout of an hour.
    #[node(entry, to = END)]
    async fn collect(_s: &Orders, ctx: &mut Ctx) -> NodeResult<Orders> {
        let mut got = Vec::new();
        for _ in 0..3 {
            let item: Item = ctx.wait_event("item")?;
            got.push(item.sku);
        }
        match ctx.wait_event_with_timeout::<u64>("paid", Duration::from_secs(3600))? {
            Answer::Given(cents) => got.push(format!("paid {cents}")),
            Answer::TimedOut { .. } => got.push("not paid".into()),
        }
        Ok(OrdersDelta::default().got(got))
    }
}

fn item(sku: &str) -> Item {
    Item { sku: sku.into() }
}

const START: u64 = 1_796_115_600_000;

#[tokio::test]
async fn events_sent_before_and_after_the_wait_arrive_in_order_once_each() {
    let clock = TestClock::at_ms(START);
    let engine = Engine::builder(orders::graph()).clock(clock.clone()).build();
    assert!(matches!(
        engine.send_event("o1", "item", &item("x")).await,
        Err(Error::RunNotFound { run }) if run == "o1"
    ));
    engine.submit("o1", Orders::default()).await.unwrap();
    // Two sent before the run runs, one of them twice (a retried webhook): one message.
    assert!(!engine.send_event_once("o1", "item", "hook-1", &item("a")).await.unwrap().duplicate);
    assert!(engine.send_event_once("o1", "item", "hook-1", &item("zzz")).await.unwrap().duplicate);
    engine.send_event("o1", "item", &item("b")).await.unwrap();
    // A message of a topic nobody waits for yet waits in the mailbox.
    engine.send_event("o1", "paid", &12_500u64).await.unwrap();
    let out = engine.resume("o1").await.unwrap();
    // a and b taken at once; the third item is awaited.
    let [wait] = out.interrupts() else { panic!("{:?}", out.status) };
    assert!(matches!(out.status, RunStatus::Waiting(_)), "{:?}", out.status);
    assert_eq!((wait.kind, wait.topic.as_deref(), wait.index), (InterruptKind::Event, Some("item"), 2));
    assert_eq!(wait.wake_at_ms, None, "no timeout, nothing sent");

    let sent = engine.send_event("o1", "item", &item("c")).await.unwrap();
    assert_eq!(sent.seq, 3);
    let due = engine.outcome("o1").await.unwrap().unwrap().status.wake_at_ms();
    assert_eq!(due, Some(START), "a message makes the waiting run due now");
    let woken = engine.wake_due().await.unwrap();
    let out = woken[0].1.as_ref().unwrap();
    assert!(out.is_completed(), "{:?}", out.status);
    assert_eq!(out.state.got, ["a", "b", "c", "paid 12500"]);
    let mailbox = engine.mailbox("o1").await.unwrap();
    assert_eq!(mailbox.messages.len(), 4);
    assert!(mailbox.messages.iter().all(|m| matches!(m.state, MessageState::Claimed { .. })));

    // The deliveries are in the log; replay makes the same checkpoints and waits for nothing.
    let events = engine.store().events("o1", 0, 100).await.unwrap();
    let by_event =
        events.iter().filter(|e| e.event_type == EventType::Resumed && e.payload.value()["by"] == "event");
    assert!(by_event.count() >= 1);
    let replayed = tokio::time::timeout(Duration::from_secs(30), engine.replay("o1", ReplayMode::Strict))
        .await
        .expect("a replay never waits")
        .unwrap();
    assert!(replayed.divergences.is_empty(), "{:?}", replayed.divergences);
    assert_eq!(replayed.state, out.state);
}

#[tokio::test]
async fn a_wait_with_a_timeout_times_out_and_a_payload_of_the_wrong_type_is_rejected_and_kept() {
    let clock = TestClock::at_ms(START);
    let engine = Engine::builder(orders::graph()).clock(clock.clone()).build();
    engine.submit("o2", Orders::default()).await.unwrap();
    for sku in ["a", "b", "c"] {
        engine.send_event("o2", "item", &item(sku)).await.unwrap();
    }
    let out = engine.resume("o2").await.unwrap();
    let [wait] = out.interrupts() else { panic!("{:?}", out.status) };
    assert_eq!(wait.topic.as_deref(), Some("paid"));
    assert_eq!(wait.wake_at_ms, Some(START + 3_600_000));

    // A payload the node cannot read as u64: rejected when delivered, kept, the run waiting on with its
    // own timeout.
    engine.send_event("o2", "paid", &"twelve euros").await.unwrap();
    let rejected = engine.wake("o2").await;
    let Err(Error::EventRejected { topic, seq, detail, .. }) = rejected else { panic!("{rejected:?}") };
    assert_eq!((topic.as_str(), seq), ("paid", 3));
    assert!(detail.contains("u64"), "{detail}");
    let status = engine.outcome("o2").await.unwrap().unwrap().status;
    assert!(matches!(status, RunStatus::Waiting(_)), "{status:?}");
    assert_eq!(status.wake_at_ms(), Some(START + 3_600_000), "the timeout, not the send");
    let kept = engine.mailbox("o2").await.unwrap();
    assert!(matches!(&kept.messages[3].state, MessageState::Rejected { .. }), "{kept:?}");
    assert!(engine.wake_due().await.unwrap().is_empty(), "nothing due");

    // An hour later nothing has come: the node takes its timeout.
    clock.advance(Duration::from_secs(3600));
    let woken = engine.wake_due().await.unwrap();
    let out = woken[0].1.as_ref().unwrap();
    assert_eq!(out.state.got, ["a", "b", "c", "not paid"]);
}

#[tokio::test]
async fn an_event_sent_while_no_engine_runs_is_delivered_by_the_next_ones_timer_service() {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::at_ms(START);
    let open = || {
        Engine::builder(orders::graph())
            .store(SledStore::open(dir.path()).unwrap())
            .clock(clock.clone())
            .build()
    };
    let engine = open();
    engine.run("o3", Orders::default()).await.unwrap();
    drop(engine);
    // Another engine, with no run of its own going (a webhook handler, say), sends and goes away.
    let sender = open();
    for sku in ["a", "b", "c"] {
        sender.send_event("o3", "item", &item(sku)).await.unwrap();
    }
    sender.send_event("o3", "paid", &100u64).await.unwrap();
    drop(sender);
    let engine = open();
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    let mut done = None;
    for _ in 0..2000 {
        let out = engine.outcome("o3").await.unwrap().unwrap();
        if out.is_completed() {
            done = Some(out);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    service.await.unwrap().unwrap();
    assert_eq!(done.expect("delivered").state.got, ["a", "b", "c", "paid 100"]);
}

#[tokio::test]
async fn the_stream_shows_the_wait_and_what_woke_the_run() {
    use graph_runtime::{StreamEvent, StreamModes, StreamOptions};
    let engine = Engine::builder(orders::graph()).clock(TestClock::at_ms(START)).build();
    let mut parked = engine.stream("s1", Orders::default(), StreamOptions::default().modes(StreamModes::ALL));
    let mut waits = Vec::new();
    while let Some(e) = parked.next().await {
        if let StreamEvent::Interrupted { interrupts } = e {
            waits.extend(interrupts.into_iter().map(|i| (i.kind, i.topic)));
        }
    }
    assert_eq!(waits, [(InterruptKind::Event, Some("item".to_owned()))]);
    engine.send_event("s1", "item", &item("a")).await.unwrap();
    let mut woken = engine.stream_wake("s1", StreamOptions::default().modes(StreamModes::ALL));
    let mut seen = Vec::new();
    while let Some(e) = woken.next().await {
        match e {
            StreamEvent::RunStarted { .. } => seen.push("started".to_owned()),
            StreamEvent::Woken { by, inputs, .. } => {
                assert_eq!(inputs[0]["input"]["event"]["payload"]["sku"], "a");
                seen.push(format!("woken by {by}"));
            }
            StreamEvent::Interrupted { .. } => seen.push("waits again".to_owned()),
            StreamEvent::Finished(out) => {
                assert!(matches!(out.unwrap().status, RunStatus::Waiting(_)));
                seen.push("finished".to_owned());
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["started", "woken by event", "waits again", "finished"]);
}

#[tokio::test]
async fn a_message_that_makes_the_run_due_while_its_step_runs_does_not_make_the_step_run_again() {
    use graph_runtime::store::mailbox::MailboxOp;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, OnceLock};
    let engine_of: Arc<OnceLock<Engine<Orders>>> = Arc::default();
    let runs = Arc::new(AtomicUsize::new(0));
    let graph = Graph::<Orders>::builder("self_send")
        .node("take", {
            let (engine_of, runs) = (engine_of.clone(), runs.clone());
            move |_s, ctx| {
                let (engine_of, runs) = (engine_of.clone(), runs.clone());
                Box::pin(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let Answer::Given(first) =
                        ctx.wait_event_with_timeout::<String>("go", Duration::from_secs(3600))?
                    else {
                        return Err(NodeError::fatal("timed out"));
                    };
                    // The stored run still waits for `go`, due in an hour: this message makes it due now
                    // (its status written again, a new version) while the step is not yet committed.
                    let engine = engine_of.get().expect("set before the run");
                    engine.send_event(ctx.run_id(), "go", &"again").await.map_err(NodeError::new)?;
                    Ok((OrdersDelta::default().got(vec![first]), Route::Declared))
                })
            }
        })
        .entry("take")
        .edge("take", END)
        .build()
        .unwrap();
    let engine = Engine::builder(graph).clock(TestClock::at_ms(START)).build();
    assert!(engine_of.set(engine.clone()).is_ok());
    let parked = engine.run("s", Orders::default()).await.unwrap();
    assert_eq!(parked.status.wake_at_ms(), Some(START + 3_600_000));
    // A message put in the mailbox without moving the due time (a sender cut off between the two
    // writes), then the run woken for it.
    let send = MailboxOp::Send {
        topic: "go".into(),
        dedupe_key: Some("k".into()),
        payload: "first".into(),
        sent_at_ms: START,
    };
    engine.store().mailbox_op("s", send).await.unwrap();
    let woken = engine.wake("s").await.unwrap();
    assert!(woken.is_completed(), "{:?}", woken.status);
    assert_eq!(woken.state.got, ["first"]);
    assert_eq!(runs.load(Ordering::SeqCst), 2, "parked once, woken once");
    let events = engine.events("s", 0, 1000).await.unwrap();
    let commits = events.iter().filter(|e| e.event_type == EventType::StepCommitted).count();
    assert_eq!(commits, 1, "step 1, once (step 0 is the run's start)");
}
