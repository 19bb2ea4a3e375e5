//! The option parser shared by every attribute: `key`, `key = value`, `key(nested, ...)`, comma
//! separated. Unknown, misplaced and duplicate keys are reported (with the valid choices) and skipped, so
//! the rest of the list is still read.

use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};
use syn::{Ident, Token};

use crate::diag::Errors;
use crate::keywords::{ALL, Kind, Owner};
use graph_core::suggest::{did_you_mean, list};

/// One parsed option.
#[derive(Clone)]
pub(crate) struct Opt {
    pub(crate) key: Ident,
    pub(crate) value: Value,
}

/// An option's value.
#[derive(Clone)]
pub(crate) enum Value {
    Flag,
    /// The option was given in the wrong shape (already reported); it counts as present.
    Invalid,
    Type(Box<syn::Type>),
    Expr(Box<syn::Expr>),
    Nested(Options),
}

/// The valid options of one attribute, in source order.
#[derive(Clone, Default)]
pub(crate) struct Options {
    pub(crate) list: Vec<Opt>,
}

impl Options {
    pub(crate) fn get(&self, name: &str) -> Option<&Opt> {
        self.list.iter().find(|o| o.key == name)
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub(crate) fn expr(&self, name: &str) -> Option<(&Ident, &syn::Expr)> {
        match self.get(name) {
            Some(Opt { key, value: Value::Expr(e) }) => Some((key, e)),
            _ => None,
        }
    }
}

/// Parses `tokens` (an attribute's arguments) against `owner`'s table.
pub(crate) fn parse(tokens: TokenStream, owner: &'static Owner, errs: &mut Errors) -> Options {
    let mut out = Options::default();
    let parser = |input: ParseStream| {
        out = parse_list(input, owner, errs);
        Ok(())
    };
    if let Err(e) = parser.parse2(tokens) {
        errs.push(e);
    }
    out
}

fn parse_list(input: ParseStream, owner: &'static Owner, errs: &mut Errors) -> Options {
    let mut out = Options::default();
    while !input.is_empty() {
        if let Err(e) = parse_one(input, owner, &mut out, errs) {
            errs.push(e);
            skip_to_comma(input);
        }
        if input.is_empty() {
            break;
        }
        if let Err(e) = input.parse::<Token![,]>() {
            errs.push(syn::Error::new(e.span(), "expected `,` between options"));
            skip_to_comma(input);
            let _ = input.parse::<Token![,]>();
        }
    }
    out
}

fn parse_one(
    input: ParseStream,
    owner: &'static Owner,
    out: &mut Options,
    errs: &mut Errors,
) -> syn::Result<()> {
    let key: Ident = syn::ext::IdentExt::parse_any(input)?;
    let name = key.to_string();
    let Some(spec) = owner.spec(&name) else {
        errs.at(key.span(), unknown_message(&name, owner));
        skip_value(input);
        return Ok(());
    };
    let value = match spec.kind {
        Kind::Flag => {
            if input.peek(Token![=]) || input.peek(syn::token::Paren) {
                skip_value(input);
                errs.at(
                    key.span(),
                    format!("option `{name}` of `{}` takes no value: write `{}`", owner.name, spec.example),
                );
            }
            Value::Flag
        }
        Kind::Type | Kind::Value => {
            if input.parse::<Option<Token![=]>>()?.is_none() {
                skip_value(input);
                errs.at(key.span(), format!("option `{name}` needs a value: `{}`", spec.example));
                out.list.push(Opt { key, value: Value::Invalid });
                return Ok(());
            }
            if matches!(spec.kind, Kind::Type) {
                Value::Type(Box::new(input.parse()?))
            } else {
                Value::Expr(Box::new(input.parse()?))
            }
        }
        Kind::Nested(inner) => {
            if !input.peek(syn::token::Paren) {
                skip_value(input);
                errs.at(key.span(), format!("option `{name}` takes a list: `{}`", spec.example));
                out.list.push(Opt { key, value: Value::Invalid });
                return Ok(());
            }
            let content;
            syn::parenthesized!(content in input);
            Value::Nested(parse_list(&content, inner, errs))
        }
    };
    if let Some(first) = out.get(&name) {
        errs.both(
            key.span(),
            format!("duplicate option `{name}` in `{}`: give it once", owner.name),
            first.key.span(),
            format!("`{name}` first given here"),
        );
        return Ok(());
    }
    out.list.push(Opt { key, value });
    Ok(())
}

/// "unknown option" with the valid choices, or "misplaced" when another attribute owns the name.
pub(crate) fn unknown_message(name: &str, owner: &Owner) -> String {
    let valid = if owner.specs.is_empty() {
        format!("`{}` takes no options", owner.name)
    } else {
        format!("valid options of `{}`: {}", owner.name, list(owner.names()))
    };
    if let Some(other) = ALL.iter().find(|o| !std::ptr::eq(**o, owner) && o.spec(name).is_some()) {
        return format!("option `{name}` belongs to `{}`, not to `{}`; {valid}", other.name, owner.name);
    }
    format!("unknown option `{name}`{}; {valid}", did_you_mean(name, owner.names()))
}

fn skip_value(input: ParseStream) {
    if input.peek(Token![=]) || input.peek(syn::token::Paren) {
        skip_to_comma(input);
    }
}

fn skip_to_comma(input: ParseStream) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            if let proc_macro2::TokenTree::Punct(p) = &tt
                && p.as_char() == ','
            {
                return Ok(((), rest));
            }
            rest = next;
        }
        Ok(((), rest))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keywords::{GRAPH, NODE};
    use quote::quote;

    fn run(tokens: TokenStream, owner: &'static Owner) -> (Vec<String>, Vec<String>) {
        let mut errs = Errors::default();
        let opts = parse(tokens, owner, &mut errs);
        (opts.list.iter().map(|o| o.key.to_string()).collect(), errs.messages())
    }

    #[test]
    fn parses_every_shape() {
        let (keys, errs) = run(
            quote!(
                entry,
                to = [a, END],
                timeout = "5s",
                retry(attempts = 3, backoff = fixed("1s")),
                impure = "x"
            ),
            &NODE,
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(keys, ["entry", "to", "timeout", "retry", "impure"]);
    }

    #[test]
    fn unknown_options_suggest_and_list() {
        let (keys, errs) = run(quote!(entyr, to = a), &NODE);
        assert_eq!(keys, ["to"]);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].starts_with(
                "unknown option `entyr`; did you mean `entry`?; valid options of `#[node]`: `entry`, `to`"
            ),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn misplaced_options_name_their_owner() {
        let (_, errs) = run(quote!(entry), &GRAPH);
        assert!(errs[0].starts_with("option `entry` belongs to `#[node]`, not to `#[graph]`"), "{}", errs[0]);
    }

    #[test]
    fn duplicates_are_reported_at_both_sites() {
        let (keys, errs) = run(quote!(entry, entry), &NODE);
        assert_eq!(keys, ["entry"]);
        assert_eq!(errs, ["duplicate option `entry` in `#[node]`: give it once", "`entry` first given here"]);
    }

    #[test]
    fn value_shape_mistakes() {
        let (_, errs) = run(quote!(entry = true, to, retry = 3), &NODE);
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].contains("takes no value"));
        assert!(errs[1].contains("needs a value"));
        assert!(errs[2].contains("takes a list"));
    }
}
