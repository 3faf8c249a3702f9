//! The module graph of a crate (model: rust-analyzer's tidy tests): [`FILE_CYCLE`] — no import
//! cycle between its files; [`TOP_LEVEL_CYCLE`] — none between its top-level modules;
//! [`FORBIDDEN_CRATE`] — the storage crates named only where [`crate::scope::MODULE_GRAPHS`]
//! allows them.
//!
//! Nodes are files by module path; edges are every `use`, re-export and qualified path (macro
//! tokens included) naming another file's module, following re-exports. References within a
//! file or to an ancestor module (the root included) are not edges, and test code is not read:
//! a test may import anything. What counts, and why, is in docs/enforcement.md#module-graph.
//! Resolution is syntactic; this module only reads and reports.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use crate::diag::{Diagnostic, Severity};
use crate::scope::ModuleGraph;
use crate::source::{SourceFile, Tree, is_test_attr, item_attrs};

/// A cycle between files.
pub const FILE_CYCLE: &str = "file-cycle";
/// A cycle between top-level modules.
pub const TOP_LEVEL_CYCLE: &str = "top-level-cycle";
/// A forbidden crate named outside its allowed modules.
pub const FORBIDDEN_CRATE: &str = "forbidden-crate";

const CYCLE_FIX: &str = "cut one of these edges: move what both sides need into a module below \
     both, or pass it in (docs/enforcement.md#module-graph)";

/// How far re-exports and aliases are followed before giving up (a cycle of `use`s).
const MAX_HOPS: usize = 16;

/// Every module-graph finding of `tree` under each policy, sorted by place.
pub fn check(tree: &Tree, policies: &[ModuleGraph]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for policy in policies {
        out.extend(check_crate(tree, policy));
    }
    out.sort();
    out.dedup();
    out
}

/// One line counting the module-graph findings among `diags` (`None` when there are none).
pub fn summary(diags: &[Diagnostic]) -> Option<String> {
    let count = |rule: &str| diags.iter().filter(|d| d.rule == rule).count();
    let (files, top, crates) = (
        count(FILE_CYCLE),
        count(TOP_LEVEL_CYCLE),
        count(FORBIDDEN_CRATE),
    );
    if files + top + crates == 0 {
        return None;
    }
    Some(format!(
        "module graph: {files} cycle(s) between files ({FILE_CYCLE}), {top} between top-level \
         modules ({TOP_LEVEL_CYCLE}), {crates} file(s) naming a storage crate outside its \
         modules ({FORBIDDEN_CRATE})"
    ))
}

/// The findings of one crate: the files of `tree` under `policy.src`.
pub fn check_crate(tree: &Tree, policy: &ModuleGraph) -> Vec<Diagnostic> {
    let graph = Graph::build(tree, policy);
    let mut out = graph.forbidden_uses();
    out.extend(graph.file_cycles());
    out.extend(graph.top_level_cycles());
    out
}

/// One use of another module: where it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    line: usize,
    col: usize,
}

impl Place {
    fn of(span: Span) -> Place {
        let start = span.start();
        Place {
            line: start.line,
            col: start.column + 1,
        }
    }
}

/// One use standing for a top-level edge: the file and the place in it.
type Example = (String, Place);

/// What a `use` binds a name to: the path as written and the module it is written in.
#[derive(Debug, Clone)]
struct Binding {
    module: Vec<String>,
    path: Vec<String>,
}

/// Where a path leads.
enum Resolved {
    /// A module of the crate (by module path), with the names left after it.
    Module(Vec<String>, usize),
    /// Outside the crate, through a re-export: the module that re-exports it and the path it
    /// re-exports, from the crate's name.
    External(Vec<String>, Vec<String>),
}

struct Graph<'t> {
    policy: &'t ModuleGraph,
    files: Vec<&'t SourceFile>,
    /// Module path of each file.
    file_mods: Vec<Vec<String>>,
    /// Every module (file or inline) → the file it is in.
    modules: HashMap<Vec<String>, usize>,
    /// Names bound by `use` in each module.
    bindings: HashMap<Vec<String>, HashMap<String, Binding>>,
    /// `(from file, to file)` → the first place `from` names `to`.
    edges: BTreeMap<(usize, usize), Place>,
    /// `(file, crate)` → every place the file names the forbidden crate, with how.
    forbidden: BTreeMap<(usize, &'static str), Vec<(Place, String)>>,
}

impl<'t> Graph<'t> {
    fn build(tree: &'t Tree, policy: &'t ModuleGraph) -> Graph<'t> {
        let prefix = format!("{}/", policy.src);
        let files: Vec<&SourceFile> = tree
            .files
            .iter()
            .filter(|f| f.path.starts_with(&prefix))
            .collect();
        let mut file_mods: Vec<Vec<String>> = files
            .iter()
            .map(|f| module_of(&f.path[prefix.len()..]))
            .collect();
        // `#[path = "…"] mod x;`: the named file is module `x` of the declaring module.
        let by_path: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.as_str(), i))
            .collect();
        let mut renamed = Vec::new();
        for (i, file) in files.iter().enumerate() {
            for (module, file_path) in path_attr_mods(file, &file_mods[i]) {
                if let Some(&j) = by_path.get(file_path.as_str()) {
                    renamed.push((j, module));
                }
            }
        }
        for (j, module) in renamed {
            file_mods[j] = module;
        }
        let mut modules = HashMap::new();
        // The library root wins over `main.rs` for the root module.
        for (i, file) in files.iter().enumerate() {
            let lib_root = file.path.ends_with("/lib.rs") && file_mods[i].is_empty();
            if lib_root || !modules.contains_key(&file_mods[i]) {
                modules.insert(file_mods[i].clone(), i);
            }
        }
        let mut bindings: HashMap<Vec<String>, HashMap<String, Binding>> = HashMap::new();
        for (i, file) in files.iter().enumerate() {
            let mut collect = CollectBindings {
                module: file_mods[i].clone(),
                file: i,
                modules: &mut modules,
                bindings: &mut bindings,
            };
            collect.visit_file(&file.ast);
        }
        let mut graph = Graph {
            policy,
            files,
            file_mods,
            modules,
            bindings,
            edges: BTreeMap::new(),
            forbidden: BTreeMap::new(),
        };
        for i in 0..graph.files.len() {
            let mut refs = References {
                module: graph.file_mods[i].clone(),
                found: Vec::new(),
            };
            refs.visit_file(&graph.files[i].ast);
            for r in refs.found {
                graph.add_reference(i, r);
            }
        }
        graph
    }

    /// The crate-absolute path `segs` means when written in `module`; `None` outside the crate
    /// or for a local name. `hops` bounds alias chains.
    fn absolute(&self, module: &[String], segs: &[String], hops: usize) -> Option<Vec<String>> {
        let first = segs.first()?;
        match first.as_str() {
            "" => None,
            "crate" => Some(segs[1..].to_vec()),
            "self" => Some([module, &segs[1..]].concat()),
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                let base = module.get(..module.len().checked_sub(ups)?)?;
                Some([base, &segs[ups..]].concat())
            }
            _ => {
                let child = [module, &segs[..1]].concat();
                if self.modules.contains_key(&child) {
                    return Some([module, segs].concat());
                }
                let binding = self.bindings.get(module)?.get(first)?;
                if hops == 0 || binding.path.as_slice() == segs {
                    return None;
                }
                let target = self.absolute(&binding.module, &binding.path, hops - 1)?;
                Some([target.as_slice(), &segs[1..]].concat())
            }
        }
    }

    /// Where the crate-absolute path `abs` leads, following re-exports.
    fn resolve(&self, abs: Vec<String>, hops: usize) -> Resolved {
        let mut len = abs.len();
        while len > 0 && !self.modules.contains_key(&abs[..len]) {
            len -= 1;
        }
        let module = abs[..len].to_vec();
        let rest = abs.len() - len;
        if rest > 0
            && hops > 0
            && let Some(binding) = self.bindings.get(&module).and_then(|b| b.get(&abs[len]))
        {
            match self.absolute(&binding.module, &binding.path, hops - 1) {
                Some(target) if target != abs[..=len] => {
                    return self.resolve([target.as_slice(), &abs[len + 1..]].concat(), hops - 1);
                }
                Some(_) => {}
                None if self.is_external(&binding.path) => {
                    let skip = usize::from(binding.path[0].is_empty());
                    return Resolved::External(module, binding.path[skip..].to_vec());
                }
                None => {}
            }
        }
        Resolved::Module(module, rest)
    }

    /// True when `path` (written in some module) starts with a crate's name, not a local name.
    fn is_external(&self, path: &[String]) -> bool {
        match path.first().map(String::as_str) {
            Some("") => true,
            Some(name) => self.policy.forbidden_crates.contains(&name),
            None => false,
        }
    }

    fn allowed_here(&self, module: &[String]) -> bool {
        let name = module.join("::");
        self.policy
            .allowed_prefixes
            .iter()
            .any(|p| name == *p || name.starts_with(&format!("{p}::")))
    }

    fn add_reference(&mut self, from: usize, r: Reference) {
        // A lone name outside a `use` is a value, a type or a local, never a module.
        if !r.is_use && r.segs.iter().filter(|s| !s.is_empty()).count() < 2 {
            return;
        }
        let written_first = r
            .segs
            .iter()
            .find(|s| !s.is_empty())
            .cloned()
            .unwrap_or_default();
        let starts_external = r.segs.first().is_some_and(String::is_empty)
            || !matches!(written_first.as_str(), "crate" | "self" | "super");
        let named_crate = self
            .policy
            .forbidden_crates
            .iter()
            .find(|c| starts_external && **c == written_first)
            .copied();
        let mut reached = None;
        let abs = if named_crate.is_some() {
            None
        } else {
            self.absolute(&r.module, &r.segs, MAX_HOPS)
        };
        if let Some(abs) = abs {
            match self.resolve(abs, MAX_HOPS) {
                Resolved::Module(module, rest) => {
                    let Some(&to) = self.modules.get(&module) else {
                        return;
                    };
                    let imports_module = r.is_use && !r.glob && rest == 0;
                    let from_mod = &self.file_mods[from];
                    let ancestor = from_mod.starts_with(&self.file_mods[to]);
                    if to != from && !imports_module && !ancestor {
                        let place = self.edges.entry((from, to)).or_insert(r.place);
                        *place = (*place).min(r.place);
                    }
                }
                // A storage module's re-export is its API; another module's is a way around.
                Resolved::External(via, path) if !self.allowed_here(&via) => {
                    reached = self
                        .policy
                        .forbidden_crates
                        .iter()
                        .find(|c| path.first().is_some_and(|p| p == *c))
                        .copied();
                }
                Resolved::External(..) => {}
            }
        }
        let Some(krate) = named_crate.or(reached) else {
            return;
        };
        if self.allowed_here(&r.module) {
            return;
        }
        let how = if named_crate.is_some() {
            format!("`{}`", r.segs.join("::"))
        } else {
            format!("`{}`, re-exported from it", r.segs.join("::"))
        };
        self.forbidden
            .entry((from, krate))
            .or_default()
            .push((r.place, how));
    }

    fn forbidden_uses(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for (&(file, krate), uses) in &self.forbidden {
            let mut uses = uses.clone();
            uses.sort();
            uses.dedup();
            let Some((place, how)) = uses.first() else {
                continue;
            };
            let more = match uses.len() - 1 {
                0 => String::new(),
                1 => ", and 1 more place".into(),
                n => format!(", and {n} more places"),
            };
            out.push(Diagnostic {
                path: self.files[file].path.clone(),
                line: place.line,
                col: place.col,
                severity: Severity::Error,
                rule: FORBIDDEN_CRATE,
                message: format!(
                    "{} names `{krate}` ({how}{more}), {}",
                    self.describe(&self.file_mods[file]),
                    self.allowed_list()
                ),
                fix: format!(
                    "go through the storage layer's API instead of `{krate}` (lints/src/scope.rs: \
                     MODULE_GRAPHS; docs/enforcement.md#module-graph)"
                ),
            });
        }
        out
    }

    fn allowed_list(&self) -> String {
        let names: Vec<String> = self
            .policy
            .allowed_prefixes
            .iter()
            .map(|p| format!("`{p}`"))
            .collect();
        if names.is_empty() {
            "which no module of this crate may name".into()
        } else {
            format!("outside {}", names.join(" and "))
        }
    }

    fn describe(&self, module: &[String]) -> String {
        if module.is_empty() {
            "the crate root".into()
        } else {
            format!("`{}`", module.join("::"))
        }
    }

    fn name(&self, file: usize) -> String {
        let m = &self.file_mods[file];
        if m.is_empty() {
            "crate".into()
        } else {
            m.join("::")
        }
    }

    fn file_cycles(&self) -> Vec<Diagnostic> {
        let adj = adjacency(self.edges.keys().copied());
        let mut out = Vec::new();
        for comp in strongly_connected(&adj) {
            let members: BTreeSet<usize> = comp.iter().copied().collect();
            let edges: Vec<((usize, usize), Place)> = self
                .edges
                .iter()
                .filter(|((a, b), _)| members.contains(a) && members.contains(b))
                .map(|(k, v)| (*k, *v))
                .collect();
            let mut names: Vec<String> = members.iter().map(|&f| self.name(f)).collect();
            names.sort();
            let listed: Vec<String> = edges
                .iter()
                .map(|((a, b), p)| {
                    format!(
                        "{} → {} ({}:{})",
                        self.name(*a),
                        self.name(*b),
                        self.files[*a].path,
                        p.line
                    )
                })
                .collect();
            let Some(((first, _), place)) = edges.first() else {
                continue;
            };
            out.push(Diagnostic {
                path: self.files[*first].path.clone(),
                line: place.line,
                col: place.col,
                severity: Severity::Error,
                rule: FILE_CYCLE,
                message: format!(
                    "{} files import each other ({}): {}",
                    names.len(),
                    names.join(", "),
                    listed.join("; ")
                ),
                fix: CYCLE_FIX.into(),
            });
        }
        out
    }

    fn top_level_cycles(&self) -> Vec<Diagnostic> {
        // (from top, to top) → (file, place) of the first use, by file path then line.
        let mut top: BTreeMap<(String, String), Example> = BTreeMap::new();
        for (&(a, b), &place) in &self.edges {
            let (Some(ta), Some(tb)) = (self.file_mods[a].first(), self.file_mods[b].first())
            else {
                continue;
            };
            if ta == tb {
                continue;
            }
            let here = (self.files[a].path.clone(), place);
            top.entry((ta.clone(), tb.clone()))
                .and_modify(|e| *e = (*e).clone().min(here.clone()))
                .or_insert(here);
        }
        let names: Vec<String> = top
            .keys()
            .flat_map(|(a, b)| [a.clone(), b.clone()])
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let adj = adjacency(
            top.keys()
                .map(|(a, b)| (index[a.as_str()], index[b.as_str()])),
        );
        let mut out = Vec::new();
        for comp in strongly_connected(&adj) {
            let members: BTreeSet<&str> = comp.iter().map(|&i| names[i].as_str()).collect();
            let edges: Vec<(&(String, String), &Example)> = top
                .iter()
                .filter(|((a, b), _)| members.contains(a.as_str()) && members.contains(b.as_str()))
                .collect();
            let listed: Vec<String> = edges
                .iter()
                .map(|((a, b), (path, p))| format!("{a} → {b} ({path}:{})", p.line))
                .collect();
            let Some((_, (path, place))) = edges.first() else {
                continue;
            };
            out.push(Diagnostic {
                path: path.clone(),
                line: place.line,
                col: place.col,
                severity: Severity::Error,
                rule: TOP_LEVEL_CYCLE,
                message: format!(
                    "{} top-level modules import each other ({}): {}",
                    members.len(),
                    members.iter().copied().collect::<Vec<_>>().join(", "),
                    listed.join("; ")
                ),
                fix: CYCLE_FIX.into(),
            });
        }
        out
    }
}

/// The module path of a file at `rel` (relative to the crate's `src/`).
fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut segs: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if rel.split('/').count() == 1 && matches!(stem, "lib" | "main") {
        return Vec::new();
    }
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// `(module path, file path)` of every `#[path = "…"] mod x;` at the top of `file`, whose
/// module is `module`. The path is relative to the declaring file's folder.
fn path_attr_mods(file: &SourceFile, module: &[String]) -> Vec<(Vec<String>, String)> {
    let dir = file.path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut out = Vec::new();
    for item in &file.ast.items {
        let syn::Item::Mod(m) = item else { continue };
        if m.content.is_some() {
            continue;
        }
        for attr in &m.attrs {
            if let syn::Meta::NameValue(nv) = &attr.meta
                && nv.path.is_ident("path")
                && let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
            {
                let mut parts: Vec<&str> = if dir.is_empty() {
                    Vec::new()
                } else {
                    dir.split('/').collect()
                };
                let value = s.value();
                for part in value.split('/') {
                    match part {
                        "." | "" => {}
                        ".." => {
                            parts.pop();
                        }
                        other => parts.push(other),
                    }
                }
                let child = [module, &[m.ident.to_string()]].concat();
                out.push((child, parts.join("/")));
            }
        }
    }
    out
}

/// Collects inline modules and the names every `use` binds, per module.
struct CollectBindings<'a> {
    module: Vec<String>,
    file: usize,
    modules: &'a mut HashMap<Vec<String>, usize>,
    bindings: &'a mut HashMap<Vec<String>, HashMap<String, Binding>>,
}

impl Visit<'_> for CollectBindings<'_> {
    fn visit_item(&mut self, item: &syn::Item) {
        if item_attrs(item).iter().any(is_test_attr) {
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &syn::ItemMod) {
        if m.content.is_none() {
            return;
        }
        self.module.push(m.ident.to_string());
        self.modules.entry(self.module.clone()).or_insert(self.file);
        visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &syn::ItemUse) {
        let root = if u.leading_colon.is_some() {
            vec![String::new()]
        } else {
            Vec::new()
        };
        let mut leaves = Vec::new();
        flatten_use(&u.tree, root, &mut leaves);
        let table = self.bindings.entry(self.module.clone()).or_default();
        for leaf in leaves {
            if let (Some(alias), false) = (leaf.alias, leaf.glob) {
                table.entry(alias).or_insert(Binding {
                    module: self.module.clone(),
                    path: leaf.path,
                });
            }
        }
    }

    fn visit_item_extern_crate(&mut self, e: &syn::ItemExternCrate) {
        let alias = e
            .rename
            .as_ref()
            .map_or_else(|| e.ident.to_string(), |(_, r)| r.to_string());
        self.bindings
            .entry(self.module.clone())
            .or_default()
            .entry(alias)
            .or_insert(Binding {
                module: self.module.clone(),
                path: vec![String::new(), e.ident.to_string()],
            });
    }
}

/// One leaf of a `use` tree: the full path, the name it binds (none for `_`), glob or not.
struct UseLeaf {
    path: Vec<String>,
    alias: Option<String>,
    glob: bool,
    span: Span,
}

fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<UseLeaf>) {
    let leaf = |prefix: &[String], ident: &syn::Ident, alias: &syn::Ident| {
        let is_self = ident == "self";
        let path = if is_self {
            prefix.to_vec()
        } else {
            [prefix, &[ident.to_string()]].concat()
        };
        let alias = if alias == "_" {
            None
        } else if is_self && alias == "self" {
            prefix.last().cloned()
        } else {
            Some(alias.to_string())
        };
        UseLeaf {
            path,
            alias,
            glob: false,
            span: ident.span(),
        }
    };
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => out.push(leaf(&prefix, &n.ident, &n.ident)),
        syn::UseTree::Rename(r) => out.push(leaf(&prefix, &r.ident, &r.rename)),
        syn::UseTree::Glob(g) => out.push(UseLeaf {
            path: prefix,
            alias: None,
            glob: true,
            span: g.star_token.span(),
        }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), out);
            }
        }
    }
}

/// One path written in the crate.
struct Reference {
    /// The module it is written in.
    module: Vec<String>,
    /// As written; a leading `::` is an empty first segment.
    segs: Vec<String>,
    place: Place,
    /// From a `use` item (importing a module itself is no edge).
    is_use: bool,
    glob: bool,
}

/// Collects every path of a file, with the module it is written in.
struct References {
    module: Vec<String>,
    found: Vec<Reference>,
}

impl References {
    fn push(&mut self, segs: Vec<String>, span: Span, is_use: bool, glob: bool) {
        if segs.is_empty() {
            return;
        }
        self.found.push(Reference {
            module: self.module.clone(),
            segs,
            place: Place::of(span),
            is_use,
            glob,
        });
    }

    /// Every `a::b` sequence of identifiers in `tokens`, at any depth.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(g) = &trees[i] {
                self.scan_tokens(g.stream());
                i += 1;
                continue;
            }
            let leading = is_path_sep(&trees, i);
            let start = if leading { i + 2 } else { i };
            let Some(TokenTree::Ident(first)) = trees.get(start) else {
                i += 1;
                continue;
            };
            let after_sep = i >= 2 && is_path_sep(&trees, i - 2);
            if after_sep && !leading {
                i += 1;
                continue;
            }
            let mut segs = if leading {
                vec![String::new()]
            } else {
                Vec::new()
            };
            segs.push(first.to_string());
            let span = if leading {
                trees[i].span()
            } else {
                first.span()
            };
            let mut j = start + 1;
            while is_path_sep(&trees, j) {
                let Some(TokenTree::Ident(next)) = trees.get(j + 2) else {
                    break;
                };
                segs.push(next.to_string());
                j += 3;
            }
            if segs.len() > 1 {
                self.push(segs, span, false, false);
            }
            i = j.max(i + 1);
        }
    }
}

/// True when `trees[i..]` starts with `::`.
fn is_path_sep(trees: &[TokenTree], i: usize) -> bool {
    matches!(
        (trees.get(i), trees.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':' && a.spacing() == proc_macro2::Spacing::Joint
    )
}

fn path_segs(path: &syn::Path) -> Vec<String> {
    let mut segs = Vec::new();
    if path.leading_colon.is_some() {
        segs.push(String::new());
    }
    segs.extend(path.segments.iter().map(|s| s.ident.to_string()));
    segs
}

impl Visit<'_> for References {
    fn visit_item(&mut self, item: &syn::Item) {
        if item_attrs(item).iter().any(is_test_attr) {
            return;
        }
        visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &syn::ItemMod) {
        if m.content.is_none() {
            return;
        }
        self.module.push(m.ident.to_string());
        visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &syn::ItemUse) {
        let root = if u.leading_colon.is_some() {
            vec![String::new()]
        } else {
            Vec::new()
        };
        let mut leaves = Vec::new();
        flatten_use(&u.tree, root, &mut leaves);
        for leaf in leaves {
            self.push(leaf.path, leaf.span, true, leaf.glob);
        }
    }

    fn visit_item_extern_crate(&mut self, e: &syn::ItemExternCrate) {
        self.push(
            vec![String::new(), e.ident.to_string()],
            e.ident.span(),
            true,
            false,
        );
    }

    // `pub(in crate::a)` names where an item is visible, not what it uses.
    fn visit_visibility(&mut self, _: &syn::Visibility) {}

    fn visit_path(&mut self, path: &syn::Path) {
        self.push(path_segs(path), path.span(), false, false);
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &syn::Macro) {
        self.visit_path(&mac.path);
        self.scan_tokens(mac.tokens.clone());
    }

    fn visit_attribute(&mut self, attr: &syn::Attribute) {
        self.visit_path(attr.path());
        if let syn::Meta::List(list) = &attr.meta {
            self.scan_tokens(list.tokens.clone());
        }
        if let syn::Meta::NameValue(nv) = &attr.meta {
            self.visit_expr(&nv.value);
        }
    }
}

fn adjacency(edges: impl IntoIterator<Item = (usize, usize)>) -> BTreeMap<usize, Vec<usize>> {
    let mut adj: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (a, b) in edges {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    adj
}

/// The strongly connected components of more than one node (Tarjan), each sorted, in order of
/// their smallest node.
fn strongly_connected(adj: &BTreeMap<usize, Vec<usize>>) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        adj: &'a BTreeMap<usize, Vec<usize>>,
        index: HashMap<usize, usize>,
        low: HashMap<usize, usize>,
        stack: Vec<usize>,
        on_stack: BTreeSet<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in self.adj.get(&v).map(Vec::as_slice).unwrap_or_default() {
                if !self.index.contains_key(&w) {
                    self.visit(w);
                    let low = self.low[&v].min(self.low[&w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(&w) {
                    let low = self.low[&v].min(self.index[&w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[&v] == self.index[&v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort_unstable();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        adj,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for &v in adj.keys() {
        if !t.index.contains_key(&v) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}
