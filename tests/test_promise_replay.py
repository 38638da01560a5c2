"""The promises the way a person uses winnow: campaigns replayed with the loop a session runs
(benchmarks.replay_lots over engine.labelling_loop), the statement read after every answer, in
several query orders, by honest people and by people playing against it (skipping the items
whose model label is wrong, or undoing and trying every label).

A check that can fail: the same replay with a plug-in rule (state once the audited share wrong
looks below the target) breaks the promise on a lot that is too wrong, and the checker sees it.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.replay_lots import Campaign, Pool, Reads, replay
from engine.dst_evidence import transductive_decisions
from engine.labelling_loop import LoopSettings
from engine.neighbors import knn_graph
from engine.promises import ConfidencePromise, SetVerdict

TARGET = 0.05
SEEDS = 30


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


def campaigns(pool: Pool, promise: str, *, order: str = "participation", player: str = "honest", budget: int = 200):
    settings = LoopSettings(max_error=TARGET, promise=promise)
    return [replay(pool, order, seed=seed, budget=budget, settings=settings, player=player) for seed in range(SEEDS)]


def first_statement_error(reads: Reads) -> float:
    stated = np.flatnonzero(np.asarray(reads.stated) > 0)
    return float(reads.error[stated[0]]) if stated.size else 0.0


@pytest.fixture(scope="module")
def good() -> Pool:
    return blobs(0.01)


@pytest.fixture(scope="module")
def bad() -> Pool:
    return blobs(0.10, seed=1)


@pytest.mark.parametrize(
    ("order", "player"),
    [("participation", "honest"), ("easy_first", "honest"), ("random", "skipper"), ("participation", "prober")],
)
def test_labels_arrive_and_every_read_keeps_the_promise_with_confidence(good, bad, order, player):
    runs = campaigns(good, "confidence", order=order, player=player)
    if player != "skipper":  # a skipper holds the audits back: it may well be stated nothing
        assert sum(max(r.stated) > 0 for r in runs) >= SEEDS // 2  # not vacuous: statements are made
    for pool_runs in (runs, campaigns(bad, "confidence", order=order, player=player)):
        broken = sum(r.broken(TARGET) for r in pool_runs)
        assert broken / SEEDS <= 0.1 + 0.1  # 1 - confidence, with the noise of 30 runs
        assert sum(sum(r.withdrawn) for r in pool_runs) == 0  # labels once stated stay stated


@pytest.mark.parametrize("player", ["honest", "skipper"])
def test_the_average_promise_holds_at_the_first_statement_and_at_the_end(good, bad, player):
    for pool in (good, bad):
        runs = campaigns(pool, "average", player=player)
        assert np.mean([first_statement_error(r) for r in runs]) <= TARGET + 0.02
        assert np.mean([r.error[-1] for r in runs]) <= TARGET + 0.02
        assert np.mean([r.error.max() for r in runs]) <= TARGET + 0.02  # the reader who stops at the worst read
        assert sum(sum(r.withdrawn) for r in runs) == 0


def test_a_plug_in_rule_breaks_the_promise_and_the_check_sees_it(bad, monkeypatch):
    """Certify when the audited share wrong is at most the target after 10 audits: what a reader
    of a single estimate would do. On a lot one item in ten wrong it states wrong labels."""

    def plug_in(self, parts: tuple[SetVerdict, ...], size: int) -> tuple[bool, bool]:
        audited, wrong = sum(v.audited for v in parts), sum(v.wrong for v in parts)
        return audited >= 10 and wrong <= self.target * audited, False

    monkeypatch.setattr(ConfidencePromise, "judge", plug_in)
    runs = campaigns(bad, "confidence", budget=120)
    assert sum(r.broken(TARGET) for r in runs) / SEEDS > 0.3


def test_the_easy_first_margins_kept_between_answers_equal_dst_pll_on_every_set(good):
    """The replay decides again only the rows an answer or an undo touches; any other row's
    margin is what DST-PLL gives on all the sets."""
    campaign = Campaign(good, LoopSettings(max_error=TARGET), key=b"k" * 32)
    rng = np.random.default_rng(3)
    for item in rng.choice(good.Y.shape[0], size=40, replace=False):
        campaign.answer(int(item), int(good.truth[item]))
        if rng.random() < 0.3:
            campaign.undo()
        expected = transductive_decisions(campaign.Y, good.idx, random_state=0)[2]
        np.testing.assert_array_equal(campaign.margins(), expected)
