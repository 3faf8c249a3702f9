//! The SQLite engine's own part of a board: opening a board file ([`open`]), its schema and
//! migrations ([`schema`]), and its completion's fast path ([`fast`]).

pub(crate) mod fast;
pub(crate) mod open;
pub mod repair;
pub(crate) mod schema;
pub use open::wal_safe;
