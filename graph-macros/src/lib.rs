//! Procedural macros for `graph-runtime`: `#[graph]`, `#[node]`, `#[reducer]`. Use them through the
//! runtime's re-exports (`graph_runtime::prelude::*`); the generated code names the runtime as
//! `::graph_runtime::__private`.
//!
//! Each entry point converts tokens and hands them to a front end that never touches `proc_macro`
//! (`graph/`, `reducer/`), so every check is unit-tested with `syn::parse_quote!`. See `docs/macros.md`.
//! The one other thing read here is the invocation's source file (`source_file`), as `syn` data.

use proc_macro::TokenStream;

mod debug;
mod diag;
mod graph;
mod keywords;
mod options;
mod purity;
mod reducer;

/// Declares a workflow graph over an inline module of `#[node]` async functions.
///
/// `#[graph(state = MyState)]` (optionally `name = "..."`) on `mod my_graph { ... }` checks the graph at
/// compile time and generates `my_graph::graph()`, `my_graph::FINGERPRINT`, `my_graph::mermaid()`,
/// `my_graph::dot()`, and a `Next` enum / `Fork` builder per routing node. See `docs/macros.md`.
#[proc_macro_attribute]
pub fn graph(attr: TokenStream, item: TokenStream) -> TokenStream {
    graph::expand(attr.into(), item.into(), source_file()).into()
}

/// Marks an async function of a `#[graph]` module as a node: `#[node(entry, to = [a, END], timeout = "5s",
/// retry(attempts = 3), max_concurrency = 2, impure = "reason")]`.
///
/// Outside a `#[graph]` module it is an error (the graph owns its nodes).
#[proc_macro_attribute]
pub fn node(attr: TokenStream, item: TokenStream) -> TokenStream {
    graph::node_outside_graph(attr.into(), item.into()).into()
}

/// On a state struct: generates its `Delta` type and `Reducer` impl, with `#[reduce(...)]` field
/// strategies. On a free function: marks a custom field merge and checks that it is pure.
#[proc_macro_attribute]
pub fn reducer(attr: TokenStream, item: TokenStream) -> TokenStream {
    reducer::expand(attr.into(), item.into(), source_file).into()
}

/// A field strategy of a `#[reducer]` struct (`#[reduce(append)]`). Anywhere else it is an error: the
/// `#[reducer]` macro consumes it.
#[proc_macro_attribute]
pub fn reduce(attr: TokenStream, item: TokenStream) -> TokenStream {
    reducer::reduce_outside_reducer(attr.into(), item.into()).into()
}

/// The source file the invocation is in, parsed, and whether it is a crate root. A macro receives only
/// its item; the purity lints read the file to see the `use` items and names around it (what
/// `use super::*` brings into a graph module). `None` when the file cannot be read or parsed (a tool
/// that gives no file, a call site inside another macro's expansion): the lints then see the item alone,
/// which is never an error.
fn source_file() -> Option<(syn::File, bool)> {
    let path = proc_macro::Span::call_site().local_file()?;
    let text = std::fs::read_to_string(&path).ok()?;
    let file = syn::parse_file(&text).ok()?;
    let root = purity::source::is_crate_root(&path, &file);
    Some((file, root))
}
