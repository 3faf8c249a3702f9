//! Which code the checks read: the non-test code of every workspace member, less the exemptions
//! named here — the one place that says what escapes the rules, and why.
//!
//! Fail closed: a new member crate is checked from the moment it joins the workspace; leaving it
//! out takes an entry in [`UNCHECKED`] with its reason. The members come from `cargo metadata`
//! (xtask asks cargo; this module only decides), so a crate cannot escape by living in a folder
//! nobody listed. A rule that does not hold for part of a checked crate is switched off there by
//! an entry in [`EXEMPT`], again with its reason. `lints/tests/tree.rs` fails on an entry naming
//! a crate or a file that is not there: a stale exemption would otherwise outlive what it excused.

use std::path::Path;

use crate::source::RUNTIME_SRC;

/// The runtime's package name; its sources must be at [`RUNTIME_SRC`] (the rules name its folders).
pub const RUNTIME: &str = "kanban-runtime";

/// Workspace members the syn rules do not read: `(package, reason)`.
pub const UNCHECKED: &[(&str, &str)] = &[
    (
        "xtask",
        "the checker itself, a developer tool: it runs cargo, the fault runs' processes and \
         reads the environment by design, and never ships",
    ),
    (
        "kanban-lints",
        "the rules themselves: syn over source files, no process, no thread, no environment",
    ),
    (
        "kanban-macros",
        "a proc-macro crate: runs inside the compiler, never in a kanban process",
    ),
    (
        "kanban-loom-tests",
        "test code: the loom models of the runtime's concurrency (docs/loom.md)",
    ),
    (
        "kanban-tests",
        "test code: the end-to-end tests and the bench driving the real binary",
    ),
];

/// Rules switched off for part of a checked crate: `(path prefix, rule, reason)`.
pub const EXEMPT: &[(&str, &str, &str)] = &[(
    "pgwire/src/cluster.rs",
    "raw-command",
    "the test harness (feature `cluster`, used only by tests and the bench) starts the \
         throwaway PostgreSQL server; pgwire cannot link the runtime's `identity::command`",
)];

/// One workspace member as cargo describes it.
#[derive(Debug, Clone)]
pub struct Member {
    /// The package name (`kanban-web`).
    pub name: String,
    /// The source files of its library, binary and proc-macro targets (tests, benches and
    /// examples are test code).
    pub src_paths: Vec<std::path::PathBuf>,
}

/// Why the members cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    #[error(
        "{RUNTIME} is not a member of the workspace at {root} — the checks exist for it; run from \
         the kanban workspace or pass --root DIR"
    )]
    NoRuntime { root: String },
    #[error(
        "{RUNTIME} has its sources at {found}, not {RUNTIME_SRC} — the rules name the runtime's \
         folders (runtime/src/identity/, …); move it back or update lints/src/source.rs"
    )]
    RuntimeMoved { found: String },
    #[error("{path} is outside the workspace at {root}")]
    Outside { path: String, root: String },
}

/// The source folders to read, relative to `root` and `/`-separated: the folder of every target
/// of every member not in [`UNCHECKED`], a folder inside another left out.
pub fn checked_dirs(root: &Path, members: &[Member]) -> Result<Vec<String>, ScopeError> {
    let display = root.display().to_string();
    let runtime =
        members
            .iter()
            .find(|m| m.name == RUNTIME)
            .ok_or_else(|| ScopeError::NoRuntime {
                root: display.clone(),
            })?;
    let mut dirs = Vec::new();
    for member in members {
        if UNCHECKED.iter().any(|(name, _)| member.name == *name) {
            continue;
        }
        for src in &member.src_paths {
            let dir = src.parent().unwrap_or(src);
            let rel = relative(root, dir)?;
            if member.name == RUNTIME && !rel.starts_with(RUNTIME_SRC) {
                return Err(ScopeError::RuntimeMoved { found: rel });
            }
            dirs.push(rel);
        }
    }
    if runtime.src_paths.is_empty() {
        return Err(ScopeError::NoRuntime { root: display });
    }
    dirs.sort();
    dirs.dedup();
    let nested: Vec<String> = dirs
        .iter()
        .filter(|d| {
            dirs.iter()
                .any(|o| o != *d && d.starts_with(&format!("{o}/")))
        })
        .cloned()
        .collect();
    dirs.retain(|d| !nested.contains(d));
    Ok(dirs)
}

/// True when `rule` is switched off for the file at `path` (relative to the workspace root).
pub fn is_exempt(path: &str, rule: &str) -> bool {
    EXEMPT
        .iter()
        .any(|(prefix, r, _)| *r == rule && path.starts_with(prefix))
}

fn relative(root: &Path, path: &Path) -> Result<String, ScopeError> {
    let rel = path.strip_prefix(root).map_err(|_| ScopeError::Outside {
        path: path.display().to_string(),
        root: root.display().to_string(),
    })?;
    Ok(rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/"))
}

/// The module-graph policy of one crate ([`crate::graph`]): its files must not import each other
/// in a cycle, nor its top-level modules, and `forbidden_crates` may be named only in the
/// modules under `allowed_prefixes`.
#[derive(Debug, Clone, Copy)]
pub struct ModuleGraph {
    /// The crate's source folder, relative to the workspace root (`runtime/src`).
    pub src: &'static str,
    /// External crates (as Rust names them: `kanban_pgwire`) named only in the allowed modules.
    pub forbidden_crates: &'static [&'static str],
    /// Module paths (`board::engine`) in which, and below which, they may be named.
    pub allowed_prefixes: &'static [&'static str],
    /// Why.
    pub reason: &'static str,
}

/// The crates whose module graph is checked.
pub const MODULE_GRAPHS: &[ModuleGraph] = &[
    ModuleGraph {
        src: RUNTIME_SRC,
        forbidden_crates: &["rusqlite", "kanban_pgwire"],
        allowed_prefixes: &["db", "board::engine"],
        reason: "the storage engines live in `db/` (connections) and `board/engine/` \
             (engine-specific schema and fast paths); the domain, the home, the CLI and the rest \
             speak to storage only through them (issue 25, ARCHITECTURE.md)",
    },
    ModuleGraph {
        src: "web/src",
        forbidden_crates: &["rusqlite", "kanban_pgwire"],
        allowed_prefixes: &[],
        reason: "the web UI reads and writes boards through the runtime's library, never a \
             storage engine of its own",
    },
    ModuleGraph {
        src: "pgwire/src",
        forbidden_crates: &[],
        allowed_prefixes: &[],
        reason: "the PostgreSQL client: no import cycle",
    },
];
