//! Purity lints: walks node bodies and `#[reducer] fn` merge bodies (`syn::visit`) and rejects what makes
//! a reducer impure or a node non-deterministic, with the caret on the offending call and the
//! deterministic replacement in the message.
//!
//! Paths are resolved (`resolve.rs`) against the module's items and `use` items and, when the entry
//! point could read the source file (`source.rs`), the enclosing modules that `use super::*` reaches: an
//! alias (`use std::time::SystemTime as Clock`) is seen through, and the user's own `struct Instant` or
//! `mod env` is not mistaken for std's. From a node, calls into plain functions of the graph module (and
//! of inline modules inside it, and inherent associated functions there) are followed, transitively.
//!
//! Limits, stated honestly: this is a lint on tokens. It does not see functions of other files or
//! crates, trait methods, method calls on values (it does not know types), what a macro it cannot parse
//! expands to, or code a macro generates. It catches the common mistakes; it is not a proof of
//! determinism. `docs/macros.md` §6 lists what is and is not caught.

mod resolve;
pub(crate) mod source;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Expr, Item, Token};

use self::resolve::{Res, ScopeId, Scopes, StaticInfo};
pub(crate) use self::source::Surroundings;
use crate::diag::Errors;
use crate::graph::ast::GraphDef;

/// Which rules apply.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Rules {
    /// A `#[node]` body and the helpers it calls: deterministic outside `ctx`.
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

/// Checks every node of a graph (except `impure = "..."` ones) and the helper functions of the graph
/// module they reach. A helper is walked once, for the first node (in declaration order) that reaches
/// it, so each of its impure calls is reported once.
pub(crate) fn check_graph(g: &GraphDef, errs: &mut Errors) {
    let (scopes, module) = Scopes::for_module(&g.items, g.surroundings.as_ref());
    let nodes = g.nodes.iter().map(|n| n.name()).collect();
    let mut cx =
        Cx { scopes, errs, rules: Rules::Node, graph: Some((module, nodes)), walked: BTreeSet::new() };
    for n in g.nodes.iter().filter(|n| n.impure.is_none()) {
        let root = Target {
            scope: module,
            self_ty: None,
            sig: &n.func.sig,
            block: &n.func.block,
            chain: Vec::new(),
        };
        cx.walk_from(&n.name(), root);
    }
    // A router (`route = f`, a plain fn of the module) decides the route from the state alone: it is held
    // to the node rules whatever its node says, since a route that changes on replay changes the run.
    for n in &g.nodes {
        let Some(f) = n.router.as_ref().and_then(|r| r.get_ident()).and_then(|r| module_fn(&g.items, r))
        else {
            continue;
        };
        if cx.walked.insert(std::ptr::from_ref(&*f.block) as usize) {
            let root =
                Target { scope: module, self_ty: None, sig: &f.sig, block: &f.block, chain: Vec::new() };
            cx.walk_from(&f.sig.ident.to_string(), root);
        }
    }
}

/// The plain `fn` item named `name` in `items`.
fn module_fn<'a>(items: &'a [Item], name: &syn::Ident) -> Option<&'a syn::ItemFn> {
    items.iter().find_map(|i| match i {
        Item::Fn(f) if f.sig.ident == *name => Some(f),
        _ => None,
    })
}

/// Checks a `#[reducer] fn` merge body. Only the body: the functions it calls are in the file, outside
/// the macro's input, where an error could not point.
pub(crate) fn check_merge_fn(f: &syn::ItemFn, around: Option<&Surroundings>, errs: &mut Errors) {
    let (scopes, module) = Scopes::for_fn(around);
    let mut cx = Cx { scopes, errs, rules: Rules::Reducer, graph: None, walked: BTreeSet::new() };
    let root = Target { scope: module, self_ty: None, sig: &f.sig, block: &f.block, chain: Vec::new() };
    cx.walk_from(&f.sig.ident.to_string(), root);
}

/// A function to walk: a node or merge body, or a helper reached from one.
struct Target<'a> {
    /// The module it is declared in.
    scope: ScopeId,
    /// For an associated function, its type (`Self`).
    self_ty: Option<String>,
    sig: &'a syn::Signature,
    block: &'a syn::Block,
    /// The helpers from the root to this one (empty for the root).
    chain: Vec<String>,
}

/// What one invocation's walk shares.
struct Cx<'a, 'e> {
    scopes: Scopes<'a>,
    errs: &'e mut Errors,
    rules: Rules,
    /// The graph module and its node names (nodes are checked on their own, not followed).
    graph: Option<(ScopeId, BTreeSet<String>)>,
    /// Helpers already walked, by body address.
    walked: BTreeSet<usize>,
}

impl<'a> Cx<'a, '_> {
    /// Walks `root`, then the helpers it reaches, breadth first (so a message names the shortest chain).
    fn walk_from(&mut self, root_name: &str, root: Target<'a>) {
        let mut queue = VecDeque::from([root]);
        while let Some(t) = queue.pop_front() {
            let mut w = Walker::new(self, root_name, &t);
            w.visit_block(t.block);
            let found = std::mem::take(&mut w.found);
            for next in found {
                if self.walked.insert(std::ptr::from_ref(next.block) as usize) {
                    queue.push_back(next);
                }
            }
        }
    }
}

/// What a block declares: its items, and the statics of its `thread_local!` invocations.
type BlockScope = (Vec<Item>, Vec<(String, syn::Type)>);

/// Walks one function body.
struct Walker<'a, 'c, 'e> {
    cx: &'c mut Cx<'a, 'e>,
    /// The node or merge function the walk started from.
    root: &'c str,
    module: ScopeId,
    self_ty: Option<String>,
    chain: Vec<String>,
    /// Items and `thread_local!` statics declared in the enclosing blocks, innermost last.
    blocks: Vec<BlockScope>,
    /// Names bound by patterns in the function (parameters, `let`, closures, arms): a one-segment path
    /// with such a name is a local, not an item.
    locals: BTreeSet<String>,
    /// Locals holding `UNIX_EPOCH` or a recorded time (`let t = ctx.now();`).
    times: BTreeSet<String>,
    /// Statics already reported in this function.
    statics: BTreeSet<String>,
    /// Helpers this function reaches.
    found: Vec<Target<'a>>,
}

impl<'a, 'c, 'e> Walker<'a, 'c, 'e> {
    fn new(cx: &'c mut Cx<'a, 'e>, root: &'c str, t: &Target<'a>) -> Self {
        let mut locals = Locals(BTreeSet::new());
        locals.visit_signature(t.sig);
        locals.visit_block(t.block);
        Walker {
            cx,
            root,
            module: t.scope,
            self_ty: t.self_ty.clone(),
            chain: t.chain.clone(),
            blocks: Vec::new(),
            locals: locals.0,
            times: BTreeSet::new(),
            statics: BTreeSet::new(),
            found: Vec::new(),
        }
    }

    /// Resolves a path written in the body. `None` when its first segment is not found (the prelude, an
    /// extern crate, or something the macro cannot see): the caller then judges it as written.
    fn resolve(&self, segs: &[String], leading_colon: bool) -> Option<Res<'a>> {
        if leading_colon {
            return Some(Res::Path(segs.to_vec()));
        }
        let (first, rest) = segs.split_first()?;
        let start = match self.cx.scopes.start(self.module, first) {
            Some(found) => found?,
            None if first == "Self" => match &self.self_ty {
                Some(ty) => Res::Type(self.module, ty.clone()),
                None => Res::Opaque,
            },
            None => self.lookup(first, segs.len() == 1)?,
        };
        Some(self.cx.scopes.members(start, rest))
    }

    /// A first segment: locals, then the enclosing blocks' items, then the module.
    fn lookup(&self, name: &str, alone: bool) -> Option<Res<'a>> {
        if alone && self.locals.contains(name) {
            return Some(Res::Opaque);
        }
        for (items, tls) in self.blocks.iter().rev() {
            if let Some(r) = self.cx.scopes.lookup_block(self.module, items, tls, name) {
                return Some(r);
            }
        }
        self.cx.scopes.lookup(self.module, name)
    }

    /// Resolves an expression path, `<T>::f` and `<T as Trait>::f` included: (the path as written, its
    /// segments as written, what it names).
    fn resolve_expr(&self, e: &syn::ExprPath) -> Option<(String, Vec<String>, Option<Res<'a>>)> {
        let Some(q) = &e.qself else {
            let segs = idents(&e.path);
            let res = self.resolve(&segs, e.path.leading_colon.is_some());
            return Some((segs.join("::"), segs, res));
        };
        let syn::Type::Path(ty) = &*q.ty else { return None };
        if ty.qself.is_some() {
            return None;
        }
        let rest: Vec<String> =
            e.path.segments.iter().skip(q.position).map(|s| s.ident.to_string()).collect();
        let mut raw = idents(&ty.path);
        let res =
            self.resolve(&raw, ty.path.leading_colon.is_some()).map(|r| self.cx.scopes.members(r, &rest));
        raw.extend(rest);
        Some((tidy(&e.to_token_stream()), raw, res))
    }

    fn check_path(&mut self, e: &syn::ExprPath) {
        let Some((written, raw, res)) = self.resolve_expr(e) else { return };
        match res {
            None => self.report_call(&written, &raw, &raw, e),
            Some(Res::Path(p)) => self.report_call(&written, &raw, &p, e),
            Some(Res::Fn(scope, f)) => {
                let is_node = self
                    .cx
                    .graph
                    .as_ref()
                    .is_some_and(|(m, nodes)| *m == scope && nodes.contains(&f.sig.ident.to_string()));
                if self.cx.scopes.in_input(scope) && !is_node {
                    self.follow(scope, None, f.sig.ident.to_string(), &f.sig, &f.block);
                }
            }
            Some(Res::Assoc { scope, ty, name }) => {
                if self.cx.scopes.in_input(scope)
                    && let Some(f) = self.cx.scopes.inherent_fn(scope, &ty, &name)
                {
                    self.follow(scope, Some(ty.clone()), format!("{ty}::{name}"), &f.sig, &f.block);
                }
            }
            Some(Res::Static(s)) => self.report_static(&written, &s, e),
            Some(Res::Module(_) | Res::Type(..) | Res::Opaque) => {}
        }
    }

    fn follow(
        &mut self,
        scope: ScopeId,
        self_ty: Option<String>,
        name: String,
        sig: &'a syn::Signature,
        block: &'a syn::Block,
    ) {
        let mut chain = self.chain.clone();
        chain.push(name);
        self.found.push(Target { scope, self_ty, sig, block, chain });
    }

    /// `, called from node `n` through `a` -> `b`,` in a helper; empty in the root itself.
    fn via(&self, verb: &str) -> String {
        if self.chain.is_empty() {
            return String::new();
        }
        let chain: Vec<String> = self.chain.iter().map(|c| format!("`{c}`")).collect();
        format!(", {verb} from node `{}` through {},", self.root, chain.join(" -> "))
    }

    fn opt_out(&self) -> String {
        let on = if self.chain.is_empty() { String::new() } else { format!(" on `{}`", self.root) };
        format!(", or opt out with `#[node(impure = \"reason\")]`{on}")
    }

    /// Reports a call or value that `canonical` names, if it is one the rules reject. `raw`: the
    /// segments as written, to show the resolved path only when it says more.
    fn report_call(&mut self, written: &str, raw: &[String], canonical: &[String], tokens: &impl ToTokens) {
        let Some(kind) = classify(canonical) else { return };
        let what = if raw == canonical {
            format!("`{written}`")
        } else {
            format!("`{written}` (`{}`)", canonical.join("::"))
        };
        if let Some(message) = self.message(kind, &what) {
            self.cx.errs.spanned(tokens, message);
        }
    }

    fn message(&self, kind: Kind, what: &str) -> Option<String> {
        let (via, opt_out) = (self.via("called"), self.opt_out());
        Some(match (self.cx.rules, kind) {
            (Rules::Node, Kind::Clock) => format!(
                "{what}{via} reads the wall clock, which differs on every run and replay; use `ctx.now()`, \
                 the step's recorded time, which a retry, resume or replay reads back{opt_out}"
            ),
            (Rules::Node, Kind::Random) => format!(
                "{what}{via} draws ambient randomness, so a replay takes another path; use `ctx.rng()`, the \
                 run's deterministic stream (seeded per run, item and attempt){opt_out}"
            ),
            (Rules::Node, Kind::Uuid) => format!(
                "{what}{via} makes a random id, so a replay makes another; use `ctx.uuid()`, a v4 UUID \
                 drawn from the run's deterministic stream{opt_out}"
            ),
            (Rules::Node, Kind::Env) => format!(
                "{what}{via} reads the process environment, which a resumed or replayed run may not share; \
                 read it before the run and pass it in the state{opt_out}"
            ),
            (Rules::Node, Kind::Process) => format!(
                "{what}{via} acts on the process outside the engine, and a recovery would do it again; do it \
                 before or after the run{opt_out}"
            ),
            // File and network I/O is what nodes are for: not rejected (a lint on tokens cannot tell an
            // idempotent call from one that must not repeat).
            (Rules::Node, Kind::Io) => return None,
            (Rules::Reducer, Kind::Clock) => format!(
                "reducers must be pure: {what} reads the wall clock; put the time in the delta (a node \
                 records it) instead"
            ),
            (Rules::Reducer, Kind::Random | Kind::Uuid) => format!(
                "reducers must be pure: {what} draws randomness; draw it in a node with `ctx.rng()` and \
                 put the value in the delta"
            ),
            (Rules::Reducer, Kind::Env | Kind::Process) => format!(
                "reducers must be pure: {what} touches the environment or the process; read it in a \
                 node (or before the run) and pass the value in the state"
            ),
            (Rules::Reducer, Kind::Io) => format!(
                "reducers must be pure: {what} does file or network I/O, repeated on every merge and \
                 replay; do it in a node and put the result in the delta"
            ),
        })
    }

    /// A use of a static declared outside the body: shared mutable state when it is `static mut` or of
    /// an interior-mutable type. Once per static and function.
    fn report_static(&mut self, written: &str, s: &StaticInfo, tokens: &impl ToTokens) {
        if s.in_body || !(s.mutable || s.interior) || !self.statics.insert(written.to_owned()) {
            return;
        }
        let ty = &s.ty;
        let via = self.via("used");
        let what = match (s.mutable, s.thread_local) {
            (true, _) => format!("`{written}`{via} is a `static mut`"),
            (false, true) => format!("`{written}`{via} is a `thread_local!` of type `{ty}`"),
            (false, false) => format!("`{written}`{via} is a `static` of type `{ty}`"),
        };
        let message = match self.cx.rules {
            Rules::Node => format!(
                "{what}: mutable state that outlives the run and is shared with other runs, so a node's \
                 result depends on what ran before it; keep the value in the graph's state (a delta updates \
                 it) instead{}",
                self.opt_out()
            ),
            Rules::Reducer => format!(
                "reducers must be pure: {what}, hidden state shared across merges; keep the value in the \
                 state instead"
            ),
        };
        self.cx.errs.spanned(tokens, message);
    }

    /// The expression is `UNIX_EPOCH`, a recorded time (`ctx.now()`), or a local holding one: its
    /// `.elapsed()` reads the wall clock. (`SystemTime::now().elapsed()` is reported at `now`.)
    fn is_fixed_time(&self, e: &Expr) -> bool {
        match peel(e) {
            Expr::Path(p)
                if p.qself.is_none()
                    && p.path.get_ident().is_some_and(|i| self.times.contains(&i.to_string())) =>
            {
                true
            }
            Expr::Path(p) => match self.resolve_expr(p) {
                Some((_, raw, None)) => is_epoch(&raw),
                Some((_, _, Some(Res::Path(canonical)))) => is_epoch(&canonical),
                _ => false,
            },
            Expr::MethodCall(m) => m.method == "now" && m.args.is_empty(),
            _ => false,
        }
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

    /// A static declared in the body: `static mut`, or of an interior-mutable type.
    fn declared_static(&mut self, mutability: Option<&Token![mut]>, ty: &syn::Type) {
        let via = self.via("reached");
        let message = match (self.cx.rules, mutability) {
            (Rules::Node, Some(_)) => format!(
                "`static mut`{via} is hidden state shared across runs, so a node's result depends on what ran \
                 before it; keep the value in the graph's state (a delta updates it) instead{}",
                self.opt_out()
            ),
            (Rules::Node, None) => format!(
                "a `static` of type `{}`{via} is mutable state shared across runs, so a node's result depends \
                 on what ran before it; keep the value in the graph's state (a delta updates it) instead{}",
                tidy(&ty.to_token_stream()),
                self.opt_out()
            ),
            (Rules::Reducer, Some(_)) => "reducers must be pure: `static mut` is hidden state shared across \
                                          merges; keep the value in the state instead"
                .to_owned(),
            (Rules::Reducer, None) => format!(
                "reducers must be pure: a `static` of type `{}` is hidden state shared across merges; keep \
                 the value in the state instead",
                tidy(&ty.to_token_stream())
            ),
        };
        match mutability {
            Some(m) => self.cx.errs.spanned(m, message),
            None => self.cx.errs.spanned(ty, message),
        }
    }
}

impl<'ast> Visit<'ast> for Walker<'_, '_, '_> {
    fn visit_block(&mut self, b: &'ast syn::Block) {
        let items: Vec<Item> = b
            .stmts
            .iter()
            .filter_map(|s| match s {
                syn::Stmt::Item(i) => Some(i.clone()),
                _ => None,
            })
            .collect();
        let tls = b
            .stmts
            .iter()
            .flat_map(|s| match s {
                syn::Stmt::Macro(m) => resolve::thread_local_statics(&m.mac),
                syn::Stmt::Item(Item::Macro(m)) => resolve::thread_local_statics(&m.mac),
                _ => Vec::new(),
            })
            .collect();
        self.blocks.push((items, tls));
        visit::visit_block(self, b);
        self.blocks.pop();
    }

    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        self.check_path(e);
        visit::visit_expr_path(self, e);
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        let name = match &l.pat {
            syn::Pat::Ident(p) => Some(&p.ident),
            syn::Pat::Type(t) => match &*t.pat {
                syn::Pat::Ident(p) => Some(&p.ident),
                _ => None,
            },
            _ => None,
        };
        if let (Some(name), Some(init)) = (name, &l.init)
            && self.is_fixed_time(&init.expr)
        {
            self.times.insert(name.to_string());
        }
        visit::visit_local(self, l);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        // `ctx.effect(name, &request)...run(call)`: the call is the node's I/O zone, whose response is
        // journaled (a retry, resume or replay reads it back), so what it reads (the wall clock, a
        // client in a `static`) cannot change the run. The receiver (the request) is still the node's.
        if self.cx.rules == Rules::Node && is_effect_run(m) {
            self.visit_expr(&m.receiver);
            return;
        }
        if m.method == "elapsed" && m.args.is_empty() && self.is_fixed_time(&m.receiver) {
            let what = format!("`{}.elapsed()`", tidy(&m.receiver.to_token_stream()));
            let via = self.via("called");
            let message = match self.cx.rules {
                Rules::Node => format!(
                    "{what}{via} reads the wall clock (`elapsed` is the time from its receiver to now), \
                     which differs on every run and replay; take the time from `ctx.now()`, the step's \
                     recorded time, and subtract with `duration_since` (`ctx.now().duration_since(UNIX_EPOCH)`){}",
                    self.opt_out()
                ),
                Rules::Reducer => format!(
                    "reducers must be pure: {what} reads the wall clock; put the time in the delta (a node \
                     records it) instead"
                ),
            };
            self.cx.errs.spanned(&m.method, message);
        }
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_await(&mut self, e: &'ast syn::ExprAwait) {
        if self.cx.rules == Rules::Reducer {
            self.cx.errs.spanned(
                e.await_token,
                "reducers must be pure and synchronous: `.await` is not allowed in a merge; do async work \
                 in a node and put its result in the delta",
            );
        }
        visit::visit_expr_await(self, e);
    }

    fn visit_expr_async(&mut self, e: &'ast syn::ExprAsync) {
        if self.cx.rules == Rules::Reducer {
            self.cx.errs.spanned(
                e.async_token,
                "reducers must be pure and synchronous: no `async` blocks in a merge; do async work in a node",
            );
        }
        visit::visit_expr_async(self, e);
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        if self.cx.rules == Rules::Reducer {
            self.cx.errs.spanned(
                e.unsafe_token,
                "reducers must be pure: `unsafe` is not allowed in a merge; merge with safe code (the \
                 built-in strategies or plain field updates)",
            );
        }
        visit::visit_expr_unsafe(self, e);
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        match &s.mutability {
            syn::StaticMutability::Mut(m) => self.declared_static(Some(m), &s.ty),
            _ if resolve::interior_mutable(&s.ty) => self.declared_static(None, &s.ty),
            _ => {}
        }
        visit::visit_item_static(self, s);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let last = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        let first = m.path.segments.first().map(|s| s.ident.to_string()).unwrap_or_default();
        let prints = matches!(last.as_str(), "println" | "print" | "eprintln" | "eprint" | "dbg");
        let logs = matches!(last.as_str(), "info" | "warn" | "error" | "debug" | "trace" | "event")
            && (m.path.segments.len() == 1 || matches!(first.as_str(), "log" | "tracing"));
        if self.cx.rules == Rules::Reducer && (prints || logs) {
            let what = m.path.to_token_stream().to_string().replace(' ', "");
            self.cx.errs.spanned(
                &m.path,
                format!(
                    "reducers must be pure: `{what}!` runs again on every merge, replay and recovery; \
                     log in a node instead (the engine already logs merges and conflicts)"
                ),
            );
        }
        let tls = resolve::thread_local_statics(m);
        if !tls.is_empty() {
            for (_, ty) in tls.iter().filter(|(_, ty)| resolve::interior_mutable(ty)) {
                self.declared_static(None, ty);
            }
            return;
        }
        self.visit_macro_body(&m.tokens);
    }
}

/// Collects the names patterns bind.
struct Locals(BTreeSet<String>);

impl Visit<'_> for Locals {
    fn visit_pat_ident(&mut self, p: &syn::PatIdent) {
        self.0.insert(p.ident.to_string());
        visit::visit_pat_ident(self, p);
    }
}

/// `<receiver chain with .effect(..)>.run(..)`: the call that runs a journaled effect.
fn is_effect_run(m: &syn::ExprMethodCall) -> bool {
    if m.method != "run" {
        return false;
    }
    let mut r = &*m.receiver;
    loop {
        match peel(r) {
            Expr::MethodCall(inner) if inner.method == "effect" => return true,
            Expr::MethodCall(inner) => r = &inner.receiver,
            _ => return false,
        }
    }
}

fn idents(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// Tokens as a user would write them.
fn tidy(t: &TokenStream) -> String {
    t.to_string()
        .replace(" :: ", "::")
        .replace(" <", "<")
        .replace(":: ", "::")
        .replace(" ::", "::")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" . ", ".")
        .replace(" (", "(")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace("& ", "&")
}

fn peel(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => peel(&p.expr),
        Expr::Group(g) => peel(&g.expr),
        Expr::Reference(r) => peel(&r.expr),
        other => other,
    }
}

/// `UNIX_EPOCH`, `std::time::UNIX_EPOCH`, `SystemTime::UNIX_EPOCH`.
fn is_epoch(p: &[String]) -> bool {
    match p {
        [.., last] if last != "UNIX_EPOCH" => false,
        [_] => true,
        [.., m, _] => matches!(m.as_str(), "time" | "SystemTime"),
        [] => false,
    }
}

/// What a path names, by its segments (resolved when the resolver could, as written otherwise).
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
    const RAND_FNS: [&str; 9] = [
        "random",
        "rng",
        "thread_rng",
        "random_range",
        "random_bool",
        "random_ratio",
        "random_iter",
        "make_rng",
        "fill",
    ];
    if let Some(pair) = last2 {
        match pair {
            ("SystemTime" | "Instant" | "Utc" | "Local", "now")
            | ("OffsetDateTime" | "PrimitiveDateTime", "now_utc" | "now_local") => return Some(Kind::Clock),
            ("Uuid", "new_v4" | "new_v7" | "now_v7" | "now_v1" | "now_v6") => return Some(Kind::Uuid),
            ("rand", f) if RAND_FNS.contains(&f) => return Some(Kind::Random),
            ("Command", "new") => return Some(Kind::Process),
            ("File", "open" | "create" | "create_new" | "options")
            | ("OpenOptions", "new")
            | ("TcpStream" | "UdpSocket" | "TcpListener" | "UnixStream", _)
            | ("io", "stdin" | "stdout" | "stderr") => return Some(Kind::Io),
            _ => {}
        }
    }
    // `rand::prelude::random` (through a glob), `rand::rngs::SysRng`.
    if (s[0] == "rand" && RAND_FNS.contains(&last))
        || matches!(last, "thread_rng" | "from_entropy" | "from_os_rng" | "OsRng" | "SysRng")
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
