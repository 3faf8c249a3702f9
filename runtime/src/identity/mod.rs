//! Worker identity: the only module that reads `HERMES_KANBAN_*` from the process environment.
//!
//! Owns the ownership context (per execution context, never per process), the identity key lists,
//! the one identity gate, the child-process environment builder (scrub) and the delegated-child
//! fence. It never mutates the process environment.
//!
//! [`settings`] is the sanctioned reader for the non-identity knobs (`HERMES_KANBAN_HOME`,
//! timeouts, TTLs) and for the board location keys used by board resolution.

pub mod settings;
