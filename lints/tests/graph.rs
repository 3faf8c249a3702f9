//! The module-graph rule (`lints/src/graph.rs`) against its corpus — in-memory crates, each a
//! way around the rule that must be caught, or a case it must accept — and over the real
//! `runtime/src`.

use std::path::Path;

use kanban_lints::scope::{MODULE_GRAPHS, ModuleGraph};
use kanban_lints::{Diagnostic, Tree, graph};

/// The runtime's policy (the one under test), read from scope.rs.
fn runtime_policy() -> &'static ModuleGraph {
    MODULE_GRAPHS
        .iter()
        .find(|p| p.src == "runtime/src")
        .expect("scope.rs has a policy for runtime/src")
}

/// The findings over a crate of `files` (`(path under runtime/src, text)`); a `lib.rs`
/// declaring nothing is added when the case has none.
fn run(files: &[(&str, &str)]) -> Vec<Diagnostic> {
    let mut sources: Vec<(String, String)> = files
        .iter()
        .map(|(p, t)| (format!("runtime/src/{p}"), (*t).to_owned()))
        .collect();
    if !files.iter().any(|(p, _)| *p == "lib.rs") {
        sources.push(("runtime/src/lib.rs".into(), String::new()));
    }
    let tree = Tree::from_sources(sources).expect("the case parses");
    graph::check_crate(&tree, runtime_policy())
}

fn show(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| format!("\n  {d}")).collect()
}

/// `files` gives exactly one finding per `(rule, path:line, substring)` of `expected`.
fn rejects(files: &[(&str, &str)], expected: &[(&str, &str, &str)]) {
    let diags = run(files);
    assert_eq!(
        diags.len(),
        expected.len(),
        "wanted {expected:?}, got:{}",
        show(&diags)
    );
    for (rule, at, text) in expected {
        assert!(
            diags.iter().any(|d| d.rule == *rule
                && format!("{}:{}", d.path, d.line) == format!("runtime/src/{at}")
                && d.to_string().contains(text)),
            "no {rule} at {at} containing `{text}`; got:{}",
            show(&diags)
        );
    }
}

fn accepts(files: &[(&str, &str)]) {
    let diags = run(files);
    assert!(
        diags.is_empty(),
        "accepted case has findings:{}",
        show(&diags)
    );
}

const FILE: &str = graph::FILE_CYCLE;
const TOP: &str = graph::TOP_LEVEL_CYCLE;
const CRATE: &str = graph::FORBIDDEN_CRATE;

// ---- cycles ---------------------------------------------------------------------------------

#[test]
fn a_two_file_use_cycle() {
    rejects(
        &[
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            ("b.rs", "\nuse crate::a::A;\npub struct B;\n"),
        ],
        &[
            (
                FILE,
                "a.rs:1",
                "2 files import each other (a, b): a → b (runtime/src/a.rs:1); b → a \
                 (runtime/src/b.rs:2)",
            ),
            (
                TOP,
                "a.rs:1",
                "a → b (runtime/src/a.rs:1); b → a (runtime/src/b.rs:2)",
            ),
        ],
    );
}

#[test]
fn a_cycle_through_an_inline_call_path() {
    rejects(
        &[
            ("a/mod.rs", "pub mod x;\n"),
            ("a/x.rs", "pub fn f() {\n    crate::b::g();\n}\n"),
            (
                "b.rs",
                "pub fn g() {}\npub fn h() {\n    crate::a::x::f()\n}\n",
            ),
        ],
        &[
            (
                FILE,
                "a/x.rs:2",
                "a::x → b (runtime/src/a/x.rs:2); b → a::x (runtime/src/b.rs:3)",
            ),
            (TOP, "a/x.rs:2", "a → b"),
        ],
    );
}

#[test]
fn a_cycle_through_super() {
    rejects(
        &[
            ("m/mod.rs", "mod p;\nmod q;\n"),
            ("m/p.rs", "use super::q::Q;\npub struct P;\n"),
            (
                "m/q.rs",
                "pub struct Q;\nfn f(_: super::super::m::p::P) {}\n",
            ),
        ],
        &[(
            FILE,
            "m/p.rs:1",
            "m::p → m::q (runtime/src/m/p.rs:1); m::q → m::p (runtime/src/m/q.rs:2)",
        )],
    );
}

#[test]
fn a_cycle_through_a_grouped_use() {
    rejects(
        &[
            // `b::x` alone imports the module (no edge); `b::x::X` names it.
            (
                "a.rs",
                "use crate::{c::C, b::{x, x::X, B}};\npub struct A;\n",
            ),
            ("b/mod.rs", "pub mod x;\npub struct B;\n"),
            (
                "b/x.rs",
                "use crate::{a::{self, A}};\npub struct X;\nfn f() -> a::A { A }\n",
            ),
            ("c.rs", "pub struct C;\n"),
        ],
        &[
            (
                FILE,
                "a.rs:1",
                "a → b::x (runtime/src/a.rs:1); b::x → a (runtime/src/b/x.rs:1)",
            ),
            (
                TOP,
                "a.rs:1",
                "a → b (runtime/src/a.rs:1); b → a (runtime/src/b/x.rs:1)",
            ),
        ],
    );
}

#[test]
fn a_cycle_through_a_pub_use_re_export() {
    rejects(
        &[
            ("a.rs", "pub(crate) use crate::b::B;\npub struct A;\n"),
            ("b.rs", "pub struct B;\nfn f(_: crate::c::A) {}\n"),
            // `c` only re-exports `a::A`: the edge goes to `a`, where `A` is.
            ("c.rs", "pub use crate::a::A;\n"),
        ],
        &[
            (
                FILE,
                "a.rs:1",
                "a → b (runtime/src/a.rs:1); b → a (runtime/src/b.rs:2)",
            ),
            (TOP, "a.rs:1", "a → b"),
        ],
    );
}

#[test]
fn a_cycle_through_a_facade_mod_rs_re_export() {
    rejects(
        &[
            (
                "board/mod.rs",
                "mod model;\nmod tasks;\npub use model::Task;\n",
            ),
            (
                "board/model.rs",
                "pub struct Task;\nfn f() { super::tasks::claim(); }\n",
            ),
            ("board/tasks.rs", "use super::Task;\npub fn claim() {}\n"),
        ],
        &[(
            FILE,
            "board/model.rs:2",
            "board::model → board::tasks (runtime/src/board/model.rs:2); board::tasks → \
             board::model (runtime/src/board/tasks.rs:1)",
        )],
    );
}

#[test]
fn a_cycle_through_a_path_inside_a_macro_body() {
    rejects(
        &[
            (
                "a.rs",
                "pub enum E { X }\nfn f(e: Option<u8>) -> bool {\n    matches!(e, Some(crate::b::K) if true)\n}\n",
            ),
            (
                "b.rs",
                "pub const K: u8 = 0;\nfn g() {\n    let _ = format!(\"{}\", crate::a::E::X as u8);\n}\n",
            ),
        ],
        &[
            (
                FILE,
                "a.rs:3",
                "a → b (runtime/src/a.rs:3); b → a (runtime/src/b.rs:3)",
            ),
            (TOP, "a.rs:3", "a → b"),
        ],
    );
}

#[test]
fn a_cycle_through_a_macro_path_and_an_alias() {
    rejects(
        &[
            ("a.rs", "use crate::b;\nfn f() { b::mac!(); }\n"),
            ("b.rs", "fn g() { let _ = x!{ call crate::a::f now }; }\n"),
        ],
        &[
            (
                FILE,
                "a.rs:2",
                "a → b (runtime/src/a.rs:2); b → a (runtime/src/b.rs:1)",
            ),
            (TOP, "a.rs:2", "a → b"),
        ],
    );
}

#[test]
fn a_three_module_top_level_cycle() {
    rejects(
        &[
            ("a/mod.rs", "mod one;\n"),
            ("a/one.rs", "use crate::b::two::T;\n"),
            ("b/mod.rs", "pub mod two;\n"),
            ("b/two.rs", "pub struct T;\nfn f(_: crate::c::U) {}\n"),
            ("c.rs", "pub struct U;\nfn g() { crate::a::h(); }\n"),
            ("a/extra.rs", ""),
        ],
        &[(
            TOP,
            "a/one.rs:1",
            "3 top-level modules import each other (a, b, c): a → b (runtime/src/a/one.rs:1); b \
             → c (runtime/src/b/two.rs:2); c → a (runtime/src/c.rs:2)",
        )],
    );
}

// ---- forbidden crates -----------------------------------------------------------------------

#[test]
fn use_rusqlite_params_outside_db() {
    rejects(
        &[("board/tasks.rs", "\nuse rusqlite::params;\n")],
        &[(
            CRATE,
            "board/tasks.rs:2",
            "`board::tasks` names `rusqlite` (`rusqlite::params`), outside `db` and `board::engine`",
        )],
    );
}

#[test]
fn an_inline_rusqlite_params_macro() {
    rejects(
        &[(
            "cli/board.rs",
            "fn f() {\n    let _p = rusqlite::params![1, 2];\n}\n",
        )],
        &[(
            CRATE,
            "cli/board.rs:2",
            "`cli::board` names `rusqlite` (`rusqlite::params`)",
        )],
    );
}

#[test]
fn an_absolute_kanban_pgwire_path_in_a_type() {
    rejects(
        &[(
            "identity/settings.rs",
            "struct S {\n    c: Option<::kanban_pgwire::Client>,\n}\n",
        )],
        &[(
            CRATE,
            "identity/settings.rs:2",
            "names `kanban_pgwire` (`::kanban_pgwire::Client`)",
        )],
    );
}

#[test]
fn use_rusqlite_as_a_rename() {
    rejects(
        &[(
            "board/store.rs",
            "use rusqlite as sql;\nfn f(_: sql::Connection) {}\n",
        )],
        &[(
            CRATE,
            "board/store.rs:1",
            "`board::store` names `rusqlite` (`rusqlite`)",
        )],
    );
}

#[test]
fn extern_crate_and_a_grouped_rename() {
    rejects(
        &[(
            "home/mod.rs",
            "extern crate rusqlite;\nuse {kanban_pgwire::Client as C};\n",
        )],
        &[
            (
                CRATE,
                "home/mod.rs:1",
                "`home` names `rusqlite` (`::rusqlite`)",
            ),
            (
                CRATE,
                "home/mod.rs:2",
                "`home` names `kanban_pgwire` (`kanban_pgwire::Client`)",
            ),
        ],
    );
}

#[test]
fn a_storage_path_inside_a_macro_body() {
    rejects(
        &[(
            "gates/mod.rs",
            "fn f() {\n    sql!(SELECT 1 FROM rusqlite::Connection::open_in_memory());\n}\n",
        )],
        &[(
            CRATE,
            "gates/mod.rs:2",
            "`gates` names `rusqlite` (`rusqlite::Connection::open_in_memory`)",
        )],
    );
}

#[test]
fn a_forbidden_crate_reached_through_another_modules_re_export() {
    rejects(
        &[
            ("util.rs", "pub use rusqlite::Connection;\n"),
            ("board/store.rs", "fn f(_: &crate::util::Connection) {}\n"),
        ],
        &[
            (
                CRATE,
                "util.rs:1",
                "`util` names `rusqlite` (`rusqlite::Connection`)",
            ),
            (
                CRATE,
                "board/store.rs:1",
                "`board::store` names `rusqlite` (`crate::util::Connection`, re-exported from it)",
            ),
        ],
    );
}

// ---- accepted -------------------------------------------------------------------------------

#[test]
fn test_code_may_import_anything() {
    accepts(&[
        (
            "a.rs",
            "pub struct A;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n    use rusqlite::params;\n}\n#[cfg(test)]\nmod more;\n",
        ),
        (
            "a/more.rs",
            "use crate::b::B;\nuse kanban_pgwire::Client;\n",
        ),
        ("b.rs", "use crate::a::A;\npub struct B;\n"),
    ]);
}

#[test]
fn edges_to_the_root_and_to_ancestors_are_not_cycles() {
    accepts(&[
        (
            "lib.rs",
            "pub mod a;\npub use a::x::f;\npub fn error_chain() {}\n",
        ),
        (
            "a/mod.rs",
            "pub mod x;\npub struct Shared;\npub fn g() { x::f(); }\n",
        ),
        (
            "a/x.rs",
            "use super::Shared;\npub fn f() { crate::error_chain(); let _ = Shared; }\n",
        ),
    ]);
}

#[test]
fn the_storage_modules_may_name_the_storage_crates() {
    accepts(&[
        ("db/mod.rs", "pub mod sqlite;\nuse kanban_pgwire::Client;\n"),
        (
            "db/sqlite/open.rs",
            "use rusqlite::params;\nfn f() { rusqlite::params![]; }\n",
        ),
        (
            "board/engine/postgres.rs",
            "fn f(_: ::kanban_pgwire::Client) {}\n",
        ),
        // What a storage module re-exports is its API.
        ("db/params.rs", "pub use rusqlite::params;\n"),
        (
            "board/tasks.rs",
            "fn f() {\n    let _ = crate::db::params::params![1];\n}\n",
        ),
    ]);
}

#[test]
fn a_module_import_a_one_way_dependency_and_module_internal_references() {
    accepts(&[
        (
            "a.rs",
            "use crate::b;\nfn f() -> b::B { b::B }\nmod inner {\n    fn g() { super::f(); self::h(); }\n    fn h() {}\n}\n",
        ),
        ("b.rs", "pub struct B;\nfn k(board: u8) -> u8 { board }\n"),
        // A visibility restriction names where an item is seen, not what it uses.
        ("c.rs", "pub(in crate::a) fn c() {}\n"),
    ]);
}

#[test]
fn a_path_attribute_is_honoured() {
    rejects(
        &[
            ("a.rs", "#[path = \"elsewhere/z.rs\"]\nmod z;\n"),
            ("elsewhere/z.rs", "fn f() { crate::b::g(); }\n"),
            ("b.rs", "pub fn g() { crate::a::z::h(); }\n"),
        ],
        &[
            (
                FILE,
                "elsewhere/z.rs:1",
                "a::z → b (runtime/src/elsewhere/z.rs:1); b → a::z (runtime/src/b.rs:1)",
            ),
            (
                TOP,
                "elsewhere/z.rs:1",
                "a → b (runtime/src/elsewhere/z.rs:1); b → a (runtime/src/b.rs:1)",
            ),
        ],
    );
}

// ---- the real tree --------------------------------------------------------------------------

#[test]
fn the_checked_crates_have_no_import_cycle_and_name_the_storage_crates_only_in_their_modules() {
    let lints = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = lints.parent().unwrap_or(lints);
    let dirs: Vec<String> = MODULE_GRAPHS.iter().map(|p| p.src.to_owned()).collect();
    let tree = Tree::load_dirs(root, &dirs).expect("the checked crates load");
    let diags = graph::check(&tree, MODULE_GRAPHS);
    assert!(
        diags.is_empty(),
        "the module graph of {} ({} finding(s)):{}",
        dirs.join(", "),
        diags.len(),
        show(&diags)
    );
}

#[test]
fn a_crate_that_may_not_name_a_storage_crate_at_all() {
    let web = MODULE_GRAPHS
        .iter()
        .find(|p| p.src == "web/src")
        .expect("scope.rs has a policy for web/src");
    let tree = Tree::from_sources([
        ("web/src/lib.rs", "mod page;\n"),
        ("web/src/page.rs", "use rusqlite::Connection;\n"),
    ])
    .expect("the case parses");
    let diags = graph::check_crate(&tree, web);
    assert_eq!(diags.len(), 1, "{}", show(&diags));
    assert!(
        diags[0].to_string().starts_with(
            "web/src/page.rs:1:15: forbidden-crate: `page` names `rusqlite` \
             (`rusqlite::Connection`), which no module of this crate may name"
        ),
        "{}",
        diags[0]
    );
}

#[test]
fn every_module_graph_policy_names_a_source_folder_of_this_workspace() {
    let lints = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = lints.parent().unwrap_or(lints);
    for policy in MODULE_GRAPHS {
        assert!(
            root.join(policy.src).join("lib.rs").is_file()
                || root.join(policy.src).join("main.rs").is_file(),
            "lints/src/scope.rs checks the module graph of {}, which is no crate's source folder: \
             remove or fix the stale entry",
            policy.src
        );
    }
}
