//! The sources the checks read: every non-test `.rs` file of the checked workspace members
//! ([`crate::scope`]: the folders of their targets, as `cargo metadata` lists them), parsed with
//! syn; or of `runtime/src` alone ([`Tree::load`]).
//!
//! This module never runs cargo: `xtask` asks `cargo metadata` for the members and hands them
//! over, so the checks stay a pure function of the files they are given. The runtime's folder is
//! still a contract (ARCHITECTURE.md §1): the rules name `runtime/src/identity/` and friends.
//!
//! Test code is removed before any rule sees it: items under `#[cfg(test)]` (or `#[test]`),
//! files and folders declared by `#[cfg(test)] mod name;`, and a crate's `tests/` folder. A
//! folder named `tests` inside `src/` that no `#[cfg(test)]` declaration covers is read like any
//! other. This module never writes a file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The crate the checks cover, relative to the workspace root.
pub const RUNTIME_SRC: &str = "runtime/src";
/// The one folder allowed to touch worker identity, relative to the workspace root.
pub const IDENTITY_DIR: &str = "runtime/src/identity/";

/// Why the sources could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path} (run from the workspace root or pass --root DIR)")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Scope(#[from] crate::scope::ScopeError),
    #[error(
        "{path}:{line}:{col}: cannot parse: {message} — fix the syntax error (cargo build shows it)"
    )]
    Parse {
        path: String,
        line: usize,
        col: usize,
        message: String,
    },
}

/// One parsed source file, test code removed.
pub struct SourceFile {
    /// Relative to the workspace root, `/`-separated (e.g. `runtime/src/dispatch/mod.rs`).
    pub path: String,
    pub ast: syn::File,
}

impl SourceFile {
    /// True for files under `runtime/src/identity/`.
    pub fn in_identity(&self) -> bool {
        self.path.starts_with(IDENTITY_DIR)
    }

    /// True for files under `runtime/src/<module>/` (or the file `runtime/src/<module>.rs`).
    pub fn in_module(&self, module: &str) -> bool {
        let rest = self.path.strip_prefix("runtime/src/").unwrap_or(&self.path);
        rest.starts_with(&format!("{module}/")) || rest == format!("{module}.rs")
    }
}

/// The parsed crate.
pub struct Tree {
    pub files: Vec<SourceFile>,
}

impl Tree {
    /// Reads and parses every `.rs` file under `<root>/runtime/src` (the runtime alone: a
    /// scratch copy of its sources, the drift guard).
    pub fn load(root: &Path) -> Result<Tree, LoadError> {
        Tree::load_dirs(root, &[RUNTIME_SRC.to_owned()])
    }

    /// Reads and parses the non-test code of every checked member of the workspace at `root`
    /// (see [`crate::scope`]).
    pub fn load_workspace(
        root: &Path,
        members: &[crate::scope::Member],
    ) -> Result<Tree, LoadError> {
        Tree::load_dirs(root, &crate::scope::checked_dirs(root, members)?)
    }

    /// Reads and parses every `.rs` file under each of `dirs` (relative to `root`).
    pub fn load_dirs(root: &Path, dirs: &[String]) -> Result<Tree, LoadError> {
        let mut paths = Vec::new();
        for dir in dirs {
            collect_rs(&root.join(dir), &mut paths)?;
        }
        paths.sort();
        let mut sources = Vec::new();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            sources.push((rel, text));
        }
        Tree::from_sources(sources)
    }

    /// Parses in-memory sources (`(path relative to the root, text)`), as fixtures do.
    pub fn from_sources<P, T>(sources: impl IntoIterator<Item = (P, T)>) -> Result<Tree, LoadError>
    where
        P: Into<String>,
        T: AsRef<str>,
    {
        let mut files = Vec::new();
        let mut test_files = BTreeSet::new();
        for (path, text) in sources {
            let path: String = path.into();
            // A crate's integration tests (`<crate>/tests/…`); a folder named `tests` inside
            // `src/` is test code only when a `#[cfg(test)] mod tests;` declares it (below), or
            // `pub mod tests;` would hide real code from every rule.
            if path.split('/').nth(1) == Some("tests") {
                continue;
            }
            let mut ast = syn::parse_file(text.as_ref()).map_err(|e| {
                let start = e.span().start();
                LoadError::Parse {
                    path: path.clone(),
                    line: start.line,
                    col: start.column + 1,
                    message: e.to_string(),
                }
            })?;
            let mut test_mods = Vec::new();
            strip_test_items(&mut ast.items, &mut test_mods);
            crate::expand::expand_macros(&mut ast);
            for name in test_mods {
                let dir = module_dir(&path);
                test_files.insert(format!("{dir}{name}.rs"));
                test_files.insert(format!("{dir}{name}/"));
            }
            files.push(SourceFile { path, ast });
        }
        files.retain(|f| {
            !test_files.contains(&f.path)
                && !test_files
                    .iter()
                    .any(|t| t.ends_with('/') && f.path.starts_with(t.as_str()))
        });
        Ok(Tree { files })
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        let kind = entry.file_type().map_err(io)?;
        if kind.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The folder in which the children of the module in `path` live.
fn module_dir(path: &str) -> String {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    match file {
        "mod.rs" | "lib.rs" | "main.rs" => prefix,
        other => format!("{prefix}{}/", other.trim_end_matches(".rs")),
    }
}

/// True for `#[cfg(test)]`, `#[cfg(all(test, …))]` and `#[test]`.
pub fn is_test_attr(attr: &syn::Attribute) -> bool {
    if attr.path().is_ident("test") {
        return true;
    }
    if !attr.path().is_ident("cfg") {
        return false;
    }
    let syn::Meta::List(list) = &attr.meta else {
        return false;
    };
    let text: String = list
        .tokens
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    text == "test" || (text.starts_with("all(") && text.contains("test") && !text.contains("not("))
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(is_test_attr)
}

fn strip_test_items(items: &mut Vec<syn::Item>, test_mods: &mut Vec<String>) {
    items.retain(|item| {
        let attrs = item_attrs(item);
        if is_test(attrs) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                test_mods.push(m.ident.to_string());
            }
            return false;
        }
        true
    });
    for item in items.iter_mut() {
        match item {
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &mut m.content {
                    // Files of modules nested inline are not resolved; inline test modules are.
                    let mut ignored = Vec::new();
                    strip_test_items(inner, &mut ignored);
                }
            }
            syn::Item::Impl(i) => i.items.retain(|ii| match ii {
                syn::ImplItem::Fn(f) => !is_test(&f.attrs),
                syn::ImplItem::Const(c) => !is_test(&c.attrs),
                _ => true,
            }),
            syn::Item::Fn(f) => strip_test_stmts(&mut f.block.stmts),
            _ => {}
        }
    }
}

fn strip_test_stmts(stmts: &mut [syn::Stmt]) {
    for stmt in stmts {
        if let syn::Stmt::Item(syn::Item::Mod(m)) = stmt
            && let Some((_, inner)) = &mut m.content
        {
            let mut ignored = Vec::new();
            strip_test_items(inner, &mut ignored);
        }
    }
}

/// The attributes of any item.
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}
