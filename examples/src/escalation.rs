//! An approval that lives in time: a manager has 72 hours to answer; when nobody does, the request is
//! escalated to a director. Once approved, the payout waits a day (a durable sleep) before it is made,
//! and the run then waits for the bank's confirmation, an external event, for up to two days.
//!
//! `submit` → `manager` → `book` | `decline` | `escalate` → `director` → `book` | `decline`;
//! `book` → `payout` → `confirm` → END. `manager` asks with `ctx.interrupt_with_deadline(.., 72 h)`: the run stops
//! `Interrupted` with the deadline stored beside the question. An answer in time continues it
//! (`resume_with_input`); at the deadline the engine's timer service ([`Engine::run_timers`], or
//! [`Engine::wake_due`]) wakes it and `manager` gets [`Answer::TimedOut`]. `payout` calls
//! `ctx.sleep(24 h)`: the run parks `Waiting`, holding no task, and is woken a day later, in this
//! process or another. `confirm` calls `ctx.wait_event_with_timeout("bank.confirmed", 48 h)`: the
//! bank's webhook handler calls `engine.send_event(run, "bank.confirmed", &reference)` (or
//! `graphctl send-event`), and whoever wakes due runs delivers it.
//!
//! The tests run it under a [`graph_runtime::TestClock`]: three days pass in a millisecond.

use std::time::Duration;

use graph_runtime::prelude::*;

/// How long the manager has.
pub const MANAGER_DEADLINE: Duration = Duration::from_secs(72 * 3600);
/// How long a booked expense waits before it is paid out.
pub const PAYOUT_DELAY: Duration = Duration::from_secs(24 * 3600);
/// How long the run waits for the bank's confirmation of the payout.
pub const CONFIRMATION_TIMEOUT: Duration = Duration::from_secs(48 * 3600);
/// The topic of the bank's confirmation.
pub const CONFIRMED: &str = "bank.confirmed";

/// An expense request, as its run's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Who asks.
    pub requester: String,
    /// How much, in cents.
    pub amount_cents: u64,
    /// Who decided (overwrite).
    pub decided_by: Option<String>,
    /// When the payout was made, ms since the Unix epoch (overwrite).
    pub paid_at_ms: Option<u64>,
    /// The bank's reference for the payout, once confirmed (overwrite).
    pub bank_reference: Option<String>,
    /// What happened (append).
    #[reduce(append)]
    pub log: Vec<String>,
}

/// The graph: `escalation_flow::graph()`.
#[graph(state = Request, name = "escalation")]
pub mod escalation_flow {
    use super::*;

    /// Records the request.
    #[node(entry, to = manager)]
    async fn submit(s: &Request, _ctx: &mut Ctx) -> NodeResult<Request> {
        Ok(RequestDelta::default().log(vec![format!("{} asks for {} cents", s.requester, s.amount_cents)]))
    }

    /// Asks the manager, who has 72 hours.
    #[node(to = [book, decline, escalate])]
    async fn manager(s: &Request, ctx: &mut Ctx) -> NodeResult<Request, manager::Next> {
        let question = format!("approve {} cents for {}?", s.amount_cents, s.requester);
        Ok(match ctx.interrupt_with_deadline::<bool>(&question, MANAGER_DEADLINE)? {
            Answer::Given(yes) => {
                let delta = RequestDelta::default()
                    .decided_by(Some("manager".into()))
                    .log(vec![format!("manager said {}", if yes { "yes" } else { "no" })]);
                (delta, if yes { manager::Next::Book } else { manager::Next::Decline })
            }
            Answer::TimedOut { .. } => (
                RequestDelta::default().log(vec!["manager did not answer in 72 h".into()]),
                manager::Next::Escalate,
            ),
        })
    }

    /// Hands the request to the director.
    #[node(to = director)]
    async fn escalate(_s: &Request, _ctx: &mut Ctx) -> NodeResult<Request> {
        Ok(RequestDelta::default().log(vec!["escalated to the director".into()]))
    }

    /// Asks the director (no deadline).
    #[node(to = [book, decline])]
    async fn director(s: &Request, ctx: &mut Ctx) -> NodeResult<Request, director::Next> {
        let yes: bool =
            ctx.interrupt(&format!("escalated: approve {} cents for {}?", s.amount_cents, s.requester))?;
        let delta = RequestDelta::default()
            .decided_by(Some("director".into()))
            .log(vec![format!("director said {}", if yes { "yes" } else { "no" })]);
        Ok((delta, if yes { director::Next::Book } else { director::Next::Decline }))
    }

    /// Books the expense.
    #[node(to = payout)]
    async fn book(_s: &Request, _ctx: &mut Ctx) -> NodeResult<Request> {
        Ok(RequestDelta::default().log(vec!["booked".into()]))
    }

    /// Waits a day, durably, then pays out.
    #[node(to = confirm)]
    async fn payout(_s: &Request, ctx: &mut Ctx) -> NodeResult<Request> {
        let woke = ctx.sleep(PAYOUT_DELAY)?;
        let at = woke.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Ok(RequestDelta::default().paid_at_ms(Some(at)).log(vec!["paid out".into()]))
    }

    /// Waits up to two days for the bank to confirm the payout.
    #[node(to = END)]
    async fn confirm(_s: &Request, ctx: &mut Ctx) -> NodeResult<Request> {
        Ok(match ctx.wait_event_with_timeout::<String>(CONFIRMED, CONFIRMATION_TIMEOUT)? {
            Answer::Given(reference) => RequestDelta::default()
                .log(vec![format!("the bank confirmed: {reference}")])
                .bank_reference(Some(reference)),
            Answer::TimedOut { .. } => {
                RequestDelta::default().log(vec!["no confirmation in 48 h: chase the bank".into()])
            }
        })
    }

    /// Tells the requester.
    #[node(to = END)]
    async fn decline(s: &Request, _ctx: &mut Ctx) -> NodeResult<Request> {
        Ok(RequestDelta::default().log(vec![format!("declined; {} is told", s.requester)]))
    }
}

/// The request the example files.
pub fn sample_request() -> Request {
    Request { requester: "dana".into(), amount_cents: 125_000, ..Request::default() }
}
