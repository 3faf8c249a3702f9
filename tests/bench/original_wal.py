"""Write-ahead log volume of the original's transitions, for `kanban-bench` (issue 32 item 3).

Usage: python3 original_wal.py ORIGINAL_DIR BOARD_FILE N

ORIGINAL_DIR holds the original's installed package (`hermes_cli/kanban_db.py`; `cargo xtask
bench` installs it there with pip). On a fresh board file, N tasks go through each transition
with the original's own functions, one transaction each, as kanban-bench does with the board's:
create, claim, heartbeat (the worker's heartbeat: `heartbeat_worker`), complete. Before each
transition a truncating checkpoint empties the WAL; after it a passive checkpoint reports the
frames written since, as `kanban_tests::lean::sqlite_wal_frames` does. The writer's automatic
checkpoint is turned off so that it cannot empty the WAL in between (it changes when pages are
copied back, not what a transition writes).

Prints one JSON object: {"page_size": P, "frames": {"create": F, ...}} with F per transition.
"""

import json
import sqlite3
import sys
from pathlib import Path


def frames_of(path, body):
    reader = sqlite3.connect(path)
    reader.execute("PRAGMA busy_timeout=120000")
    busy, _, _ = reader.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise SystemExit(f"the WAL of {path} could not be reset (busy)")
    body()
    busy, log, _ = reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    reader.close()
    if busy or log < 0:
        raise SystemExit(f"the WAL of {path} could not be read (busy {busy}, log {log})")
    return log


def main():
    if len(sys.argv) != 4:
        raise SystemExit("usage: original_wal.py ORIGINAL_DIR BOARD_FILE N")
    original, board, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    if not (original / "hermes_cli" / "kanban_db.py").is_file():
        raise SystemExit(f"{original} holds no hermes_cli/kanban_db.py")
    sys.path.insert(0, str(original))
    import hermes_cli.kanban_db as kb

    if board.exists():
        raise SystemExit(f"{board} exists: the measurement needs a fresh board file")
    kb.init_db(board)
    conn = kb.connect(board)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    ids, runs = [], {}

    def create():
        for i in range(n):
            ids.append(kb.create_task(conn, title=f"wal {i}"))

    def claim():
        for task_id in ids:
            task = kb.claim_task(conn, task_id, ttl_seconds=900, claimer="bench:original")
            if task is None:
                raise SystemExit(f"the original's claim of {task_id} claimed nothing")
            runs[task_id] = task.current_run_id

    def heartbeat():
        for task_id in ids:
            if not kb.heartbeat_worker(conn, task_id, expected_run_id=runs[task_id]):
                raise SystemExit(f"the original's heartbeat of {task_id} was refused")

    def complete():
        for task_id in ids:
            if not kb.complete_task(
                conn, task_id, summary="done", expected_run_id=runs[task_id]
            ):
                raise SystemExit(f"the original's completion of {task_id} was refused")

    frames = {}
    for name, body in [
        ("create", create),
        ("claim", claim),
        ("heartbeat", heartbeat),
        ("complete", complete),
    ]:
        frames[name] = frames_of(board, body) / n
    print(json.dumps({"page_size": page_size, "frames": frames}))


main()
