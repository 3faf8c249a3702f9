//! `raw-thread-spawn`: a thread started outside the identity-carrying spawner.
//!
//! A thread started with `std::thread::spawn` begins in the default (owned) context, so a thread
//! spawned from a cron job would regain the worker's authority. Flags, outside
//! `runtime/src/identity/`: calls of `thread::spawn` and `thread::scope` (through `std::thread`,
//! `crate::sync::thread` or any import of them) and `.spawn(…)`/`.spawn_scoped(…)` on a
//! `thread::Builder`.

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule};
use crate::diag::Diagnostic;
use crate::resolve::{Imports, call_path, chain_root, describe_path, ends_with};

pub struct RawThreadSpawn;

const NAME: &str = "raw-thread-spawn";
const FIX: &str = "start threads with `identity::spawn(name, closure)`, which carries the caller's \
     ownership context into the new thread";

impl Rule for RawThreadSpawn {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, _cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        if file.file.in_identity() {
            return;
        }
        Scan {
            imports: &file.imports,
            path: &file.file.path,
            builders: Vec::new(),
            out,
        }
        .visit_file(&file.file.ast);
    }
}

struct Scan<'a> {
    imports: &'a Imports,
    path: &'a str,
    /// Locals bound to a `thread::Builder` (`let b = thread::Builder::new().name(…);`).
    builders: Vec<String>,
    out: &'a mut Vec<Diagnostic>,
}

impl Scan<'_> {
    fn is_builder_new(&self, expr: &syn::Expr) -> bool {
        match chain_root(expr) {
            syn::Expr::Call(c) => call_path(c).is_some_and(|p| {
                let segs = self.imports.resolve(p);
                ends_with(&segs, &["thread", "Builder", "new"])
            }),
            syn::Expr::Path(p) => p
                .path
                .get_ident()
                .is_some_and(|id| self.builders.contains(&id.to_string())),
            _ => false,
        }
    }
}

impl Visit<'_> for Scan<'_> {
    fn visit_local(&mut self, l: &syn::Local) {
        if let Some(init) = &l.init
            && self.is_builder_new(&init.expr)
            && let syn::Pat::Ident(id) = &l.pat
        {
            self.builders.push(id.ident.to_string());
        }
        syn::visit::visit_local(self, l);
    }

    fn visit_expr_call(&mut self, c: &syn::ExprCall) {
        if let Some(path) = call_path(c) {
            let segs = self.imports.resolve(path);
            for f in ["spawn", "scope"] {
                if ends_with(&segs, &["thread", f]) {
                    self.out.push(Diagnostic::error(
                        self.path,
                        c.span(),
                        NAME,
                        format!(
                            "{} starts a thread that does not carry the ownership context",
                            describe_path(path, &segs)
                        ),
                        FIX,
                    ));
                }
            }
        }
        visit::visit_expr_call(self, c);
    }

    fn visit_expr_method_call(&mut self, m: &syn::ExprMethodCall) {
        if (m.method == "spawn" || m.method == "spawn_scoped") && self.is_builder_new(&m.receiver) {
            self.out.push(Diagnostic::error(
                self.path,
                m.method.span(),
                NAME,
                format!(
                    "`thread::Builder::{}` starts a thread that does not carry the ownership \
                     context",
                    m.method
                ),
                FIX,
            ));
        }
        visit::visit_expr_method_call(self, m);
    }
}
