"""How close the Sessions page's estimate of the answers needed comes on the bundled sample (issue 46).

For each store key, one campaign on ``sample_data/digits_partial.npz`` is replayed with the loop a
session runs (:class:`benchmarks.replay_lots.Campaign`: the default query order, audits in their
slots, a simulated expert who is always right) until the session is **done**: no item left
undecided and no lot being checked (:func:`app.service.completion.work_is_done`). Along the way,
at the answer counts of ``--at``, the estimate the app shows (:func:`engine.estimates.estimate_answers`,
from the same loop and verdicts) is taken, and compared with the answers the campaign really
needed: until its first model labels were stated, and until it was done.

With ``--app``, the same walk goes through the app itself instead: the sample imported once into
a SQLite store, copied per key with that key as the store's secret, a
:class:`app.service.Workbench` serving the items (suspect items interleaved, as the Query page
does) and recording each answer, and the estimate read as the Sessions page reads it
(:meth:`app.service.Workbench.answers_estimate`).

"Lot's truth" is the same simulation played with the lot's true wrong labels instead of drawing
them (``true_labels``): it differs from the session only in the served slots it draws, so it
shows how closely the simulation follows the loop, apart from the prior.

The estimate draws the lot's error rates with the model's held-out error on the items known when
the lot was frozen (:func:`engine.estimates.held_out_error`, as the app does);
``--prior confidence-sequence`` draws them from the confidence sequence's prior alone, as the
estimate did before. ``--set`` replays another data set of :mod:`benchmarks.labels_delivered`
than the sample (the replay only).

Run (not part of ``make test``; about a second per key, five with ``--app``)::

    python -m benchmarks.done_estimate --keys 20
    python -m benchmarks.done_estimate --keys 20 --app
    python -m benchmarks.done_estimate --keys 40 --prior-world
    python -m benchmarks.done_estimate --keys 20 --set "digits · crowd of 3"
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402 - after the thread limits, which must precede numpy
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from app.service.completion import work_is_done  # noqa: E402
from benchmarks.labels_delivered import pool_by_name  # noqa: E402
from benchmarks.replay_lots import Campaign, Pool  # noqa: E402
from engine.estimates import AnswersEstimate, HeldOutError, estimate_answers, held_out_error  # noqa: E402
from engine.labelling_loop import LoopSettings, VerdictLog  # noqa: E402
from engine.promises import error_rate_prior  # noqa: E402
from engine.strategies import CampaignContext, make_strategy  # noqa: E402

#: Answer counts at which the estimate is read (the Sessions page before the first answer, then
#: as a person might look again).
READ_AT = (0, 50, 100, 150)
#: The goal of issue 46: the estimate within this share of the answers really needed.
WITHIN = 0.25
#: A campaign that is not done after this many answers is cut short (it never was on the sample).
MOST_ANSWERS = 800


@dataclass
class KeyRun:
    """One store key's campaign: the answers it needed and the estimates read on the way."""

    key: int
    first_statement: int | None = None
    done: int | None = None
    audits: int = 0
    estimates: dict[int, AnswersEstimate] = field(default_factory=dict)
    #: The same simulation played with the lot's true wrong labels (no draw): how closely the
    #: simulated served slots follow the session's.
    played_with_truth: dict[int, AnswersEstimate] = field(default_factory=dict)
    #: The first lot: the model's held-out error on the items known when it was frozen, its
    #: size and its truly wrong labels.
    first_lot_held_out: HeldOutError | None = None
    first_lot_size: int = 0
    first_lot_wrong: int = 0


def replay_to_done(
    key: int,
    settings: LoopSettings,
    read_at: tuple[int, ...],
    *,
    prior_world: bool = False,
    data: str = "sample",
    measured_prior: bool = True,
) -> KeyRun:
    """One campaign of the data set ``data`` with store key ``key``, answered until done; with
    ``prior_world``, the expert answers the truth of :func:`world_from_the_prior` instead; with
    ``measured_prior`` the estimate reads the model's held-out error (as the app's does)."""
    pool = world_from_the_prior(key, settings, pool_by_name(data)) if prior_world else pool_by_name(data)
    partial = pool.Y.sum(axis=1) >= 2
    campaign = Campaign(pool, settings, key=np.random.default_rng([key, 7]).bytes(32), session=key)
    rng = np.random.default_rng([key, 9])
    view = campaign.Y.view()
    view.flags.writeable = False
    context = CampaignContext(pool.X, view, pool.idx, pool.w)
    strategy = make_strategy("default", fresh=True)
    strategy.start(context, rng)
    run = KeyRun(key)
    held_out: dict[tuple[int, int], HeldOutError] = {}
    answers = 0
    while answers <= MOST_ANSWERS:
        loop = campaign.loop()
        active = loop.active
        measure = None
        if active is not None and measured_prior:
            lot_key = (active.lot.number, active.lot.frozen_at)
            if lot_key not in held_out:
                candidates = campaign.items_at(active.lot.frozen_at).candidates
                held_out[lot_key] = held_out_error(campaign.model, candidates)
            measure = held_out[lot_key]
        if active is not None and active.lot.number == 1 and run.first_lot_size == 0:
            run.first_lot_held_out = measure
            run.first_lot_size = int(active.lot.items.size)
            run.first_lot_wrong = int((pool.truth[active.lot.items] != active.lot.labels).sum())
        if answers in read_at:
            log = campaign.verdict_log()
            estimate = estimate_answers(loop, log, partial, settings.audit_share, held_out=measure)
            if estimate is not None:
                run.estimates[answers] = estimate
                played = estimate_answers(loop, log, partial, settings.audit_share, true_labels=pool.truth)
                assert played is not None
                run.played_with_truth[answers] = played
        delivered, _, _ = loop.delivered(partial.size)
        if run.first_statement is None and delivered.any():
            run.first_statement = answers
        undecided = int(((campaign.Y.sum(axis=1) >= 2) & ~campaign.answered & ~delivered).sum())
        if work_is_done(undecided, loop):
            run.done = answers
            break
        served = campaign.served(campaign.ranked(strategy, context, rng, loop), loop)
        if served.positions.size == 0:
            break
        item = int(served.positions[0])
        run.audits += int(served.audit[0])
        campaign.answer(item, int(pool.truth[item]))
        strategy.observe(item, campaign.Y[item].copy())
        context.n_answers += 1
        answers += 1
    return run


def world_from_the_prior(key: int, settings: LoopSettings, pool: Pool) -> Pool:
    """``pool`` with its truth redrawn on the first lot's items, so that its labels are as wrong
    as the confidence sequence's prior expects: per layer, a rate drawn from the prior
    (:func:`engine.promises.error_rate_prior`) and each label wrong at that rate, its truth then another
    label of the item's candidate set (every label of the lot right otherwise).

    Where the world follows the estimate's assumption (the confidence sequence's prior alone),
    the estimate should be right as often as it says (done inside the 10–90 % range in 8 keys
    of 10). The known items keep their labels: in this world the model's held-out error on them
    says nothing of the lot, the case where the estimate's measured prior does not fit.
    """
    campaign = Campaign(pool, settings, key=np.random.default_rng([key, 7]).bytes(32), session=key)
    active = campaign.loop().active
    assert active is not None  # the sample's first lot is frozen at the first answer
    lot = active.lot
    rng = np.random.default_rng([key, 11])
    a, b = error_rate_prior(lot.promise.target)
    truth = pool.truth.copy()
    truth[lot.items] = lot.labels
    for layer in range(len(lot.tests)):
        here = np.flatnonzero(lot.layers == layer)
        wrong = here[rng.random(here.size) < rng.beta(a, b)]
        for i in wrong.tolist():
            item = int(lot.items[i])
            others = np.flatnonzero(pool.Y[item] & (np.arange(pool.Y.shape[1]) != lot.labels[i]))
            truth[item] = int(rng.choice(others))
    return Pool(pool.X, pool.Y, truth, pool.idx, pool.w)


def replay_app_to_done(key: int, template: Path, workdir: Path, read_at: tuple[int, ...]) -> KeyRun:
    """One walk of the sample through the app (a store copied from ``template``, its secret set
    from ``key``), answered with the true labels until done."""
    import shutil

    from app.service import Workbench, session_id_by_name
    from app.store import write_transaction
    from app.store.db import close_stores, open_store
    from app.store.labels import AUDIT_ORDER_KEY
    from app.store.models import StoreSecret

    db = workdir / f"key{key}.db"
    shutil.copyfile(template, db)
    Session = open_store(str(db))
    try:
        secret = StoreSecret(name=AUDIT_ORDER_KEY, value=np.random.default_rng([key, 7]).bytes(32))
        write_transaction(Session, lambda s: s.merge(secret))
        bench = Workbench.open(Session, session_id_by_name(Session, "demo"))
        truth = bench.state.true_labels
        assert truth is not None
        partial = np.asarray(bench.state.original_candidates).sum(axis=1) >= 2
        given: list[int] = []
        run = KeyRun(key)
        answers = 0
        while answers <= MOST_ANSWERS:
            if answers in read_at:
                estimate = bench.answers_estimate()
                if estimate is not None:
                    run.estimates[answers] = estimate
                    # The walk only answers items not answered before: its answers are the verdict log.
                    log = VerdictLog(np.asarray(given, dtype=np.int64), truth[np.asarray(given, dtype=np.int64)])
                    share = bench.label_settings.audit_share
                    played = estimate_answers(
                        bench.loop(), log, partial, share, seed=bench.session_id, true_labels=truth
                    )
                    assert played is not None
                    run.played_with_truth[answers] = played
            work = bench.work_status()
            if run.first_statement is None and work.summary.stated:
                run.first_statement = answers
            if work.done:
                run.done = answers
                run.audits = work.summary.audited  # the audited answers the statement reads
                break
            served = bench.queue(top=1)
            if served.size == 0:
                break
            position = int(served[0])
            bench.record("expert", "answer", position=position, label=int(truth[position]))
            given.append(position)
            answers += 1
        return run
    finally:
        close_stores()
        db.unlink(missing_ok=True)


def _app_template(workdir: Path) -> Path:
    """The sample imported into a store, its graph built, once: each key's store is a copy."""
    from app.service import Workbench, ensure_sample_session
    from app.store.db import close_stores, open_store

    template = workdir / "template.db"
    Session = open_store(str(template))
    try:
        Workbench.open(Session, ensure_sample_session(Session))  # builds and stores the graph
    finally:
        close_stores()
    return template


def _off(estimate: int | None, actual: int | None) -> float | None:
    if estimate is None or actual is None or actual == 0:
        return None
    return (estimate - actual) / actual


def tables(runs: list[KeyRun], read_at: tuple[int, ...]) -> list[str]:
    """Markdown: one row per key, then the summary per reading point."""
    head = " | ".join(f"estimate at {a} (10–90 %)" for a in read_at)
    out = [
        f"| key | first statement | done | audits | {head} | lot's truth at {read_at[0]} |",
        "|---|---|---|---|" + "---|" * (len(read_at) + 1),
    ]
    for run in runs:
        cells = []
        for a in read_at:
            e = run.estimates.get(a)
            if e is None:
                cells.append("–")
                continue
            off = _off(e.done, run.done)
            mark = "" if off is None or abs(off) <= WITHIN else " ✗"
            cells.append(f"{e.done} ({e.done_low}–{e.done_high}){mark}")
        played = run.played_with_truth.get(read_at[0])
        cells.append("–" if played is None else f"{played.done} ({played.done_low}–{played.done_high})")
        out.append(f"| {run.key} | {run.first_statement} | {run.done} | {run.audits} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| read at (answers) | keys | estimate of done: median | within 25 % of done | mean abs. error "
        "| done inside the 10–90 % range | estimate of first statement | within 25 % of it "
        "| lot's truth: within 25 % | lot's truth: mean error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in read_at:
        pairs = [(r.estimates[a], r) for r in runs if a in r.estimates and r.done is not None]
        if not pairs:
            continue
        offs = np.asarray([_off(e.done, r.done) for e, r in pairs], dtype=float)
        inside = np.mean([e.done_low <= r.done <= e.done_high for e, r in pairs])
        firsts = [(e.first_statement, r.first_statement) for e, r in pairs if e.first_statement is not None]
        first_offs = [_off(e, f) for e, f in firsts if f is not None and f > a]
        first_cell = f"{int(np.median([e for e, _ in firsts]))}" if firsts else "– (stated already)"
        first_within = (
            f"{sum(abs(o) <= WITHIN for o in first_offs if o is not None)} of {len(first_offs)}" if first_offs else "–"
        )
        played = np.asarray([_off(r.played_with_truth[a].done, r.done) for _, r in pairs], dtype=float)
        out.append(
            f"| {a} | {len(pairs)} | {int(np.median([e.done for e, _ in pairs]))} "
            f"| {int((np.abs(offs) <= WITHIN).sum())} of {len(pairs)} | {np.mean(np.abs(offs)):.0%} "
            f"| {inside:.0%} | {first_cell} | {first_within} "
            f"| {int((np.abs(played) <= WITHIN).sum())} of {len(pairs)} | {np.mean(played):+.0%} |"
        )
    return out


def first_lot_lines(runs: list[KeyRun]) -> list[str]:
    """The first lot's size, its truly wrong labels and the model's held-out error (replay only)."""
    sized = [r for r in runs if r.first_lot_size]
    if not sized:
        return []
    sizes = sorted({r.first_lot_size for r in sized})
    wrong = [r.first_lot_wrong for r in sized]
    measures = sorted({(m.wrong, m.labelled) for r in sized if (m := r.first_lot_held_out) is not None})
    said = (
        f"First lot: {', '.join(map(str, sizes))} labels, {min(wrong)}–{max(wrong)} truly wrong "
        f"(mean {np.mean(wrong) / np.mean([r.first_lot_size for r in sized]):.2%})"
    )
    if measures:
        said += "; the model's held-out error on the known items: " + ", ".join(
            f"{w} wrong of {n} ({w / max(n, 1):.2%})" for w, n in measures
        )
    return [said + ".", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20, help="store keys (one campaign each)")
    parser.add_argument("--first-key", type=int, default=0)
    parser.add_argument("--app", action="store_true", help="walk through the app's Workbench and a store")
    parser.add_argument(
        "--prior-world",
        action="store_true",
        help="replay with the first lot's labels as wrong as the estimate's prior expects (world_from_the_prior)",
    )
    parser.add_argument("--set", dest="data", default="sample", help="the data set to replay (not with --app)")
    parser.add_argument(
        "--prior",
        choices=("measured", "confidence-sequence"),
        default="measured",
        help="the estimate's belief on the lot's error (measured: with the model's held-out error, as the app)",
    )
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables to this file")
    args = parser.parse_args(argv)
    if args.app and (args.data != "sample" or args.prior != "measured" or args.prior_world):
        parser.error("--app walks the sample as the app does: no --set, --prior or --prior-world")
    settings = LoopSettings()
    start = time.perf_counter()
    keys = range(args.first_key, args.first_key + args.keys)
    if args.app:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            template = _app_template(Path(folder))
            runs = [replay_app_to_done(k, template, Path(folder), READ_AT) for k in keys]
    else:
        runs = [
            replay_to_done(
                k,
                settings,
                READ_AT,
                prior_world=args.prior_world,
                data=args.data,
                measured_prior=args.prior == "measured",
            )
            for k in keys
        ]
    lines = [
        f"{len(runs)} store keys on {args.data}{' through the app' if args.app else ''}"
        f"{', its first lot as wrong as the prior expects' if args.prior_world else ''}, "
        f"estimate's prior: {args.prior}, {time.perf_counter() - start:.0f} s; settings: at most "
        f"{settings.max_error:.0%} wrong, {settings.confidence:.0%} confidence, audit share {settings.audit_share:.0%}",
        "",
        *first_lot_lines(runs),
        *tables(runs, READ_AT),
    ]
    print("\n".join(lines))
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
