//! Name resolution, as far as the rules need it: `use` imports per file, `const`/`static` string
//! items anywhere in the crate, and the string values an expression can take.
//!
//! Deliberately approximate (no type checking): a path is resolved by its imports and a constant
//! by its last segment, preferring a definition in the same file. Each rule documents what that
//! approximation means for it. Nothing here reports a finding.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::source::Tree;

/// The `use` imports of one file: local name → full path.
#[derive(Debug, Default)]
pub struct Imports(HashMap<String, Vec<String>>);

impl Imports {
    /// Every `use` in `file`, at any depth (scoping is ignored).
    pub fn of(file: &syn::File) -> Imports {
        struct Uses(Imports);
        impl Visit<'_> for Uses {
            fn visit_item_use(&mut self, u: &syn::ItemUse) {
                add_use_tree(&mut self.0.0, Vec::new(), &u.tree);
            }
        }
        let mut uses = Uses(Imports::default());
        uses.visit_file(file);
        uses.0
    }

    /// The segments of `path` with a leading imported name replaced by its full path.
    pub fn resolve(&self, path: &syn::Path) -> Vec<String> {
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        match segs.first().and_then(|first| self.0.get(first)) {
            Some(full) if path.leading_colon.is_none() => full
                .iter()
                .cloned()
                .chain(segs.into_iter().skip(1))
                .collect(),
            _ => segs,
        }
    }
}

fn add_use_tree(map: &mut HashMap<String, Vec<String>>, prefix: Vec<String>, tree: &syn::UseTree) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            add_use_tree(map, next, &p.tree);
        }
        syn::UseTree::Name(n) => {
            if n.ident == "self" {
                if let Some(last) = prefix.last() {
                    map.insert(last.clone(), prefix.clone());
                }
            } else {
                let mut full = prefix;
                full.push(n.ident.to_string());
                map.insert(n.ident.to_string(), full);
            }
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix;
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            map.insert(r.rename.to_string(), full);
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                add_use_tree(map, prefix.clone(), t);
            }
        }
        syn::UseTree::Glob(_) => {}
    }
}

/// True when `segs` ends with `suffix` (`["std","thread","spawn"]` ends with `["thread","spawn"]`).
pub fn ends_with(segs: &[String], suffix: &[&str]) -> bool {
    segs.len() >= suffix.len()
        && segs[segs.len() - suffix.len()..]
            .iter()
            .zip(suffix)
            .all(|(a, b)| a == b)
}

/// The path of a call's callee, if it is a plain path (`a::b(…)`).
pub fn call_path(call: &syn::ExprCall) -> Option<&syn::Path> {
    match &*call.func {
        syn::Expr::Path(p) => Some(&p.path),
        _ => None,
    }
}

/// The receiver at the start of a method chain (`A.b().c()` → `A`), looking through `&`, `*`,
/// field accesses, `?` and parentheses.
pub fn chain_root(mut expr: &syn::Expr) -> &syn::Expr {
    loop {
        expr = match expr {
            syn::Expr::MethodCall(m) => &m.receiver,
            syn::Expr::Field(f) => &f.base,
            syn::Expr::Reference(r) => &r.expr,
            syn::Expr::Unary(u) => &u.expr,
            syn::Expr::Try(t) => &t.expr,
            syn::Expr::Paren(p) => &p.expr,
            syn::Expr::Group(g) => &g.expr,
            syn::Expr::Index(i) => &i.expr,
            other => return other,
        }
    }
}

/// A `const` or `static` item of the crate.
#[derive(Debug)]
pub struct ConstDef {
    pub name: String,
    pub path: String,
    pub span: Span,
    pub expr: syn::Expr,
}

/// Every `const` and `static` of the crate (free, in modules, in impls, in function bodies).
#[derive(Debug, Default)]
pub struct Consts(HashMap<String, Vec<ConstDef>>);

impl Consts {
    pub fn of(tree: &Tree) -> Consts {
        struct Collect<'a> {
            path: &'a str,
            out: &'a mut HashMap<String, Vec<ConstDef>>,
        }
        impl Collect<'_> {
            fn add(&mut self, ident: &syn::Ident, expr: &syn::Expr) {
                self.out
                    .entry(ident.to_string())
                    .or_default()
                    .push(ConstDef {
                        name: ident.to_string(),
                        path: self.path.to_owned(),
                        span: ident.span(),
                        expr: expr.clone(),
                    });
            }
        }
        impl Visit<'_> for Collect<'_> {
            fn visit_item_const(&mut self, c: &syn::ItemConst) {
                self.add(&c.ident, &c.expr);
                visit::visit_item_const(self, c);
            }
            fn visit_item_static(&mut self, s: &syn::ItemStatic) {
                self.add(&s.ident, &s.expr);
                visit::visit_item_static(self, s);
            }
            fn visit_impl_item_const(&mut self, c: &syn::ImplItemConst) {
                self.add(&c.ident, &c.expr);
                visit::visit_impl_item_const(self, c);
            }
        }
        let mut out = HashMap::new();
        for file in &tree.files {
            Collect {
                path: &file.path,
                out: &mut out,
            }
            .visit_file(&file.ast);
        }
        Consts(out)
    }

    /// The definition `name` refers to from `from_path`: the one in the same file if any, else the
    /// only one in the crate, else the first whose value matches all others (ambiguous otherwise).
    pub fn lookup(&self, name: &str, from_path: &str) -> Option<&ConstDef> {
        let defs = self.0.get(name)?;
        if let Some(local) = defs.iter().find(|d| d.path == from_path) {
            return Some(local);
        }
        match defs.as_slice() {
            [only] => Some(only),
            [first, rest @ ..] if rest.iter().all(|d| same_expr(&d.expr, &first.expr)) => {
                Some(first)
            }
            _ => None,
        }
    }

    /// All definitions named `name`.
    pub fn all(&self, name: &str) -> &[ConstDef] {
        self.0.get(name).map(Vec::as_slice).unwrap_or(&[])
    }
}

fn same_expr(a: &syn::Expr, b: &syn::Expr) -> bool {
    quote::quote!(#a).to_string() == quote::quote!(#b).to_string()
}

/// A string an expression can evaluate to, and where it came from.
#[derive(Debug, Clone)]
pub struct Str {
    pub value: String,
    /// The expression being resolved (where the key is used).
    pub span: Span,
    /// The constant it was read through, if any: (name, file, line).
    pub via: Option<(String, String, usize)>,
}

/// What a local name is bound to.
#[derive(Debug, Clone)]
pub enum Binding<'a> {
    /// An expression, with an optional tuple index (`for (k, v) in pairs` binds `k` to field 0
    /// of each element of `pairs`).
    Expr(&'a syn::Expr, Option<usize>),
    /// Strings already resolved elsewhere (a helper's parameter, from its call site).
    Strings(Vec<Str>),
}

/// Local bindings visible to [`Resolver::strings`].
pub type Locals<'a> = HashMap<String, Binding<'a>>;

/// Resolves expressions to the strings they can take.
pub struct Resolver<'a> {
    pub consts: &'a Consts,
    /// The file the expressions come from (for same-file constant preference).
    pub path: &'a str,
}

impl Resolver<'_> {
    /// Every string `expr` can take, or `None` when some part cannot be resolved statically.
    /// Slices, arrays, `vec![…]`, `.iter().chain(…)` and `if`/`match` arms give several.
    pub fn strings(&self, expr: &syn::Expr, locals: &Locals<'_>) -> Option<Vec<Str>> {
        self.strings_depth(expr, locals, None, 0)
    }

    /// Like [`Resolver::strings`], for field `index` of tuples (`[("K", v), …]` → `"K"`).
    pub fn tuple_strings(
        &self,
        expr: &syn::Expr,
        locals: &Locals<'_>,
        index: usize,
    ) -> Option<Vec<Str>> {
        self.strings_depth(expr, locals, Some(index), 0)
    }

    fn strings_depth(
        &self,
        expr: &syn::Expr,
        locals: &Locals<'_>,
        tuple_index: Option<usize>,
        depth: usize,
    ) -> Option<Vec<Str>> {
        if depth > 24 {
            return None;
        }
        let rec = |e: &syn::Expr, ti: Option<usize>| self.strings_depth(e, locals, ti, depth + 1);
        let span = expr.span();
        match expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) if tuple_index.is_none() => Some(vec![Str {
                value: s.value(),
                span,
                via: None,
            }]),
            syn::Expr::Tuple(t) => match tuple_index {
                Some(i) => t.elems.iter().nth(i).and_then(|e| rec(e, None)),
                None => None,
            },
            syn::Expr::Reference(r) => rec(&r.expr, tuple_index),
            syn::Expr::Paren(p) => rec(&p.expr, tuple_index),
            syn::Expr::Group(g) => rec(&g.expr, tuple_index),
            syn::Expr::Cast(c) => rec(&c.expr, tuple_index),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => rec(&u.expr, tuple_index),
            syn::Expr::Array(a) => collect_all(a.elems.iter().map(|e| rec(e, tuple_index))),
            syn::Expr::Block(b) => block_tail(&b.block).and_then(|e| rec(e, tuple_index)),
            syn::Expr::If(i) => {
                let then = block_tail(&i.then_branch).and_then(|e| rec(e, tuple_index))?;
                let els = match &i.else_branch {
                    Some((_, e)) => rec(e, tuple_index)?,
                    None => Vec::new(),
                };
                Some(then.into_iter().chain(els).collect())
            }
            syn::Expr::Match(m) => collect_all(m.arms.iter().map(|a| rec(&a.body, tuple_index))),
            syn::Expr::Path(p) => {
                let name = p.path.segments.last()?.ident.to_string();
                if p.path.segments.len() == 1
                    && let Some(binding) = locals.get(&name)
                {
                    return match binding {
                        Binding::Expr(bound, ti) => rec(bound, ti.or(tuple_index)),
                        Binding::Strings(s) if tuple_index.is_none() => Some(s.clone()),
                        Binding::Strings(_) => None,
                    };
                }
                let def = self.consts.lookup(&name, self.path)?;
                let inner = Resolver {
                    consts: self.consts,
                    path: &def.path,
                }
                .strings_depth(
                    &def.expr,
                    &Locals::new(),
                    tuple_index,
                    depth + 1,
                )?;
                let line = def.span.start().line;
                Some(
                    inner
                        .into_iter()
                        .map(|s| Str {
                            span,
                            via: s
                                .via
                                .or_else(|| Some((name.clone(), def.path.clone(), line))),
                            value: s.value,
                        })
                        .collect(),
                )
            }
            syn::Expr::MethodCall(m) => {
                let method = m.method.to_string();
                match method.as_str() {
                    "to_string" | "to_owned" | "into" | "as_str" | "as_ref" | "clone" | "iter"
                    | "into_iter" | "copied" | "cloned" | "as_os_str" | "borrow" => {
                        rec(&m.receiver, tuple_index)
                    }
                    "chain" => {
                        let mut all = rec(&m.receiver, tuple_index)?;
                        all.extend(rec(m.args.first()?, tuple_index)?);
                        Some(all)
                    }
                    _ => None,
                }
            }
            syn::Expr::Call(c) => {
                let path = call_path(c)?;
                let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
                let last = segs.last()?.as_str();
                if last == "vec" && segs.len() == 1 {
                    collect_all(c.args.iter().map(|e| rec(e, tuple_index)))
                } else if matches!(last, "from" | "new" | "from_static")
                    && c.args.len() == 1
                    && segs.len() >= 2
                {
                    rec(c.args.first()?, tuple_index)
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

fn collect_all(parts: impl Iterator<Item = Option<Vec<Str>>>) -> Option<Vec<Str>> {
    let mut out = Vec::new();
    for p in parts {
        out.extend(p?);
    }
    Some(out)
}

fn block_tail(block: &syn::Block) -> Option<&syn::Expr> {
    match block.stmts.last()? {
        syn::Stmt::Expr(e, None) => Some(e),
        _ => None,
    }
}

/// True when `expr` mentions a string starting with `prefix`: a literal anywhere inside it, or a
/// path to a constant whose value (or one of whose elements) starts with it. Returns the span of
/// the first mention.
pub fn mentions_prefix(
    expr: &syn::Expr,
    prefix: &str,
    resolver: &Resolver<'_>,
) -> Option<(Span, String)> {
    struct Find<'r, 'a> {
        prefix: &'r str,
        resolver: &'r Resolver<'a>,
        found: Option<(Span, String)>,
    }
    impl Visit<'_> for Find<'_, '_> {
        fn visit_lit_str(&mut self, s: &syn::LitStr) {
            if self.found.is_none() && s.value().starts_with(self.prefix) {
                self.found = Some((s.span(), s.value()));
            }
        }
        fn visit_expr_path(&mut self, p: &syn::ExprPath) {
            if self.found.is_some() {
                return;
            }
            let expr = syn::Expr::Path(p.clone());
            if let Some(strings) = self.resolver.strings(&expr, &Locals::new())
                && let Some(s) = strings.iter().find(|s| s.value.starts_with(self.prefix))
            {
                self.found = Some((p.span(), s.value.clone()));
            }
        }
    }
    let mut find = Find {
        prefix,
        resolver,
        found: None,
    };
    find.visit_expr(expr);
    find.found
}

/// `path` as written, followed by what it resolves to when that differs (`Cmd::new`
/// → "`Cmd::new` (std::process::Command::new)").
pub fn describe_path(path: &syn::Path, resolved: &[String]) -> String {
    let written: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let written = written.join("::");
    let resolved = resolved.join("::");
    if written == resolved {
        format!("`{written}`")
    } else {
        format!("`{written}` ({resolved})")
    }
}
