//! Fails: `migrate_from` names a graph whose version is not below this one's.
use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderV1 {
    pub amount: u64,
}

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderV2 {
    pub amount_cents: u64,
}

#[graph(state = OrderV1, name = "order", version = 2)]
mod v1 {
    use super::*;

    #[node(entry, to = END)]
    async fn pay(_s: &OrderV1, _ctx: &mut Ctx) -> NodeResult<OrderV1> {
        Ok(OrderV1Delta::default())
    }
}

fn upgrade(o: OrderV1) -> OrderV2 {
    OrderV2 { amount_cents: o.amount * 100 }
}

#[graph(state = OrderV2, name = "order", version = 2, migrate_from = v1, migrate = upgrade)]
mod v2 {
    use super::*;

    #[node(entry, to = END)]
    async fn pay(_s: &OrderV2, _ctx: &mut Ctx) -> NodeResult<OrderV2> {
        Ok(OrderV2Delta::default())
    }
}

fn main() {}
