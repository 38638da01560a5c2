"""The model's view of a session: DST-PLL's labels, and the ones it will not commit to (rejects).

One seam of :class:`app.service.workbench.Workbench`. The classifier is fitted once per
workbench on the dataset's persisted graph (no neighbour search of its own); after answers
only the disambiguations the changed sets touch are recomputed
(:meth:`engine.dst.DstPllClassifier.update_candidates`). The caller holds the workbench's
lock around every call (tabs share the classifier).

Freezing a lot needs only every item's transductive label and margin
(:meth:`ModelView.decisions`), which the session's working-state snapshot keeps
(:class:`ModelDecisions`, :mod:`app.service.working_state`): a process that finds them there
brings them up to date with :func:`engine.dst_evidence.transductive_decisions` for the items
the changed sets touch, and neither fits the classifier nor loads scikit-learn. The margins
equal a fit's exactly; so do the labels, except those drawn at random among ties (guesses),
whose margin is never positive, so that no lot ever takes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from app.service.graphs import GraphResult
from app.store import SessionState
from engine.dst_evidence import transductive_decisions

if TYPE_CHECKING:
    from engine.dst import DstPllClassifier

__all__ = ["RejectQueue", "ModelDecisions", "ModelView", "reject_queue"]

#: The seed of DST-PLL's tie-breaking in a session (the classifier's ``random_state``).
MODEL_SEED = 0


@dataclass(frozen=True)
class ModelDecisions:
    """DST-PLL's transductive label and margin of every item, for the candidate sets ``candidates``.

    Attributes
    ----------
    candidates : bool array of shape (n_instances, n_labels)
        The sets the decisions were made from.
    labels : int array of shape (n_instances,)
    margins : float array of shape (n_instances,)
        ``bel(ŷ) − max pl`` (:attr:`engine.dst.DstPllClassifier.disambiguate_margin_`).
    """

    candidates: np.ndarray
    labels: np.ndarray
    margins: np.ndarray

    @classmethod
    def decide(cls, candidates: np.ndarray, idx: np.ndarray) -> ModelDecisions:
        """Every item decided afresh on the graph ``idx`` (as a fit on it decides them)."""
        Y = np.array(candidates, dtype=bool)
        labels, _, margins = transductive_decisions(Y, idx, random_state=MODEL_SEED)
        return cls(Y, np.asarray(labels, dtype=np.int64), np.asarray(margins, dtype=np.float64))

    def brought_to(self, candidates: np.ndarray, idx: np.ndarray) -> ModelDecisions:
        """The decisions for ``candidates``: only the items whose set changed, and those with
        one of them among their neighbours, are decided again."""
        Y = np.asarray(candidates, dtype=bool)
        changed = (self.candidates != Y).any(axis=1)
        if not changed.any():
            return self
        affected = np.flatnonzero(changed | changed[idx].any(axis=1))
        labels, margins = self.labels.copy(), self.margins.copy()
        new_labels, _, new_margins = transductive_decisions(Y, idx, affected, random_state=MODEL_SEED)
        labels[affected] = new_labels
        margins[affected] = new_margins
        return ModelDecisions(np.array(Y), labels, margins)

    def fits(self, n_instances: int, n_labels: int) -> bool:
        """Whether the arrays have the shapes and kinds of a session of this size (a snapshot's
        parts are checked before use)."""
        return (
            self.candidates.shape == (n_instances, n_labels)
            and self.candidates.dtype == bool
            and self.labels.shape == (n_instances,)
            and self.labels.dtype.kind in "iu"
            and bool(((self.labels >= 0) & (self.labels < n_labels)).all())
            and self.margins.shape == (n_instances,)
            and self.margins.dtype.kind == "f"
            and bool(np.isfinite(self.margins).all())
        )


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

    def __init__(self, graph_of: Callable[[int], GraphResult], decisions: ModelDecisions | None = None) -> None:
        self._graph_of = graph_of
        self._model: DstPllClassifier | None = None
        #: The session's decisions (its own ``k``) when no classifier is fitted yet.
        self._decisions = decisions

    def decisions(
        self, features: Callable[[], np.ndarray], candidates: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every item's transductive label and margin on the sets ``candidates`` with ``k``
        neighbours, the session's own ``k`` (what freezing a lot reads).

        From the fitted classifier when there is one; otherwise from the decisions the
        workbench was given (the snapshot's), brought up to date; otherwise fitted on the
        feature matrix ``features()`` returns (read only then: a command that freezes a lot
        from the snapshot's decisions never reads the features).
        """
        if self._model is None and self._decisions is not None:
            self._decisions = self._decisions.brought_to(candidates, self._graph_of(k).idx)
            return self._decisions.labels, self._decisions.margins
        model = self.fitted(features(), candidates, k)
        return model.disambiguate_, model.disambiguate_margin_

    def fitted(self, X: np.ndarray, candidates: np.ndarray, k: int) -> DstPllClassifier:
        """The classifier with ``k`` neighbours on the sets ``candidates``: fitted on first use
        (or when ``k`` changes), otherwise updated where the sets changed."""
        # Imported here: scikit-learn takes about a second to load, and a command that only
        # freezes lots from the snapshot's decisions (ModelView.decisions) never needs it.
        from engine.dst import DstPllClassifier

        Y = np.array(candidates)
        model = self._model
        if model is None or model.n_neighbors != k:
            model = self._model = DstPllClassifier(n_neighbors=k, random_state=MODEL_SEED).fit(
                X, Y, neighbors=self._graph_of(k).idx
            )
            self._decisions = None
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


def reject_queue(
    model: ModelView,
    state: SessionState,
    k: int,
    *,
    session_k: int,
    model_kept: Callable[[], np.ndarray],
    being_audited: Callable[[], np.ndarray],
) -> RejectQueue:
    """The items without a label that the Rejects page lists, with DST-PLL's view of them
    (:meth:`app.service.workbench.Workbench.rejects`; the caller holds the model's lock).

    ``positions`` are the open items and the items flagged "none of these" (smallest margin
    first). With the session's own ``k`` (``session_k``), ``accepted`` is ``model_kept()`` (the
    items whose model label is delivered) and ``guess_hidden`` is ``being_audited()``, both
    bool arrays of shape (n_instances,); with another ``k``, ``accepted`` is that model's own
    reject option and nothing is hidden.
    """
    flagged = np.asarray(state.none_of_these) & ~state.in_conflict
    listed = np.asarray(state.open_items) | flagged
    queue = model.rejects(state.X, state.candidates, listed, k)
    if k != session_k:
        return queue
    kept = model_kept()
    auditing = being_audited()
    return replace(queue, accepted=kept[queue.positions], guess_hidden=auditing[queue.positions])


def _queue(model: DstPllClassifier, rows: np.ndarray) -> RejectQueue:
    return RejectQueue(
        positions=rows,
        labels=model.disambiguate_[rows],
        accepted=model.disambiguate_accepted_[rows],
        margin=model.disambiguate_margin_[rows],
        belief=model.disambiguate_belief_[rows],
        plausibility=model.disambiguate_plausibility_[rows],
    )
