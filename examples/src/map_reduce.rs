//! Map-reduce: split → count ×N (forked, one branch per document, each with its document as input) →
//! reduce → END.
//!
//! The map nodes sleep a random time (real randomness, outside the run: the world's latency), so they
//! finish in a different order every time. Their partial counts still merge in fork order at the
//! step's barrier, and `reduce` runs once, as the join of the plain routes of every branch of that
//! step: the final state, and its hash, do not depend on the timing. [`run`] reports both the finish
//! order (from the stream) and the state hash (from the last commit), so two runs can be compared.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::time::Duration;

use graph_runtime::prelude::*;
use graph_runtime::{StreamEvent, StreamModes, StreamOptions};

/// Words the reduce step lists in [`WordCount::top`].
pub const TOP: usize = 5;

/// The job's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WordCount {
    /// The documents (the input; overwrite).
    pub docs: Vec<String>,
    /// One partial count per document, in fork order whatever the timing (append).
    #[reduce(append)]
    pub partials: Vec<Partial>,
    /// Words seen by the map nodes (sum).
    #[reduce(sum)]
    pub words: u64,
    /// Occurrences of every word, from the partials (overwrite, by `reduce`).
    pub totals: BTreeMap<String, u64>,
    /// The [`TOP`] most frequent words, most frequent first, ties alphabetical (overwrite, by `reduce`).
    pub top: Vec<(String, u64)>,
}

/// What one map node counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partial {
    /// The document's index.
    pub doc: usize,
    /// Occurrences of each word in it.
    pub counts: BTreeMap<String, u64>,
}

/// Counts the lowercase words of `text` (letters and apostrophes).
pub fn count_words(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for word in text.split(|c: char| !c.is_alphabetic() && c != '\'').filter(|w| !w.is_empty()) {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    counts
}

/// The map nodes' latency: 0 to `max_ms` milliseconds, drawn from the process's own randomness (a
/// fresh `RandomState`), different at every call. It is the world's timing, not part of the run: it
/// decides when a branch finishes, never what it returns.
pub fn jitter(max_ms: u64) -> Duration {
    let draw = std::collections::hash_map::RandomState::new().hash_one(0u8);
    Duration::from_millis(draw % (max_ms + 1))
}

/// The job's graph: `word_count::graph()`.
#[graph(state = WordCount, name = "word_count")]
pub mod word_count {
    use super::*;

    /// Forks one `count` branch per document, with `(index, text)` as its input.
    #[node(entry, to = count)]
    async fn split(s: &WordCount, _ctx: &mut Ctx) -> NodeResult<WordCount, split::Fork> {
        let mut fork = split::Fork::new();
        for (i, doc) in s.docs.iter().enumerate() {
            fork = fork.count_with(&(i, doc))?;
        }
        Ok((WordCountDelta::default(), fork))
    }

    /// Map: counts one document's words, after a random pause. Every branch routes to `reduce`: they are
    /// in one step, so `reduce` runs once, after all of them (a join).
    #[node(to = reduce)]
    async fn count(_s: &WordCount, ctx: &mut Ctx) -> NodeResult<WordCount> {
        let (doc, text): (usize, String) =
            ctx.input()?.ok_or_else(|| NodeError::fatal("count is forked with a document"))?;
        tokio::time::sleep(jitter(60)).await;
        ctx.stream(&doc).await?; // "done": the order the branches finish in
        let counts = count_words(&text);
        let words: u64 = counts.values().sum();
        Ok(WordCountDelta::default().partials(vec![Partial { doc, counts }]).words(words))
    }

    /// Reduce: adds the partials up and ranks the words.
    #[node(to = END)]
    async fn reduce(s: &WordCount, _ctx: &mut Ctx) -> NodeResult<WordCount> {
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        for p in &s.partials {
            for (word, n) in &p.counts {
                *totals.entry(word.clone()).or_insert(0) += n;
            }
        }
        let mut top: Vec<(String, u64)> = totals.iter().map(|(w, n)| (w.clone(), *n)).collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(TOP);
        Ok(WordCountDelta::default().totals(totals).top(top))
    }
}

/// A few short documents to count.
pub fn sample_docs() -> Vec<String> {
    [
        "the quick brown fox jumps over the lazy dog",
        "a step is committed before the next step starts",
        "the fox and the dog merge in edge order",
        "timing never reaches the result",
        "the same input gives the same bytes",
        "every branch of the step joins the reduce",
    ]
    .iter()
    .map(|d| (*d).to_owned())
    .collect()
}

/// One run of the job, as [`run`] saw it.
#[derive(Debug)]
pub struct MapReduceRun {
    /// The final state.
    pub state: WordCount,
    /// The SHA-256 of the final state's canonical bytes, from the last commit.
    pub state_hash: String,
    /// The documents' indices in the order their map nodes finished.
    pub finish_order: Vec<usize>,
}

/// Runs the job over `docs` as `run_id`, streaming to watch the map nodes finish.
///
/// # Errors
///
/// What stopped the run, or a run that did not complete.
pub async fn run(
    engine: &Engine<WordCount>,
    run_id: &str,
    docs: Vec<String>,
) -> Result<MapReduceRun, Box<dyn std::error::Error>> {
    let input = WordCount { docs, ..WordCount::default() };
    let options = StreamOptions::default().modes(StreamModes::CUSTOM | StreamModes::DEBUG);
    let mut events = engine.stream(run_id, input, options);
    let (mut finish_order, mut state_hash) = (Vec::new(), String::new());
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::Custom { payload, .. } => finish_order.push(serde_json::from_value(payload)?),
            StreamEvent::StepCommitted { state_hash: h, .. } => state_hash = h,
            StreamEvent::Finished(outcome) => {
                let outcome = outcome?;
                if !outcome.is_completed() {
                    return Err(format!("run {run_id} ended {:?}", outcome.status).into());
                }
                return Ok(MapReduceRun { state: outcome.state, state_hash, finish_order });
            }
            _ => {}
        }
    }
    Err("the stream ended without its Finished event".into())
}
