"""Crowd votes at work: read with the items they are about, summarised for the expert, exported.

``winnow import items.csv --votes votes.csv`` and the upload form make the candidate sets from
the votes (:func:`read_items_with_votes`) and store the votes with the dataset; the Query and
Review pages show each item's :func:`vote_summary` ("3 votes: jazz ×2, blues ×1"); ``winnow
export SESSION --what votes`` writes :func:`votes_table`, and the labelled export gets a
``votes`` column (:func:`vote_column`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.store import (
    VoteSpec,
    authorize_session,
    dataset_has_votes,
    dataset_vote_counts,
    dataset_votes,
    get_dataset_by_id,
    session_dataset_size,
    votes_of_item,
)
from engine.exceptions import InvalidInput
from engine.votes import check_vote_thresholds

if TYPE_CHECKING:
    import pandas as pd

    from app.io import LoadedDataset, MatchedVotes
    from app.io.label_studio_tasks import CrowdVote

__all__ = [
    "VOTE_COLUMNS",
    "VoteSummary",
    "check_vote_options",
    "read_items_with_votes",
    "votes_brought_by",
    "vote_spec",
    "vote_summary",
    "votes_table",
    "vote_column",
    "crowd_votes",
]

#: Columns of the votes export, in order.
VOTE_COLUMNS: tuple[str, ...] = ("id", "annotator", "label", "time")


@dataclass(frozen=True)
class VoteSummary:
    """The votes an item received: how many, and per label (most voted first, then label order).

    Attributes
    ----------
    n_votes : int
    counts : tuple of (str, int)
        Label name and its number of votes, labels without a vote left out.
    """

    n_votes: int
    counts: tuple[tuple[str, int], ...]

    @property
    def text(self) -> str:
        """``"3 votes: jazz ×2, blues ×1"`` (plain text: label names are user content).

        >>> VoteSummary(3, (("jazz", 2), ("blues", 1))).text
        '3 votes: jazz ×2, blues ×1'
        >>> VoteSummary(1, (("jazz", 1),)).text
        '1 vote: jazz ×1'
        >>> VoteSummary(0, ()).text
        'No votes'
        """
        if not self.n_votes:
            return "No votes"
        plural = "vote" if self.n_votes == 1 else "votes"
        return f"{self.n_votes} {plural}: " + ", ".join(f"{name} ×{count}" for name, count in self.counts)


def check_vote_options(min_votes: object = None, min_share: object = None) -> tuple[int | None, float | None]:
    """``(min_votes, min_share)`` checked (:func:`engine.votes.check_vote_thresholds`), at most one of them.

    Both at once would keep only the labels meeting the two, which no reader of the options
    expects from "at least N votes" and "at least this share"; one is asked for instead.

    Raises
    ------
    InvalidInput
        A threshold out of range, or both given.
    """
    if min_votes is not None and min_share is not None:
        raise InvalidInput(
            f"a minimum number of votes (min_votes={min_votes!r}) and a minimum share "
            f"(min_share={min_share!r}) were both given: each alone decides which voted labels are kept, "
            "give one, not both"
        )
    return check_vote_thresholds(min_votes, min_share)


def read_items_with_votes(
    path: str | os.PathLike[str],
    votes_path: str | os.PathLike[str],
    *,
    min_votes: int | None = None,
    min_share: float | None = None,
    read_options: dict[str, Any],
) -> tuple[LoadedDataset, VoteSpec]:
    """Read an items file and its votes file; the candidate sets are made from the votes.

    The label names are the votes' labels when the items file has no candidates column, else
    the labels of that column (a vote for another label is an "unknown label" error naming the
    votes file's row). Items with votes get the union of their votes, or the labels meeting
    ``min_votes`` / ``min_share`` (falling back to their plurality labels,
    :mod:`engine.votes`); items without votes keep the candidates column's set, or every
    label without one.

    Parameters
    ----------
    path : path
        The items file (any table :func:`app.io.read_dataset` reads).
    votes_path : path
        The votes file (:func:`app.io.read_votes`).
    min_votes, min_share : optional
        The thresholds, at most one of them, checked before either file is read.
    read_options : dict
        Keyword arguments of :func:`app.io.read_dataset` (columns, content, ``min_rows``...).

    Returns
    -------
    (LoadedDataset, VoteSpec)
        The items with their candidate sets, and the votes for the store.

    Raises
    ------
    InvalidInput
        A bad threshold; :class:`~app.io.DataFileError` for either file (unknown item or label,
        bad rows: the votes file's row and column are named).
    """
    from app.io import apply_votes, read_dataset, read_votes, vote_label_names

    min_votes, min_share = check_vote_options(min_votes, min_share)
    votes = read_votes(votes_path)
    items = read_dataset(path, default_labels=vote_label_names(votes), **read_options)
    loaded, matched = apply_votes(items, votes, min_votes=min_votes, min_share=min_share)
    return loaded, vote_spec(matched)


def vote_spec(matched: MatchedVotes, source: str | None = None) -> VoteSpec:
    """The store's record of votes matched to their items (:func:`app.io.match_votes` or
    :func:`app.io.apply_votes`); ``source`` defaults to the votes file's name.

    Any source of votes (a votes table, a Label Studio export) goes to the store this way:
    ``store_dataset(session_factory, loaded, name=..., votes=vote_spec(matched))``.
    """
    votes = matched.votes
    return VoteSpec(
        positions=matched.positions,
        annotators=votes.annotators,
        labels=matched.label_indices,
        times=votes.times,
        source=source if source is not None else Path(votes.source).name,
    )


def votes_brought_by(
    loaded: LoadedDataset, *, min_votes: int | None = None, min_share: float | None = None
) -> tuple[LoadedDataset, VoteSpec]:
    """The candidate sets and stored votes of a file that brings its own votes (a Label Studio
    export: :attr:`app.io.LoadedDataset.votes`), read with the same rule as a votes file.

    Raises
    ------
    InvalidInput
        ``loaded`` brings no votes, or a bad threshold.
    """
    from app.io import apply_votes

    if loaded.votes is None:
        raise InvalidInput(f"{Path(loaded.source).name!r} brings no votes")
    min_votes, min_share = check_vote_options(min_votes, min_share)
    votes = loaded.votes
    loaded, matched = apply_votes(loaded, votes, min_votes=min_votes, min_share=min_share)
    return loaded, vote_spec(matched)


def vote_summary(
    session_factory: sessionmaker[Session], dataset_id: int, position: int, label_names: Sequence[str]
) -> VoteSummary:
    """The votes of the item at ``position`` of dataset ``dataset_id`` (two indexed look-ups,
    cheap enough for every page draw)."""
    with session_factory() as s:
        votes = votes_of_item(s, dataset_id, position)
    counts = np.bincount([label for _, label in votes], minlength=len(label_names))
    order = sorted(np.flatnonzero(counts).tolist(), key=lambda j: (-counts[j], j))
    return VoteSummary(len(votes), tuple((label_names[j], int(counts[j])) for j in order))


def votes_table(session_factory: sessionmaker[Session], session_id: int, *, actor: str | None) -> pd.DataFrame:
    """Every vote of the session's dataset: ``id``, ``annotator``, ``label`` (its name) and
    ``time`` (ISO 8601 UTC, empty when unknown), by item then as imported.

    ``actor`` must be allowed ``export_labelled`` (the votes are part of the dataset handed
    back; ``None`` is the command line).

    Raises
    ------
    app.store.PermissionDenied
        ``actor`` may not export the session's data.
    """
    with session_factory() as s:
        authorize_session(s, actor, "export_labelled", session_id, what="export votes")
        dataset_id, _ = session_dataset_size(s, session_id)
        names = list(get_dataset_by_id(s, dataset_id).label_names)
        votes = dataset_votes(s, dataset_id)
    import pandas as pd  # here: the commands that never export votes (``winnow answer``) start without it

    return pd.DataFrame(
        {
            "id": [v.external_id for v in votes],
            "annotator": [v.annotator for v in votes],
            "label": [names[v.label] for v in votes],
            "time": [v.voted_at.isoformat() if v.voted_at is not None else "" for v in votes],
        },
        columns=list(VOTE_COLUMNS),
    )


def crowd_votes(session_factory: sessionmaker[Session], dataset_id: int) -> list[list[CrowdVote]] | None:
    """Each item's votes (who, which label, when: ISO 8601 UTC or ``None``), in position order,
    as stored; ``None`` when the dataset has no votes at all."""
    from app.io.label_studio_tasks import CrowdVote

    with session_factory() as s:
        if not dataset_has_votes(s, dataset_id):
            return None
        dataset = get_dataset_by_id(s, dataset_id)
        names = list(dataset.label_names)
        stored = dataset_votes(s, dataset_id)
        n = dataset.n_instances
    per_item: list[list[CrowdVote]] = [[] for _ in range(n)]
    for vote in stored:
        time = vote.voted_at.isoformat().replace("+00:00", "Z") if vote.voted_at is not None else None
        per_item[vote.position].append(CrowdVote(vote.annotator, names[vote.label], time))
    return per_item


def vote_column(session_factory: sessionmaker[Session], dataset_id: int) -> list[str] | None:
    """Each item's votes as ``"jazz:2|blues:1"`` (most voted first; ``""`` for an item
    without votes), in position order; ``None`` when the dataset has no votes at all."""
    with session_factory() as s:
        if not dataset_has_votes(s, dataset_id):
            return None
        dataset = get_dataset_by_id(s, dataset_id)
        names = list(dataset.label_names)
        counts = dataset_vote_counts(s, dataset_id, dataset.n_instances, len(names))
    column = []
    for row in counts:
        order = sorted(np.flatnonzero(row).tolist(), key=lambda j: (-row[j], j))
        column.append("|".join(f"{names[j]}:{int(row[j])}" for j in order))
    return column
