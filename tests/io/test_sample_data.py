"""The bundled sample loads, is deterministic and matches its README."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.io import read_dataset

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.mark.parametrize("name", ["digits_partial.csv", "digits_partial.npz"])
def test_sample_loads(name: str) -> None:
    ds = read_dataset(SAMPLE / name, min_rows=11)
    assert ds.X.shape == (800, 64)
    assert ds.layout == "image:8x8"
    assert ds.label_names == [str(d) for d in range(10)]
    assert ds.ids[0] == "d0000" and ds.ids[-1] == "d0799"
    assert ds.true_labels is not None and (ds.true_labels >= 0).all()
    assert ds.candidates[np.arange(800), ds.true_labels].all()
    assert ds.X.min() == 0 and ds.X.max() == 16
    partial = ds.candidates.sum(axis=1) >= 2
    assert 0.5 < partial.mean() < 0.7
    assert ds.candidates.sum(axis=1).max() <= 4


def test_csv_and_npz_agree() -> None:
    a = read_dataset(SAMPLE / "digits_partial.csv")
    b = read_dataset(SAMPLE / "digits_partial.npz")
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.candidates, b.candidates)
    np.testing.assert_array_equal(a.true_labels, b.true_labels)
    assert a.ids == b.ids and a.feature_names == b.feature_names


def test_generator_is_deterministic_and_matches_committed_csv() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_sample", SAMPLE / "make_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.build()
    committed = (SAMPLE / "digits_partial.csv").read_text()
    assert table.to_csv(index=False, lineterminator="\n") == committed


def test_sample_is_small() -> None:
    total = sum(p.stat().st_size for p in SAMPLE.iterdir() if p.is_file())
    assert total < 1_000_000


def test_text_sample_imports_with_computed_features() -> None:
    ds = read_dataset(SAMPLE / "texts.csv", min_rows=11)
    assert ds.n_instances == 300 and ds.content_columns == {"text": "text"}
    assert ds.texts is not None and all(t.strip() for t in ds.texts)
    assert ds.featurizer is not None and ds.featurizer.name == "tfidf-svd" and ds.X.shape == (300, 64)
    assert ds.true_labels is not None and ds.candidates[np.arange(300), ds.true_labels].all()


def test_photo_sample_imports_as_an_image_dataset() -> None:
    from app.io import read_image_dataset

    ds = read_image_dataset(SAMPLE / "photos", SAMPLE / "photos_labels.csv")
    assert ds.n_instances == 96 and ds.media_kinds == ["image"] * 96
    assert ds.media_root == str((SAMPLE / "photos").resolve())
    assert ds.featurizer is not None and ds.featurizer.name == "image" and ds.X.shape == (96, 156)
    # The same data read as a CSV with a path column, media rooted at the folder.
    as_table = read_dataset(SAMPLE / "photos_labels.csv", media_root=SAMPLE / "photos")
    np.testing.assert_array_equal(as_table.X, ds.X)
    assert as_table.media_paths == ds.media_paths and as_table.label_names == ds.label_names
