//! `GRAPH_MACROS_DEBUG=<name>` prints a macro's expansion, formatted, on stderr at compile time.
//!
//! `<name>` is a graph's name (the module name, or `name = "..."`) or a `#[reducer]` struct's name; `*`
//! prints every expansion. Cargo does not know the macros read this variable, so touch the file (or
//! `cargo clean -p <crate>`) to see the output of a crate that is already built.
//!
//! The expansion is formatted by the toolchain's `rustfmt` (run only when the variable is set), so the
//! macros carry no formatter of their own: every user's build compiles this crate, few ever print.

use std::io::Write;
use std::process::{Command, Stdio};

use proc_macro2::TokenStream;

/// The variable's name.
pub(crate) const VAR: &str = "GRAPH_MACROS_DEBUG";

/// Prints `tokens` when the variable selects `name`.
pub(crate) fn maybe_print(kind: &str, name: &str, tokens: &TokenStream) {
    let Ok(wanted) = std::env::var(VAR) else { return };
    if wanted.split(',').map(str::trim).any(|w| w == name || w == "*") {
        eprintln!("// ---- {VAR}: expansion of {kind} `{name}` ----\n{}", format(tokens));
    }
}

/// The expansion formatted by `rustfmt` (`$RUSTFMT`, else the one on `PATH`), or the raw tokens when
/// rustfmt is missing or refuses them.
pub(crate) fn format(tokens: &TokenStream) -> String {
    let raw = tokens.to_string();
    rustfmt(&raw).unwrap_or(raw)
}

fn rustfmt(source: &str) -> Option<String> {
    let program = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    let mut child = Command::new(program)
        .args(["--edition", "2024", "--emit", "stdout", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // Written from a thread: rustfmt may fill its output pipe before it has read all of its input.
    let mut stdin = child.stdin.take()?;
    let source = source.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(source.as_bytes()));
    let out = child.wait_with_output().ok()?;
    writer.join().ok()?.ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_items() {
        let out = super::format(&quote::quote!(
            fn a() -> u8 {
                1
            }
        ));
        assert_eq!(out, "fn a() -> u8 {\n    1\n}\n");
    }

    #[test]
    fn tokens_rustfmt_refuses_are_printed_raw() {
        let tokens = quote::quote!(fn fn = ;);
        assert_eq!(super::format(&tokens), tokens.to_string());
    }
}
