//! Payments: charge a card exactly once, even when the process is killed mid-run.
//!
//! One durable run per order, on a sled store: `check` → `charge` → `ship` → END. `charge` calls a
//! payment provider that is **not** idempotent (every call it receives is a real charge: a line in its
//! ledger file) through `ctx.effect("card.charge", &request).run(|key| ..)`. The engine journals the
//! call's response under its effect key as soon as the call returns, before the step commits, so a step
//! that runs again after a crash gets the response back instead of charging again.
//!
//! [`demo`] proves it with real processes: a first process is told to abort ([`CRASH_ENV`]) right after
//! one order's charge returned, before its step committed; a second process resumes every order; the
//! provider's ledger then holds exactly one charge per order. With [`Crash::InsideCharge`] the abort
//! lands inside the call, after the provider charged but before the engine journaled the response:
//! nobody can tell from the store whether the card was charged, so that run pauses with
//! `PauseReason::NeedsConfirmation`, and [`demo`] answers as a person would, by looking the effect key
//! up in the provider's records (`Engine::resolve_effect`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use graph_runtime::prelude::*;
use graph_runtime::store::EffectState;

/// The environment variable that tells a process to abort at a point of one order's charge:
/// `after-charge:<order>` or `inside-charge:<order>` (see [`Crash`]). A fault injection for the demo.
pub const CRASH_ENV: &str = "GRAPH_EXAMPLES_PAYMENTS_CRASH";

/// An order, as its run's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// The order id (also its run id).
    pub id: String,
    /// Who pays.
    pub customer: String,
    /// How much, in cents.
    pub amount_cents: u64,
    /// Where the payment provider is: the path of its ledger file, standing in for its API's address.
    pub provider: String,
    /// The provider's receipt, once charged (overwrite).
    pub receipt: Option<String>,
    /// What happened, step by step (append).
    #[reduce(append)]
    pub log: Vec<String>,
}

/// What `charge` sends the provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeRequest {
    /// The order.
    pub order: String,
    /// Who pays.
    pub customer: String,
    /// How much, in cents.
    pub amount_cents: u64,
}

/// What the provider answers: its receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// The receipt id.
    pub id: String,
    /// The order charged.
    pub order: String,
    /// How much, in cents.
    pub amount_cents: u64,
}

/// A stand-in payment provider: a ledger file with one line per charge it received. It does not
/// deduplicate: call it twice and the card is charged twice. It keeps the caller's idempotency key (the
/// effect key) beside each charge, as a real provider's dashboard shows it.
pub mod provider {
    use super::{ChargeRequest, Receipt};
    use std::io::Write;
    use std::path::Path;

    /// One charge in the provider's ledger.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Charge {
        /// The idempotency key the caller sent.
        pub key: String,
        /// The receipt the provider gave.
        pub receipt: Receipt,
    }

    /// Charges the card: appends one line to the ledger (one `write`, so a kill cannot tear it) and
    /// returns the receipt.
    ///
    /// # Errors
    ///
    /// The ledger cannot be written.
    pub fn charge(ledger: &Path, key: &str, request: &ChargeRequest) -> std::io::Result<Receipt> {
        let receipt = Receipt {
            id: format!("rcpt-{}", &key[..8.min(key.len())]),
            order: request.order.clone(),
            amount_cents: request.amount_cents,
        };
        let line = format!("{} {} {} {}\n", key, receipt.id, receipt.order, receipt.amount_cents);
        std::fs::OpenOptions::new().create(true).append(true).open(ledger)?.write_all(line.as_bytes())?;
        Ok(receipt)
    }

    /// Every charge in the ledger, oldest first (none when there is no ledger yet).
    pub fn charges(ledger: &Path) -> Vec<Charge> {
        let text = std::fs::read_to_string(ledger).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let mut parts = line.split(' ');
                let (key, id, order, cents) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
                let receipt =
                    Receipt { id: id.to_owned(), order: order.to_owned(), amount_cents: cents.parse().ok()? };
                Some(Charge { key: key.to_owned(), receipt })
            })
            .collect()
    }
}

/// Where [`CRASH_ENV`] makes a process abort, in the charge of one order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Crash {
    /// After the charge call returned (its response is journaled), before the step commits.
    AfterCharge(String),
    /// Inside the call, after the provider charged, before the response is journaled.
    InsideCharge(String),
}

impl Crash {
    /// The value of [`CRASH_ENV`] that asks for this crash.
    pub fn env_value(&self) -> String {
        match self {
            Crash::AfterCharge(order) => format!("after-charge:{order}"),
            Crash::InsideCharge(order) => format!("inside-charge:{order}"),
        }
    }

    /// The order whose charge it interrupts.
    pub fn order(&self) -> &str {
        match self {
            Crash::AfterCharge(order) | Crash::InsideCharge(order) => order,
        }
    }
}

/// Aborts the process if [`CRASH_ENV`] asks for `point` in `order`'s charge: the demo's simulated kill.
/// It reads the environment, which a node must not do (a resumed run may not share it), so it lives
/// outside the graph module, as any fault injection would.
fn crash_if_asked(point: &str, order: &str) {
    if std::env::var(CRASH_ENV).is_ok_and(|v| v == format!("{point}:{order}")) {
        println!("  {order}: simulated crash ({point}): aborting the process now");
        std::process::abort();
    }
}

/// The checkout graph: `checkout::graph()`.
#[graph(state = Order, name = "checkout")]
pub mod checkout {
    use super::*;

    /// Refuses an empty order.
    #[node(entry, to = charge)]
    async fn check(s: &Order, _ctx: &mut Ctx) -> NodeResult<Order> {
        if s.amount_cents == 0 {
            return Err(NodeError::fatal(format!("order {} has nothing to charge", s.id)));
        }
        Ok(OrderDelta::default().log(vec![format!("checked {}", money(s.amount_cents))]))
    }

    /// Charges the card through the journal, then hands the receipt to the outbox.
    #[node(to = ship)]
    async fn charge(s: &Order, ctx: &mut Ctx) -> NodeResult<Order> {
        let request =
            ChargeRequest { order: s.id.clone(), customer: s.customer.clone(), amount_cents: s.amount_cents };
        let (ledger, sent) = (PathBuf::from(&s.provider), request.clone());
        let receipt: Receipt = ctx
            .effect("card.charge", &request) // non-idempotent: the default
            .run(|key| async move {
                // `key` is the same every time this call site runs: a real provider would get it as
                // its `Idempotency-Key` header. This one ignores it: it charges every call.
                let receipt = provider::charge(&ledger, &key, &sent);
                crash_if_asked("inside-charge", &sent.order);
                receipt
            })
            .await?;
        // The response is journaled now: a crash from here on does not charge again.
        crash_if_asked("after-charge", &s.id);
        ctx.emit("receipts", &receipt)?; // written with this step's commit
        Ok(OrderDelta::default()
            .receipt(Some(receipt.id.clone()))
            .log(vec![format!("charged: {}", receipt.id)]))
    }

    /// Books the shipment (an outbox message, delivered after the commit).
    #[node(to = END)]
    async fn ship(s: &Order, ctx: &mut Ctx) -> NodeResult<Order> {
        ctx.emit("shipments", &format!("ship {} to {}", s.id, s.customer))?;
        Ok(OrderDelta::default().log(vec!["shipment booked".to_owned()]))
    }
}

/// `1250` → `12.50`.
pub fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// The store and the provider's ledger of a demo in `dir`.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The sled store.
    pub store: PathBuf,
    /// The provider's ledger file.
    pub ledger: PathBuf,
}

impl Paths {
    /// The paths under `dir`.
    pub fn new(dir: &Path) -> Self {
        Paths { store: dir.join("store"), ledger: dir.join("provider-ledger.txt") }
    }
}

/// The demo's three orders, charged through the provider at `ledger`.
pub fn sample_orders(ledger: &Path) -> Vec<Order> {
    let order = |id: &str, customer: &str, amount_cents: u64| Order {
        id: id.to_owned(),
        customer: customer.to_owned(),
        amount_cents,
        provider: ledger.display().to_string(),
        ..Order::default()
    };
    vec![order("order-1", "alice", 3000), order("order-2", "bob", 1250), order("order-3", "carol", 9999)]
}

/// Opens the checkout engine on the sled store at `store`.
///
/// # Errors
///
/// The store cannot be opened (another process has it open, say).
pub fn open(store: &Path) -> Result<Engine<Order>, graph_runtime::Error> {
    Ok(Engine::builder(checkout::graph()).store(SledStore::open(store)?).build())
}

/// What one process does: starts or resumes the run of every order (`run_or_resume`), reporting each
/// to `out`. A run that waits for confirmation stays paused.
///
/// # Errors
///
/// The store, or a run that failed.
pub async fn process(dir: &Path, out: &mut dyn Write) -> Result<(), Box<dyn std::error::Error>> {
    let paths = Paths::new(dir);
    let engine = open(&paths.store)?;
    for order in sample_orders(&paths.ledger) {
        let id = order.id.clone();
        let before = match engine.outcome(&id).await? {
            None => "started".to_owned(),
            Some(o) if o.is_completed() => "already completed, nothing to run".to_owned(),
            Some(o) => format!("resumed from checkpoint {}", o.steps),
        };
        let done = engine.run_or_resume(&id, order).await?;
        let now = match &done.status {
            RunStatus::Completed => {
                format!("completed, receipt {}", done.state.receipt.as_deref().unwrap_or("-"))
            }
            RunStatus::Paused(PauseReason::NeedsConfirmation { name, key }) => {
                format!("paused: `{name}` (key {key}) needs confirmation")
            }
            other => format!("{other:?}"),
        };
        writeln!(out, "  {id}: {before} -> {now}")?;
    }
    Ok(())
}

/// What [`demo`] saw.
#[derive(Debug)]
pub struct Report {
    /// How the first process ended.
    pub crashed: ExitStatus,
    /// Processes run after the crash until every order completed.
    pub resumes: usize,
    /// Confirmations a person was asked for.
    pub confirmations: usize,
    /// Charges in the provider's ledger, per order.
    pub charges: BTreeMap<String, usize>,
    /// The outbox rows delivered at the end: (topic, payload).
    pub outbox: Vec<(String, serde_json::Value)>,
    /// Every order's final state.
    pub orders: Vec<Order>,
}

/// The whole story in `dir` (emptied first): a process that crashes at `crash`, then processes that
/// resume until every order completes, answering any confirmation from the provider's ledger. `spawn`
/// runs one process of [`process`] on `dir`, with [`CRASH_ENV`] set to the given value if any, and
/// returns how it ended. The narration goes to `out`.
///
/// # Errors
///
/// A process that could not start or failed, a store error, or a card charged other than once.
pub async fn demo(
    dir: &Path,
    crash: &Crash,
    spawn: &mut dyn FnMut(Option<String>) -> std::io::Result<ExitStatus>,
    out: &mut dyn Write,
) -> Result<Report, Box<dyn std::error::Error>> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let paths = Paths::new(dir);
    let orders = sample_orders(&paths.ledger);
    writeln!(out, "{} orders, one durable run each: check -> charge -> ship", orders.len())?;
    writeln!(out, "store:           {}", paths.store.display())?;
    writeln!(out, "provider ledger: {}", paths.ledger.display())?;
    writeln!(out)?;

    let point = match crash {
        Crash::AfterCharge(_) => "right after the charge call returns, before the step commits",
        Crash::InsideCharge(_) => "inside the charge call, after the provider charged, before the journal",
    };
    writeln!(out, "process 1, told to crash in {}'s charge, {point}:", crash.order())?;
    out.flush()?;
    let crashed = spawn(Some(crash.env_value()))?;
    if crashed.success() {
        return Err("process 1 was told to crash, and it did not".into());
    }
    writeln!(out, "process 1 died ({crashed})")?;
    print_ledger(&paths.ledger, "the provider's ledger after the crash", out)?;
    print_store(&paths.store, &orders, out).await?;
    writeln!(out)?;
    match crash {
        Crash::AfterCharge(order) => writeln!(
            out,
            "The card was charged and the engine journaled the provider's response, but {order}'s step never\n\
             committed: its run still stands at checkpoint 1, before `charge`. The next process runs `charge`\n\
             again; its effect call finds the response journaled under its key and returns it without\n\
             calling the provider.\n\
             (Had the kill landed inside the call, before the response was journaled, nobody could tell\n\
             whether the card was charged: the run would pause with NeedsConfirmation and wait for a\n\
             person. Try `-- --crash inside-charge`.)"
        )?,
        Crash::InsideCharge(order) => writeln!(
            out,
            "{order}'s charge was journaled as started, with no response: the store cannot tell whether the\n\
             card was charged. The next process does not guess: {order}'s run pauses with NeedsConfirmation,\n\
             and a person answers with `engine.resolve_effect` after looking at the provider's records."
        )?,
    }

    let (mut resumes, mut confirmations) = (0, 0);
    loop {
        resumes += 1;
        if resumes > 3 {
            return Err("the orders did not complete after three processes".into());
        }
        writeln!(out)?;
        writeln!(out, "process {}:", resumes + 1)?;
        out.flush()?;
        let status = spawn(None)?;
        if !status.success() {
            return Err(format!("process {} failed ({status})", resumes + 1).into());
        }
        let engine = open(&paths.store)?;
        let mut waiting = false;
        for order in &orders {
            let Some(o) = engine.outcome(&order.id).await? else { continue };
            if let RunStatus::Paused(PauseReason::NeedsConfirmation { key, name }) = &o.status {
                waiting = true;
                confirmations += 1;
                confirm(&engine, &order.id, key, name, &paths.ledger, out).await?;
            }
        }
        if !waiting {
            break;
        }
    }

    writeln!(out)?;
    let charges = print_ledger(&paths.ledger, "the provider's ledger at the end", out)?;
    let engine = open(&paths.store)?;
    let rows = engine.outbox(100).await?;
    writeln!(out, "outbox (written with each step's commit, delivered and acknowledged now):")?;
    for row in &rows {
        writeln!(out, "  {:<9} {}  {}", row.topic, row.run_id, row.payload)?;
    }
    engine.ack_outbox(&rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>()).await?;
    let mut finals = Vec::new();
    for order in &orders {
        let o = engine.outcome(&order.id).await?.ok_or("an order has no run")?;
        if !o.is_completed() {
            return Err(format!("{} ended {:?}", order.id, o.status).into());
        }
        finals.push(o.state);
    }
    let outbox = rows.into_iter().map(|r| (r.topic, r.payload)).collect();
    for order in &orders {
        let n = charges.get(&order.id).copied().unwrap_or(0);
        if n != 1 {
            return Err(format!("{} was charged {n} times", order.id).into());
        }
    }
    writeln!(out, "every order completed and was charged exactly once")?;
    Ok(Report { crashed, resumes, confirmations, charges, outbox, orders: finals })
}

/// Answers a confirmation the way a person would: looks the effect key up in the provider's records.
async fn confirm(
    engine: &Engine<Order>,
    order: &str,
    key: &str,
    name: &str,
    ledger: &Path,
    out: &mut dyn Write,
) -> Result<(), Box<dyn std::error::Error>> {
    writeln!(out, "{order} waits for a person: did `{name}` with key {key} happen?")?;
    let found = provider::charges(ledger).into_iter().find(|c| c.key == key);
    let answer = match &found {
        Some(c) => {
            writeln!(out, "  the provider's records show it, as {}: answering Completed", c.receipt.id)?;
            Resolution::Completed(serde_json::to_value(&c.receipt)?)
        }
        None => {
            writeln!(out, "  the provider has no such charge: answering Retry")?;
            Resolution::Retry
        }
    };
    engine.resolve_effect(order, key, answer).await?;
    Ok(())
}

/// Prints what the store holds for each order: its run's status and its effect journal.
async fn print_store(
    store: &Path,
    orders: &[Order],
    out: &mut dyn Write,
) -> Result<(), Box<dyn std::error::Error>> {
    let engine = open(store)?;
    writeln!(out, "the store after the crash:")?;
    for order in orders {
        let Some(o) = engine.outcome(&order.id).await? else {
            writeln!(out, "  {}: no run yet", order.id)?;
            continue;
        };
        let status = match &o.status {
            RunStatus::Completed => "completed".to_owned(),
            RunStatus::Running => format!("running, last committed checkpoint {}", o.steps),
            other => format!("{other:?}"),
        };
        let journal: Vec<String> = engine
            .store()
            .effects(&order.id)
            .await?
            .into_iter()
            .map(|e| {
                let state = match e.state {
                    EffectState::Started => "started, no response".to_owned(),
                    EffectState::Completed { .. } => "response journaled".to_owned(),
                    other => format!("{other:?}"),
                };
                format!("`{}` {}", e.name, state)
            })
            .collect();
        writeln!(out, "  {}: {status}; journal: {}", order.id, journal.join(", "))?;
    }
    Ok(())
}

/// Prints the provider's ledger; returns the number of charges per order.
fn print_ledger(ledger: &Path, title: &str, out: &mut dyn Write) -> std::io::Result<BTreeMap<String, usize>> {
    let charges = provider::charges(ledger);
    writeln!(out, "{title}: {} charge(s)", charges.len())?;
    let mut per_order = BTreeMap::new();
    for c in &charges {
        writeln!(
            out,
            "  {}  {:>6}  {}  key {}",
            c.receipt.order,
            money(c.receipt.amount_cents),
            c.receipt.id,
            c.key
        )?;
        *per_order.entry(c.receipt.order.clone()).or_insert(0) += 1;
    }
    Ok(per_order)
}
