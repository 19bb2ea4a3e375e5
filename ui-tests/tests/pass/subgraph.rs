//! Composition with the macros: a `writer` graph whose `research` node is the `research` graph (a
//! subgraph that asks a person), and whose `publish` node has an error handler.

use graph_runtime::node::NodeFailure;
use graph_runtime::prelude::*;

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Draft {
    pub topic: String,
    #[reduce(append)]
    pub notes: Vec<String>,
    pub published: bool,
}

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    pub question: String,
    #[reduce(append)]
    pub sources: Vec<String>,
}

#[graph(state = Findings)]
mod research {
    use super::*;

    #[node(entry, to = confirm)]
    async fn search(s: &Findings, _ctx: &mut Ctx) -> NodeResult<Findings> {
        Ok(FindingsDelta::default().push_sources(format!("search:{}", s.question)))
    }

    #[node(to = END)]
    async fn confirm(_s: &Findings, ctx: &mut Ctx) -> NodeResult<Findings> {
        let source: String = ctx.interrupt(&"which source should we trust?")?;
        Ok(FindingsDelta::default().push_sources(source))
    }
}

#[graph(state = Draft)]
mod writer {
    use super::*;

    #[node(entry, to = research)]
    async fn outline(s: &Draft, _ctx: &mut Ctx) -> NodeResult<Draft> {
        Ok(DraftDelta::default().push_notes(format!("outline:{}", s.topic)))
    }

    /// This graph's state to the child's input.
    #[node(subgraph = research, output = cite, to = publish)]
    fn research(s: &Draft) -> Findings {
        Findings { question: s.topic.clone(), sources: Vec::new() }
    }

    /// The child's final state to this graph's update.
    fn cite(_s: &Draft, found: Findings) -> DraftDelta {
        DraftDelta::default().notes(found.sources)
    }

    #[node(to = END, on_error = apologize)]
    async fn publish(s: &Draft, _ctx: &mut Ctx) -> NodeResult<Draft> {
        if s.topic == "forbidden" {
            return Err(NodeError::fatal("the press refuses"));
        }
        Ok(DraftDelta::default().published(true))
    }

    #[node(to = END)]
    async fn apologize(_s: &Draft, ctx: &mut Ctx) -> NodeResult<Draft> {
        let failure: NodeFailure = ctx.input()?.expect("a handler's input is the failure");
        Ok(DraftDelta::default().push_notes(format!("sorry:{}:{}", failure.node, failure.error)))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    assert_eq!(
        writer::graph().fingerprint(),
        writer::FINGERPRINT,
        "compile-time and runtime fingerprints agree"
    );
    let engine = Engine::builder(writer::graph()).build();
    let first = engine.run("w", Draft { topic: "rust".into(), ..Default::default() }).await.unwrap();
    let asked = first.interrupts();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].node, "research");
    assert_eq!(asked[0].payload, serde_json::json!("which source should we trust?"));
    let done = engine.resume_with_input("w", &"the book").await.unwrap();
    assert!(done.is_completed());
    assert_eq!(done.state.notes, ["outline:rust", "search:rust", "the book"]);
    assert!(done.state.published);

    let engine = Engine::builder(writer::graph()).build();
    engine.run("f", Draft { topic: "forbidden".into(), ..Default::default() }).await.unwrap();
    let done = engine.resume_with_input("f", &"a pamphlet").await.unwrap();
    assert!(done.is_completed());
    assert!(!done.state.published);
    assert_eq!(done.state.notes.last().unwrap(), "sorry:publish:the press refuses");
}
