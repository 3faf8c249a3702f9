//! Makes macro arguments visible to the rules without expanding any macro.
//!
//! syn keeps a macro invocation as opaque tokens, so `format!("HERMES_KANBAN_{x}")` or
//! `vec![("HERMES_KANBAN_TASK", id)]` would hide what the rules look for. This pass rewrites every
//! expression or statement macro whose body parses as comma-separated expressions into a call of
//! the same path (`vec![a, b]` becomes `vec(a, b)`; the spans stay the original ones), and turns
//! `thread_local! { static … }` into the `static` items it declares (marked `#[thread_local]`). Macros whose bodies are not
//! expressions (`matches!`, `macro_rules!`) are left alone. The arguments of
//! `#[kanban_identity_gated(fallback = <expr>)]` become the first statement of the function's body
//! (they run in it after expansion), so a rule sees an env read or a cache hidden there. It never
//! changes a file on disk.

use syn::punctuated::Punctuated;
use syn::visit_mut::{self, VisitMut};

/// Rewrites the macros of `file` in place.
pub fn expand_macros(file: &mut syn::File) {
    Expander.visit_file_mut(file);
}

/// The arguments of an expression-like macro (`name!(a, b, …)`), if its body parses as such.
pub fn macro_args(mac: &syn::Macro) -> Option<Punctuated<syn::Expr, syn::Token![,]>> {
    mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        .ok()
}

fn as_call(mac: &syn::Macro) -> Option<syn::Expr> {
    let args = macro_args(mac)?;
    Some(syn::Expr::Call(syn::ExprCall {
        attrs: Vec::new(),
        func: Box::new(syn::Expr::Path(syn::ExprPath {
            attrs: Vec::new(),
            qself: None,
            path: mac.path.clone(),
        })),
        paren_token: Default::default(),
        args,
    }))
}

fn is_thread_local(mac: &syn::Macro) -> bool {
    mac.path
        .segments
        .last()
        .is_some_and(|s| s.ident == "thread_local")
}

fn thread_local_items(mac: &syn::Macro) -> Option<Vec<syn::Item>> {
    if !is_thread_local(mac) {
        return None;
    }
    let file: syn::File = mac.parse_body().ok()?;
    // Marked `#[thread_local]` (what the items are), so a rule can tell them from plain statics.
    let marker: syn::Attribute = syn::parse_quote!(#[thread_local]);
    Some(
        file.items
            .into_iter()
            .map(|mut item| {
                if let syn::Item::Static(s) = &mut item {
                    s.attrs.push(marker.clone());
                }
                item
            })
            .collect(),
    )
}

fn expand_items(items: &mut Vec<syn::Item>) {
    let mut out = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        match &item {
            syn::Item::Macro(m) => match thread_local_items(&m.mac) {
                Some(inner) => out.extend(inner),
                None => out.push(item),
            },
            _ => out.push(item),
        }
    }
    *items = out;
}

/// The expressions of `#[kanban_identity_gated(name = <expr>, …)]` attributes in `attrs`.
fn gated_attr_exprs(attrs: &[syn::Attribute]) -> Vec<syn::Expr> {
    let mut out = Vec::new();
    for attr in attrs {
        let gated = attr
            .path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "kanban_identity_gated");
        if let (true, syn::Meta::List(list)) = (gated, &attr.meta)
            && let Ok(args) = list
                .parse_args_with(Punctuated::<syn::MetaNameValue, syn::Token![,]>::parse_terminated)
        {
            out.extend(args.into_iter().map(|nv| nv.value));
        }
    }
    out
}

/// Puts the gated attribute's expressions at the top of `block`.
fn hoist_gated_args(attrs: &[syn::Attribute], block: &mut syn::Block) {
    let exprs = gated_attr_exprs(attrs);
    if exprs.is_empty() {
        return;
    }
    let stmts = exprs
        .into_iter()
        .map(|e| syn::Stmt::Expr(e, Some(Default::default())));
    block.stmts.splice(0..0, stmts);
}

struct Expander;

impl VisitMut for Expander {
    fn visit_item_fn_mut(&mut self, f: &mut syn::ItemFn) {
        hoist_gated_args(&f.attrs, &mut f.block);
        visit_mut::visit_item_fn_mut(self, f);
    }

    fn visit_impl_item_fn_mut(&mut self, f: &mut syn::ImplItemFn) {
        hoist_gated_args(&f.attrs, &mut f.block);
        visit_mut::visit_impl_item_fn_mut(self, f);
    }

    fn visit_file_mut(&mut self, file: &mut syn::File) {
        expand_items(&mut file.items);
        visit_mut::visit_file_mut(self, file);
    }

    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        if let Some((_, items)) = &mut m.content {
            expand_items(items);
        }
        visit_mut::visit_item_mod_mut(self, m);
    }

    fn visit_block_mut(&mut self, block: &mut syn::Block) {
        let mut out = Vec::with_capacity(block.stmts.len());
        for stmt in block.stmts.drain(..) {
            let mac = match &stmt {
                syn::Stmt::Macro(m) => Some((&m.mac, m.semi_token)),
                syn::Stmt::Item(syn::Item::Macro(m)) => Some((&m.mac, m.semi_token)),
                _ => None,
            };
            match mac {
                Some((mac, semi)) => {
                    if let Some(items) = thread_local_items(mac) {
                        // A block-local thread_local! declares statics scoped to the block.
                        out.extend(items.into_iter().map(syn::Stmt::Item));
                    } else if let Some(call) = as_call(mac) {
                        out.push(syn::Stmt::Expr(call, semi));
                    } else {
                        out.push(stmt);
                    }
                }
                None => out.push(stmt),
            }
        }
        block.stmts = out;
        visit_mut::visit_block_mut(self, block);
    }

    fn visit_expr_mut(&mut self, expr: &mut syn::Expr) {
        if let syn::Expr::Macro(m) = expr
            && let Some(call) = as_call(&m.mac)
        {
            *expr = call;
        }
        visit_mut::visit_expr_mut(self, expr);
    }
}
