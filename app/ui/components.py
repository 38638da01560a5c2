"""Pieces the winnow pages share: how an item is drawn, the PCA map, the progress replay,
and the export files.

The drawing functions call Streamlit; :func:`replay_progress` and :func:`export_bytes` are
plain functions (no Streamlit) so they can be tested and timed on their own. Results that
depend only on a session's events are cached by ``(session id, number of events)``: the log
is append-only, so that pair names one state of the session.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app.io import write_table
from app.store import repo
from app.workbench import RejectQueue, Workbench
from engine.dst import _combine, _decide
from engine.neighbors import knn_graph
from engine.winners import CandidateSets, _approx_possible, _bounds, _necessary

__all__ = [
    "image_shape",
    "show_item",
    "pca_projection",
    "replay_progress",
    "progress_history",
    "export_bytes",
    "export_file",
    "reject_queue",
    "label_set",
    "markdown_table",
]

_IMAGE_LAYOUT = re.compile(r"^image:(\d+)x(\d+)$")
#: Points drawn behind the current item on the PCA map (the rest would only slow the page).
MAP_POINTS = 1_000


_MAP_ITEMS = ["other items", "this item"]
#: The PCA map: a sample of the dataset in grey, the asked item large and red (drawn last).
MAP_SPEC: dict = {
    "height": 260,
    "mark": {"type": "circle", "opacity": 0.7},
    "encoding": {
        "x": {"field": "pc1", "type": "quantitative", "title": "PCA 1"},
        "y": {"field": "pc2", "type": "quantitative", "title": "PCA 2"},
        "color": {"field": "item", "type": "nominal", "title": None, "legend": {"orient": "bottom"},
                  "scale": {"domain": _MAP_ITEMS, "range": ["#9fb3c8", "#d62728"]}},
        "size": {"field": "item", "type": "nominal", "legend": None, "scale": {"domain": _MAP_ITEMS, "range": [10, 180]}},
        "order": {"field": "item", "type": "nominal"},
    },
}


def markdown_table(columns: list[str], rows: list[tuple]) -> str:
    """A small static table (cheaper for the browser than an interactive st.dataframe)."""
    cell = lambda value: str(value).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def label_set(bench: Workbench, row: np.ndarray) -> str:
    """A candidate row as ``"3 | 8 | 9"``."""
    return " | ".join(bench.label_names[m] for m in np.flatnonzero(row))


# -------------------------------------------------------------------------------- drawing


def dataset_key(bench: Workbench) -> str:
    """The store's URL: with the dataset id it names a dataset for the caches below."""
    return bench.Session.kw["bind"].url.render_as_string(hide_password=True)


def image_shape(layout: str | None, n_features: int) -> tuple[int, int] | None:
    """``(height, width)`` for an ``"image:HxW"`` layout that fits the features, else None."""
    match = _IMAGE_LAYOUT.match(layout or "")
    if match is None:
        return None
    height, width = int(match.group(1)), int(match.group(2))
    return (height, width) if height * width == n_features else None


def item_image(features: np.ndarray, shape: tuple[int, int], *, lo: float, hi: float, pixels: int = 200) -> np.ndarray:
    """Grey image (dark ink on white) scaled up by pixel repetition to about ``pixels`` wide."""
    grid = np.asarray(features, dtype=float).reshape(shape)
    span = hi - lo if hi > lo else 1.0
    grey = 1.0 - np.clip((grid - lo) / span, 0.0, 1.0)
    scale = max(1, pixels // shape[1])
    return np.repeat(np.repeat(grey, scale, axis=0), scale, axis=1)


@st.cache_data(show_spinner=False, max_entries=8)
def pca_projection(store_url: str, dataset_id: int, _X: np.ndarray) -> np.ndarray:
    """2-D PCA coordinates of every instance of a dataset (cached per store and dataset)."""
    from sklearn.decomposition import PCA

    X = np.asarray(_X, dtype=float)
    if X.shape[1] < 2:
        return np.column_stack([X[:, 0], np.zeros(X.shape[0])])
    return PCA(n_components=2, random_state=0).fit_transform(X)


@st.cache_data(show_spinner=False, max_entries=8)
def _feature_range(store_url: str, dataset_id: int, _X: np.ndarray) -> tuple[float, float]:
    return float(np.min(_X)), float(np.max(_X))


@st.cache_data(show_spinner=False, max_entries=8)
def _map_background(store_url: str, dataset_id: int, _coords: np.ndarray) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = _coords.shape[0]
    rows = np.sort(rng.choice(n, size=min(n, MAP_POINTS), replace=False))
    return pd.DataFrame({"pc1": _coords[rows, 0], "pc2": _coords[rows, 1], "item": "other items"})


def show_item(bench: Workbench, position: int, *, pixels: int = 200, caption: str | None = None) -> None:
    """Draw an instance: an image for ``image:HxW`` layouts, else its features and its place
    on a 2-D PCA map of the dataset."""
    state = bench.state
    dataset = (dataset_key(bench), bench.config.dataset_id)
    shape = image_shape(state.layout, state.X.shape[1])
    if shape is not None:
        lo, hi = _feature_range(*dataset, state.X)
        st.image(item_image(state.X[position], shape, lo=lo, hi=hi, pixels=pixels), caption=caption, clamp=True)
        return
    names = state.feature_names or tuple(f"x{j}" for j in range(state.X.shape[1]))
    shown = min(len(names), 24)
    if caption:
        st.caption(caption)
    st.markdown(markdown_table(["feature", "value"], [(f, f"{v:.4g}") for f, v in zip(names[:shown], state.X[position, :shown])]))
    if shown < len(names):
        st.caption(f"first {shown} of {len(names)} features")
    coords = pca_projection(*dataset, state.X)
    here = pd.DataFrame({"pc1": coords[[position], 0], "pc2": coords[[position], 1], "item": "this item"})
    # A plain Vega-Lite spec: building it through Altair (st.scatter_chart) validates a JSON
    # schema on every rerun, which cost more than the rest of the page together.
    st.vega_lite_chart(pd.concat([_map_background(*dataset, coords), here], ignore_index=True), MAP_SPEC)


# -------------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class _Graph:
    idx: np.ndarray
    w: np.ndarray
    ptr: np.ndarray  # reverse index: rows[ptr[n]:ptr[n+1]] are the rows whose neighbours hold n
    rows: np.ndarray

    @classmethod
    def of(cls, idx: np.ndarray, w: np.ndarray, n: int) -> "_Graph":
        flat = idx.ravel()
        order = np.argsort(flat, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=n))])
        return cls(idx, w, ptr, (order // idx.shape[1]).astype(np.intp))

    def rows_holding(self, item: int) -> np.ndarray:
        return np.unique(self.rows[self.ptr[item] : self.ptr[item + 1]])


def _nl_apl(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Renumber the rows' neighbours 0..m-1 so the cost follows the rows, not the dataset.
    items, local = np.unique(idx, return_inverse=True)
    smin, smax = _bounds(local.reshape(idx.shape), w, CandidateSets.from_dense(Y[items]))
    return _necessary(smin, smax), _approx_possible(smin, smax)


def _dst_decide(Y: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DST-PLL's transductive label and acceptance for training rows ``rows``."""
    labels, guess, margin = _decide(_combine(Y[rows], Y[idx[rows]]), np.random.default_rng(0))
    return labels, (margin > 0) & ~guess


def replay_progress(
    *,
    X: np.ndarray,
    original: np.ndarray,
    targets: np.ndarray,
    idx: np.ndarray,
    w: np.ndarray,
    k: int,
    events: list[repo.EventRecord],
    true_labels: np.ndarray | None,
) -> pd.DataFrame:
    """Replay a session's events and measure it after each one.

    Each event changes at most one item; the item is re-derived from its own events
    (:func:`app.store.repo.derive_item`), and only the targets that have it among their
    neighbours are re-examined: their ``NL``/``APL`` from the vote bounds, and DST-PLL's
    transductive decision for the item and every instance whose neighbourhood holds it. So
    the replay costs O(events · affected targets · K · M) after one full pass.

    Parameters
    ----------
    X : array of shape (n_instances, n_features)
    original : bool array of shape (n_instances, n_labels)
        Original candidate sets.
    targets : int array of shape (n_targets,)
        The session's targets; ``idx``/``w`` are their neighbourhoods.
    idx, w : arrays of shape (n_targets, k)
    k : int
        Neighbours of DST-PLL (its graph covers every instance).
    events : list of EventRecord
        The session's events, oldest first.
    true_labels : int array of shape (n_instances,) or None
        ``-1`` where unknown.

    Returns
    -------
    pandas.DataFrame
        One row before any event (``step`` 0) and one after each event, with columns
        ``step, event_id, time, kind, answered, open, ambiguous_targets, rejects`` and, when
        true labels are known, ``dst_accuracy`` (DST-PLL's label of every instance with a
        known truth) and ``accepted_accuracy`` (the same, over the labels DST-PLL accepts).
    """
    n = original.shape[0]
    Y = np.array(original, dtype=bool)
    votes = _Graph.of(idx, w, n)
    if targets.size == n and np.array_equal(targets, np.arange(n)) and w.shape[1] == k:
        dst_idx = idx
    else:
        dst_idx, _ = knn_graph(X, k=k, weights="uniform", exclude_self=True)
    dst = _Graph.of(dst_idx, np.ones(dst_idx.shape), n)

    nl, apl = _nl_apl(idx, w, Y)
    ambiguous = (nl != apl).any(axis=1)
    labels, accepted = _dst_decide(Y, dst_idx, np.arange(n))
    answered = np.zeros(n, dtype=bool)
    set_aside = np.zeros(n, dtype=bool)  # conflicts and none-of-these
    known = None if true_labels is None else np.asarray(true_labels) >= 0
    if known is not None and not known.any():
        known = None

    per_item: dict[int, list[repo.EventRecord]] = {}
    records: list[dict[str, object]] = []

    def measure(step: int, event: repo.EventRecord | None) -> None:
        open_items = (Y.sum(axis=1) > 1) & ~set_aside
        row: dict[str, object] = {
            "step": step,
            "event_id": None if event is None else event.id,
            "time": None if event is None else event.created_at,
            "kind": None if event is None else event.kind,
            "answered": int(answered.sum()),
            "open": int(open_items.sum()),
            "ambiguous_targets": int(ambiguous.sum()),
            "rejects": int((open_items & ~accepted).sum()),
        }
        if known is not None:
            right = labels[known] == true_labels[known]
            row["dst_accuracy"] = float(right.mean())
            kept = accepted[known]
            row["accepted_accuracy"] = float(right[kept].mean()) if kept.any() else np.nan
        records.append(row)

    measure(0, None)
    for step, event in enumerate(events, start=1):
        item = event.position
        per_item.setdefault(item, []).append(event)
        derived = repo.derive_item(per_item[item], original[item])
        answered[item] = derived.answered_by is not None
        set_aside[item] = derived.none_of_these or derived.conflict is not None
        if not np.array_equal(derived.candidates, Y[item]):
            Y[item] = derived.candidates
            rows = votes.rows_holding(item)
            if rows.size:
                nl_rows, apl_rows = _nl_apl(idx[rows], w[rows], Y)
                ambiguous[rows] = (nl_rows != apl_rows).any(axis=1)
            touched = np.union1d(dst.rows_holding(item), [item])
            labels[touched], accepted[touched] = _dst_decide(Y, dst_idx, touched)
        measure(step, event)
    return pd.DataFrame.from_records(records)


@st.cache_data(show_spinner="Replaying the answers…", max_entries=16)
def progress_history(db: str, session_id: int, n_events: int, _bench: Workbench) -> pd.DataFrame:
    """:func:`replay_progress` of a session, cached by ``(db, session, number of events)``."""
    with _bench.Session() as s:
        log = repo.event_log(s, session_id)
    events = [
        repo.EventRecord(e["event_id"], e["position"], e["annotator"], e["kind"], e["label"], e["undoes_event_id"], e["created_at"])
        for e in log
    ]
    state = _bench.state
    return replay_progress(
        X=state.X,
        original=np.asarray(state.original_candidates),
        targets=_bench.targets,
        idx=_bench.idx,
        w=_bench.w,
        k=_bench.config.k,
        events=events[:n_events],
        true_labels=None if state.true_labels is None else np.asarray(state.true_labels),
    )


# -------------------------------------------------------------------------------- rejects


@st.cache_data(show_spinner="Running DST-PLL on the current candidate sets…", max_entries=16)
def reject_queue(db: str, session_id: int, n_events: int, _bench: Workbench) -> RejectQueue:
    """:meth:`Workbench.rejects`, cached by ``(db, session, number of events)``."""
    return _bench.rejects()


# -------------------------------------------------------------------------------- exports

EXPORT_MIME = {"csv": "text/csv", "json": "application/json"}


def export_bytes(table: pd.DataFrame, fmt: str) -> bytes:
    """The file :func:`app.io.write_table` writes for ``table`` (same format as the CLI's)."""
    if fmt not in EXPORT_MIME:
        raise ValueError(f"fmt must be one of {', '.join(EXPORT_MIME)}; got {fmt!r}")
    with tempfile.TemporaryDirectory(prefix="winnow-export-") as folder:
        return write_table(table, Path(folder) / f"export.{fmt}").read_bytes()


@st.cache_data(show_spinner=False, max_entries=32)
def export_file(db: str, session_id: int, n_events: int, what: str, fmt: str, _bench: Workbench) -> bytes:
    """The ranked query list (``what="ranked"``) or labelled data (``"labelled"``) as a file."""
    table = _bench.ranked_table() if what == "ranked" else _bench.labelled_table()
    return export_bytes(table, fmt)
