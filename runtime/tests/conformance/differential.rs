//! The differential test of the two stores: one scripted day of a board — every transition the
//! API has, its refusals and lost cases, with injected times — runs against a SQLite board and a
//! PostgreSQL board, and then the two must agree byte for byte: every value the API returned (the
//! transcript) and every row of every table (the dump: `tasks`, `task_links`, `task_comments`,
//! `task_events`, `task_runs`, whatever the schema has), column by column, event payload text,
//! run ids, timestamps and `current_run_id` included.
//!
//! The conformance suite checks what each store does against expectations written by hand; this
//! test checks the two stores against each other, so a store-specific shortcut of a transition
//! (one statement doing a claim's happy path on PostgreSQL, say) that writes one byte the generic
//! path does not is caught even where no hand-written assertion looks.
//!
//! **The one normalisation: task ids.** A task's id is drawn at random (`t_` + 8 hex digits), so
//! the two stores give the same task different ids. Right after each create, the script checks the
//! id's shape and renames the task to `t_<creation index as 8 hex digits>` in every text column
//! of every table (through the SQL layer, the same statements on both stores), before anything
//! else refers to it. Renaming rather than mapping the ids in the dump also makes every order the
//! board derives from ids (the parent gate and child promotion read `ORDER BY id`) the same in
//! both stores; with random ids two children promoted by one completion would get their events
//! in a different order per store. Everything else — run, event and comment ids, `tasks.rowid`
//! (SQLite's implicit insertion order, PostgreSQL's identity column of the same name) — is
//! compared as stored.
//!
//! The script's refusals are all decided before a transition writes anything, and nothing in
//! it rolls back a write: PostgreSQL's identity sequences do not roll back, so a transaction that
//! inserted a row and then failed would leave a gap in PostgreSQL's ids that SQLite fills, which
//! is no difference of behaviour this test is about. The script ends with a sentinel task that
//! inserts into every id-numbered table, so a gap burnt anywhere before shows as a different id.

use std::collections::BTreeMap;
use std::fmt::Debug;

use super::tamper;
use super::*;
use kanban_runtime::board::attachments::{Artifact, Artifacts, AttachmentError};
use kanban_runtime::db::Value;
use rusqlite::params;

const HOST_A: &str = "host-a:101";
const HOST_B: &str = "host-b:202";

/// An id no task has (the right shape, so it is looked up, not refused as malformed).
const NO_SUCH_TASK: &str = "t_ffffffff";

fn t(seconds: i64) -> i64 {
    T0 + seconds
}

fn lease(lock: &str, ttl_seconds: i64) -> ClaimSpec {
    ClaimSpec {
        lock: lock.to_owned(),
        ttl_seconds,
        origin: kanban_runtime::board::ClaimOrigin::External,
    }
}

fn fence(lock: &str, run_id: i64) -> Fence {
    Fence {
        claim_lock: Some(lock.to_owned()),
        run_id: Some(run_id),
    }
}

fn completion(run_id: Option<i64>, summary: Option<&str>, result: Option<&str>) -> Completion {
    Completion {
        expected_run_id: run_id,
        summary: summary.map(str::to_owned),
        result: result.map(str::to_owned),
        force: false,
        ..Completion::default()
    }
}

fn crashed<'a>(lock: &'a str, run_id: i64, failure: Failure<'a>) -> Release<'a> {
    crashed_exit(
        lock,
        run_id,
        failure,
        5151,
        "panicked at 'boom'\n\"quoted\" ünïcode",
    )
}

fn store_name(b: &Board) -> &'static str {
    if b.is_postgres() {
        "postgres"
    } else {
        "sqlite"
    }
}

/// An error with its source chain, as the CLI prints it.
fn chain(e: &BoardError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

// ---------------------------------------------------------------- the schema, read generically

/// A table of the board and its columns (name, whether the store declares it text), in
/// declaration order, as the store's own catalog lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    name: String,
    columns: Vec<(String, bool)>,
}

/// Every table of the board, by name. PostgreSQL's schema-version table is left out: it is what
/// SQLite keeps in its file header (`PRAGMA user_version`), not a table of the board.
fn catalog(b: &Board) -> Vec<Table> {
    let db = sql(b);
    let names: Vec<String> = if b.is_postgres() {
        db.rows(
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' \
             AND table_name <> ?1",
            params![kanban_runtime::board::engine::postgres::schema::VERSION_TABLE],
            1,
        )
        .unwrap()
    } else {
        db.rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
            &[],
            1,
        )
        .unwrap()
    }
    .into_iter()
    .map(|row| text(&row[0]))
    .collect();
    let mut tables: Vec<Table> = names
        .into_iter()
        .map(|name| {
            let columns: Vec<Vec<Value>> = if b.is_postgres() {
                db.rows(
                    "SELECT CAST(column_name AS TEXT), CAST(data_type AS TEXT) \
                     FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND table_name = ?1 \
                     ORDER BY ordinal_position",
                    params![name],
                    2,
                )
                .unwrap()
            } else {
                db.rows(
                    "SELECT name, type FROM pragma_table_info(?1) ORDER BY cid",
                    params![name],
                    2,
                )
                .unwrap()
            };
            let columns = columns
                .into_iter()
                .map(|row| (text(&row[0]), text(&row[1]).eq_ignore_ascii_case("text")))
                .collect();
            Table { name, columns }
        })
        .collect();
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    tables
}

/// A catalog's text value.
fn text(value: &Value) -> String {
    match value {
        Value::Text(s) => s.clone(),
        other => panic!("the catalog gave {other:?} for a name"),
    }
}

/// The columns a dump reads of `table`: `rowid` first for `tasks` (SQLite's implicit insertion
/// order; on PostgreSQL a real column of that name, appended by the schema's extras, which is
/// why it is taken out of the catalog's list), then every declared column.
fn dump_columns(table: &Table) -> Vec<String> {
    let declared = table
        .columns
        .iter()
        .map(|(c, _)| c.clone())
        .filter(|c| c != "rowid");
    if table.name == "tasks" {
        std::iter::once("rowid".to_owned())
            .chain(declared)
            .collect()
    } else {
        declared.collect()
    }
}

/// Renames task `old` to `new` in every text column of every table (see the module docs).
fn rename_task(b: &Board, tables: &[Table], old: &str, new: &str) {
    let mut renamed = 0;
    for table in tables {
        for (column, text) in &table.columns {
            if !text {
                continue;
            }
            let statement = format!(
                "UPDATE {} SET {column} = ?1 WHERE {column} = ?2",
                table.name
            );
            let changed = sql(b).execute(&statement, params![new, old]).unwrap();
            if table.name == "tasks" && column == "id" {
                renamed = changed;
            }
        }
    }
    assert_eq!(renamed, 1, "{}: no task {old} to rename", store_name(b));
}

// ---------------------------------------------------------------- the dump and its comparison

/// Every row of every table: columns and rows (each value as stored), by table name.
type Dump = BTreeMap<String, (Vec<String>, Vec<Vec<Value>>)>;

fn dump(b: &Board) -> Dump {
    let mut out = Dump::new();
    for table in catalog(b) {
        let columns = dump_columns(&table);
        let order = if table.name == "tasks" {
            "rowid".to_owned()
        } else if columns.iter().any(|c| c == "id") {
            "id".to_owned()
        } else {
            columns.join(", ")
        };
        let statement = format!(
            "SELECT {} FROM {} ORDER BY {order}",
            columns.join(", "),
            table.name
        );
        let mut rows = sql(b).rows(&statement, &[], columns.len()).unwrap();
        if order != "rowid" && order != "id" {
            // Keyed by text (`task_links`): ordered here, not by the engine's collation.
            rows.sort_by_key(|row| format!("{row:?}"));
        }
        out.insert(table.name, (columns, rows));
    }
    out
}

/// Every difference between two dumps, one line each (empty when they are equal).
fn differences(sqlite: &Dump, postgres: &Dump) -> Vec<String> {
    let mut out = Vec::new();
    let names = |d: &Dump| d.keys().cloned().collect::<Vec<_>>();
    if names(sqlite) != names(postgres) {
        out.push(format!(
            "tables: sqlite {:?}, postgres {:?}",
            names(sqlite),
            names(postgres)
        ));
    }
    for (table, (s_columns, s_rows)) in sqlite {
        let Some((p_columns, p_rows)) = postgres.get(table) else {
            continue;
        };
        if s_columns != p_columns {
            out.push(format!(
                "{table} columns: sqlite {s_columns:?}, postgres {p_columns:?}"
            ));
            continue;
        }
        if s_rows.len() != p_rows.len() {
            out.push(format!(
                "{table}: sqlite has {} rows, postgres {}",
                s_rows.len(),
                p_rows.len()
            ));
        }
        for (i, (s_row, p_row)) in s_rows.iter().zip(p_rows).enumerate() {
            for (c, column) in s_columns.iter().enumerate() {
                if s_row[c] != p_row[c] {
                    out.push(format!(
                        "{table} row {} ({} {:?}) column {column}: sqlite {:?}, postgres {:?}",
                        i + 1,
                        s_columns[0],
                        s_row[0],
                        s_row[c],
                        p_row[c]
                    ));
                }
            }
        }
        for (label, rows, other) in [("sqlite", s_rows, p_rows), ("postgres", p_rows, s_rows)] {
            for row in rows.iter().skip(other.len()) {
                out.push(format!("{table}: only {label} has {row:?}"));
            }
        }
    }
    out
}

/// Up to 60 characters of `text` either side of byte `at` (a character boundary).
fn around(text: &str, at: usize) -> String {
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(59)
        .map_or(0, |(i, _)| i);
    let end = text[at..]
        .char_indices()
        .nth(60)
        .map_or(text.len(), |(i, _)| at + i);
    format!("…{}…", &text[start..end])
}

/// Every step whose outcome differs between two transcripts, shown around its first
/// differing character.
fn transcript_differences(sqlite: &[String], postgres: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (s, p)) in sqlite.iter().zip(postgres).enumerate() {
        if s != p {
            let at = s
                .char_indices()
                .zip(p.chars())
                .find(|((_, a), b)| a != b)
                .map_or(s.len().min(p.len()), |((i, _), _)| i);
            let step = s.split(": ").next().unwrap_or("");
            out.push(format!(
                "step {} ({step}):\n  sqlite   {}\n  postgres {}",
                i + 1,
                around(s, at),
                around(p, at)
            ));
        }
    }
    if sqlite.len() != postgres.len() {
        out.push(format!(
            "sqlite took {} steps, postgres {}",
            sqlite.len(),
            postgres.len()
        ));
    }
    out
}

/// Fails listing `differences` (at most 40 of each kind), rows first: they name table, row and
/// column.
fn assert_none(differences: &[(&str, Vec<String>)]) {
    let mut report = String::new();
    for (what, found) in differences {
        if !found.is_empty() {
            report.push_str(&format!(
                "the stores differ in {what} ({} differences):\n",
                found.len()
            ));
            for line in found.iter().take(40) {
                report.push_str(line);
                report.push('\n');
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}

// ---------------------------------------------------------------- the script

/// A board the script runs on, and the transcript of every value the API returned.
struct Script<'b> {
    b: &'b Board,
    tables: Vec<Table>,
    created: u32,
    log: Vec<String>,
}

impl<'b> Script<'b> {
    fn new(b: &'b Board) -> Script<'b> {
        Script {
            b,
            tables: catalog(b),
            created: 0,
            log: Vec::new(),
        }
    }

    fn store(&self) -> &'static str {
        store_name(self.b)
    }

    /// Records what step `step` returned.
    fn rec<T: Debug>(&mut self, step: &str, r: Result<T>) -> Result<T> {
        let text = match &r {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("error: {}", chain(e)),
        };
        self.log.push(format!("{step}: {text}"));
        r
    }

    /// Records a step that must succeed.
    fn ok<T: Debug>(&mut self, step: &str, r: Result<T>) -> T {
        match self.rec(step, r) {
            Ok(v) => v,
            Err(e) => panic!("{}: {step}: {}", self.store(), chain(&e)),
        }
    }

    /// Records a step that must fail with an error.
    fn error<T: Debug>(&mut self, step: &str, r: Result<T>) {
        if let Ok(v) = self.rec(step, r) {
            panic!("{}: {step}: expected an error, got {v:?}", self.store());
        }
    }

    /// Records a transition that must apply.
    fn done<T: Debug>(&mut self, step: &str, r: Result<Outcome<T>>) -> T {
        match self.ok(step, r) {
            Outcome::Done(v) => v,
            Outcome::Refused(x) => panic!("{}: {step}: refused: {x}", self.store()),
        }
    }

    /// Records a transition that must be refused.
    fn refused<T: Debug>(&mut self, step: &str, r: Result<Outcome<T>>) {
        if let Outcome::Done(v) = self.ok(step, r) {
            panic!("{}: {step}: expected a refusal, got {v:?}", self.store());
        }
    }

    /// Records a claim that must be won; returns its run id.
    fn claimed(&mut self, step: &str, r: Result<ClaimOutcome>) -> i64 {
        match self.ok(step, r) {
            ClaimOutcome::Claimed(c) => c.run_id,
            ClaimOutcome::Lost(x) => panic!("{}: {step}: lost: {x}", self.store()),
        }
    }

    /// Records a claim that must be lost.
    fn lost(&mut self, step: &str, r: Result<ClaimOutcome>) {
        if let ClaimOutcome::Claimed(c) = self.ok(step, r) {
            panic!("{}: {step}: expected a lost claim, got {c:?}", self.store());
        }
    }

    /// A created task under its deterministic id (see the module docs); an existing task (its
    /// idempotency key matched) keeps the id it has.
    fn adopt(&mut self, created: Created) -> Created {
        if created.existing {
            return created;
        }
        let random = created.id.strip_prefix("t_").unwrap_or("");
        assert!(
            random.len() == 8
                && random
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            "{}: a new task's id is not t_ and 8 hex digits: {}",
            self.store(),
            created.id
        );
        self.created += 1;
        let id = format!("t_{:08x}", self.created);
        rename_task(self.b, &self.tables, &created.id, &id);
        Created { id, ..created }
    }

    fn create(&mut self, step: &str, new: &NewTask, now: i64) -> String {
        let created = match self.b.create_task(new, now) {
            Ok(c) => self.adopt(c),
            Err(e) => panic!("{}: {step}: {}", self.store(), chain(&e)),
        };
        self.log.push(format!("{step}: {created:?}"));
        created.id
    }

    fn create_all(&mut self, step: &str, news: &[NewTask], now: i64) -> Vec<String> {
        let created: Vec<Created> = match self.b.create_tasks(news, now) {
            Ok(cs) => cs.into_iter().map(|c| self.adopt(c)).collect(),
            Err(e) => panic!("{}: {step}: {}", self.store(), chain(&e)),
        };
        self.log.push(format!("{step}: {created:?}"));
        created.into_iter().map(|c| c.id).collect()
    }

    fn running(&mut self, step: &str, id: &str) -> RunningTask {
        let all = self.ok(step, self.b.running_tasks());
        all.into_iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{}: {step}: {id} is not running", self.store()))
    }
}

fn new_task(title: &str) -> NewTask {
    NewTask {
        title: title.to_owned(),
        ..NewTask::default()
    }
}

fn child(title: &str, parents: &[&str]) -> NewTask {
    NewTask {
        parents: parents.iter().map(|p| p.to_string()).collect(),
        ..new_task(title)
    }
}

/// The scripted day (see the module docs); returns the transcript.
fn script(b: &Board) -> Vec<String> {
    let mut s = Script::new(b);

    // ---- create: plain, with every field, idempotent, with parents, triage, blocked, a batch.
    let alpha = s.create("create plain", &new_task("alpha"), t(1));
    let full = NewTask {
        title: "  beta \u{2713}  ".into(),
        body: Some("line one\nline two \"quoted\" \\ ünïcode".into()),
        assignee: Some(" Coder ".into()),
        priority: 5,
        idempotency_key: Some(" key-1 ".into()),
        max_runtime_seconds: Some(600),
        created_by: Some("operator".into()),
        tenant: Some("acme".into()),
        max_retries: Some(3),
        skills: Some(vec!["rust".into(), "sql \"quoted\"".into()]),
        workspace: kanban_runtime::board::WorkspaceSpec {
            branch: Some("feat/beta".into()),
            ..Default::default()
        },
        goal_mode: true,
        goal_max_turns: Some(4),
        ..NewTask::default()
    };
    let beta = s.create("create with every field", &full, t(2));
    let again = NewTask {
        idempotency_key: Some("key-1".into()),
        ..new_task("beta again")
    };
    assert_eq!(s.create("create with a used key", &again, t(3)), beta);
    let p1 = NewTask {
        tenant: Some("acme-p".into()),
        assignee: Some("planner".into()),
        ..new_task("parent one")
    };
    let p1 = s.create("create parent one", &p1, t(4));
    let p2 = s.create("create parent two", &new_task("parent two"), t(5));
    // Unsorted, with a duplicate; created by a task (a worker's create); tenant inherited.
    let c = NewTask {
        created_by: Some(p1.clone()),
        ..child("child of both", &[&p2, &p1, &p2])
    };
    let c = s.create("create a child of two parents", &c, t(6));
    let d1 = s.create("create child d1", &child("d1", &[&p2]), t(7));
    let d2 = NewTask {
        assignee: Some("coder".into()),
        ..child("d2", &[&p2])
    };
    let d2 = s.create("create child d2", &d2, t(8));
    let triage = NewTask {
        triage: true,
        ..new_task("triage me")
    };
    let tr = s.create("create in triage", &triage, t(9));
    let blocked = NewTask {
        blocked: true,
        created_by: Some("ops".into()),
        ..new_task("blocked at birth")
    };
    let bl = s.create("create blocked", &blocked, t(10));
    let x = s.create_all(
        "create a batch",
        &[new_task("x one"), child("x two", &[&p1])],
        t(11),
    );
    let (x1, x2) = (x[0].clone(), x[1].clone());
    let review = NewTask {
        assignee: Some("coder".into()),
        ..new_task("review me")
    };
    let rv = s.create("create for review", &review, t(12));
    s.error("create blank", b.create_task(&new_task("   "), t(13)));
    s.error(
        "create under an unknown parent",
        b.create_task(&child("orphan", &[NO_SUCH_TASK]), t(13)),
    );
    let both = NewTask {
        triage: true,
        blocked: true,
        ..new_task("both")
    };
    s.error("create triage and blocked", b.create_task(&both, t(13)));
    let zero = NewTask {
        max_runtime_seconds: Some(0),
        ..new_task("zero runtime")
    };
    s.error("create with a zero runtime", b.create_task(&zero, t(13)));

    // ---- claim and its refusals.
    let a_run = s.claimed("claim alpha", b.claim(&alpha, &lease(HOST_A, 900), t(20)));
    s.lost(
        "claim alpha again",
        b.claim(&alpha, &lease(HOST_B, 900), t(21)),
    );
    s.lost(
        "claim a todo child",
        b.claim(&c, &lease(HOST_B, 900), t(21)),
    );
    s.lost(
        "claim_review of a ready task",
        b.claim_review(&beta, &lease(HOST_B, 900), t(21)),
    );
    s.error(
        "claim an unknown task",
        b.claim(NO_SUCH_TASK, &lease(HOST_B, 900), t(21)),
    );
    s.error(
        "claim with a zero ttl",
        b.claim(&beta, &lease(HOST_B, 0), t(21)),
    );

    // ---- heartbeat and its refusals.
    s.done(
        "heartbeat",
        b.heartbeat(&alpha, &fence(HOST_A, a_run), None, 900, t(30)),
    );
    s.done(
        "heartbeat with a note",
        b.heartbeat(
            &alpha,
            &fence(HOST_A, a_run),
            Some("  compiling \u{2713} \"x\"  "),
            600,
            t(40),
        ),
    );
    s.done(
        "heartbeat of an operator with a blank note",
        b.heartbeat(&alpha, &Fence::default(), Some("   "), 900, t(45)),
    );
    s.refused(
        "heartbeat of a stale run",
        b.heartbeat(&alpha, &fence(HOST_A, a_run + 100), None, 900, t(46)),
    );
    s.refused(
        "heartbeat of another lock",
        b.heartbeat(&alpha, &fence(HOST_B, a_run), None, 900, t(46)),
    );
    s.refused(
        "heartbeat of a ready task",
        b.heartbeat(&beta, &Fence::default(), None, 900, t(46)),
    );
    s.error(
        "heartbeat with a zero ttl",
        b.heartbeat(&alpha, &fence(HOST_A, a_run), None, 0, t(46)),
    );
    s.error(
        "heartbeat of an unknown task",
        b.heartbeat(NO_SUCH_TASK, &Fence::default(), None, 900, t(46)),
    );

    // ---- comments (one on a running task: its event names the run).
    s.ok(
        "comment on a running task",
        b.comment(&alpha, "  reviewer  ", "looks fine\nsecond \"line\"", t(47)),
    );
    s.ok(
        "comment without an author",
        b.comment(&beta, " ", "by nobody", t(47)),
    );
    s.error("comment blank", b.comment(&alpha, "x", "   ", t(48)));
    s.error(
        "comment on an unknown task",
        b.comment(NO_SUCH_TASK, "x", "y", t(48)),
    );

    // ---- complete: live claim, stale run, with run id + summary + result, done, todo.
    s.refused(
        "complete under a live claim",
        b.complete(&alpha, &Completion::default(), t(50)),
    );
    s.refused(
        "complete with a stale run",
        b.complete(&alpha, &completion(Some(a_run + 100), None, None), t(50)),
    );
    s.done(
        "complete with run, summary and result",
        b.complete(
            &alpha,
            &completion(
                Some(a_run),
                Some("  all done \u{2713}\nsecond line"),
                Some("result \"text\"\nü"),
            ),
            t(60),
        ),
    );
    s.refused(
        "complete a done task",
        b.complete(&alpha, &Completion::default(), t(61)),
    );
    s.refused(
        "complete a todo task",
        b.complete(&c, &Completion::default(), t(61)),
    );
    s.error(
        "complete an unknown task",
        b.complete(NO_SUCH_TASK, &Completion::default(), t(61)),
    );

    // ---- links: a blocked task gains two parents; complete refuses it (parents not done).
    s.done("link p1 -> blocked", b.link(&p1, &bl, t(62)));
    s.done("link p2 -> blocked", b.link(&p2, &bl, t(63)));
    s.done("link p1 -> blocked again", b.link(&p1, &bl, t(63)));
    s.error("link to itself", b.link(&alpha, &alpha, t(63)));
    s.error("link into a cycle", b.link(&bl, &p1, t(63)));
    s.refused(
        "complete under unfinished parents",
        b.complete(&bl, &Completion::default(), t(64)),
    );

    // ---- claim_batch: won, lost (done, todo, triage for review), failed (unknown).
    let picks = vec![
        (beta.clone(), Status::Ready),
        (p1.clone(), Status::Ready),
        (alpha.clone(), Status::Ready),
        (NO_SUCH_TASK.to_owned(), Status::Ready),
        (c.clone(), Status::Ready),
        (tr.clone(), Status::Review),
    ];
    let batch = s.ok(
        "claim_batch",
        b.claim_batch(&picks, &lease(HOST_B, 300), t(70)),
    );
    let run_of = |o: &Result<ClaimOutcome>| match o {
        Ok(ClaimOutcome::Claimed(c)) => c.run_id,
        other => panic!("{}: claim_batch: {other:?}", store_name(b)),
    };
    let (beta_run, p1_run) = (run_of(&batch[0]), run_of(&batch[1]));
    assert!(matches!(batch[2], Ok(ClaimOutcome::Lost(_))));
    assert!(batch[3].is_err());
    assert!(matches!(batch[4], Ok(ClaimOutcome::Lost(_))));
    assert!(matches!(batch[5], Ok(ClaimOutcome::Lost(_))));
    s.ok(
        "claim_batch of nothing",
        b.claim_batch(&[], &lease(HOST_B, 300), t(71)),
    );
    s.error(
        "claim_batch with a zero ttl",
        b.claim_batch(&picks, &lease(HOST_B, 0), t(71)),
    );

    // ---- forced completion; completion by run id that promotes one child (x two).
    let forced = Completion {
        force: true,
        result: Some("forced result".into()),
        ..Completion::default()
    };
    s.done("complete forced", b.complete(&beta, &forced, t(80)));
    s.refused(
        "heartbeat of the forced-out run",
        b.heartbeat(&beta, &fence(HOST_B, beta_run), None, 900, t(81)),
    );
    s.done(
        "complete parent one (promotes x two)",
        b.complete(&p1, &completion(Some(p1_run), Some("p1 done"), None), t(90)),
    );

    // ---- a claim expires; completing after it needs no force and promotes three children.
    let p2_run = s.claimed("claim parent two", b.claim(&p2, &lease(HOST_A, 60), t(100)));
    s.done(
        "heartbeat parent two",
        b.heartbeat(&p2, &fence(HOST_A, p2_run), Some("almost"), 60, t(110)),
    );
    s.done(
        "complete after the claim expired",
        b.complete(&p2, &Completion::default(), t(200)),
    );
    s.done(
        "complete a never-claimed task with a result",
        b.complete(&x1, &completion(None, None, Some("x1 result")), t(201)),
    );
    s.done(
        "complete a never-claimed task with nothing",
        b.complete(&x2, &Completion::default(), t(202)),
    );

    // ---- reopen: parent two goes back, its done/ready descendants wait again.
    s.done(
        "reopen parent two",
        b.reopen(&p2, Some("  redo it  "), t(210)),
    );
    s.refused("reopen a ready task", b.reopen(&p2, None, t(211)));
    // Forced to ready behind the board's back (the same SQL on both stores): the claim's
    // parent gate sends it back to todo with `claim_rejected`.
    tamper::set_status(b, &d1, "ready");
    s.lost(
        "claim under an unfinished parent",
        b.claim(&d1, &lease(HOST_A, 900), t(212)),
    );

    // ---- parent two again, with spawn, registration and a turn; completion promotes three.
    let p2_run = s.claimed(
        "claim parent two again",
        b.claim(&p2, &lease(HOST_B, 900), t(300)),
    );
    s.done(
        "record spawn",
        b.record_spawn(&p2, p2_run, HOST_B, 4242, "boot-b|77", t(301)),
    );
    s.done(
        "register worker",
        b.register_worker(&p2, p2_run, HOST_B, 4242, "boot-b|77", t(302)),
    );
    s.refused(
        "register another worker",
        b.register_worker(&p2, p2_run, HOST_B, 4343, "boot-b|78", t(302)),
    );
    let turn = Event::Turn {
        turn: 1,
        kind: TurnKind::First,
        exit: "ok".into(),
        exit_code: 0,
        seconds: 3,
    };
    s.done(
        "record a turn",
        b.record_turn(&p2, p2_run, HOST_B, &turn, t(303)),
    );
    s.done(
        "complete parent two (promotes three)",
        b.complete(&p2, &completion(Some(p2_run), None, Some("again")), t(310)),
    );
    s.ok(
        "worker result",
        b.record_worker_result(
            &WorkerResult {
                task_id: &p2,
                run_id: Some(p2_run),
                pid: 4242,
                claim_lock: Some(HOST_B),
                exit_code: 0,
                last_output: Some("bye \"all\"\n"),
            },
            t(311),
        ),
    );

    // ---- block and unblock.
    let d2_run = s.claimed("claim d2", b.claim(&d2, &lease(HOST_A, 900), t(400)));
    s.refused(
        "block with a stale run",
        b.block(
            &d2,
            Some(BlockKind::NeedsInput),
            "x",
            Some(d2_run + 100),
            t(405),
        ),
    );
    s.error(
        "block with a blank reason",
        b.block(&d2, Some(BlockKind::NeedsInput), "   ", None, t(405)),
    );
    s.done(
        "block a running task",
        b.block(
            &d2,
            Some(BlockKind::NeedsInput),
            "  need the api key  ",
            Some(d2_run),
            t(410),
        ),
    );
    s.refused(
        "block a blocked task",
        b.block(&d2, Some(BlockKind::NeedsInput), "again", None, t(411)),
    );
    s.done("unblock", b.unblock(&d2, t(420)));
    s.refused("unblock a ready task", b.unblock(&d2, t(421)));
    s.done(
        "block the same kind again (triage)",
        b.block(
            &d2,
            Some(BlockKind::NeedsInput),
            "still no key",
            None,
            t(430),
        ),
    );
    s.done(
        "dependency block without an open parent",
        b.block(&d1, Some(BlockKind::Dependency), "waits", None, t(440)),
    );
    s.done("unblock the rekinded block", b.unblock(&d1, t(441)));
    s.done("unblock blocked at birth", b.unblock(&bl, t(442)));

    // ---- reclaim (operator) and the dispatcher's release paths.
    let c_run = s.claimed("claim c", b.claim(&c, &lease(HOST_A, 900), t(450)));
    s.refused("link to a running child", b.link(&rv, &c, t(451)));
    s.refused(
        "assign a running task",
        b.assign(&c, Some("someone"), t(451)),
    );
    s.done("reclaim", b.reclaim(&c, Some("  operator says  "), t(460)));
    s.refused("reclaim a ready task", b.reclaim(&c, None, t(461)));
    let c_run2 = s.claimed("claim c again", b.claim(&c, &lease(HOST_B, 900), t(470)));
    assert!(c_run2 > c_run);
    s.done(
        "record spawn of c",
        b.record_spawn(&c, c_run2, HOST_B, 5151, "boot-b|51", t(471)),
    );
    let seen = s.running("running tasks (c)", &c);
    s.done("extend claim", b.extend_claim(&seen, t(2000), t(480)));
    s.refused(
        "extend claim on a stale sight",
        b.extend_claim(&seen, t(2100), t(481)),
    );
    let seen = s.running("running tasks (c, extended)", &c);
    let termination = Termination {
        prev_pid: Some(5151),
        host_local: true,
        termination_attempted: true,
        terminated: false,
        sigkill: true,
        signal_refused: None,
        pid_recycled: Some(false),
    };
    s.done(
        "defer reclaim",
        b.defer_reclaim(&seen, t(2100), "survived", termination.clone(), t(490)),
    );
    s.refused(
        "release by another claimer",
        b.release_claim(&c, &crashed(HOST_A, c_run2, Failure::NotCounted), t(495)),
    );
    let counted = Failure::Counted {
        limit: 2,
        source: "dispatcher",
    };
    s.done(
        "release counted",
        b.release_claim(&c, &crashed(HOST_B, c_run2, counted), t(500)),
    );
    let c_run3 = s.claimed(
        "claim c a third time",
        b.claim(&c, &lease(HOST_B, 900), t(510)),
    );
    s.done(
        "release counted to the limit (gave up)",
        b.release_claim(&c, &crashed(HOST_B, c_run3, counted), t(520)),
    );
    s.done(
        "promote from triage",
        b.promote(&tr, Some("ops"), Some("looked at it"), t(530)),
    );
    s.refused("promote a ready task", b.promote(&tr, None, None, t(531)));
    // A dispatcher's claim: only those are released as abandoned.
    let dispatched = ClaimSpec {
        origin: kanban_runtime::board::ClaimOrigin::Dispatcher,
        ..lease(HOST_A, 900)
    };
    let tr_run = s.claimed("claim tr", b.claim(&tr, &dispatched, t(540)));
    let seen = s.running("running tasks (tr)", &tr);
    assert_eq!(seen.run_id, Some(tr_run));
    s.done(
        "release an unstarted claim",
        b.release_unstarted_claim(
            &seen,
            &Abandonment {
                reason: AbandonReason::ClaimerGone,
                claimer_pid: Some(101),
                grace_seconds: 30,
            },
            t(600),
        ),
    );
    s.claimed("claim tr again", b.claim(&tr, &lease(HOST_A, 900), t(610)));
    // A running task whose claim lock vanished (the same SQL on both stores): an orphan.
    tamper::clear_claim_lock(b, &tr);
    let seen = s.running("running tasks (orphan)", &tr);
    s.done("reconcile an orphan", b.reconcile_orphan(&seen, t(620)));
    let tr_run = s.claimed(
        "claim tr a third time",
        b.claim(&tr, &lease(HOST_A, 900), t(630)),
    );
    let stale = Release {
        claim_lock: Some(HOST_A),
        run_id: Some(tr_run),
        outcome: "stale",
        event: Event::Stale {
            elapsed_seconds: 1000,
            last_heartbeat_at: Some(t(630)),
            heartbeat_age_seconds: Some(1000),
            timeout_seconds: 900,
            pid: None,
            retry_status: Status::Ready,
            termination: Some(termination.clone()),
        },
        failure: Failure::Trip {
            limit: 5,
            source: "task",
        },
        error: "heartbeat stale for 1000s".into(),
    };
    s.done("release tripped", b.release_claim(&tr, &stale, t(640)));
    s.ok(
        "note nonspawnable",
        b.note_nonspawnable(&d1, "ghost-profile", t(650)),
    );
    s.ok(
        "note respawn guarded",
        b.note_respawn_guarded(&d1, "pr already open", t(651)),
    );

    // ---- the review lane.
    let rv_run = s.claimed(
        "claim for review",
        b.claim(&rv, &lease(HOST_A, 900), t(700)),
    );
    s.refused(
        "request review under a live claim",
        b.request_review(&rv, None, None, None, t(705)),
    );
    s.refused(
        "request review with a stale run",
        b.request_review(&rv, Some(rv_run + 100), None, None, t(705)),
    );
    s.done(
        "request review",
        b.request_review(
            &rv,
            Some(rv_run),
            Some(" Reviewer "),
            Some("  please look \nat the tests"),
            t(710),
        ),
    );
    s.lost(
        "claim a review task from ready",
        b.claim(&rv, &lease(HOST_B, 900), t(715)),
    );
    let review_run = s.claimed(
        "claim_review",
        b.claim_review(&rv, &lease(HOST_B, 900), t(720)),
    );
    s.done(
        "heartbeat the reviewer",
        b.heartbeat(
            &rv,
            &fence(HOST_B, review_run),
            Some("reading"),
            900,
            t(725),
        ),
    );
    s.done(
        "request changes",
        b.request_changes(&rv, Some(review_run), "  fix the tests  ", t(730)),
    );
    s.refused(
        "request changes of a ready task",
        b.request_changes(&rv, None, "again", t(731)),
    );
    s.done(
        "request review of an unclaimed task",
        b.request_review(&rv, None, None, None, t(740)),
    );
    s.done("review reopen", b.review_reopen(&rv, t(750)));
    s.refused(
        "review reopen of a ready task",
        b.review_reopen(&rv, t(751)),
    );
    s.done(
        "request review once more",
        b.request_review(&rv, None, Some("reviewer"), Some("third"), t(760)),
    );
    let lane = s.ok(
        "claim_batch of the review lane",
        b.claim_batch(&[(rv.clone(), Status::Review)], &lease(HOST_A, 900), t(770)),
    );
    let lane_run = run_of(&lane[0]);
    let not_counted = Release {
        claim_lock: Some(HOST_A),
        run_id: Some(lane_run),
        outcome: "reclaimed",
        event: Event::Reclaimed {
            manual: None,
            reason: None,
            prev_lock: None,
            stale_lock: Some(HOST_A.into()),
            worker_pid: None,
            claim_expires: Some(t(1670)),
            last_heartbeat_at: Some(t(770)),
            now: Some(t(780)),
            heartbeat_stale: Some(false),
            retry_status: Status::Ready,
            actor: None,
            termination: None,
        },
        failure: Failure::NotCounted,
        error: "reclaimed".into(),
    };
    s.done(
        "release a reviewer run (back to review)",
        b.release_claim(&rv, &not_counted, t(780)),
    );
    s.done(
        "complete a review task",
        b.complete(&rv, &completion(None, Some("approved"), None), t(790)),
    );

    // ---- archive, assign, edit, unlink, recompute, a reopen that closes a running run.
    let g = s.create("create g", &new_task("g"), t(800));
    let h = s.create("create h under g", &child("h", &[&g]), t(801));
    let g_run = s.claimed("claim g", b.claim(&g, &lease(HOST_A, 900), t(802)));
    s.done(
        "record spawn of g",
        b.record_spawn(&g, g_run, HOST_A, 6161, "boot-a|61", t(803)),
    );
    s.done("archive a running task", b.archive(&g, t(810)));
    s.refused("archive an archived task", b.archive(&g, t(811)));
    s.done("archive a done task", b.archive(&beta, t(812)));
    let beta2 = s.create("create with an archived task's key", &again, t(813));
    assert_ne!(beta2, beta);
    s.done("assign", b.assign(&h, Some(" Writer "), t(820)));
    s.done("assign nobody", b.assign(&h, None, t(821)));
    s.error("assign blank", b.assign(&h, Some("  "), t(821)));
    let edit = Edit {
        title: Some("h renamed".into()),
        body: Some("new body".into()),
        priority: Some(7),
        max_retries: Some(9),
        workspace: None,
        clear_skills: false,
    };
    s.done("edit", b.edit(&h, &edit, t(822)));
    s.error("edit nothing", b.edit(&h, &Edit::default(), t(823)));
    s.done("unlink", b.unlink(&p1, &bl, t(830)));
    s.refused("unlink again", b.unlink(&p1, &bl, t(831)));
    s.ok("recompute ready", b.recompute_ready(t(832)));
    let k = s.create("create k", &new_task("k"), t(840));
    let l = s.create("create l under k", &child("l", &[&k]), t(841));
    let m = s.create("create m under l", &child("m", &[&l]), t(842));
    s.done("complete k", b.complete(&k, &Completion::default(), t(843)));
    let l_run = s.claimed("claim l", b.claim(&l, &lease(HOST_B, 900), t(844)));
    s.refused(
        "complete a todo task under a running parent",
        b.complete(&m, &Completion::default(), t(845)),
    );
    s.done(
        "reopen with a running descendant",
        b.reopen(&k, None, t(850)),
    );
    s.ok(
        "superseded worker",
        b.record_superseded_worker(
            &l,
            l_run,
            &Event::WorkerSuperseded {
                pid: 7171,
                outcome: Some("reclaimed".into()),
                current_run_id: None,
                termination,
            },
            t(851),
        ),
    );
    s.ok(
        "complete many",
        b.complete_many(
            &[k.clone(), alpha.clone(), l.clone()],
            &completion(None, Some("bulk"), None),
            t(860),
        ),
    );

    // ---- the sentinel: one more row in every id-numbered table (see the module docs).
    let z = s.create("create the sentinel", &new_task("sentinel"), t(900));
    let z_run = s.claimed(
        "claim the sentinel",
        b.claim(&z, &lease(HOST_A, 900), t(901)),
    );
    s.ok(
        "comment on the sentinel",
        b.comment(&z, "me", "last", t(902)),
    );
    // Attachments: rows naming files where they are (no blob is written, so both stores record
    // the same paths), one of them removed again.
    let refs = Artifacts {
        staged: ["spec.md", "notes.md"]
            .map(|name| Artifact {
                filename: name.into(),
                stored_path: std::path::PathBuf::from(format!("/nonexistent/{name}")),
                size: 3,
                copied: false,
            })
            .to_vec(),
    };
    let board_err = |e: AttachmentError| match e {
        AttachmentError::Board(e) => e,
        other => panic!("{other}"),
    };
    s.ok(
        "attach to the sentinel",
        refs.record(b, &z, t(902)).map_err(board_err),
    );
    s.ok(
        "remove an attachment of the sentinel",
        b.remove_attachment(&z, std::path::Path::new("/nonexistent"), "spec.md", t(902))
            .map_err(board_err),
    );
    s.ok("attachments of the sentinel", b.attachments(&z));
    s.done(
        "heartbeat the sentinel",
        b.heartbeat(&z, &fence(HOST_A, z_run), None, 900, t(903)),
    );

    // ---- what the reads answer afterwards.
    let ids: Vec<String> = (1..=s.created).map(|n| format!("t_{n:08x}")).collect();
    for id in &ids {
        s.ok(&format!("get {id}"), b.get_task(id));
        s.ok(&format!("runs of {id}"), b.runs(id));
        s.ok(&format!("events of {id}"), b.events(id, None));
        s.ok(&format!("comments of {id}"), b.comments(id));
        s.ok(&format!("parents of {id}"), b.parents(id));
        s.ok(&format!("children of {id}"), b.children(id));
    }
    let every = TaskFilter {
        include_archived: true,
        ..TaskFilter::default()
    };
    s.ok("list tasks", b.list_tasks(&every));
    s.ok("board cards", b.board_cards(true));
    s.ok("status counts", b.status_counts());
    s.ok("running tasks", b.running_tasks());
    s.ok("workload", b.workload(t(904), 60));
    s.ok("fsck", b.fsck_at(t(905)));
    // ---- the dispatchers' recorded ticks: two dispatchers, one re-records, one stops.
    s.ok("record a tick", b.record_tick("host-a:11", 5, t(906)));
    s.ok("record another", b.record_tick("host-b:22", 60, t(907)));
    s.ok("record again", b.record_tick("host-a:11", 5, t(908)));
    s.ok("record a stop", b.record_stop("host-b:22", t(909)));
    s.ok("dispatcher ticks", b.dispatcher_ticks());
    s.log
}

// ---------------------------------------------------------------- the tests

#[test]
fn sqlite_and_postgres_write_the_same_rows_and_answer_the_same() {
    let (_sqlite_dir, sqlite) = SqliteStore.board();
    let (_postgres_dir, postgres) = PostgresStore.board();
    // The same tables and columns (PostgreSQL's `tasks.rowid` is SQLite's implicit rowid).
    let shape = |b: &Board| {
        catalog(b)
            .iter()
            .map(|t| (t.name.clone(), dump_columns(t)))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&sqlite), shape(&postgres));
    let s_log = script(&sqlite);
    let p_log = script(&postgres);
    let (s_dump, p_dump) = (dump(&sqlite), dump(&postgres));
    // Not vacuous: every table has rows (task_links included).
    for (table, (_, rows)) in &s_dump {
        assert!(!rows.is_empty(), "the script wrote no row of {table}");
    }
    assert_none(&[
        ("the rows they wrote", differences(&s_dump, &p_dump)),
        (
            "what the API returned",
            transcript_differences(&s_log, &p_log),
        ),
    ]);
}

/// The comparison itself: the script is deterministic (two SQLite boards agree), and one byte
/// changed in one board is reported, naming its table, row and column.
#[test]
fn the_comparison_reports_one_changed_byte() {
    let (_d1, one) = SqliteStore.board();
    let (_d2, two) = SqliteStore.board();
    assert_eq!(script(&one), script(&two));
    let before = dump(&one);
    assert_none(&[("two runs on SQLite", differences(&before, &dump(&two)))]);
    sql(&two)
        .execute(
            "UPDATE task_events SET payload = replace(payload, '\"expires\":', '\"expires\" :') \
             WHERE id = (SELECT MIN(id) FROM task_events WHERE kind = 'claimed')",
            &[],
        )
        .unwrap();
    let found = differences(&before, &dump(&two));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("task_events row ") && found[0].contains("column payload"),
        "{found:?}"
    );
}
