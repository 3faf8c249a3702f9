//! Phase 2: check the item and extract what the expansion needs. Every rejection is spanned on
//! the offending tokens and says what to write instead.

use proc_macro2::{Span, TokenStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Block, Expr, FnArg, Item, Pat, ReturnType, Signature, Token, Type, Visibility,
};

use crate::parse::Args;

/// A function that passed validation, with its identity parameter taken out of the signature.
pub struct GatedFn {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    /// The signature without the identity parameter.
    pub sig: Signature,
    pub block: Box<Block>,
    /// Attributes written on the identity parameter (kept on the `let` that binds it).
    pub identity_attrs: Vec<Attribute>,
    /// The pattern the identity was bound to (`identity`, `_id`, `_`, …).
    pub identity_pat: Box<Pat>,
    /// The parameter's type as written (`&WorkerIdentity`, `&identity::WorkerIdentity`, …).
    pub identity_ty: Box<Type>,
    pub fallback: Option<Expr>,
    /// Where a missing `Default` is reported: the return type, or the name of a `()` function.
    pub return_span: Span,
}

const NEEDS_PARAM: &str = "`#[kanban_identity_gated]` needs a first parameter of type \
     `&WorkerIdentity` (after `self` in a method); add one, e.g. `identity: &WorkerIdentity` — the \
     macro removes it from the signature and binds it to the gated identity";

pub fn validate(args: Args, item: TokenStream) -> syn::Result<GatedFn> {
    let item: Item = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            format!(
                "`#[kanban_identity_gated]` applies to a function with a body; this item does not \
                 parse as one ({e})"
            ),
        )
    })?;
    let func = match item {
        Item::Fn(func) => func,
        other => return Err(not_a_function(&other)),
    };
    let syn::ItemFn {
        attrs,
        vis,
        mut sig,
        block,
    } = func;

    if let Some(token) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            token,
            "`#[kanban_identity_gated]` does not support `async fn`: the ownership context belongs \
             to a thread and a future may move between threads; gate a synchronous function and \
             pass its result into the async code",
        ));
    }
    if let Some(token) = &sig.constness {
        return Err(syn::Error::new_spanned(
            token,
            "`#[kanban_identity_gated]` cannot gate a `const fn`: the gate reads the environment at \
             run time; remove `const`",
        ));
    }

    let (index, identity) = find_identity_param(&sig)?;
    let return_span = match &sig.output {
        ReturnType::Default => sig.ident.span(),
        ReturnType::Type(_, ty) => ty.span(),
    };

    let inputs: Punctuated<FnArg, Token![,]> = std::mem::take(&mut sig.inputs)
        .into_iter()
        .enumerate()
        .filter_map(|(i, arg)| (i != index).then_some(arg))
        .collect();
    sig.inputs = inputs;

    Ok(GatedFn {
        attrs,
        vis,
        sig,
        block,
        identity_attrs: identity.attrs,
        identity_pat: identity.pat,
        identity_ty: identity.ty,
        fallback: args.fallback,
        return_span,
    })
}

/// Finds the identity parameter: the first typed parameter, which must be `&WorkerIdentity`.
fn find_identity_param(sig: &Signature) -> syn::Result<(usize, syn::PatType)> {
    let first = sig
        .inputs
        .iter()
        .enumerate()
        .find_map(|(i, arg)| match arg {
            FnArg::Typed(t) => Some((i, t)),
            FnArg::Receiver(_) => None,
        });
    let Some((index, param)) = first else {
        return Err(syn::Error::new(sig.paren_token.span.join(), NEEDS_PARAM));
    };
    match classify(&param.ty) {
        Shape::Ref => Ok((index, param.clone())),
        Shape::RefMut => Err(syn::Error::new_spanned(
            &param.ty,
            "the identity is read-only: take it as `&WorkerIdentity`, not `&mut WorkerIdentity`",
        )),
        Shape::RefLifetime => Err(syn::Error::new_spanned(
            &param.ty,
            "the gated identity lives only for the call: write `&WorkerIdentity` without a named \
             lifetime, and return owned data (clone what you need) instead of borrowing it",
        )),
        Shape::Value => Err(syn::Error::new_spanned(
            &param.ty,
            "take the identity by reference: `&WorkerIdentity` (the gate lends it for the call)",
        )),
        Shape::Other => {
            let later = sig.inputs.iter().skip(index + 1).find_map(|arg| match arg {
                FnArg::Typed(t) if classify(&t.ty) != Shape::Other => Some(t),
                _ => None,
            });
            match later {
                Some(t) => Err(syn::Error::new_spanned(
                    t,
                    "the `&WorkerIdentity` parameter must come first (right after `self` in a \
                     method); move it to the front",
                )),
                None => Err(syn::Error::new_spanned(param, NEEDS_PARAM)),
            }
        }
    }
}

#[derive(PartialEq, Eq)]
enum Shape {
    Ref,
    RefMut,
    RefLifetime,
    Value,
    Other,
}

fn classify(ty: &Type) -> Shape {
    match strip(ty) {
        Type::Reference(r) if is_worker_identity(&r.elem) => {
            if r.mutability.is_some() {
                Shape::RefMut
            } else if r.lifetime.as_ref().is_some_and(|l| l.ident != "_") {
                Shape::RefLifetime
            } else {
                Shape::Ref
            }
        }
        other if is_worker_identity(other) => Shape::Value,
        _ => Shape::Other,
    }
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => strip(&p.elem),
        Type::Group(g) => strip(&g.elem),
        other => other,
    }
}

fn is_worker_identity(ty: &Type) -> bool {
    match strip(ty) {
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "WorkerIdentity" && s.arguments.is_none()),
        _ => false,
    }
}

fn not_a_function(item: &Item) -> syn::Error {
    const MSG: &str = "`#[kanban_identity_gated]` applies to functions only: put it on the `fn` \
                       that turns worker identity into behaviour";
    match item {
        Item::Struct(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Enum(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Union(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Const(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Static(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Mod(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Trait(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Type(i) => syn::Error::new_spanned(&i.ident, MSG),
        Item::Impl(i) => syn::Error::new_spanned(&i.self_ty, MSG),
        other => syn::Error::new_spanned(other, MSG),
    }
}
