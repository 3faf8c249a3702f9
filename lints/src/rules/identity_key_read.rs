//! `identity-key-read`: a `HERMES_KANBAN_*` key read from the process environment outside
//! `runtime/src/identity/`.
//!
//! Flags `env::var(K)` / `env::var_os(K)` (however imported) whose argument mentions a
//! `HERMES_KANBAN_` string, directly, through a `const` anywhere in the crate, or inside
//! `format!`; and every `HERMES_KANBAN_` string in a function (or `static`/`const` initializer)
//! that also calls `env::vars()` / `env::vars_os()`, which is how a prefix filter over the whole
//! environment reads identity; and a call, with such a key, of a same-crate function that passes
//! its parameter straight to `env::var` (`env_str("HERMES_KANBAN_TASK")`). The fix is always the
//! same: ask `identity` (the gate for identity, `identity::settings::get` for knobs and board
//! location).

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, KANBAN_PREFIX, Rule};
use crate::diag::Diagnostic;
use crate::resolve::{Imports, Resolver, call_path, ends_with, mentions_prefix};

pub struct IdentityKeyRead;

const NAME: &str = "identity-key-read";
const FIX: &str = "read worker identity through `identity::gate()` / `#[kanban_identity_gated]`, \
     and knobs or board location through `identity::settings::get(Setting::…)`; only \
     runtime/src/identity/ reads HERMES_KANBAN_* from the environment";

impl Rule for IdentityKeyRead {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        if file.file.in_identity() {
            return;
        }
        let resolver = file.resolver(cx);
        let mut scan = Scan {
            cx,
            imports: &file.imports,
            resolver: &resolver,
            path: &file.file.path,
            out,
        };
        scan.visit_file(&file.file.ast);
    }
}

struct Scan<'a, 'r> {
    cx: &'a Context<'r>,
    imports: &'a Imports,
    resolver: &'a Resolver<'r>,
    path: &'a str,
    out: &'a mut Vec<Diagnostic>,
}

/// `Some("var")` etc. when `call` is `std::env::var`/`var_os`/`vars`/`vars_os`.
fn env_fn(call: &syn::ExprCall, imports: &Imports) -> Option<&'static str> {
    let segs = imports.resolve(call_path(call)?);
    ["var", "var_os", "vars", "vars_os"]
        .into_iter()
        .find(|f| ends_with(&segs, &["env", f]))
}

enum Body<'s> {
    Block(&'s syn::Block),
    Expr(&'s syn::Expr),
}

struct Walk<'w> {
    imports: &'w Imports,
    resolver: &'w Resolver<'w>,
    vars_call: bool,
    mentions: Vec<(Span, String)>,
}

impl Visit<'_> for Walk<'_> {
    fn visit_item(&mut self, _: &syn::Item) {}
    fn visit_expr_call(&mut self, c: &syn::ExprCall) {
        if matches!(env_fn(c, self.imports), Some("vars" | "vars_os")) {
            self.vars_call = true;
        }
        visit::visit_expr_call(self, c);
    }
    fn visit_lit_str(&mut self, s: &syn::LitStr) {
        if s.value().starts_with(KANBAN_PREFIX) {
            self.mentions.push((s.span(), s.value()));
        }
    }
    fn visit_expr_path(&mut self, p: &syn::ExprPath) {
        let e = syn::Expr::Path(p.clone());
        if let Some((_, value)) = mentions_prefix(&e, KANBAN_PREFIX, self.resolver) {
            self.mentions.push((p.span(), value));
        }
    }
}

impl Scan<'_, '_> {
    /// A scope (function body, static or const initializer): when it calls `env::vars()`, every
    /// `HERMES_KANBAN_` string it mentions is a read of that key.
    fn scope(&mut self, body: Body<'_>) {
        let mut walk = Walk {
            imports: self.imports,
            resolver: self.resolver,
            vars_call: false,
            mentions: Vec::new(),
        };
        match body {
            Body::Block(b) => walk.visit_block(b),
            Body::Expr(e) => walk.visit_expr(e),
        }
        if !walk.vars_call {
            return;
        }
        for (span, value) in walk.mentions {
            self.out.push(Diagnostic::error(
                self.path,
                span,
                NAME,
                format!(
                    "`{value}` is matched against `std::env::vars()` outside identity: this \
                     reads worker identity from the environment"
                ),
                FIX,
            ));
        }
    }
}

impl Visit<'_> for Scan<'_, '_> {
    fn visit_item_fn(&mut self, f: &syn::ItemFn) {
        self.scope(Body::Block(&f.block));
        visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &syn::ImplItemFn) {
        self.scope(Body::Block(&f.block));
        visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.scope(Body::Block(block));
        }
        visit::visit_trait_item_fn(self, f);
    }
    fn visit_item_static(&mut self, s: &syn::ItemStatic) {
        self.scope(Body::Expr(&s.expr));
        visit::visit_item_static(self, s);
    }
    fn visit_item_const(&mut self, c: &syn::ItemConst) {
        self.scope(Body::Expr(&c.expr));
        visit::visit_item_const(self, c);
    }

    fn visit_expr_call(&mut self, c: &syn::ExprCall) {
        if let Some(f @ ("var" | "var_os")) = env_fn(c, self.imports)
            && let Some(arg) = c.args.first()
            && let Some((_, value)) = mentions_prefix(arg, KANBAN_PREFIX, self.resolver)
        {
            self.out.push(Diagnostic::error(
                self.path,
                c.span(),
                NAME,
                format!("`std::env::{f}` reads `{value}` outside identity"),
                FIX,
            ));
        }
        // A same-crate helper that hands its parameter to `env::var`.
        if let Some(path) = call_path(c)
            && let Some(last) = path.segments.last()
        {
            self.helper_read(&last.ident.to_string(), c.args.iter(), c.span());
        }
        visit::visit_expr_call(self, c);
    }
}

impl Scan<'_, '_> {
    fn helper_read<'e>(
        &mut self,
        name: &str,
        args: impl Iterator<Item = &'e syn::Expr>,
        span: Span,
    ) {
        let Some(params) = self.cx.env_readers.get(name) else {
            return;
        };
        for (i, arg) in args.enumerate() {
            if params.contains(&i)
                && let Some((_, value)) = mentions_prefix(arg, KANBAN_PREFIX, self.resolver)
            {
                self.out.push(Diagnostic::error(
                    self.path,
                    span,
                    NAME,
                    format!(
                        "`{name}` reads the environment variable it is given, so this call reads \
                         `{value}` outside identity"
                    ),
                    FIX,
                ));
            }
        }
    }
}
