//! The lint rules, one per file (model: cargo-semver-checks' lint files). Each rule has a
//! kebab-case name that appears in its diagnostics and fixtures under
//! `lints/tests/fixtures/<name>/{fail,pass}/`.
//!
//! Rules see only non-test code of the checked crates (see [`crate::source`] and
//! [`crate::scope`], which also names the exemptions) and never modify it.

mod cached_gated_verdict;
pub mod global_mutable_state;
mod identity_key_read;
mod raw_command;
mod raw_thread_spawn;
mod uncarried_job;
mod ungated_identity;
mod unheld_guard;

use std::collections::{HashMap, HashSet};

use syn::visit::{self, Visit};

use crate::diag::Diagnostic;
use crate::resolve::{Consts, Imports, Resolver};
use crate::source::{SourceFile, Tree};

/// The prefix of every worker identity / behaviour / location key.
pub const KANBAN_PREFIX: &str = "HERMES_KANBAN_";

/// The attribute that marks a function allowed to turn worker identity into behaviour.
pub const GATED_ATTR: &str = "kanban_identity_gated";

/// A lint rule.
pub trait Rule {
    /// The kebab-case name printed in diagnostics.
    fn name(&self) -> &'static str;
    /// Appends the rule's findings in `file` to `out`.
    fn check_file(&self, cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>);
}

/// Every rule, in the order their findings are printed.
pub fn all() -> Vec<Box<dyn Rule>> {
    vec![
        Box::new(identity_key_read::IdentityKeyRead),
        Box::new(ungated_identity::UngatedIdentity),
        Box::new(cached_gated_verdict::CachedGatedVerdict),
        Box::new(raw_thread_spawn::RawThreadSpawn),
        Box::new(raw_command::RawCommand),
        Box::new(unheld_guard::UnheldGuard),
        Box::new(uncarried_job::UncarriedJob),
        Box::new(global_mutable_state::GlobalMutableState),
    ]
}

/// What the rules know about the whole crate.
pub struct Context<'a> {
    pub tree: &'a Tree,
    pub consts: Consts,
    /// Names of functions whose result is a gated verdict: identity's reads (`gate`,
    /// `owned_kanban_task`, `is_dispatcher_owned_worker_context`), every function carrying
    /// `#[kanban_identity_gated]`, and every function of `gates/` or `identity/` that calls one
    /// of those (transitively, e.g. `gates::snapshot`). Machine facts in `gates/` are not.
    pub gated_fns: HashSet<String>,
    /// Functions of `gates/` that are not verdicts (machine facts, formatting helpers).
    pub plain_gates_fns: HashSet<String>,
    /// Names of `static` items (including `thread_local!` ones) anywhere in the crate.
    pub statics: HashSet<String>,
    /// Functions that pass one of their parameters straight to `env::var`/`var_os`: name →
    /// positions of those parameters (a call of one with a key is a read of that key).
    pub env_readers: HashMap<String, Vec<usize>>,
    /// Type aliases, structs and enums of the crate by name: the aliased type, or each field's
    /// type, with the file it is written in (for `global-mutable-state`).
    pub type_defs: HashMap<String, Vec<(syn::Type, String)>>,
    /// Each file's imports, by path.
    pub imports: HashMap<String, Imports>,
}

/// One file with its imports.
pub struct FileCx<'a> {
    pub file: &'a SourceFile,
    pub imports: Imports,
}

impl FileCx<'_> {
    pub fn resolver<'a>(&'a self, cx: &'a Context<'_>) -> Resolver<'a> {
        Resolver {
            consts: &cx.consts,
            path: &self.file.path,
        }
    }
}

impl<'a> Context<'a> {
    pub fn new(tree: &'a Tree) -> Self {
        struct Collect<'c> {
            gated: &'c mut HashSet<String>,
            statics: &'c mut HashSet<String>,
            type_defs: &'c mut HashMap<String, Vec<(syn::Type, String)>>,
            path: &'c str,
        }
        impl Collect<'_> {
            fn add_fields<'f>(
                &mut self,
                name: &syn::Ident,
                fields: impl IntoIterator<Item = &'f syn::Field>,
            ) {
                let entry = self.type_defs.entry(name.to_string()).or_default();
                for f in fields {
                    entry.push((f.ty.clone(), self.path.to_owned()));
                }
            }
        }
        impl Visit<'_> for Collect<'_> {
            fn visit_item_fn(&mut self, f: &syn::ItemFn) {
                if has_gated_attr(&f.attrs) {
                    self.gated.insert(f.sig.ident.to_string());
                }
                visit::visit_item_fn(self, f);
            }
            fn visit_impl_item_fn(&mut self, f: &syn::ImplItemFn) {
                if has_gated_attr(&f.attrs) {
                    self.gated.insert(f.sig.ident.to_string());
                }
                visit::visit_impl_item_fn(self, f);
            }
            fn visit_item_static(&mut self, s: &syn::ItemStatic) {
                self.statics.insert(s.ident.to_string());
                visit::visit_item_static(self, s);
            }
            fn visit_item_type(&mut self, t: &syn::ItemType) {
                self.type_defs
                    .entry(t.ident.to_string())
                    .or_default()
                    .push(((*t.ty).clone(), self.path.to_owned()));
                visit::visit_item_type(self, t);
            }
            fn visit_item_struct(&mut self, s: &syn::ItemStruct) {
                self.add_fields(&s.ident, &s.fields);
                visit::visit_item_struct(self, s);
            }
            fn visit_item_enum(&mut self, e: &syn::ItemEnum) {
                self.add_fields(&e.ident, e.variants.iter().flat_map(|v| &v.fields));
                visit::visit_item_enum(self, e);
            }
            fn visit_item_union(&mut self, u: &syn::ItemUnion) {
                self.add_fields(&u.ident, &u.fields.named);
                visit::visit_item_union(self, u);
            }
        }
        let mut gated_fns: HashSet<String> = IDENTITY_READS.iter().map(|s| s.to_string()).collect();
        let mut surface_fns: Vec<(String, &syn::Block)> = Vec::new();
        let mut gates_fns: HashSet<String> = HashSet::new();
        let mut statics = HashSet::new();
        let mut env_readers = HashMap::new();
        let mut type_defs = HashMap::new();
        let mut all_imports = HashMap::new();
        for file in &tree.files {
            let imports = Imports::of(&file.ast);
            // Every function of the crate: a helper or memo function outside `gates/` that
            // returns a verdict is a verdict too (caching its result caches the verdict).
            let surface = true;
            for_each_fn_sig(&file.ast, |sig, block| {
                if surface {
                    surface_fns.push((sig.ident.to_string(), block));
                }
                if file.in_module("gates") {
                    gates_fns.insert(sig.ident.to_string());
                }
                let params = env_read_params(sig, block, &imports);
                if !params.is_empty() {
                    env_readers.insert(sig.ident.to_string(), params);
                }
            });
            Collect {
                gated: &mut gated_fns,
                statics: &mut statics,
                type_defs: &mut type_defs,
                path: &file.path,
            }
            .visit_file(&file.ast);
            all_imports.insert(file.path.clone(), imports);
        }
        // Functions of the identity surface that derive their result from a verdict.
        loop {
            let before = gated_fns.len();
            for (name, block) in &surface_fns {
                if !gated_fns.contains(name) && calls_any(block, &gated_fns) {
                    gated_fns.insert(name.clone());
                }
            }
            if gated_fns.len() == before {
                break;
            }
        }
        let plain_gates_fns = gates_fns.difference(&gated_fns).cloned().collect();
        Context {
            tree,
            consts: Consts::of(tree),
            plain_gates_fns,
            gated_fns,
            statics,
            env_readers,
            type_defs,
            imports: all_imports,
        }
    }
}

/// Positions of the parameters of `sig` that `block` passes directly to `env::var`/`var_os`.
fn env_read_params(sig: &syn::Signature, block: &syn::Block, imports: &Imports) -> Vec<usize> {
    let names: Vec<Option<String>> = sig
        .inputs
        .iter()
        .filter_map(|i| match i {
            syn::FnArg::Typed(t) => Some(match &*t.pat {
                syn::Pat::Ident(p) => Some(p.ident.to_string()),
                _ => None,
            }),
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    struct Find<'a> {
        imports: &'a Imports,
        names: &'a [Option<String>],
        found: Vec<usize>,
    }
    impl Visit<'_> for Find<'_> {
        fn visit_item(&mut self, _: &syn::Item) {}
        fn visit_expr_call(&mut self, c: &syn::ExprCall) {
            if let Some(path) = crate::resolve::call_path(c) {
                let segs = self.imports.resolve(path);
                let reads = crate::resolve::ends_with(&segs, &["env", "var"])
                    || crate::resolve::ends_with(&segs, &["env", "var_os"]);
                if reads
                    && let Some(arg) = c.args.first()
                    && let syn::Expr::Path(p) = strip_refs(arg)
                    && let Some(id) = p.path.get_ident()
                    && let Some(i) = self
                        .names
                        .iter()
                        .position(|n| n.as_deref() == Some(&id.to_string()))
                    && !self.found.contains(&i)
                {
                    self.found.push(i);
                }
            }
            visit::visit_expr_call(self, c);
        }
    }
    let mut find = Find {
        imports,
        names: &names,
        found: Vec::new(),
    };
    find.visit_block(block);
    find.found
}

/// identity's own reads of worker identity / ownership, verdicts by definition.
pub const IDENTITY_READS: &[&str] = &[
    "gate",
    "owned_kanban_task",
    "is_dispatcher_owned_worker_context",
];

/// True when `block` calls (or names as a function value) a function whose name is in `names`.
fn calls_any(block: &syn::Block, names: &HashSet<String>) -> bool {
    struct Find<'a> {
        names: &'a HashSet<String>,
        found: bool,
    }
    impl Visit<'_> for Find<'_> {
        fn visit_item(&mut self, _: &syn::Item) {}
        fn visit_expr_path(&mut self, p: &syn::ExprPath) {
            if let Some(last) = p.path.segments.last()
                && self.names.contains(&last.ident.to_string())
            {
                self.found = true;
            }
        }
    }
    let mut find = Find {
        names,
        found: false,
    };
    find.visit_block(block);
    find.found
}

/// `expr` without leading `&`, `*` and parentheses.
fn strip_refs(mut expr: &syn::Expr) -> &syn::Expr {
    loop {
        expr = match expr {
            syn::Expr::Reference(r) => &r.expr,
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => &u.expr,
            syn::Expr::Paren(p) => &p.expr,
            other => return other,
        }
    }
}

/// Calls `f` with the signature and body of every function of `file`, at any depth.
pub fn for_each_fn_sig<'f>(
    file: &'f syn::File,
    mut f: impl FnMut(&'f syn::Signature, &'f syn::Block),
) {
    struct Fns<F>(F);
    impl<'f, F: FnMut(&'f syn::Signature, &'f syn::Block)> Visit<'f> for Fns<F> {
        fn visit_item_fn(&mut self, i: &'f syn::ItemFn) {
            (self.0)(&i.sig, &i.block);
            visit::visit_item_fn(self, i);
        }
        fn visit_impl_item_fn(&mut self, i: &'f syn::ImplItemFn) {
            (self.0)(&i.sig, &i.block);
            visit::visit_impl_item_fn(self, i);
        }
        fn visit_trait_item_fn(&mut self, i: &'f syn::TraitItemFn) {
            if let Some(block) = &i.default {
                (self.0)(&i.sig, block);
            }
            visit::visit_trait_item_fn(self, i);
        }
    }
    Fns(&mut f).visit_file(file);
}

/// True when `attrs` contain `#[kanban_identity_gated]` (with or without arguments or a path).
pub fn has_gated_attr(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == GATED_ATTR)
    })
}

/// Runs every rule over `tree`; findings sorted by place.
pub fn run(tree: &Tree) -> Vec<Diagnostic> {
    run_rules(tree, &all())
}

/// Runs `rules` over `tree`, less the exemptions of [`crate::scope::EXEMPT`]; findings sorted by
/// place.
pub fn run_rules(tree: &Tree, rules: &[Box<dyn Rule>]) -> Vec<Diagnostic> {
    run_rules_with(tree, rules, true)
}

/// Every rule over `tree`, the exemptions of [`crate::scope::EXEMPT`] ignored (to prove each
/// one is still needed).
pub fn run_ignoring_exemptions(tree: &Tree) -> Vec<Diagnostic> {
    run_rules_with(tree, &all(), false)
}

fn run_rules_with(tree: &Tree, rules: &[Box<dyn Rule>], exempt: bool) -> Vec<Diagnostic> {
    let cx = Context::new(tree);
    let mut out = Vec::new();
    for file in &tree.files {
        let fcx = FileCx {
            file,
            imports: Imports::of(&file.ast),
        };
        for rule in rules {
            if exempt && crate::scope::is_exempt(&file.path, rule.name()) {
                continue;
            }
            rule.check_file(&cx, &fcx, &mut out);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Runs the rule named `name` only (for fixtures); `None` if there is no such rule.
pub fn run_named(tree: &Tree, name: &str) -> Option<Vec<Diagnostic>> {
    let rule = all().into_iter().find(|r| r.name() == name)?;
    Some(run_rules(tree, &[rule]))
}

/// Calls `f` for every function body of `file` — free functions, methods, trait default methods,
/// at any depth — with its name and attributes. Nested functions get their own call.
pub fn for_each_fn<'f>(
    file: &'f syn::File,
    mut f: impl FnMut(&'f syn::Ident, &'f [syn::Attribute], &'f syn::Block),
) {
    struct Fns<'f, F> {
        f: F,
        _file: std::marker::PhantomData<&'f ()>,
    }
    impl<'f, F: FnMut(&'f syn::Ident, &'f [syn::Attribute], &'f syn::Block)> Visit<'f> for Fns<'f, F> {
        fn visit_item_fn(&mut self, i: &'f syn::ItemFn) {
            (self.f)(&i.sig.ident, &i.attrs, &i.block);
            visit::visit_item_fn(self, i);
        }
        fn visit_impl_item_fn(&mut self, i: &'f syn::ImplItemFn) {
            (self.f)(&i.sig.ident, &i.attrs, &i.block);
            visit::visit_impl_item_fn(self, i);
        }
        fn visit_trait_item_fn(&mut self, i: &'f syn::TraitItemFn) {
            if let Some(block) = &i.default {
                (self.f)(&i.sig.ident, &i.attrs, block);
            }
            visit::visit_trait_item_fn(self, i);
        }
    }
    Fns {
        f: &mut f,
        _file: std::marker::PhantomData,
    }
    .visit_file(file);
}

/// Visits a function body without descending into nested items (they are visited on their own).
pub fn visit_body<'a, V: Visit<'a>>(v: &mut V, block: &'a syn::Block) {
    for stmt in &block.stmts {
        if !matches!(stmt, syn::Stmt::Item(_)) {
            v.visit_stmt(stmt);
        }
    }
}
