//! A research agent: plan → search ×N (forked, one branch per query) → summarize → judge, looping back
//! to `plan` until the notes cover enough of the topic or the rounds run out.
//!
//! Nothing here touches the network or the clock: the "search engine" is a small built-in corpus and
//! the "model" is [`StandInModel`], a function of its prompt. What a search finds is drawn from the run's
//! deterministic random stream (`ctx.random_bool`), so the same run id and topic always take the same
//! path and write the same summary. The model streams its summary token by token with `ctx.stream`;
//! [`run_streamed`] prints those tokens as they arrive, with one line per step, the way a chat UI would.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

use graph_runtime::prelude::*;
use graph_runtime::{StreamEvent, StreamModes, StreamOptions};

/// The aspects a good answer covers, each with what the built-in corpus says about it.
pub const CORPUS: [(&str, &str); 6] = [
    (
        "checkpoints",
        "every superstep is committed before the next one starts, so a crash loses at most the step in flight",
    ),
    ("determinism", "updates merge in edge order, never in completion order, so one input gives one result"),
    (
        "effects",
        "calls to the outside world are journaled by key, so a step that runs again does not repeat them",
    ),
    ("interrupts", "a node can stop for a person and resume days later, in another process"),
    ("replay", "a finished run re-executes from its journal without calling anything"),
    ("streaming", "tokens and step events reach the caller while the run goes on"),
];

/// Queries the planner sends per round, at most.
pub const QUERIES_PER_ROUND: usize = 3;
/// The coverage (percent of [`CORPUS`]) the judge accepts as good enough.
pub const GOOD_ENOUGH: u64 = 80;
/// Rounds after which the judge stops whatever the coverage.
pub const MAX_ROUNDS: u64 = 4;
/// The chance that one search finds its source.
pub const HIT_RATE: f64 = 0.6;

/// The agent's state.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Research {
    /// The question (the input; overwrite).
    pub topic: String,
    /// Rounds started so far (sum).
    #[reduce(sum)]
    pub rounds: u64,
    /// The current round's queries (overwrite: each plan replaces them).
    pub queries: Vec<String>,
    /// Every source found, in the order the searches were forked (append).
    #[reduce(append)]
    pub notes: Vec<Note>,
    /// The aspects of the topic the notes cover (union).
    #[reduce(union)]
    pub covered: BTreeSet<String>,
    /// The latest summary (overwrite).
    pub summary: String,
    /// The judge's coverage score, percent (overwrite).
    pub score: u64,
    /// The judge's verdict, once it stops the loop (overwrite).
    pub verdict: Option<String>,
}

/// One source a search found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// The aspect of the topic it covers.
    pub aspect: String,
    /// Where it came from.
    pub source: String,
    /// What it says.
    pub text: String,
}

/// What a search branch is forked with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    /// The aspect it looks for.
    pub aspect: String,
    /// The query text.
    pub text: String,
}

/// What nodes send to the stream: tokens of the summary being written, or a one-line note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Chunk {
    /// A piece of the model's answer, printed as it comes.
    Token(String),
    /// A progress line (a search's result).
    Note(String),
}

/// A deterministic stand-in for a language model: the same prompt gives the same answer, word for
/// word, as a model at temperature 0 would; the answer is streamed token by token.
#[derive(Debug, Clone, Copy, Default)]
pub struct StandInModel;

impl StandInModel {
    /// Writes a summary of `notes` for `topic` after `round`, sending each token to the run's stream as
    /// it is "generated", and returns the whole text.
    ///
    /// # Errors
    ///
    /// A token does not serialize (it always does).
    pub async fn summarize(
        self,
        ctx: &Ctx,
        topic: &str,
        round: u64,
        notes: &[Note],
    ) -> Result<String, NodeError> {
        let prompt = prompt(topic, round, notes);
        let text = self.complete(&prompt, notes, topic);
        for token in tokens(&text) {
            // A little latency per token, as a real model has; it never reaches the state.
            tokio::time::sleep(Duration::from_millis(8)).await;
            ctx.stream(&Chunk::Token(token)).await?;
        }
        Ok(text)
    }

    /// The answer to `prompt`, which was made from `topic` and `notes`: what it says comes from the
    /// notes, and its wording is picked by a hash of the prompt, so one prompt always gets one text.
    pub fn complete(self, prompt: &str, notes: &[Note], topic: &str) -> String {
        const OPENERS: [&str; 3] = ["In short", "So far", "To sum up"];
        const LINKS: [&str; 4] = ["Also", "Moreover", "In addition", "Notably"];
        let mut seed = fnv1a(prompt.as_bytes());
        let mut pick = |n: usize| {
            seed = seed.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (seed % n as u64) as usize
        };
        let covered: BTreeSet<&str> = notes.iter().map(|n| n.aspect.as_str()).collect();
        let mut text = format!(
            "{}, {} of {} aspects of {topic} are covered.",
            OPENERS[pick(OPENERS.len())],
            covered.len(),
            CORPUS.len()
        );
        let mut link = pick(LINKS.len());
        for (i, aspect) in covered.iter().enumerate() {
            let note = notes.iter().find(|n| n.aspect == *aspect).expect("a note per covered aspect");
            let lead = if i == 0 { "First" } else { LINKS[link] };
            // Never the same link twice in a row.
            link = (link + 1 + pick(LINKS.len() - 1)) % LINKS.len();
            text.push_str(&format!(" {lead}, on {aspect}: {} [{}].", note.text, note.source));
        }
        let open: Vec<&str> = CORPUS.iter().map(|(a, _)| *a).filter(|a| !covered.contains(a)).collect();
        if !open.is_empty() {
            text.push_str(&format!(" Still open: {}.", open.join(", ")));
        }
        text
    }
}

/// The prompt the model gets: the topic, the round and the notes, one per line.
fn prompt(topic: &str, round: u64, notes: &[Note]) -> String {
    let mut p = format!("Summarize what is known about {topic} (round {round}).\n");
    for n in notes {
        p.push_str(&format!("- {} ({}): {}\n", n.aspect, n.source, n.text));
    }
    p
}

/// Splits `text` into tokens: each word with the space before it (the first has none).
fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(' ').enumerate().map(|(i, w)| if i == 0 { w.to_owned() } else { format!(" {w}") })
}

/// `text` in lines of at most `width` characters (words longer than that on lines of their own).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// FNV-1a, 64 bits: a stable hash of bytes (the same in every process and on every platform).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The agent's graph: `agent::graph()`.
#[graph(state = Research, name = "research")]
pub mod agent {
    use super::*;

    /// Picks the aspects not covered yet and forks one search per aspect, with its query as input.
    #[node(entry, to = search)]
    async fn plan(s: &Research, ctx: &mut Ctx) -> NodeResult<Research, plan::Fork> {
        let queries: Vec<Query> = CORPUS
            .iter()
            .filter(|(aspect, _)| !s.covered.contains(*aspect))
            .take(QUERIES_PER_ROUND)
            .map(|(aspect, _)| Query { aspect: (*aspect).to_owned(), text: format!("{}: {aspect}", s.topic) })
            .collect();
        let mut fork = plan::Fork::new();
        for q in &queries {
            fork = fork.search_with(q)?;
        }
        let texts: Vec<String> = queries.into_iter().map(|q| q.text).collect();
        ctx.stream(&Chunk::Note(format!("round {}: {} queries", s.rounds + 1, texts.len()))).await?;
        Ok((ResearchDelta::default().rounds(1u64).queries(texts), fork))
    }

    /// One search: finds its aspect's source, or not (a draw from the run's random stream).
    #[node(to = summarize)]
    async fn search(_s: &Research, ctx: &mut Ctx) -> NodeResult<Research> {
        let q: Query = ctx.input()?.ok_or_else(|| NodeError::fatal("search is forked with a query"))?;
        // Searches take their time, and finish in any order; their notes merge in fork order anyway.
        tokio::time::sleep(Duration::from_millis(ctx.random_range(20..120u64))).await;
        if !ctx.random_bool(HIT_RATE) {
            ctx.stream(&Chunk::Note(format!("search \"{}\": nothing useful", q.text))).await?;
            return Ok(ResearchDelta::default());
        }
        let text = CORPUS.iter().find(|(a, _)| *a == q.aspect).map(|(_, t)| *t).unwrap_or_default();
        let source = format!("src-{:04x}", fnv1a(q.text.as_bytes()) & 0xffff);
        ctx.stream(&Chunk::Note(format!("search \"{}\": found {source}", q.text))).await?;
        let note = Note { aspect: q.aspect.clone(), source, text: text.to_owned() };
        Ok(ResearchDelta::default().notes(vec![note]).covered(BTreeSet::from([q.aspect])))
    }

    /// The model writes the summary, streaming it.
    #[node(to = judge)]
    async fn summarize(s: &Research, ctx: &mut Ctx) -> NodeResult<Research> {
        let summary = StandInModel.summarize(ctx, &s.topic, s.rounds, &s.notes).await?;
        Ok(ResearchDelta::default().summary(summary))
    }

    /// Good enough (coverage at least [`GOOD_ENOUGH`]) or out of rounds: END; otherwise plan again.
    #[node(to = [plan, END])]
    async fn judge(s: &Research, ctx: &mut Ctx) -> NodeResult<Research, judge::Next> {
        let score = s.covered.len() as u64 * 100 / CORPUS.len() as u64;
        let delta = ResearchDelta::default().score(score);
        let (verdict, next) = if score >= GOOD_ENOUGH {
            (Some(format!("good enough: {score}% covered after {} round(s)", s.rounds)), judge::Next::End)
        } else if s.rounds >= MAX_ROUNDS {
            (Some(format!("out of rounds: {score}% covered after {} round(s)", s.rounds)), judge::Next::End)
        } else {
            (None, judge::Next::Plan)
        };
        let said = verdict.clone().unwrap_or_else(|| format!("{score}% covered: not enough, back to plan"));
        ctx.stream(&Chunk::Note(said)).await?;
        Ok((delta.verdict(verdict), next))
    }
}

/// What [`run_streamed`] saw: the run's outcome and each summary as it was streamed.
#[derive(Debug)]
pub struct Streamed {
    /// What the run returned.
    pub outcome: RunOutcome<Research>,
    /// The text of every summary, put together from its streamed tokens, in order.
    pub summaries: Vec<String>,
    /// How many steps started.
    pub steps: u64,
}

/// Runs the agent on `topic` as `run_id`, streaming: tokens are written to `out` as they arrive (and
/// flushed), with one line when each step starts and one when it commits.
///
/// # Errors
///
/// Writing to `out`, or what stopped the run.
pub async fn run_streamed(
    engine: &Engine<Research>,
    run_id: &str,
    topic: &str,
    out: &mut dyn Write,
) -> Result<Streamed, Box<dyn std::error::Error>> {
    let input = Research { topic: topic.to_owned(), ..Research::default() };
    let options = StreamOptions::default().modes(StreamModes::CUSTOM | StreamModes::DEBUG);
    let mut events = engine.stream(run_id, input, options);
    let (mut summaries, mut steps) = (Vec::new(), 0);
    // The column of the line of tokens being printed (0: no such line).
    let mut column = 0;
    let newline = |out: &mut dyn Write, column: &mut usize| -> std::io::Result<()> {
        if std::mem::take(column) > 0 {
            writeln!(out)?;
        }
        Ok(())
    };
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::StepStarted { step, nodes } => {
                newline(out, &mut column)?;
                steps += 1;
                writeln!(out, "step {step:>2}  {}", describe(&nodes))?;
                if nodes.iter().any(|n| n == "summarize") {
                    summaries.push(String::new());
                }
            }
            StreamEvent::Custom { payload, .. } => match serde_json::from_value::<Chunk>(payload)? {
                Chunk::Token(token) => {
                    if column + token.len() > WIDTH {
                        newline(out, &mut column)?;
                    }
                    // A token that starts a line goes without its space.
                    let shown = if column == 0 { token.trim_start() } else { token.as_str() };
                    if column == 0 {
                        write!(out, "{INDENT}")?;
                        column = INDENT.len();
                    }
                    write!(out, "{shown}")?;
                    out.flush()?;
                    column += shown.len();
                    if let Some(s) = summaries.last_mut() {
                        s.push_str(&token);
                    }
                }
                Chunk::Note(note) => {
                    newline(out, &mut column)?;
                    writeln!(out, "{INDENT}{note}")?;
                }
            },
            StreamEvent::StepCommitted { step, state_hash, .. } => {
                newline(out, &mut column)?;
                writeln!(out, "{INDENT}committed checkpoint {step} (state {})", &state_hash[..12])?;
            }
            StreamEvent::Finished(outcome) => {
                newline(out, &mut column)?;
                return Ok(Streamed { outcome: outcome?, summaries, steps });
            }
            _ => {}
        }
    }
    Err("the stream ended without its Finished event".into())
}

/// Where streamed text starts, under a step's line.
const INDENT: &str = "         ";
/// Where streamed tokens wrap.
const WIDTH: usize = 100;

/// `["search", "search", "search"]` → `search ×3`.
fn describe(nodes: &[String]) -> String {
    let mut parts: Vec<(String, usize)> = Vec::new();
    for n in nodes {
        match parts.last_mut() {
            Some((last, count)) if last == n => *count += 1,
            _ => parts.push((n.clone(), 1)),
        }
    }
    let parts: Vec<String> =
        parts.into_iter().map(|(n, c)| if c == 1 { n } else { format!("{n} ×{c}") }).collect();
    parts.join(", ")
}
