"""The model's view of a session: DST-PLL's labels, and the ones it will not commit to (rejects).

One seam of :class:`app.service.workbench.Workbench`. The classifier is fitted once per
workbench on the dataset's persisted graph (no neighbour search of its own); after answers
only the disambiguations the changed sets touch are recomputed
(:meth:`engine.dst.DstPllClassifier.update_candidates`). The caller holds the workbench's
lock around every call (tabs share the classifier).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.service.graphs import GraphResult
from engine.dst import DstPllClassifier

__all__ = ["RejectQueue", "ModelView"]


@dataclass(frozen=True)
class RejectQueue:
    """DST-PLL's view of the still-partial items: the labels it refuses to commit to."""

    positions: np.ndarray  # open items, smallest margin first (rejected ones first)
    labels: np.ndarray  # DST-PLL's label per position
    accepted: np.ndarray
    margin: np.ndarray
    belief: np.ndarray  # (len(positions), M)
    plausibility: np.ndarray
    #: Items of the lot being audited: their guess must not be shown (any of them may be an
    #: audit, answered without the model's label in view). None: no item is.
    guess_hidden: np.ndarray | None = None

    @property
    def n_rejected(self) -> int:
        return int((~self.accepted).sum())


class ModelView:
    """DST-PLL on a session's current candidate sets, kept up to date between calls.

    Parameters
    ----------
    graph_of : callable(k) -> GraphResult
        The dataset's graph with ``k`` neighbours (loaded or built once by the service layer).
    """

    def __init__(self, graph_of: Callable[[int], GraphResult]) -> None:
        self._graph_of = graph_of
        self._model: DstPllClassifier | None = None

    def fitted(self, X: np.ndarray, candidates: np.ndarray, k: int) -> DstPllClassifier:
        """The classifier with ``k`` neighbours on the sets ``candidates``: fitted on first use
        (or when ``k`` changes), otherwise updated where the sets changed."""
        Y = np.array(candidates)
        model = self._model
        if model is None or model.n_neighbors != k:
            model = self._model = DstPllClassifier(n_neighbors=k, random_state=0).fit(
                X, Y, neighbors=self._graph_of(k).idx
            )
        else:
            changed = np.flatnonzero((model.candidates_ != Y).any(axis=1))
            if changed.size:
                model.update_candidates(changed, Y[changed])
        return model

    def rejects(self, X: np.ndarray, candidates: np.ndarray, open_items: np.ndarray, k: int) -> RejectQueue:
        """The open items, smallest margin first (rejected ones first), with DST-PLL's view."""
        model = self.fitted(X, candidates, k)
        positions = np.flatnonzero(open_items)
        if positions.size == 0:
            empty = np.zeros((0, np.shape(candidates)[1]))
            return RejectQueue(positions, positions, positions.astype(bool), positions.astype(float), empty, empty)
        order = np.argsort(model.disambiguate_margin_[positions], kind="stable")
        return _queue(model, positions[order])

    def view(self, X: np.ndarray, candidates: np.ndarray, positions: np.ndarray | list[int], k: int) -> RejectQueue:
        """DST-PLL's label, acceptance, margin, belief and plausibility for ``positions``, in
        the order given."""
        return _queue(self.fitted(X, candidates, k), np.asarray(positions, dtype=int))


def _queue(model: DstPllClassifier, rows: np.ndarray) -> RejectQueue:
    return RejectQueue(
        positions=rows,
        labels=model.disambiguate_[rows],
        accepted=model.disambiguate_accepted_[rows],
        margin=model.disambiguate_margin_[rows],
        belief=model.disambiguate_belief_[rows],
        plausibility=model.disambiguate_plausibility_[rows],
    )
