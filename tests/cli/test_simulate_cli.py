"""`winnow simulate` through the installed entry point, as a user runs it."""

import pandas as pd
import pytest

from engine.simulate import RESULT_COLUMNS
from tests.cli.conftest import SAMPLE


@pytest.fixture
def digits_200(tmp_path):
    lines = SAMPLE.read_text().splitlines()
    path = tmp_path / "digits200.csv"
    path.write_text("\n".join(lines[:201]) + "\n")
    return path


def test_simulate_writes_results_and_plot(winnow, digits_200, tmp_path):
    results, curves = tmp_path / "results.csv", tmp_path / "curves.png"
    run = winnow(
        "simulate",
        digits_200,
        "-s",
        "apl,random",
        "--budget",
        "20",
        "--batch",
        "10",
        "--seeds",
        "2",
        "-k",
        "5",
        "--epsilon",
        "0.1",
        "-o",
        results,
        "--plot",
        curves,
        cwd=tmp_path,
    )
    table = pd.read_csv(results)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert len(table) == 2 * 2 * 3  # strategies x seeds x (start + 2 batches)
    assert set(table["strategy"]) == {"apl", "random"} and set(table["seed"]) == {0, 1}
    assert table.groupby(["strategy", "seed"])["n_answers"].apply(list).map(lambda a: a == [0, 10, 20]).all()
    assert table["accuracy"].between(0, 1).all() and table["reject_rate"].between(0, 1).all()
    assert curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Wrote 12 rows" in run.stdout and "apl" in run.stdout


def test_unknown_strategy_exits_2_with_one_line(winnow, digits_200, tmp_path):
    result = winnow("simulate", digits_200, "-s", "apl,smartest", "-o", tmp_path / "r.csv", check=False, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: --strategies must be one of apl, pl, participation, most_partial, random")
    assert lines[0].endswith("; got 'smartest'")
    assert not (tmp_path / "r.csv").exists()


# The remaining checks call the same entry function in-process (one interpreter start is
# most of a subprocess's cost).


def _main(argv, capsys):
    from app.cli import main

    try:
        main(argv)
        code = 0  # click returns normally after --help when not in standalone mode
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_simulate_help_has_an_example(capsys):
    code, out, _ = _main(["simulate", "--help"], capsys)
    assert code == 0 and "Example:" in out and "winnow simulate sample_data" in out and "--plot" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "0"], "--budget must be at least 1; got 0"),
        (["--test-fraction", "1"], "--test-fraction must be strictly between 0 and 1"),
        (["--n-jobs", "0"], "--n-jobs must be at least 1; got 0"),
        (["--eval-k", "0"], "--eval-k must be at least 1; got 0"),
        (["-s", "default,apl,default"], "--strategies names a strategy twice"),
        ("NO_TRUTH", "has no true labels"),
    ],
)
def test_simulate_user_errors_exit_2_with_one_line(digits_200, tmp_path, capsys, args, message):
    data = digits_200
    if args == "NO_TRUTH":
        table = pd.read_csv(digits_200).drop(columns=["true_label"])
        data = tmp_path / "no_truth.csv"
        table.to_csv(data, index=False)
        args = []
    code, _, err = _main(["simulate", str(data), *args, "-o", str(tmp_path / "r.csv")], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (tmp_path / "r.csv").exists()


def test_default_strategy_and_evaluation_options(winnow, digits_200, tmp_path):
    results = tmp_path / "results.csv"
    winnow(
        "simulate",
        digits_200,
        "-s",
        "default,decision_change",
        "--budget",
        "10",
        "--batch",
        "5",
        "--seeds",
        "2",
        "-k",
        "5",
        "--eval-k",
        "7",
        "--no-dst",
        "--initial-labels",
        "20",
        "--n-jobs",
        "2",
        "-o",
        results,
        cwd=tmp_path,
    )
    run = winnow(
        "simulate",
        digits_200,
        "-s",
        "default",
        "--budget",
        "5",
        "--batch",
        "5",
        "--seeds",
        "1",
        "-k",
        "5",
        "--no-dst",
        "-o",
        tmp_path / "one.csv",
        cwd=tmp_path,
    )
    assert "s/step" in run.stdout and "set-up s" in run.stdout
    table = pd.read_csv(results, keep_default_na=False, na_values=[""])
    assert set(table["strategy"]) == {"default", "decision_change"}
    assert table["dst_accuracy"].isna().all()
    picked = table.loc[table.step > 0, "picked"].str.split()
    assert picked.map(len).eq(5).all()
