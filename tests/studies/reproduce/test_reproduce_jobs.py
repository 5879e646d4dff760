"""``reproduce --jobs 2`` draws each task's figures on the worker that finished the task's last unit, and writes
byte for byte the figures, tables and results of ``--jobs 1`` (which draws them in its own process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flamingo_sim.studies.reproduce.paper import TASKS

ROOT = Path(__file__).resolve().parents[3]
TINY = ["fl.rounds=6", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2", "data.proxy.n_clients=120"]
ENV = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}


def _reproduce(out: Path, jobs: int) -> subprocess.CompletedProcess:
    argv = ["reproduce", "--quick", "--jobs", str(jobs), "--out", str(out), *[a for s in TINY for a in ("--set", s)]]
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], capture_output=True, text=True, env=ENV, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


def _files(out: Path) -> dict[str, bytes]:
    """Every figure (PNG and SVG), the tables and each run's metrics and summary."""
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.suffix in (".png", ".svg")}
    files["tables.json"] = (out / "tables.json").read_bytes()
    for task in TASKS:
        for name in ("metrics.parquet", "summary.json"):
            files[f"runs/{task}/{name}"] = (out / "runs" / task / name).read_bytes()
    return files


@pytest.mark.slow
def test_two_jobs_draw_the_figures_one_job_draws(tmp_path):
    _reproduce(tmp_path / "one", 1)
    _reproduce(tmp_path / "two", 2)
    one, two = _files(tmp_path / "one"), _files(tmp_path / "two")
    figures = [name for name in one if name.startswith("figures/")]
    assert len(figures) == 2 * 8 * len(TASKS)  # 8 figures per task, PNG and SVG
    assert sorted(one) == sorted(two)
    assert [name for name in one if one[name] != two[name]] == []
    # with two jobs, each task's figures were drawn by the worker that finished its last unit (said in that unit's log)
    logs = "".join(p.read_text() for p in (tmp_path / "two" / "runs").rglob("units/*.log"))
    for task in TASKS:
        assert f"{task}: figures drawn in {tmp_path / 'two' / 'figures' / task}" in logs
    assert not list((tmp_path / "two" / "figures").glob(".*.claim"))
