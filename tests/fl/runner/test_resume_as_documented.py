"""The README's multi-seed resume, end to end (issue 32): ``run NAME --seeds 3 --out DIR``, Ctrl-C, then
the README's ``run NAME --out DIR --seeds 3 --resume`` and the printed "continue it with" line, run as
printed, both finish with metrics identical to the uninterrupted run; the same with ``--jobs 2``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
#: 40 rounds a unit: the interrupt must land while a unit is part-way (at 4 rounds, a loaded CI machine let both
#: workers of --jobs 2 finish their units between the first checkpoint and the SIGINT, so nothing was left to resume)
TINY = ["fl.rounds=40", "checkpoint_every=1", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2",
        "data.proxy.n_clients=100"]
SETS = [a for s in TINY for a in ("--set", s)]
ENV = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
CLI = [sys.executable, "-m", "flamingo_sim"]


def _command(line: str) -> list[str]:
    """A printed ``flamingo-sim ...`` command line, as the shell would split it."""
    words = shlex.split(line)
    assert words[0] == "flamingo-sim", line
    return [*CLI, *words[1:]]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> pd.DataFrame:
    cwd = tmp_path_factory.mktemp("whole")
    _run([*CLI, "run", "openimage_mobilenet", "--seeds", "3", "--out", "runs/whole", *SETS], cwd)
    return pd.read_parquet(cwd / "runs" / "whole" / "metrics.parquet")


def _interrupt(cwd: Path, extra: list[str]) -> str:
    """``flamingo-sim run openimage_mobilenet --seeds 3 --out runs/mnv2r ...`` stopped by SIGINT once a
    unit has checkpointed; the line it printed on stopping."""
    out = cwd / "runs" / "mnv2r"
    proc = subprocess.Popen([*CLI, "run", "openimage_mobilenet", "--seeds", "3", "--out", "runs/mnv2r", *SETS, *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd)
    deadline = time.monotonic() + 300
    while not list((out / "checkpoints").glob("*.pt")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert not (out / "summary.json").exists()  # stopped before the end
    partial = [json.loads(f.read_text()) for f in (out / "units").glob("*.json")]
    assert any(not u["done"] and max(r["round"] for r in u["rows"]) >= 1 for u in partial), "no unit was part-way at the interrupt"
    return err.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]], ids=["jobs1", "jobs2"])
def test_the_readme_resume_and_the_printed_line_both_continue_to_the_same_metrics(whole, tmp_path, jobs):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    last = _interrupt(first, jobs)
    hint = "flamingo-sim run: interrupted (SIGINT); continue it with: "
    assert last == hint + shlex.join(["flamingo-sim", "run", "openimage_mobilenet", "--seeds", "3", "--out", "runs/mnv2r",
                                      *SETS, *jobs, "--resume"])
    shutil.copytree(first, second)  # the same interrupted run, continued two ways

    # the README's command (with the same --set options) ...
    proc = _run([*CLI, "run", "openimage_mobilenet", "--out", "runs/mnv2r", "--seeds", "3", "--resume", *SETS, *jobs], first)
    assert "resuming from round" in proc.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(first / "runs" / "mnv2r" / "metrics.parquet"), whole, check_exact=True)
    # ... and the line it printed, run as printed
    _run(_command(last[len(hint):]), second)
    pd.testing.assert_frame_equal(pd.read_parquet(second / "runs" / "mnv2r" / "metrics.parquet"), whole, check_exact=True)
