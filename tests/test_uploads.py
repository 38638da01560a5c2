"""Browser uploads as datasets: a data file alone, with its images, a zip archive (issue 11)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from app.service import Workbench, start_session, upload_columns
from app.store import open_store
from engine.exceptions import InvalidInput

SAMPLES = Path(__file__).resolve().parents[1] / "sample_data"


def photo_files(count: int = 12) -> tuple[bytes, list[tuple[str, bytes]]]:
    labels = pd.read_csv(SAMPLES / "photos_labels.csv").head(count)
    images = [(p, (SAMPLES / "photos" / p).read_bytes()) for p in labels["path"]]
    return labels.to_csv(index=False).encode(), images


def zipped(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@pytest.fixture
def Session(tmp_path, monkeypatch):
    monkeypatch.setenv("WINNOW_MEDIA_DIR", str(tmp_path / "media"))
    return open_store(tmp_path / "w.db")


def start(Session, **kwargs):
    return start_session(Session, name="", k=3, weighting="uniform", criterion="apl", target_set="all", **kwargs)


def test_a_text_file_with_chosen_columns(Session):
    frame = pd.read_csv(SAMPLES / "texts.csv").head(30).rename(columns={"text": "body"})
    frame["notes"] = "x"
    content = frame.to_csv(index=False).encode()
    assert upload_columns("t.csv", content) == ["id", "body", "candidates", "true_label", "notes"]
    session_id = start(Session, upload=("t.csv", content), columns={"text_column": "body", "ignore_columns": ["notes"]})
    bench = Workbench.open(Session, session_id)
    assert bench.item_content(0).text == frame["body"][0]


def test_a_labels_file_with_its_images_and_a_zip(Session, tmp_path):
    labels, images = photo_files()
    session_id = start(Session, files=[("labels.csv", labels), *images])
    content = Workbench.open(Session, session_id).item_content(0)
    assert content.image_path is not None and content.image_path.is_file()
    assert content.image_path.is_relative_to((tmp_path / "media").resolve())

    archive = zipped({"set/labels.csv": labels, **{f"set/{n}": c for n, c in images}})
    session_id = start(Session, files=[("photos.zip", archive)])
    bench = Workbench.open(Session, session_id)
    assert bench.config.dataset_name == "photos" and bench.item_content(3).image_path.is_file()

    by_label = zipped({f"{'a' if i % 2 else 'b'}/{n}": c for i, (n, c) in enumerate(images)})
    session_id = start(Session, files=[("folders.zip", by_label)])
    assert Workbench.open(Session, session_id).state.n_instances == len(images)


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ({"../evil.png": b"x"}, "leading outside the archive"),
        ({"/abs.png": b"x"}, "leading outside the archive"),
        ({"a.csv": b"path,candidates\n", "b.csv": b"path,candidates\n"}, "holds 2 data files"),
    ],
)
def test_unsafe_or_ambiguous_archives_are_refused_and_leave_nothing(Session, tmp_path, entries, match):
    with pytest.raises(InvalidInput, match=match):
        start(Session, files=[("bad.zip", zipped(entries))])
    assert not any((tmp_path / "media").iterdir())


def test_a_bad_image_names_the_uploaded_file_and_row(Session, tmp_path):
    labels, images = photo_files()
    images[4] = (images[4][0], b"not an image")
    with pytest.raises(
        InvalidInput, match=r"^labels.csv, row 5 \(spreadsheet row 6\), column 'path': .* is not an image"
    ):
        start(Session, files=[("labels.csv", labels), *images])
    assert not any((tmp_path / "media").iterdir())
    with pytest.raises(InvalidInput, match="is not a data file, a zip archive, an image or an audio clip"):
        start(Session, files=[("notes.docx", b"x")])


def test_encrypted_or_clashing_archives_are_one_invalid_input_and_leave_nothing(Session, tmp_path):
    """Issue 23, item 8: these ended in Streamlit's generic error with a traceback in the log."""
    from tests.io.test_zips import PNG, encrypted

    cases = [
        (encrypted({"a/x.png": PNG}), "'a/x.png', which is encrypted"),
        (zipped({"a": b"x", "a/b.png": PNG}), "holds a file 'a' and a folder of the same name"),
    ]
    for archive, match in cases:
        with pytest.raises(InvalidInput, match=match):
            start(Session, files=[("bad.zip", archive)])
        assert not any((tmp_path / "media").iterdir())
    # Loose files whose stored names would clash are refused instead of overwriting each other.
    labels, images = photo_files()
    with pytest.raises(InvalidInput, match="'x_y.png' would replace another uploaded file"):
        start(Session, files=[("labels.csv", labels), ("x y.png", images[0][1]), ("x_y.png", images[1][1])])
    assert not any((tmp_path / "media").iterdir())
