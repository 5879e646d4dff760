"""Runs of the command line in a subprocess, and the exact comparison the identity tests make.

A test that claims "identical" compares two runs made the same way: both in this (pytest)
process, or both in fresh subprocesses. The pytest process has usually run torch kernels
before a run pins the portable ones, so an in-process run may use other CPU kernels than a
subprocess of the command line (loss differs in the 7th digit); a reference for a subprocess
run is therefore made by :func:`cli_run`, never by ``run_experiment`` in this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a quiet one-thread subprocess of this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1", "OMP_NUM_THREADS": "1", **extra}
    env.pop("ATEN_CPU_CAPABILITY", None)  # an in-process run of this suite sets it (and MKL_CBWR); a user's shell does not
    env.pop("MKL_CBWR", None)
    return env


def sets(overrides: Sequence[str]) -> list[str]:
    """``--set`` options for ``overrides``."""
    return [a for s in overrides for a in ("--set", s)]


def cli_argv(out: Path, overrides: Sequence[str], *extra: str, experiment: Path = EXP) -> list[str]:
    """The argv of ``flamingo-sim run experiment --out out --set ... extra`` in this interpreter."""
    return [sys.executable, "-m", "flamingo_sim", "run", str(experiment), "--out", str(out), *sets(overrides), *extra]


def cli_run(out: Path, overrides: Sequence[str], *extra: str, experiment: Path = EXP, timeout_s: float = 600) -> pd.DataFrame:
    """Run the command line in a fresh subprocess (it pins its kernels as a user's run does); its metrics."""
    proc = subprocess.run(cli_argv(out, overrides, *extra, experiment=experiment), capture_output=True, text=True,
                          env=cli_env(), timeout=timeout_s, check=False)
    assert proc.returncode == 0, proc.stderr
    return pd.read_parquet(out / "metrics.parquet")


def assert_identical(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Every column, every value, bit for bit (no tolerance: pandas compares floats at 1e-5 otherwise)."""
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got.equals(want)
