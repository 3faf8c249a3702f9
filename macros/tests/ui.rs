//! trybuild UI tests of `#[kanban_identity_gated]`: one file per misuse under `tests/ui/` (each
//! with the exact diagnostic in its `.stderr`), and pass cases under `tests/ui/pass/` that are
//! compiled and run. Regenerate the `.stderr` files with `TRYBUILD=overwrite` and read the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
