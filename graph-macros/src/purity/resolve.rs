//! Name resolution for the purity lints, on `syn` data: which item a path in a checked body names.
//!
//! It follows Rust's rules as far as the macro can see them: items and `use` items (renames, groups,
//! `self`) of the module, then its glob imports (`use super::*` into the enclosing module read from the
//! file, `use self::m::*` into an inline module, and globs of a few known std/rand/uuid/chrono modules),
//! `crate::`/`self::`/`super::` paths, and paths through the user's inline modules. A name it cannot find
//! is left as written (`Resolved::Path` of the written segments), so the lints still recognize the usual
//! spellings when the file cannot be read.

use std::cell::RefCell;
use std::collections::BTreeSet;

use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::visit::Visit;
use syn::{Ident, Item, ItemFn, Token, UseTree};

use super::source::Surroundings;

/// An index in [`Scopes`].
pub(crate) type ScopeId = usize;

/// What a path names.
#[derive(Clone)]
pub(crate) enum Res<'a> {
    /// One of the user's modules.
    Module(ScopeId),
    /// One of the user's functions, in module `ScopeId`.
    Fn(ScopeId, &'a ItemFn),
    /// One of the user's types (struct, enum, union, alias, trait).
    Type(ScopeId, String),
    /// `Type::name` on one of the user's types: an associated function, constant or variant.
    Assoc { scope: ScopeId, ty: String, name: String },
    /// A `static` (or a `thread_local!` static) of the user's.
    Static(StaticInfo),
    /// Something else of the user's: a constant, a local binding, an item declared in a block.
    Opaque,
    /// A path outside the code the macro sees, written out from the crate root (`std::time::SystemTime`),
    /// or a path it could not resolve, as written.
    Path(Vec<String>),
}

/// A static as far as the lints care.
#[derive(Clone, Debug)]
pub(crate) struct StaticInfo {
    pub(crate) ty: String,
    pub(crate) mutable: bool,
    /// Declared in `thread_local!`.
    pub(crate) thread_local: bool,
    /// Its type can change behind a shared reference (atomics, locks, cells).
    pub(crate) interior: bool,
    /// Declared inside the checked body, where the declaration itself is reported.
    pub(crate) in_body: bool,
}

struct ScopeData<'a> {
    items: Vec<&'a Item>,
    parent: Option<ScopeId>,
    /// Inline modules: (position among `items`, scope).
    children: Vec<(usize, ScopeId)>,
    /// Statics declared by `thread_local!` in this module: (name, type).
    thread_locals: Vec<(String, syn::Type)>,
    /// Its tokens are part of the macro's input, so an error inside can point at them.
    in_input: bool,
}

/// The modules the macro can see, as a tree.
pub(crate) struct Scopes<'a> {
    list: Vec<ScopeData<'a>>,
    root: Option<ScopeId>,
    /// (scope, name) lookups in progress: `use a::b as a;` or two modules globbing each other end here.
    busy: RefCell<BTreeSet<(ScopeId, String)>>,
}

/// The names one `use` item binds.
struct UseBinding {
    /// `None` for a glob.
    name: Option<String>,
    path: Vec<String>,
    leading_colon: bool,
}

impl<'a> Scopes<'a> {
    /// The scopes around the items of a `#[graph]` module (`module`, from the macro's input), and the id of
    /// the module's scope. Without surroundings the module stands alone: `super::` and `crate::` then
    /// stay unresolved.
    pub(crate) fn for_module(module: &'a [Item], around: Option<&'a Surroundings>) -> (Self, ScopeId) {
        let mut s = Scopes { list: Vec::new(), root: None, busy: RefCell::default() };
        let Some(around) = around else {
            let id = s.add(module.iter().collect(), None, true);
            return (s, id);
        };
        let top = s.add(around.file.items.iter().collect(), None, false);
        if around.crate_root {
            s.root = Some(top);
        }
        let (last, enclosing) = s.walk_down(top, &around.path);
        let id = s.add(module.iter().collect(), Some(enclosing), true);
        let data = &mut s.list[enclosing];
        match data.children.iter_mut().find(|(i, _)| *i == last) {
            Some(slot) => slot.1 = id,
            None => data.children.push((last, id)),
        }
        (s, id)
    }

    /// The scopes around a `#[reducer] fn`, and the id of the module that holds it. Without surroundings,
    /// an empty module.
    pub(crate) fn for_fn(around: Option<&'a Surroundings>) -> (Self, ScopeId) {
        let mut s = Scopes { list: Vec::new(), root: None, busy: RefCell::default() };
        let Some(around) = around else {
            let id = s.add(Vec::new(), None, false);
            return (s, id);
        };
        let top = s.add(around.file.items.iter().collect(), None, false);
        if around.crate_root {
            s.root = Some(top);
        }
        let (_, enclosing) = s.walk_down(top, &around.path);
        (s, enclosing)
    }

    /// Follows `path` (module positions, then the target's) from `top`: the target's position and the
    /// scope that holds it.
    fn walk_down(&self, top: ScopeId, path: &[usize]) -> (usize, ScopeId) {
        let mut at = top;
        let Some((&last, mods)) = path.split_last() else { return (0, top) };
        for i in mods {
            match self.list[at].children.iter().find(|(pos, _)| pos == i) {
                Some(&(_, child)) => at = child,
                None => break,
            }
        }
        (last, at)
    }

    /// Adds a module and, recursively, its inline modules.
    fn add(&mut self, items: Vec<&'a Item>, parent: Option<ScopeId>, in_input: bool) -> ScopeId {
        let id = self.list.len();
        let thread_locals = items.iter().flat_map(|i| thread_locals(i)).collect();
        self.list.push(ScopeData {
            items: items.clone(),
            parent,
            children: Vec::new(),
            thread_locals,
            in_input,
        });
        for (pos, item) in items.iter().enumerate() {
            if let Item::Mod(syn::ItemMod { content: Some((_, inner)), .. }) = item {
                let child = self.add(inner.iter().collect(), Some(id), in_input);
                self.list[id].children.push((pos, child));
            }
        }
        id
    }

    /// The module's tokens are the macro's input (errors can point into it).
    pub(crate) fn in_input(&self, id: ScopeId) -> bool {
        self.list[id].in_input
    }

    pub(crate) fn parent(&self, id: ScopeId) -> Option<ScopeId> {
        self.list[id].parent
    }

    #[cfg(test)]
    pub(crate) fn root(&self) -> Option<ScopeId> {
        self.root
    }

    /// An inherent (`impl Type { fn name }`, no trait) associated function declared in module `id`.
    pub(crate) fn inherent_fn(&self, id: ScopeId, ty: &str, name: &str) -> Option<&'a syn::ImplItemFn> {
        self.list[id].items.iter().find_map(|item| {
            let Item::Impl(imp) = item else { return None };
            let syn::Type::Path(p) = &*imp.self_ty else { return None };
            if imp.trait_.is_some() || p.qself.is_some() || p.path.segments.last()?.ident != ty {
                return None;
            }
            imp.items.iter().find_map(|i| match i {
                syn::ImplItem::Fn(f) if f.sig.ident == name => Some(f),
                _ => None,
            })
        })
    }

    /// Looks `name` up in module `id`: its items, its `use` items, then its glob imports.
    pub(crate) fn lookup(&self, id: ScopeId, name: &str) -> Option<Res<'a>> {
        let key = (id, name.to_owned());
        if !self.busy.borrow_mut().insert(key.clone()) {
            return None;
        }
        let data = &self.list[id];
        let found = data
            .items
            .iter()
            .enumerate()
            .find_map(|(pos, item)| self.declared(id, pos, item, name))
            .or_else(|| self.thread_local(&data.thread_locals, name, false))
            .or_else(|| self.lookup_uses(id, data.items.iter().copied(), name));
        self.busy.borrow_mut().remove(&key);
        found
    }

    /// Looks `name` up among the items of a block of a function of module `base` (cloned by the walker:
    /// a block may come from a macro's arguments, parsed on the spot). What a block declares is the
    /// user's, and not followed: nested functions are walked where they are written.
    pub(crate) fn lookup_block(
        &self,
        base: ScopeId,
        items: &[Item],
        thread_locals: &[(String, syn::Type)],
        name: &str,
    ) -> Option<Res<'a>> {
        for item in items {
            if item_ident(item).is_some_and(|i| i == name) {
                return Some(match item {
                    Item::Static(s) => Res::Static(static_info(
                        &s.ty,
                        matches!(s.mutability, syn::StaticMutability::Mut(_)),
                        false,
                        true,
                    )),
                    Item::ExternCrate(c) if c.ident != "self" => Res::Path(vec![c.ident.to_string()]),
                    _ => Res::Opaque,
                });
            }
        }
        self.thread_local(thread_locals, name, true).or_else(|| self.lookup_uses(base, items.iter(), name))
    }

    fn thread_local(&self, list: &[(String, syn::Type)], name: &str, in_body: bool) -> Option<Res<'a>> {
        let (_, ty) = list.iter().find(|(n, _)| n == name)?;
        Some(Res::Static(static_info(ty, false, true, in_body)))
    }

    /// `name` through the `use` items among `items`: an explicit binding first, then the globs in order.
    fn lookup_uses<'i>(
        &self,
        base: ScopeId,
        items: impl Iterator<Item = &'i Item>,
        name: &str,
    ) -> Option<Res<'a>> {
        let uses: Vec<UseBinding> = items
            .filter_map(|i| match i {
                Item::Use(u) => Some(use_bindings(u)),
                _ => None,
            })
            .flatten()
            .collect();
        if let Some(b) = uses.iter().find(|b| b.name.as_deref() == Some(name)) {
            return Some(self.resolve_use(base, &b.path, b.leading_colon));
        }
        for b in uses.iter().filter(|b| b.name.is_none()) {
            match self.resolve_use(base, &b.path, b.leading_colon) {
                Res::Module(m) => {
                    if let Some(r) = self.lookup(m, name) {
                        return Some(r);
                    }
                }
                Res::Path(p) if glob_member(&p, name) => {
                    return Some(Res::Path(p.into_iter().chain([name.to_owned()]).collect()));
                }
                _ => {}
            }
        }
        None
    }

    /// An item named `name` declared at position `pos` of module `id`.
    fn declared(&self, id: ScopeId, pos: usize, item: &'a Item, name: &str) -> Option<Res<'a>> {
        if item_ident(item)? != name {
            return None;
        }
        Some(match item {
            Item::Fn(f) => Res::Fn(id, f),
            Item::Struct(_) | Item::Enum(_) | Item::Union(_) | Item::Type(_) | Item::Trait(_) => {
                Res::Type(id, name.to_owned())
            }
            Item::Mod(_) => match self.list[id].children.iter().find(|(p, _)| *p == pos) {
                Some(&(_, child)) => Res::Module(child),
                None => Res::Opaque,
            },
            Item::Static(s) => Res::Static(static_info(
                &s.ty,
                matches!(s.mutability, syn::StaticMutability::Mut(_)),
                false,
                false,
            )),
            Item::ExternCrate(c) if c.ident == "self" => self.root.map_or(Res::Opaque, Res::Module),
            Item::ExternCrate(c) => Res::Path(vec![c.ident.to_string()]),
            _ => Res::Opaque,
        })
    }

    /// The target of a `use` path, from module `base`.
    pub(crate) fn resolve_use(&self, base: ScopeId, path: &[String], leading_colon: bool) -> Res<'a> {
        if leading_colon {
            return Res::Path(path.to_vec());
        }
        let Some((first, rest)) = path.split_first() else { return Res::Module(base) };
        let start = match self.start(base, first) {
            Some(Some(r)) => r,
            // `crate::`/`super::` beyond what was read: keep the path as written.
            Some(None) => return Res::Path(path.to_vec()),
            // In a `use`, a name that is not in scope is a crate.
            None => self.lookup(base, first).unwrap_or_else(|| Res::Path(vec![first.clone()])),
        };
        self.members(start, rest)
    }

    /// `crate`, `self`, `super`: `Some(Some(module))`, `Some(None)` when that module was not read, `None`
    /// for any other name.
    pub(crate) fn start(&self, base: ScopeId, first: &str) -> Option<Option<Res<'a>>> {
        Some(match first {
            "crate" => self.root.map(Res::Module),
            "self" => Some(Res::Module(base)),
            "super" => self.parent(base).map(Res::Module),
            _ => return None,
        })
    }

    /// `start::rest[0]::rest[1]...`.
    pub(crate) fn members(&self, start: Res<'a>, rest: &[String]) -> Res<'a> {
        rest.iter().fold(start, |res, seg| match res {
            Res::Module(m) if seg == "super" => self.parent(m).map_or(Res::Opaque, Res::Module),
            Res::Module(m) if seg == "self" => Res::Module(m),
            // Not found in one of the user's modules (a macro may have made it): still the user's.
            Res::Module(m) => self.lookup(m, seg).unwrap_or(Res::Opaque),
            Res::Path(mut p) => {
                p.push(seg.clone());
                Res::Path(p)
            }
            Res::Type(scope, ty) => Res::Assoc { scope, ty, name: seg.clone() },
            _ => Res::Opaque,
        })
    }
}

/// The name an item declares, if it declares one in the type or value namespace.
fn item_ident(item: &Item) -> Option<&Ident> {
    Some(match item {
        Item::Fn(f) => &f.sig.ident,
        Item::Struct(s) => &s.ident,
        Item::Enum(e) => &e.ident,
        Item::Union(u) => &u.ident,
        Item::Type(t) => &t.ident,
        Item::Trait(t) => &t.ident,
        Item::TraitAlias(t) => &t.ident,
        Item::Mod(m) => &m.ident,
        Item::Const(c) => &c.ident,
        Item::Static(s) => &s.ident,
        Item::ExternCrate(c) => c.rename.as_ref().map_or(&c.ident, |(_, r)| r),
        _ => return None,
    })
}

fn static_info(ty: &syn::Type, mutable: bool, thread_local: bool, in_body: bool) -> StaticInfo {
    StaticInfo {
        ty: super::tidy(&ty.to_token_stream()),
        mutable,
        thread_local,
        interior: interior_mutable(ty),
        in_body,
    }
}

/// The type can change behind a shared reference: an atomic, a lock or a cell anywhere in it
/// (`LazyLock<Mutex<..>>` counts, `OnceLock<String>` does not: it is written once).
pub(crate) fn interior_mutable(ty: &syn::Type) -> bool {
    struct Finder(bool);
    impl Visit<'_> for Finder {
        fn visit_path_segment(&mut self, s: &syn::PathSegment) {
            let name = s.ident.to_string();
            if name.starts_with("Atomic")
                || matches!(
                    name.as_str(),
                    "Mutex"
                        | "RwLock"
                        | "ReentrantMutex"
                        | "Cell"
                        | "RefCell"
                        | "UnsafeCell"
                        | "SyncUnsafeCell"
                        | "ArcSwap"
                        | "DashMap"
                        | "DashSet"
                )
            {
                self.0 = true;
            }
            syn::visit::visit_path_segment(self, s);
        }
    }
    let mut f = Finder(false);
    f.visit_type(ty);
    f.0
}

/// The statics a `thread_local! { static NAME: Type = init; ... }` item declares.
fn thread_locals(item: &Item) -> Vec<(String, syn::Type)> {
    match item {
        Item::Macro(m) => thread_local_statics(&m.mac),
        _ => Vec::new(),
    }
}

/// The statics a `thread_local!` invocation declares (none for any other macro).
pub(crate) fn thread_local_statics(m: &syn::Macro) -> Vec<(String, syn::Type)> {
    if m.path.segments.last().is_none_or(|s| s.ident != "thread_local") {
        return Vec::new();
    }
    let parser = |input: ParseStream| {
        let mut out = Vec::new();
        while !input.is_empty() {
            input.call(syn::Attribute::parse_outer)?;
            input.parse::<syn::Visibility>()?;
            input.parse::<Token![static]>()?;
            let name: Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            let ty: syn::Type = input.parse()?;
            input.parse::<Token![=]>()?;
            input.parse::<syn::Expr>()?;
            if !input.is_empty() {
                input.parse::<Token![;]>()?;
            }
            out.push((name.to_string(), ty));
        }
        Ok(out)
    };
    parser.parse2(m.tokens.clone()).unwrap_or_default()
}

/// The names bound by `use` item `u`.
fn use_bindings(u: &syn::ItemUse) -> Vec<UseBinding> {
    fn walk(tree: &UseTree, prefix: &mut Vec<String>, leading_colon: bool, out: &mut Vec<UseBinding>) {
        let bind = |name: String, path: Vec<String>, out: &mut Vec<UseBinding>| {
            out.push(UseBinding { name: Some(name), path, leading_colon });
        };
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, leading_colon, out);
                prefix.pop();
            }
            UseTree::Name(n) if n.ident == "self" => {
                if let Some(last) = prefix.last() {
                    bind(last.clone(), prefix.clone(), out);
                }
            }
            UseTree::Name(n) => {
                let mut path = prefix.clone();
                path.push(n.ident.to_string());
                bind(n.ident.to_string(), path, out);
            }
            UseTree::Rename(r) if r.rename == "_" => {}
            UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                bind(r.rename.to_string(), path, out);
            }
            UseTree::Glob(_) => out.push(UseBinding { name: None, path: prefix.clone(), leading_colon }),
            UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, leading_colon, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&u.tree, &mut Vec::new(), u.leading_colon.is_some(), &mut out);
    out
}

/// Whether `name` is one of the items the lints know in the external module `module` reached by a
/// glob import (`use std::time::*;`). A glob of any other external module is not followed: its names are
/// unknown, and guessing would make `Some` a member of `std::env`.
fn glob_member(module: &[String], name: &str) -> bool {
    let m: Vec<&str> = module.iter().map(String::as_str).collect();
    let std_mod = |n: &str| matches!(m.as_slice(), [s, x] if matches!(*s, "std" | "core") && *x == n);
    if std_mod("time") {
        return matches!(name, "SystemTime" | "Instant" | "UNIX_EPOCH");
    }
    if std_mod("env") {
        return matches!(
            name,
            "var"
                | "var_os"
                | "vars"
                | "vars_os"
                | "args"
                | "args_os"
                | "set_var"
                | "remove_var"
                | "current_dir"
                | "set_current_dir"
                | "current_exe"
                | "temp_dir"
                | "home_dir"
        );
    }
    if std_mod("process") {
        return matches!(name, "Command" | "exit" | "abort" | "id");
    }
    if std_mod("fs") {
        return matches!(
            name,
            "File"
                | "OpenOptions"
                | "read"
                | "read_to_string"
                | "write"
                | "remove_file"
                | "create_dir_all"
                | "read_dir"
                | "copy"
                | "rename"
        );
    }
    if std_mod("net") {
        return matches!(name, "TcpStream" | "TcpListener" | "UdpSocket");
    }
    match m.as_slice() {
        ["rand"] | ["rand", "prelude"] => matches!(
            name,
            "random"
                | "rng"
                | "thread_rng"
                | "random_range"
                | "random_bool"
                | "random_ratio"
                | "random_iter"
                | "make_rng"
        ),
        ["rand", "rngs"] => matches!(name, "OsRng" | "SysRng" | "ThreadRng"),
        ["uuid"] => name == "Uuid",
        ["chrono"] | ["chrono", "prelude"] => matches!(name, "Utc" | "Local"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    fn path_of(r: Option<Res<'_>>) -> Option<Vec<String>> {
        match r {
            Some(Res::Path(p)) => Some(p),
            _ => None,
        }
    }

    #[test]
    fn uses_renames_groups_and_self() {
        let items: Vec<Item> = vec![
            syn::parse_quote!(
                use std::time::SystemTime as Clock;
            ),
            syn::parse_quote!(
                use std::{
                    env::{self, var as get},
                    process,
                };
            ),
            syn::parse_quote!(
                use ::rand::random;
            ),
            syn::parse_quote!(
                use std::time::Instant as _;
            ),
        ];
        let (s, id) = Scopes::for_module(&items, None);
        assert_eq!(path_of(s.lookup(id, "Clock")), Some(segs(&["std", "time", "SystemTime"])));
        assert_eq!(path_of(s.lookup(id, "env")), Some(segs(&["std", "env"])));
        assert_eq!(path_of(s.lookup(id, "get")), Some(segs(&["std", "env", "var"])));
        assert_eq!(path_of(s.lookup(id, "process")), Some(segs(&["std", "process"])));
        assert_eq!(path_of(s.lookup(id, "random")), Some(segs(&["rand", "random"])));
        assert!(s.lookup(id, "Instant").is_none());
        assert!(s.lookup(id, "var").is_none());
    }

    #[test]
    fn globs_of_known_modules_only() {
        let items: Vec<Item> = vec![
            syn::parse_quote!(
                use std::time::*;
            ),
            syn::parse_quote!(
                use std::env::*;
            ),
            syn::parse_quote!(
                use my::*;
            ),
        ];
        let (s, id) = Scopes::for_module(&items, None);
        assert_eq!(path_of(s.lookup(id, "UNIX_EPOCH")), Some(segs(&["std", "time", "UNIX_EPOCH"])));
        assert_eq!(path_of(s.lookup(id, "var")), Some(segs(&["std", "env", "var"])));
        assert!(s.lookup(id, "Some").is_none(), "`Some` is not taken from `std::env::*`");
        assert!(s.lookup(id, "thing").is_none(), "an unknown glob is not guessed");
    }

    #[test]
    fn super_glob_sees_the_file() {
        let file: syn::File = syn::parse_quote! {
            use std::time::SystemTime as Clock;
            struct Instant;
            static HITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            thread_local! { static SEEN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) }; }
            mod flow { use super::*; }
        };
        let module: Vec<Item> = vec![syn::parse_quote!(
            use super::*;
        )];
        let around = Surroundings { file, path: vec![4], crate_root: true };
        let (s, id) = Scopes::for_module(&module, Some(&around));
        assert!(s.in_input(id));
        assert_eq!(path_of(s.lookup(id, "Clock")), Some(segs(&["std", "time", "SystemTime"])));
        assert!(matches!(s.lookup(id, "Instant"), Some(Res::Type(_, t)) if t == "Instant"));
        assert!(matches!(s.lookup(id, "HITS"), Some(Res::Static(st)) if st.interior && !st.thread_local));
        assert!(matches!(s.lookup(id, "SEEN"), Some(Res::Static(st)) if st.interior && st.thread_local));
        // `crate::flow` is the module itself (the file is a crate root).
        let root = s.root().expect("a crate root");
        assert!(matches!(s.lookup(root, "flow"), Some(Res::Module(m)) if m == id));
    }

    #[test]
    fn cycles_end() {
        let items: Vec<Item> = vec![
            syn::parse_quote!(
                use self::a as b;
            ),
            syn::parse_quote!(
                use self::b as a;
            ),
            syn::parse_quote!(
                use self::*;
            ),
        ];
        let (s, id) = Scopes::for_module(&items, None);
        assert!(matches!(s.lookup(id, "a"), Some(Res::Opaque) | None));
        assert!(s.lookup(id, "zzz").is_none());
    }

    #[test]
    fn interior_mutability() {
        let yes: Vec<syn::Type> = vec![
            syn::parse_quote!(AtomicU64),
            syn::parse_quote!(std::sync::Mutex<Vec<u8>>),
            syn::parse_quote!(LazyLock<RwLock<String>>),
            syn::parse_quote!(RefCell<u8>),
        ];
        let no: Vec<syn::Type> = vec![
            syn::parse_quote!(u64),
            syn::parse_quote!(&'static str),
            syn::parse_quote!(OnceLock<String>),
        ];
        assert!(yes.iter().all(interior_mutable));
        assert!(!no.iter().any(interior_mutable));
    }
}
