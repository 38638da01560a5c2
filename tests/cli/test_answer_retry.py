"""``winnow answer --idempotency-key``: a retried command records its answer once (issue 13)."""

from __future__ import annotations

import json
import sqlite3


def test_a_retried_answer_is_recorded_once(winnow, small_csv, tmp_path):
    db = tmp_path / "w.db"
    winnow("import", small_csv, "--db", db, "--name", "d", "--session", "s", "-k", "5")
    item = json.loads(winnow("session", "status", "s", "--db", db, "--json").stdout)["next"][0]
    args = (
        "answer",
        "s",
        item["id"],
        item["candidates"][0],
        "--annotator",
        "ann",
        "--db",
        db,
        "--idempotency-key",
        "req-1",
    )
    first = winnow(*args).stdout
    assert winnow(*args).stdout == first  # same reply, same event id
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*), min(idempotency_key) from answer_events").fetchone() == (1, "req-1")
    other = next(c for c in item["candidates"][1:])
    result = winnow(*args[:3], other, *args[4:], check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        "error: idempotency_key 'req-1' was already used in session 's' for another request"
    )
    with sqlite3.connect(db) as con:
        assert con.execute("select count(*) from answer_events").fetchone() == (1,)
