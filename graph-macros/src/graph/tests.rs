//! Front-end tests of `#[graph]`: parse + check on `syn::parse_quote!` input.
