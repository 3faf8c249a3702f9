//! `unheld-guard`: an ownership scope that ends on the line it starts.
//!
//! `identity::non_dispatcher_owned_context()`, `delegated_child_context()`,
//! `enter_non_dispatcher_owned_context()` and `CapturedContext::install()` return guards that
//! lower authority *while they are alive*. `let _ = guard_fn();` (or `_ = guard_fn();`) drops the
//! guard at once — the code after it runs in the context it meant to leave — and `#[must_use]` is
//! silent about it, because the value *was* used. Flags a `let _ =` / `_ =` whose right side is a
//! call of one of those functions, however it is reached (a path, a method chain ending in
//! `install()`, a block or parentheses around it). Bind the guard to a named variable (`let _scope =
//! …`). Applies to the whole crate, `identity/` included.

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule};
use crate::diag::Diagnostic;

pub struct UnheldGuard;

const NAME: &str = "unheld-guard";
const FIX: &str = "hold the guard for the scope: `let _scope = identity::non_dispatcher_owned_context();` \
     (`let _ =` drops it immediately)";

/// Functions and methods whose result is a scope guard.
pub const GUARD_FNS: &[&str] = &[
    "non_dispatcher_owned_context",
    "delegated_child_context",
    "enter_non_dispatcher_owned_context",
    "install",
];

impl Rule for UnheldGuard {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, _cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        Scan {
            path: &file.file.path,
            out,
        }
        .visit_file(&file.file.ast);
    }
}

struct Scan<'a> {
    path: &'a str,
    out: &'a mut Vec<Diagnostic>,
}

/// The guard function `expr` calls last, if any.
fn guard_call(expr: &syn::Expr) -> Option<String> {
    match expr {
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p) => p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .filter(|n| GUARD_FNS.contains(&n.as_str())),
            _ => None,
        },
        syn::Expr::MethodCall(m) => {
            let name = m.method.to_string();
            GUARD_FNS.contains(&name.as_str()).then_some(name)
        }
        syn::Expr::Paren(p) => guard_call(&p.expr),
        syn::Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => guard_call(e),
            _ => None,
        },
        _ => None,
    }
}

impl Scan<'_> {
    fn flag(&mut self, expr: &syn::Expr, name: &str) {
        self.out.push(Diagnostic::error(
            self.path,
            expr.span(),
            NAME,
            format!(
                "the guard of `{name}()` is bound to `_` and dropped at once: the scope ends here"
            ),
            FIX,
        ));
    }
}

impl Visit<'_> for Scan<'_> {
    fn visit_local(&mut self, l: &syn::Local) {
        let wild = match &l.pat {
            syn::Pat::Wild(_) => true,
            syn::Pat::Type(t) => matches!(&*t.pat, syn::Pat::Wild(_)),
            _ => false,
        };
        if wild
            && let Some(init) = &l.init
            && let Some(name) = guard_call(&init.expr)
        {
            self.flag(&init.expr, &name);
        }
        visit::visit_local(self, l);
    }

    fn visit_expr_assign(&mut self, a: &syn::ExprAssign) {
        if matches!(&*a.left, syn::Expr::Infer(_))
            && let Some(name) = guard_call(&a.right)
        {
            self.flag(&a.right, &name);
        }
        visit::visit_expr_assign(self, a);
    }
}
