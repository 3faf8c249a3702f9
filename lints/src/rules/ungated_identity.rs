//! `ungated-identity`: a function outside `runtime/src/identity/` that reaches worker identity
//! without `#[kanban_identity_gated]`.
//!
//! "Reaches" means it obtains a `WorkerIdentity` itself: calls the gate (`identity::gate()`,
//! however imported, or passes it as a function value), calls `identity::owned_kanban_task()`
//! (the gate's task id, a shortcut for the same read), or names a `WorkerIdentity` constructor
//! (`WorkerIdentity::…`, a `WorkerIdentity { … }` literal). Receiving a `&WorkerIdentity` parameter is not reaching: the
//! caller got it from the gate. Closures count for the function that contains them.

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule, for_each_fn, has_gated_attr};
use crate::diag::Diagnostic;
use crate::resolve::{Imports, call_path, ends_with};

pub struct UngatedIdentity;

const NAME: &str = "ungated-identity";

impl Rule for UngatedIdentity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, _cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        if file.file.in_identity() {
            return;
        }
        for_each_fn(&file.file.ast, |name, attrs, block| {
            if has_gated_attr(attrs) {
                return;
            }
            let mut find = Find {
                imports: &file.imports,
                found: Vec::new(),
            };
            for stmt in &block.stmts {
                find.visit_stmt(stmt);
            }
            for (span, what) in find.found {
                out.push(Diagnostic::error(
                    &file.file.path,
                    span,
                    NAME,
                    format!("fn `{name}` reaches worker identity through {what} but is not gated"),
                    format!(
                        "add `#[kanban_identity_gated]` to `{name}` and take the identity as its \
                         first parameter `&WorkerIdentity` (or call a `gates::` function instead)"
                    ),
                ));
            }
        });
    }
}

struct Find<'a> {
    imports: &'a Imports,
    found: Vec<(proc_macro2::Span, String)>,
}

impl Find<'_> {
    /// `Some("gate")` / `Some("owned_kanban_task")` when `path` names one of identity's reads.
    fn identity_read(&self, path: &syn::Path) -> Option<&'static str> {
        let segs = self.imports.resolve(path);
        ["gate", "owned_kanban_task"]
            .into_iter()
            .find(|f| ends_with(&segs, &["identity", f]))
    }
}

fn names_worker_identity(path: &syn::Path) -> bool {
    let n = path.segments.len();
    n >= 2 && path.segments[n - 2].ident == "WorkerIdentity"
}

impl Visit<'_> for Find<'_> {
    // Nested items are functions of their own.
    fn visit_item(&mut self, _: &syn::Item) {}

    fn visit_expr_call(&mut self, c: &syn::ExprCall) {
        if let Some(path) = call_path(c)
            && let Some(what) = self.identity_read(path)
        {
            self.found.push((c.span(), format!("`identity::{what}()`")));
            for arg in &c.args {
                self.visit_expr(arg);
            }
            return;
        }
        visit::visit_expr_call(self, c);
    }

    fn visit_expr_path(&mut self, p: &syn::ExprPath) {
        if let Some(what) = self.identity_read(&p.path) {
            // The gate passed as a function value: `.or_else(identity::gate)`.
            self.found.push((p.span(), format!("`identity::{what}`")));
        } else if names_worker_identity(&p.path) {
            self.found
                .push((p.span(), "a `WorkerIdentity` constructor".into()));
        }
        visit::visit_expr_path(self, p);
    }

    fn visit_expr_struct(&mut self, s: &syn::ExprStruct) {
        if s.path
            .segments
            .last()
            .is_some_and(|seg| seg.ident == "WorkerIdentity")
        {
            self.found
                .push((s.span(), "a `WorkerIdentity { … }` literal".into()));
        }
        visit::visit_expr_struct(self, s);
    }
}
