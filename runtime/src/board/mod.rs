//! The SQLite board store: schema and migrations, the write-transaction helper, board paths and
//! slugs, and every task transition as a compare-and-swap with a typed outcome. All SQL of the
//! board lives here, so a second backend never touches `dispatch/` or `worker/`.
