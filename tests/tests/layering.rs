//! The runtime crates have no import circle of more than two files.
//!
//! A file *imports* another when it names an item of it: a `use` of `crate::…`, `super::…`, `self::…`
//! or a child module, or such a path written inline. A path to an item a module re-exports (`pub use`)
//! is followed to the file that defines it, and a re-export of another crate's item is no import at
//! all; `mod x;` alone is not one (a parent declaring its child is not a dependency on it). Comments,
//! string and character literals are left out, and the `super::` of an inline module (`mod tests {
//! .. }`) is its file's own module. The graph of files this gives, per crate, may hold a circle of two
//! (a trait and the one type it is generic over, say) but no larger one: each crate's files form
//! layers, and a change to one file reaches only the files above it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates checked, by their source folder (relative to the workspace root).
const CRATES: &[&str] = &[
    "graph-store/src",
    "graph-store-sled/src",
    "graph-store-sqlite/src",
    "graph-store-sql/src",
    "graph-runtime/src",
    "graphctl/src",
];

/// A module's path from its crate's root (empty for the root).
type Module = Vec<String>;

/// One crate's modules: each module's file and its text without comments and literals.
struct Crate {
    files: BTreeMap<Module, (PathBuf, String)>,
}

impl Crate {
    fn load(src: &Path) -> Crate {
        let mut files = BTreeMap::new();
        walk(&src.join("lib.rs"), Vec::new(), src, &mut files);
        Crate { files }
    }

    fn text(&self, m: &Module) -> &str {
        &self.files[m].1
    }

    /// The file (module) a path used in module `cur` names, `None` for another crate's item.
    fn resolve(&self, cur: &Module, segs: &[String], depth: usize) -> Option<Module> {
        if depth > 8 || segs.is_empty() {
            return None;
        }
        let (mut m, rest): (Module, &[String]) = match segs[0].as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (cur.clone(), &segs[1..]),
            "super" => {
                let mut base = cur.clone();
                let mut rest = segs;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            first if self.files.contains_key(&child(cur, first)) => (cur.clone(), segs),
            _ => return None,
        };
        let mut i = 0;
        while i < rest.len() && self.files.contains_key(&child(&m, &rest[i])) {
            m = child(&m, &rest[i]);
            i += 1;
        }
        if let Some(name) = rest.get(i)
            && let Some(target) = reexports(self.text(&m)).remove(name)
        {
            let local = ["crate", "self", "super"].contains(&target[0].as_str())
                || self.files.contains_key(&child(&m, &target[0]));
            // Another crate's item, re-exported, is no import (`None`); a local one is followed.
            return if local { self.resolve(&m, &target, depth + 1) } else { None };
        }
        Some(m)
    }

    /// Each module's imports of other modules of the crate.
    fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for m in self.files.keys() {
            let out = edges.entry(m.clone()).or_default();
            for path in paths(self.text(m)) {
                if let Some(t) = self.resolve(m, &path, 0).filter(|t| t != m) {
                    out.insert(t);
                }
            }
        }
        edges
    }
}

fn child(m: &Module, name: &str) -> Module {
    let mut c = m.clone();
    c.push(name.to_owned());
    c
}

/// Reads the module in `file` (at `module`, in folder `dir`) and every module it declares with `mod x;`.
fn walk(file: &Path, module: Module, dir: &Path, out: &mut BTreeMap<Module, (PathBuf, String)>) {
    let raw = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let text = strip(&raw);
    for name in declared_modules(&text) {
        for candidate in [dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs")] {
            if candidate.exists() {
                walk(&candidate, child(&module, &name), &dir.join(&name), out);
                break;
            }
        }
    }
    out.insert(module, (file.to_owned(), text));
}

/// The names of the `mod x;` declarations of a text.
fn declared_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace().skip_while(|w| w.starts_with("pub"));
        if words.next() == Some("mod")
            && let Some(name) = words.next().and_then(|w| w.strip_suffix(';'))
        {
            out.push(name.to_owned());
        }
    }
    out
}

/// `text` without comments, string and character literals, and with the `super::` of inline modules
/// (`mod x { .. }`) made `self::` (their parent is the file's module).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(b.len(), |j| i + j);
        } else if text[i..].starts_with("/*") {
            i = text[i + 2..].find("*/").map_or(b.len(), |j| i + 2 + j + 2);
        } else if b[i] == b'r' && (i == 0 || !is_ident(b[i - 1])) && raw_string_at(&text[i..]).is_some() {
            let (hashes, open) = raw_string_at(&text[i..]).expect("checked");
            let close = format!("\"{}", "#".repeat(hashes));
            i = text[i + open..].find(&close).map_or(b.len(), |j| i + open + j + close.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(&text[i..]).is_some() {
            i += char_literal_len(&text[i..]).expect("checked");
            out.push_str("' '");
        } else {
            let c = text[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    inline_modules_super(&out)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `(hashes, length of the opening)` when a raw string starts here: `r"`, `r#"`, ...
fn raw_string_at(s: &str) -> Option<(usize, usize)> {
    let hashes = s[1..].bytes().take_while(|&c| c == b'#').count();
    (s.as_bytes().get(1 + hashes) == Some(&b'"')).then_some((hashes, 2 + hashes))
}

/// The length of a character literal starting here (`'a'`, `'\n'`, `'\''`), `None` for a lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices().skip(1);
    let (_, first) = chars.next()?;
    let end = if first == '\\' {
        chars.next()?;
        chars.find(|&(_, c)| c == '\'')?.0
    } else {
        let (j, c) = chars.next()?;
        (c == '\'').then_some(j)?
    };
    Some(end + 1)
}

/// `super::` inside `mod x { .. }` blocks as `self::`.
fn inline_modules_super(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_inline_mod(rest) {
        let open = at + rest[at..].find('{').expect("found with its brace");
        let mut depth = 0;
        let mut close = rest.len();
        for (j, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(&rest[..=open]);
        out.push_str(&rest[open + 1..close].replace("super::", "self::"));
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// Where the next `mod x {` starts.
fn find_inline_mod(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(j) = text[from..].find("mod ") {
        let at = from + j;
        let after = &text[at + 4..];
        let name_len = after.bytes().take_while(|&c| is_ident(c)).count();
        let boundary = at == 0 || !is_ident(text.as_bytes()[at - 1]);
        if boundary && name_len > 0 && after[name_len..].trim_start().starts_with('{') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// Every path a text names: the leaves of its `use` trees, and `crate::`/`super::`/`self::` paths
/// written inline.
fn paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let boundary = at == 0 || !is_ident(rest.as_bytes()[at - 1]);
        let Some(end) = rest[at..].find(';') else { break };
        if boundary {
            out.extend(use_tree(&rest[at + 4..at + end]).into_iter().map(|(path, _)| path));
        }
        rest = &rest[at + 4..];
    }
    let b = text.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(j) = text[from..].find(root) {
            let at = from + j;
            from = at + root.len();
            if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':') {
                continue;
            }
            let len = text[at..].bytes().take_while(|&c| is_ident(c) || c == b':').count();
            let segs: Vec<String> =
                text[at..at + len].split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
            // `crate::{..}` alone is the head of a `use` tree, read above.
            if segs.len() > 1 {
                out.push(segs);
            }
        }
    }
    out
}

/// The paths a `use` tree names, each with the name it brings into scope (`a::{b, c::{d as e}}` →
/// `a::b` as `b`, `a::c::d` as `e`).
fn use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    // Without whitespace; `a as e` kept as `a@e`.
    let mut bare = String::new();
    for w in tree.split_whitespace() {
        if w == "as" {
            bare.push('@');
        } else {
            bare.push_str(w);
        }
    }
    let mut out = Vec::new();
    expand(&[], &bare, &mut out);
    out
}

fn expand(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut p = prefix.to_vec();
        p.extend(head);
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&p, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if start < inner.len() {
            expand(&p, &inner[start..], out);
        }
    } else if !tree.is_empty() {
        let (path, alias) = tree.split_once('@').unwrap_or((tree, ""));
        let mut p = prefix.to_vec();
        p.extend(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned));
        let name = if alias.is_empty() { p.last().cloned().unwrap_or_default() } else { alias.to_owned() };
        out.push((p, name));
    }
}

/// The names a module re-exports (`pub use path::name;`), with the paths they name.
fn reexports(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(at) = rest.find("pub") {
        let after = &rest[at..];
        let Some(u) = after.find("use ") else { break };
        let between = &after[3..u];
        let Some(end) = after.find(';') else { break };
        if (between.trim().is_empty() || between.trim().starts_with('(')) && u < end {
            for (path, name) in use_tree(&after[u + 4..end]) {
                if name != "*" {
                    out.insert(name, path);
                }
            }
        }
        rest = &rest[at + 3..];
    }
    out
}

/// The strongly connected components of the graph (Tarjan), in no particular order.
fn components(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            connect(&mut s, v);
        }
    }
    s.out
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_owned()
}

#[test]
fn no_import_circle_of_more_than_two_files() {
    let mut found = Vec::new();
    for src in CRATES {
        let krate = Crate::load(&workspace().join(src));
        assert!(krate.files.len() > 3, "{src}: only {} files found", krate.files.len());
        for comp in components(&krate.edges()) {
            if comp.len() > 2 {
                let files: Vec<String> =
                    comp.iter().map(|m| krate.files[m].0.display().to_string()).collect();
                found.push(format!("{src}: {} files import each other: {}", comp.len(), files.join(", ")));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The checker finds a circle, follows re-exports, and ignores comments, literals and other crates.
#[test]
fn the_checker_sees_what_it_should() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\npub use d::D;\npub use std::sync::{Arc as Shared};\n");
    // a → b → c → a: a circle of three; d is reached through the root's re-export.
    write("a.rs", "use crate::b::B;\n// use crate::d::D;\npub struct A;\n");
    write("b.rs", "pub struct B(crate::c::C);\nconst S: &str = \"crate::d::D\";\n");
    write("c.rs", "pub struct C(super::a::A, crate::D, crate::Shared<()>);\n");
    write("d.rs", "pub struct D;\nmod tests { use super::*; }\n");
    let krate = Crate::load(dir.path());
    let edges = krate.edges();
    let m = |s: &str| vec![s.to_owned()];
    assert_eq!(edges[&m("a")], BTreeSet::from([m("b")]), "a comment is not an import");
    assert_eq!(edges[&m("b")], BTreeSet::from([m("c")]), "a string is not an import");
    assert_eq!(
        edges[&m("c")],
        BTreeSet::from([m("a"), m("d")]),
        "a re-export is followed; Shared is std's Arc"
    );
    assert!(edges[&m("d")].is_empty(), "an inline module's `super` is its file");
    let sizes: Vec<usize> = components(&edges).iter().map(Vec::len).filter(|&n| n > 1).collect();
    assert_eq!(sizes, [3]);
}
