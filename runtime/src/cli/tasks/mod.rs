//! The task subcommands of `kanban`, one function per subcommand, grouped by verb family:
//! [`create`] (`init`, `create`), [`read`] (`list`, `show`, `events`, `fsck`), [`lifecycle`] (the
//! agent-facing `claim`, `heartbeat`, `complete`, `block`, `comment`) and [`operator`] (`edit`,
//! `unblock`, `archive`, `reopen`, `reclaim`, `assign`, `link`, `unlink`, `promote`) and
//! [`purge`] (`delete`, `archive --rm`), [`repair`] (`repair`), [`attach`] (`attach`, `attachments`, `attach-rm`), [`graph`] (`decompose`, `specify`,
//! `schedule`, `reassign`), [`observe`] (`stats`, `assignees`, `runs`, `watch`,
//! `events --follow`), [`proof`] (`authorize-existing-pr`), [`recipe`] (`recipe …`, `swarm`) and
//! [`steering`] (`set-model`, `profiles`). Each parses no flag itself (clap
//! did, in `cli/board.rs`; `decompose` reads its children's JSON), calls [`crate::board`] and
//! prints; the shared opening, fencing and printing is [`super::session`].

pub(super) mod attach;
pub(super) mod context;
pub(super) mod create;
pub(super) mod graph;
pub(super) mod lifecycle;
pub(super) mod observe;
pub(super) mod operator;
pub(super) mod proof;
pub(super) mod purge;
pub(super) mod read;
pub(super) mod recipe;
pub(super) mod repair;
pub(super) mod steering;
pub(super) mod workspace;
