//! Side effects that happen once: the journal, confirmation of effects a crash left unknown, the outbox,
//! and replay from recorded I/O. The crash tests with real processes are in `effects_crash.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use graph_runtime::Error;
use graph_runtime::prelude::*;
use graph_runtime::store::SledStore;
use graph_tests::{Trace, TraceDelta};

/// Calls each effect closure made.
#[derive(Default)]
struct Calls {
    charge: AtomicU32,
    mail: AtomicU32,
    price: AtomicU32,
}

/// How the pay graph's nodes misbehave, for the tests.
#[derive(Default)]
struct Faults {
    /// `charge` fails (fatally) after its effect, once.
    fail_after_charge: AtomicBool,
    /// The charge closure panics (as a crash mid-call would leave it: started, no outcome).
    panic_in_charge: AtomicBool,
}

/// `quote` (a pure price lookup) → `charge` (a non-idempotent payment, emitting a receipt) → `notify`
/// (an idempotent mail) → END. `amount` is what `charge` asks for.
fn pay(calls: Arc<Calls>, faults: Arc<Faults>, amount: u64) -> Graph<Trace> {
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls);
    Graph::<Trace>::builder("pay")
        .node("quote", move |_s, ctx| {
            let c = c1.clone();
            Box::pin(async move {
                let price: u64 = ctx
                    .effect("prices.lookup", &"book")
                    .pure()
                    .run(|_key| async move {
                        c.price.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, NodeError>(12)
                    })
                    .await?;
                Ok((TraceDelta::default().count(price), Route::Declared))
            })
        })
        .node("charge", move |_s, ctx| {
            let (c, f, f2) = (c2.clone(), faults.clone(), faults.clone());
            Box::pin(async move {
                let receipt: String = ctx
                    .effect("payments.charge", &("alice", amount))
                    .run(|key| async move {
                        c.charge.fetch_add(1, Ordering::SeqCst);
                        if f.panic_in_charge.swap(false, Ordering::SeqCst) {
                            panic!("the process died during the call");
                        }
                        Ok::<_, NodeError>(format!("rcpt-{}", &key[..8]))
                    })
                    .await?;
                ctx.emit("receipts", &receipt)?;
                if f2.fail_after_charge.swap(false, Ordering::SeqCst) {
                    return Err(NodeError::fatal("the node failed after its effect"));
                }
                Ok((TraceDelta::default().last(receipt), Route::Declared))
            })
        })
        .node("notify", move |s, ctx| {
            let (c, to) = (c3.clone(), s.last.clone().unwrap_or_default());
            Box::pin(async move {
                let sent: String = ctx
                    .effect("mail.send", &to)
                    .idempotent()
                    .run(|key| async move {
                        c.mail.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, NodeError>(format!("sent:{key}"))
                    })
                    .await?;
                Ok((TraceDelta::default().log(sent), Route::Declared))
            })
        })
        .entry("quote")
        .edge("quote", "charge")
        .edge("charge", "notify")
        .edge("notify", END)
        .build()
        .unwrap()
}

fn setup(amount: u64) -> (Arc<Calls>, Arc<Faults>, Graph<Trace>) {
    let (calls, faults) = (Arc::new(Calls::default()), Arc::new(Faults::default()));
    let g = pay(calls.clone(), faults.clone(), amount);
    (calls, faults, g)
}

#[tokio::test]
async fn a_step_that_runs_again_gets_the_journaled_response_without_calling() {
    let (calls, faults, g) = setup(30);
    faults.fail_after_charge.store(true, Ordering::SeqCst);
    let engine = Engine::builder(g).build();
    assert!(matches!(engine.run("p", Trace::default()).await, Err(Error::NodeFailed { .. })));
    assert_eq!(calls.charge.load(Ordering::SeqCst), 1);
    let out = engine.resume("p").await.unwrap();
    assert!(out.is_completed());
    assert_eq!(calls.charge.load(Ordering::SeqCst), 1, "the charge was not made twice");
    assert_eq!(calls.price.load(Ordering::SeqCst), 1, "the step of `quote` was committed: not run again");
    assert!(out.state.last.as_deref().unwrap().starts_with("rcpt-"));
    let journal = engine.store().effects("p").await.unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["prices.lookup", "payments.charge", "mail.send"]);
    assert!(journal.iter().all(|e| matches!(e.state, graph_runtime::store::EffectState::Completed { .. })));
}

#[tokio::test]
async fn an_effect_a_crash_left_unknown_pauses_the_run_until_a_person_answers() {
    for (answer, charges, completes) in [
        (Resolution::Completed(serde_json::json!("rcpt-by-hand")), 1, true),
        (Resolution::Retry, 2, true),
        (Resolution::Fail("the card was declined".into()), 1, false),
    ] {
        let (calls, faults, g) = setup(30);
        faults.panic_in_charge.store(true, Ordering::SeqCst);
        let engine = Engine::builder(g).build();
        assert!(matches!(engine.run("p", Trace::default()).await, Err(Error::NodePanicked { .. })));
        // The call started and nobody knows if it reached the world: no guess.
        let paused = engine.resume("p").await.unwrap();
        let RunStatus::Paused(PauseReason::NeedsConfirmation { key, name }) = paused.status.clone() else {
            panic!("{:?}", paused.status)
        };
        assert_eq!(name, "payments.charge");
        assert_eq!(calls.charge.load(Ordering::SeqCst), 1);
        // Resuming without an answer pauses again, still without calling.
        assert!(matches!(engine.resume("p").await.unwrap().status, RunStatus::Paused(_)));
        engine.resolve_effect("p", &key, answer.clone()).await.unwrap();
        // Answered once: a second answer is refused and changes nothing.
        assert!(matches!(
            engine.resolve_effect("p", &key, Resolution::Retry).await,
            Err(Error::EffectNotPending { .. })
        ));
        let out = engine.resume("p").await;
        assert_eq!(calls.charge.load(Ordering::SeqCst), charges, "{answer:?}");
        match (out, completes) {
            (Ok(out), true) => {
                assert!(out.is_completed());
                if let Resolution::Completed(_) = answer {
                    assert_eq!(out.state.last.as_deref(), Some("rcpt-by-hand"));
                }
            }
            (Err(Error::NodeFailed { source, .. }), false) => {
                assert_eq!(source.to_string(), "the card was declined")
            }
            (other, _) => panic!("{answer:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_journaled_response_of_another_type_is_a_typed_error_naming_the_effect() {
    let (_, faults, g) = setup(30);
    faults.fail_after_charge.store(true, Ordering::SeqCst);
    let engine = Engine::builder(g).build();
    assert!(engine.run("t", Trace::default()).await.is_err());
    // The node's code changed: it now expects a number from the same call.
    let changed = Graph::<Trace>::builder("pay")
        .node("quote", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .node("charge", |_s, ctx| {
            Box::pin(async move {
                let n: u64 = ctx
                    .effect("payments.charge", &("alice", 30u64))
                    .run(|_| async { Ok::<_, NodeError>(1u64) })
                    .await?;
                Ok((TraceDelta::default().count(n), Route::Declared))
            })
        })
        .node("notify", |_s, _c| Box::pin(async { Ok((TraceDelta::default(), Route::Declared)) }))
        .entry("quote")
        .edge("quote", "charge")
        .edge("charge", "notify")
        .edge("notify", END)
        .build()
        .unwrap();
    let engine = Engine::builder(changed).shared_store(engine.store().clone()).build();
    let err = engine.resume("t").await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::NodeFailed { .. }), "{err:?}");
    assert!(msg.contains("payments.charge") && msg.contains("does not deserialize"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_rows_come_with_the_commit_and_are_redelivered_until_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (_, faults, g) = setup(30);
    faults.fail_after_charge.store(true, Ordering::SeqCst);
    let engine = Engine::builder(g).store(SledStore::open(dir.path()).unwrap()).build();
    assert!(engine.run("o", Trace::default()).await.is_err());
    // `charge` emitted, then failed: its step was not committed, so nothing was delivered.
    assert_eq!(engine.outbox(10).await.unwrap(), []);
    engine.resume("o").await.unwrap();
    let rows = engine.outbox(10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].topic, "receipts");
    assert_eq!(rows[0].step, 2, "written by the commit of step 2");
    // A crash between delivery and ack: the same row, same key, again.
    drop(engine);
    let (_, _, g) = setup(30);
    let engine = Engine::builder(g).store(SledStore::open(dir.path()).unwrap()).build();
    let again = engine.outbox(10).await.unwrap();
    assert_eq!(again, rows);
    assert_eq!(engine.ack_outbox(&[again[0].key.clone()]).await.unwrap(), 1);
    assert_eq!(engine.outbox(10).await.unwrap(), []);
}

#[tokio::test]
async fn replay_makes_no_call_and_matches_the_recording_byte_for_byte() {
    let (calls, _, g) = setup(30);
    let engine = Engine::builder(g).build();
    let original = engine.run("r", Trace::default()).await.unwrap();
    let made = |c: &Calls| {
        c.charge.load(Ordering::SeqCst) + c.mail.load(Ordering::SeqCst) + c.price.load(Ordering::SeqCst)
    };
    assert_eq!(made(&calls), 3);
    let replayed = engine.replay("r", ReplayMode::Strict).await.unwrap();
    assert_eq!(made(&calls), 3, "the replay called no effect");
    assert_eq!(serde_json::to_vec(&replayed.state).unwrap(), serde_json::to_vec(&original.state).unwrap());
    assert_eq!(replayed.steps, original.steps);
    assert!(replayed.divergences.is_empty());
    // The replay wrote nothing to the recorded run's store.
    assert_eq!(engine.store().history("r").await.unwrap().len() as u64, original.steps + 1);
}

#[tokio::test]
async fn a_node_that_sends_another_request_is_a_replay_mismatch_strict_or_a_report_lenient() {
    let (_, _, g) = setup(30);
    let engine = Engine::builder(g).build();
    engine.run("m", Trace::default()).await.unwrap();
    // The same graph, but `charge` now asks for 31: the recorded journal has 30.
    let (calls, _, changed) = setup(31);
    let replayer = Engine::builder(changed).shared_store(engine.store().clone()).build();
    let err = replayer.replay("m", ReplayMode::Strict).await.unwrap_err();
    let Error::ReplayMismatch { step, node, call, .. } = &err else { panic!("{err:?}") };
    assert_eq!((*step, node.as_str(), *call), (1, "charge", Some(0)), "{err}");
    let lenient = replayer.replay("m", ReplayMode::Lenient).await.unwrap();
    assert!(!lenient.divergences.is_empty());
    assert_eq!(lenient.divergences[0].node, "charge");
    assert_eq!(calls.charge.load(Ordering::SeqCst), 0, "replays never call");
}
