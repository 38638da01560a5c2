"""What the annotator's view asks of the Workbench: why an item is asked (its neighbours and
what each answer would settle), and the keyboard keys of a session."""

from __future__ import annotations

import numpy as np
import pytest

from app.service import AnswerEffect, Workbench, create_session, import_file
from app.store import InvalidRecord, default_hotkeys, open_store
from engine.neighbors import knn_graph
from engine.winners import label_sets
from tests.cli.conftest import SAMPLE


@pytest.fixture
def bench_factory(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    small = tmp_path / "small.csv"
    small.write_text("\n".join(lines[:151]) + "\n")
    session_factory = open_store(tmp_path / "w.db")
    dataset_id, _ = import_file(session_factory, small, name="digits", min_rows=6)

    def make(criterion="apl", name="s", target_set="all"):
        session_id = create_session(
            session_factory,
            dataset_id=dataset_id,
            name=name,
            k=5,
            weighting="uniform",
            criterion=criterion,
            target_set=target_set,
        )
        return Workbench.open(session_factory, session_id)

    return make


def open_and_sets(bench: Workbench) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NL and APL of every target from scratch, and which targets are open (NL ≠ APL)."""
    necessary, possible = label_sets(bench.idx, bench.w, np.asarray(bench.state.candidates))
    return necessary, possible, (necessary != possible).any(axis=1)


@pytest.mark.parametrize("criterion", ["apl", "random"])
def test_each_answers_effect_is_what_recording_it_does(bench_factory, criterion):
    """The counts are computed on the few targets the item touches; recording each answer and
    recomputing every target's label sets gives the same numbers."""
    bench = bench_factory(criterion=criterion)
    for position in bench.queue(top=4):
        position = int(position)
        effects = bench.answer_effects(position)
        labels = np.flatnonzero(bench.state.candidates[position])
        assert [e.label_index for e in effects] == list(labels)
        nl, apl, was_open = open_and_sets(bench)
        for n, effect in enumerate(effects):
            trial = Workbench.open(bench.session_factory, bench.session_id)
            trial.record(f"trial{n}", "answer", position=position, label=effect.label_index)
            after_nl, after_apl, now_open = open_and_sets(trial)
            assert effect.settled == int((was_open & ~now_open).sum())
            assert effect.changed == int(((after_nl != nl) | (after_apl != apl)).any(axis=1).sum())
            trial.record(f"trial{n}", "undo")
        if criterion == "apl":  # the apl score counts the targets some answer changes
            assert any(e.changed for e in effects) == (bench.scores[position] > 0)


def test_the_neighbours_are_the_items_k_nearest_with_their_current_sets(bench_factory):
    bench = bench_factory(target_set="unlabelled")
    X = bench.state.X
    idx, _ = knn_graph(X, k=5, weights="uniform")
    labelled = np.flatnonzero(bench.state.original_candidates.sum(axis=1) == 1)
    partial = int(bench.queue(top=1)[0])
    for position in (partial, int(labelled[0])):  # a target, and an item outside the targets
        neighbours = bench.neighbours(position)
        assert [n.position for n in neighbours] == list(idx[position])
        assert position not in [n.position for n in neighbours]
        first = neighbours[0]
        assert first.item_id == bench.state.external_ids[first.position]
        assert list(first.candidates) == [
            bench.label_names[m] for m in np.flatnonzero(bench.state.candidates[first.position])
        ]


def test_the_explanation_carries_neighbours_and_effects(bench_factory):
    bench = bench_factory()
    position = int(bench.queue(top=1)[0])
    why = bench.explain(position, while_auditing=True)
    assert [n.position for n in why.neighbours] == [n.position for n in bench.neighbours(position)]
    assert why.effects == bench.answer_effects(position)
    # While audits are served, an annotator sees the neighbours only: effects would tell an
    # audit from a ranked item.
    assert bench.lot_audits_served()
    shown = bench.explain(position)
    assert shown.effects == [] and [n.position for n in shown.neighbours] == [n.position for n in why.neighbours]


@pytest.mark.parametrize(
    ("settled", "changed", "words"),
    [
        (12, 12, "12 nearby items become certain"),
        (1, 1, "1 nearby item becomes certain"),
        (2, 5, "2 nearby items become certain and 3 more narrow down"),
        (0, 1, "1 nearby item narrows down"),
        (0, 4, "4 nearby items narrow down"),
        (0, 0, "no nearby item changes"),
    ],
)
def test_an_effect_in_plain_words(settled, changed, words):
    assert AnswerEffect("cat", 0, settled=settled, changed=changed).outcome == words


def test_a_session_uses_the_default_keys_until_it_sets_its_own(bench_factory):
    bench = bench_factory()
    labels = list(bench.label_names)
    assert labels == [str(d) for d in range(10)]
    assert bench.hotkeys == default_hotkeys(labels) == {d: d for d in labels}
    assert bench.set_hotkeys({"0": "q", "1": "w"}) == {"0": "q", "1": "w"}
    assert bench.hotkeys == {"0": "q", "1": "w"}
    assert Workbench.open(bench.session_factory, bench.session_id).hotkeys == {"0": "q", "1": "w"}
    with pytest.raises(InvalidRecord, match="key 'u' of '2' is the key of the action 'undo'"):
        bench.set_hotkeys({"2": "u"})
    assert bench.hotkeys == {"0": "q", "1": "w"}
    assert bench.set_hotkeys(None) == default_hotkeys(labels)
    assert bench.hotkeys == default_hotkeys(labels)
