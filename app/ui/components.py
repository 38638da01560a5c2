"""Pieces the winnow pages share: how an item is drawn, the PCA map, and the caches of what
the service layer computes (progress replay, reject queue, export files).

Nothing here computes a session's state: the replay, the reject queue and the exports come
from :mod:`app.service`. Results that depend only on a session's events are cached by
``(session id, number of events)``: the log is append-only, so that pair names one state of
the session.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app.dataset_rules import image_shape
from app.service import RejectQueue, Workbench, export_bytes, session_progress, session_table
from app.ui.state import TabState

__all__ = [
    "workbench_or_stop",
    "show_notice",
    "show_item",
    "pca_projection",
    "progress_history",
    "export_file",
    "reject_queue",
    "label_set",
    "markdown_table",
]

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


def workbench_or_stop(bench: Workbench | None) -> Workbench:
    """The tab's open session; without one, a link to the Sessions page, and the page stops."""
    if bench is None:
        st.info("No labelling session is open yet.")
        st.page_link("views/sessions.py", label="Create or open a session", icon=":material/folder_open:")
        st.stop()
    return bench


def show_notice(tab: TabState) -> None:
    """The one-shot outcome of the last action (``"ok:..."`` or ``"error:..."``), then cleared."""
    if tab.notice:
        level, _, text = tab.notice.partition(":")
        (st.error if level == "error" else st.success)(text)
        tab.notice = None


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


@st.cache_data(show_spinner="Replaying the answers…", max_entries=16)
def progress_history(db: str, session_id: int, n_events: int, _bench: Workbench) -> pd.DataFrame:
    """:func:`app.service.session_progress`, cached by ``(db, session, number of events)``."""
    return session_progress(_bench, n_events)


# -------------------------------------------------------------------------------- rejects


@st.cache_data(show_spinner="Running DST-PLL on the current candidate sets…", max_entries=16)
def reject_queue(db: str, session_id: int, n_events: int, _bench: Workbench) -> RejectQueue:
    """:meth:`Workbench.rejects`, cached by ``(db, session, number of events)``."""
    return _bench.rejects()


# -------------------------------------------------------------------------------- exports


@st.cache_data(show_spinner=False, max_entries=32)
def export_file(db: str, session_id: int, n_events: int, what: str, fmt: str, _bench: Workbench) -> bytes:
    """:func:`app.service.session_table` of ``what`` as a ``fmt`` file, cached like the replay."""
    return export_bytes(session_table(_bench, what), fmt)
