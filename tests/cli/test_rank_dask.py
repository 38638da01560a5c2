import pandas as pd

from tests.cli.conftest import SAMPLE


def test_rank_over_a_local_dask_cluster_writes_the_same_csv(winnow, tmp_path):
    lines = SAMPLE.read_text().splitlines()
    data = tmp_path / "digits200.csv"
    data.write_text("\n".join(lines[:201]) + "\n")
    plain, dasked = tmp_path / "plain.csv", tmp_path / "dask.csv"
    winnow("rank", data, "--criterion", "apl", "-k", "10", "-o", plain, cwd=tmp_path)
    winnow("rank", data, "--criterion", "apl", "-k", "10", "-o", dasked, "--workers", "2", cwd=tmp_path)
    assert dasked.read_bytes() == plain.read_bytes()
    assert len(pd.read_csv(dasked)) > 0


def test_dask_options_are_file_mode_only(winnow, tmp_path):
    result = winnow("rank", "--session", "s", "--workers", "2", "-o", tmp_path / "x.csv", check=False)
    assert result.returncode != 0 and "--workers goes with a FILE" in result.stdout + result.stderr
