//! Tokens to [`GraphDef`]: finds the `#[node]` functions of the module and reads every option. Shape
//! mistakes are reported here (and skipped); graph rules are `check.rs`'s.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Item, ItemMod, Lit, LitStr, Meta};

use super::ast::{BackoffDef, GraphDef, NodeDef, Policy, Retry, Routing};
use crate::diag::Errors;
use crate::keywords::{self as kw, GRAPH, NODE};
use crate::options::{self, Options, Value};

/// Reads a `#[graph]` invocation. `None` when the item is not an inline module (reported).
pub(crate) fn parse(attr: TokenStream, item: ItemMod, errs: &mut Errors) -> Option<GraphDef> {
    let opts = options::parse(attr, &GRAPH, errs);
    let state = match opts.get(kw::STATE) {
        Some(o) => match &o.value {
            Value::Type(t) => Some((**t).clone()),
            _ => None,
        },
        None => {
            errs.at(
                Span::call_site(),
                "`#[graph]` needs the state type: write `#[graph(state = MyState)]` (a `#[reducer]` struct)",
            );
            None
        }
    };
    let name = match opts.expr(kw::NAME) {
        Some((_, e)) => match lit_str(e) {
            Some(s) if !s.value().is_empty() => s.value(),
            _ => {
                errs.at(e.span(), "`name` is a non-empty string: `name = \"my-graph\"`");
                item.ident.to_string()
            }
        },
        None => item.ident.to_string(),
    };
    let version = match opts.expr(kw::VERSION) {
        Some((_, e)) => match int(e) {
            Some(n @ 1..=0xFFFF_FFFF) => n as u32,
            _ => {
                errs.at(e.span(), "`version` is a whole number from 1: `version = 2`");
                1
            }
        },
        None => 1,
    };
    let module_path = |key: &str, help: &str, errs: &mut Errors| path_option(&opts, key, help, errs);
    let from = module_path(
        kw::MIGRATE_FROM,
        "`migrate_from` names the `#[graph]` module of the previous version: `migrate_from = v1`",
        errs,
    );
    let migrate = module_path(
        kw::MIGRATE,
        "`migrate` names the function mapping the previous version's state to this one's: `migrate = from_v1`",
        errs,
    );
    let migration = match (from, migrate) {
        (Some(from), Some(migrate)) => {
            if opts.get(kw::VERSION).is_none() {
                errs.at(
                    from.span(),
                    "a graph migrated from an earlier version declares its own version: add `version = 2` (above the earlier one's)",
                );
            }
            Some((from, migrate))
        }
        (Some(from), None) => {
            errs.at(
                from.span(),
                "`migrate_from` needs `migrate = f`, the function `fn(earlier::State) -> State` that maps a run's state",
            );
            None
        }
        (None, Some(migrate)) => {
            errs.at(
                migrate.span(),
                "`migrate` needs `migrate_from = module`, the `#[graph]` module of the version it migrates from",
            );
            None
        }
        (None, None) => None,
    };
    let Some((_, content)) = item.content.clone() else {
        errs.at(
            item.ident.span(),
            format!(
                "`#[graph]` needs an inline module: write `mod {} {{ ... }}` with the nodes inside",
                item.ident
            ),
        );
        return None;
    };
    let mut items = Vec::with_capacity(content.len());
    let mut nodes = Vec::new();
    for mut it in content {
        let index = items.len();
        match &mut it {
            Item::Fn(f) => {
                if let Some(attr) = take_node_attr(&mut f.attrs, errs) {
                    let func = f.clone();
                    nodes.push(parse_node(attr, func, index, errs));
                }
            }
            other => {
                if let Some(attrs) = item_attrs(other)
                    && let Some(attr) = take_node_attr(attrs, errs)
                {
                    errs.at(
                        attr.path().span(),
                        "`#[node]` goes on an `async fn` of the graph module, not on this item",
                    );
                }
            }
        }
        items.push(it);
    }
    Some(GraphDef { module: item, name, state, version, migration, items, nodes, surroundings: None })
}

/// Removes the `#[node(...)]` attributes of an item; a second one is a duplicate (both sites).
fn take_node_attr(attrs: &mut Vec<syn::Attribute>, errs: &mut Errors) -> Option<syn::Attribute> {
    let mut found: Option<syn::Attribute> = None;
    attrs.retain(|a| {
        if !is_node_attr(a) {
            return true;
        }
        match &found {
            Some(first) => errs.both(
                a.path().span(),
                "duplicate `#[node]` attribute: put every option in one `#[node(...)]`",
                first.path().span(),
                "first `#[node]` here",
            ),
            None => found = Some(a.clone()),
        }
        false
    });
    found
}

fn is_node_attr(a: &syn::Attribute) -> bool {
    a.path().segments.last().is_some_and(|s| s.ident == "node")
}

fn item_attrs(item: &mut Item) -> Option<&mut Vec<syn::Attribute>> {
    Some(match item {
        Item::Const(i) => &mut i.attrs,
        Item::Enum(i) => &mut i.attrs,
        Item::Impl(i) => &mut i.attrs,
        Item::Mod(i) => &mut i.attrs,
        Item::Static(i) => &mut i.attrs,
        Item::Struct(i) => &mut i.attrs,
        Item::Trait(i) => &mut i.attrs,
        Item::Type(i) => &mut i.attrs,
        Item::Use(i) => &mut i.attrs,
        _ => return None,
    })
}

fn attr_tokens(attr: &syn::Attribute, errs: &mut Errors) -> TokenStream {
    match &attr.meta {
        Meta::Path(_) => TokenStream::new(),
        Meta::List(l) => l.tokens.clone(),
        Meta::NameValue(nv) => {
            errs.at(nv.eq_token.span, "write `#[node(option, ...)]`, not `#[node = ...]`");
            TokenStream::new()
        }
    }
}

fn parse_node(attr: syn::Attribute, func: syn::ItemFn, item: usize, errs: &mut Errors) -> NodeDef {
    let opts = options::parse(attr_tokens(&attr, errs), &NODE, errs);
    let ident = func.sig.ident.clone();
    let entry = opts.get(kw::ENTRY).map(|o| o.key.clone());
    let before = errs.len();
    let (to, edges) = match opts.expr(kw::TO) {
        Some((key, e)) => (Some(key.clone()), parse_targets(e, errs)),
        None => (opts.get(kw::TO).map(|o| o.key.clone()), Vec::new()),
    };
    let edges_invalid = errs.len() != before || (to.is_some() && opts.expr(kw::TO).is_none());
    let impure = opts.expr(kw::IMPURE).and_then(|(_, e)| match lit_str(e) {
        Some(s) if !s.value().trim().is_empty() => Some(s.clone()),
        _ => {
            errs.at(
                e.span(),
                "`impure` needs the reason as a non-empty string: `impure = \"calls the legacy clock API\"`",
            );
            None
        }
    });
    let policy = parse_policy(&opts, errs);
    let routing = classify_return(&func.sig);
    let router = opts.expr(kw::ROUTE).and_then(|(_, e)| match e {
        Expr::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        other => {
            errs.at(
                other.span(),
                "`route` names a router function `fn(&State) -> node::Next`: `route = my_router`",
            );
            None
        }
    });
    let path_of = |key: &str, help: &str, errs: &mut Errors| path_option(&opts, key, help, errs);
    let subgraph = path_of(
        kw::SUBGRAPH,
        "`subgraph` names the `#[graph]` module of the child graph: `subgraph = research`",
        errs,
    );
    let output = path_of(
        kw::OUTPUT,
        "`output` names the function mapping the child's final state to this graph's delta: `output = merge_research`",
        errs,
    );
    let on_error = opts.expr(kw::ON_ERROR).and_then(|(_, e)| match e {
        Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => p.path.get_ident().cloned(),
        other => {
            errs.at(other.span(), "`on_error` names the node of this graph that handles this node's failures: `on_error = handler`");
            None
        }
    });
    let routing = if subgraph.is_some() { Routing::Static } else { routing };
    let wait_for_key = opts.get(kw::WAIT_FOR).map(|o| o.key.clone());
    let wait_for = opts.expr(kw::WAIT_FOR).map(|(_, e)| parse_targets(e, errs)).unwrap_or_default();
    NodeDef {
        ident,
        item,
        func,
        entry,
        to,
        edges,
        edges_invalid,
        policy,
        impure,
        router,
        wait_for,
        wait_for_key,
        interrupt_before: opts.get(kw::INTERRUPT_BEFORE).is_some(),
        interrupt_after: opts.get(kw::INTERRUPT_AFTER).is_some(),
        routing,
        subgraph,
        subgraph_key: opts.get(kw::SUBGRAPH).map(|o| o.key.clone()),
        output,
        output_key: opts.get(kw::OUTPUT).map(|o| o.key.clone()),
        on_error,
    }
}

/// `to = a` or `to = [a, b, END]`.
fn parse_targets(e: &Expr, errs: &mut Errors) -> Vec<Ident> {
    let elems: Vec<&Expr> = match e {
        Expr::Array(a) => a.elems.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for el in elems {
        match el {
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                out.extend(p.path.get_ident().cloned());
            }
            other => errs.at(other.span(), "an edge names a node of this graph or `END`: `to = [next, END]`"),
        }
    }
    out
}

fn parse_policy(opts: &Options, errs: &mut Errors) -> Policy {
    let mut policy = Policy::default();
    if let Some((_, e)) = opts.expr(kw::TIMEOUT) {
        policy.timeout_ms = duration_ms(e, "timeout", errs);
    }
    if let Some((_, e)) = opts.expr(kw::MAX_CONCURRENCY) {
        policy.max_concurrency = match int(e) {
            Some(n) if n >= 1 => usize::try_from(n).ok(),
            _ => {
                errs.at(e.span(), "`max_concurrency` is an integer of at least 1: `max_concurrency = 4`");
                None
            }
        };
    }
    if let Some(o) = opts.get(kw::RETRY)
        && let Value::Nested(r) = &o.value
    {
        policy.retry = Some(parse_retry(r, errs));
    }
    policy
}

fn parse_retry(opts: &Options, errs: &mut Errors) -> Retry {
    let mut retry = Retry::default();
    if let Some((_, e)) = opts.expr(kw::ATTEMPTS) {
        retry.attempts = match int(e) {
            Some(n) if n >= 1 => u32::try_from(n).ok(),
            _ => None,
        };
        if retry.attempts.is_none() {
            errs.at(
                e.span(),
                "`attempts` counts every attempt, the first included: an integer of at least 1",
            );
        }
    }
    if let Some((_, e)) = opts.expr(kw::JITTER) {
        retry.jitter = match e {
            Expr::Lit(ExprLit { lit: Lit::Float(f), .. }) => f.base10_parse::<f64>().ok(),
            Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<u8>().ok().map(f64::from),
            _ => None,
        }
        .filter(|j| (0.0..=1.0).contains(j));
        if retry.jitter.is_none() {
            errs.at(
                e.span(),
                "`jitter` is the fraction of the delay that may be removed, in [0, 1]: `jitter = 0.25`",
            );
        }
    }
    if let Some((_, e)) = opts.expr(kw::BACKOFF) {
        retry.backoff = parse_backoff(e, errs);
    }
    if !opts.has(kw::ATTEMPTS) && !opts.list.is_empty() {
        errs.at(
            opts.list[0].key.span(),
            "`retry(...)` needs the number of attempts: `retry(attempts = 3, ...)`",
        );
    }
    retry
}

fn parse_backoff(e: &Expr, errs: &mut Errors) -> Option<BackoffDef> {
    const HELP: &str = "`backoff` is `fixed(\"100ms\")` or `exponential(\"10ms\", \"5s\")` (initial, cap)";
    let Expr::Call(call) = e else {
        errs.at(e.span(), HELP);
        return None;
    };
    let name = match &*call.func {
        Expr::Path(p) => p.path.get_ident().map(ToString::to_string),
        _ => None,
    };
    let args: Vec<&Expr> = call.args.iter().collect();
    match (name.as_deref(), args.as_slice()) {
        (Some("fixed"), [d]) => Some(BackoffDef::Fixed(duration_ms(d, "backoff", errs)?)),
        (Some("exponential"), [a, b]) => {
            let (a, b) = (duration_ms(a, "backoff", errs), duration_ms(b, "backoff", errs));
            Some(BackoffDef::Exponential(a?, b?))
        }
        _ => {
            errs.at(call.func.span(), HELP);
            None
        }
    }
}

fn duration_ms(e: &Expr, what: &str, errs: &mut Errors) -> Option<u64> {
    let parsed = lit_str(e).and_then(|s| parse_duration_ms(&s.value()));
    if parsed.is_none() {
        errs.at(
            e.span(),
            format!(
                "`{what}` takes a duration string such as \"250ms\", \"30s\", \"5m\", \"1h\" or \"1m30s\""
            ),
        );
    }
    parsed
}

/// "250ms", "30s", "5m", "1h", "1m30s" to milliseconds.
pub(crate) fn parse_duration_ms(s: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(factor)?)?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

/// The option `key` as a path (`subgraph = research`, `migrate = from_v1`); anything else is reported
/// at its token with `help`.
fn path_option(opts: &Options, key: &str, help: &str, errs: &mut Errors) -> Option<syn::Path> {
    opts.expr(key).and_then(|(_, e)| match e {
        Expr::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        other => {
            errs.at(other.span(), help);
            None
        }
    })
}

fn lit_str(e: &Expr) -> Option<&LitStr> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Some(s),
        _ => None,
    }
}

fn int(e: &Expr) -> Option<u64> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse().ok(),
        _ => None,
    }
}

/// Reads the routing out of `-> NodeResult<S>`, `-> NodeResult<S, x::Next>`, `-> NodeResult<S, x::Fork>`.
pub(crate) fn classify_return(sig: &syn::Signature) -> Routing {
    let Some(args) = node_result_args(sig) else { return Routing::Invalid };
    match args.as_slice() {
        [_] => Routing::Static,
        [_, syn::Type::Path(p)] if p.qself.is_none() => {
            let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
            match segs.as_slice() {
                [one] if one.ident == "Static" => Routing::Static,
                [prefix, last] if last.arguments.is_empty() && last.ident == "Next" => {
                    Routing::Next { prefix: prefix.ident.clone() }
                }
                [prefix, last] if last.arguments.is_empty() && last.ident == "Fork" => {
                    Routing::Fork { prefix: prefix.ident.clone() }
                }
                _ => Routing::Invalid,
            }
        }
        _ => Routing::Invalid,
    }
}

/// The type arguments of a `NodeResult<..>` return type.
pub(crate) fn node_result_args(sig: &syn::Signature) -> Option<Vec<&syn::Type>> {
    let syn::ReturnType::Type(_, ty) = &sig.output else { return None };
    let syn::Type::Path(p) = &**ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "NodeResult" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else { return None };
    a.args
        .iter()
        .map(|g| match g {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("250ms"), Some(250));
        assert_eq!(parse_duration_ms("30s"), Some(30_000));
        assert_eq!(parse_duration_ms("1m30s"), Some(90_000));
        assert_eq!(parse_duration_ms("2h"), Some(7_200_000));
        assert_eq!(parse_duration_ms("5"), None);
        assert_eq!(parse_duration_ms("s"), None);
        assert_eq!(parse_duration_ms("5 days"), None);
        assert_eq!(parse_duration_ms(""), None);
    }

    #[test]
    fn return_types() {
        let s: syn::Signature = syn::parse_quote!(async fn a(s: &S, c: &mut Ctx) -> NodeResult<S>);
        assert!(matches!(classify_return(&s), Routing::Static));
        let s: syn::Signature = syn::parse_quote!(async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, a::Next>);
        assert!(matches!(classify_return(&s), Routing::Next { prefix } if prefix == "a"));
        let s: syn::Signature = syn::parse_quote!(async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, a::Fork>);
        assert!(matches!(classify_return(&s), Routing::Fork { .. }));
        let s: syn::Signature = syn::parse_quote!(async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, Route>);
        assert!(matches!(classify_return(&s), Routing::Invalid));
        let s: syn::Signature =
            syn::parse_quote!(async fn a(s: &S, c: &mut Ctx) -> Result<SDelta, NodeError>);
        assert!(matches!(classify_return(&s), Routing::Invalid));
    }
}
