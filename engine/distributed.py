"""The vote kernels mapped over chunks of targets with Dask, for data past one machine.

Every decision winnow makes about a target (its vote bounds, ``NL``, ``APL``, exact ``PL``,
its DST-PLL prediction, and the query-score flags of its neighbours) depends only on that
target's row of the neighbour graph and on the candidate sets ``Y``. So the targets can be
cut into chunks and scored anywhere:

* ``Y`` (or the fitted classifier) is scattered once to every worker;
* the client walks the targets chunk by chunk, ships each ``(idx, w)`` chunk to a worker
  and keeps at most ``max_in_flight`` chunks outstanding, so the memory in use is bounded by
  the chunk size, never by the number of targets (no dense ``(T, K, M)`` array is built;
  the kernels themselves work on ``engine.winners.CHUNK_TARGETS`` rows at a time);
* per-target results are written into the output rows of their chunk; query scores come
  back as ``(training row, count)`` pairs of each chunk and are summed on the client
  (``np.bincount(idx[flags])`` split over chunks; integer counts, so the sum is exact).

Results equal the single-process functions bit for bit: each target's decision is computed
by the same kernel on the same neighbour-order sums. DST-PLL random tie-breaking draws the
same stream as :meth:`engine.dst.DstPllClassifier.predict_with_reject`: the client draws
each chunk's two uniforms per target in order and ships them with the chunk.

Complexity is that of the single-process kernels, ``O(T·K·M)`` for bounds, ``NL``, ``APL``
and ``apl`` scores, divided over the workers, plus the transfer of ``idx``/``w`` (16 bytes
per neighbour) and of ``Y`` once per worker.

Dask is an optional dependency (``pip install winnow[scale]``); it is imported only when a
function here runs. Workers must be able to import ``engine`` (same environment as the
client), which holds for :func:`dask_client` with ``n_workers``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from numbers import Integral
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from engine import _kernels
from engine._kernels import CandidateSets
from engine._possible import possible_from_graph
from engine._validation import check_candidates, check_choice, check_features, check_neighbors, check_scalar
from engine.choices import AMBIGUITY_CRITERIA, CRITERIA, PL_METHODS, AmbiguityCriterion, Criterion
from engine.exceptions import InvalidInput
from engine.query import changed_pairs, query_scores

if TYPE_CHECKING:
    from engine.dst import DstPllClassifier

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "dask_client",
    "distributed_vote_bounds",
    "distributed_label_sets",
    "distributed_possible_labels",
    "distributed_query_scores",
    "distributed_query_scores_from_chunks",
    "distributed_predict_with_reject",
]

#: Targets per Dask task: a chunk of idx/w with K = 10 is 16 MB, enough to amortise the
#: per-task overhead of the scheduler (a few ms) many times over.
DEFAULT_CHUNK_SIZE = 100_000

_INSTALL_HINT = "Dask is not installed; run `pip install winnow[scale]` to score over a Dask cluster"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InvalidInput(_INSTALL_HINT) from exc
    return distributed


@contextlib.contextmanager
def dask_client(address: str | None = None, *, n_workers: int | None = None) -> Iterator[Any]:
    """A Dask client on a running scheduler, or on a new local cluster on loopback.

    Parameters
    ----------
    address : str, optional
        Scheduler address (``tcp://host:8786``). Exactly one of ``address`` and
        ``n_workers`` must be given.
    n_workers : int, optional
        Start a ``LocalCluster`` of that many single-threaded worker processes on
        127.0.0.1 (no dashboard), closed on exit.
    """
    if (address is None) == (n_workers is None):
        raise InvalidInput("give either a scheduler address or n_workers, not both and not neither")
    distributed = _distributed()
    if address is not None:
        with distributed.Client(address) as client:
            yield client
        return
    workers = int(check_scalar(n_workers, "n_workers", kind=Integral, min_value=1))
    with (
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


# --------------------------------------------------------------------------- public functions


def distributed_vote_bounds(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, *, client: Any = None, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`engine.winners.vote_bounds` over a Dask cluster: ``(smin, smax)``, (T, M) each."""
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    M = Y.shape[1]
    out = (np.empty((idx.shape[0], M)), np.empty((idx.shape[0], M)))
    _run(client, _bounds_task, CandidateSets.from_dense(Y), _array_chunks(idx, w, chunk_size), out)
    return out


def distributed_label_sets(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, *, client: Any = None, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """Necessary and approximately possible labels in one pass: ``(NL, APL)``, bool (T, M) each.

    Equal to ``engine.winners.necessary_labels`` and ``approx_possible_labels``.
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    shape = (idx.shape[0], Y.shape[1])
    out = (np.empty(shape, dtype=bool), np.empty(shape, dtype=bool))
    _run(client, _label_sets_task, CandidateSets.from_dense(Y), _array_chunks(idx, w, chunk_size), out)
    return out


def distributed_possible_labels(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    method: Literal["auto", "flow", "cpsat"] = "auto",
    time_limit: float = 10.0,
    client: Any = None,
    chunk_size: int = 10_000,
) -> np.ndarray:
    """Exact possible labels (:func:`engine.winners.possible_labels`) over a Dask cluster.

    The exact solver is far slower per target than the bounds, so chunks are smaller by
    default. Returns a bool array of shape (n_targets, n_labels).
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    check_choice(method, "method", PL_METHODS)
    out = (np.empty((idx.shape[0], Y.shape[1]), dtype=bool),)
    task = _PossibleTask(method, float(time_limit))
    _run(client, task, Y, _array_chunks(idx, w, chunk_size), out)
    return out[0]


def distributed_query_scores(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    criterion: Criterion = "apl",
    random_state: int | np.random.Generator | None = None,
    time_limit: float = 10.0,
    client: Any = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> np.ndarray:
    """:func:`engine.query.query_scores` with the ``"apl"``/``"pl"`` work done on a Dask cluster.

    The baselines (``"participation"``, ``"most_partial"``, ``"random"``) cost one pass over
    the data and are computed on the client by ``query_scores`` itself.

    Returns
    -------
    scores : float array of shape (n_instances,)
    """
    Y = check_candidates(Y)
    idx, w = check_neighbors(idx, w, Y)
    check_choice(criterion, "criterion", CRITERIA)
    if criterion not in AMBIGUITY_CRITERIA:
        return query_scores(idx, w, Y, criterion=criterion, random_state=random_state, time_limit=time_limit)
    return distributed_query_scores_from_chunks(
        (chunk for _, chunk in _array_chunks(idx, w, chunk_size)),
        Y,
        criterion=criterion,
        time_limit=time_limit,
        client=client,
    )


def distributed_query_scores_from_chunks(
    chunks: Iterable[tuple[np.ndarray, np.ndarray] | Any],
    Y: np.ndarray,
    *,
    criterion: AmbiguityCriterion = "apl",
    time_limit: float = 10.0,
    client: Any = None,
    max_in_flight: int | None = None,
) -> np.ndarray:
    """``apl``/``pl`` query scores of a neighbour graph that arrives in chunks of targets.

    For graphs too large for the client's memory: ``chunks`` yields ``(idx, w)`` pairs of
    arrays of shape (chunk_targets, k), or Dask futures of such pairs (e.g. chunks built on
    the workers). It is consumed lazily, at most ``max_in_flight`` chunks ahead (default:
    twice the number of worker threads). The chunks are trusted: validate them beforehand.

    Returns
    -------
    scores : float array of shape (n_instances,)
    """
    Y = check_candidates(Y)
    check_choice(criterion, "criterion", AMBIGUITY_CRITERIA)
    scores = np.zeros(Y.shape[0])
    task = _ScoreTask(criterion, float(time_limit))
    numbered = ((None, chunk) for chunk in chunks)
    _run(client, task, CandidateSets.from_dense(Y), numbered, scores, max_in_flight=max_in_flight)
    return scores


def distributed_predict_with_reject(
    classifier: Any, X: np.ndarray, *, client: Any = None, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """``classifier.predict_with_reject(X)`` of a fitted :class:`~engine.dst.DstPllClassifier`.

    The classifier is scattered once; rows of ``X`` go out in chunks. The random
    tie-breaking draws the same numbers as the single-process call (and advances a
    ``Generator`` ``random_state`` just as far).

    Returns
    -------
    labels : int array of shape (n_targets,)
    accepted : bool array of shape (n_targets,)
    """
    from engine.dst import DstPllClassifier  # loads scikit-learn (about a second): only this function needs it

    if not isinstance(classifier, DstPllClassifier):
        raise TypeError(f"classifier must be a fitted DstPllClassifier, got {type(classifier).__name__}")
    classifier.check_fitted()
    X = check_features(X, name="X")
    if X.shape[1] != classifier.n_features_in_:
        raise InvalidInput(
            f"X has {X.shape[1]} features but the classifier was fitted with {classifier.n_features_in_}"
        )
    check_scalar(chunk_size, "chunk_size", kind=Integral, min_value=1)
    rng = np.random.default_rng(classifier.random_state)

    def chunks() -> Iterator[tuple[slice, tuple[np.ndarray, np.ndarray]]]:
        for start in range(0, X.shape[0], chunk_size):
            rows = slice(start, start + chunk_size)
            # Drawn in order, chunk by chunk: the same stream as rng.random((n_targets, 2)).
            yield rows, (X[rows], rng.random((X[rows].shape[0], 2)))

    out = (np.empty(X.shape[0], dtype=np.intp), np.empty(X.shape[0], dtype=bool))
    _run(client, _predict_task, classifier, chunks(), out)
    return out


# --------------------------------------------------------------------------- tasks (run on workers)


def _bounds_task(sets: CandidateSets, chunk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return _kernels.bounds(chunk[0], chunk[1], sets)


def _label_sets_task(sets: CandidateSets, chunk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return _kernels.label_sets(chunk[0], chunk[1], sets)


class _PossibleTask:
    def __init__(self, method: str, time_limit: float) -> None:
        self.method, self.time_limit = method, time_limit

    def __call__(self, Y: np.ndarray, chunk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray]:
        possible, _ = possible_from_graph(chunk[0], chunk[1], Y, method=self.method, time_limit=self.time_limit)
        return (possible,)


class _ScoreTask:
    def __init__(self, criterion: AmbiguityCriterion, time_limit: float) -> None:
        self.criterion, self.time_limit = criterion, time_limit

    def __call__(self, sets: CandidateSets, chunk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        idx, w = chunk
        flags = changed_pairs(idx, w, sets, criterion=self.criterion, time_limit=self.time_limit, validate=False)
        # Distinct rows and their counts: at most K per target, usually far fewer.
        return np.unique(idx[flags], return_counts=True)


def _predict_task(classifier: DstPllClassifier, chunk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    X, draws = chunk
    return classifier.decide_with_draws(X, draws)


# --------------------------------------------------------------------------- scheduling


def _array_chunks(
    idx: np.ndarray, w: np.ndarray, chunk_size: int
) -> Iterator[tuple[slice, tuple[np.ndarray, np.ndarray]]]:
    check_scalar(chunk_size, "chunk_size", kind=Integral, min_value=1)
    for start in range(0, idx.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        yield rows, (idx[rows], w[rows])


def _get_client(client: Any) -> Any:
    distributed = _distributed()
    if client is not None:
        return client
    try:
        return distributed.get_client()
    except ValueError as exc:
        raise InvalidInput(
            "no Dask client: pass client=... or create one (see engine.distributed.dask_client)"
        ) from exc


def _run(
    client: Any,
    task: Callable[[Any, Any], Any],
    shared: Any,
    chunks: Iterable[tuple[slice | None, Any]],
    out: tuple[np.ndarray, ...] | np.ndarray,
    *,
    max_in_flight: int | None = None,
) -> None:
    """Map ``task(shared, chunk)`` over the chunks, at most ``max_in_flight`` at a time.

    ``shared`` is scattered once to every worker. With a slice, a chunk's results fill
    those rows of the ``out`` arrays; without (``None``), ``out`` is a score vector and the
    task returns ``(rows, counts)`` to add to it.
    """
    distributed = _distributed()
    client = _get_client(client)
    if max_in_flight is None:
        max_in_flight = 2 * max(1, sum(client.nthreads().values()))
    check_scalar(max_in_flight, "max_in_flight", kind=Integral, min_value=1)
    # A one-element list: scatter unpacks the top-level collection only, so a NamedTuple of
    # arrays or an estimator travels as one object.
    [shared_future] = client.scatter([shared], broadcast=True, hash=False)
    rows_of: dict[str, slice | None] = {}
    pending = distributed.as_completed()
    chunk_iter = iter(chunks)

    def submit_next() -> bool:
        try:
            rows, chunk = next(chunk_iter)
        except StopIteration:
            return False
        if not isinstance(chunk, distributed.Future):
            [chunk] = client.scatter([chunk], hash=False)
        future = client.submit(task, shared_future, chunk, pure=False)
        rows_of[future.key] = rows
        pending.add(future)
        return True

    try:
        for _ in range(max_in_flight):
            if not submit_next():
                break
        for future in pending:
            result = future.result()
            rows = rows_of.pop(future.key)
            future.release()
            if rows is None:
                items, counts = result
                scores = cast(np.ndarray, out)  # without rows, out is the score vector
                scores[items] += counts  # items are distinct: a plain fancy-index add is exact
            else:
                for target, part in zip(out, result, strict=True):
                    target[rows] = part
            del result
            submit_next()
    finally:
        shared_future.release()
