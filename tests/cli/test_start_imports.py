"""What a command loads before it does any work (issue 32): no library it does not use.

scikit-learn (with ``scipy.stats``, about a second), Alembic (with Mako and every migration
module) and the DST-PLL classifier were loaded by every command that opens a session; each
is now imported where it is used. These checks name the modules, not a time, so they hold on
any machine: a top-level import added back fails them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Loaded only by the work that needs them: fitting DST-PLL (the Rejects page), Cohen's kappa
#: of an annotator pair, migrating a store.
HEAVY = ("sklearn", "scipy.stats", "alembic", "mako", "engine.dst")

#: Loaded by the commands that make a table (a ranked or labelled export, reading a dataset),
#: not by `winnow session status` nor `winnow answer --from` (0.3-0.5 s of their start).
TABLES = ("pandas", "pyarrow")


def _loaded_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``heavy`` that a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {list(heavy)!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "code",
    [
        # What `winnow session status`, `export` and `answer` import before they open a store.
        "import app.cli.entry, app.cli.session, app.cli.data",
        # What opening a session, its lots, its label statement and its team figures import.
        "import app.service.workbench, app.service.working_state, app.service.team, app.service.model_view",
    ],
    ids=["cli", "workbench"],
)
def test_a_command_starts_without_scikit_learn_or_alembic(code):
    assert _loaded_after(code, HEAVY + TABLES) == []


def test_reading_a_file_of_answers_loads_no_table_library(tmp_path):
    # What `winnow answer --from` runs before it writes: the answers file read by app.io,
    # whose table readers (pandas, pyarrow) are loaded only by the functions that read tables.
    answers = tmp_path / "answers.csv"
    answers.write_text("id,label\nd1,cat\n")
    code = f"from app.io import DataFileError, read_answers\nassert len(read_answers({str(answers)!r})) == 1"
    assert _loaded_after(code, HEAVY + TABLES) == []


def test_opening_a_store_and_a_session_loads_neither(tmp_path):
    # A real store, checked at its revision (no Alembic), and a session opened, decided,
    # summed up and exported as `winnow session status` and `export` do, without fitting
    # DST-PLL or loading scikit-learn.
    from app.service import create_session, import_file
    from app.store import close_stores, open_store
    from tests.ui.conftest import small_csv_bytes

    data = tmp_path / "small.csv"
    data.write_bytes(small_csv_bytes())
    db = str(tmp_path / "w.db")
    store = open_store(db)
    dataset_id, _ = import_file(store, data, name="small", min_rows=2)
    create_session(store, dataset_id=dataset_id, name="s", k=3, weighting="uniform", criterion="apl", target_set="all")
    close_stores()
    code = (
        "from app.store import open_store\n"
        "from app.service import Workbench, session_id_by_name, team_figures\n"
        f"S = open_store({db!r}, create=False)\n"
        "bench = Workbench.open(S, session_id_by_name(S, 's'))\n"
        "bench.summary(); bench.label_statement(); bench.next_queries(5); team_figures(bench, actor=None)\n"
        "bench.ranked_table()"
    )
    # The first open builds the graph (an exact search, scikit-learn's) and the snapshot;
    # every later process reads both and loads neither library.
    _loaded_after(code)
    assert _loaded_after(code) == []
    # What `winnow session status` does: the same without a table, and without pandas.
    status = (
        "from app.store import open_store\n"
        "from app.service import Workbench, session_id_by_name, team_records\n"
        f"S = open_store({db!r}, create=False)\n"
        "bench = Workbench.open(S, session_id_by_name(S, 's'))\n"
        "bench.summary(); bench.label_statement(); bench.next_queries(5); team_records(bench, actor=None)"
    )
    assert _loaded_after(status, HEAVY + TABLES) == []
