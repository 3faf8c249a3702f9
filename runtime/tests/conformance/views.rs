use super::*;

fn task(board: &Board, title: &str) -> String {
    board.create_task(&new(title), 100).expect("create").id
}

pub(crate) fn board_cards_count_attempts_and_carry_the_block_reason(s: &dyn Store) {
    let (_dir, board) = s.board();
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
        Err(BoardError::TaskNotFound { .. })
    ));
    assert!(board.given_up_tasks().expect("given up").is_empty());
}

pub(crate) fn given_up_tasks_are_the_blocked_ones_whose_latest_block_is_a_give_up(s: &dyn Store) {
    let (_dir, board) = s.board();
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
    write(&board, |tx| {
        tx.append_event(&gave_up, None, &gave_up_event, 102)
    })
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
