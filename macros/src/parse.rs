//! Phase 1: the attribute arguments. Accepted: nothing, or `fallback = <expr>` (one trailing comma
//! allowed). Anything else is an error that names the one accepted form.

use proc_macro2::TokenStream;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, Token};

/// The parsed attribute.
pub struct Args {
    /// `fallback = <expr>`: what the function returns outside an owned context.
    pub fallback: Option<Expr>,
}

const USAGE: &str =
    "write `#[kanban_identity_gated]` or `#[kanban_identity_gated(fallback = <expr>)]`";

pub fn parse_args(attr: TokenStream) -> syn::Result<Args> {
    Parser::parse2(parse_inner, attr)
}

fn parse_inner(input: ParseStream<'_>) -> syn::Result<Args> {
    let mut fallback: Option<Expr> = None;
    while !input.is_empty() {
        let key: Ident = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("expected the argument `fallback = <expr>`; {USAGE}"),
            )
        })?;
        if key != "fallback" {
            return Err(syn::Error::new_spanned(
                &key,
                format!(
                    "unknown argument `{key}`: the only argument is `fallback = <expr>`; {USAGE}"
                ),
            ));
        }
        if fallback.is_some() {
            return Err(syn::Error::new_spanned(
                &key,
                "`fallback` is given twice; keep one `fallback = <expr>`",
            ));
        }
        let eq = input.parse::<Token![=]>().map_err(|e| {
            syn::Error::new(e.span(), format!("expected `=` after `fallback`; {USAGE}"))
        })?;
        if input.is_empty() || input.peek(Token![,]) {
            return Err(syn::Error::new_spanned(
                eq,
                format!(
                    "`fallback =` needs an expression: the value the function returns outside a \
                     dispatcher-owned worker context; {USAGE}"
                ),
            ));
        }
        fallback = Some(input.parse()?);
        if !input.is_empty() {
            input.parse::<Token![,]>().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    format!("unexpected tokens after the fallback expression; {USAGE}"),
                )
            })?;
        }
    }
    Ok(Args { fallback })
}
