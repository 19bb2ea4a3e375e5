//! The replay check against new code, and patch markers: stored runs of a `pricing` graph recorded
//! by one build are replayed by builds whose `charge` node computes its fee otherwise. A change made
//! without a marker is found (the first step that differs, per run); an unchanged build and a change
//! behind `ctx.patched` pass; a run of a version the build does not serve is reported as such.

use std::sync::Arc;

use graph_runtime::store::RunFilter;
use graph_runtime::{END, Engine, Graph, MemoryStore, NodeError, ReplayVerdict, Route, RunStatus, Store};
use graph_tests::{Trace, TraceDelta};

/// How a build's `charge` node computes its fee.
#[derive(Clone, Copy)]
enum Fee {
    /// The recorded code: 10.
    Ten,
    /// A change without a marker: 11.
    Eleven,
    /// The change behind `ctx.patched("fee-11")`.
    Patched,
}

/// `charge → confirm → END`: `charge` journals a quote (an effect), asks for confirmation, and logs the
/// fee; `confirm` logs the end.
fn pricing(fee: Fee) -> Graph<Trace> {
    Graph::<Trace>::builder("pricing")
        .node("charge", move |_s, ctx| {
            Box::pin(async move {
                let fee = match fee {
                    Fee::Ten => 10,
                    Fee::Eleven => 11,
                    Fee::Patched => {
                        if ctx.patched("fee-11").await? {
                            11
                        } else {
                            10
                        }
                    }
                };
                let quote: u64 =
                    ctx.effect("quote", &fee).pure().run(|_| async move { Ok::<_, NodeError>(fee) }).await?;
                let ok: bool = ctx.interrupt(&"confirm the charge?")?;
                Ok((
                    TraceDelta::default().count(quote).log(format!("charged {quote} ok={ok}")),
                    Route::Goto(0),
                ))
            })
        })
        .node("confirm", |_s, _ctx| {
            Box::pin(async move { Ok((TraceDelta::default().log("confirmed"), Route::Goto(0))) })
        })
        .entry("charge")
        .edge("charge", "confirm")
        .edge("confirm", END)
        .build()
        .unwrap()
}

/// A graph `name` of one node that does nothing, at `version`.
fn one_node(name: &str, version: u32) -> Graph<Trace> {
    Graph::<Trace>::builder(name)
        .version(version)
        .node("charge", |_s, _ctx| Box::pin(async move { Ok((TraceDelta::default(), Route::Goto(0))) }))
        .entry("charge")
        .edge("charge", END)
        .build()
        .unwrap()
}

fn engine(store: &Arc<dyn Store>, fee: Fee) -> Engine<Trace> {
    Engine::builder(pricing(fee)).shared_store(store.clone()).build()
}

/// Three completed runs and one waiting for its confirmation, recorded by the build charging 10.
async fn recorded() -> Arc<dyn Store> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let old = engine(&store, Fee::Ten);
    for run in ["a", "b", "c", "parked"] {
        old.run(run, Trace::default()).await.unwrap();
    }
    for run in ["a", "b", "c"] {
        assert!(old.resume_with_input(run, &true).await.unwrap().is_completed());
    }
    store
}

#[tokio::test]
async fn the_replay_check_passes_an_unchanged_build_and_finds_a_change_without_a_marker() {
    let store = recorded().await;
    assert_eq!(pricing(Fee::Ten).fingerprint(), pricing(Fee::Eleven).fingerprint(), "same structure");
    let same = engine(&store, Fee::Ten).check_replays(&RunFilter::all()).await.unwrap();
    assert_eq!(same.len(), 4);
    for check in &same {
        assert!(matches!(check.verdict, ReplayVerdict::Same { .. }), "{check:?}");
        assert_eq!(check.version, 1);
    }
    let changed = engine(&store, Fee::Eleven).check_replays(&RunFilter::all()).await.unwrap();
    for check in &changed {
        match &check.verdict {
            // The quote's request (the fee) is the first thing that differs, in step 0's `charge`.
            ReplayVerdict::Diverged(d) => {
                assert_eq!((d.step, d.node.as_str(), d.call), (0, "charge", Some(0)), "{check:?}");
            }
            other => panic!("{}: expected a divergence, got {other:?}", check.run_id),
        }
    }
    // Nothing was written by either check.
    assert_eq!(store.run_info("parked").await.unwrap().unwrap().version, 2);
}

#[tokio::test]
async fn a_change_behind_a_patch_marker_keeps_recorded_runs_and_takes_new_ones() {
    let store = recorded().await;
    let patched = engine(&store, Fee::Patched);
    // Recorded runs replay as they ran: the marker is not in their history.
    for check in patched.check_replays(&RunFilter::all()).await.unwrap() {
        assert!(matches!(check.verdict, ReplayVerdict::Same { .. }), "{check:?}");
    }
    // A run parked inside `charge` (its quote journaled, its question asked) by the old build keeps
    // the old fee when the new build answers it: the node had run past the marker.
    let out = patched.resume_with_input("parked", &true).await.unwrap();
    assert!(out.is_completed(), "{:?}", out.status);
    assert_eq!(out.state.log, vec!["charged 10 ok=true".to_owned(), "confirmed".to_owned()]);
    // A new run takes the change, and replays with it (the marker is journaled with its step).
    patched.run("new", Trace::default()).await.unwrap();
    let out = patched.resume_with_input("new", &true).await.unwrap();
    assert_eq!(out.state.log, vec!["charged 11 ok=true".to_owned(), "confirmed".to_owned()]);
    let check = patched.check_replay("new").await.unwrap();
    assert!(matches!(check.verdict, ReplayVerdict::Same { steps: 2 }), "{check:?}");
    // The build without the marker's new branch finds the new run changed.
    let check = engine(&store, Fee::Ten).check_replay("new").await.unwrap();
    assert!(matches!(check.verdict, ReplayVerdict::Diverged(_)), "{check:?}");
}

#[tokio::test]
async fn the_replay_check_reports_runs_of_versions_the_build_does_not_serve() {
    let store = recorded().await;
    let next = one_node("pricing", 2);
    let v1 = pricing(Fee::Ten).fingerprint().to_owned();
    let only_v2 = Engine::builder(next.clone()).shared_store(store.clone()).build();
    let check = only_v2.check_replay("a").await.unwrap();
    assert_eq!(check.verdict, ReplayVerdict::NotServed { version: 1, fingerprint: v1 });
    // Served beside it, version 1's runs are checked on version 1.
    let both = Engine::builder(next).serves(pricing(Fee::Ten)).shared_store(store.clone()).build();
    let check = both.check_replay("a").await.unwrap();
    assert!(matches!(check.verdict, ReplayVerdict::Same { steps: 2 }), "{check:?}");
    assert!(matches!(store.run_info("parked").await.unwrap().unwrap().status, RunStatus::Interrupted(_)));
}

#[test]
#[should_panic(expected = "is not older than the engine's own")]
fn serving_a_version_not_older_than_the_engines_own_is_refused() {
    let next = one_node("pricing", 2);
    let _ = Engine::builder(pricing(Fee::Ten)).serves(next);
}

#[test]
#[should_panic(expected = "is another graph than `pricing`")]
fn serving_another_graph_is_refused() {
    let other = one_node("billing", 1);
    let next = one_node("pricing", 3);
    let _ = Engine::builder(next).serves(other);
}
