//! `kanban-lints`: syn-based rules over the workspace sources that the compiler and clippy cannot
//! express (identity keys read outside `identity`, ungated identity consumers, cached verdicts,
//! threads and subprocesses started outside the sanctioned helpers). One rule per file.
