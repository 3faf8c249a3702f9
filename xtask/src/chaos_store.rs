//! The chaos run's own view of the board it checks, on either store: a SQLite file (rusqlite)
//! or a PostgreSQL database (kanban-pgwire). It reads what the run samples and checks (run rows,
//! statuses, events), holds the board's lock for the locked-board fault, and checks integrity;
//! it never writes a row. Statements are written once with `?N` placeholders (PostgreSQL gets
//! `$N`); the one that reads JSON is spelled per engine.

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use kanban_pgwire::{Client, Value};

/// A statement parameter.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

/// A column value as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
}

impl Cell {
    pub fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(i) => Some(*i),
            Cell::Text(t) => t.parse().ok(),
            Cell::Null => None,
        }
    }

    pub fn text(&self) -> Option<String> {
        match self {
            Cell::Text(t) => Some(t.clone()),
            Cell::Int(i) => Some(i.to_string()),
            Cell::Null => None,
        }
    }
}

pub enum Store {
    Sqlite(rusqlite::Connection),
    /// A `RefCell`: the client needs `&mut` for a read, the run passes the store by `&`
    /// (boxed: the client is far larger than a SQLite connection).
    Postgres(Box<RefCell<Client>>),
}

impl Store {
    pub fn sqlite(db: &Path) -> anyhow::Result<Store> {
        let conn = rusqlite::Connection::open(db)
            .with_context(|| format!("cannot open {}", db.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        Ok(Store::Sqlite(conn))
    }

    pub fn postgres(url: &str) -> anyhow::Result<Store> {
        let config = kanban_pgwire::Config::parse(url).context("the chaos board's URL")?;
        let client = Client::connect(&config).context("cannot connect to the chaos board")?;
        Ok(Store::Postgres(Box::new(RefCell::new(client))))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// Every row of `sql`.
    pub fn rows(&self, sql: &str, params: &[Param<'_>]) -> anyhow::Result<Vec<Vec<Cell>>> {
        match self {
            Store::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let width = stmt.column_count();
                let values: Vec<rusqlite::types::Value> = params
                    .iter()
                    .map(|p| match p {
                        Param::Text(t) => rusqlite::types::Value::Text((*t).to_owned()),
                        Param::Int(i) => rusqlite::types::Value::Integer(*i),
                    })
                    .collect();
                let rows = stmt.query_map(rusqlite::params_from_iter(values), |r| {
                    (0..width)
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                rusqlite::types::ValueRef::Integer(n) => Cell::Int(n),
                                rusqlite::types::ValueRef::Null => Cell::Null,
                                other => Cell::Text(
                                    String::from_utf8_lossy(other.as_bytes().unwrap_or_default())
                                        .into_owned(),
                                ),
                            })
                        })
                        .collect::<rusqlite::Result<Vec<Cell>>>()
                })?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            }
            Store::Postgres(client) => {
                let values: Vec<Value> = params
                    .iter()
                    .map(|p| match p {
                        Param::Text(t) => Value::Text((*t).to_owned()),
                        Param::Int(i) => Value::Int(*i),
                    })
                    .collect();
                let rows = client
                    .borrow_mut()
                    .query(&dollar_placeholders(sql), &values)
                    .with_context(|| format!("PostgreSQL: {sql}"))?;
                Ok(rows
                    .iter()
                    .map(|row| {
                        row.values()
                            .iter()
                            .map(|v| match v {
                                Value::Null => Cell::Null,
                                Value::Int(i) => Cell::Int(*i),
                                Value::Text(t) => Cell::Text(t.clone()),
                                Value::Real(r) => Cell::Text(r.to_string()),
                                Value::Blob(b) => Cell::Text(String::from_utf8_lossy(b).into()),
                            })
                            .collect()
                    })
                    .collect())
            }
        }
    }

    /// The first column of the first row, if there is a row.
    pub fn value(&self, sql: &str, params: &[Param<'_>]) -> anyhow::Result<Option<Cell>> {
        Ok(self
            .rows(sql, params)?
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next()))
    }

    /// Holds the board's write lock on this connection for `hold`, as a stuck writer would
    /// (use a connection of its own): SQLite's `BEGIN IMMEDIATE`; on PostgreSQL every task row
    /// `FOR UPDATE` (a claim skips a held row, every other transition waits for it up to the
    /// busy timeout).
    pub fn hold_lock(&self, hold: Duration) -> anyhow::Result<()> {
        match self {
            Store::Sqlite(conn) => {
                conn.execute_batch("BEGIN IMMEDIATE")?;
                std::thread::sleep(hold);
                conn.execute_batch("ROLLBACK")?;
            }
            Store::Postgres(client) => {
                let mut client = client.borrow_mut();
                client.batch("BEGIN")?;
                client.query("SELECT id FROM tasks FOR UPDATE", &[])?;
                std::thread::sleep(hold);
                client.batch("ROLLBACK")?;
            }
        }
        Ok(())
    }

    /// SQLite's `PRAGMA integrity_check` (`ok` when sound); PostgreSQL checks its own pages,
    /// so its answer is `n/a`.
    pub fn integrity(&self) -> anyhow::Result<String> {
        match self {
            Store::Sqlite(conn) => {
                let verdict: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
                Ok(verdict)
            }
            Store::Postgres(_) => Ok("n/a (PostgreSQL)".to_owned()),
        }
    }

    /// `sql` with `json_extract(<col>, '$.<key>')` as the engine spells it.
    pub fn json_field(&self, column: &str, key: &str) -> anyhow::Result<String> {
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bail!("a JSON key of the chaos run must be a plain name, not {key:?}");
        }
        Ok(match self {
            Store::Sqlite(_) => format!("json_extract({column}, '$.{key}')"),
            Store::Postgres(_) => format!("(({column})::jsonb ->> '{key}')"),
        })
    }
}

/// `?N` → `$N` (the chaos run's statements have no `?` in a literal).
fn dollar_placeholders(sql: &str) -> String {
    sql.replace('?', "$")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars() {
        assert_eq!(
            dollar_placeholders("SELECT 1 WHERE a = ?1 AND b = ?2"),
            "SELECT 1 WHERE a = $1 AND b = $2"
        );
    }

    #[test]
    fn a_sqlite_store_reads_ints_texts_and_nulls() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::sqlite(&dir.path().join("x.db")).unwrap();
        let Store::Sqlite(conn) = &store else {
            unreachable!()
        };
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x'), (NULL, NULL)",
        )
        .unwrap();
        let rows = store
            .rows("SELECT a, b FROM t ORDER BY a IS NULL", &[])
            .unwrap();
        assert_eq!(rows[0], [Cell::Int(1), Cell::Text("x".into())]);
        assert_eq!(rows[1], [Cell::Null, Cell::Null]);
        assert_eq!(
            store
                .value("SELECT b FROM t WHERE a = ?1", &[Param::Int(1)])
                .unwrap(),
            Some(Cell::Text("x".into()))
        );
        assert!(store.json_field("payload", "a'b").is_err());
    }
}
