//! `GRAPH_MACROS_DEBUG=<name>` prints a macro's expansion, formatted, on stderr at compile time.
//!
//! `<name>` is a graph's name (the module name, or `name = "..."`) or a `#[reducer]` struct's name; `*`
//! prints every expansion. Cargo does not know the macros read this variable, so touch the file (or
//! `cargo clean -p <crate>`) to see the output of a crate that is already built.

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

/// The expansion formatted with `prettyplease`, or raw tokens when they do not parse as a file.
pub(crate) fn format(tokens: &TokenStream) -> String {
    match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(_) => tokens.to_string(),
    }
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
}
