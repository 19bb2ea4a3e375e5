//! Composition: a writer whose `research` node is a subgraph that asks a person, and a batch that
//! fans out child runs.
//!
//! - [`writer`]: `outline` → `research` (the [`scout`] graph as a subgraph: it searches, then asks a
//!   person which source to trust) → `draft` → END. The question deep in the subgraph stops the writer;
//!   answering the writer resumes the subgraph in place, and nothing that completed runs again.
//! - [`translations`]: `fan` starts one run of [`translate`] per language as a child run, parks while
//!   they run, and collects their results (a language the stand-in translator cannot do fails its child,
//!   which `fan` reports instead of failing).
//!
//! Nothing here touches the network or the clock: the "search" and the "translator" are functions of
//! their input.

use graph_runtime::child::{ChildError, ChildRun};
use graph_runtime::prelude::*;

/// The writer's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Article {
    /// The subject (the input).
    pub subject: String,
    /// What each node added, in order.
    #[reduce(append)]
    pub log: Vec<String>,
    /// The source the person chose in the research subgraph.
    pub source: Option<String>,
    /// The finished text.
    pub text: String,
}

/// The research subgraph's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scouting {
    /// What to look for.
    pub question: String,
    /// Sources found.
    #[reduce(append)]
    pub candidates: Vec<String>,
    /// The one a person trusts.
    pub chosen: Option<String>,
}

/// The research subgraph: `search` → `choose` (asks a person) → END.
#[graph(state = Scouting)]
pub mod scout {
    use super::*;

    /// Finds candidate sources (a function of the question).
    #[node(entry, to = choose)]
    async fn search(s: &Scouting, _ctx: &mut Ctx) -> NodeResult<Scouting> {
        let found = ["handbook", "paper", "blog"].map(|kind| format!("{kind} on {}", s.question));
        Ok(ScoutingDelta::default().candidates(found.to_vec()))
    }

    /// Asks a person which candidate to trust (the answer is its index).
    #[node(to = END)]
    async fn choose(s: &Scouting, ctx: &mut Ctx) -> NodeResult<Scouting> {
        let pick: usize = ctx.interrupt(&serde_json::json!({
            "question": "which source should the article cite? (answer with its index)",
            "candidates": s.candidates,
        }))?;
        let chosen = s.candidates.get(pick).cloned().ok_or_else(|| NodeError::fatal("no such candidate"))?;
        Ok(ScoutingDelta::default().chosen(Some(chosen)))
    }
}

/// The writer: `outline` → `research` (subgraph [`scout`]) → `draft` → END.
#[graph(state = Article)]
pub mod writer {
    use super::*;

    #[node(entry, to = research)]
    async fn outline(s: &Article, _ctx: &mut Ctx) -> NodeResult<Article> {
        Ok(ArticleDelta::default().push_log(format!("outline of {}", s.subject)))
    }

    /// The writer's state to the subgraph's input.
    #[node(subgraph = scout, output = cite, to = draft, timeout = "1h")]
    fn research(s: &Article) -> Scouting {
        Scouting { question: s.subject.clone(), ..Scouting::default() }
    }

    /// The subgraph's final state to the writer's update.
    fn cite(_s: &Article, found: Scouting) -> ArticleDelta {
        let line = format!("researched {} sources", found.candidates.len());
        ArticleDelta::default().push_log(line).source(found.chosen)
    }

    #[node(to = END)]
    async fn draft(s: &Article, _ctx: &mut Ctx) -> NodeResult<Article> {
        let source = s.source.as_deref().unwrap_or("nothing");
        let text = format!("{}: an article citing the {source}.", s.subject);
        Ok(ArticleDelta::default().push_log("drafted").text(text))
    }
}

/// A translation job's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Translation {
    /// The language.
    pub language: String,
    /// The text to translate.
    pub text: String,
    /// The result.
    pub translated: String,
}

/// One translation: `translate` → END; fails for a language the stand-in translator does not know.
#[graph(state = Translation)]
pub mod translate {
    use super::*;

    #[node(entry, to = END)]
    async fn translate(s: &Translation, _ctx: &mut Ctx) -> NodeResult<Translation> {
        let greeting = match s.language.as_str() {
            "fr" => "bonjour",
            "de" => "hallo",
            "es" => "hola",
            other => return Err(NodeError::fatal(format!("no translator for `{other}`"))),
        };
        Ok(TranslationDelta::default().translated(format!("{greeting}: {}", s.text)))
    }
}

/// The batch's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The text.
    pub text: String,
    /// The languages.
    pub languages: Vec<String>,
    /// One line per language, in order: the translation or why there is none.
    #[reduce(append)]
    pub results: Vec<String>,
}

/// A batch that fans out one child run of [`translate`] per language (run by `engine`, which must
/// share the batch's store) and joins them.
pub fn translations(engine: Engine<Translation>) -> Graph<Batch> {
    let engine = std::sync::Arc::new(engine);
    Graph::<Batch>::builder("translations")
        .node("fan", move |s, ctx| {
            let (engine, s) = (engine.clone(), s.clone());
            Box::pin(async move {
                let mut children: Vec<(String, ChildRun)> = Vec::new();
                for language in &s.languages {
                    let job = Translation {
                        language: language.clone(),
                        text: s.text.clone(),
                        ..Default::default()
                    };
                    children.push((language.clone(), ctx.spawn_run(&engine, language, job).await?));
                }
                let mut delta = BatchDelta::default();
                for (language, child) in &children {
                    delta = match ctx.join_run(&engine, child).await? {
                        Ok(done) => delta.push_results(format!("{language}: {}", done.translated)),
                        Err(ChildError::Failed { error, .. }) => {
                            delta.push_results(format!("{language}: failed ({error})"))
                        }
                        Err(other) => delta.push_results(format!("{language}: {other}")),
                    };
                }
                Ok((delta, Route::Declared))
            })
        })
        .entry("fan")
        .edge("fan", END)
        .build()
        .expect("a valid graph")
}
