//! What only one storage engine has: the schema DDL and migrations of each engine, the
//! PostgreSQL board's opening and one-statement fast paths, and the SQLite completion's fast path. The transitions above it are written
//! once, in the common dialect of [`crate::db`]; a file here is the only other place (with `db/`)
//! that may name `rusqlite` or `kanban_pgwire`.

pub mod migrate;
pub mod postgres;
pub mod sqlite;
pub mod transfer;
