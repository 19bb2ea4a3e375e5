//! A deploy with runs in flight: a refund approval whose version 2 renames a state field, renames the
//! node that waits for the person, and adds a fraud check after it.
//!
//! Version 1: `quote → approve → pay → END`. Version 2: `quote → review → screen → pay → END`, its
//! state's `amount` now `amount_cents` (in cents), and `screen` new. A build of version 2 serves
//! version 1 too ([`graph_runtime::EngineBuilder::serves`]), so a run parked at version 1's question
//! can be answered on version 1, or moved to version 2 first with [`migration`].

use graph_runtime::prelude::*;

/// Version 1's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RefundV1 {
    /// Who is refunded.
    pub customer: String,
    /// In whole units.
    pub amount: u64,
    /// What happened, in order.
    #[reduce(append)]
    pub log: Vec<String>,
}

/// Version 2's state: the amount in cents, and the screening's verdict.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RefundV2 {
    /// Who is refunded.
    pub customer: String,
    /// In cents (version 1's `amount` × 100).
    pub amount_cents: u64,
    /// What happened, in order.
    #[reduce(append)]
    pub log: Vec<String>,
    /// The fraud screening passed.
    pub screened: bool,
}

/// Version 1 of the refund graph.
#[graph(state = RefundV1, name = "refund")]
pub mod refund_v1 {
    use super::*;

    #[node(entry, to = approve)]
    async fn quote(s: &RefundV1, _ctx: &mut Ctx) -> NodeResult<RefundV1> {
        Ok(RefundV1Delta::default().push_log(format!("quoted {} to {}", s.amount, s.customer)))
    }

    #[node(to = pay)]
    async fn approve(s: &RefundV1, ctx: &mut Ctx) -> NodeResult<RefundV1> {
        let ok: bool = ctx.interrupt(&format!("refund {} to {}?", s.amount, s.customer))?;
        Ok(RefundV1Delta::default().push_log(format!("approved: {ok}")))
    }

    #[node(to = END)]
    async fn pay(s: &RefundV1, _ctx: &mut Ctx) -> NodeResult<RefundV1> {
        Ok(RefundV1Delta::default().push_log(format!("paid {} (v1)", s.amount)))
    }
}

/// Version 1's state in version 2's terms.
pub fn upgrade(r: RefundV1) -> RefundV2 {
    RefundV2 { customer: r.customer, amount_cents: r.amount * 100, log: r.log, screened: false }
}

/// Version 2 of the refund graph.
#[graph(state = RefundV2, name = "refund", version = 2, migrate_from = refund_v1, migrate = upgrade)]
pub mod refund_v2 {
    use super::*;

    #[node(entry, to = review)]
    async fn quote(s: &RefundV2, _ctx: &mut Ctx) -> NodeResult<RefundV2> {
        Ok(RefundV2Delta::default().push_log(format!("quoted {} cents to {}", s.amount_cents, s.customer)))
    }

    #[node(to = screen)]
    async fn review(s: &RefundV2, ctx: &mut Ctx) -> NodeResult<RefundV2> {
        let ok: bool = ctx.interrupt(&format!("refund {} cents to {}?", s.amount_cents, s.customer))?;
        Ok(RefundV2Delta::default().push_log(format!("approved: {ok}")))
    }

    #[node(to = pay)]
    async fn screen(s: &RefundV2, _ctx: &mut Ctx) -> NodeResult<RefundV2> {
        let passed = s.amount_cents <= 100_000;
        Ok(RefundV2Delta::default().screened(passed).push_log(format!("screened: {passed}")))
    }

    #[node(to = END)]
    async fn pay(s: &RefundV2, _ctx: &mut Ctx) -> NodeResult<RefundV2> {
        Ok(RefundV2Delta::default().push_log(format!("paid {} cents (v2)", s.amount_cents)))
    }
}

/// The migration from version 1 to 2: the state by [`upgrade`], and runs waiting at version 1's
/// `approve` wait at version 2's `review` (same question id).
pub fn migration() -> Migration<RefundV1, RefundV2> {
    refund_v2::migration().node("approve", "review")
}

/// A refund request of version 1.
pub fn request(customer: &str, amount: u64) -> RefundV1 {
    RefundV1 { customer: customer.to_owned(), amount, log: Vec::new() }
}
