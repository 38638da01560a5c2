"""A session at work as export tables: the ranked query list and the labelled dataset.

One seam of :class:`app.service.workbench.Workbench`; :mod:`app.service.exports` turns these
tables into files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from app.store import SessionConfig, SessionState
from engine.ranking import ranking_order

# pandas (and the writers, which use it) are imported by the functions that make a table:
# `winnow session status` and `winnow answer` open a session without making one (0.3-0.5 s).
if TYPE_CHECKING:
    import pandas as pd

    from app.service.ranking_state import SessionView
    from engine.labelling_loop import ServedOrder

__all__ = [
    "scoring_params",
    "ranked_table",
    "served_ranked_table",
    "next_queries",
    "in_served_order",
    "without_scores",
    "labelled_table",
    "with_suspect_columns",
    "SUSPECT_COLUMN_NOTES",
]

#: The ranked export's columns that hold an item's query score.
SCORE_COLUMNS: tuple[str, ...] = ("score", "open_targets_touched")


def scoring_params(config: SessionConfig) -> dict[str, Any]:
    """The session's scoring parameters, as the ranked export records them."""
    return {"k": config.k, "weighting": config.weighting, "target_set": config.target_set, "session": config.name}


def ranked_table(
    state: SessionState,
    scores: np.ndarray,
    touched: np.ndarray,
    content: dict[str, tuple[str | None, ...]],
    *,
    suspects: np.ndarray | None = None,
) -> pd.DataFrame:
    """The ranked query list of the open items (conflicts and flagged items set aside) and the
    ``suspects`` to ask (positions), by score, skipped items last."""
    from app.io.writers import ranked_query_table

    return ranked_query_table(
        scores,
        np.asarray(state.candidates),
        list(state.label_names),
        list(state.external_ids),
        touched,
        criterion=state.config.criterion,
        params=scoring_params(state.config),
        include=state.open_items,
        also=None if suspects is None else np.isin(np.arange(state.n_instances), suspects),
        deferred=state.skipped,
        content=content,
    )


def served_ranked_table(
    view: SessionView, content: dict[str, tuple[str | None, ...]], *, asked: np.ndarray, served: ServedOrder
) -> pd.DataFrame:
    """The ranked query list of ``view``'s open items (conflicts and flagged items set aside)
    and of the suspect items to ask (``asked``), in the served order ``served``: skipped items
    last, the audits and suspects in their slots (no column says which rows they are: while
    audits are interleaved, ``score`` and ``open_targets_touched`` are left empty on every row)."""
    st = view.state
    listed = np.asarray(st.open_items).copy()
    listed[asked] = True
    table = ranked_table(st, view.ranking.scores, view.ranking.touched, content, suspects=asked)
    rows = ranking_order(view.ranking.scores, listed, deferred=np.asarray(st.skipped))
    out = in_served_order(table, rows, served.positions)
    if served.audit.any():
        # An audit's query score is out of the ranked order: while audits are interleaved
        # the scores would tell them apart, so no row shows one.
        out = without_scores(out)
    return out


def next_queries(view: SessionView, served: ServedOrder, top: int) -> list[dict[str, Any]]:
    """The first ``top`` items of the served order ``served``: id, score, candidate names and
    the true label's name (``None`` when unknown). The score is ``None`` on every item while
    audits are interleaved (as in :func:`served_ranked_table`)."""
    st = view.state
    names = st.label_names
    truth = st.true_labels
    scored = not served.audit.any()
    return [
        {
            "id": st.external_ids[p],
            "score": float(view.ranking.scores[p]) if scored else None,
            "candidates": [names[m] for m in np.flatnonzero(st.candidates[p])],
            "true_label": names[truth[p]] if truth is not None and truth[p] >= 0 else None,
        }
        for p in served.positions[:top]
    ]


def in_served_order(table: pd.DataFrame, ranked: np.ndarray, served: np.ndarray) -> pd.DataFrame:
    """The ranked table (its rows in the order ``ranked``) reordered as ``served`` (the same
    items, audits in their slots), ``rank`` numbered again from 1."""
    ranked, served = np.asarray(ranked, dtype=np.int64), np.asarray(served, dtype=np.int64)
    if ranked.size != len(table) or served.size != ranked.size:
        raise ValueError(
            f"the ranked table has {len(table)} rows, the ranked queue {ranked.size} and the served "
            f"order {served.size} items: they must be the same items"
        )
    if ranked.size == 0 or np.array_equal(ranked, served):
        return table
    row_of = np.full(int(max(ranked.max(), served.max())) + 1, -1, dtype=np.int64)
    row_of[ranked] = np.arange(ranked.size)
    rows = row_of[served]
    if (rows < 0).any():
        raise ValueError("the served order holds an item the ranked table does not")
    out = table.iloc[rows].reset_index(drop=True)
    out["rank"] = np.arange(1, len(out) + 1, dtype=np.int64)
    out.attrs = dict(table.attrs)
    return out


def without_scores(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its score columns left empty on every row (the columns stay, so every
    export has the same columns) and the reason in its metadata."""
    import pandas as pd

    out = table.copy()
    for column in SCORE_COLUMNS:
        if column in out.columns:
            out[column] = pd.Series(np.nan, index=out.index, dtype="float64")
    out.attrs = dict(table.attrs)
    out.attrs["metadata"] = {
        **dict(table.attrs.get("metadata") or {}),
        "scores_left_out": "score and open_targets_touched are empty while audits are interleaved in the queue: "
        "an audit's score would stand out of the ranked order (winnow rank gives the scores of a dataset)",
    }
    return out


def labelled_table(state: SessionState, content: dict[str, tuple[str | None, ...]]) -> pd.DataFrame:
    """Every item with its current set, label, "none of these" flag, content reference, who
    answered and when."""
    from app.io.writers import labelled_dataset_table

    return labelled_dataset_table(
        list(state.external_ids),
        list(state.label_names),
        np.array(state.candidates),
        np.array(state.resolved),
        list(state.answered_by),
        list(state.answered_at),
        true_labels=None if state.true_labels is None else np.array(state.true_labels),
        none_of_these=np.asarray(state.none_of_these),
        content=content,
    )


#: What the labelled export's metadata says of its ``suspect`` and ``suspicion`` columns.
SUSPECT_COLUMN_NOTES: dict[str, str] = {
    "suspect_column": "True where a test flags the item's set as probably missing its true label: conformal "
    "p-values and Benjamini-Hochberg, so that on average at most fdr of the flagged sets are false alarms",
    "suspicion_column": "how likely the item's set misses its true label, from 0 to 1, higher is more suspect: "
    "1 - (P(set) + max P(label in set)) / 2 under its neighbours' labels pooled with linear models of the "
    "features, the item left out; "
    "sort by it to look at the most suspect first (it ranks, it is not a calibrated probability)",
}


def with_suspect_columns(
    table: pd.DataFrame, state: SessionState, suspect: np.ndarray, suspicion: np.ndarray, *, fdr: float
) -> pd.DataFrame:
    """The labelled table with a boolean ``suspect`` column after ``model_margin`` (at the end
    when there is none) and the float ``suspicion`` after it (:mod:`app.service.suspects`),
    and :data:`SUSPECT_COLUMN_NOTES` (with the test's ``fdr``) in its metadata. Rows are
    matched by ``id``; the other columns are kept.

    Parameters
    ----------
    table : pandas.DataFrame
        A labelled table with an ``id`` column (items of ``state``).
    state : SessionState
    suspect : bool array of shape (n_instances,)
        The flags by dataset position.
    suspicion : float array of shape (n_instances,)
        The suspicion by dataset position.
    fdr : float
        The false-discovery rate of the flags' test.
    """
    where = {item: position for position, item in enumerate(state.external_ids)}
    rows = np.array([where[item] for item in table["id"]], dtype=np.int64)
    out = table.copy()
    at = out.columns.get_loc("model_margin") + 1 if "model_margin" in out.columns else len(out.columns)
    out.insert(at, "suspect", np.asarray(suspect, dtype=bool)[rows])
    out.insert(at + 1, "suspicion", np.asarray(suspicion, dtype=np.float64)[rows])
    out.attrs = dict(table.attrs)
    out.attrs["metadata"] = {**dict(table.attrs.get("metadata") or {}), **SUSPECT_COLUMN_NOTES, "fdr": fdr}
    return out
