//! Versions with the macros: `#[graph(version = 2, migrate_from = v1, migrate = upgrade)]` declares
//! version 2 of `order`, its `VERSION`, a fingerprint naming it, and `migration()`, which moves a run
//! of version 1 parked at its question to version 2.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderV1 {
    pub amount: u64,
    #[reduce(append)]
    pub log: Vec<String>,
}

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderV2 {
    pub amount_cents: u64,
    #[reduce(append)]
    pub log: Vec<String>,
}

#[graph(state = OrderV1, name = "order")]
mod v1 {
    use super::*;

    #[node(entry, to = END)]
    async fn confirm(s: &OrderV1, ctx: &mut Ctx) -> NodeResult<OrderV1> {
        let ok: bool = ctx.interrupt(&s.amount)?;
        Ok(OrderV1Delta::default().push_log(format!("v1 confirmed {ok}")))
    }
}

fn upgrade(o: OrderV1) -> OrderV2 {
    OrderV2 { amount_cents: o.amount * 100, log: o.log }
}

#[graph(state = OrderV2, name = "order", version = 2, migrate_from = v1, migrate = upgrade)]
mod v2 {
    use super::*;

    #[node(entry, to = END)]
    async fn confirm(s: &OrderV2, ctx: &mut Ctx) -> NodeResult<OrderV2> {
        let ok: bool = ctx.interrupt(&s.amount_cents)?;
        Ok(OrderV2Delta::default().push_log(format!("v2 confirmed {ok} for {}", s.amount_cents)))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    assert_eq!((v1::VERSION, v2::VERSION), (1, 2));
    assert_eq!((v1::graph().version(), v2::graph().version()), (1, 2));
    assert_eq!(v2::graph().fingerprint(), v2::FINGERPRINT, "compile-time and runtime fingerprints agree");
    assert!(v2::FINGERPRINT.starts_with("v2:") && !v1::FINGERPRINT.starts_with('v'));
    let m = v2::migration();
    assert_eq!((m.from_version(), m.to_version()), (1, 2));
    let store = std::sync::Arc::new(MemoryStore::new());
    let old = Engine::builder(v1::graph()).shared_store(store.clone()).build();
    old.run("o", OrderV1 { amount: 7, log: Vec::new() }).await.unwrap();
    let new = Engine::builder(v2::graph()).serves(v1::graph()).migration(m).shared_store(store).build();
    new.migrate("o", 2).await.unwrap();
    let out = new.resume_with_input("o", &true).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state, OrderV2 { amount_cents: 700, log: vec!["v2 confirmed true for 700".into()] });
}
