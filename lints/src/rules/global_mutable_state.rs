//! `global-mutable-state`: process-wide or thread-wide mutable state outside its two homes.
//!
//! State that outlives a call and is shared by every execution context is how a verdict judged
//! in one context leaks into another (a cron job reading what the worker's turn cached), and no
//! rule can follow every way a value gets into it (`extend`, `mem::replace`, a helper taking the
//! cell). So the state itself is refused: outside `runtime/src/identity/` (the ownership
//! context) and `runtime/src/sync/` (the std / loom facade), this rule flags
//!
//! * a `static` whose type has interior mutability: `Mutex`, `RwLock`, `Cell`, `RefCell`,
//!   `UnsafeCell`, `OnceLock`, `OnceCell`, `LazyLock`, `LazyCell`, `Lazy`, `Once`, `Condvar`,
//!   any `Atomic*` — also wrapped (`OnceLock<Mutex<…>>`, `&Mutex<…>`, `[AtomicU8; 4]`), through a
//!   renamed import (`use std::sync::Mutex as Lock`), a type alias of the crate (`type Memo =
//!   Mutex<…>`) or a struct or enum of the crate with such a field (`struct Holder(Cell<bool>)`);
//! * every `thread_local!` item (and `#[thread_local]`), whatever its type;
//! * every `static mut` (unsafe code is forbidden, but the item itself is state);
//! * a `static` declared inside a macro the rule cannot read (`macro_rules!` bodies,
//!   `lazy_static!`-style invocations): its type is not visible, so the macro is refused.
//!
//! What the code really needs is listed in [`ALLOWED`], one entry per static with its reason.
//! Names resolve syntactically (imports per file, aliases and structs by name anywhere in the
//! crate); a type of another crate with hidden interior mutability (a `static` of a foreign
//! type that wraps a `Mutex`) is not seen.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule};
use crate::diag::Diagnostic;
use crate::resolve::Imports;

pub struct GlobalMutableState;

const NAME: &str = "global-mutable-state";
const FIX: &str = "keep the state in a value the caller owns and passes (a field, a parameter); \
     global state lives only in `identity/` and `sync/` — a static the code really needs goes into \
     the allow-list of lints/src/rules/global_mutable_state.rs with its reason";

/// The folders that own global state: identity's per-thread ownership context and the facade.
pub const HOMES: &[&str] = &["runtime/src/identity/", "runtime/src/sync/"];

/// The statics the code needs today: `(file, static, reason)`. Each entry must match a static of
/// the tree (`lints/tests/tree.rs` checks it).
pub const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "runtime/src/board/rows.rs",
        "SQL",
        "SQL text built once from compile-time constants: the same in every context, no verdict",
    ),
    (
        "runtime/src/board/rows.rs",
        "LOCKED",
        "SQL text built once from compile-time constants and the backend's row-lock clause",
    ),
    (
        "runtime/src/board/claim.rs",
        "SKIPPING",
        "SQL text built once from compile-time constants and the backend's row-lock clause",
    ),
    (
        "runtime/src/board/heartbeat.rs",
        "LOCKED",
        "SQL text built once from compile-time constants and the backend's row-lock clause",
    ),
    (
        "runtime/src/board/engine/postgres/fast.rs",
        "SQL",
        "the PostgreSQL fast paths' SQL text, built once from compile-time constants",
    ),
    (
        "runtime/src/proc/process.rs",
        "BOOT_ID",
        "a fact of the machine (this boot's id), read once; never an identity verdict",
    ),
    (
        "runtime/src/gates/mod.rs",
        "CONTAINER",
        "a fact of the machine (is this a container?), probed once; never an identity verdict",
    ),
    (
        "runtime/src/gates/mod.rs",
        "S6",
        "a fact of the machine (is s6 the supervisor?), probed once; never an identity verdict",
    ),
    (
        "pgwire/src/cluster.rs",
        "SHARED",
        "test harness (feature `cluster`): the one throwaway PostgreSQL server a test process shares",
    ),
    (
        "pgwire/src/cluster.rs",
        "NEXT",
        "test harness (feature `cluster`): a counter making each test database's name unique",
    ),
    (
        "pgwire/src/cluster.rs",
        "COUNTER",
        "test harness (feature `cluster`): a counter making each scratch folder's name unique",
    ),
];

/// Type names (last path segment) that give a value interior mutability.
const INTERIOR: &[&str] = &[
    "Mutex",
    "RwLock",
    "ReentrantMutex",
    "Cell",
    "RefCell",
    "UnsafeCell",
    "SyncUnsafeCell",
    "OnceCell",
    "OnceLock",
    "LazyLock",
    "LazyCell",
    "Lazy",
    "Once",
    "Condvar",
];

/// How deep aliases and structs are followed (a guard against recursive types).
const MAX_DEPTH: usize = 16;

impl Rule for GlobalMutableState {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        let path = file.file.path.as_str();
        if HOMES.iter().any(|h| path.starts_with(h)) {
            return;
        }
        Scan {
            cx,
            imports: &file.imports,
            path,
            out,
        }
        .visit_file(&file.file.ast);
    }
}

/// True when `(path, name)` is in [`ALLOWED`].
pub fn is_allowed(path: &str, name: &str) -> bool {
    ALLOWED.iter().any(|(p, n, _)| *p == path && *n == name)
}

struct Scan<'a, 'c> {
    cx: &'a Context<'c>,
    imports: &'a Imports,
    path: &'a str,
    out: &'a mut Vec<Diagnostic>,
}

impl Scan<'_, '_> {
    fn report(&mut self, span: proc_macro2::Span, message: String) {
        self.out
            .push(Diagnostic::error(self.path, span, NAME, message, FIX));
    }
}

impl Visit<'_> for Scan<'_, '_> {
    fn visit_item_static(&mut self, s: &syn::ItemStatic) {
        let name = s.ident.to_string();
        let thread_local = s.attrs.iter().any(|a| a.path().is_ident("thread_local"));
        let mutable = matches!(s.mutability, syn::StaticMutability::Mut(_));
        let what = if thread_local {
            Some("a `thread_local!` item, per-thread global state".to_owned())
        } else if mutable {
            Some("a `static mut`".to_owned())
        } else {
            interior(self.cx, self.imports, &s.ty, 0)
                .map(|why| format!("a `static` with interior mutability (through `{why}`)"))
        };
        if let Some(what) = what
            && !is_allowed(self.path, &name)
        {
            self.report(s.static_token.span, format!("`{name}` is {what}"));
        }
        visit::visit_item_static(self, s);
    }

    fn visit_macro(&mut self, m: &syn::Macro) {
        if let Some(span) = static_token(m.tokens.clone()) {
            let name = m
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            self.report(
                span,
                format!(
                    "`{name}!` declares a `static` the rule cannot read (its type is hidden in the \
                     macro)"
                ),
            );
        }
        visit::visit_macro(self, m);
    }
}

/// The span of the first `static` keyword in `tokens` (in a token stream `'static` is a `'`
/// followed by the same identifier, which is a lifetime, not this).
fn static_token(tokens: TokenStream) -> Option<proc_macro2::Span> {
    let mut after_quote = false;
    for t in tokens {
        match &t {
            TokenTree::Ident(i) if *i == "static" && !after_quote => return Some(i.span()),
            TokenTree::Group(g) => {
                if let Some(span) = static_token(g.stream()) {
                    return Some(span);
                }
            }
            _ => {}
        }
        after_quote = matches!(&t, TokenTree::Punct(p) if p.as_char() == '\'');
    }
    None
}

/// The interior-mutable type `ty` holds, if any (its name as written or resolved).
fn interior(cx: &Context<'_>, imports: &Imports, ty: &syn::Type, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    let rec = |t: &syn::Type| interior(cx, imports, t, depth + 1);
    match ty {
        syn::Type::Path(p) => {
            if let Some(q) = &p.qself
                && let Some(hit) = rec(&q.ty)
            {
                return Some(hit);
            }
            let segs = imports.resolve(&p.path);
            let last = segs.last()?.as_str();
            if INTERIOR.contains(&last) || last.starts_with("Atomic") {
                return Some(segs.join("::"));
            }
            for seg in &p.path.segments {
                if let syn::PathArguments::AngleBracketed(args) = &seg.arguments {
                    for arg in &args.args {
                        if let syn::GenericArgument::Type(t) = arg
                            && let Some(hit) = rec(t)
                        {
                            return Some(hit);
                        }
                    }
                }
            }
            // A type alias or a struct/enum of the crate: follow it, in its own file's imports.
            for (def_ty, def_path) in cx.type_defs.get(last).into_iter().flatten() {
                let def_imports = cx.imports.get(def_path)?;
                if let Some(hit) = interior(cx, def_imports, def_ty, depth + 1) {
                    return Some(format!("{last} = {hit}"));
                }
            }
            None
        }
        syn::Type::Reference(r) => rec(&r.elem),
        syn::Type::Ptr(p) => rec(&p.elem),
        syn::Type::Array(a) => rec(&a.elem),
        syn::Type::Slice(s) => rec(&s.elem),
        syn::Type::Paren(p) => rec(&p.elem),
        syn::Type::Group(g) => rec(&g.elem),
        syn::Type::Tuple(t) => t.elems.iter().find_map(rec),
        _ => None,
    }
}
