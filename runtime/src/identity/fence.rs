//! The delegated-child fence: a process carrying the marker, or code running in a delegated-child
//! scope, may read its board but never mutate it.

/// Refusal of a board mutation from a fenced context.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused: this process is a delegated child ({marker} is set) and may not mutate the board; \
     run the command from the worker itself"
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
