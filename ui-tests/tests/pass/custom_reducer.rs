//! Custom merges: `#[reduce(with = f)]` names a `#[reducer] fn` (purity-checked). A merge fn returns
//! `()` or `Result<(), E: Display>`; an error fails the step with a `MergeError::Custom` naming the field.
//! Also: `union`, `min`, and `delta = ...` to name the generated type.

use std::collections::{BTreeMap, BTreeSet};

use graph_runtime::prelude::*;

/// Keeps labels lowercase and unique.
#[reducer]
fn union_lowercase(current: &mut BTreeSet<String>, written: BTreeSet<String>) {
    current.extend(written.into_iter().map(|l| l.to_lowercase()));
}

/// Appends, but refuses to grow past 4 entries.
#[reducer]
fn capped(current: &mut Vec<u32>, written: Vec<u32>) -> Result<(), String> {
    if current.len() + written.len() > 4 {
        return Err(format!("at most 4 entries, got {}", current.len() + written.len()));
    }
    current.extend(written);
    Ok(())
}

#[reducer(delta = Patch)]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    #[reduce(with = union_lowercase)]
    pub labels: BTreeSet<String>,
    #[reduce(with = capped)]
    pub items: Vec<u32>,
    #[reduce(union)]
    pub stock: BTreeMap<String, u32>,
    #[reduce(min)]
    pub cheapest: u32,
    #[reduce(overwrite)]
    pub note: String,
}

#[graph(state = Inventory)]
mod shop {
    use super::*;

    #[node(entry, to = [a, b])]
    async fn start(_s: &Inventory, _ctx: &mut Ctx) -> NodeResult<Inventory> {
        Ok(Patch::default().cheapest(100))
    }

    #[node(to = END)]
    async fn a(_s: &Inventory, _ctx: &mut Ctx) -> NodeResult<Inventory> {
        Ok(Patch::default()
            .labels(["Red".to_owned()])
            .items(vec![1, 2])
            .stock([("apple".to_owned(), 3)])
            .cheapest(7))
    }

    #[node(to = END)]
    async fn b(s: &Inventory, _ctx: &mut Ctx) -> NodeResult<Inventory> {
        let items = if s.note == "overflow" { vec![3, 4, 5] } else { vec![3] };
        Ok(Patch::default().labels(["RED".to_owned(), "Blue".to_owned()]).items(items).cheapest(9))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    // the generated delta: builder, serde (unset parts are skipped), writes()
    let p = Patch::default().cheapest(1);
    assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"cheapest":1}"#);
    let mut writes = Vec::new();
    Patch::default()
        .labels(BTreeSet::new())
        .note(String::new())
        .writes(&mut |w| writes.push((w.field, w.strategy)));
    use graph_runtime::state::Strategy;
    assert_eq!(writes, [("labels", Strategy::Custom), ("note", Strategy::Overwrite)]);

    let engine = Engine::builder(shop::graph()).build();
    let out = engine.run("shop-1", Inventory { cheapest: u32::MAX, ..Default::default() }).await.unwrap();
    assert!(out.is_completed());
    assert_eq!(out.state.labels, ["blue".to_owned(), "red".to_owned()].into());
    assert_eq!(out.state.items, [1, 2, 3]);
    assert_eq!(out.state.stock.get("apple"), Some(&3));
    assert_eq!(out.state.cheapest, 7, "min over the step's writes after the entry's 100");

    let err =
        engine.run("shop-2", Inventory { note: "overflow".into(), ..Default::default() }).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("items") && text.contains("at most 4 entries"), "{text}");
}
