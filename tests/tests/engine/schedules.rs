//! Schedules on an embedded store under a test clock: firings by the timer service, one run each with
//! an id of the schedule and the time; pause, resume and delete; the three policies for firings missed
//! while no process ran; a bad spec.

use std::time::Duration;

use graph_runtime::engine::fired_run_id;
use graph_runtime::prelude::*;
use graph_runtime::store::schedule::Missed;
use graph_runtime::{Error, TestClock};

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Report {
    pub(crate) title: String,
    pub(crate) made_at_ms: Option<u64>,
}

#[graph(state = Report, name = "nightly_report")]
mod report {
    use super::*;

    #[node(entry, to = END)]
    async fn make(_s: &Report, ctx: &mut Ctx) -> NodeResult<Report> {
        let at = ctx.now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        Ok(ReportDelta::default().made_at_ms(Some(at)))
    }
}

/// 2026-12-01T00:00:00Z.
const MIDNIGHT: u64 = 1_796_083_200_000;
const HOUR: u64 = 3_600_000;

fn input() -> Report {
    Report { title: "sales".into(), made_at_ms: None }
}

async fn completed_runs(engine: &Engine<Report>) -> Vec<String> {
    let runs = engine.store().list_runs(&graph_runtime::store::RunFilter::all()).await.unwrap();
    runs.into_iter().filter(|r| r.status == RunStatus::Completed).map(|r| r.run_id).collect()
}

/// Moves the clock and lets the timer service catch up until `n` runs have completed.
async fn until_completed(engine: &Engine<Report>, n: usize) -> Vec<String> {
    for _ in 0..2000 {
        let done = completed_runs(engine).await;
        if done.len() >= n {
            return done;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} runs completed, not {n}", completed_runs(engine).await.len())
}

#[tokio::test]
async fn the_timer_service_fires_each_time_once_and_pauses_resumes_and_deletes() {
    let clock = TestClock::at_ms(MIDNIGHT + 30 * 60_000);
    let engine = Engine::builder(report::graph()).clock(clock.clone()).build();
    let s = engine.schedule("hourly", "@hourly", &input()).await.unwrap();
    assert_eq!((s.next_fire_ms, s.version, s.paused), (MIDNIGHT + HOUR, 1, false));
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    for hour in 1..=3 {
        clock.set_ms(MIDNIGHT + hour * HOUR);
        until_completed(&engine, hour as usize).await;
    }
    let expected: Vec<String> = (1..=3).map(|h| fired_run_id("hourly", MIDNIGHT + h * HOUR)).collect();
    assert_eq!(completed_runs(&engine).await, expected);
    assert_eq!(expected[0], "hourly@2026-12-01T01:00:00Z");
    let first = engine.outcome(&expected[0]).await.unwrap().unwrap();
    assert_eq!(first.state.title, "sales");
    assert_eq!(first.state.made_at_ms, Some(MIDNIGHT + HOUR), "a fired run's time is the firing's");

    // Paused through 03:30–05:30: nothing fires; resumed, the next firing is 06:00.
    clock.set_ms(MIDNIGHT + 3 * HOUR + HOUR / 2);
    assert!(engine.pause_schedule("hourly").await.unwrap().paused);
    clock.set_ms(MIDNIGHT + 5 * HOUR + HOUR / 2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(completed_runs(&engine).await.len(), 3);
    assert_eq!(engine.resume_schedule("hourly").await.unwrap().next_fire_ms, MIDNIGHT + 6 * HOUR);
    clock.set_ms(MIDNIGHT + 6 * HOUR);
    let done = until_completed(&engine, 4).await;
    assert_eq!(done.last().unwrap(), &fired_run_id("hourly", MIDNIGHT + 6 * HOUR));

    assert!(engine.delete_schedule("hourly").await.unwrap());
    assert!(!engine.delete_schedule("hourly").await.unwrap());
    clock.set_ms(MIDNIGHT + 9 * HOUR);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(completed_runs(&engine).await.len(), 4);
    shutdown.cancel();
    service.await.unwrap().unwrap();
}

#[tokio::test]
async fn firings_missed_while_no_process_ran_are_skipped_or_caught_up_as_the_schedule_says() {
    for (missed, fired) in [(Missed::Skip, 0), (Missed::CatchUpOne, 1), (Missed::CatchUpAll, 5)] {
        let clock = TestClock::at_ms(MIDNIGHT);
        let engine = Engine::builder(report::graph()).clock(clock.clone()).build();
        engine.schedule_with("s", "0 * * * *", &input(), missed).await.unwrap();
        // Five hours without a process, then a check ten minutes past the fifth firing.
        clock.set_ms(MIDNIGHT + 5 * HOUR + 10 * 60_000);
        let started = engine.fire_schedules().await.unwrap();
        assert_eq!(started.len(), fired, "{missed:?}: {started:?}");
        if missed == Missed::CatchUpOne {
            assert_eq!(started, [fired_run_id("s", MIDNIGHT + 5 * HOUR)], "the latest one");
        }
        // Fired again at the same time: nothing more, and the next firing is 06:00.
        assert!(engine.fire_schedules().await.unwrap().is_empty());
        assert_eq!(engine.schedules().await.unwrap()[0].next_fire_ms, MIDNIGHT + 6 * HOUR);
    }
    // A firing at most a minute late is made under `Skip`.
    let clock = TestClock::at_ms(MIDNIGHT);
    let engine = Engine::builder(report::graph()).clock(clock.clone()).build();
    engine.schedule("s", "0 * * * *", &input()).await.unwrap();
    clock.set_ms(MIDNIGHT + HOUR + 59_000);
    assert_eq!(engine.fire_schedules().await.unwrap(), [fired_run_id("s", MIDNIGHT + HOUR)]);
}

#[tokio::test]
async fn a_bad_spec_or_name_is_refused_and_nothing_is_written() {
    let engine = Engine::builder(report::graph()).build();
    let refused = engine.schedule("nightly", "0 25 * * *", &input()).await;
    let Err(Error::InvalidSchedule { name, detail }) = refused else { panic!("{refused:?}") };
    assert_eq!(name, "nightly");
    assert!(detail.contains("the hour field's 25 is outside 0-23"), "{detail}");
    assert!(matches!(engine.schedule(" ", "@daily", &input()).await, Err(Error::InvalidSchedule { .. })));
    assert!(matches!(engine.pause_schedule("nightly").await, Err(Error::InvalidSchedule { .. })));
    assert!(engine.schedules().await.unwrap().is_empty());
}
