import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data" / "digits_partial.csv"
WINNOW = Path(sys.executable).parent / "winnow"


def run_winnow(*args, cwd=None, check=True):
    """Run the installed `winnow` entry point in a subprocess, as a user would."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    result = subprocess.run(
        [str(WINNOW), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"winnow {' '.join(map(str, args))} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture
def winnow():
    return run_winnow


@pytest.fixture
def small_csv(tmp_path):
    """The first 120 sample digits: fast to rank, same format as the bundled file."""
    lines = SAMPLE.read_text().splitlines()
    path = tmp_path / "small.csv"
    path.write_text("\n".join(lines[:121]) + "\n")
    return path
