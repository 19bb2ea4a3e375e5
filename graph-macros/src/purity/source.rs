//! Where a checked item sits in its source file. A proc macro receives only its item's tokens; the
//! entry point (`lib.rs`) reads and parses the file the invocation is in and hands it here as plain
//! `syn` data, so the lints can see the `use` items and item names around a `#[graph]` module (which it
//! reaches through `use super::*`) or a `#[reducer] fn`. Locating the item is token comparison, so it is
//! unit-tested like the rest of the front end.

use std::path::Path;

use quote::ToTokens;
use syn::{Item, ItemFn, ItemMod};

/// The source file around a checked item.
#[derive(Clone)]
pub(crate) struct Surroundings {
    /// The whole file.
    pub(crate) file: syn::File,
    /// Indexes from the file's top level down to the checked item: each but the last is an inline
    /// module's position among its parent's items, the last the checked item's.
    pub(crate) path: Vec<usize>,
    /// The file is a crate root, so `crate::` paths name its top level.
    pub(crate) crate_root: bool,
}

impl Surroundings {
    /// The items of the module that holds the checked item (what its `use super::*` imports).
    pub(crate) fn enclosing_items(&self) -> &[Item] {
        let mut items = &self.file.items[..];
        for &i in self.path.iter().take(self.path.len().saturating_sub(1)) {
            match items.get(i) {
                Some(Item::Mod(ItemMod { content: Some((_, inner)), .. })) => items = inner,
                _ => return &[],
            }
        }
        items
    }
}

/// Finds the `#[graph]` module `module` in `file`: an inline module of the same name whose items are the
/// same tokens. `None` when there is no such module or more than one (a module written by a
/// `macro_rules!` macro, or changed by an attribute that ran first): the lints then see the module alone.
pub(crate) fn locate_module(file: syn::File, crate_root: bool, module: &ItemMod) -> Option<Surroundings> {
    let want = content_tokens(module)?;
    let path = unique(&file.items, &|item| match item {
        Item::Mod(m) => m.ident == module.ident && content_tokens(m).as_ref() == Some(&want),
        _ => false,
    })?;
    Some(Surroundings { file, path, crate_root })
}

/// Finds the `#[reducer] fn` `f` in `file` (same name, signature and body tokens).
pub(crate) fn locate_fn(file: syn::File, crate_root: bool, f: &ItemFn) -> Option<Surroundings> {
    let sig = f.sig.to_token_stream().to_string();
    let body = f.block.to_token_stream().to_string();
    let path = unique(&file.items, &|item| match item {
        Item::Fn(g) => {
            g.sig.ident == f.sig.ident
                && g.sig.to_token_stream().to_string() == sig
                && g.block.to_token_stream().to_string() == body
        }
        _ => false,
    })?;
    Some(Surroundings { file, path, crate_root })
}

/// Whether the file at `path` is a crate root (`crate::` then names its top level): `lib.rs`,
/// `main.rs`, `build.rs`, a file directly in `tests/`, `examples/`, `benches/` or `bin/`, or one that
/// defines `fn main` at its top level. Anything else is taken as a submodule, whose `crate::` paths lead
/// to a file the macro does not read.
pub(crate) fn is_crate_root(path: &Path, file: &syn::File) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let dir = path.parent().and_then(Path::file_name).and_then(|n| n.to_str()).unwrap_or_default();
    matches!(name, "lib.rs" | "main.rs" | "build.rs")
        || matches!(dir, "tests" | "examples" | "benches" | "bin")
        || file.items.iter().any(|i| matches!(i, Item::Fn(f) if f.sig.ident == "main"))
}

fn content_tokens(m: &ItemMod) -> Option<String> {
    let (_, items) = m.content.as_ref()?;
    let mut tokens = proc_macro2::TokenStream::new();
    for item in items {
        item.to_tokens(&mut tokens);
    }
    Some(tokens.to_string())
}

/// The index path of the one item satisfying `is_target`, searching inline modules recursively.
fn unique(items: &[Item], is_target: &dyn Fn(&Item) -> bool) -> Option<Vec<usize>> {
    let mut found = Vec::new();
    search(items, is_target, &mut Vec::new(), &mut found);
    match <[Vec<usize>; 1]>::try_from(found) {
        Ok([one]) => Some(one),
        Err(_) => None,
    }
}

fn search(
    items: &[Item],
    is_target: &dyn Fn(&Item) -> bool,
    at: &mut Vec<usize>,
    found: &mut Vec<Vec<usize>>,
) {
    for (i, item) in items.iter().enumerate() {
        at.push(i);
        if is_target(item) {
            found.push(at.clone());
        } else if let Item::Mod(ItemMod { content: Some((_, inner)), .. }) = item {
            search(inner, is_target, at, found);
        }
        at.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> syn::File {
        syn::parse_quote! {
            use std::time::SystemTime as Clock;
            mod outer {
                use std::env;
                #[graph(state = S)]
                mod flow {
                    #[node(entry, to = END)]
                    async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
                }
            }
            #[graph(state = S)]
            mod flow {
                #[node(entry, to = END)]
                async fn b(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
            #[reducer]
            fn merge(c: &mut u8, w: u8) { *c = w }
        }
    }

    #[test]
    fn finds_the_module_by_name_and_tokens() {
        let inner: ItemMod = syn::parse_quote! {
            mod flow {
                #[node(entry, to = END)]
                async fn a(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        };
        let found = locate_module(file(), true, &inner).expect("found");
        assert_eq!(found.path, vec![1, 1]);
        // The module it sits in is `outer`, whose first item is `use std::env;`.
        assert!(matches!(found.enclosing_items(), [Item::Use(_), Item::Mod(_)]));
        let top: ItemMod = syn::parse_quote! {
            mod flow {
                #[node(entry, to = END)]
                async fn b(s: &S, c: &mut Ctx) -> NodeResult<S> { todo!() }
            }
        };
        let found = locate_module(file(), true, &top).expect("found");
        assert_eq!(found.path, vec![2]);
        assert_eq!(found.enclosing_items().len(), 4, "the file's top level");
        // Written by a macro (not in the file as such): not found, the lints see the module alone.
        let other: ItemMod = syn::parse_quote! { mod flow { fn c() {} } };
        assert!(locate_module(file(), true, &other).is_none());
    }

    #[test]
    fn two_identical_modules_are_ambiguous() {
        let f: syn::File = syn::parse_quote! {
            mod a { mod flow { fn x() {} } }
            mod b { mod flow { fn x() {} } }
        };
        let m: ItemMod = syn::parse_quote! { mod flow { fn x() {} } };
        assert!(locate_module(f, true, &m).is_none());
    }

    #[test]
    fn finds_a_merge_function() {
        let f: ItemFn = syn::parse_quote! { fn merge(c: &mut u8, w: u8) { *c = w } };
        assert_eq!(locate_fn(file(), true, &f).map(|s| s.path), Some(vec![3]));
        let changed: ItemFn = syn::parse_quote! { fn merge(c: &mut u8, w: u8) { *c += w } };
        assert!(locate_fn(file(), true, &changed).is_none());
    }

    #[test]
    fn crate_roots() {
        let plain: syn::File = syn::parse_quote! { fn helper() {} };
        let with_main: syn::File = syn::parse_quote! { fn main() {} };
        assert!(is_crate_root(Path::new("src/lib.rs"), &plain));
        assert!(is_crate_root(Path::new("/x/tests/fail/purity/node-env.rs"), &with_main));
        assert!(is_crate_root(Path::new("tests/it.rs"), &plain));
        assert!(!is_crate_root(Path::new("src/flows.rs"), &plain));
    }
}
