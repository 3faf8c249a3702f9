//! The kanban home's board decisions the command line only calls: where `boards create` puts a
//! board ([`create`]), what `boards rm` may remove and the removal ([`remove`]), and what
//! `boards create --url` / `boards migrate` check, lock and do ([`migrate_plan`]). Errors here
//! never name a command-line flag; the CLI adds any hint.

pub mod create;
pub mod migrate_plan;
pub mod remove;
