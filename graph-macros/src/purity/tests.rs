//! The purity lints on `syn` data: every rejected form, the code that must stay accepted, name
//! resolution through `use` items and the file around the module, and helper following.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{Item, ItemMod};

use super::*;
use crate::graph::parse;

/// Checks `block` as the body of a node (alone in its module) or of a merge function.
fn run(block: syn::Block, rules: Rules) -> Vec<String> {
    match rules {
        Rules::Node => graph(syn::parse_quote! {
            mod flow {
                #[node(entry, to = END)]
                async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> #block
            }
        }),
        Rules::Reducer => {
            let f: syn::ItemFn = syn::parse_quote!(fn merge(current: &mut u8, written: u8) #block);
            let mut errs = Errors::default();
            check_merge_fn(&f, None, &mut errs);
            errs.messages()
        }
    }
}

/// The purity errors of a graph module, seen alone (the source file could not be read).
fn graph(module: ItemMod) -> Vec<String> {
    check_module(module, None)
}

fn check_module(module: ItemMod, around: Option<Surroundings>) -> Vec<String> {
    let mut errs = Errors::default();
    let mut def = parse::parse(quote!(state = S), module, &mut errs).expect("an inline module");
    assert!(errs.is_empty(), "{:?}", errs.messages());
    def.surroundings = around;
    check_graph(&def, &mut errs);
    errs.messages()
}

/// The purity errors of the module `flow` of `file` (a crate root), seen with the file around it.
fn in_file(file: syn::File) -> Vec<String> {
    fn find(items: &[Item]) -> Option<ItemMod> {
        items.iter().find_map(|i| match i {
            Item::Mod(m) if m.ident == "flow" => Some(m.clone()),
            Item::Mod(ItemMod { content: Some((_, inner)), .. }) => find(inner),
            _ => None,
        })
    }
    let module = find(&file.items).expect("a module `flow`");
    let around = source::locate_module(file, true, &module).expect("the module is found in the file");
    check_module(module, Some(around))
}

/// A merge function `merge` of `file`, checked with the file around it.
fn merge_in_file(file: syn::File) -> Vec<String> {
    let f = file
        .items
        .iter()
        .find_map(|i| match i {
            Item::Fn(f) if f.sig.ident == "merge" => Some(f.clone()),
            _ => None,
        })
        .expect("a fn `merge`");
    let around = source::locate_fn(file, true, &f).expect("found");
    let mut errs = Errors::default();
    check_merge_fn(&f, Some(&around), &mut errs);
    errs.messages()
}

/// One node `plan` with `body`, after `items` in the module.
fn node_with(items: TokenStream, body: TokenStream) -> ItemMod {
    syn::parse_quote! {
        mod flow {
            #items
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { #body }
        }
    }
}

fn one(errs: &[String], needle: &str) {
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(errs[0].contains(needle), "`{needle}` not in {errs:#?}");
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
        let errs = run(block.clone(), Rules::Node);
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
    assert!(run(block, Rules::Node).is_empty());
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
        let errs = run(block.clone(), Rules::Reducer);
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
    assert!(run(block, Rules::Reducer).is_empty());
}

// ---- Forms the lints did not see before name resolution. ----

#[test]
fn qualified_paths_with_a_self_type() {
    let errs = graph(node_with(quote!(), quote!(let t = <std::time::SystemTime>::now();)));
    one(&errs, "`<std::time::SystemTime>::now` reads the wall clock");
    let errs = graph(node_with(
        quote!(
            use std::time::SystemTime;
            use std::time::Instant as Moment;
        ),
        quote!(let a = <SystemTime as Clock>::now(); let b = <Moment>::now();),
    ));
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].contains("`<SystemTime as Clock>::now` (`std::time::SystemTime::now`)"), "{errs:#?}");
    assert!(errs[1].contains("`<Moment>::now` (`std::time::Instant::now`)"), "{errs:#?}");
    // The user's own type behind `<..>`.
    let errs = graph(node_with(
        quote!(struct Clock; impl Clock { fn now() -> u64 { 0 } }),
        quote!(let t = <Clock>::now();),
    ));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn aliases_renames_groups_and_globs() {
    let cases: Vec<(TokenStream, TokenStream, &str)> = vec![
        (
            quote!(
                use std::env::var;
            ),
            quote!(let v = var("X");),
            "`var` (`std::env::var`) reads the process",
        ),
        (
            quote!(
                use rand::random;
            ),
            quote!(let n: u8 = random();),
            "`random` (`rand::random`) draws",
        ),
        (
            quote!(
                use std::time::SystemTime as Clock;
            ),
            quote!(let t = Clock::now();),
            "`Clock::now` (`std::time::SystemTime::now`)",
        ),
        (
            quote!(
                use std::{
                    env::{self as environment},
                    time::{Instant as Moment, Duration},
                };
            ),
            quote!(let v = environment::args();),
            "`environment::args` (`std::env::args`)",
        ),
        (
            quote!(
                use std::{
                    env::{self as environment},
                    time::{Instant as Moment, Duration},
                };
            ),
            quote!(let t = Moment::now();),
            "`Moment::now` (`std::time::Instant::now`)",
        ),
        (
            quote!(
                use std::env::*;
            ),
            quote!(let v = var("X");),
            "`var` (`std::env::var`)",
        ),
        (
            quote!(
                use rand::prelude::*;
            ),
            quote!(let n: u8 = random();),
            "`random` (`rand::prelude::random`)",
        ),
        (
            quote!(
                use uuid::Uuid as Id;
            ),
            quote!(let id = Id::new_v4();),
            "`Id::new_v4` (`uuid::Uuid::new_v4`)",
        ),
        (
            quote!(
                use chrono::prelude::*;
            ),
            quote!(let t = Utc::now();),
            "`Utc::now` (`chrono::prelude::Utc::now`)",
        ),
        (
            quote!(
                use std::process;
            ),
            quote!(process::exit(1);),
            "`process::exit` (`std::process::exit`)",
        ),
        // A `use` inside the body.
        (quote!(), quote!(use std::env::var; let v = var("X");), "`var` (`std::env::var`)"),
        // The user's module re-exporting std: followed through the module.
        (
            quote!(
                mod clock {
                    pub use std::time::SystemTime;
                }
            ),
            quote!(let t = clock::SystemTime::now();),
            "`clock::SystemTime::now` (`std::time::SystemTime::now`)",
        ),
    ];
    for (items, body, needle) in cases {
        let errs = graph(node_with(items.clone(), body.clone()));
        assert_eq!(errs.len(), 1, "{items} / {body}: {errs:#?}");
        assert!(errs[0].contains(needle), "{items} / {body}: `{needle}` not in {errs:#?}");
    }
}

#[test]
fn bare_names_are_judged_only_once_resolved() {
    // Not imported (and not a local): `var` and `random` could be anything, and are not flagged.
    assert!(graph(node_with(quote!(), quote!(let v = var("X"); let n: u8 = random();))).is_empty());
    // A local closure named like an imported function is the local.
    let errs = graph(node_with(
        quote!(
            use std::env::var;
        ),
        quote!(let var = |k: &str| k.len(); let n = var("X");),
    ));
    assert!(errs.is_empty(), "{errs:#?}");
    // A glob of an unknown module is not guessed; `Some` is not taken from `std::env::*`.
    let errs = graph(node_with(
        quote!(
            use my_prelude::*;
            use std::env::*;
        ),
        quote!(let v = thing(); let o = Some(1);),
    ));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn wall_clock_reads_through_elapsed() {
    let cases: Vec<(TokenStream, TokenStream, &str)> = vec![
        (
            quote!(
                use std::time::UNIX_EPOCH;
            ),
            quote!(let d = UNIX_EPOCH.elapsed();),
            "`UNIX_EPOCH.elapsed()`",
        ),
        (quote!(), quote!(let d = std::time::UNIX_EPOCH.elapsed();), "`std::time::UNIX_EPOCH.elapsed()`"),
        (
            quote!(
                use std::time::SystemTime;
            ),
            quote!(let d = SystemTime::UNIX_EPOCH.elapsed();),
            "elapsed",
        ),
        (
            quote!(
                use std::time::*;
            ),
            quote!(let d = (&UNIX_EPOCH).elapsed();),
            "elapsed",
        ),
        (quote!(), quote!(let d = ctx.now().elapsed();), "`ctx.now().elapsed()`"),
        (quote!(), quote!(let start = ctx.now(); let d = start.elapsed();), "`start.elapsed()`"),
        (
            quote!(
                use std::time::UNIX_EPOCH;
            ),
            quote!(let e = UNIX_EPOCH; let d = e.elapsed();),
            "`e.elapsed()`",
        ),
    ];
    for (items, body, needle) in cases {
        let errs = graph(node_with(items.clone(), body.clone()));
        assert_eq!(errs.len(), 1, "{body}: {errs:#?}");
        assert!(errs[0].contains(needle) && errs[0].contains("reads the wall clock"), "{body}: {errs:#?}");
        assert!(errs[0].contains("duration_since"), "{errs:#?}");
    }
    // Deterministic: recorded time minus the epoch, `elapsed` on something that is not a time we know.
    let errs = graph(node_with(
        quote!(
            use std::time::UNIX_EPOCH;
        ),
        quote!(
            let since = ctx.now().duration_since(UNIX_EPOCH);
            let d = s.timer.elapsed();
            let e = stopwatch.elapsed();
        ),
    ));
    assert!(errs.is_empty(), "{errs:#?}");
    // `SystemTime::now().elapsed()` is one mistake, reported at `now`.
    let errs = graph(node_with(quote!(), quote!(let d = std::time::SystemTime::now().elapsed();)));
    one(&errs, "`std::time::SystemTime::now` reads the wall clock");
    // The user's own `UNIX_EPOCH`.
    let errs = graph(node_with(
        quote!(
            const UNIX_EPOCH: Stamp = Stamp(0);
        ),
        quote!(let d = UNIX_EPOCH.elapsed();),
    ));
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn the_file_around_the_module_is_seen_through_use_super() {
    let errs = in_file(syn::parse_quote! {
        use std::time::SystemTime as Clock;
        #[graph(state = S)]
        mod flow {
            use super::*;
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let t = Clock::now(); todo!() }
        }
        fn main() {}
    });
    one(&errs, "`Clock::now` (`std::time::SystemTime::now`) reads the wall clock");
    // Two levels: the file's `use` reaches an inner module through two `use super::*`.
    let errs = in_file(syn::parse_quote! {
        use std::env::var as get;
        mod outer {
            use super::*;
            mod flow {
                use super::*;
                #[node(entry, to = END)]
                async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let v = get("X"); todo!() }
            }
        }
    });
    one(&errs, "`get` (`std::env::var`)");
    // `super::` paths, without a glob.
    let errs = in_file(syn::parse_quote! {
        use std::env;
        mod flow {
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let v = super::env::var("X"); todo!() }
        }
    });
    one(&errs, "`super::env::var` (`std::env::var`)");
}

// ---- The user's own items are not std's. ----

#[test]
fn own_items_named_like_std_are_not_flagged() {
    let own: Vec<(TokenStream, TokenStream)> = vec![
        (quote!(struct Instant; impl Instant { fn now() -> u64 { 0 } }), quote!(let t = Instant::now();)),
        (
            quote!(
                pub struct SystemTime;
            ),
            quote!(let t = SystemTime::now();),
        ),
        (
            quote!(
                mod env {
                    pub fn var(_: &str) -> u8 {
                        0
                    }
                }
            ),
            quote!(let v = env::var("X");),
        ),
        (
            quote!(
                mod process {
                    pub fn exit(_: i32) {}
                }
            ),
            quote!(process::exit(1);),
        ),
        (
            quote!(
                mod rand {
                    pub fn random() -> u8 {
                        4
                    }
                }
            ),
            quote!(let n = rand::random();),
        ),
        (
            quote!(enum Uuid { Nil } impl Uuid { fn new_v4() -> Self { Uuid::Nil } }),
            quote!(let u = Uuid::new_v4();),
        ),
        (
            quote!(
                type Command = Vec<u8>;
            ),
            quote!(let c = Command::new();),
        ),
        (
            quote!(
                fn thread_rng() -> u8 {
                    4
                }
            ),
            quote!(let r = thread_rng();),
        ),
        (
            quote!(
                mod env {
                    pub fn var(_: &str) -> u8 {
                        0
                    }
                }
            ),
            quote!(let v = self::env::var("X");),
        ),
        // Declared in the body.
        (quote!(), quote!(struct Instant; let t = Instant::now();)),
    ];
    for (items, body) in own {
        let errs = graph(node_with(items.clone(), body.clone()));
        assert!(errs.is_empty(), "{items} / {body}: {errs:#?}");
    }
    // Declared in the file, seen through `use super::*`, `crate::` or `super::`.
    let errs = in_file(syn::parse_quote! {
        pub struct Instant(u64);
        impl Instant { pub fn now() -> Self { Instant(0) } }
        mod env { pub fn var(_: &str) -> Option<String> { None } }
        mod rand { pub fn random() -> u8 { 4 } }
        #[graph(state = S)]
        mod flow {
            use super::*;
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> {
                let t = Instant::now();
                let v = env::var("HOME");
                let n = crate::rand::random();
                let m = super::rand::random();
                todo!()
            }
        }
    });
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn without_the_file_unresolved_paths_are_judged_as_written() {
    // `crate::rand` could be anything when the file is not read: the name decides, as before.
    let errs = graph(node_with(
        quote!(
            use super::*;
        ),
        quote!(let n: u8 = crate::rand::random(); let t = Instant::now();),
    ));
    assert_eq!(errs.len(), 2, "{errs:#?}");
}

// ---- Shared mutable statics. ----

#[test]
fn interior_mutable_statics_named_by_a_node() {
    let cases: Vec<(TokenStream, &str)> = vec![
        (
            quote!(
                static HITS: AtomicU64 = AtomicU64::new(0);
            ),
            "`HITS` is a `static` of type `AtomicU64`",
        ),
        (
            quote!(
                static HITS: std::sync::LazyLock<std::sync::Mutex<Vec<String>>> =
                    std::sync::LazyLock::new(Default::default);
            ),
            "`HITS` is a `static` of type `std::sync::LazyLock<std::sync::Mutex<Vec<String>>>`",
        ),
        (
            quote!(
                static mut HITS: u64 = 0;
            ),
            "`HITS` is a `static mut`",
        ),
        (
            quote!(thread_local! { static HITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) }; }),
            "`HITS` is a `thread_local!` of type `std::cell::Cell<u64>`",
        ),
    ];
    for (item, needle) in cases {
        // Named twice: reported once.
        let errs = graph(node_with(item.clone(), quote!(let a = HITS.load(); let b = HITS.load();)));
        one(&errs, needle);
        assert!(errs[0].contains("keep the value in the graph's state"), "{errs:#?}");
    }
    // From the file.
    let errs = in_file(syn::parse_quote! {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        mod flow {
            use super::*;
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { CALLS.fetch_add(1, Ordering::Relaxed); todo!() }
        }
    });
    one(&errs, "`CALLS` is a `static` of type `AtomicU64`");
    // Declared in the body: reported at the declaration, once.
    let errs = graph(node_with(quote!(), quote!(static N: AtomicU64 = AtomicU64::new(0); N.fetch_add(1);)));
    one(&errs, "a `static` of type `AtomicU64` is mutable state shared across runs");
    let errs = graph(node_with(
        quote!(),
        quote!(thread_local! { static N: Cell<u8> = Cell::new(0); } N.with(|n| n.set(1));),
    ));
    one(&errs, "a `static` of type `Cell<u8>`");
    // Immutable statics, set-once cells and constants are fine.
    let errs = graph(node_with(
        quote!(
            static NAME: &str = "x";
            static CONFIG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
            const LIMIT: u64 = 3;
        ),
        quote!(let a = NAME; let b = CONFIG.get(); let c = LIMIT;),
    ));
    assert!(errs.is_empty(), "{errs:#?}");
}

// ---- Helpers called from nodes. ----

#[test]
fn helpers_are_followed_and_reported_once() {
    let errs = graph(syn::parse_quote! {
        mod flow {
            use std::time::SystemTime;
            fn stamp() -> SystemTime { SystemTime::now() }
            #[node(entry, to = b)]
            async fn a(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let t = stamp(); todo!() }
            #[node(to = END)]
            async fn b(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let t = stamp(); todo!() }
        }
    });
    one(
        &errs,
        "`SystemTime::now` (`std::time::SystemTime::now`), called from node `a` through `stamp`, reads",
    );
    assert!(errs[0].ends_with("`#[node(impure = \"reason\")]` on `a`"), "{errs:#?}");
}

#[test]
fn helper_chains_cycles_values_and_associated_fns() {
    let errs = graph(syn::parse_quote! {
        mod flow {
            fn outer(n: u32) -> u32 { if n == 0 { inner() } else { outer(n - 1) } }
            fn inner() -> u32 { std::env::args().count() as u32 }
            struct Ids;
            impl Ids {
                fn fresh() -> u128 { Self::draw() }
                fn draw() -> u128 { uuid::Uuid::new_v4().as_u128() }
            }
            mod util { pub fn seed() -> u64 { rand::random() } }
            fn each(x: &u8) -> u8 { std::process::id() as u8 }
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> {
                let n = outer(3);
                let id = Ids::fresh();
                let seed = util::seed();
                let v: Vec<u8> = s.bytes.iter().map(each).collect();
                todo!()
            }
        }
    });
    assert_eq!(errs.len(), 4, "{errs:#?}");
    let all = errs.join("\n");
    assert!(all.contains("`std::env::args`, called from node `plan` through `outer` -> `inner`,"), "{all}");
    assert!(
        all.contains("`uuid::Uuid::new_v4`, called from node `plan` through `Ids::fresh` -> `Ids::draw`,"),
        "{all}"
    );
    assert!(all.contains("`rand::random`, called from node `plan` through `seed`,"), "{all}");
    assert!(all.contains("`std::process::id`, called from node `plan` through `each`,"), "{all}");
}

#[test]
fn helpers_of_impure_nodes_other_nodes_and_the_file_are_not_followed() {
    let errs = graph(syn::parse_quote! {
        mod flow {
            fn stamp() -> std::time::SystemTime { std::time::SystemTime::now() }
            #[node(entry, to = b, impure = "reads the clock on purpose")]
            async fn a(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let t = stamp(); todo!() }
            #[node(to = END)]
            async fn b(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let r = a(s, ctx).await; todo!() }
        }
    });
    assert!(errs.is_empty(), "{errs:#?}");
    // A helper of the file: its tokens are not the macro's input, so no error could point into it.
    let errs = in_file(syn::parse_quote! {
        fn stamp() -> std::time::SystemTime { std::time::SystemTime::now() }
        mod flow {
            use super::*;
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let t = stamp(); todo!() }
        }
    });
    assert!(errs.is_empty(), "{errs:#?}");
}

#[test]
fn a_static_reached_through_a_helper_names_the_node() {
    let errs = graph(syn::parse_quote! {
        mod flow {
            static HITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            fn count() -> u64 { HITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) }
            #[node(entry, to = END)]
            async fn plan(s: &S, ctx: &mut Ctx) -> NodeResult<S> { let n = count(); todo!() }
        }
    });
    one(&errs, "`HITS`, used from node `plan` through `count`, is a `static` of type");
}

// ---- Merge functions resolve names through their module too. ----

#[test]
fn merge_functions_resolve_through_the_file() {
    let errs = merge_in_file(syn::parse_quote! {
        use std::time::SystemTime as Clock;
        #[reducer]
        fn merge(current: &mut Vec<String>, written: Vec<String>) { current.push(format!("{:?}", Clock::now())); }
    });
    one(&errs, "reducers must be pure: `Clock::now` (`std::time::SystemTime::now`) reads the wall clock");
    let errs = merge_in_file(syn::parse_quote! {
        mod env { pub fn var(_: &str) -> bool { true } }
        #[reducer]
        fn merge(current: &mut u8, written: u8) { if env::var("X") { *current = written } }
    });
    assert!(errs.is_empty(), "{errs:#?}");
    let errs = merge_in_file(syn::parse_quote! {
        static MERGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        #[reducer]
        fn merge(current: &mut u8, written: u8) { MERGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed); }
    });
    one(&errs, "reducers must be pure: `MERGES` is a `static` of type");
    // The helpers a merge function calls are in the file, not the macro's input: not followed.
    let errs = merge_in_file(syn::parse_quote! {
        fn stamp() -> std::time::SystemTime { std::time::SystemTime::now() }
        #[reducer]
        fn merge(current: &mut u8, written: u8) { let t = stamp(); }
    });
    assert!(errs.is_empty(), "{errs:#?}");
}
