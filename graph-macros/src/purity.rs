//! Purity lints: walks a function body (`syn::visit`) and rejects what makes a reducer impure or a node
//! non-deterministic, with the caret on the offending call and the deterministic replacement in the
//! message.
//!
//! Limits, stated honestly: this is a lint on tokens. It sees the body as written, not the functions it
//! calls, not what a macro it cannot parse expands to, and it recognizes names, not resolved items (a
//! `use std::time::SystemTime as Clock;` hides `Clock::now()`). It catches the common mistakes; it is
//! not a proof of determinism.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Expr, Token};

use crate::diag::Errors;

/// What kind of function is checked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Scope {
    /// A `#[node]` body: deterministic outside `ctx`.
    Node,
    /// A `#[reducer]` merge: pure and synchronous.
    Reducer,
}

/// A category of violation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Clock,
    Random,
    Uuid,
    Env,
    Process,
    Io,
}

/// Checks a function's body.
pub(crate) fn check(block: &syn::Block, scope: Scope, errs: &mut Errors) {
    let mut v = Walker { scope, errs };
    v.visit_block(block);
}

struct Walker<'e> {
    scope: Scope,
    errs: &'e mut Errors,
}

const OPT_OUT: &str = ", or opt out with `#[node(impure = \"reason\")]`";

impl Walker<'_> {
    fn report_path(&mut self, path: &syn::Path) {
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let Some(kind) = classify(&segs) else { return };
        let what = segs.join("::");
        let message = match (self.scope, kind) {
            (Scope::Node, Kind::Clock) => format!(
                "`{what}` reads the wall clock, which differs on every run and replay; use `ctx.now()`, \
                 the step's recorded time, which a retry, resume or replay reads back{OPT_OUT}"
            ),
            (Scope::Node, Kind::Random) => format!(
                "`{what}` draws ambient randomness, so a replay takes another path; use `ctx.rng()`, the \
                 run's deterministic stream (seeded per run, item and attempt){OPT_OUT}"
            ),
            (Scope::Node, Kind::Uuid) => format!(
                "`{what}` makes a random id, so a replay makes another; use `ctx.uuid()`, a v4 UUID \
                 drawn from the run's deterministic stream{OPT_OUT}"
            ),
            (Scope::Node, Kind::Env) => format!(
                "`{what}` reads the process environment, which a resumed or replayed run may not share; \
                 read it before the run and pass it in the state{OPT_OUT}"
            ),
            (Scope::Node, Kind::Process) => format!(
                "`{what}` acts on the process outside the engine, and a recovery would do it again; do it \
                 before or after the run{OPT_OUT}"
            ),
            // File and network I/O is what nodes are for: not rejected (a lint on tokens cannot tell an
            // idempotent call from one that must not repeat).
            (Scope::Node, Kind::Io) => return,
            (Scope::Reducer, Kind::Clock) => format!(
                "reducers must be pure: `{what}` reads the wall clock; put the time in the delta (a node \
                 records it) instead"
            ),
            (Scope::Reducer, Kind::Random | Kind::Uuid) => format!(
                "reducers must be pure: `{what}` draws randomness; draw it in a node with `ctx.rng()` and \
                 put the value in the delta"
            ),
            (Scope::Reducer, Kind::Env | Kind::Process) => format!(
                "reducers must be pure: `{what}` touches the environment or the process; read it in a \
                 node (or before the run) and pass the value in the state"
            ),
            (Scope::Reducer, Kind::Io) => format!(
                "reducers must be pure: `{what}` does file or network I/O, repeated on every merge and \
                 replay; do it in a node and put the result in the delta"
            ),
        };
        self.errs.spanned(path, message);
    }

    /// Looks inside a macro's arguments when they parse as expressions or statements.
    fn visit_macro_body(&mut self, tokens: &TokenStream) {
        let parser = Punctuated::<Expr, Token![,]>::parse_terminated;
        if let Ok(exprs) = syn::parse::Parser::parse2(parser, tokens.clone()) {
            for e in &exprs {
                self.visit_expr(e);
            }
        } else if let Ok(stmts) = syn::parse::Parser::parse2(syn::Block::parse_within, tokens.clone()) {
            for s in &stmts {
                self.visit_stmt(s);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        self.report_path(&e.path);
        visit::visit_expr_path(self, e);
    }

    fn visit_expr_await(&mut self, e: &'ast syn::ExprAwait) {
        if self.scope == Scope::Reducer {
            self.errs.spanned(
                e.await_token,
                "reducers must be pure and synchronous: `.await` is not allowed in a merge; do async work \
                 in a node and put its result in the delta",
            );
        }
        visit::visit_expr_await(self, e);
    }

    fn visit_expr_async(&mut self, e: &'ast syn::ExprAsync) {
        if self.scope == Scope::Reducer {
            self.errs.spanned(
                e.async_token,
                "reducers must be pure and synchronous: no `async` blocks in a merge; do async work in a node",
            );
        }
        visit::visit_expr_async(self, e);
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        if self.scope == Scope::Reducer {
            self.errs.spanned(
                e.unsafe_token,
                "reducers must be pure: `unsafe` is not allowed in a merge; merge with safe code (the \
                 built-in strategies or plain field updates)",
            );
        }
        visit::visit_expr_unsafe(self, e);
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        if let syn::StaticMutability::Mut(m) = &s.mutability {
            let message = match self.scope {
                Scope::Node => {
                    "`static mut` is hidden state shared across runs, so a node's result depends on what ran \
                     before it; keep the value in the graph's state (a delta updates it) instead, or opt out \
                     with `#[node(impure = \"reason\")]`"
                }
                Scope::Reducer => {
                    "reducers must be pure: `static mut` is hidden state shared across merges; keep the \
                     value in the state instead"
                }
            };
            self.errs.spanned(m, message);
        }
        visit::visit_item_static(self, s);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let last = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        let first = m.path.segments.first().map(|s| s.ident.to_string()).unwrap_or_default();
        let prints = matches!(last.as_str(), "println" | "print" | "eprintln" | "eprint" | "dbg");
        let logs = matches!(last.as_str(), "info" | "warn" | "error" | "debug" | "trace" | "event")
            && (m.path.segments.len() == 1 || matches!(first.as_str(), "log" | "tracing"));
        if self.scope == Scope::Reducer && (prints || logs) {
            let what = m.path.to_token_stream().to_string().replace(' ', "");
            self.errs.spanned(
                &m.path,
                format!(
                    "reducers must be pure: `{what}!` runs again on every merge, replay and recovery; \
                     log in a node instead (the engine already logs merges and conflicts)"
                ),
            );
        }
        self.visit_macro_body(&m.tokens);
    }
}

/// What a path names, by its segments.
fn classify(segs: &[String]) -> Option<Kind> {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let last = *s.last()?;
    let last2 = if s.len() >= 2 { Some((s[s.len() - 2], last)) } else { None };
    let has = |name: &str| s.contains(&name);
    // A module segment (not the last one) that is either first or right after `std`/`tokio`/`async_std`.
    let module = |name: &str| {
        s[..s.len() - 1].iter().enumerate().any(|(i, seg)| {
            *seg == name && (i == 0 || matches!(s[i - 1], "std" | "core" | "tokio" | "async_std"))
        })
    };
    if let Some(pair) = last2 {
        match pair {
            ("SystemTime" | "Instant" | "Utc" | "Local", "now")
            | ("OffsetDateTime" | "PrimitiveDateTime", "now_utc" | "now_local") => return Some(Kind::Clock),
            ("Uuid", "new_v4" | "new_v7" | "now_v7" | "now_v1" | "now_v6") => return Some(Kind::Uuid),
            ("rand", "random" | "rng" | "thread_rng" | "random_range" | "random_bool") => {
                return Some(Kind::Random);
            }
            ("Command", "new") => return Some(Kind::Process),
            ("File", "open" | "create" | "create_new" | "options")
            | ("OpenOptions", "new")
            | ("TcpStream" | "UdpSocket" | "TcpListener" | "UnixStream", _)
            | ("io", "stdin" | "stdout" | "stderr") => return Some(Kind::Io),
            _ => {}
        }
    }
    if matches!(last, "thread_rng" | "from_entropy" | "from_os_rng" | "OsRng")
        || matches!(s[0], "fastrand" | "getrandom")
    {
        return Some(Kind::Random);
    }
    if module("env") {
        return Some(Kind::Env);
    }
    if module("process") {
        return Some(Kind::Process);
    }
    if module("fs") || module("net") || has("reqwest") || has("hyper") || has("ureq") {
        return Some(Kind::Io);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(block: syn::Block, scope: Scope) -> Vec<String> {
        let mut errs = Errors::default();
        check(&block, scope, &mut errs);
        errs.messages()
    }

    #[test]
    fn nodes_reject_ambient_nondeterminism() {
        let cases: Vec<(syn::Block, &str)> = vec![
            (
                syn::parse_quote!({
                    let t = std::time::SystemTime::now();
                }),
                "wall clock",
            ),
            (
                syn::parse_quote!({
                    let t = Instant::now();
                }),
                "wall clock",
            ),
            (
                syn::parse_quote!({
                    let t = chrono::Utc::now();
                }),
                "wall clock",
            ),
            (
                syn::parse_quote!({
                    let x: u8 = rand::random();
                }),
                "ctx.rng()",
            ),
            (
                syn::parse_quote!({
                    let r = rand::thread_rng();
                }),
                "ctx.rng()",
            ),
            (
                syn::parse_quote!({
                    let r = thread_rng();
                }),
                "ctx.rng()",
            ),
            (
                syn::parse_quote!({
                    let r = rand::rng();
                }),
                "ctx.rng()",
            ),
            (
                syn::parse_quote!({
                    let id = Uuid::new_v4();
                }),
                "ctx.uuid()",
            ),
            (
                syn::parse_quote!({
                    let v = std::env::var("X");
                }),
                "environment",
            ),
            (
                syn::parse_quote!({
                    let v = env::args();
                }),
                "environment",
            ),
            (
                syn::parse_quote!({
                    std::process::exit(1);
                }),
                "before or after the run",
            ),
            (
                syn::parse_quote!({
                    let c = Command::new("ls");
                }),
                "before or after the run",
            ),
            (
                syn::parse_quote!({
                    static mut N: u32 = 0;
                }),
                "static mut",
            ),
            (
                syn::parse_quote!({
                    let s = format!("{:?}", SystemTime::now());
                }),
                "wall clock",
            ),
            (
                syn::parse_quote!({
                    let f = || {
                        let _ = Instant::now();
                    };
                }),
                "wall clock",
            ),
        ];
        for (block, needle) in cases {
            let errs = run(block.clone(), Scope::Node);
            assert_eq!(errs.len(), 1, "{}: {errs:?}", block.to_token_stream());
            assert!(errs[0].contains(needle), "{errs:?}");
            assert!(errs[0].contains("impure = \\\"reason\\\"") || errs[0].contains("impure = \"reason\""));
        }
    }

    #[test]
    fn nodes_allow_deterministic_code() {
        let block: syn::Block = syn::parse_quote!({
            let n: u64 = ctx.rng().random();
            let d = std::time::Duration::from_secs(1);
            let v = env!("CARGO_PKG_NAME");
            let x = s.inputs.iter().map(|i| i * 2).sum::<u64>();
            let data = std::fs::read_to_string("x");
            tokio::time::sleep(d).await;
            println!("{x}");
        });
        assert!(run(block, Scope::Node).is_empty());
    }

    #[test]
    fn reducers_reject_effects() {
        let cases: Vec<(syn::Block, &str)> = vec![
            (
                syn::parse_quote!({
                    x.await;
                }),
                "`.await`",
            ),
            (syn::parse_quote!({ unsafe { f() } }), "`unsafe`"),
            (
                syn::parse_quote!({
                    println!("merge");
                }),
                "`println!`",
            ),
            (
                syn::parse_quote!({
                    tracing::info!("merge");
                }),
                "`tracing::info!`",
            ),
            (
                syn::parse_quote!({
                    let f = std::fs::read("x");
                }),
                "file or network",
            ),
            (
                syn::parse_quote!({
                    let f = File::open("x");
                }),
                "file or network",
            ),
            (
                syn::parse_quote!({
                    let s = TcpStream::connect("x");
                }),
                "file or network",
            ),
            (
                syn::parse_quote!({
                    let t = SystemTime::now();
                }),
                "wall clock",
            ),
            (
                syn::parse_quote!({
                    let t: u8 = rand::random();
                }),
                "randomness",
            ),
            (
                syn::parse_quote!({
                    let v = std::env::var("X");
                }),
                "environment",
            ),
            (
                syn::parse_quote!({
                    static mut N: u8 = 0;
                }),
                "static mut",
            ),
        ];
        for (block, needle) in cases {
            let errs = run(block.clone(), Scope::Reducer);
            assert_eq!(errs.len(), 1, "{}: {errs:?}", block.to_token_stream());
            assert!(errs[0].starts_with("reducers must be pure"), "{errs:?}");
            assert!(errs[0].contains(needle), "{errs:?}");
        }
    }

    #[test]
    fn reducers_allow_plain_merges() {
        let block: syn::Block = syn::parse_quote!({
            current.extend(written.into_iter().filter(|l| !l.is_empty()));
            let s = format!("{}", current.len());
            if current.len() > 10 {
                return Err(format!("too many: {s}"));
            }
            Ok(())
        });
        assert!(run(block, Scope::Reducer).is_empty());
    }
}
