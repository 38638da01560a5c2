"""Items with content in the store: texts, media references, links and the featurizer record."""

from __future__ import annotations

import numpy as np
import pytest

from app.store import (
    InvalidRecord,
    create_dataset,
    dataset_content,
    dataset_featurizer,
    write_transaction,
)

from .conftest import CANDIDATES, LABELS, row_counts

N = len(CANDIDATES)


def _create(Session, **content):
    def work(s):
        dataset = create_dataset(
            s,
            name="content",
            X=np.arange(N, dtype=float)[:, None],
            candidates=CANDIDATES,
            label_names=LABELS,
            external_ids=[f"e{i}" for i in range(N)],
            **content,
        )
        s.flush()
        return dataset.id

    return write_transaction(Session, work)


def test_content_and_featurizer_round_trip(store):
    state = bytes(range(256)) * 3
    dataset_id = _create(
        store,
        texts=["a cat", None, "  ", "x", "ünïcode 😀"],
        media_paths=["photos/a.png", None, "b.wav", None, "c d/e.jpg"],
        media_kinds=["image", None, "audio", None, "image"],
        links=[None, "https://example.org/1", None, None, "http://h/x?y=1"],
        media_root="/data/root",
        featurizer="tfidf-svd",
        featurizer_params={"dimension": 8, "blocks": ["a", "b"], "format": 1},
        featurizer_state=state,
    )
    with store() as s:
        content = dataset_content(s, dataset_id)
        record = dataset_featurizer(s, dataset_id)
    assert content.has_content
    assert content.media_root == "/data/root"
    assert content.texts == ("a cat", None, None, "x", "ünïcode 😀")  # a blank text is no text
    assert content.media_paths == ("photos/a.png", None, "b.wav", None, "c d/e.jpg")
    assert content.media_kinds == ("image", None, "audio", None, "image")
    assert content.links == (None, "https://example.org/1", None, None, "http://h/x?y=1")
    assert record is not None
    assert (record.name, record.params, record.state) == (
        "tfidf-svd",
        {"dimension": 8, "blocks": ["a", "b"], "format": 1},
        state,
    )


def test_a_dataset_without_content_reads_all_none(store):
    dataset_id = _create(store)
    with store() as s:
        content = dataset_content(s, dataset_id)
        assert dataset_featurizer(s, dataset_id) is None
    assert not content.has_content and content.media_root is None
    assert content.texts == content.media_paths == content.media_kinds == content.links == (None,) * N


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (
            {
                "media_paths": ["../etc/passwd"] + [None] * (N - 1),
                "media_kinds": ["image"] + [None] * (N - 1),
                "media_root": "/r",
            },
            "without '..'",
        ),
        (
            {
                "media_paths": ["/etc/passwd"] + [None] * (N - 1),
                "media_kinds": ["image"] + [None] * (N - 1),
                "media_root": "/r",
            },
            "relative to the media root",
        ),
        (
            {"media_paths": ["a.png"] + [None] * (N - 1), "media_kinds": [None] * N, "media_root": "/r"},
            "without a kind",
        ),
        (
            {
                "media_paths": ["a.mp4"] + [None] * (N - 1),
                "media_kinds": ["video"] + [None] * (N - 1),
                "media_root": "/r",
            },
            "expected one of image, audio",
        ),
        (
            {"media_paths": ["a.png"] + [None] * (N - 1), "media_kinds": ["image"] + [None] * (N - 1)},
            "media_root is needed",
        ),
        ({"media_root": "relative/folder"}, "absolute"),
        ({"links": ["javascript:alert(1)"] + [None] * (N - 1)}, "http\\(s\\) URL"),
        ({"texts": ["a"]}, "texts has 1 entries"),
        ({"texts": ["a\x00b"] + [None] * (N - 1)}, "NUL"),
        ({"featurizer_params": {"a": 1}}, "need a featurizer name"),
        ({"featurizer": "x", "featurizer_params": {"a": float("nan")}}, "JSON-serialisable"),
    ],
)
def test_bad_content_writes_nothing(store, content, match):
    before = row_counts(store)
    with pytest.raises(InvalidRecord, match=match):
        _create(store, **content)
    assert row_counts(store) == before
