//! The PostgreSQL engine's own part of a board: opening a board on a server ([`store`]), its
//! schema under an advisory lock ([`schema`]) and the one-statement fast paths of the hot
//! transitions ([`fast`]). docs/postgres.md has the locking argument.

pub(crate) mod fast;
pub mod schema;
pub(crate) mod store;
