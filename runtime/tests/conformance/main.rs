//! The board's conformance suite: every transition, refusal, event and `fsck` rule of
//! [`Board`], written once and run against every store a board can live in.
//!
//! A test here is a plain function taking the store under test (`&dyn Store`); it asks the store
//! for a fresh, empty board ([`Store::board`]) and uses only the board's API, plus the test-only
//! hooks of [`tamper`] where it needs a row the transitions would never write (they go through
//! the SQL layer in its common dialect, so they mean the same on every engine). The one thing no
//! common SQL can say — making one insert fail inside a transaction — is the store's own
//! ([`Store::fail_event_insert`]).
//!
//! [`for_each_conformance_test!`] lists every test; [`conformance_tests!`] instantiates the whole
//! list as `#[test]`s for one store: `sqlite` ([`SqliteStore`], a board file in a temporary
//! folder) and `postgres` ([`PostgresStore`], a fresh database on the test process's shared
//! throwaway cluster), both opened by `Board::open` on a board location, as the CLI opens a board.
//! A test function missing from the list is dead code, which the lints refuse, so none is left
//! out.
//!
//! What is not here is store-specific and stays with its store: for SQLite the file checks,
//! pragmas, journal modes, page size, adoption of the original's board, the busy retry and the
//! file watch (`store`, `schema`, `wake` and the SQLite-only part of `board::tests`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup is a failed test

use std::any::Any;

use kanban_runtime::board::*;
use kanban_runtime::db::target::{BoardLocation, PgTarget};
use kanban_runtime::home as paths;
use kanban_runtime::test_support::{sql, write};

mod admission;
mod atomic;
mod block;
mod claim;
mod complete;
mod create;
mod differential;
mod dispatcher;
mod fsck;
mod graph;
mod links;
mod operator;
mod reads;
mod review;
mod schema;
pub(crate) mod tamper;
mod turns;
mod views;

/// The time the tests start at (epoch seconds); moved by hand.
pub(crate) const T0: i64 = 1_700_000_000;

/// A store a board can live in, as the conformance suite needs it.
pub(crate) trait Store {
    /// A fresh, empty board (created as `Board::open` with [`OpenOptions::create`] does), and
    /// the guard that keeps its storage alive; the board must be dropped before the guard.
    fn board(&self) -> (Guard, Board);

    /// Makes every later insert of a `kind` event for `task` fail with an engine error (inside
    /// whatever transaction runs it), until [`Store::heal`].
    fn fail_event_insert(&self, board: &Board, task: &str, kind: &str);

    /// Undoes [`Store::fail_event_insert`].
    fn heal(&self, board: &Board);
}

/// Opens a test board again.
type Reopen = Box<dyn Fn(&OpenOptions) -> Result<Board>>;

/// Keeps a test board's storage alive, and opens it again.
pub(crate) struct Guard {
    reopen: Reopen,
    _keep: Box<dyn Any>,
}

impl Guard {
    /// A guard that keeps `keep` alive and opens the board with `reopen`.
    pub(crate) fn new(
        keep: impl Any,
        reopen: impl Fn(&OpenOptions) -> Result<Board> + 'static,
    ) -> Guard {
        Guard {
            reopen: Box::new(reopen),
            _keep: Box::new(keep),
        }
    }

    /// Opens the board again (a second connection) with `options`.
    pub(crate) fn reopen(&self, options: &OpenOptions) -> Result<Board> {
        (self.reopen)(options)
    }
}

/// Lists every conformance test, grouped by module, and hands the list to
/// `$callback!($($args)*; module { test, … } …)`.
macro_rules! for_each_conformance_test {
    ($callback:ident!($($args:tt)*)) => {
        $callback!($($args)*;
            create {
                create_without_parents_is_ready_with_a_created_event,
                create_with_an_unfinished_parent_starts_todo_and_waits,
                create_triage_and_blocked_initial_states,
                create_with_the_same_idempotency_key_returns_the_first_task,
                create_refuses_blank_title_unknown_parent_and_bad_runtime,
                create_tasks_is_all_or_nothing_and_complete_many_reports_each_outcome,
            }
            claim {
                claim_opens_a_run_and_sets_the_lease,
                second_claim_loses_and_changes_nothing,
                claim_with_a_reopened_parent_demotes_to_todo,
                claim_refuses_a_non_positive_ttl_and_unknown_task,
                reclaimed_task_claims_again_with_a_fresh_heartbeat,
                heartbeat_extends_the_claim_and_stamps_task_and_run,
                heartbeat_with_a_stale_run_or_foreign_lock_is_refused,
                claim_batch_claims_each_task_once_with_its_own_run_and_event,
                claim_batch_a_lost_compare_and_swap_does_not_abort_the_others,
                claim_batch_a_failed_claim_is_rolled_back_alone_and_the_others_commit,
                claim_batch_with_a_bad_ttl_is_refused_and_changes_nothing,
            }
            complete {
                complete_closes_the_run_and_promotes_children,
                complete_with_a_stale_run_is_refused,
                complete_under_a_live_claim_needs_the_run_or_force,
                complete_after_the_claim_expired_needs_no_force,
                complete_refuses_done_tasks_and_unfinished_parents,
            }
            block {
                block_closes_the_run_and_parks_the_task,
                dependency_block_without_an_open_parent_becomes_needs_input,
                dependency_block_with_an_open_parent_waits_in_todo,
                the_same_block_kind_twice_in_a_row_goes_to_triage,
                block_refusals_change_nothing,
                unblock_lands_in_todo_while_a_parent_is_open_and_resets_failures,
            }
            operator {
                archive_closes_the_run_and_frees_children,
                operator_reclaim_returns_the_task_to_ready,
                assign_records_from_and_is_refused_while_running,
                reopen_sends_a_done_task_back_and_invalidates_its_descendants,
                reopen_lands_in_todo_under_an_unfinished_parent,
                edit_changes_only_what_it_names_with_one_event,
                edit_refusals_change_nothing,
                a_unique_id_prefix_resolves_and_others_are_refused,
            }
            review {
                request_review_closes_the_run_and_hands_the_task_to_the_reviewer,
                request_review_of_an_unclaimed_task_records_a_zero_length_run,
                request_review_refusals_change_nothing,
                a_reviewer_claims_from_review_and_requests_changes,
                request_changes_needs_a_reviewers_run,
                a_released_reviewer_run_goes_back_to_review,
                review_reopen_takes_an_unclaimed_review_task_back_to_its_implementer,
                a_batch_claims_a_review_task_for_its_reviewer_lane,
            }
            dispatcher {
                a_spawn_and_the_workers_registration_are_recorded_and_fenced,
                a_spawn_recorded_after_the_run_closed_keeps_the_run_and_is_refused,
                extend_and_defer_move_the_lease_of_task_and_run_fenced_on_what_was_seen,
                release_counts_failures_and_the_breaker_blocks_at_the_limit,
                a_trip_blocks_at_once_and_a_not_counted_release_keeps_the_counter,
                an_orphaned_running_task_is_reconciled_and_an_unstarted_claim_abandoned,
                worker_results_and_superseded_workers_are_events_only,
                notes_are_written_once_until_something_else_happens,
                lanes_workload_and_counts_read_the_board_as_the_dispatcher_needs,
            }
            graph {
                decompose_is_one_transaction_and_a_failed_last_write_leaves_nothing,
                decompose_refuses_a_bad_graph_or_a_root_out_of_triage,
                specify_moves_triage_on_and_refuses_any_other_status,
                schedule_parks_a_task_and_the_wake_moves_it_at_its_time,
                promote_force_passes_open_parents_and_a_dry_run_writes_nothing,
                reassign_with_a_reclaim_is_one_step_and_unblock_leaves_its_reason,
            }
            links {
                comment_is_stored_with_an_event_and_blank_is_refused,
                link_demotes_a_ready_child_and_refuses_self_links_and_cycles,
                link_refuses_a_running_child,
                unlink_frees_a_todo_child_and_refuses_a_missing_edge,
                promote_needs_finished_parents,
                recompute_ready_promotes_only_free_todo_tasks,
            }
            reads {
                list_tasks_filters_and_orders_by_priority_then_creation,
                events_read_newest_n_oldest_first_and_after_a_cursor,
            }
            turns {
                an_open_run_is_running_for_its_claim_only_and_live_until_it_expires,
                a_run_the_worker_closed_reads_as_its_outcome_and_still_takes_its_turn_event,
                a_reclaimed_run_is_superseded_and_its_turn_event_is_refused,
            }
            views {
                board_cards_count_attempts_and_carry_the_block_reason,
                given_up_tasks_are_the_blocked_ones_whose_latest_block_is_a_give_up,
            }
            fsck {
                fsck_names_each_violation,
                fsck_names_the_claim_run_and_orphan_rules_by_task,
                a_claim_without_any_worker_is_reported_after_a_minute_and_not_before,
            }
            schema {
                reopening_is_a_no_op_and_newer_schema_is_refused,
                body_error_rolls_back_and_nesting_is_refused,
                a_read_only_open_reads_and_refuses_every_write,
                another_connection_sees_each_commit_and_loses_a_claim_already_taken,
                the_change_watch_wakes_on_another_connections_commit_once,
                a_write_while_another_connection_writes_gives_up_after_the_busy_timeout,
            }
            atomic {
                a_transition_whose_event_cannot_be_written_changes_nothing,
            }
            admission {
                the_owner_marker_is_appended_once_under_the_current_claim,
                a_managed_worker_binds_only_to_the_current_claim_and_learns_its_ttl,
                only_the_bound_worker_settles_its_run_and_proves_its_live_claim,
                an_owner_turn_is_read_from_the_state_file_the_marker_names_now,
            }
        );
    };
}

/// Instantiates every conformance test as a `#[test]` for one store:
/// `conformance_tests!(name, store_expression)` makes `mod name { mod create { #[test] fn … } … }`.
macro_rules! conformance_tests {
    ($name:ident, $store:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            for_each_conformance_test!(instantiate!($store));
        }
    };
}

/// The `#[test]`s of [`conformance_tests!`].
macro_rules! instantiate {
    ($store:expr; $($module:ident { $($test:ident),* $(,)? })*) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use super::*;
                $(
                    #[test]
                    fn $test() {
                        crate::$module::$test(&$store);
                    }
                )*
            }
        )*
    };
}

// ---------------------------------------------------------------- SQLite

/// The location of board `conformance` under `root` in `store`, as `Board::open` takes it.
fn board_location(
    root: &std::path::Path,
    store: kanban_runtime::db::target::Store,
) -> BoardLocation {
    BoardLocation {
        slug: "conformance".to_owned(),
        db_path: paths::db_path(root, "conformance"),
        pinned: false,
        store,
    }
}

/// A board file in a fresh temporary folder.
pub(crate) struct SqliteStore;

impl Store for SqliteStore {
    fn board(&self) -> (Guard, Board) {
        let dir = tempfile::tempdir().unwrap();
        let location = board_location(dir.path(), kanban_runtime::db::target::Store::Sqlite);
        let board = Board::open(&location, &OpenOptions::create()).unwrap();
        let guard = Guard::new(dir, move |options| Board::open(&location, options));
        (guard, board)
    }

    fn fail_event_insert(&self, board: &Board, task: &str, kind: &str) {
        sql(board)
            .execute_batch(&format!(
                "CREATE TEMP TRIGGER conformance_fail BEFORE INSERT ON task_events \
                 WHEN NEW.task_id = '{task}' AND NEW.kind = '{kind}' \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
            ))
            .unwrap();
    }

    fn heal(&self, board: &Board) {
        sql(board)
            .execute_batch("DROP TRIGGER conformance_fail")
            .unwrap();
    }
}

conformance_tests!(sqlite, crate::SqliteStore);

// ---------------------------------------------------------------- PostgreSQL

/// A fresh database on the test process's throwaway PostgreSQL cluster (one per board), opened
/// as `Board::open` opens a board whose location is its URL.
pub(crate) struct PostgresStore;

impl PostgresStore {
    /// The location of a fresh, empty database (`Board::open` makes it a board).
    pub(crate) fn fresh_target() -> PgTarget {
        let cluster = kanban_pgwire::cluster::TestCluster::shared()
            .expect("a PostgreSQL test server (see the README's test command)");
        let name = cluster.fresh_database("conformance").unwrap();
        PgTarget::parse(
            &cluster.url(&name),
            kanban_runtime::db::target::UrlSource::Argument("--url"),
        )
        .unwrap()
    }
}

impl Store for PostgresStore {
    fn board(&self) -> (Guard, Board) {
        // The folder a PostgreSQL board's location still names (it holds no database file).
        let dir = tempfile::tempdir().unwrap();
        let location = board_location(
            dir.path(),
            kanban_runtime::db::target::Store::Postgres(Self::fresh_target()),
        );
        let board = Board::open(&location, &OpenOptions::create()).unwrap();
        let guard = Guard::new(dir, move |options| Board::open(&location, options));
        (guard, board)
    }

    fn fail_event_insert(&self, board: &Board, task: &str, kind: &str) {
        sql(board)
            .execute_batch(&format!(
                "CREATE FUNCTION conformance_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.task_id = '{task}' AND NEW.kind = '{kind}' THEN \
                 RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$; \
                 CREATE TRIGGER conformance_fail BEFORE INSERT ON task_events \
                 FOR EACH ROW EXECUTE FUNCTION conformance_fail();"
            ))
            .unwrap();
    }

    fn heal(&self, board: &Board) {
        sql(board)
            .execute_batch(
                "DROP TRIGGER conformance_fail ON task_events; DROP FUNCTION conformance_fail();",
            )
            .unwrap();
    }
}

conformance_tests!(postgres, crate::PostgresStore);

// ---------------------------------------------------------------- helpers of the tests

pub(crate) fn new(title: &str) -> NewTask {
    NewTask {
        title: title.to_owned(),
        ..NewTask::default()
    }
}

pub(crate) fn create(b: &Board, title: &str) -> String {
    b.create_task(&new(title), T0).unwrap().id
}

pub(crate) fn child_of(b: &Board, title: &str, parents: &[&str]) -> String {
    let t = NewTask {
        parents: parents.iter().map(|p| p.to_string()).collect(),
        ..new(title)
    };
    b.create_task(&t, T0).unwrap().id
}

pub(crate) fn spec(lock: &str) -> ClaimSpec {
    ClaimSpec {
        lock: lock.to_owned(),
        ttl_seconds: 900,
        origin: ClaimOrigin::External,
    }
}

/// The release of a run whose worker (`pid`) exited with 2 after printing `output`: the
/// dispatcher's `crashed` outcome, counted as `failure` says.
pub(crate) fn crashed_exit<'a>(
    lock: &'a str,
    run_id: i64,
    failure: Failure<'a>,
    pid: i64,
    output: &str,
) -> Release<'a> {
    Release {
        claim_lock: Some(lock),
        run_id: Some(run_id),
        outcome: "crashed",
        event: Event::Crashed {
            pid: Some(pid),
            claimer: Some(lock.to_owned()),
            exit_kind: Some("exit".into()),
            exit_code: Some(2),
            terminal_provider: None,
            worker_output: Some(output.into()),
            retry_status: Status::Ready,
        },
        failure,
        error: "worker exited with 2".into(),
    }
}

pub(crate) fn claim(b: &Board, id: &str) -> Claimed {
    claim_with(b, id, &spec("host:1"))
}

pub(crate) fn claim_with(b: &Board, id: &str, spec: &ClaimSpec) -> Claimed {
    match b.claim(id, spec, T0).unwrap() {
        ClaimOutcome::Claimed(c) => c,
        ClaimOutcome::Lost(r) => panic!("lost: {r}"),
    }
}

pub(crate) fn kinds(b: &Board, id: &str) -> Vec<String> {
    b.events(id, None)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

pub(crate) fn last_event(b: &Board, id: &str) -> Event {
    b.events(id, Some(1)).unwrap()[0].decode().unwrap()
}

pub(crate) fn status(b: &Board, id: &str) -> Status {
    b.get_task(id).unwrap().status
}

pub(crate) fn assert_clean(b: &Board) {
    let v = b.fsck().unwrap();
    assert!(v.is_empty(), "fsck: {v:?}");
}
