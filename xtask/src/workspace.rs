//! The workspace as cargo resolves it: `cargo metadata --no-deps` gives its root, its members
//! (with their targets' source files) and the target folder, honouring `build.target-dir`,
//! `CARGO_BUILD_TARGET_DIR` and `CARGO_TARGET_DIR` — nothing here guesses `<root>/target`.
//!
//! A `--root DIR` without a `Cargo.toml` (a scratch copy of `runtime/src` alone) has no
//! metadata: the syn checks then read the runtime only, and the tasks that build fail saying so.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use kanban_lints::scope::Member;

/// The workspace being checked.
pub struct Workspace {
    pub root: PathBuf,
    /// `None` for a scratch copy of the sources without a manifest.
    metadata: Option<Found>,
}

struct Found {
    target_dir: PathBuf,
    members: Vec<Member>,
}

impl Workspace {
    /// The workspace of `--root DIR`, or of the current directory: the one cargo itself finds
    /// from there (never the folder this binary was built in — with a shared target dir that
    /// would be another checkout, and a false green).
    pub fn discover(root: Option<&Path>) -> anyhow::Result<Workspace> {
        let mut cmd = cargo_metadata::MetadataCommand::new();
        cmd.no_deps();
        match root {
            Some(dir) if !dir.join("Cargo.toml").is_file() => {
                eprintln!(
                    "note: {} has no Cargo.toml: checking its runtime/src only",
                    dir.display()
                );
                return Ok(Workspace {
                    root: dir.to_path_buf(),
                    metadata: None,
                });
            }
            Some(dir) => {
                // From there too: cargo reads `.cargo/config.toml` (build.target-dir) from the
                // current directory up, not from the manifest's folder.
                cmd.manifest_path(dir.join("Cargo.toml")).current_dir(dir);
            }
            None => {
                let cwd = std::env::current_dir().context("cannot read the current directory")?;
                cmd.current_dir(cwd);
            }
        }
        let metadata = match cmd.exec() {
            Ok(metadata) => metadata,
            Err(e) => {
                let here = match root {
                    Some(dir) => dir.display().to_string(),
                    None => std::env::current_dir()
                        .map(|d| d.display().to_string())
                        .unwrap_or_else(|_| "the current directory".into()),
                };
                bail!(
                    "{here} is not inside a cargo workspace (`cargo metadata` failed: {}) — run \
                     from the workspace or pass --root DIR",
                    e.to_string().trim()
                );
            }
        };
        let members = metadata
            .workspace_packages()
            .into_iter()
            .map(|p| Member {
                name: p.name.to_string(),
                src_paths: p
                    .targets
                    .iter()
                    .filter(|t| t.is_lib() || t.is_bin() || t.is_proc_macro())
                    .map(|t| t.src_path.clone().into_std_path_buf())
                    .collect(),
            })
            .collect();
        Ok(Workspace {
            root: metadata.workspace_root.into_std_path_buf(),
            metadata: Some(Found {
                target_dir: metadata.target_directory.into_std_path_buf(),
                members,
            }),
        })
    }

    /// The target folder cargo builds into.
    pub fn target_dir(&self) -> anyhow::Result<&Path> {
        match &self.metadata {
            Some(found) => Ok(&found.target_dir),
            None => bail!(
                "{} has no Cargo.toml, so there is no target folder — pass the workspace root",
                self.root.display()
            ),
        }
    }

    /// The syn rules' findings over the checked members ([`kanban_lints::scope`]).
    pub fn lint(&self) -> Result<Vec<kanban_lints::Diagnostic>, kanban_lints::LoadError> {
        match &self.metadata {
            Some(found) => kanban_lints::lint_workspace(&self.root, &found.members),
            None => kanban_lints::lint_root(&self.root),
        }
    }

    /// The sources the drift guard reads.
    pub fn tree(&self) -> Result<kanban_lints::Tree, kanban_lints::LoadError> {
        match &self.metadata {
            Some(found) => kanban_lints::Tree::load_workspace(&self.root, &found.members),
            None => kanban_lints::Tree::load(&self.root),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Workspace;

    /// A workspace of one member named like the runtime, with an empty library.
    fn scratch() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("runtime/src")).expect("mkdir");
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[workspace]\nmembers = [\"runtime\"]\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("runtime/Cargo.toml"),
            "[package]\nname = \"kanban-runtime\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
        )
        .expect("write");
        std::fs::write(dir.path().join("runtime/src/lib.rs"), "").expect("write");
        dir
    }

    #[test]
    fn the_target_folder_is_cargos_own_and_honours_build_target_dir() {
        let dir = scratch();
        std::fs::create_dir_all(dir.path().join(".cargo")).expect("mkdir");
        std::fs::write(
            dir.path().join(".cargo/config.toml"),
            "[build]\ntarget-dir = \"elsewhere/out\"\n",
        )
        .expect("write");
        let ws = Workspace::discover(Some(dir.path())).expect("metadata");
        let root = dir.path().canonicalize().expect("canonical");
        assert_eq!(ws.root.canonicalize().expect("canonical"), root);
        // `CARGO_TARGET_DIR` in the test's own environment would take precedence.
        if std::env::var_os("CARGO_TARGET_DIR").is_none()
            && std::env::var_os("CARGO_BUILD_TARGET_DIR").is_none()
        {
            assert_eq!(
                ws.target_dir().expect("target dir"),
                root.join("elsewhere/out")
            );
        }
    }

    #[test]
    fn members_come_with_their_targets_sources() {
        let dir = scratch();
        let ws = Workspace::discover(Some(dir.path())).expect("metadata");
        let found = ws.metadata.as_ref().expect("metadata");
        assert_eq!(found.members.len(), 1);
        assert_eq!(found.members[0].name, "kanban-runtime");
        assert!(
            found.members[0]
                .src_paths
                .iter()
                .any(|p| p.ends_with("runtime/src/lib.rs")),
            "{:?}",
            found.members[0].src_paths
        );
    }

    #[test]
    fn a_source_copy_without_a_manifest_has_no_target_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::discover(Some(dir.path())).expect("a source copy");
        let err = ws.target_dir().expect_err("no target folder");
        assert!(err.to_string().contains("has no Cargo.toml"), "{err}");
    }
}
