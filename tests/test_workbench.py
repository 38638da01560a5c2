"""The Workbench keeps its incremental ranking equal to a full recomputation."""

import numpy as np
import pytest

from app.service import Workbench, change_label_settings, create_session, import_file, workbench_suspects
from app.service.suspects import interleave_suspects, suspects_to_serve
from app.store import open_store
from engine.choices import DEFAULT_STRATEGY
from engine.decision_change import DecisionChangeRanker
from engine.exceptions import InvalidInput
from engine.query import query_scores, ranking_order
from engine.winners import label_sets, open_targets
from tests.cli.conftest import SAMPLE


@pytest.fixture
def bench_factory(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    small = tmp_path / "small.csv"
    small.write_text("\n".join(lines[:151]) + "\n")
    session_factory = open_store(tmp_path / "w.db")
    dataset_id, _ = import_file(session_factory, small, name="digits", min_rows=6)

    def make(criterion="apl", name="s", target_set="all"):
        # criterion=None: the session's default (create_session without a criterion).
        chosen = {} if criterion is None else {"criterion": criterion}
        session_id = create_session(
            session_factory, dataset_id=dataset_id, name=name, k=5, weighting="uniform", target_set=target_set, **chosen
        )
        # The ranking alone: no audit slots (a random audit key would put an audit first at times).
        change_label_settings(session_factory, name, audit_share=0.0)
        return Workbench.open(session_factory, session_id)

    return make


def test_random_answers_skips_and_undos_keep_ranking_equal_to_recomputation(bench_factory):
    bench = bench_factory()
    other_tab = Workbench.open(bench.session_factory, bench.session_id)
    rng = np.random.default_rng(0)
    for step in range(25):
        annotator = ["ann", "bob"][step % 2]
        queue = bench.queue()
        kind = rng.choice(["answer", "answer", "answer", "skip", "undo", "none_of_these"])
        if kind == "undo":
            try:
                bench.record(annotator, "undo")
            except InvalidInput as exc:  # nothing of this annotator's left to undo
                assert "undo" in str(exc)
                continue
        else:
            position = int(queue[rng.integers(0, min(5, queue.size))])
            candidates = np.flatnonzero(bench.state.candidates[position])
            label = bench.label_names[int(rng.choice(candidates))] if kind == "answer" else None
            bench.record(annotator, kind, position=position, label=label)
        fresh = Workbench.open(bench.session_factory, bench.session_id)
        np.testing.assert_array_equal(bench.state.candidates, fresh.state.candidates)
        np.testing.assert_array_equal(bench.scores, fresh.scores)
        np.testing.assert_array_equal(
            bench.scores, query_scores(bench.idx, bench.w, np.asarray(bench.state.candidates), criterion="apl")
        )
        np.testing.assert_array_equal(bench.queue(), fresh.queue())
        assert bench.n_open == fresh.n_open
        # Another tab on the same session sees the same answers once, after a refresh.
        other_tab.refresh()
        other_tab.refresh()
        np.testing.assert_array_equal(other_tab.scores, bench.scores)
        assert other_tab.state.n_events == bench.state.n_events


def test_answered_item_leaves_the_queue_and_skipped_goes_last(bench_factory):
    bench = bench_factory()
    first, second = (int(p) for p in bench.queue(top=2))
    bench.record("ann", "skip", position=first)
    assert bench.queue()[-1] == first and bench.queue()[0] == second
    label = bench.label_names[int(np.flatnonzero(bench.state.candidates[second])[0])]
    bench.record("ann", "answer", position=second, label=label)
    assert second not in bench.queue()
    assert bench.state.candidates[second].sum() == 1


def test_skipped_items_come_back_in_skip_order(bench_factory):
    """Whatever an item is (a ranked query or an audit), a skip sends it after every item not
    skipped, behind the items skipped before it: where it comes back says nothing about it."""
    bench = bench_factory()
    skipped = []
    for _ in range(4):
        first = int(bench.queue(top=1)[0])
        bench.record("ann", "skip", position=first)
        skipped.append(first)
        assert bench.ranked_queue()[-len(skipped) :].tolist() == skipped
    bench.record("ann", "undo")
    assert bench.ranked_queue()[-3:].tolist() == skipped[:3]


@pytest.mark.parametrize("target_set", ["all", "unlabelled"])
def test_default_session_ranks_by_decision_change_like_a_fresh_ranker(bench_factory, target_set):
    """A session made without a criterion ranks by DEFAULT_STRATEGY (decision_change); after
    answers, skips, none-of-these and undos its scores are those of a fresh
    DecisionChangeRanker on the derived candidate sets, bit for bit, and so is its queue."""
    assert DEFAULT_STRATEGY == "decision_change"
    bench = bench_factory(criterion=None, target_set=target_set)
    assert bench.config.criterion == "decision_change"
    assert isinstance(bench.ranker, DecisionChangeRanker)
    rng = np.random.default_rng(3)
    kinds_seen = set()
    for step in range(20):
        queue = bench.queue()
        kind = str(rng.choice(["answer", "answer", "skip", "undo", "none_of_these"]))
        annotator = ["ann", "bob"][step % 2]
        if kind == "undo":
            try:
                bench.record(annotator, "undo")
            except InvalidInput:  # nothing of this annotator's left to undo
                continue
        else:
            position = int(queue[rng.integers(0, min(5, queue.size))])
            label = int(rng.choice(np.flatnonzero(bench.state.candidates[position]))) if kind == "answer" else None
            bench.record(annotator, kind, position=position, label=label)
        kinds_seen.add(kind)
        candidates = np.asarray(bench.state.candidates)
        fresh = DecisionChangeRanker(
            bench.idx, bench.w, candidates, targets=bench.targets, random_state=bench.session_id
        )
        np.testing.assert_array_equal(bench.scores, fresh.scores)
        # The ranking's order, the items of lots (served by the audit slots) after the others,
        # with one slot in SUSPECT_EVERY for the suspect items to ask; the skipped items after
        # it (in the order they were skipped: test_skipped_items_come_back_in_skip_order).
        skipped = np.asarray(bench.state.skipped)
        open_items = np.asarray(bench.state.open_items)
        in_lots = bench.loop().in_lots(open_items.size)
        asked = suspects_to_serve(workbench_suspects(bench), bench.state)
        ranked = np.concatenate(
            [ranking_order(fresh.scores, open_items & ~skipped & ~lots) for lots in (in_lots, ~in_lots)]
        )
        head = interleave_suspects(ranked, asked, deferred=skipped | in_lots)
        served = bench.ranked_queue()
        np.testing.assert_array_equal(served[: head.size], head)
        assert sorted(served[head.size :].tolist()) == np.flatnonzero(open_items & skipped).tolist()
        reopened = Workbench.open(bench.session_factory, bench.session_id)
        np.testing.assert_array_equal(reopened.scores, bench.scores)
        assert reopened.n_open == bench.n_open
        # NL and APL are patched after each event on the targets that hold a changed item.
        for kept, recomputed in zip(bench.label_sets(), label_sets(bench.idx, bench.w, candidates), strict=True):
            np.testing.assert_array_equal(kept, recomputed)
    assert kinds_seen == {"answer", "skip", "undo", "none_of_these"}


@pytest.mark.parametrize("criterion", ["most_partial", "random"])
def test_baselines_keep_nl_and_apl_equal_to_a_recomputation(bench_factory, criterion):
    bench = bench_factory(criterion=criterion)
    bench.summary()  # computes NL and APL once; the answers below patch them
    for position in bench.queue(top=6)[::2]:
        label = int(np.flatnonzero(bench.state.candidates[position])[0])
        bench.record("ann", "answer", position=int(position), label=label)
        for kept, recomputed in zip(
            bench.label_sets(), label_sets(bench.idx, bench.w, np.asarray(bench.state.candidates)), strict=True
        ):
            np.testing.assert_array_equal(kept, recomputed)
        effects = bench.answer_effects(int(bench.queue(top=1)[0]))
        assert all(e.changed >= e.settled >= 0 for e in effects)


def test_explain_under_decision_change_counts_the_decisions_an_answer_can_change(bench_factory):
    bench = bench_factory(criterion="decision_change")
    top = int(bench.queue(top=1)[0])
    why = bench.explain(top)
    holds = bench.idx == top
    change = np.where(holds, bench.ranker.terms, 0.0).max(axis=1)
    assert why.n_targets_changed == int((change > 0).sum()) > 0
    assert set(why.targets) == set(bench.targets[change > 0].tolist())
    assert why.targets[0] == int(bench.targets[np.argmax(change)])  # the most moved decision first
    assert why.score == pytest.approx(float(bench.scores[top]))
    assert why.example is not None and why.example.target == why.targets[0]
    assert set(why.example.necessary_after) == {
        bench.label_names[m] for m in np.flatnonzero(bench.state.candidates[top])
    }
    # The open-target counts come from the label sets (this ranker keeps no NL/APL).
    is_open = open_targets(*label_sets(bench.idx, bench.w, np.asarray(bench.state.candidates)))
    assert bench.summary()["open_targets"] == bench.n_open == int(is_open.sum())
    assert bench.touched().shape == (bench.state.n_instances,)


@pytest.mark.parametrize("criterion", ["apl", "most_partial", "random", "decision_change"])
def test_exported_ranking_is_the_query_pages_order_after_answers_skips_and_undos(bench_factory, criterion):
    """One ranking order: the ranked export (rank 1 first) lists the open items exactly in
    the order the Query page asks them (Workbench.queue), skipped items last, whatever
    happened before; `winnow session status` shows the head of the same queue."""
    bench = bench_factory(criterion=criterion)
    rng = np.random.default_rng(7)
    ids = np.array(bench.state.external_ids)
    n_skipped_seen = 0
    for step in range(30):
        queue = bench.queue()
        kind = rng.choice(["answer", "skip", "skip", "undo", "none_of_these"])
        annotator = ["ann", "bob"][step % 3 == 0]
        if kind == "undo":
            try:
                bench.record(annotator, "undo")
            except InvalidInput:  # nothing of this annotator's left to undo
                pass
        else:
            position = int(queue[rng.integers(0, min(8, queue.size))])
            candidates = np.flatnonzero(bench.state.candidates[position])
            label = int(rng.choice(candidates)) if kind == "answer" else None
            bench.record(annotator, str(kind), position=position, label=label)
        n_skipped_seen = max(n_skipped_seen, int((bench.state.skipped & bench.state.open_items).sum()))

        ranked = bench.ranked_table()
        queue = bench.queue()
        assert list(ranked["id"]) == list(ids[queue])
        assert ranked["id"].iloc[0] == bench.state.external_ids[int(bench.queue(top=1)[0])]
        assert list(ranked["rank"]) == list(range(1, len(queue) + 1))
        assert [row["id"] for row in bench.next_queries(5)] == list(ranked["id"].head(5))
        skipped = bench.state.skipped[queue]
        assert not (skipped[:-1] & ~skipped[1:]).any()  # skipped items come last
    assert n_skipped_seen >= 2  # the seed exercises the deferred branch


def test_explain_names_targets_and_a_witness(bench_factory):
    bench = bench_factory()
    top = int(bench.queue(top=1)[0])
    why = bench.explain(top)
    assert why.n_targets_changed == bench.scores[top] > 0
    ex = why.example
    assert ex is not None and set(ex.necessary) <= set(ex.possible)
    if ex.witness_label is not None:
        assert ex.witness_label in ex.possible and ex.witness_label not in ex.necessary
        assert all(label in cands.split("|") for _, label, cands in ex.witness)
    assert set(ex.necessary_after) == {bench.label_names[m] for m in np.flatnonzero(bench.state.candidates[top])}


def test_reject_queue_and_exports(bench_factory):
    bench = bench_factory(criterion="most_partial")
    rejects = bench.rejects()
    assert np.all(np.diff(rejects.margin) >= 0)
    assert set(rejects.positions) == set(np.flatnonzero(bench.state.open_items))
    assert ((rejects.margin > 0) | ~rejects.accepted).all()
    assert (rejects.belief <= rejects.plausibility + 1e-12).all()
    ranked = bench.ranked_table()
    assert len(ranked) == int(bench.state.open_items.sum())
    assert len(bench.labelled_table()) == bench.state.n_instances


def test_reject_queue_after_answers_equals_a_fresh_fit(bench_factory):
    bench = bench_factory()
    bench.rejects()  # fit once, then answers only patch the touched rows
    for position in bench.queue(top=4):
        label = bench.label_names[int(np.flatnonzero(bench.state.candidates[position])[-1])]
        bench.record("ann", "answer", position=int(position), label=label)
    patched = bench.rejects()
    fresh = Workbench.open(bench.session_factory, bench.session_id).rejects()
    np.testing.assert_array_equal(patched.positions, fresh.positions)
    np.testing.assert_allclose(patched.margin, fresh.margin, atol=1e-12)
    np.testing.assert_array_equal(patched.accepted, fresh.accepted)
    np.testing.assert_allclose(patched.belief, fresh.belief, atol=1e-12)
    np.testing.assert_allclose(patched.plausibility, fresh.plausibility, atol=1e-12)


def _bench_with_content(tmp_path, **content):
    from app.store import create_dataset, write_transaction

    session_factory = open_store(tmp_path / "content.db")
    rng = np.random.default_rng(0)
    n = 6
    Y = np.zeros((n, 2), dtype=bool)
    Y[:, 0] = True
    Y[::2, 1] = True

    def work(s):
        dataset = create_dataset(
            s,
            name="d",
            X=rng.normal(size=(n, 2)),
            candidates=Y,
            label_names=["a", "b"],
            external_ids=[f"i{j}" for j in range(n)],
            **content,
        )
        s.flush()
        return dataset.id

    dataset_id = write_transaction(session_factory, work)
    session_id = create_session(
        session_factory, dataset_id=dataset_id, name="s", k=2, weighting="uniform", criterion="apl", target_set="all"
    )
    return Workbench.open(session_factory, session_id)


def test_item_content_resolves_media_under_the_root(tmp_path):
    from app.service import ItemContent

    root = tmp_path / "media"
    (root / "img").mkdir(parents=True)
    bench = _bench_with_content(
        tmp_path,
        texts=["first", None, None, None, "fifth", None],
        media_paths=["img/a.png", "clip.wav", None, None, None, "img/b.png"],
        media_kinds=["image", "audio", None, None, None, "image"],
        links=[None, None, "https://example.org/3", None, None, None],
        media_root=str(root),
    )
    resolved = root.resolve()
    assert bench.item_content(0) == ItemContent("first", resolved / "img" / "a.png", None, None)
    assert bench.item_content(1) == ItemContent(None, None, resolved / "clip.wav", None)
    assert bench.item_content(2) == ItemContent(None, None, None, "https://example.org/3")
    assert bench.item_content(3) == ItemContent(None, None, None, None)
    assert bench.item_content(np.int64(4)).text == "fifth"
    with pytest.raises(IndexError):
        bench.item_content(6)
    with pytest.raises(TypeError):
        bench.item_content(1.0)  # type: ignore[arg-type]
    # A symbolic link inside the root that points outside it is refused when read back.
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"x")
    (root / "img" / "b.png").symlink_to(outside)
    with pytest.raises(InvalidInput, match="outside its media root"):
        bench.item_content(5)


def test_item_content_reads_the_store_once_and_is_all_none_without_content(tmp_path, monkeypatch):
    import app.service.item_content as item_content_module  # the workbench's content seam

    bench = _bench_with_content(tmp_path)
    calls = []
    real = item_content_module.dataset_content
    monkeypatch.setattr(item_content_module, "dataset_content", lambda *a: calls.append(a) or real(*a))
    for position in range(6):
        content = bench.item_content(position)
        assert (content.text, content.image_path, content.audio_path, content.link) == (None, None, None, None)
    assert len(calls) == 1
