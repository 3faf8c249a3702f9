//! The SQLite engine's own part of a board: its schema and migrations.

pub(crate) mod schema;
