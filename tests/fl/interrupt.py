"""A run stopped by Ctrl-C part-way, for the resume tests."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.simulation import Simulation


def run_interrupted(monkeypatch: pytest.MonkeyPatch, experiment: Path, out_dir: Path, overrides: Sequence[str],
                    after_round: int, policy: str | None = None) -> Path:
    """Run ``experiment`` into ``out_dir`` until Ctrl-C arrives as ``policy`` (any, if None) is
    about to start round ``after_round + 1``; check the run ended by it and return ``out_dir``."""
    real_step = Simulation.step

    def step(self: Simulation):  # type: ignore[no-untyped-def]
        if self.round == after_round and (policy is None or self.policy_name == policy):
            raise KeyboardInterrupt
        return real_step(self)

    monkeypatch.setattr(Simulation, "step", step)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_experiment(experiment, out_dir=out_dir, overrides=list(overrides), log=lambda m: None)
    finally:
        monkeypatch.setattr(Simulation, "step", real_step)
    return out_dir
