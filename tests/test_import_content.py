"""The service layer imports items with content and reuses the dataset's featurizer (issue 11)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.io import DataFileError
from app.service import (
    Workbench,
    create_session,
    events_table,
    featurize_items,
    import_file,
    import_image_folder,
)
from app.store import open_store
from engine.exceptions import InvalidInput

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


def _counts(Session) -> tuple[int, int]:
    from sqlalchemy import text

    with Session() as s:
        return (
            s.execute(text("SELECT count(*) FROM datasets")).scalar_one(),
            s.execute(text("SELECT count(*) FROM instances")).scalar_one(),
        )


def test_texts_import_and_new_items_get_bit_identical_features(tmp_path):
    Session = open_store(tmp_path / "w.db")
    dataset_id, n = import_file(Session, SAMPLES / "texts.csv", name="texts")
    texts = pd.read_csv(SAMPLES / "texts.csv")["text"].tolist()
    assert n == len(texts)
    session_id = create_session(
        Session, dataset_id=dataset_id, name="s", k=5, weighting="uniform", criterion="apl", target_set="all"
    )
    bench = Workbench.open(Session, session_id)
    assert bench.item_content(7).text == texts[7]
    # New items (here: the same texts again, by name and by id) get the stored transform.
    np.testing.assert_array_equal(featurize_items(Session, "texts", texts[:20]), bench.state.X[:20])
    again = featurize_items(Session, dataset_id, [texts[3]])
    assert again.tobytes() == bench.state.X[3].tobytes()


def test_a_dataset_imported_as_numbers_has_no_featurizer(tmp_path):
    Session = open_store(tmp_path / "w.db")
    lines = (SAMPLES / "digits_partial.csv").read_text().splitlines()[:30]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    import_file(Session, tmp_path / "d.csv", name="d")
    with pytest.raises(InvalidInput, match="records no featurizer"):
        featurize_items(Session, "d", ["a text"])


def test_image_folder_import_keeps_the_images_in_place(tmp_path):
    Session = open_store(tmp_path / "w.db")
    dataset_id, n = import_image_folder(Session, SAMPLES / "photos", SAMPLES / "photos_labels.csv")
    labels = pd.read_csv(SAMPLES / "photos_labels.csv")
    assert n == len(labels)
    session_id = create_session(
        Session, dataset_id=dataset_id, name="p", k=5, weighting="uniform", criterion="apl", target_set="all"
    )
    bench = Workbench.open(Session, session_id)
    content = bench.item_content(0)
    assert content.image_path == (SAMPLES / "photos" / labels["path"][0]).resolve()
    assert content.text is None and content.audio_path is None
    assert featurize_items(Session, dataset_id, [content.image_path]).tobytes() == bench.state.X[0].tobytes()
    ranked = bench.ranked_table()
    assert ranked["media_path"].notna().all() and "text" not in ranked.columns


def test_a_bad_row_writes_nothing(tmp_path):
    Session = open_store(tmp_path / "w.db")
    rows = pd.read_csv(SAMPLES / "texts.csv").head(20)
    rows.loc[12, "text"] = " "
    rows.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataFileError, match=r"row 13 \(spreadsheet row 14\), column 'text': the text is empty"):
        import_file(Session, tmp_path / "bad.csv", name="bad")
    assert _counts(Session) == (0, 0)


def test_exports_carry_content_the_flag_and_label_names(tmp_path):
    Session = open_store(tmp_path / "w.db")
    dataset_id, _ = import_file(Session, SAMPLES / "texts.csv", name="texts")
    session_id = create_session(
        Session, dataset_id=dataset_id, name="s", k=5, weighting="uniform", criterion="apl", target_set="all"
    )
    bench = Workbench.open(Session, session_id)
    first, second = (int(p) for p in bench.queue(top=2))
    label = bench.label_names[int(np.flatnonzero(bench.state.candidates[first])[0])]
    bench.record("ann", "answer", position=first, label=label)
    bench.record("ann", "none_of_these", position=second)
    labelled = bench.labelled_table()
    assert labelled.loc[first, "label"] == label and not labelled.loc[first, "none_of_these"]
    assert labelled.loc[second, "none_of_these"] and labelled.loc[second, "label"] is None
    assert labelled["text"].tolist() == pd.read_csv(SAMPLES / "texts.csv")["text"].tolist()
    events = events_table(Session, session_id, actor=None)
    assert events["label"].tolist() == [label, None]
    assert str(events["label_index"].dtype) == "Int64"
