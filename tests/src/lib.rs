//! End-to-end tests that drive the real `kanban` binary on a temporary home: helpers live here,
//! the scenarios in `tests/tests/*.rs`.
