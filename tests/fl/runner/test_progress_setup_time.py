"""The first estimate of a study's time counts a unit's start-up as if every round paid it (issue 50: ``reproduce --quick``
said 13:16 and took 4:45). :mod:`flamingo_sim.fl.runner.executors.progress` now separates a unit's start-up (up to the first
round it sees) from its per-round time (between two rounds it sees).

Measured on this machine (2 cores, the quick MobileNetV2 task, both policies in one process): 2 rounds 9.8 s and 12
rounds 21.4 s of wall time, so about 0.6 s a policy-round and several seconds of start-up (imports, traces, data,
model, the round-0 evaluation). From its first 2 of 40 rounds the estimate multiplies that start-up by 40 / 2 = 20."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flamingo_sim.fl.runner.execute import Progress
from flamingo_sim.fl.runner.executors import progress as progress_module
from flamingo_sim.fl.runner.unit_files import Unit

SETUP_S, ROUND_S, ROUNDS = 20.0, 1.0, 40


def _status(unit: Unit, round_: int) -> None:
    unit.path(".status").parent.mkdir(parents=True, exist_ok=True)
    unit.path(".status").write_text(json.dumps({"round": round_, "rounds": ROUNDS, "pid": 1}))


def _first_estimate(tmp_path: Path, monkeypatch) -> float:
    """One unit, started at 0 s, 20 s of start-up, then 1 s a round: polled every second until its second round."""
    clock = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    unit = Unit("exp.yaml", (), None, str(tmp_path / "run"), "baseline", 0, "run baseline", cost=1.0)
    progress = Progress(total=1, done=0, jobs=1, say=lambda line: None)
    progress.expect([unit])
    progress.start(unit)
    _status(unit, 0)
    t = 0.0
    while t < SETUP_S + 2 * ROUND_S:
        t += 1.0
        clock[0] = t
        _status(unit, max(0, int((t - SETUP_S) / ROUND_S)))
        progress.tick()
    est = progress.estimate_from_rounds()
    assert est is not None
    return est[0]


def test_the_first_estimate_separates_the_start_up_from_the_rounds(tmp_path, monkeypatch):
    # before the fix: (20 s of start-up + 2 rounds) / 2 rounds x 40 rounds = 440 s, for a unit that takes 20 + 40 = 60 s
    assert _first_estimate(tmp_path, monkeypatch) == pytest.approx(SETUP_S + ROUNDS * ROUND_S, rel=0.25)
