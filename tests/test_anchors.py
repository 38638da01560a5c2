"""The anchors the labelling loop is measured against (benchmarks/anchors.py)."""

import numpy as np

from benchmarks.anchors import conformal_labeling, learn_then_test
from benchmarks.labels_delivered import anchor_read_figures
from benchmarks.replay_lots import Reads


def test_learn_then_test_hands_back_a_clean_pool_and_survives_a_wrong_audit():
    rng = np.random.default_rng(0)
    scores = rng.random(2000)
    audited = rng.choice(2000, size=300, replace=False)
    clean = np.zeros(2000, dtype=bool)
    kept = learn_then_test(scores, clean, audited, target=0.05, confidence=0.9)
    assert kept.sum() == 2000 - 300 and not kept[audited].any()
    one_wrong = clean.copy()
    one_wrong[audited[0]] = True  # the first audit drawn is wrong: the test must still reach a verdict
    assert learn_then_test(scores, one_wrong, audited, target=0.05, confidence=0.9).sum() > 0


def test_learn_then_test_keeps_nothing_from_a_dirty_pool():
    rng = np.random.default_rng(1)
    scores = rng.random(2000)
    wrong = rng.random(2000) < 0.2
    audited = rng.choice(2000, size=300, replace=False)
    assert learn_then_test(scores, wrong, audited, target=0.05, confidence=0.9).sum() == 0


def test_conformal_labeling_is_benjamini_hochberg_on_the_conformal_p_values():
    rng = np.random.default_rng(2)
    scores = rng.random(300)
    wrong = rng.random(300) < 1 - scores  # low scores are more often wrong
    audited = rng.choice(300, size=60, replace=False)
    kept = conformal_labeling(scores, wrong, audited, target=0.1)
    test = np.setdiff1d(np.arange(300), audited)
    nulls = scores[audited][wrong[audited]]
    p = np.array([(1 + (nulls >= scores[j]).sum()) / 61 for j in test])
    ranked = np.sort(p)
    passing = [k for k in range(1, test.size + 1) if ranked[k - 1] <= 0.1 * k / test.size]
    expected = set(test[p <= ranked[passing[-1] - 1]].tolist()) if passing else set()
    assert set(np.flatnonzero(kept).tolist()) == expected
    assert not kept[audited].any()


def test_an_anchor_read_as_often_as_the_loop_is_scored_on_its_first_and_worst_reads_and_what_it_withdraws():
    """Items answered between two reads leave the pool: they are not counted as withdrawn."""
    nothing = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
    reads = Reads()
    reads.anchor_reads = [
        (0, np.arange(10), {"conformal": nothing}),
        (10, np.arange(10), {"conformal": (np.array([1, 2, 3, 4]), np.array([False, False, False, True]))}),
        (20, np.arange(2, 10), {"conformal": (np.array([3, 5]), np.array([False, False]))}),  # 1 answered, 2 and 4 gone
        (30, np.arange(2, 10), {"conformal": (np.array([3, 5, 6]), np.array([False, False, False]))}),
    ]
    assert anchor_read_figures(reads, "average") == {
        "anchor_first_statement": 10,
        "anchor_fdp_first_statement": 0.25,
        "anchor_fdp_max": 0.25,
        "anchor_broken_any_read": True,
        "anchor_withdrawn": 2,
        "anchor_withdrawing_reads": 1,
    }
