//! `#[kanban_identity_gated]`: the attribute every function that turns worker identity into
//! behaviour carries. (Being built: parse → validate → expand.)
