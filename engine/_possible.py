"""Exact possible labels (``PL``) of a weighted k-NN vote whose ballots are candidate sets.

For every target ``t`` and label ``λ`` this module decides whether ``λ`` wins, ties included,
in at least one *completion* of the target's neighbourhood (one label picked from every
neighbour's candidate set), and can return such a completion as a witness.

Reduction
---------
Let every neighbour whose set holds ``λ`` vote ``λ``; its total is then ``S = Smax(λ)``.
``λ`` is possible iff the remaining neighbours (sets without ``λ``) can each be given one
label of their set so that no label's total exceeds ``S`` [1]_. Giving a holder to ``λ``
never hurts ``λ`` and never helps a rival, also in floating point: a neighbour-order sum of
non-negative floats is monotone in its terms because rounding is monotone. Zero-weight
neighbours change no total (``x + 0.0 == x``), so they are ignored for feasibility and only
given some label of their set in a witness. Labels in no set have total 0 and never bind.

Each (target, label) pair goes through the cheapest stage that settles it:

1. **bounds** -- ``λ ∉ APL`` is impossible, ``λ ∈ NL`` is possible, and so is impossible a
   ``λ`` with a rival ballot (a positive-weight neighbour whose set lacks ``λ``) heavier
   than ``S`` on its own; ``O(K·M)`` per target, vectorised over a chunk of targets.
2. **greedy** -- a witness search vectorised over all open pairs of a chunk (loops run over
   the ``K`` neighbour positions, never over pairs). First a *free-label reduction*: a
   label whose total cannot exceed ``S`` even if it receives every still-unassigned
   neighbour that holds it absorbs those neighbours, repeated to a fixed point (exact:
   such a label can never bind). Then the rest go heaviest first to the label of their
   set with the smallest current total. A completion that verifies is a proof.
3. **flow** -- when the target's positive weights are all equal to ``w``: source →
   neighbour (capacity 1) → each label of its set (capacity 1) → sink with capacity
   ``c*``, the largest count whose neighbour-order float sum ``w + w + … + w`` stays
   ``≤ S`` (computed by repeated addition, not ``floor(S / w)``, which rounding can get
   wrong by one). Feasible iff the maximum flow saturates every neighbour; polynomial [2]_,
   [3]_.
4. **cpsat** -- unequal weights make the question a bin-packing feasibility with
   eligibility constraints, NP-hard in general [1]_. OR-Tools CP-SAT solves it on the
   reduced instance: Booleans ``x[j, l]`` for ``l`` in neighbour ``j``'s set, exactly one
   per neighbour, ``Σ_j W_j x[j, l] ≤ C`` per label.
5. **enumeration** -- only when CP-SAT's integer models cannot settle a float tie (see
   below) and the product of the remaining set sizes is at most
   :data:`MAX_ENUMERATION`: a depth-first search in neighbour order whose partial sums are
   exactly the float totals, pruned as soon as a label exceeds ``S``.

Float weights in CP-SAT
-----------------------
CP-SAT needs integers. Per pair, weights are multiplied by a power of two ``2^e`` chosen so
that the largest of ``S`` and the remaining weights' sum lies in ``[2^44, 2^45)``; the
product is exact. With ``γ = (K - 1)·2^-53 / (1 - (K - 1)·2^-53)`` bounding the relative
error of a float sum of ``K`` non-negative terms, and the slack ``δ = max(1e-12, 4γ)``:

* the **relaxation** uses ``floor(2^e w_j)`` and ``C⁺ = ceil(2^e S (1 + δ)) + 1``; every
  float-feasible assignment satisfies it, so ``INFEASIBLE`` proves ``λ`` impossible;
* a ``FEASIBLE``/``OPTIMAL`` relaxed assignment is re-checked with neighbour-order float
  sums; if it fails (possible only within ``δ`` of a tie) the **restriction** uses
  ``ceil(2^e w_j)`` and ``C⁻ = floor(2^e S (1 - δ)) - 1``, whose solutions satisfy the float
  constraint by construction (and are still re-checked).

If neither settles the pair, exhaustive enumeration does; if the instance is too large for
it, or CP-SAT reports ``UNKNOWN`` (time limit) or ``MODEL_INVALID``, :class:`SolverError`
names the target and the label. Only verified witnesses and ``INFEASIBLE`` count as answers.

Complexity
----------
Bounds and greedy cost ``O(T·K·M)`` time per pass and ``O(chunk·M·max(K, M))`` memory,
never a dense ``(T, K, M)`` array. Flow costs ``O(K²·M)`` per open equal-weight pair;
CP-SAT and enumeration are exponential in the worst case but run only on the pairs the
cheap stages leave open.

References
----------
.. [1] V.-L. Nguyen, S. Destercke, M.-H. Masson. Possible and necessary labels in K-nn
   procedures to query partially labelled data. DA2PL 2016.
.. [2] N. Betzler, B. Dorn. Towards a dichotomy for the possible winner problem in elections
   based on scoring rules. Journal of Computer and System Sciences 76(8):812-836, 2010.
.. [3] L. Xia, V. Conitzer. Determining possible and necessary winners given partial
   orders. Journal of Artificial Intelligence Research 41:25-67, 2011. (Possible winners
   of plurality with incomplete ballots reduce to a maximum flow.)
"""

from __future__ import annotations

import math
import time
from numbers import Real
from typing import Any, cast

import numpy as np

from engine._kernels import CandidateSets, approx_possible, bounds, necessary
from engine._validation import check_choice, check_scalar
from engine.choices import PL_METHODS
from engine.exceptions import InvalidInput, SolverError

__all__ = ["possible_from_graph", "witness_for_row", "exact_pair", "METHODS", "MAX_ENUMERATION"]

#: The exact solvers ``possible_from_graph`` accepts.
METHODS = PL_METHODS

#: Largest product of remaining set sizes the exhaustive fallback will enumerate.
MAX_ENUMERATION = 200_000

#: Upper bound on (pairs × labels) cells of the per-chunk greedy temporaries.
CHUNK_CELLS = 1 << 21

#: Integer models put the largest quantity of a pair in [2**44, 2**45).
_SCALE_BITS = 45

_DECISIONS = ("bounds", "greedy", "flow", "cpsat", "enumeration")


# --------------------------------------------------------------------------- entry points


def possible_from_graph(
    idx: np.ndarray,
    w: np.ndarray,
    Y: np.ndarray,
    *,
    method: str = "auto",
    time_limit: float = 10.0,
) -> tuple[np.ndarray, dict[str, float]]:
    """Exact possible labels of every target, with how each pair was decided.

    Parameters
    ----------
    idx : int array of shape (n_targets, k)
        Training rows of each target's neighbours (already validated).
    w : float array of shape (n_targets, k)
        Non-negative vote weights (already validated).
    Y : bool array of shape (n_instances, n_labels)
        Candidate sets (already validated).
    method : {"auto", "flow", "cpsat"}
        ``"auto"``: max-flow for targets with equal positive weights, CP-SAT otherwise;
        ``"flow"``: every target must have equal positive weights; ``"cpsat"``: every pair
        left open by bounds and greedy goes to CP-SAT.
    time_limit : float
        Seconds allowed for one CP-SAT call.

    Returns
    -------
    possible : bool array of shape (n_targets, n_labels)
    stats : dict
        Number of pairs decided by ``"bounds"``, ``"greedy"``, ``"flow"``, ``"cpsat"`` and
        ``"enumeration"`` (they sum to ``n_targets * n_labels``), ``"solver_seconds"`` spent
        in flow, CP-SAT and enumeration, and ``"total_seconds"``.

    Raises
    ------
    InvalidInput
        Unknown ``method``, bad ``time_limit``, or ``method="flow"`` with a target whose
        positive weights differ.
    SolverError
        CP-SAT could not prove an answer within ``time_limit``.
    """
    started = time.perf_counter()
    _check_method(method)
    _check_time_limit(time_limit)
    n_targets, k = idx.shape
    n_labels = Y.shape[1]
    equal = _equal_positive_weights(w)
    if method == "flow" and not equal.all():
        row = int(np.flatnonzero(~equal)[0])
        raise InvalidInput(
            f"method='flow' needs equal positive weights in every target, but w row {row} has "
            f"{sorted(set(w[row][w[row] > 0].tolist()))}; use method='auto' or 'cpsat'"
        )
    stats: dict[str, float] = {name: 0 for name in _DECISIONS}
    stats["solver_seconds"] = 0.0
    possible = np.zeros((n_targets, n_labels), dtype=bool)
    sets = CandidateSets.from_dense(Y)  # once, not per chunk
    chunk = max(1, CHUNK_CELLS // (n_labels * max(k, n_labels)))
    for start in range(0, n_targets, chunk):
        rows = slice(start, min(start + chunk, n_targets))
        possible[rows] = _possible_chunk(idx[rows], w[rows], sets, equal[rows], start, method, time_limit, stats)
    stats["total_seconds"] = time.perf_counter() - started
    return possible, stats


def witness_for_row(
    idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray, label: int, *, time_limit: float = 10.0
) -> np.ndarray | None:
    """A completion of one target under which ``label`` wins, or None when it cannot win.

    Parameters
    ----------
    idx_row : int array of shape (k,)
    w_row : float array of shape (k,)
    Y : bool array of shape (n_instances, n_labels)
    label : int
    time_limit : float
        Seconds allowed for one CP-SAT call.

    Returns
    -------
    completion : int array of shape (k,) or None
        The label each neighbour takes (always one of its candidates); ``label``'s total,
        summed in neighbour order, equals the maximum total.
    """
    _check_time_limit(time_limit)
    idx_2d, w_2d = idx_row[None, :], w_row[None, :]
    smin, smax = bounds(idx_2d, w_2d, Y)
    if not approx_possible(smin, smax)[0, label]:
        return None
    s = smax[0, label]
    tp, lp, sp = np.zeros(1, np.intp), np.array([label]), np.array([s])
    ok, assign = _greedy(idx_2d, w_2d, Y, tp, lp, sp)
    if ok[0]:
        completion = _complete(idx_row, w_row, Y, label, assign[0])
    else:
        equal = bool(_equal_positive_weights(w_2d)[0])
        solver = "flow" if equal else "cpsat"
        found, _ = exact_pair(idx_row, w_row, Y, label, s, solver, time_limit, target=0)
        if found is None:
            return None
        completion = _complete(idx_row, w_row, Y, label, found)
    if not _wins(completion, w_row, label, Y.shape[1]):  # pragma: no cover - internal invariant
        raise SolverError(f"internal error: the witness for label {label} does not verify")
    return completion


# --------------------------------------------------------------------------- validation


def _check_method(method: str) -> None:
    check_choice(method, "method", METHODS)


def _check_time_limit(time_limit: float) -> None:
    check_scalar(time_limit, "time_limit", kind=Real, min_value=0, include_min=False)


def _equal_positive_weights(w: np.ndarray) -> np.ndarray:
    """bool (n_targets,): all positive weights of the target are equal (or there are none)."""
    wmax = w.max(axis=1, initial=0.0)
    wmin = np.where(w > 0, w, np.inf).min(axis=1, initial=np.inf)
    equal: np.ndarray = (wmax == 0) | (wmin == wmax)
    return equal


# --------------------------------------------------------------------------- chunk pipeline


def _possible_chunk(
    idx: np.ndarray,
    w: np.ndarray,
    sets: CandidateSets,
    equal: np.ndarray,
    offset: int,
    method: str,
    time_limit: float,
    stats: dict[str, float],
) -> np.ndarray:
    Y = sets.dense
    smin, smax = bounds(idx, w, sets)
    possible = necessary(smin, smax)
    open_ = approx_possible(smin, smax) & ~possible & ~(_heaviest_rival(idx, w, Y) > smax)
    stats["bounds"] += possible.size - int(open_.sum())
    tp, lp = np.nonzero(open_)
    if tp.size == 0:
        return possible
    sp = smax[tp, lp]
    ok, _ = _greedy(idx, w, Y, tp, lp, sp)
    possible[tp[ok], lp[ok]] = True
    stats["greedy"] += int(ok.sum())
    for t, lam, s in zip(tp[~ok].tolist(), lp[~ok].tolist(), sp[~ok].tolist(), strict=True):
        solver = "flow" if method == "flow" or (method == "auto" and equal[t]) else "cpsat"
        tick = time.perf_counter()
        found, path = exact_pair(idx[t], w[t], Y, lam, s, solver, time_limit, target=offset + t)
        stats["solver_seconds"] += time.perf_counter() - tick
        stats[path] += 1
        possible[t, lam] = found is not None
    return possible


def _heaviest_rival(idx: np.ndarray, w: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """(n_targets, n_labels): largest weight of a neighbour whose set lacks the label.

    Such a neighbour alone gives some rival a total above ``Smax(λ)`` when it exceeds it
    (a float sum of non-negative terms is at least each term), so ``λ`` is impossible.
    """
    out = np.zeros((idx.shape[0], Y.shape[1]))
    for j in range(idx.shape[1]):
        np.maximum(out, np.where(Y[idx[:, j]], 0.0, w[:, j, None]), out=out)
    return out


def _greedy(
    idx: np.ndarray, w: np.ndarray, Y: np.ndarray, tp: np.ndarray, lp: np.ndarray, sp: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised witness search for pairs ``(tp[p], lp[p])`` with budget ``sp[p]``.

    Returns ``ok`` bool (P,) and ``assign`` int (P, k): the label of each non-holder with
    positive weight (``-1`` for holders and zero-weight neighbours). ``ok[p]`` means the
    assignment keeps every rival total, summed in neighbour order, at most ``sp[p]``.
    """
    n_pairs, k = tp.size, idx.shape[1]
    rows = np.arange(n_pairs)
    nb = idx[tp]  # (P, k) training rows
    wp = w[tp]  # (P, k) weights
    active = (wp > 0) & ~Y[nb, lp[:, None]]
    assign = np.full((n_pairs, k), -1, dtype=np.intp)

    # Free-label reduction to a fixed point.
    for _ in range(k):
        reach = np.zeros((n_pairs, Y.shape[1]))
        for j in range(k):
            reach += np.where(active[:, j], wp[:, j], 0.0)[:, None] * Y[nb[:, j]]
        free = reach <= sp[:, None]
        changed = False
        for j in range(k):
            fits = Y[nb[:, j]] & free
            take = active[:, j] & fits.any(axis=1)
            if take.any():
                assign[take, j] = fits[take].argmax(axis=1)
                active[take, j] = False
                changed = True
        if not changed:
            break

    # Heaviest first onto the smallest current total.
    order = np.argsort(np.where(active, -wp, np.inf), axis=1, kind="stable")
    running = np.zeros((n_pairs, Y.shape[1]))
    for r in range(k):
        cols = order[:, r]
        act = active[rows, cols]
        if not act.any():
            break
        cand = Y[nb[rows, cols]]
        choice = np.where(cand, running, np.inf).argmin(axis=1)
        sel = rows[act]
        assign[sel, cols[act]] = choice[act]
        running[sel, choice[act]] += wp[sel, cols[act]]

    # Verify with neighbour-order float sums.
    totals = np.zeros((n_pairs, Y.shape[1]))
    for j in range(k):
        a = assign[:, j]
        m = a >= 0
        totals[rows[m], a[m]] += wp[m, j]
    # numpy's stubs type a reduction along an axis as possibly a scalar.
    ok = cast(np.ndarray, (totals <= sp[:, None]).all(axis=1))
    return ok, assign


# --------------------------------------------------------------------------- one pair


def exact_pair(
    idx_row: np.ndarray,
    w_row: np.ndarray,
    Y: np.ndarray,
    label: int,
    s: float,
    solver: str,
    time_limit: float,
    *,
    target: int,
    reduce: bool = True,
) -> tuple[np.ndarray | None, str]:
    """Decide one (target, label) pair exactly.

    Returns ``(assign, path)``: ``assign`` int (k,) as in :func:`_greedy` (``-1`` for holders
    and zero weights) when ``label`` is possible, else None; ``path`` names the stage that
    decided (``"flow"``, ``"cpsat"`` or ``"enumeration"``).
    """
    sets = Y[idx_row]
    active = (w_row > 0) & ~sets[:, label]
    assign = np.full(idx_row.shape[0], -1, dtype=np.intp)
    if reduce and solver == "cpsat":
        _reduce_free_labels(sets, w_row, s, active, assign)
    jobs = np.flatnonzero(active)
    if solver == "flow":
        found = _flow_assign(sets, w_row, s, jobs)
        path = "flow"
    else:
        found, path = _cpsat_assign(sets, w_row, s, jobs, time_limit, target, label)
    if found is None:
        return None, path
    assign[jobs] = found
    if not _rivals_within(assign, w_row, s, Y.shape[1]):  # pragma: no cover - internal invariant
        raise SolverError(f"internal error: {path} witness for target {target}, label {label} does not verify")
    return assign, path


def _reduce_free_labels(sets: np.ndarray, w_row: np.ndarray, s: float, active: np.ndarray, assign: np.ndarray) -> None:
    """In place: labels that can absorb all their active neighbours take them."""
    while True:
        reach = np.zeros(sets.shape[1])
        for j in np.flatnonzero(active):
            reach[sets[j]] += w_row[j]
        free = reach <= s
        moved = False
        for j in np.flatnonzero(active):
            fits = np.flatnonzero(sets[j] & free)
            if fits.size:
                assign[j] = fits[0]
                active[j] = False
                moved = True
        if not moved:
            return


def _rival_totals(assign: np.ndarray, w_row: np.ndarray, n_labels: int) -> np.ndarray:
    totals = np.zeros(n_labels)
    for j, a in enumerate(assign.tolist()):
        if a >= 0:
            totals[a] += w_row[j]
    return totals


def _rivals_within(assign: np.ndarray, w_row: np.ndarray, s: float, n_labels: int) -> bool:
    return bool((_rival_totals(assign, w_row, n_labels) <= s).all())


def _flow_assign(sets: np.ndarray, w_row: np.ndarray, s: float, jobs: np.ndarray) -> np.ndarray | None:
    """Equal weights: bipartite b-matching by maximum flow; labels for ``jobs`` or None."""
    if jobs.size == 0:
        return np.empty(0, dtype=np.intp)
    from ortools.graph.python import max_flow

    weight = float(w_row[jobs[0]])
    cap, total = 0, 0.0
    while cap < jobs.size and total + weight <= s:
        total += weight
        cap += 1
    if cap == 0:
        return None
    n_jobs, n_labels = jobs.size, sets.shape[1]
    source, sink = n_jobs + n_labels, n_jobs + n_labels + 1
    job_of, label_of = np.nonzero(sets[jobs])
    tails = np.concatenate([np.full(n_jobs, source), job_of, n_jobs + np.arange(n_labels)])
    heads = np.concatenate([np.arange(n_jobs), n_jobs + label_of, np.full(n_labels, sink)])
    caps = np.concatenate([np.ones(n_jobs + job_of.size, np.int64), np.full(n_labels, cap, np.int64)])
    flow = max_flow.SimpleMaxFlow()
    arcs = flow.add_arcs_with_capacity(tails.astype(np.int32), heads.astype(np.int32), caps)
    if flow.solve(source, sink) != flow.OPTIMAL:  # pragma: no cover - tiny int capacities
        raise SolverError("max-flow solver failed on a bipartite assignment graph")
    if flow.optimal_flow() < n_jobs:
        return None
    used = flow.flows(arcs[n_jobs : n_jobs + job_of.size]) > 0
    out = np.empty(n_jobs, dtype=np.intp)
    out[job_of[used]] = label_of[used]
    return out


def _cpsat_assign(
    sets: np.ndarray, w_row: np.ndarray, s: float, jobs: np.ndarray, time_limit: float, target: int, label: int
) -> tuple[np.ndarray | None, str]:
    """Unequal weights: CP-SAT relaxation, then restriction, then enumeration."""
    if jobs.size == 0:
        return np.empty(0, dtype=np.intp), "cpsat"
    weights = w_row[jobs]
    k = w_row.shape[0]
    gamma = (k - 1) * 2.0**-53
    gamma /= 1.0 - gamma
    delta = max(1e-12, 4.0 * gamma)
    biggest = max(float(s), math.fsum(weights.tolist()))
    exponent = _SCALE_BITS - math.frexp(biggest)[1]
    scaled = np.ldexp(weights, exponent)  # exact: multiplication by a power of two
    scaled_s = math.ldexp(float(s), exponent)

    def check(found: np.ndarray) -> bool:
        assign = np.full(k, -1, dtype=np.intp)
        assign[jobs] = found
        return _rivals_within(assign, w_row, s, sets.shape[1])

    relaxed = _cpsat_solve(
        sets[jobs],
        np.floor(scaled).astype(np.int64),
        math.ceil(scaled_s * (1 + delta)) + 1,
        time_limit,
        target,
        label,
    )
    if relaxed is None:
        return None, "cpsat"
    if check(relaxed):
        return relaxed, "cpsat"
    restricted = _cpsat_solve(
        sets[jobs],
        np.ceil(scaled).astype(np.int64),
        math.floor(scaled_s * (1 - delta)) - 1,
        time_limit,
        target,
        label,
    )
    if restricted is not None and check(restricted):
        return restricted, "cpsat"
    size = math.prod(int(n) for n in sets[jobs].sum(axis=1))
    if size > MAX_ENUMERATION:
        raise SolverError(
            f"target {target}, label {label}: CP-SAT's integer models cannot settle a float tie "
            f"and the {size} completions exceed the enumeration limit of {MAX_ENUMERATION}"
        )
    return _enumerate_assign(sets[jobs], weights, s), "enumeration"


def _cpsat_solve(
    sets: np.ndarray, weights: np.ndarray, capacity: int, time_limit: float, target: int, label: int
) -> np.ndarray | None:
    """Integer feasibility: one label per job, per-label load ≤ capacity. None if INFEASIBLE."""
    from ortools.sat.python import cp_model

    n_jobs, n_labels = sets.shape
    if capacity < 0:
        return None  # every job has positive integer weight in the restriction, or none exist
    model = _new_cp_model()
    x: dict[tuple[int, int], Any] = {}
    for j in range(n_jobs):
        choices = np.flatnonzero(sets[j]).tolist()
        lits = [model.new_bool_var(f"x{j}_{lab}") for lab in choices]
        x.update(zip(((j, lab) for lab in choices), lits, strict=True))
        model.add_exactly_one(lits)
    for lab in range(n_labels):
        terms = [(int(weights[j]), x[j, lab]) for j in range(n_jobs) if (j, lab) in x and weights[j] > 0]
        if terms and sum(c for c, _ in terms) > capacity:
            model.add(sum(c * v for c, v in terms) <= capacity)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise SolverError(
            f"CP-SAT returned {solver.status_name(status)} for target {target}, label {label} "
            f"within time_limit={time_limit} s; raise time_limit"
        )
    out = np.empty(n_jobs, dtype=np.intp)
    for (j, lab), var in x.items():
        if solver.boolean_value(var):
            out[j] = lab
    return out


def _new_cp_model() -> Any:
    """An empty CP-SAT model, built without OR-Tools' per-instance camelCase aliases.

    ``CpModel.__init__`` (OR-Tools 9.x) attaches deprecated camelCase aliases of every
    method to each new instance, which costs about a millisecond -- as much as solving
    one of the small models here. The lean subclass skips only that step; if the helper
    base class is not there (another OR-Tools version), the ordinary constructor is used.
    """
    from ortools.sat.python import cp_model

    global _LEAN_MODEL
    if _LEAN_MODEL is None:
        try:
            from ortools.sat.python.cp_model_helper import CpBaseModel

            class _LeanCpModel(cp_model.CpModel):
                def __init__(self) -> None:
                    CpBaseModel.__init__(self, None)

            _LeanCpModel()
            _LEAN_MODEL = _LeanCpModel
        except (ImportError, AttributeError, TypeError):  # pragma: no cover - other OR-Tools
            _LEAN_MODEL = cp_model.CpModel
    return _LEAN_MODEL()


_LEAN_MODEL: Any = None


def _enumerate_assign(sets: np.ndarray, weights: np.ndarray, s: float) -> np.ndarray | None:
    """Depth-first search in neighbour order; partial sums are the exact float totals."""
    n_jobs, n_labels = sets.shape
    choices = [np.flatnonzero(row).tolist() for row in sets]
    wts = weights.tolist()
    totals = [0.0] * n_labels
    out = [0] * n_jobs

    def search(j: int) -> bool:
        if j == n_jobs:
            return True
        for lab in choices[j]:
            before = totals[lab]
            after = before + wts[j]
            if after <= s:
                totals[lab] = after
                out[j] = lab
                if search(j + 1):
                    return True
                totals[lab] = before
        return False

    return np.array(out, dtype=np.intp) if search(0) else None


# --------------------------------------------------------------------------- witnesses


def _complete(idx_row: np.ndarray, w_row: np.ndarray, Y: np.ndarray, label: int, assign: np.ndarray) -> np.ndarray:
    """Fill holders with ``label`` and unassigned zero-weight neighbours with a candidate."""
    sets = Y[idx_row]
    completion = np.asarray(assign, dtype=np.intp).copy()
    completion[sets[:, label]] = label
    rest = completion < 0
    completion[rest] = sets[rest].argmax(axis=1)
    return completion


def _wins(completion: np.ndarray, w_row: np.ndarray, label: int, n_labels: int) -> bool:
    totals = _rival_totals(completion, w_row, n_labels)
    return bool(totals[label] == totals.max())
