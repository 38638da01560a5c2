"""engine.distributed on a real two-process LocalCluster equals the single-process path."""

import subprocess
import sys

import numpy as np
import pytest

from benchmarks.synthetic import clustered_problem
from engine import InvalidInput
from engine.distributed import (
    dask_client,
    distributed_label_sets,
    distributed_possible_labels,
    distributed_predict_with_reject,
    distributed_query_scores,
    distributed_query_scores_from_chunks,
    distributed_vote_bounds,
)
from engine.dst import DstPllClassifier
from engine.query import query_scores
from engine.winners import approx_possible_labels, necessary_labels, possible_labels, vote_bounds


@pytest.fixture(scope="module")
def client():
    with dask_client(n_workers=2) as c:
        yield c


@pytest.fixture(scope="module", params=["uniform", "random"])
def problem(request):
    idx, w, Y, _ = clustered_problem(
        800, k=7, n_labels=6, partial_rate=0.5, cluster_size=20, seed=3, weights=request.param
    )
    return idx, w, Y


def test_cluster_has_two_single_threaded_worker_processes(client):
    assert sorted(client.nthreads().values()) == [1, 1]


def test_bounds_and_label_sets_equal_single_process(client, problem):
    idx, w, Y = problem
    smin, smax = distributed_vote_bounds(idx, w, Y, client=client, chunk_size=400)
    ref_min, ref_max = vote_bounds(idx, w, Y)
    np.testing.assert_array_equal(smin, ref_min)
    np.testing.assert_array_equal(smax, ref_max)
    nl, apl = distributed_label_sets(idx, w, Y, client=client, chunk_size=333)
    np.testing.assert_array_equal(nl, necessary_labels(idx, w, Y))
    np.testing.assert_array_equal(apl, approx_possible_labels(idx, w, Y))
    assert (nl != apl).any(), "the problem should have open targets (NL != APL)"


@pytest.mark.parametrize("criterion", ["apl", "participation", "most_partial"])
def test_query_scores_equal_single_process(client, problem, criterion):
    idx, w, Y = problem
    scores = distributed_query_scores(idx, w, Y, criterion=criterion, client=client, chunk_size=256)
    np.testing.assert_array_equal(scores, query_scores(idx, w, Y, criterion=criterion))


def test_pl_scores_and_exact_possible_labels_equal_single_process(client):
    idx, w, Y, _ = clustered_problem(200, k=5, n_labels=4, partial_rate=0.5, cluster_size=15, seed=5)
    np.testing.assert_array_equal(
        distributed_query_scores(idx, w, Y, criterion="pl", client=client, chunk_size=64),
        query_scores(idx, w, Y, criterion="pl"),
    )
    np.testing.assert_array_equal(
        distributed_possible_labels(idx, w, Y, client=client, chunk_size=64), possible_labels(idx, w, Y)
    )


def test_scores_from_chunks_built_on_the_workers(client, problem):
    idx, w, Y = problem
    bounds = range(0, len(idx), 300)
    chunks = (client.submit(lambda a, b: (idx[a:b], w[a:b]), a, a + 300) for a in bounds)
    scores = distributed_query_scores_from_chunks(chunks, Y, client=client, max_in_flight=1)
    np.testing.assert_array_equal(scores, query_scores(idx, w, Y))


@pytest.mark.parametrize("random_state", [0, "generator"])
def test_dst_pll_predictions_and_tie_breaking_equal_single_process(client, random_state):
    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, size=(150, 2)).astype(float)  # many exact ties
    Y = rng.random((150, 4)) < 0.4
    Y[np.arange(150), rng.integers(0, 4, 150)] = True
    targets = rng.integers(0, 3, size=(120, 2)).astype(float)
    if random_state == "generator":
        ours, theirs = np.random.default_rng(7), np.random.default_rng(7)
        clf = DstPllClassifier(n_neighbors=5, random_state=ours).fit(X, Y)
        labels, accepted = distributed_predict_with_reject(clf, targets, client=client, chunk_size=50)
        clf.random_state = theirs
        DstPllClassifier(n_neighbors=5, random_state=theirs).fit(X, Y)
        ref = clf.predict_with_reject(targets)
        assert ours.random() == theirs.random(), "the Generator must be advanced as far"
    else:
        clf = DstPllClassifier(n_neighbors=5, random_state=random_state).fit(X, Y)
        labels, accepted = distributed_predict_with_reject(clf, targets, client=client, chunk_size=50)
        ref = clf.predict_with_reject(targets)
    np.testing.assert_array_equal(labels, ref[0])
    np.testing.assert_array_equal(accepted, ref[1])


def test_bad_input(client, problem):
    idx, w, Y = problem
    with pytest.raises(InvalidInput, match="criterion must be one of"):
        distributed_query_scores(idx, w, Y, criterion="entropy", client=client)
    with pytest.raises(InvalidInput, match="chunk_size must be >= 1"):
        distributed_label_sets(idx, w, Y, client=client, chunk_size=0)
    with pytest.raises(InvalidInput, match="give either a scheduler address or n_workers"):
        with dask_client():
            pass
    with pytest.raises(TypeError, match="fitted DstPllClassifier"):
        distributed_predict_with_reject(object(), np.ones((2, 2)), client=client)


def test_engine_imports_without_dask():
    code = (
        "import sys; sys.modules['dask'] = None; sys.modules['distributed'] = None\n"
        "import engine, engine.distributed, engine.neighbors, engine.query\n"
        "from engine.distributed import distributed_query_scores\n"
        "import numpy as np\n"
        "try:\n"
        "    distributed_query_scores(np.zeros((1, 1), int), np.ones((1, 1)), np.ones((1, 2), bool))\n"
        "except engine.InvalidInput as e: print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install winnow[scale]" in result.stdout
