//! Human approval: an expense waits for a person, durably, and goes on when they answer, from another
//! process, maybe days later.
//!
//! `submit` → `approve` → `book` | `decline` → END. `approve` calls `ctx.interrupt(&question)?`: the run
//! stops with status `Interrupted`, the question is stored with it, and the process may exit.
//! Whoever answers calls `engine.resume_with_input(run, &bool)` on the same store: `approve` runs again
//! from its start, its `interrupt` call returns the answer, and the run goes on to `book` or `decline`.

use std::path::{Path, PathBuf};

use graph_runtime::prelude::*;

/// The folder under the system's temp dir where the approval runs are stored, shared by every
/// invocation of the example.
pub const STORE_DIR: &str = "graph-runtime-approval";

/// An expense request, as its run's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Expense {
    /// Who asks.
    pub requester: String,
    /// What for.
    pub purpose: String,
    /// How much, in cents.
    pub amount_cents: u64,
    /// The approver's answer, once given (overwrite).
    pub approved: Option<bool>,
    /// The booking reference, once booked (overwrite).
    pub booking: Option<String>,
    /// What happened (append).
    #[reduce(append)]
    pub log: Vec<String>,
}

impl Expense {
    /// The question the approver is asked.
    pub fn question(&self) -> String {
        format!(
            "approve {} EUR for \"{}\", requested by {}?",
            crate::payments::money(self.amount_cents),
            self.purpose,
            self.requester
        )
    }
}

/// The approval graph: `approval_flow::graph()`.
#[graph(state = Expense, name = "approval")]
pub mod approval_flow {
    use super::*;

    /// Records the request.
    #[node(entry, to = approve)]
    async fn submit(s: &Expense, _ctx: &mut Ctx) -> NodeResult<Expense> {
        Ok(ExpenseDelta::default().log(vec![format!("{} submitted: {}", s.requester, s.purpose)]))
    }

    /// Asks a person. The first time, the run stops here; when the answer comes, this node runs again
    /// and `interrupt` returns it.
    #[node(to = [book, decline])]
    async fn approve(s: &Expense, ctx: &mut Ctx) -> NodeResult<Expense, approve::Next> {
        let yes: bool = ctx.interrupt(&s.question())?;
        let delta = ExpenseDelta::default()
            .approved(Some(yes))
            .log(vec![format!("approver said {}", if yes { "yes" } else { "no" })]);
        Ok((delta, if yes { approve::Next::Book } else { approve::Next::Decline }))
    }

    /// Books the expense; the reference is drawn from the run's deterministic stream.
    #[node(to = END)]
    async fn book(_s: &Expense, ctx: &mut Ctx) -> NodeResult<Expense> {
        let booking = format!("EXP-{:06}", ctx.random_range(0..1_000_000u32));
        Ok(ExpenseDelta::default().log(vec![format!("booked as {booking}")]).booking(Some(booking)))
    }

    /// Tells the requester.
    #[node(to = END)]
    async fn decline(s: &Expense, _ctx: &mut Ctx) -> NodeResult<Expense> {
        Ok(ExpenseDelta::default().log(vec![format!("declined; {} is told", s.requester)]))
    }
}

/// The store folder the example uses: `<temp dir>/graph-runtime-approval`.
pub fn default_store() -> PathBuf {
    std::env::temp_dir().join(STORE_DIR)
}

/// Opens the approval engine on the sled store at `dir`.
///
/// # Errors
///
/// The store cannot be opened (another process has it open, say).
pub fn open(dir: &Path) -> Result<Engine<Expense>, graph_runtime::Error> {
    Ok(Engine::builder(approval_flow::graph()).store(SledStore::open(dir)?).build())
}

/// The request the example files.
pub fn sample_request() -> Expense {
    Expense {
        requester: "dana".to_owned(),
        purpose: "team offsite in Lisbon".to_owned(),
        amount_cents: 125_000,
        ..Expense::default()
    }
}

/// A run that waits for its approver.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// The run id: what the answer names.
    pub run_id: String,
    /// The question, as the node asked it.
    pub question: String,
    /// The interrupt's id (`"{path}#{index}"`), for `resume_with_inputs`.
    pub interrupt_id: String,
    /// The node that asked.
    pub node: String,
}

/// Starts a run for `request` under the first free id `expense-1`, `expense-2`, … and returns the
/// question it stops at.
///
/// # Errors
///
/// The store, or a run that did not stop for input.
pub async fn start(
    engine: &Engine<Expense>,
    request: Expense,
) -> Result<Waiting, Box<dyn std::error::Error>> {
    let mut n = 1;
    while engine.outcome(&format!("expense-{n}")).await?.is_some() {
        n += 1;
    }
    let run_id = format!("expense-{n}");
    let out = engine.run(&run_id, request).await?;
    let [asked] = out.interrupts() else {
        return Err(format!("run {run_id} did not stop for one question: {:?}", out.status).into());
    };
    Ok(Waiting {
        run_id,
        question: asked.payload.as_str().unwrap_or_default().to_owned(),
        interrupt_id: asked.id.clone(),
        node: asked.node.clone(),
    })
}

/// Answers the question `run_id` waits for and runs it to its end.
///
/// # Errors
///
/// No such run, a run that waits for no answer (already decided), or the store.
pub async fn decide(
    engine: &Engine<Expense>,
    run_id: &str,
    approve: bool,
) -> Result<RunOutcome<Expense>, graph_runtime::Error> {
    engine.resume_with_input(run_id, &approve).await
}
