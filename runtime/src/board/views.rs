//! Reads shaped for whole-board views (`kanban serve`): every task with its attempt count and,
//! for a blocked task, why; the tasks the failure breaker gave up on. One statement each, so a
//! 10 000-task board page costs one query rather than one per card.

use super::error::Result;
use super::model::{TASK_COLUMNS, Task, TaskRef};
use super::sql;
use super::store::Board;

/// A task as a board card shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BoardCard {
    pub task: Task,
    /// Runs the task has had (open or closed).
    pub attempts: i64,
    /// For a blocked task: the reason of its latest `blocked` event, else the error of its latest
    /// `gave_up` event, else its last failure error.
    pub block_reason: Option<String>,
}

impl Board {
    /// Every task (archived ones only with `include_archived`) in [`Board::list_tasks`] order,
    /// with its attempt count and block reason.
    pub fn board_cards(&self, include_archived: bool) -> Result<Vec<BoardCard>> {
        let filter = if include_archived {
            ""
        } else {
            "WHERE t.status != 'archived'"
        };
        self.cards(filter, &[])
    }

    /// One task as a card, or [`super::BoardError::TaskNotFound`].
    pub fn task_card(&self, id: &str) -> Result<BoardCard> {
        self.cards("WHERE t.id = ?1", &[id])?
            .pop()
            .ok_or_else(|| super::BoardError::TaskNotFound { id: id.to_owned() })
    }

    fn cards(&self, filter: &str, args: &[&str]) -> Result<Vec<BoardCard>> {
        let columns = TASK_COLUMNS
            .split(", ")
            .map(|c| format!("t.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns}, \
               (SELECT COUNT(*) FROM task_runs r WHERE r.task_id = t.id), \
               CASE WHEN t.status = 'blocked' THEN \
                 (SELECT e.kind || ' ' || COALESCE(e.payload, '') FROM task_events e \
                  WHERE e.task_id = t.id AND e.kind IN ('blocked', 'gave_up') \
                  ORDER BY e.id DESC LIMIT 1) END \
             FROM tasks t {filter} ORDER BY t.priority DESC, t.created_at ASC, t.rowid ASC"
        );
        let width = TASK_COLUMNS.split(", ").count();
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(sql::params_from_iter(args.iter()), |r| {
            let task = Task::from_row(r)?;
            let attempts: i64 = r.get(width)?;
            let latest: Option<String> = r.get(width + 1)?;
            Ok((task, attempts, latest))
        })?;
        let mut cards = Vec::new();
        for row in rows {
            let (task, attempts, latest) = row?;
            let block_reason = latest
                .as_deref()
                .and_then(reason_of)
                .or_else(|| {
                    (task.status == super::model::Status::Blocked)
                        .then(|| task.last_failure_error.clone())
                        .flatten()
                })
                .filter(|r| !r.trim().is_empty());
            cards.push(BoardCard {
                task,
                attempts,
                block_reason,
            });
        }
        Ok(cards)
    }

    /// Blocked tasks whose latest `blocked` / `gave_up` event is `gave_up`: the failure breaker
    /// stopped retrying them and they wait for an operator.
    pub fn given_up_tasks(&self) -> Result<Vec<TaskRef>> {
        let mut stmt = self.conn().prepare(
            "SELECT t.id, t.title, t.status FROM tasks t WHERE t.status = 'blocked' AND \
               (SELECT e.kind FROM task_events e WHERE e.task_id = t.id \
                AND e.kind IN ('blocked', 'gave_up') ORDER BY e.id DESC LIMIT 1) = 'gave_up' \
             ORDER BY t.created_at, t.rowid",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, title, status) = row?;
            out.push(TaskRef {
                id,
                title,
                status: status.parse()?,
            });
        }
        Ok(out)
    }
}

/// `"<kind> <payload JSON>"` → the human reason it carries.
fn reason_of(latest: &str) -> Option<String> {
    let (kind, payload) = latest.split_once(' ')?;
    let value: serde_json::Value = serde_json::from_str(payload).ok()?;
    let field = if kind == "gave_up" { "error" } else { "reason" };
    value.get(field)?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::super::{Board, NewTask, OpenOptions};

    fn board() -> (tempfile::TempDir, Board) {
        let dir = tempfile::tempdir().expect("tempdir");
        let board =
            Board::open_path(&dir.path().join("kanban.db"), &OpenOptions::create()).expect("open");
        (dir, board)
    }

    fn task(board: &Board, title: &str) -> String {
        let new = NewTask {
            title: title.to_owned(),
            ..NewTask::default()
        };
        board.create_task(&new, 100).expect("create").id
    }

    #[test]
    fn board_cards_count_attempts_and_carry_the_block_reason() {
        let (_dir, board) = board();
        let blocked = task(&board, "blocked one");
        let plain = task(&board, "plain");
        let archived = task(&board, "archived");
        board
            .block(&blocked, None, "waiting for the API key", None, 101)
            .expect("block")
            .into_result()
            .expect("blocked");
        board.archive(&archived, 102).expect("archive");
        let cards = board.board_cards(false).expect("cards");
        let ids: Vec<&str> = cards.iter().map(|c| c.task.id.as_str()).collect();
        assert_eq!(ids, [blocked.as_str(), plain.as_str()]);
        assert_eq!(
            cards[0].block_reason.as_deref(),
            Some("waiting for the API key")
        );
        assert_eq!(cards[1].block_reason, None);
        assert_eq!(
            cards[0].attempts,
            board.runs(&blocked).expect("runs").len() as i64
        );
        assert_eq!(cards[1].attempts, 0);
        assert_eq!(board.board_cards(true).expect("all").len(), 3);
        let one = board.task_card(&blocked).expect("card");
        assert_eq!(one, cards[0]);
        assert!(matches!(
            board.task_card("t_00000000"),
            Err(super::super::BoardError::TaskNotFound { .. })
        ));
        assert!(board.given_up_tasks().expect("given up").is_empty());
    }

    #[test]
    fn given_up_tasks_are_the_blocked_ones_whose_latest_block_is_a_give_up() {
        use super::super::StoredEvent;
        use super::super::events::append_event;
        let (_dir, board) = board();
        let gave_up = task(&board, "failed twice");
        let merely_blocked = task(&board, "needs input");
        for id in [&gave_up, &merely_blocked] {
            board
                .block(id, None, "stop", None, 101)
                .expect("block")
                .into_result()
                .expect("blocked");
        }
        // Built from its stored form, as the breaker writes it.
        let gave_up_event = StoredEvent {
            id: 0,
            task_id: gave_up.clone(),
            run_id: None,
            kind: "gave_up".to_owned(),
            payload: Some(serde_json::json!({
                "failures": 2, "effective_limit": 2, "limit_source": "config",
                "error": "agent crashed", "trigger_outcome": "crashed", "retry_status": null,
            })),
            created_at: 102,
        }
        .decode()
        .expect("a gave_up event");
        board
            .write(|tx| append_event(tx, &gave_up, None, &gave_up_event, 102))
            .expect("event");
        let ids: Vec<String> = board
            .given_up_tasks()
            .expect("given up")
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, std::slice::from_ref(&gave_up));
        let card = board.task_card(&gave_up).expect("card");
        assert_eq!(card.block_reason.as_deref(), Some("agent crashed"));
    }
}
