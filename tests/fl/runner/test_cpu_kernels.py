"""The same numbers on any x86-64 CPU (issue 22): the main job, shortened, under every ``ATEN_CPU_CAPABILITY``
this machine supports gives identical metrics and summary with the portable kernels (the proxy task's default),
and differs with the native ones (so the comparison can fail)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[3]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"
SHORT = ["fl.rounds=10", "fl.eval_every=2"]
#: ATen's CPU capabilities on x86-64, narrowest first.
LADDER = ("default", "avx2", "avx512")


def _supported() -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}  # the CPU's own widest, whatever this process runs
    top = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         capture_output=True, text=True, check=True, env=env).stdout.strip().lower()
    return list(LADDER[: LADDER.index(top) + 1]) if top in LADDER else []


def _run(out: Path, capability: str, *extra: str) -> tuple[pd.DataFrame, dict, str]:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    args = [a for kv in (*SHORT, *extra) for a in ("--set", kv)]
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", "run", str(EXP), "--out", str(out), *args],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    return pd.read_parquet(out / "metrics.parquet"), summary, proc.stdout


@pytest.mark.slow
def test_portable_kernels_give_identical_results_under_every_capability(tmp_path):
    caps = _supported()
    if len(caps) < 2:
        pytest.skip(f"this CPU offers ATen only {caps or 'no x86-64'} kernels: nothing to compare")
    runs = {cap: _run(tmp_path / cap, cap) for cap in caps}
    ref_metrics, ref_summary, ref_stdout = runs[caps[0]]
    for cap in caps[1:]:
        metrics, summary, stdout = runs[cap]
        pd.testing.assert_frame_equal(metrics, ref_metrics, check_exact=True)  # every column, bit for bit
        assert summary == ref_summary and summary["cpu_kernels"] == "DEFAULT"
        assert stdout == ref_stdout
    # the native kernels of the widest and the narrowest capability differ: the comparison above can fail
    wide, _, _ = _run(tmp_path / f"native-{caps[-1]}", caps[-1], "fl.cpu_kernels=native")
    narrow, _, _ = _run(tmp_path / f"native-{caps[0]}", caps[0], "fl.cpu_kernels=native")
    assert not wide[["loss", "train_loss"]].equals(narrow[["loss", "train_loss"]])
