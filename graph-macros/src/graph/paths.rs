//! The paths a graph module's code writes, read from its tokens: `tokio::time::sleep`,
//! `summarize::Next::Revise`, `plan::Fork::new().a().b_with(&x)?`.
//!
//! Tokens rather than a `syn` visitor, so paths inside macro arguments (`println!("{:?}",
//! tokio::time::Instant::now())`, a `macro_rules!` body) are seen too: any path may be resolved by rustc
//! through a name the macro generates, wherever it is written.

use proc_macro2::{Delimiter, Ident, Spacing, TokenStream, TokenTree};
use quote::ToTokens;

/// A path whose first segment is looked up in the scope it is written in: `a::b::c` or `self::a::b`
/// (written `self::` is dropped), never the tail of `x::a::b` or of `::a::b`.
pub(crate) struct Rooted {
    /// At least two segments.
    pub(crate) segments: Vec<Ident>,
    /// When the path is called (`a::b::new()`): the methods called on the result in one chain,
    /// `.m1(..)`, `.m2(..)?`, in order.
    pub(crate) chain: Vec<Ident>,
}

/// Every rooted path of two or more segments in `items`, in source order.
pub(crate) fn rooted_paths(items: &[syn::Item]) -> Vec<Rooted> {
    let mut out = Vec::new();
    for item in items {
        scan(item.to_token_stream(), &mut out);
    }
    out
}

fn scan(tokens: TokenStream, out: &mut Vec<Rooted>) {
    let tt: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tt.len() {
        match &tt[i] {
            TokenTree::Group(g) => {
                scan(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(first) if !colons_before(&tt, i) => {
                let mut segments = vec![first.clone()];
                let mut last = i;
                while colons_at(&tt, last + 1)
                    && let Some(TokenTree::Ident(next)) = tt.get(last + 3)
                {
                    segments.push(next.clone());
                    last += 3;
                }
                if segments[0] == "self" {
                    segments.remove(0);
                }
                if segments.len() >= 2 {
                    out.push(Rooted { segments, chain: chain(&tt, last + 1) });
                }
                i = last + 1;
            }
            _ => i += 1,
        }
    }
}

/// `tt[at]` and `tt[at + 1]` are `::`.
fn colons_at(tt: &[TokenTree], at: usize) -> bool {
    matches!(
        (tt.get(at), tt.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// The token before `tt[i]` ends a `::` (so `tt[i]` continues a path).
fn colons_before(tt: &[TokenTree], i: usize) -> bool {
    i >= 2 && colons_at(tt, i - 2)
}

/// `(..)` at `at`, then `.m(..)` calls, each optionally followed by `?`: the methods.
fn chain(tt: &[TokenTree], at: usize) -> Vec<Ident> {
    let is_call = |t: Option<&TokenTree>| matches!(t, Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
    let mut methods = Vec::new();
    if !is_call(tt.get(at)) {
        return methods;
    }
    let mut k = at + 1;
    loop {
        if matches!(tt.get(k), Some(TokenTree::Punct(p)) if p.as_char() == '?') {
            k += 1;
        }
        match (tt.get(k), tt.get(k + 1)) {
            (Some(TokenTree::Punct(dot)), Some(TokenTree::Ident(m)))
                if dot.as_char() == '.' && is_call(tt.get(k + 2)) =>
            {
                methods.push(m.clone());
                k += 3;
            }
            _ => return methods,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(items: Vec<syn::Item>) -> Vec<(String, Vec<String>)> {
        rooted_paths(&items)
            .into_iter()
            .map(|p| {
                let segs: Vec<String> = p.segments.iter().map(ToString::to_string).collect();
                (segs.join("::"), p.chain.iter().map(ToString::to_string).collect())
            })
            .collect()
    }

    #[test]
    fn finds_rooted_paths_in_code_and_in_macro_arguments() {
        let found = paths(vec![syn::parse_quote! {
            async fn a(s: &S, c: &mut Ctx) -> NodeResult<S, a::Next> {
                tokio::time::sleep(std::time::Duration::ZERO).await;
                println!("{:?}", self::helpers::now());
                let x = ::serde_json::json!({});
                let y = crate::x::y;
                let v: Vec::<u8> = Vec::<u8>::new();
                Ok((d, a::Next::End))
            }
        }]);
        let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "a::Next",
                "tokio::time::sleep",
                "std::time::Duration::ZERO",
                "helpers::now",
                "crate::x::y",
                "a::Next::End"
            ]
        );
    }

    #[test]
    fn reads_the_method_chain_of_a_call() {
        let found = paths(vec![syn::parse_quote! {
            fn f() {
                let x = plan::Fork::new().review().publish_with(&1)?.end();
                let y = plan::Fork::new;
                let z = plan::Fork::new().a::<u8>().b();
            }
        }]);
        assert_eq!(
            found[0],
            ("plan::Fork::new".into(), vec!["review".into(), "publish_with".into(), "end".into()])
        );
        assert_eq!(found[1], ("plan::Fork::new".into(), vec![]));
        // A turbofish ends the chain the scanner follows.
        assert_eq!(found[2].1, Vec::<String>::new());
    }
}
