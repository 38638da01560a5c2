"""The promise the way a person uses winnow: campaigns replayed with the app's own lot logic
(benchmarks.replay_lots), the statement read after every answer.

A check that can fail: the same replay with a plug-in rule (state when the audited prefix looks
good enough) breaks the promise on a lot that is too wrong, and the checker sees it."""

from __future__ import annotations

import numpy as np
import pytest

import app.service.lots as service_lots
from app.store import LabelSettings
from benchmarks.replay_lots import Pool, replay
from engine.lots import LotVerdict, audit_prefix
from engine.neighbors import knn_graph

TARGET = 0.05
SEEDS = 24


def blobs(flipped: float, seed: int = 0) -> Pool:
    """Three well separated blobs of 150 items, four in five with a second candidate; a share
    ``flipped`` of the items truly belong to another class than their blob's (the model,
    voting with the blob, gets them wrong with a high margin)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    blob = np.repeat(np.arange(3), 150)
    X = centres[blob] + rng.normal(scale=0.7, size=(blob.size, 2))
    truth = blob.copy()
    off = rng.random(blob.size) < flipped
    truth[off] = (blob[off] + rng.integers(1, 3, size=int(off.sum()))) % 3
    Y = np.zeros((blob.size, 3), dtype=bool)
    Y[np.arange(blob.size), truth] = True
    partial = rng.random(blob.size) < 0.8
    other = np.where(off, blob, (truth + rng.integers(1, 3, size=blob.size)) % 3)
    Y[np.flatnonzero(partial), other[partial]] = True
    idx, w = knn_graph(X, k=10)
    return Pool(X, Y, truth, idx, w)


def campaigns(pool: Pool, promise: str, budget: int = 220) -> list:
    settings = LabelSettings(max_error=TARGET, promise=promise)
    return [replay(pool, "participation", seed=seed, budget=budget, settings=settings) for seed in range(SEEDS)]


def first_statement_error(reads) -> float:
    delivered = np.asarray(reads.delivered)
    stated = np.flatnonzero(delivered > 0)
    return float(reads.error[stated[0]]) if stated.size else 0.0


@pytest.fixture(scope="module")
def good() -> Pool:
    return blobs(0.01)


@pytest.fixture(scope="module")
def bad() -> Pool:
    return blobs(0.10, seed=1)


def test_labels_arrive_and_every_read_keeps_the_promise_with_confidence(good):
    runs = campaigns(good, "confidence")
    stated = sum(np.asarray(r.delivered).max() > 0 for r in runs)
    broken = sum(r.broken(TARGET) for r in runs)
    assert stated >= SEEDS // 2  # the check is not vacuous: statements are made
    assert broken / SEEDS <= 0.1 + 0.1  # 1 - confidence, with the noise of 24 runs


def test_a_lot_too_wrong_is_not_stated_with_confidence(bad):
    runs = campaigns(bad, "confidence")
    assert sum(r.broken(TARGET) for r in runs) / SEEDS <= 0.1 + 0.1


def test_the_average_promise_holds_when_exporting_at_the_first_statement(good, bad):
    for pool in (good, bad):
        runs = campaigns(pool, "average")
        mean_at_first = np.mean([first_statement_error(r) for r in runs])
        mean_at_end = np.mean([r.error[-1] for r in runs])
        assert mean_at_first <= TARGET + 0.02 and mean_at_end <= TARGET + 0.02


def test_a_plug_in_rule_breaks_the_promise_and_the_check_sees_it(bad, monkeypatch):
    """Certify when the audited prefix's error is at most the target after 10 audits: what a
    reader of a single estimate would do. On a lot one item in ten wrong it states wrong labels."""

    def plug_in(outcomes, answered, *, target, alpha, prior_target=None, promise="confidence", countdown=True):
        outcomes, answered = np.asarray(outcomes), np.asarray(answered)
        n, k = audit_prefix(outcomes)
        delivered = int((~answered).sum())
        certified = n >= 10 and k <= target * n and delivered > 0
        return LotVerdict(
            outcomes.size, n, k, 0, delivered, 0, 0, k / max(n, 1), certified, False, 0 if certified else 1
        )

    monkeypatch.setattr(service_lots, "lot_verdict", plug_in)
    runs = campaigns(bad, "confidence", budget=120)
    assert sum(r.broken(TARGET) for r in runs) / SEEDS > 0.3
