//! A conditional node: `triage` returns a generated `triage::Next` whose variants are exactly its
//! declared edges (`Small`, `Large`, `End`), so an undeclared route cannot be written.

use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    pub size: u32,
    pub handled_by: Option<String>,
}

#[graph(state = Ticket)]
mod support {
    use super::*;

    #[node(entry, to = [small, large, END])]
    async fn triage(s: &Ticket, _ctx: &mut Ctx) -> NodeResult<Ticket, triage::Next> {
        let next = match s.size {
            0 => triage::Next::End,
            1..=10 => triage::Next::Small,
            _ => triage::Next::Large,
        };
        Ok((TicketDelta::default(), next))
    }

    #[node(to = END)]
    async fn small(_s: &Ticket, _ctx: &mut Ctx) -> NodeResult<Ticket> {
        Ok(TicketDelta::default().handled_by("bot".to_owned()))
    }

    #[node(to = END)]
    async fn large(_s: &Ticket, _ctx: &mut Ctx) -> NodeResult<Ticket> {
        Ok(TicketDelta::default().handled_by("human".to_owned()))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    assert_eq!(support::triage::Next::Small.edge(), 0);
    assert_eq!(support::triage::Next::Large.edge(), 1);
    assert_eq!(support::triage::Next::End.edge(), 2);
    let engine = Engine::builder(support::graph()).build();
    for (size, who) in [(3, Some("bot")), (50, Some("human")), (0, None)] {
        let out = engine.run(&format!("ticket-{size}"), Ticket { size, handled_by: None }).await.unwrap();
        assert!(out.is_completed());
        assert_eq!(out.state.handled_by.as_deref(), who, "size {size}");
    }
}
