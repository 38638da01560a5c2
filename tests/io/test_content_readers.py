"""Items with content in CSV / TSV / Parquet files: content columns, media checks, computed or
brought features (issue 11)."""

from __future__ import annotations

import struct
import wave
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from app.io import DataFileError, read_dataset
from app.io.featurizers import TextFeaturizer, featurizer_from_record
from engine.exceptions import InvalidInput

TEXTS = [
    "The striker scored twice in the cup final",
    "The chef baked bread with fresh rosemary",
    "Stocks fell after the central bank raised rates",
    "The goalkeeper saved a penalty in extra time",
    "Simmer the tomato sauce with garlic and basil",
    "Investors sold bonds as inflation rose again",
]
SETS = ["sport|cooking", "cooking", "finance|sport", "sport", "cooking|finance", "finance"]


def write_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def texts_csv(tmp_path: Path, **extra: list[object]) -> Path:
    rows = [{"id": f"t{i}", "text": t, "candidates": c} for i, (t, c) in enumerate(zip(TEXTS, SETS, strict=True))]
    for column, values in extra.items():
        for row, value in zip(rows, values, strict=True):
            row[column] = value
    return write_csv(tmp_path / "texts.csv", rows)


def png(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (12, 10)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path


def huge_png_header(path: Path, width: int, height: int) -> Path:
    """A tiny PNG whose header claims ``width x height`` pixels (no pixel data worth decoding)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )
    return path


def wav(path: Path) -> Path:
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(8000)
        handle.writeframes(b"\x00\x00" * 800)
    return path


def images_csv(tmp_path: Path, paths: list[str] | None = None, **extra: list[object]) -> Path:
    colours = [(250, 10, 10), (240, 30, 20), (10, 250, 10), (20, 240, 30), (10, 10, 250), (30, 20, 240)]
    for i, colour in enumerate(colours):
        png(tmp_path / "photos" / f"p{i}.png", colour)
    paths = paths if paths is not None else [f"photos/p{i}.png" for i in range(6)]
    rows = [{"id": f"p{i}", "path": p, "candidates": c} for i, (p, c) in enumerate(zip(paths, SETS, strict=True))]
    for column, values in extra.items():
        for row, value in zip(rows, values, strict=True):
            row[column] = value
    return write_csv(tmp_path / "images.csv", rows)


# --------------------------------------------------------------------------------------------
# texts


def test_a_csv_with_only_id_text_candidates_gets_text_features(tmp_path):
    ds = read_dataset(texts_csv(tmp_path))
    assert ds.texts == TEXTS
    assert ds.content_columns == {"text": "text"}
    assert ds.featurizer is not None and ds.featurizer.name == "tfidf-svd"
    assert ds.X.shape[0] == 6 and np.isfinite(ds.X).all()
    assert ds.feature_names[0] == "tfidf-svd_0" and len(ds.feature_names) == ds.X.shape[1]
    assert ds.media_paths is None and ds.links is None and ds.media_root is None and ds.layout is None
    # The record rebuilds the same transform: the items' features come back bit for bit.
    again = featurizer_from_record(ds.featurizer).transform(TEXTS)
    np.testing.assert_array_equal(again, ds.X)
    np.testing.assert_array_equal(TextFeaturizer().fit_transform(TEXTS), ds.X)


def test_text_column_by_name_without_case_or_named_by_the_caller(tmp_path):
    rows = [{"ID": f"t{i}", "Body": t, "candidates": c} for i, (t, c) in enumerate(zip(TEXTS, SETS, strict=True))]
    path = write_csv(tmp_path / "named.csv", rows)
    with pytest.raises(DataFileError, match=r"column 'Body': 'The striker.* is not a number.*--text-column NAME"):
        read_dataset(path, id_column="ID")
    ds = read_dataset(path, id_column="ID", text_column="Body")
    assert ds.texts == TEXTS and ds.content_columns == {"text": "Body"}
    upper = write_csv(tmp_path / "upper.csv", [{"Text": t, "candidates": c} for t, c in zip(TEXTS, SETS, strict=True)])
    assert read_dataset(upper).content_columns == {"text": "Text"}


def test_content_columns_are_not_features_and_numbers_win(tmp_path):
    path = texts_csv(tmp_path, x=[1, 2, 3, 4, 5, 6], url=["https://example.org/a", "", "", "", "", ""])
    ds = read_dataset(path)
    np.testing.assert_array_equal(ds.X, np.arange(1, 7, dtype=float)[:, None])
    assert ds.feature_names == ["x"] and ds.featurizer is None
    assert ds.texts == TEXTS and ds.links == ["https://example.org/a", None, None, None, None, None]
    assert ds.content_columns == {"text": "text", "link": "url"}


def test_an_ignored_column_is_neither_feature_nor_content(tmp_path):
    path = texts_csv(tmp_path, notes=["a", "b", "c", "d", "e", "f"])
    with pytest.raises(DataFileError, match="'a' is not a number.*--ignore-columns NAME"):
        read_dataset(path)
    assert read_dataset(path, ignore_columns=["notes"]).featurizer is not None
    with pytest.raises(DataFileError, match="no feature columns and no content"):
        read_dataset(path, ignore_columns=["notes", "text"])


def test_parquet_texts(tmp_path):
    path = tmp_path / "texts.parquet"
    pd.DataFrame({"id": [f"t{i}" for i in range(6)], "text": TEXTS, "candidates": SETS}).to_parquet(path)
    ds = read_dataset(path)
    assert ds.texts == TEXTS and ds.featurizer is not None


def test_features_from_replaces_computed_features_aligned_by_id(tmp_path):
    path = texts_csv(tmp_path)
    ids = np.array([f"t{i}" for i in range(6)][::-1])
    features = np.arange(12, dtype=float).reshape(6, 2)
    np.savez(tmp_path / "emb.npz", ids=ids, features=features)
    ds = read_dataset(path, features_from=tmp_path / "emb.npz")
    np.testing.assert_array_equal(ds.X, features[::-1])
    assert ds.featurizer is None and ds.texts == TEXTS and ds.feature_names == ["embedding_0", "embedding_1"]


# --------------------------------------------------------------------------------------------
# media


def test_images_relative_to_the_data_file_get_image_features(tmp_path):
    ds = read_dataset(images_csv(tmp_path))
    assert ds.media_paths == [f"photos/p{i}.png" for i in range(6)]
    assert ds.media_kinds == ["image"] * 6
    assert ds.media_root == str(tmp_path.resolve())
    assert ds.featurizer is not None and ds.featurizer.name == "image"
    # Reds are nearest to reds: the built-in features see colour.
    distances = np.linalg.norm(ds.X[:, None] - ds.X[None], axis=2) + np.eye(6) * 1e9
    assert distances.argmin(axis=1).tolist() == [1, 0, 3, 2, 5, 4]


def test_media_root_argument_and_image_links(tmp_path):
    images_csv(tmp_path)
    rows = [{"image": f"p{i}.png", "candidates": c} for i, c in enumerate(SETS)]
    rows[2]["image"] = "https://example.org/p2.png"
    path = write_csv(tmp_path / "elsewhere.csv", [dict(r, x=i) for i, r in enumerate(rows)])
    ds = read_dataset(path, media_root=tmp_path / "photos")
    assert ds.media_root == str((tmp_path / "photos").resolve())
    assert ds.media_paths[2] is None and ds.links[2] == "https://example.org/p2.png"
    assert ds.media_paths[0] == "p0.png" and ds.featurizer is None
    without_numbers = write_csv(tmp_path / "links.csv", rows)
    with pytest.raises(DataFileError, match=r"row 3 \(spreadsheet row 4\), column 'image': this image is a link"):
        read_dataset(without_numbers, media_root=tmp_path / "photos")


def test_audio_needs_numeric_features_or_a_features_file(tmp_path):
    for i in range(6):
        wav(tmp_path / f"c{i}.wav")
    rows = [{"path": f"c{i}.wav", "candidates": c} for i, c in enumerate(SETS)]
    path = write_csv(tmp_path / "audio.csv", rows)
    with pytest.raises(DataFileError, match="audio items need their features"):
        read_dataset(path)
    ds = read_dataset(write_csv(tmp_path / "audio2.csv", [dict(r, f=i) for i, r in enumerate(rows)]))
    assert ds.media_kinds == ["audio"] * 6 and ds.media_paths[0] == "c0.wav"
    np.save(tmp_path / "emb.npy", np.ones((6, 3)))
    assert read_dataset(path, features_from=tmp_path / "emb.npy").X.shape == (6, 3)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("missing", r"row 2 \(spreadsheet row 3\), column 'path': 'photos/nope.png' does not exist"),
        ("outside", r"row 2 \(spreadsheet row 3\), column 'path': '../../etc/passwd' points outside the media root"),
        ("not_image", r"row 2 \(spreadsheet row 3\), column 'path': 'fake.png' is not an image"),
        ("huge", r"row 2 \(spreadsheet row 3\), column 'path': 'huge.png' (is 20000x10000|claims more pixels)"),
        ("folder", r"row 2 \(spreadsheet row 3\), column 'path': 'photos' is a folder"),
        ("scheme", r"row 2 \(spreadsheet row 3\), column 'path': 'file:///etc/passwd' uses the scheme 'file'"),
    ],
)
def test_bad_media_is_one_line_naming_file_row_and_column(tmp_path, change, match):
    paths = [f"photos/p{i}.png" for i in range(6)]
    paths[1] = {
        "missing": "photos/nope.png",
        "outside": "../../etc/passwd",
        "not_image": "fake.png",
        "huge": "huge.png",
        "folder": "photos",
        "scheme": "file:///etc/passwd",
    }[change]
    (tmp_path / "fake.png").write_text("not an image")
    huge_png_header(tmp_path / "huge.png", 20000, 10000)
    path = images_csv(tmp_path, paths)
    with pytest.raises(DataFileError, match=match) as info:
        read_dataset(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "/etc/passwd" not in message.replace("'../../etc/passwd'", "").replace("'file:///etc/passwd'", "")


def test_a_symbolic_link_out_of_the_media_root_is_refused(tmp_path):
    outside = png(tmp_path / "secret" / "s.png", (1, 2, 3))
    data = tmp_path / "data"
    data.mkdir()
    images_csv(data)
    (data / "photos" / "link.png").symlink_to(outside)
    paths = [f"photos/p{i}.png" for i in range(6)]
    paths[4] = "photos/link.png"
    path = images_csv(data, paths)
    with pytest.raises(DataFileError, match=r"row 5 .*'photos/link.png' points outside the media root"):
        read_dataset(path)


@pytest.mark.parametrize(
    ("texts", "match"),
    [
        (["", *TEXTS[1:]], r"row 1 \(spreadsheet row 2\), column 'text': the text is empty"),
        ([*TEXTS[:3], "   ", *TEXTS[4:]], r"row 4 \(spreadsheet row 5\), column 'text': the text is empty"),
        ([*TEXTS[:5], "!!! ?"], r"row 6 \(spreadsheet row 7\), column 'text': the text '!!! \?' has no word"),
    ],
)
def test_bad_texts_name_row_and_column(tmp_path, texts, match):
    rows = [{"text": t, "candidates": c} for t, c in zip(texts, SETS, strict=True)]
    with pytest.raises(DataFileError, match=match):
        read_dataset(write_csv(tmp_path / "t.csv", rows))


def test_a_features_file_whose_ids_do_not_match_is_refused(tmp_path):
    path = texts_csv(tmp_path)
    np.savez(tmp_path / "emb.npz", ids=np.array(["t0", "t1", "t2", "t3", "t4", "zz"]), features=np.ones((6, 2)))
    with pytest.raises(DataFileError, match=r"emb.npz.*item id\(s\) have no features in the file, e.g. 't5'"):
        read_dataset(path, features_from=tmp_path / "emb.npz")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"text_column": "nope"}, DataFileError, "has no 'nope' column for text_column"),
        ({"text_column": "candidates"}, DataFileError, "cannot be both the text column and the candidates"),
        ({"text_column": " "}, InvalidInput, "text_column must be a non-empty column name"),
        ({"image_column": "a", "audio_column": "b"}, InvalidInput, "not both"),
        ({"media_root": "/no/such/folder"}, InvalidInput, "media_root '/no/such/folder' is not an existing folder"),
        ({"ignore_columns": "text"}, TypeError, "not a single string"),
    ],
)
def test_bad_content_arguments(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        read_dataset(texts_csv(tmp_path), **kwargs)


def test_a_link_column_holds_only_http_links(tmp_path):
    path = texts_csv(tmp_path, link=["https://a.example/1", "javascript:alert(1)", "", "", "", ""])
    with pytest.raises(DataFileError, match=r"row 2 .*column 'link': 'javascript:alert\(1\)' uses the scheme"):
        read_dataset(path)


def test_content_columns_do_not_apply_to_npz(tmp_path):
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), candidates=np.eye(3, dtype=bool))
    with pytest.raises(InvalidInput, match="hold no content columns"):
        read_dataset(tmp_path / "d.npz", text_column="text")
    np.save(tmp_path / "emb.npy", np.arange(9.0).reshape(3, 3))
    ds = read_dataset(tmp_path / "d.npz", features_from=tmp_path / "emb.npy")
    np.testing.assert_array_equal(ds.X, np.arange(9.0).reshape(3, 3))
