//! The env-key drift guard (ARCHITECTURE.md §9): every `HERMES_KANBAN_*` key that
//! `dispatch::default_spawn` puts into (or removes from) a worker's environment must be
//! classified in `identity::KANBAN_ENV_KEYS` (identity and location: the scrubber removes them
//! from non-owned children) or `identity::BEHAVIOR_ONLY_ENV_KEYS` (behaviour knobs).
//!
//! How it reads the code (syn, no type checking):
//! * `default_spawn` must be defined exactly once in the non-test code of `runtime/src`.
//! * Starting from it, it follows the same-crate functions it calls whose signature handles a
//!   command or an env map (a parameter or return type naming `Command`, a map, `Vec<(…)>`,
//!   `Extend` or an iterator of pairs), transitively. String arguments at the call site are bound
//!   to the helper's parameters, so `set(&mut cmd, KEY, v)` resolves inside `set`.
//! * Keys come from `.env(K, _)`, `.envs(…)` / `.extend(…)` (arrays, `vec![]`, consts or locals
//!   of `(K, V)` tuples), `.env_remove(K)` and `.insert(K, _)`. `K` is resolved through string
//!   literals, `const`/`static` items anywhere in the crate, `let` bindings, `for` and closure
//!   bindings over such collections, `if`/`match` arms and `to_string()`-like conversions.
//! * An `.env(K, _)` whose key cannot be resolved is an error (the guard cannot vouch for it);
//!   an unresolved `.env_remove(K)` is a warning (a removal never grants identity); an unresolved
//!   `.insert` is ignored (it may be an unrelated map).
//!
//! Findings: an unclassified key (error, at the injection, naming the constant it went through),
//! no `HERMES_KANBAN_*` injection at all (error: parser drift), a missing or duplicated
//! `default_spawn` or key list (error), a classified key never injected (warning).

use std::collections::{BTreeMap, HashMap, HashSet};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::diag::Diagnostic;
use crate::resolve::{Binding, Consts, Locals, Resolver, Str};
use crate::rules::KANBAN_PREFIX;
use crate::source::{IDENTITY_DIR, Tree};

/// The rule name printed in drift diagnostics.
pub const RULE: &str = "drift";
/// The function the guard parses (contract name).
pub const SPAWN_FN: &str = "default_spawn";
/// The identity key list.
pub const IDENTITY_LIST: &str = "KANBAN_ENV_KEYS";
/// The behaviour-only key list.
pub const BEHAVIOR_LIST: &str = "BEHAVIOR_ONLY_ENV_KEYS";
/// The list of keys that are safe for any child to inherit (`PATH`, settings).
pub const INHERITABLE_LIST: &str = "INHERITABLE_ENV_KEYS";
/// The delegated-child marker: the grant boundary may remove it, nobody may set it.
pub const MARKER: &str = "HERMES_DELEGATED_CHILD_CONTEXT";

const CLASSIFY: &str = "classify it: add it to `identity::KANBAN_ENV_KEYS` if it identifies the \
     worker, its task, run, board, profile, session or tenant (non-owned children then lose it), \
     to `identity::BEHAVIOR_ONLY_ENV_KEYS` if it only tunes the worker's behaviour, or to \
     `identity::INHERITABLE_ENV_KEYS` if any child may inherit it";

/// Whether a key is put into the child's environment or taken out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Set,
    Remove,
}

/// One key found in `default_spawn` or a helper.
#[derive(Debug, Clone)]
pub struct Injection {
    pub key: String,
    pub kind: Kind,
    pub path: String,
    pub span: Span,
    /// The constant the key was read through: (name, file, line).
    pub via: Option<(String, String, usize)>,
    /// The function containing the call.
    pub in_fn: String,
}

/// What the guard found.
#[derive(Debug, Default)]
pub struct Report {
    pub injections: Vec<Injection>,
    pub diagnostics: Vec<Diagnostic>,
    /// The functions the grant walk reached: (file, line of the name). They are the grant
    /// boundary; everywhere else an identity key put into a child is an error.
    pub walked: HashSet<(String, usize)>,
}

/// Runs the guard over `tree`; diagnostics sorted by place.
pub fn check(tree: &Tree) -> Vec<Diagnostic> {
    let mut d = analyze(tree).diagnostics;
    d.sort();
    d.dedup();
    d
}

struct FnDef<'t> {
    name: String,
    path: &'t str,
    sig: &'t syn::Signature,
    block: &'t syn::Block,
}

fn index_fns(tree: &Tree) -> Vec<FnDef<'_>> {
    struct Collect<'t, 'o> {
        path: &'t str,
        out: &'o mut Vec<FnDef<'t>>,
    }
    impl<'t> Visit<'t> for Collect<'t, '_> {
        fn visit_item_fn(&mut self, f: &'t syn::ItemFn) {
            self.out.push(FnDef {
                name: f.sig.ident.to_string(),
                path: self.path,
                sig: &f.sig,
                block: &f.block,
            });
            visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'t syn::ImplItemFn) {
            self.out.push(FnDef {
                name: f.sig.ident.to_string(),
                path: self.path,
                sig: &f.sig,
                block: &f.block,
            });
            visit::visit_impl_item_fn(self, f);
        }
        fn visit_trait_item_fn(&mut self, f: &'t syn::TraitItemFn) {
            if let Some(block) = &f.default {
                self.out.push(FnDef {
                    name: f.sig.ident.to_string(),
                    path: self.path,
                    sig: &f.sig,
                    block,
                });
            }
            visit::visit_trait_item_fn(self, f);
        }
    }
    let mut out = Vec::new();
    for file in &tree.files {
        Collect {
            path: &file.path,
            out: &mut out,
        }
        .visit_file(&file.ast);
    }
    out
}

/// True when the function returns an env map or a collection of pairs (not a `Command`).
fn returns_pairs(sig: &syn::Signature) -> bool {
    let syn::ReturnType::Type(_, ty) = &sig.output else {
        return false;
    };
    let text = quote::quote!(#ty).to_string();
    [
        "HashMap", "BTreeMap", "IndexMap", "Vec < (", "[(", "Item = (",
    ]
    .iter()
    .any(|m| text.contains(m))
}

/// Runs the guard and returns everything it found.
pub fn analyze(tree: &Tree) -> Report {
    let consts = Consts::of(tree);
    let fns = index_fns(tree);
    let mut report = Report::default();

    let spawns: Vec<usize> = (0..fns.len())
        .filter(|&i| fns[i].name == SPAWN_FN)
        .collect();
    let spawn_idx = match spawns.as_slice() {
        [] => {
            let path = tree
                .files
                .iter()
                .find(|f| f.in_module("dispatch"))
                .map_or("runtime/src/dispatch/mod.rs", |f| f.path.as_str());
            report.diagnostics.push(Diagnostic {
                path: path.to_owned(),
                line: 1,
                col: 1,
                severity: crate::Severity::Error,
                rule: RULE,
                message: format!(
                    "`{SPAWN_FN}` is missing: no non-test function of runtime/src has that name, \
                     so nothing shows which environment a worker is granted"
                ),
                fix: format!(
                    "define `dispatch::{SPAWN_FN}` (contract name, ARCHITECTURE.md §5); if it was renamed, \
                     rename it back"
                ),
            });
            return report;
        }
        [one] => *one,
        [first, rest @ ..] => {
            let first = &fns[*first];
            let line = first.sig.ident.span().start().line;
            for dup in rest.iter().map(|&i| &fns[i]) {
                report.diagnostics.push(Diagnostic::error(
                    dup.path,
                    dup.sig.ident.span(),
                    RULE,
                    format!(
                        "`{SPAWN_FN}` is defined twice (first at {}:{line}); the guard cannot \
                         tell which one grants identity",
                        first.path
                    ),
                    "keep exactly one `default_spawn`; name helpers differently",
                ));
            }
            return report;
        }
    };

    // Walk default_spawn and the helpers it hands the command or env map to.
    let spawn = &fns[spawn_idx];
    let mut queue: Vec<(usize, HashMap<String, Vec<Str>>, usize)> = Vec::new();
    queue.push((spawn_idx, HashMap::new(), 0));
    let mut seen: HashSet<String> = HashSet::new();
    while let Some((idx, params, depth)) = queue.pop() {
        let def = &fns[idx];
        let mut sig_key: Vec<String> = params
            .iter()
            .map(|(k, v)| {
                let vals: Vec<&str> = v.iter().map(|s| s.value.as_str()).collect();
                format!("{k}={}", vals.join("|"))
            })
            .collect();
        sig_key.sort();
        if !seen.insert(format!("{idx}:{}", sig_key.join(","))) || depth > 8 {
            continue;
        }
        report
            .walked
            .insert((def.path.to_owned(), def.sig.ident.span().start().line));
        let resolver = Resolver {
            consts: &consts,
            path: def.path,
        };
        let mut locals: Locals<'_> = params
            .into_iter()
            .map(|(k, v)| (k, Binding::Strings(v)))
            .collect();
        bind_locals(def.block, &mut locals);
        let mut walk = Walk {
            def,
            fns: &fns,
            resolver: &resolver,
            locals: &locals,
            injections: &mut report.injections,
            diagnostics: &mut report.diagnostics,
            calls: Vec::new(),
        };
        walk.visit_block(def.block);
        if idx != spawn_idx && returns_pairs(def.sig) {
            walk.returned_pairs();
        }
        for (callee, bound) in walk.calls {
            queue.push((callee, bound, depth + 1));
        }
    }

    classify(tree, &consts, spawn, &mut report);
    report
}

/// The three key lists of `identity`, read from the tree.
struct Lists {
    /// list name → (keys, file, span)
    found: BTreeMap<&'static str, (Vec<Str>, String)>,
}

impl Lists {
    fn read(consts: &Consts, diagnostics: &mut Vec<Diagnostic>) -> Option<Lists> {
        let mut found = BTreeMap::new();
        for list in [IDENTITY_LIST, BEHAVIOR_LIST, INHERITABLE_LIST] {
            let defs: Vec<_> = consts
                .all(list)
                .iter()
                .filter(|d| d.path.starts_with(IDENTITY_DIR))
                .collect();
            let Some(def) = defs.first() else {
                diagnostics.push(Diagnostic {
                    path: format!("{IDENTITY_DIR}mod.rs"),
                    line: 1,
                    col: 1,
                    severity: crate::Severity::Error,
                    rule: RULE,
                    message: format!("`{list}` is not defined under {IDENTITY_DIR}"),
                    fix: format!(
                        "define `pub const {list}: &[&str] = &[…];` in runtime/src/identity/ \
                         (the README names the three classes)"
                    ),
                });
                continue;
            };
            let resolver = Resolver {
                consts,
                path: &def.path,
            };
            match resolver.strings(&def.expr, &Locals::new()) {
                Some(keys) => {
                    found.insert(list, (keys, def.path.clone()));
                }
                None => diagnostics.push(Diagnostic::error(
                    &def.path,
                    def.span,
                    RULE,
                    format!("cannot read the keys of `{list}`"),
                    "write it as a slice of string literals or `const` names",
                )),
            }
        }
        (found.len() == 3).then_some(Lists { found })
    }

    fn keys(&self, list: &str) -> HashSet<String> {
        self.found
            .get(list)
            .map(|(k, _)| k.iter().map(|s| s.value.clone()).collect())
            .unwrap_or_default()
    }

    /// The class of `key`, if it is listed.
    fn class_of(&self, key: &str) -> Option<&'static str> {
        [IDENTITY_LIST, BEHAVIOR_LIST, INHERITABLE_LIST]
            .into_iter()
            .find(|list| self.keys(list).contains(key))
    }

    /// True for a key only a grant boundary may set: listed identity or behaviour, or any
    /// `HERMES_KANBAN_*` key not listed as inheritable (unclassified keys fail closed).
    fn is_identity(&self, key: &str) -> bool {
        match self.class_of(key) {
            Some(list) => list != INHERITABLE_LIST,
            None => key.starts_with(KANBAN_PREFIX) || key == MARKER,
        }
    }
}

/// Compares the keys found with the three lists of `identity`.
fn classify(tree: &Tree, consts: &Consts, spawn: &FnDef<'_>, report: &mut Report) {
    let Some(lists) = Lists::read(consts, &mut report.diagnostics) else {
        return;
    };
    let mut diags = Vec::new();
    if !report
        .injections
        .iter()
        .any(|i| i.kind == Kind::Set && i.key.starts_with(KANBAN_PREFIX))
    {
        diags.push(Diagnostic::error(
            spawn.path,
            spawn.sig.ident.span(),
            RULE,
            format!(
                "parser drift: nothing found — no `{KANBAN_PREFIX}*` key is injected by \
                 `{SPAWN_FN}` or the helpers it calls"
            ),
            "inject the worker identity with `.env(K, v)` / `.envs([(K, v), …])` on the worker \
             command in default_spawn (or a helper it calls); if the injection moved somewhere \
             the guard cannot see, teach lints/src/drift.rs",
        ));
    }
    for inj in &report.injections {
        let classified = lists.class_of(&inj.key).is_some();
        // Every key set must be classified; a removal only matters for kanban keys (removing an
        // unrelated variable grants nothing), and removing the marker is the grant's job.
        let needs_class = match inj.kind {
            Kind::Set => true,
            Kind::Remove => inj.key.starts_with(KANBAN_PREFIX),
        };
        if inj.kind == Kind::Set && inj.key == MARKER {
            diags.push(Diagnostic::error(
                &inj.path,
                inj.span,
                RULE,
                format!(
                    "`{}` sets the delegated-child marker `{MARKER}` on the worker it grants",
                    inj.in_fn
                ),
                "a granted worker is owned: remove the marker (`identity::grant::worker_command` \
                 already does), never set it",
            ));
            continue;
        }
        if classified || !needs_class || (inj.kind == Kind::Remove && inj.key == MARKER) {
            continue;
        }
        let via = match &inj.via {
            Some((name, path, line)) => format!(" through const `{name}` ({path}:{line})"),
            None => String::new(),
        };
        let verb = match inj.kind {
            Kind::Set => "injects",
            Kind::Remove => "removes",
        };
        diags.push(Diagnostic::error(
            &inj.path,
            inj.span,
            RULE,
            format!(
                "`{}` {verb} unclassified key `{}`{via}: it is in none of {IDENTITY_LIST}, \
                 {BEHAVIOR_LIST}, {INHERITABLE_LIST}",
                inj.in_fn, inj.key
            ),
            CLASSIFY,
        ));
    }
    let injected: HashSet<&str> = report
        .injections
        .iter()
        .filter(|i| i.kind == Kind::Set)
        .map(|i| i.key.as_str())
        .collect();
    for list in [IDENTITY_LIST, BEHAVIOR_LIST] {
        let Some((keys, path)) = lists.found.get(list) else {
            continue;
        };
        for key in keys {
            if key.value.starts_with(KANBAN_PREFIX) && !injected.contains(key.value.as_str()) {
                diags.push(
                    Diagnostic::error(
                        path,
                        key.span,
                        RULE,
                        format!(
                            "`{}` is listed in {list} but `{SPAWN_FN}` never injects it",
                            key.value
                        ),
                        "inject it in default_spawn, or drop it from the list if no worker \
                         receives it any more",
                    )
                    .warning(),
                );
            }
        }
    }
    report.diagnostics.extend(diags);
    outside_grant(
        tree,
        consts,
        &lists,
        &report.walked,
        &mut report.diagnostics,
    );
    settings_keys(tree, consts, &lists, &mut report.diagnostics);
    owner_launch(tree, &mut report.diagnostics);
}

/// The owner's launch builder (`identity::grant::owner_command`: no identity, no marker).
pub const OWNER_BUILDER: &str = "owner_command";
/// The one function that may start an owner with it (the submitter's, in `admission/`).
pub const OWNER_LAUNCH_FN: &str = "start_owner";

/// The second grant boundary: `owner_command` is called only by `start_owner` (outside
/// `identity/`). `start_owner` itself is not on the worker grant's walk, so [`outside_grant`]
/// already refuses any identity key or marker removal it would put on the owner.
fn owner_launch(tree: &Tree, out: &mut Vec<Diagnostic>) {
    struct Calls<'o> {
        out: &'o mut Vec<Span>,
    }
    impl<'a> Visit<'a> for Calls<'_> {
        fn visit_item(&mut self, _: &'a syn::Item) {}
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if p.path
                .segments
                .last()
                .is_some_and(|s| s.ident == OWNER_BUILDER)
            {
                self.out.push(p.span());
            }
            visit::visit_expr_path(self, p);
        }
    }
    for file in &tree.files {
        if file.in_identity() {
            continue;
        }
        crate::rules::for_each_fn_sig(&file.ast, |sig, block| {
            if sig.ident == OWNER_LAUNCH_FN {
                return;
            }
            let mut spans = Vec::new();
            Calls { out: &mut spans }.visit_block(block);
            for span in spans {
                out.push(Diagnostic::error(
                    &file.path,
                    span,
                    RULE,
                    format!(
                        "`{}` uses `identity::grant::{OWNER_BUILDER}`, the owner's launch \
                         boundary, outside `{OWNER_LAUNCH_FN}`",
                        sig.ident
                    ),
                    "only the submitter's `start_owner` starts an owner (no identity, no \
                     marker); build other children with `identity::command`",
                ));
            }
        });
    }
}

/// The file whose `Setting::key` names every environment knob other modules may read.
pub const SETTINGS_FILE: &str = "runtime/src/identity/settings.rs";

/// Every key `identity::settings` hands out by `Setting` must be listed as inheritable: a setting
/// is read by anyone, in any context, so an identity key there (`Setting::Task =>
/// "HERMES_KANBAN_TASK"`) is a way around the gate.
fn settings_keys(tree: &Tree, consts: &Consts, lists: &Lists, out: &mut Vec<Diagnostic>) {
    struct Arms<'r, 'o> {
        resolver: &'r Resolver<'r>,
        out: &'o mut Vec<Str>,
    }
    impl<'a> Visit<'a> for Arms<'_, '_> {
        fn visit_arm(&mut self, arm: &'a syn::Arm) {
            if let Some(keys) = self.resolver.strings(&arm.body, &Locals::new()) {
                self.out.extend(keys);
            }
            visit::visit_arm(self, arm);
        }
    }
    let Some(file) = tree.files.iter().find(|f| f.path == SETTINGS_FILE) else {
        return;
    };
    let resolver = Resolver {
        consts,
        path: &file.path,
    };
    crate::rules::for_each_fn_sig(&file.ast, |sig, block| {
        if sig.ident != "key" {
            return;
        }
        let mut found = Vec::new();
        Arms {
            resolver: &resolver,
            out: &mut found,
        }
        .visit_block(block);
        for key in found {
            if lists.class_of(&key.value) != Some(INHERITABLE_LIST) {
                out.push(Diagnostic::error(
                    &file.path,
                    key.span,
                    RULE,
                    format!(
                        "`Setting` reads `{}`, which is not listed in {INHERITABLE_LIST}: anyone \
                         may read a setting, in any context",
                        key.value
                    ),
                    "identity keys are read only through the gate; if the key is a plain knob, \
                     list it in `identity::INHERITABLE_ENV_KEYS`",
                ));
            }
        }
    });
}

/// A key only a grant may set (identity, behaviour, the marker, an unclassified kanban key) put
/// into a child's environment by a function the grant walk did not reach: an error wherever it
/// is, outside `identity/` (whose builders refuse such keys by type). Keys that cannot be resolved
/// here are left to that refusal: `ChildCommand` fails the spawn of any identity key at run time.
fn outside_grant(
    tree: &Tree,
    consts: &Consts,
    lists: &Lists,
    walked: &HashSet<(String, usize)>,
    out: &mut Vec<Diagnostic>,
) {
    for file in &tree.files {
        if file.in_identity() {
            continue;
        }
        let resolver = Resolver {
            consts,
            path: &file.path,
        };
        crate::rules::for_each_fn_sig(&file.ast, |sig, block| {
            let line = sig.ident.span().start().line;
            if walked.contains(&(file.path.clone(), line)) {
                return;
            }
            let mut locals = Locals::new();
            bind_locals(block, &mut locals);
            let mut found = Vec::new();
            collect_sets(block, &resolver, &locals, &mut found);
            for s in found {
                if lists.is_identity(&s.value) {
                    out.push(Diagnostic::error(
                        &file.path,
                        s.span,
                        RULE,
                        format!(
                            "`{}` puts `{}` into a child's environment outside a grant boundary",
                            sig.ident, s.value
                        ),
                        "only `dispatch::default_spawn` (through \
                         `identity::grant::worker_command`) grants identity; a child built with \
                         `identity::command` gets the environment its context allows",
                    ));
                }
            }
        });
    }
}

/// Keys set by `.env(K, _)` and `.envs([(K, _), …])` calls in `block` that resolve to strings.
fn collect_sets(
    block: &syn::Block,
    resolver: &Resolver<'_>,
    locals: &Locals<'_>,
    out: &mut Vec<Str>,
) {
    struct Sets<'r, 'o> {
        resolver: &'r Resolver<'r>,
        locals: &'r Locals<'r>,
        out: &'o mut Vec<Str>,
    }
    impl<'a> Visit<'a> for Sets<'_, '_> {
        fn visit_item(&mut self, _: &'a syn::Item) {}
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            let args: Vec<&syn::Expr> = m.args.iter().collect();
            match (m.method.to_string().as_str(), args.as_slice()) {
                ("env", [key, _]) => {
                    if let Some(keys) = self.resolver.strings(key, self.locals) {
                        self.out.extend(keys);
                    }
                }
                ("envs", [arg]) => {
                    if let Some(keys) = self.resolver.tuple_strings(arg, self.locals, 0) {
                        self.out.extend(keys);
                    }
                }
                // Removing the marker grants as much as setting an identity key.
                ("env_remove", [key]) => {
                    if let Some(keys) = self.resolver.strings(key, self.locals) {
                        self.out
                            .extend(keys.into_iter().filter(|k| k.value == MARKER));
                    }
                }
                _ => {}
            }
            visit::visit_expr_method_call(self, m);
        }
    }
    Sets {
        resolver,
        locals,
        out,
    }
    .visit_block(block);
}

/// `UPPER_SNAKE` with at least one underscore (`PATH` is listed, and set with `.env`).
fn looks_like_env_key(key: &str) -> bool {
    key.contains('_')
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Binds `let` names, `for` patterns and single-parameter closure patterns of `block`.
fn bind_locals<'a>(block: &'a syn::Block, locals: &mut Locals<'a>) {
    struct Bind<'a, 'l> {
        locals: &'l mut Locals<'a>,
    }
    impl<'a> Bind<'a, '_> {
        fn bind(&mut self, pat: &'a syn::Pat, expr: &'a syn::Expr, index: Option<usize>) {
            match pat {
                syn::Pat::Ident(i) => {
                    self.locals
                        .insert(i.ident.to_string(), Binding::Expr(expr, index));
                }
                syn::Pat::Type(t) => self.bind(&t.pat, expr, index),
                syn::Pat::Reference(r) => self.bind(&r.pat, expr, index),
                syn::Pat::Tuple(t) if index.is_none() => {
                    for (i, p) in t.elems.iter().enumerate() {
                        self.bind(p, expr, Some(i));
                    }
                }
                _ => {}
            }
        }
    }
    impl<'a> Visit<'a> for Bind<'a, '_> {
        fn visit_item(&mut self, _: &'a syn::Item) {}
        fn visit_local(&mut self, l: &'a syn::Local) {
            if let Some(init) = &l.init {
                // `let (k, v) = ("K", v)`: bind each name to its own element.
                if let (syn::Pat::Tuple(p), syn::Expr::Tuple(t)) = (&l.pat, &*init.expr) {
                    for (pat, e) in p.elems.iter().zip(&t.elems) {
                        self.bind(pat, e, None);
                    }
                } else {
                    self.bind(&l.pat, &init.expr, None);
                }
            }
            visit::visit_local(self, l);
        }
        fn visit_expr_for_loop(&mut self, f: &'a syn::ExprForLoop) {
            self.bind(&f.pat, &f.expr, None);
            visit::visit_expr_for_loop(self, f);
        }
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            for arg in &m.args {
                if let syn::Expr::Closure(c) = arg
                    && let Some(p) = c.inputs.first()
                {
                    self.bind(p, &m.receiver, None);
                }
            }
            visit::visit_expr_method_call(self, m);
        }
    }
    Bind { locals }.visit_block(block);
}

struct Walk<'w, 't> {
    def: &'w FnDef<'t>,
    fns: &'w [FnDef<'t>],
    resolver: &'w Resolver<'w>,
    locals: &'w Locals<'w>,
    injections: &'w mut Vec<Injection>,
    diagnostics: &'w mut Vec<Diagnostic>,
    calls: Vec<(usize, HashMap<String, Vec<Str>>)>,
}

impl Walk<'_, '_> {
    fn record(&mut self, strings: Vec<Str>, kind: Kind) {
        for s in strings {
            self.injections.push(Injection {
                key: s.value,
                kind,
                path: self.def.path.to_owned(),
                span: s.span,
                via: s.via,
                in_fn: self.def.name.clone(),
            });
        }
    }

    fn unresolved(&mut self, expr: &syn::Expr, what: &str, warning: bool) {
        let d = Diagnostic::error(
            self.def.path,
            expr.span(),
            RULE,
            format!(
                "cannot resolve the key of `{what}` in `{}` to a string, so the guard cannot \
                 check its classification",
                self.def.name
            ),
            "use a string literal or a `const` (or a slice / array of `(KEY, value)` tuples)",
        );
        self.diagnostics.push(if warning { d.warning() } else { d });
    }

    /// Keys of a collection of `(K, V)` pairs. `strict_keys`: a tuple whose key cannot be
    /// resolved is an error; `strict_shape`: so is an argument that is neither a collection of
    /// tuples nor a plain local (whose inserts are walked separately).
    fn pairs(&mut self, arg: &syn::Expr, what: &str, strict_keys: bool, strict_shape: bool) {
        if let Some(keys) = self.resolver.tuple_strings(arg, self.locals, 0) {
            self.record(keys, Kind::Set);
            return;
        }
        // A local map or a parameter: its keys come from the inserts we also walk.
        let plain = matches!(crate::resolve::chain_root(arg), syn::Expr::Path(p) if p.path.get_ident().is_some())
            && !matches!(arg, syn::Expr::Array(_) | syn::Expr::Call(_));
        let mut found = false;
        struct Tuples<'x>(Vec<&'x syn::ExprTuple>);
        impl<'x> Visit<'x> for Tuples<'x> {
            fn visit_expr_tuple(&mut self, t: &'x syn::ExprTuple) {
                self.0.push(t);
            }
        }
        let mut tuples = Tuples(Vec::new());
        tuples.visit_expr(arg);
        for t in tuples.0 {
            found = true;
            if let Some(k) = t.elems.first() {
                match self.resolver.strings(k, self.locals) {
                    Some(keys) => self.record(keys, Kind::Set),
                    None if strict_keys => self.unresolved(k, what, false),
                    None => {}
                }
            }
        }
        if !found && !plain && !self.is_pairs_helper_call(arg) && strict_shape {
            self.unresolved(arg, what, false);
        }
    }

    /// True for `helper(…)` / `x.helper(…)` where a same-crate `helper` returns pairs (its
    /// returned collections are checked when it is followed).
    fn is_pairs_helper_call(&self, arg: &syn::Expr) -> bool {
        let name = match arg {
            syn::Expr::Reference(r) => return self.is_pairs_helper_call(&r.expr),
            syn::Expr::Call(c) => match &*c.func {
                syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                _ => None,
            },
            syn::Expr::MethodCall(m) => Some(m.method.to_string()),
            _ => None,
        };
        name.is_some_and(|n| self.fns.iter().any(|f| f.name == n && returns_pairs(f.sig)))
    }

    /// A helper that returns the pairs (`fn worker_env() -> Vec<(&str, String)> { vec![…] }`):
    /// the keys of its returned collections are injected by whoever passes them to `.envs`.
    fn returned_pairs(&mut self) {
        struct Returns<'x>(Vec<&'x syn::Expr>);
        impl<'x> Visit<'x> for Returns<'x> {
            fn visit_item(&mut self, _: &'x syn::Item) {}
            fn visit_expr_closure(&mut self, _: &'x syn::ExprClosure) {}
            fn visit_expr_return(&mut self, r: &'x syn::ExprReturn) {
                if let Some(e) = &r.expr {
                    self.0.push(e);
                }
                visit::visit_expr_return(self, r);
            }
        }
        let block = self.def.block;
        let mut returns = Returns(Vec::new());
        returns.visit_block(block);
        if let Some(syn::Stmt::Expr(tail, None)) = block.stmts.last() {
            returns.0.push(tail);
        }
        for e in returns.0 {
            self.pairs(e, "a returned collection of pairs", true, false);
        }
    }

    fn follow(&mut self, name: &str, args: &[&syn::Expr]) {
        for (idx, def) in self.fns.iter().enumerate() {
            // Every same-crate function or method of that name is followed, whatever its
            // signature: an extension trait's `&mut self` method, a helper returning an alias of
            // `Command`, one taking `impl FnOnce(&mut Command)`. identity's own builders are
            // judged by their tests and types, not here.
            if def.name != name || def.name == SPAWN_FN || def.path.starts_with(IDENTITY_DIR) {
                continue;
            }
            let mut bound = HashMap::new();
            let params = def.sig.inputs.iter().filter_map(|i| match i {
                syn::FnArg::Typed(t) => Some(&*t.pat),
                syn::FnArg::Receiver(_) => None,
            });
            for (pat, arg) in params.zip(args) {
                if let syn::Pat::Ident(pi) = pat
                    && let Some(strings) = self.resolver.strings(arg, self.locals)
                {
                    bound.insert(pi.ident.to_string(), strings);
                }
            }
            self.calls.push((idx, bound));
        }
    }
}

impl<'a> Visit<'a> for Walk<'_, '_> {
    fn visit_item(&mut self, _: &'a syn::Item) {}

    fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
        let method = m.method.to_string();
        let args: Vec<&syn::Expr> = m.args.iter().collect();
        match (method.as_str(), args.as_slice()) {
            ("env", [key, _]) => match self.resolver.strings(key, self.locals) {
                Some(keys) => self.record(keys, Kind::Set),
                None => self.unresolved(key, ".env(K, _)", false),
            },
            ("env_remove", [key]) => match self.resolver.strings(key, self.locals) {
                Some(keys) => self.record(keys, Kind::Remove),
                None => self.unresolved(key, ".env_remove(K)", true),
            },
            ("envs", [arg]) => self.pairs(arg, ".envs(…)", true, true),
            ("extend", [arg]) => self.pairs(arg, ".extend(…)", false, false),
            ("insert", [key, _]) => {
                // Only names shaped like environment variables: the walk follows every helper,
                // and their unrelated maps are keyed by other strings.
                if let Some(keys) = self.resolver.strings(key, self.locals) {
                    let keys = keys
                        .into_iter()
                        .filter(|k| looks_like_env_key(&k.value))
                        .collect();
                    self.record(keys, Kind::Set);
                }
            }
            _ => {}
        }
        self.follow(&method, &args);
        visit::visit_expr_method_call(self, m);
    }

    fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func
            && let Some(last) = p.path.segments.last()
        {
            let args: Vec<&syn::Expr> = c.args.iter().collect();
            self.follow(&last.ident.to_string(), &args);
        }
        visit::visit_expr_call(self, c);
    }
}
