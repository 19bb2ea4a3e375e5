//! Two versions of one graph, `ticket`, for the versioning tests and the process they kill.
//!
//! Version 1: `intake → review → wait → END`; `review` sends a notice (a journaled effect) and asks
//! whether to approve; `wait` sleeps an hour. Version 2 renames the state's `customer` to `client`
//! and adds `priority`, renames `review` to `approve`, adds `triage` after it, and replaces `wait`
//! with `nap` (a removed node whose parked runs resume at its replacement). `v2::migration()` maps
//! the state; [`migration`] adds the node mappings.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use graph_runtime::prelude::*;

/// How many notices the `review`/`approve` nodes' effect really sent in this process, by run.
static NOTICES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// How many notices were really sent for `run` in this process.
pub fn notices(run: &str) -> u64 {
    NOTICES.lock().unwrap_or_else(|e| e.into_inner()).get(run).copied().unwrap_or(0)
}

/// Version 1's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TicketV1 {
    /// Who asked.
    pub customer: String,
    /// What each node did.
    #[reduce(append)]
    pub notes: Vec<String>,
    /// The person's answer.
    pub approved: bool,
}

/// Version 2's state: `customer` renamed `client`, and a new `priority`.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TicketV2 {
    /// Who asked (version 1's `customer`).
    pub client: String,
    /// What each node did.
    #[reduce(append)]
    pub notes: Vec<String>,
    /// The person's answer.
    pub approved: bool,
    /// Set by `triage`.
    pub priority: u8,
}

/// Sends the notice `review`/`approve` send before they ask (a journaled effect: once per run).
async fn notify(ctx: &mut Ctx, who: &str) -> Result<u64, NodeError> {
    let run = ctx.run_id().to_owned();
    ctx.effect("notify", &who)
        .idempotent()
        .run(|_key| async move {
            let mut sent = NOTICES.lock().unwrap_or_else(|e| e.into_inner());
            let n = sent.entry(run).or_default();
            *n += 1;
            Ok::<_, NodeError>(*n)
        })
        .await
}

/// Version 1.
#[graph(state = TicketV1, name = "ticket")]
pub mod v1 {
    use super::*;

    #[node(entry, to = review)]
    async fn intake(s: &TicketV1, _ctx: &mut Ctx) -> NodeResult<TicketV1> {
        Ok(TicketV1Delta::default().push_notes(format!("intake:{}", s.customer)))
    }

    #[node(to = wait)]
    async fn review(s: &TicketV1, ctx: &mut Ctx) -> NodeResult<TicketV1> {
        notify(ctx, &s.customer).await?;
        let approved: bool = ctx.interrupt(&format!("approve the ticket of {}?", s.customer))?;
        Ok(TicketV1Delta::default().approved(approved).push_notes("review:v1".to_owned()))
    }

    #[node(to = END)]
    async fn wait(_s: &TicketV1, ctx: &mut Ctx) -> NodeResult<TicketV1> {
        ctx.sleep(Duration::from_secs(3600))?;
        Ok(TicketV1Delta::default().push_notes("slept:v1".to_owned()))
    }
}

/// Version 1's state mapped to version 2's.
pub fn from_v1(t: TicketV1) -> TicketV2 {
    TicketV2 { client: t.customer, notes: t.notes, approved: t.approved, priority: 0 }
}

/// Version 2.
#[graph(state = TicketV2, name = "ticket", version = 2, migrate_from = v1, migrate = from_v1)]
pub mod v2 {
    use super::*;

    #[node(entry, to = approve)]
    async fn intake(s: &TicketV2, _ctx: &mut Ctx) -> NodeResult<TicketV2> {
        Ok(TicketV2Delta::default().push_notes(format!("intake:{}", s.client)))
    }

    #[node(to = triage)]
    async fn approve(s: &TicketV2, ctx: &mut Ctx) -> NodeResult<TicketV2> {
        notify(ctx, &s.client).await?;
        let approved: bool = ctx.interrupt(&format!("approve the ticket of {}?", s.client))?;
        Ok(TicketV2Delta::default().approved(approved).push_notes("approve:v2".to_owned()))
    }

    #[node(to = nap)]
    async fn triage(s: &TicketV2, _ctx: &mut Ctx) -> NodeResult<TicketV2> {
        let priority = if s.approved { 1 } else { 3 };
        Ok(TicketV2Delta::default().priority(priority).push_notes("triage:v2".to_owned()))
    }

    #[node(to = END)]
    async fn nap(_s: &TicketV2, ctx: &mut Ctx) -> NodeResult<TicketV2> {
        ctx.sleep(Duration::from_secs(3600))?;
        Ok(TicketV2Delta::default().push_notes("slept:v2".to_owned()))
    }
}

/// The migration from version 1 to 2 with its node mappings: `review` is `approve` now, `wait`'s
/// parked runs resume at `nap`.
pub fn migration() -> Migration<TicketV1, TicketV2> {
    v2::migration().node("review", "approve").node("wait", "nap")
}

/// A ticket of version 1.
pub fn ticket(customer: &str) -> TicketV1 {
    TicketV1 { customer: customer.to_owned(), ..TicketV1::default() }
}
