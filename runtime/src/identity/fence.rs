//! The delegated-child fence: a process carrying the marker, or code running in a delegated-child
//! scope, may read its board but never mutate it. The fence covers every board (the marker's
//! value is not interpreted as a board root, unlike one version of the original): a delegated
//! child has no business mutating any board, and a stale marker only ever costs writes, never
//! reads.

/// Refusal of a board mutation from a fenced context.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused: this context is a delegated child (the process carries {marker}, or the code runs in \
     a delegated-child scope) and may not mutate a board; ask the worker that owns the task to \
     make the change, or run the command from a shell without {marker}"
)]
pub struct Fenced {
    pub marker: &'static str,
}

/// `Ok(())` unless the current context is fenced from mutating boards.
pub fn check_board_mutation() -> Result<(), Fenced> {
    if super::is_delegated_child() {
        Err(Fenced {
            marker: super::DELEGATED_CHILD_MARKER,
        })
    } else {
        Ok(())
    }
}
