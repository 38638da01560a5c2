"""`winnow import` and `winnow rank` on items with content, through the installed entry point."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_data"


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_rank_a_csv_with_only_id_text_candidates(winnow, tmp_path):
    texts = pd.read_csv(SAMPLES / "texts.csv")[["id", "text", "candidates"]].head(60)
    texts.to_csv(tmp_path / "texts.csv", index=False)
    winnow("rank", tmp_path / "texts.csv", "-o", tmp_path / "ranked.csv", "-k", "5")
    ranked = pd.read_csv(tmp_path / "ranked.csv")
    assert len(ranked) > 0 and set(ranked["id"]) <= set(texts["id"])
    assert ranked["text"].tolist() == [texts.set_index("id").loc[i, "text"] for i in ranked["id"]]


def test_import_the_text_and_photo_samples(winnow, tmp_path):
    db = tmp_path / "w.db"
    result = winnow("import", SAMPLES / "texts.csv", "--db", db, "--session", "texts")
    assert "Imported 300 instances" in result.stdout
    result = winnow("import", SAMPLES / "photos", "--labels", SAMPLES / "photos_labels.csv", "--db", db)
    assert "as dataset 'photos'" in result.stdout
    datasets = rows(db, "SELECT name, featurizer, media_root FROM datasets ORDER BY id")
    assert datasets == [("texts", "tfidf-svd", None), ("photos", "image", str((SAMPLES / "photos").resolve()))]
    assert rows(db, "SELECT count(*) FROM instances WHERE text IS NOT NULL") == [(300,)]
    assert rows(db, "SELECT count(*) FROM instances WHERE media_kind = 'image'") == [(96,)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{data}", "--text-column", "nope"], "has no 'nope' column for text_column"),
        (["{data}", "--media-root", "{tmp}/missing"], "media_root"),
        (["{data}", "--features-from", "{tmp}/emb.npz"], "item id(s) have no features in the file"),
        (["{bad_text}"], "row 2 (spreadsheet row 3), column 'text': the text is empty"),
        (["{bad_image}"], "row 1 (spreadsheet row 2), column 'path': '../../etc/passwd' points outside"),
        (["{tmp}/photos", "--labels", "{data}", "--text-column", "text"], "do not apply to a folder of images"),
        (["{data}", "--labels", "{data}"], "--labels goes with a folder of images"),
    ],
)
def test_content_errors_are_one_line_exit_2_and_write_nothing(winnow, tmp_path, args, message):
    import numpy as np

    (tmp_path / "photos").mkdir()
    data = tmp_path / "data.csv"
    pd.read_csv(SAMPLES / "texts.csv").head(12).to_csv(data, index=False)
    bad_text = tmp_path / "bad_text.csv"
    frame = pd.read_csv(data)
    frame.loc[1, "text"] = ""
    frame.to_csv(bad_text, index=False)
    bad_image = tmp_path / "bad_image.csv"
    pd.DataFrame({"path": ["../../etc/passwd"] * 12, "candidates": ["a|b"] * 12}).to_csv(bad_image, index=False)
    np.savez(tmp_path / "emb.npz", ids=np.array([f"x{i}" for i in range(12)]), features=np.ones((12, 2)))
    values = {"data": data, "tmp": tmp_path, "bad_text": bad_text, "bad_image": bad_image}
    db = tmp_path / "w.db"
    result = winnow("import", *[a.format(**values) for a in args], "--db", db, "-k", "3", check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    if db.exists():
        assert rows(db, "SELECT count(*) FROM instances") == [(0,)]
