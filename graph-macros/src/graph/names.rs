//! The names `#[graph]` adds to the user's module, and how they keep the user's paths resolving.
//!
//! Generated items are explicit items of the graph module, so they win over everything a path could
//! otherwise mean there: glob imports (`use super::*`), the extern prelude (crates) and the std prelude.
//! What can be hidden, and what this module does about it:
//!
//! - A routing module `pub mod <node>` (for `<node>::Next` / `<node>::Fork`, type namespace) hides a crate
//!   or a module of the same name: with a node `tokio`, `tokio::time::sleep` would look for `time` in the
//!   routing module. The routing module therefore *stands in* for what the name meant ([`StandIn`]): it
//!   glob-imports it (`pub(super) use ::tokio::*;`), and since an explicit item wins over a glob import,
//!   `tokio::Next` is the route while `tokio::time::sleep` reaches the crate. What the name meant is, in
//!   order: the module's own inline `mod <node> { .. }` (the routing items are added to it); the module's
//!   own `use ... <node>` (the binding moves into the routing module, which re-exports its target); an
//!   item of the enclosing module that `use super::*` imports (read from the source file); otherwise a
//!   crate. The last three only when the module's code writes `<node>::<something else>`, since a glob
//!   of a crate that does not exist would not compile.
//! - `graph()`, `mermaid()`, `dot()` and `FINGERPRINT` (value namespace) hide a function or constant of
//!   the same name that `use super::*` imports. They are the graph's API and cannot move, so a call that
//!   would silently reach them instead is an error that says to write `super::dot(..)`; an item of the
//!   module itself with one of these names is an error too (rustc would report a duplicate definition
//!   at the `#[graph]` attribute).
//! - The node handlers of `graph()` are local to one block each, where the only user tokens are the state
//!   type and the node's routing path; their name is chosen to differ from every identifier in those
//!   (`expand::handler_name`).
//!
//! Routing modules no longer name the state (their `Routing` impls are generic over it), so no
//! `__GraphState` alias is generated.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::visit::Visit;
use syn::{Item, UseTree, Visibility};

use super::ast::GraphDef;
use super::paths::{Rooted, rooted_paths};

/// The value-namespace items the graph module defines: name, as written in messages, what it is.
pub(crate) const API_VALUES: &[(&str, &str, &str)] = &[
    ("graph", "`graph()`", "the graph's description"),
    ("mermaid", "`mermaid()`", "the graph as a Mermaid flowchart"),
    ("dot", "`dot()`", "the graph as Graphviz DOT"),
    ("FINGERPRINT", "`FINGERPRINT`", "the graph's fingerprint"),
];

/// A name of [`API_VALUES`] the user's code also uses for something else.
pub(crate) struct Hidden {
    /// The API item's name.
    pub(crate) name: &'static str,
    pub(crate) span: proc_macro2::Span,
    pub(crate) message: String,
}

/// How the routing modules coexist with the user's names.
#[derive(Default)]
pub(crate) struct Plan {
    /// Per routing module (the node's name): what it stands in for.
    pub(crate) stand_ins: BTreeMap<String, StandIn>,
    /// `use` items of the module with a binding moved into a routing module: item index to what is
    /// left of the item (`None`: nothing).
    pub(crate) uses: BTreeMap<usize, Option<syn::ItemUse>>,
}

/// What a routing module stands in for.
pub(crate) enum StandIn {
    /// A glob import inside the generated module (`pub(super) use ::tokio::*;`).
    Glob(TokenStream),
    /// The user's own inline `mod <node> { .. }` at this item index: the routing items are added to it.
    Merge(usize),
}

/// The plan for the routing modules named `modules`.
pub(crate) fn plan(g: &GraphDef, modules: &BTreeSet<String>) -> Plan {
    let mut plan = Plan::default();
    let paths = rooted_paths(&in_scope(&g.items));
    let parent = enclosing(g);
    for name in modules {
        if let Some(i) = g
            .items
            .iter()
            .position(|it| matches!(it, Item::Mod(m) if m.ident == name.as_str() && m.content.is_some()))
        {
            plan.stand_ins.insert(name.clone(), StandIn::Merge(i));
            continue;
        }
        if let Some(glob) = move_use(g, name, modules, parent, &mut plan.uses) {
            plan.stand_ins.insert(name.clone(), StandIn::Glob(glob));
            continue;
        }
        // The name as first written: if what it names cannot be found, rustc's error is at that use.
        let Some(ident) = paths.iter().find(|p| names_other_than_routes(p, name)).map(|p| &p.segments[0])
        else {
            continue;
        };
        let glob = match parent.and_then(|items| type_item(items, name)) {
            Some(TypeItem::Globbable) => quote!(pub(super) use super::super::#ident::*;),
            // A struct, trait or alias of the enclosing module (lowercase, so rare): its associated items
            // cannot be glob-imported. Nothing is generated; rustc reports the path.
            Some(TypeItem::Other) => continue,
            // A function or block of the module imports the name itself (`use std::mem;` in a body):
            // there the paths mean that import, and a glob of a crate of that name may not compile.
            None if imported_inside(&g.items, name) => continue,
            None => quote!(pub(super) use ::#ident::*;),
        };
        plan.stand_ins.insert(name.clone(), StandIn::Glob(glob));
    }
    plan
}

/// The items whose paths are resolved in the graph module's scope: all but the inline modules inside it,
/// which have their own, except those that glob-import it (`use super::*`), taken the same way.
fn in_scope(items: &[Item]) -> Vec<Item> {
    items
        .iter()
        .filter_map(|item| match item {
            Item::Mod(m) => {
                let (brace, inner) = m.content.as_ref()?;
                let globs = inner.iter().any(|i| matches!(i, Item::Use(u) if globs_super(&u.tree)));
                globs.then(|| {
                    let mut m = m.clone();
                    m.content = Some((*brace, in_scope(inner)));
                    Item::Mod(m)
                })
            }
            other => Some(other.clone()),
        })
        .collect()
}

/// A `use` below the module's top level (in a function body, an inline module) binds `name`.
fn imported_inside(items: &[Item], name: &str) -> bool {
    struct Finder<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
            self.found |= binds(&u.tree, self.name, None);
        }
    }
    let mut f = Finder { name, found: false };
    for item in items {
        match item {
            // The module's own `use` items are handled by `move_use`.
            Item::Use(_) => {}
            other => f.visit_item(other),
        }
    }
    f.found
}

/// `name::x` with `x` other than the routing items.
fn names_other_than_routes(p: &Rooted, name: &str) -> bool {
    p.segments[0] == name && p.segments[1] != "Next" && p.segments[1] != "Fork"
}

/// The items of the enclosing module, when the graph module imports them with `use super::*` and the
/// source file could be read.
fn enclosing(g: &GraphDef) -> Option<&[Item]> {
    let globs_super = g.items.iter().any(|i| match i {
        Item::Use(u) => u.leading_colon.is_none() && globs_super(&u.tree),
        _ => false,
    });
    if globs_super { g.surroundings.as_ref().map(crate::purity::Surroundings::enclosing_items) } else { None }
}

fn globs_super(tree: &UseTree) -> bool {
    match tree {
        UseTree::Path(p) if p.ident == "super" => match &*p.tree {
            UseTree::Glob(_) => true,
            UseTree::Group(g) => g.items.iter().any(|t| matches!(t, UseTree::Glob(_))),
            _ => false,
        },
        _ => false,
    }
}

enum TypeItem {
    /// A module, an enum, a crate or an import: `use it::*` works.
    Globbable,
    /// A struct, union, trait or type alias.
    Other,
}

/// What `items` declare as `name` in the type namespace.
fn type_item(items: &[Item], name: &str) -> Option<TypeItem> {
    items.iter().find_map(|item| match item {
        Item::Mod(m) if m.ident == name => Some(TypeItem::Globbable),
        Item::Enum(e) if e.ident == name => Some(TypeItem::Globbable),
        Item::ExternCrate(c) if c.rename.as_ref().map_or(&c.ident, |(_, r)| r) == name => {
            Some(TypeItem::Globbable)
        }
        Item::Use(u) if binds(&u.tree, name, None) => Some(TypeItem::Globbable),
        Item::Struct(s) if s.ident == name => Some(TypeItem::Other),
        Item::Union(s) if s.ident == name => Some(TypeItem::Other),
        Item::Trait(s) if s.ident == name => Some(TypeItem::Other),
        Item::Type(s) if s.ident == name => Some(TypeItem::Other),
        _ => None,
    })
}

/// `tree` binds `name` (not through a glob). `parent` is the last segment before `tree`.
fn binds(tree: &UseTree, name: &str, parent: Option<&Ident>) -> bool {
    match tree {
        UseTree::Path(p) => binds(&p.tree, name, Some(&p.ident)),
        UseTree::Name(n) if n.ident == "self" => parent.is_some_and(|p| p == name),
        UseTree::Name(n) => n.ident == name,
        UseTree::Rename(r) => r.rename == name,
        UseTree::Glob(_) => false,
        UseTree::Group(g) => g.items.iter().any(|t| binds(t, name, parent)),
    }
}

/// Moves the module's `use ... name` binding (if any) out of its `use` item: the routing module
/// re-exports its target with a glob, with the item's attributes and an equivalent visibility.
fn move_use(
    g: &GraphDef,
    name: &str,
    modules: &BTreeSet<String>,
    parent: Option<&[Item]>,
    uses: &mut BTreeMap<usize, Option<syn::ItemUse>>,
) -> Option<TokenStream> {
    for (i, item) in g.items.iter().enumerate() {
        let Item::Use(original) = item else { continue };
        // A `use` item may bind several routing modules' names (`use std::{fs, io};`): take them one by
        // one from what is left of it.
        let mut rest = match uses.get(&i) {
            Some(None) => continue,
            Some(Some(left)) => left.clone(),
            None => original.clone(),
        };
        let mut prefix = Vec::new();
        let Some(path) = take_binding(&mut rest.tree, name, &mut prefix) else { continue };
        uses.insert(i, if empty(&rest.tree) { None } else { Some(rest) });
        let spelled = spell(&path, original.leading_colon.is_some(), g, modules, parent);
        let vis = vis_one_level_down(&original.vis);
        let attrs = &original.attrs;
        return Some(quote!(#(#attrs)* #vis use #spelled::*;));
    }
    None
}

/// Removes the binding of `name` from `tree`; returns the path it imported. `prefix` is the path so far.
fn take_binding(tree: &mut UseTree, name: &str, prefix: &mut Vec<Ident>) -> Option<Vec<Ident>> {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.clone());
            let found = take_binding(&mut p.tree, name, prefix);
            prefix.pop();
            found
        }
        UseTree::Name(n) if n.ident == "self" && prefix.last().is_some_and(|l| l == name) => {
            let path = prefix.clone();
            *tree = nothing();
            Some(path)
        }
        UseTree::Name(n) if n.ident == name => {
            let mut path = prefix.clone();
            path.push(n.ident.clone());
            *tree = nothing();
            Some(path)
        }
        UseTree::Rename(r) if r.rename == name => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.clone());
            }
            *tree = nothing();
            Some(path)
        }
        UseTree::Group(grp) => {
            let mut found = None;
            for t in grp.items.iter_mut() {
                if found.is_none() {
                    found = take_binding(t, name, prefix);
                }
            }
            let kept: syn::punctuated::Punctuated<UseTree, syn::Token![,]> =
                std::mem::take(&mut grp.items).into_iter().filter(|t| !empty(t)).collect();
            grp.items = kept;
            found
        }
        _ => None,
    }
}

/// An empty group: what is left of a tree whose only binding moved.
fn nothing() -> UseTree {
    UseTree::Group(syn::UseGroup { brace_token: Default::default(), items: Default::default() })
}

fn empty(tree: &UseTree) -> bool {
    match tree {
        UseTree::Path(p) => empty(&p.tree),
        UseTree::Group(g) => g.items.iter().all(empty),
        _ => false,
    }
}

/// A path of a `use` item of the graph module, spelled from inside a routing module (one level down).
fn spell(
    path: &[Ident],
    leading_colon: bool,
    g: &GraphDef,
    modules: &BTreeSet<String>,
    parent: Option<&[Item]>,
) -> TokenStream {
    let Some((first, rest)) = path.split_first() else { return quote!(super) };
    if leading_colon {
        return quote!(:: #first #(:: #rest)*);
    }
    let first_name = first.to_string();
    if first_name == "crate" {
        return quote!(#first #(:: #rest)*);
    }
    if first_name == "self" {
        return quote!(super #(:: #rest)*);
    }
    // `super::x` of the graph module is `super::super::x` here; a name the graph module sees (its items
    // and imports, the routing modules, what `use super::*` imports) is `super::name`; anything else is a
    // crate.
    let seen_by_module = first_name == "super"
        || modules.contains(&first_name)
        || type_item(&g.items, &first_name).is_some()
        || parent.is_some_and(|items| type_item(items, &first_name).is_some());
    if seen_by_module { quote!(super :: #first #(:: #rest)*) } else { quote!(:: #first #(:: #rest)*) }
}

/// The visibility, written one module further down, that reaches as far as `vis` does from the graph
/// module.
fn vis_one_level_down(vis: &Visibility) -> TokenStream {
    match vis {
        Visibility::Public(_) => quote!(pub),
        Visibility::Inherited => quote!(pub(super)),
        Visibility::Restricted(r) => {
            let path = &r.path;
            let rest: Vec<&Ident> = path.segments.iter().skip(1).map(|s| &s.ident).collect();
            match path.segments.first().map(|s| s.ident.to_string()).as_deref() {
                Some("crate") => quote!(#vis),
                Some("self") if rest.is_empty() => quote!(pub(super)),
                Some("self") => quote!(pub(in super #(:: #rest)*)),
                _ => quote!(pub(in super::#path)),
            }
        }
    }
}

/// The API items (`graph`, `mermaid`, `dot`, `FINGERPRINT`) the module's own items also declare (nodes
/// are checked as reserved names), and the uses of one the enclosing module declares that `use super::*`
/// would have reached.
pub(crate) fn hidden_values(g: &GraphDef) -> Vec<Hidden> {
    let mut found = Vec::new();
    let nodes: BTreeSet<String> = g.nodes.iter().map(|n| n.name()).collect();
    for item in &g.items {
        let (ident, kind) = match item {
            Item::Fn(f) if !nodes.contains(&f.sig.ident.to_string()) => (&f.sig.ident, "function"),
            Item::Const(c) => (&c.ident, "constant"),
            Item::Static(s) => (&s.ident, "static"),
            _ => continue,
        };
        if let Some((name, shown, what)) = API_VALUES.iter().find(|(n, ..)| ident == n) {
            found.push(Hidden {
                name,
                span: ident.span(),
                message: format!(
                    "the graph module cannot have its own `{name}`: `#[graph]` generates {shown} there ({what}); \
                     rename this {kind}"
                ),
            });
        }
    }
    let Some(parent) = enclosing(g) else { return found };
    let outer: Vec<&(&str, &str, &str)> = API_VALUES.iter().filter(|(n, ..)| value_item(parent, n)).collect();
    if outer.is_empty() {
        return found;
    }
    let mut uses =
        Uses { names: outer.iter().map(|(n, ..)| *n).collect(), locals: Vec::new(), found: Vec::new() };
    for item in &g.items {
        uses.visit_item(item);
    }
    for ident in uses.found {
        let (name, shown, what) = outer.iter().find(|(n, ..)| ident == n).expect("searched for");
        let (outer_call, own_call) = if *name == "FINGERPRINT" {
            (format!("`super::{name}`"), format!("`self::{name}`"))
        } else {
            (format!("`super::{name}(..)`"), format!("`self::{name}()`"))
        };
        found.push(Hidden {
            name,
            span: ident.span(),
            message: format!(
                "`{name}` here is the graph module's generated {shown} ({what}), which hides the `{name}` that \
                 `use super::*` imports from the enclosing module; write {outer_call} to reach that one, or \
                 {own_call} for the generated one"
            ),
        });
    }
    found
}

/// `items` declare (or import) `name` as a function, constant or static.
fn value_item(items: &[Item], name: &str) -> bool {
    items.iter().any(|item| match item {
        Item::Fn(f) => f.sig.ident == name,
        Item::Const(c) => c.ident == name,
        Item::Static(s) => s.ident == name,
        Item::Use(u) => binds(&u.tree, name, None),
        _ => false,
    })
}

/// Calls of `names` (`dot(..)`) and, for constants, plain uses (`FINGERPRINT`), by one-segment paths
/// that no pattern of the enclosing function binds (a local `let dot = ..` is not the item).
struct Uses<'n> {
    names: Vec<&'n str>,
    /// The names bound in each enclosing function, innermost last.
    locals: Vec<BTreeSet<String>>,
    found: Vec<Ident>,
}

impl Uses<'_> {
    fn check(&mut self, path: &syn::Path, called: bool) {
        let Some(ident) = path.get_ident() else { return };
        let name = ident.to_string();
        let is_const = name == "FINGERPRINT";
        if (called || is_const)
            && path.leading_colon.is_none()
            && self.names.contains(&name.as_str())
            && !self.locals.iter().any(|l| l.contains(&name))
        {
            self.found.push(ident.clone());
        }
    }

    fn in_fn(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let mut bound = Bound(BTreeSet::new());
        bound.visit_signature(sig);
        bound.visit_block(block);
        self.locals.push(bound.0);
        self.visit_block(block);
        self.locals.pop();
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.in_fn(&f.sig, &f.block);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.in_fn(&f.sig, &f.block);
    }

    // An inline module inside the graph module has its own scope (where `super::dot` would be the
    // generated one): not judged.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*call.func
            && p.qself.is_none()
        {
            self.check(&p.path, true);
            for arg in &call.args {
                self.visit_expr(arg);
            }
            return;
        }
        syn::visit::visit_expr_call(self, call);
    }

    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if p.qself.is_none() {
            self.check(&p.path, false);
        }
    }
}

/// The names patterns bind.
struct Bound(BTreeSet<String>);

impl Visit<'_> for Bound {
    fn visit_pat_ident(&mut self, p: &syn::PatIdent) {
        self.0.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
}
