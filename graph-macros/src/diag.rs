//! Error collection: every stage pushes its errors here and keeps going, so one compile shows every
//! mistake; expansion then decides between the real code and typed stubs.

use proc_macro2::{Span, TokenStream};
use std::fmt::Display;

/// The errors of one macro invocation, in the order they were found.
#[derive(Default)]
pub(crate) struct Errors {
    list: Vec<syn::Error>,
}

impl Errors {
    /// An error at `span`.
    pub(crate) fn at(&mut self, span: Span, message: impl Display) {
        self.list.push(syn::Error::new(span, message));
    }

    /// An error covering every token of `tokens` (the caret spans the whole path, not its first segment).
    pub(crate) fn spanned(&mut self, tokens: impl quote::ToTokens, message: impl Display) {
        self.list.push(syn::Error::new_spanned(tokens, message));
    }

    /// A conflict reported at both sites: `message` at the second, `first_note` at the first.
    pub(crate) fn both(
        &mut self,
        second: Span,
        message: impl Display,
        first: Span,
        first_note: impl Display,
    ) {
        let mut e = syn::Error::new(second, message);
        e.combine(syn::Error::new(first, first_note));
        self.list.push(e);
    }

    /// Records an already built error.
    pub(crate) fn push(&mut self, e: syn::Error) {
        self.list.push(e);
    }

    /// True when nothing was reported.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// How many errors were reported.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The messages, for tests.
    #[cfg(test)]
    pub(crate) fn messages(&self) -> Vec<String> {
        self.list.iter().flat_map(|e| e.clone().into_iter().map(|e| e.to_string())).collect()
    }

    /// All errors as `compile_error!` invocations.
    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.list.iter().map(syn::Error::to_compile_error).collect()
    }
}
