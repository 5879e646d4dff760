"""Small run directories shared by the report and notebook tests (made once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flamingo_sim.report.notebook import ensure_small_run

ROOT = Path(__file__).resolve().parents[1]
SMALL = ("fl.rounds=6", "fl.participants_per_round=8", "fl.local_steps=4", "fl.eval_every=2", "data.proxy.n_clients=200")


def small_runs(factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(two seeds, one seed with another over-commitment): reused if this session already made them."""
    base = factory.getbasetemp() / "report-runs"
    exp = ROOT / "experiments" / "openimage_mobilenet.yaml"
    two = ensure_small_run(base / "two-seeds", experiment=exp, overrides=SMALL, n_seeds=2)
    one = ensure_small_run(base / "one-seed", experiment=exp, overrides=(*SMALL, "fl.overcommit=1.5"), n_seeds=1)
    return two, one
