//! Starting workers. [`default_spawn`] is the only place in the runtime that grants worker
//! identity: it starts from the grant boundary `identity::grant::worker_command` (the inherited
//! environment without any identity key or delegated-child marker) and injects the keys of
//! `identity::KANBAN_ENV_KEYS` / `BEHAVIOR_ONLY_ENV_KEYS` / `INHERITABLE_ENV_KEYS` (the drift
//! guard parses this function: keep the `.env("LITERAL", …)` shape). It never touches the board; the tick records the pid and fingerprint right after.
//!
//! The worker is `<current executable> worker --home <root>` (`submit` in owner mode, `worker
//! --managed …` when the owner starts it: [`SpawnRole`]) with cwd = its workspace, stdin null,
//! stdout and stderr appended to the task log, leading its own process group (so TERM/KILL reach
//! its agent's children too), with the executable's directory first on `PATH` so the agent finds
//! `kanban` for its lifecycle commands.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use std::os::unix::process::CommandExt as _;

use crate::identity;

/// A task log is rotated to `<log>.1` when it grows past this many bytes (one backup kept).
pub(crate) const LOG_ROTATE_BYTES: u64 = 2 * 1024 * 1024;

/// Everything needed to start one worker for one claimed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    pub task_id: String,
    pub run_id: i64,
    pub claim_lock: String,
    /// The profile the worker runs (the task's assignee, else the default profile).
    pub profile: String,
    /// Kanban root; the worker reads `<root>/kanban.toml`.
    pub root: PathBuf,
    pub board: String,
    /// `HERMES_KANBAN_DB`: the board file, or a PostgreSQL board's URL without its password
    /// (`BoardLocation::env_db`; the worker finds the password where every process does).
    pub db: PathBuf,
    pub workspaces_root: PathBuf,
    /// `<workspaces_root>/<task_id>`, created before the worker starts.
    pub workspace: PathBuf,
    /// `crate::home::log_path` (`<root>/kanban/logs/<task_id>.log` on the default board), appended to.
    pub log: PathBuf,
    pub branch: Option<String>,
    pub goal_mode: bool,
    pub goal_max_turns: Option<i64>,
    pub tenant: Option<String>,
    /// What the granted process is: a direct worker, the owner-mode submitter, or the owner's
    /// managed worker.
    pub role: SpawnRole,
}

/// Which process `default_spawn` starts for a claimed run (the granted identity is the same).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SpawnRole {
    /// `kanban worker`: runs the agent itself (`[dispatch] mode = "direct"`).
    #[default]
    Worker,
    /// `kanban submit`: asks the profile's owner to run the turn (`mode = "owner"`).
    Submitter,
    /// `kanban worker --managed …`, started by the owner for one admitted turn: it watches the
    /// submitter (pid and fingerprint as the owner saw them at admission) and the owner.
    Managed {
        submitter_pid: i64,
        submitter_fingerprint: Option<String>,
        owner_pid: i64,
    },
}

/// Why a worker could not be started (booked as `spawn_failed`, a counted failure).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot find the current executable to start `kanban worker`")]
    Executable(#[source] std::io::Error),
    #[error("cannot create the workspace {path}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the task log {path}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start `kanban worker` for task {task}")]
    Start {
        task: String,
        source: std::io::Error,
    },
}

/// Opens `path` for appending (creating its directory), rotating it first when it is too big.
fn open_log(path: &Path) -> Result<std::fs::File, SpawnError> {
    let err = |source| SpawnError::Log {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        let mut backup = path.as_os_str().to_owned();
        backup.push(".1");
        std::fs::rename(path, PathBuf::from(backup)).map_err(err)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)
}

/// Starts the worker process for one claimed run and grants it its identity (ARCHITECTURE.md §5).
pub fn default_spawn(req: &SpawnRequest) -> Result<Child, SpawnError> {
    let exe = std::env::current_exe().map_err(SpawnError::Executable)?;
    std::fs::create_dir_all(&req.workspace).map_err(|source| SpawnError::Workspace {
        path: req.workspace.clone(),
        source,
    })?;
    let stdout = open_log(&req.log)?;
    let stderr = stdout.try_clone().map_err(|source| SpawnError::Log {
        path: req.log.clone(),
        source,
    })?;

    // The agent runs `kanban complete` & co.: put this executable's directory first on PATH.
    let path = match (exe.parent(), identity::settings::path()) {
        (Some(dir), Some(old)) => {
            let mut dirs = vec![dir.to_owned()];
            dirs.extend(std::env::split_paths(&old).filter(|d| d != dir));
            std::env::join_paths(dirs).ok()
        }
        (Some(dir), None) => Some(dir.as_os_str().to_owned()),
        _ => None,
    };

    #[allow(clippy::disallowed_methods)] // the grant boundary: default_spawn grants identity
    let mut cmd = identity::grant::worker_command(&exe);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    match &req.role {
        SpawnRole::Worker => cmd.arg("worker"),
        SpawnRole::Submitter => cmd.arg("submit"),
        SpawnRole::Managed {
            submitter_pid,
            submitter_fingerprint,
            owner_pid,
        } => {
            cmd.arg("worker")
                .arg("--managed")
                .arg("--submitter-pid")
                .arg(submitter_pid.to_string())
                .arg("--owner-pid")
                .arg(owner_pid.to_string());
            if let Some(fp) = submitter_fingerprint {
                cmd.arg("--submitter-fingerprint").arg(fp);
            }
            &mut cmd
        }
    };
    cmd.arg("--home")
        .arg(&req.root)
        .current_dir(&req.workspace)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    // The grant boundary: a dispatcher running in a fenced context still starts an owned worker
    // (`worker_command` already dropped an inherited marker and every inherited identity key).
    cmd.env("HERMES_KANBAN_TASK", &req.task_id)
        .env("HERMES_KANBAN_RUN_ID", req.run_id.to_string())
        .env("HERMES_KANBAN_CLAIM_LOCK", &req.claim_lock)
        .env("HERMES_KANBAN_WORKSPACE", &req.workspace)
        .env("HERMES_KANBAN_WORKSPACES_ROOT", &req.workspaces_root)
        .env("HERMES_KANBAN_BOARD", &req.board)
        .env("HERMES_KANBAN_DB", &req.db)
        .env("HERMES_PROFILE", &req.profile)
        .env("HERMES_SESSION_SOURCE", "kanban");
    // Conditional keys are removed when unset so a value inherited from a dispatcher that itself
    // runs inside a worker's shell never leaks into this worker.
    match &req.branch {
        Some(branch) => cmd.env("HERMES_KANBAN_BRANCH", branch),
        None => cmd.env_remove("HERMES_KANBAN_BRANCH"),
    };
    if req.goal_mode {
        cmd.env("HERMES_KANBAN_GOAL_MODE", "1");
    } else {
        cmd.env_remove("HERMES_KANBAN_GOAL_MODE");
    }
    match req.goal_max_turns.filter(|_| req.goal_mode) {
        Some(turns) => cmd.env("HERMES_KANBAN_GOAL_MAX_TURNS", turns.to_string()),
        None => cmd.env_remove("HERMES_KANBAN_GOAL_MAX_TURNS"),
    };
    match &req.tenant {
        Some(tenant) => cmd.env("HERMES_TENANT", tenant),
        None => cmd.env_remove("HERMES_TENANT"),
    };
    cmd.spawn().map_err(|source| SpawnError::Start {
        task: req.task_id.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_is_rotated_once_it_is_too_big() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("logs").join("t.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        std::fs::write(&log, vec![b'x'; LOG_ROTATE_BYTES as usize + 1]).unwrap();
        drop(open_log(&log).unwrap());
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0);
        assert!(dir.path().join("logs").join("t.log.1").exists());
    }
}
