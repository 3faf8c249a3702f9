//! The SQLite engine's own part of a board: opening a board file ([`open`]) and its schema and
//! migrations ([`schema`]).

pub(crate) mod open;
pub mod repair;
pub(crate) mod schema;
pub use open::wal_safe;
