"""Every script in benchmarks/ runs: ``--smoke`` (seconds, tiny sizes, the same code path) in a
subprocess, so a change that breaks a benchmark fails CI.

The scripts are found by globbing, so one added later is run too; one without ``--smoke`` fails
(argparse rejects the option). Each must exit 0 and print its ratio against the baseline it
measured in the same run (a number followed by ``x``, e.g. ``3.2x``), and must leave the committed
results in ``benchmarks/results`` as they were.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
RATIO = re.compile(r"\b\d+(?:\.\d+)?x\b")


def _results() -> dict[str, bytes]:
    folder = ROOT / "benchmarks" / "results"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 7, [p.name for p in SCRIPTS]


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_benchmark_smoke(script: Path, tmp_path: Path):
    before = _results()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # cwd: an empty folder, so that nothing a script writes by a relative path lands in the checkout
    done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{script.name} --smoke exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert RATIO.search(done.stdout), f"{script.name} --smoke printed no ratio (e.g. '3.2x'):\n{done.stdout[-3000:]}"
    assert _results() == before, f"{script.name} --smoke changed benchmarks/results"
