//! `cached-gated-verdict`: the result of a gate stored in a process-wide cache.
//!
//! A gated verdict depends on the execution context it was computed in (a cron job inside a
//! worker gets "not owned"); memoizing it hands one context's answer to another. A *verdict* is a
//! call (or a function value) of one of [`Context::gated_fns`](super::Context): identity's reads
//! (`identity::gate`, `owned_kanban_task`, `is_dispatcher_owned_worker_context`), any function
//! marked `#[kanban_identity_gated]`, and any function of `gates/` or `identity/` built on them
//! (`gates::snapshot`); or a local `let` bound to such a call. A machine fact computed in `gates/`
//! (is this a container?) is not a verdict and may be cached. A *cache* is
//! a `static` (including `thread_local!`, `OnceLock`, `LazyLock`): the verdict is flagged when it
//! appears in a static's initializer, in the arguments of a storing method (`get_or_init`, `set`,
//! `insert`, …) called on a static (directly or inside its `with` closure), or on the right of an
//! assignment into a static. Applies to the whole crate, `identity/` included.

use std::collections::{HashMap, HashSet};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule};
use crate::diag::Diagnostic;
use crate::resolve::{Imports, call_path, chain_root};

pub struct CachedGatedVerdict;

const NAME: &str = "cached-gated-verdict";
const FIX: &str = "call the gate at the point of use every time (verdicts depend on the execution \
     context and must never be memoized); cache only facts of the machine";

/// Methods that put a value into a cell, lock, map or once-cell.
const STORING: &[&str] = &[
    "get_or_init",
    "get_or_try_init",
    "get_or_insert",
    "get_or_insert_with",
    "call_once",
    "set",
    "replace",
    "insert",
    "push",
    "store",
    "swap",
    "compare_exchange",
    "fetch_or",
    "fetch_and",
    "entry",
    "or_insert",
    "or_insert_with",
];

/// Methods on a `thread_local!` key that hand a closure the cell.
const WITH: &[&str] = &["with", "with_borrow", "with_borrow_mut"];

impl Rule for CachedGatedVerdict {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        let mut scan = Scan {
            cx,
            imports: &file.imports,
            tainted: HashSet::new(),
            aliases: HashMap::new(),
            path: &file.file.path,
            out,
        };
        scan.visit_file(&file.file.ast);
    }
}

struct Scan<'a, 'c> {
    cx: &'a Context<'c>,
    imports: &'a Imports,
    /// Locals bound to a verdict in the function being scanned.
    tainted: HashSet<String>,
    /// Locals bound to a static or a guard of one (`if let Ok(mut g) = CACHE.lock()`).
    aliases: HashMap<String, String>,
    path: &'a str,
    out: &'a mut Vec<Diagnostic>,
}

impl Scan<'_, '_> {
    fn is_verdict_call(&self, c: &syn::ExprCall) -> Option<String> {
        self.is_verdict_fn(call_path(c)?)
    }

    /// Whether `path` names a verdict function (called, or passed as `LazyLock::new(gates::f)`).
    fn is_verdict_fn(&self, path: &syn::Path) -> Option<String> {
        let segs = self.imports.resolve(path);
        let last = segs.last()?.as_str();
        let through_gates = segs.len() >= 2 && segs[segs.len() - 2] == "gates";
        let qualified = segs.len() == 1
            || segs.iter().any(|s| {
                matches!(
                    s.as_str(),
                    "gates" | "identity" | "self" | "Self" | "crate" | "super"
                )
            });
        let verdict = (through_gates && !self.cx.plain_gates_fns.contains(last))
            || (self.cx.gated_fns.contains(last) && qualified);
        verdict.then(|| segs.join("::"))
    }

    /// The first verdict inside `expr`: its span and a name for it.
    fn verdict_in(&self, expr: &syn::Expr) -> Option<(Span, String)> {
        struct Find<'s, 'a, 'c> {
            scan: &'s Scan<'a, 'c>,
            found: Option<(Span, String)>,
        }
        impl Visit<'_> for Find<'_, '_, '_> {
            fn visit_expr_call(&mut self, c: &syn::ExprCall) {
                if self.found.is_none()
                    && let Some(name) = self.scan.is_verdict_call(c)
                {
                    self.found = Some((c.span(), format!("`{name}()`")));
                }
                visit::visit_expr_call(self, c);
            }
            fn visit_expr_path(&mut self, p: &syn::ExprPath) {
                if self.found.is_some() {
                    return;
                }
                if let Some(id) = p.path.get_ident()
                    && self.scan.tainted.contains(&id.to_string())
                {
                    self.found = Some((p.span(), format!("`{id}` (bound to a gated verdict)")));
                } else if let Some(name) = self.scan.is_verdict_fn(&p.path) {
                    self.found = Some((p.span(), format!("`{name}`")));
                }
            }
        }
        let mut find = Find {
            scan: self,
            found: None,
        };
        find.visit_expr(expr);
        find.found
    }

    fn static_root(&self, expr: &syn::Expr) -> Option<String> {
        match chain_root(expr) {
            syn::Expr::Path(p) => {
                let name = p.path.segments.last()?.ident.to_string();
                if p.path.segments.len() == 1
                    && let Some(cache) = self.aliases.get(&name)
                {
                    return Some(cache.clone());
                }
                self.cx.statics.contains(&name).then_some(name)
            }
            _ => None,
        }
    }

    fn bind(&mut self, pat: &syn::Pat, init: &syn::Expr) {
        let mut idents = Vec::new();
        pat_idents(pat, &mut idents);
        if self.verdict_in(init).is_some() {
            self.tainted.extend(idents.iter().cloned());
        }
        if let Some(cache) = self.static_root(init) {
            for id in idents {
                self.aliases.insert(id, cache.clone());
            }
        }
    }

    fn report(&mut self, span: Span, what: &str, cache: &str) {
        self.out.push(Diagnostic::error(
            self.path,
            span,
            NAME,
            format!("{what} is a gated verdict stored in the process-wide cache `{cache}`"),
            FIX,
        ));
    }

    /// Inside a `with` closure of a thread-local: a storing call or an assignment of a verdict.
    fn stores_verdict(&self, expr: &syn::Expr) -> Option<(Span, String)> {
        struct Find<'s, 'a, 'c> {
            scan: &'s Scan<'a, 'c>,
            found: Option<(Span, String)>,
        }
        impl Visit<'_> for Find<'_, '_, '_> {
            fn visit_expr_method_call(&mut self, m: &syn::ExprMethodCall) {
                if self.found.is_none() && STORING.contains(&m.method.to_string().as_str()) {
                    self.found = m.args.iter().find_map(|a| self.scan.verdict_in(a));
                }
                visit::visit_expr_method_call(self, m);
            }
            fn visit_expr_assign(&mut self, a: &syn::ExprAssign) {
                if self.found.is_none() {
                    self.found = self.scan.verdict_in(&a.right);
                }
                visit::visit_expr_assign(self, a);
            }
        }
        let mut find = Find {
            scan: self,
            found: None,
        };
        find.visit_expr(expr);
        find.found
    }

    fn with_fn_scope(&mut self, f: impl FnOnce(&mut Self)) {
        let saved = std::mem::take(&mut self.tainted);
        let aliases = std::mem::take(&mut self.aliases);
        f(self);
        self.tainted = saved;
        self.aliases = aliases;
    }
}

impl Visit<'_> for Scan<'_, '_> {
    fn visit_item_fn(&mut self, f: &syn::ItemFn) {
        self.with_fn_scope(|s| visit::visit_item_fn(s, f));
    }
    fn visit_impl_item_fn(&mut self, f: &syn::ImplItemFn) {
        self.with_fn_scope(|s| visit::visit_impl_item_fn(s, f));
    }

    fn visit_item_static(&mut self, s: &syn::ItemStatic) {
        if let Some((span, what)) = self.verdict_in(&s.expr) {
            self.report(span, &what, &s.ident.to_string());
        }
        visit::visit_item_static(self, s);
    }

    fn visit_local(&mut self, l: &syn::Local) {
        if let Some(init) = &l.init {
            self.bind(&l.pat, &init.expr);
        }
        visit::visit_local(self, l);
    }

    fn visit_expr_let(&mut self, l: &syn::ExprLet) {
        self.bind(&l.pat, &l.expr);
        visit::visit_expr_let(self, l);
    }

    fn visit_expr_method_call(&mut self, m: &syn::ExprMethodCall) {
        let method = m.method.to_string();
        if let Some(cache) = self.static_root(&m.receiver) {
            let hit = if STORING.contains(&method.as_str()) {
                m.args.iter().find_map(|a| self.verdict_in(a))
            } else if WITH.contains(&method.as_str()) {
                m.args.iter().find_map(|a| self.stores_verdict(a))
            } else {
                None
            };
            if let Some((span, what)) = hit {
                self.report(span, &what, &cache);
            }
        }
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_assign(&mut self, a: &syn::ExprAssign) {
        if let Some(cache) = self.static_root(&a.left)
            && let Some((span, what)) = self.verdict_in(&a.right)
        {
            self.report(span, &what, &cache);
        }
        visit::visit_expr_assign(self, a);
    }
}

fn pat_idents(pat: &syn::Pat, out: &mut Vec<String>) {
    match pat {
        syn::Pat::Ident(i) => out.push(i.ident.to_string()),
        syn::Pat::Type(t) => pat_idents(&t.pat, out),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        syn::Pat::Reference(r) => pat_idents(&r.pat, out),
        _ => {}
    }
}
