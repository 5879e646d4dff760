"""A study that plans itself: the estimate of its whole time from the first rounds, and one GPU per worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flamingo_sim.fl.runner.execute import Progress
from flamingo_sim.fl.runner.executors import progress as progress_module
from flamingo_sim.fl.runner.executors.pool import gpu_of, visible_gpus
from flamingo_sim.fl.runner.unit_files import Unit

ROOT = Path(__file__).resolve().parents[3]


def _unit(tmp_path: Path, run: str, policy: str, cost: float, device: str = "auto") -> Unit:
    return Unit("exp.yaml", (), None, str(tmp_path / run), policy, 0, f"{run} {policy}", cost=cost, device=device)


def _status(unit: Unit, round_: int, rounds: int) -> None:
    unit.path(".status").parent.mkdir(parents=True, exist_ok=True)
    unit.path(".status").write_text(json.dumps({"round": round_, "rounds": rounds, "pid": 1}))


def test_the_whole_study_is_estimated_from_the_first_rounds(tmp_path, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    a1, a2 = _unit(tmp_path, "a", "p1", 100.0), _unit(tmp_path, "a", "p2", 100.0)
    b1, c1 = _unit(tmp_path, "b", "p1", 50.0), _unit(tmp_path, "c", "p1", 100.0)
    progress = Progress(total=4, done=0, jobs=2, say=said.append)
    progress.expect([a1, a2, b1, c1])
    clock[0] = 1.0
    progress.start(a1)
    progress.start(b1)
    _status(a1, 1, 40)
    _status(b1, 1, 40)
    clock[0] = 6.0
    progress.tick()
    estimates = lambda: [line for line in said if line.startswith("estimate")]  # noqa: E731
    assert progress.estimate_from_rounds() is None and estimates() == []  # no unit has done its first 2 rounds
    clock[0] = 11.0
    _status(b1, 2, 40)
    progress.tick()
    # b: 10 s for 2 of 40 rounds -> 200 s for a unit of cost 50 (4 s per unit of work); a and c at that rate (the mean);
    # left: a1 (1 of 40 done) 390 + a2 400 + b1 (2 of 40) 190 + c1 400 = 1380, over 2 jobs: 690 s
    assert estimates() == ["estimate from the first rounds (1 of 3 runs measured): the 4 units take about 11:41 in all, 11:30 from now "
                    "(b 200 s a unit; 2 at a time)"]
    _status(a1, 2, 40)
    progress.tick()
    # a: 10 s for 2 of 40 -> 200 s for cost 100 (2 s); c at the mean 3 s: 190 + 200 + 190 + 300 = 880, over 2 jobs: 440 s
    total, line = progress.estimate_from_rounds()
    assert total == pytest.approx(11.0 + 440)
    assert estimates()[1:] == [line] == ["estimate from the first rounds (2 of 3 runs measured): the 4 units take about 7:31 in all, 7:20 from now "
                                  "(a 200 s a unit, b 200 s a unit; 2 at a time)"]
    progress.tick()  # nothing new measured: nothing said
    assert len(estimates()) == 2


def test_a_finished_unit_gives_its_run_its_rate(tmp_path, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    u1, u2 = _unit(tmp_path, "a", "p1", 1.0), _unit(tmp_path, "a", "p2", 1.0)
    progress = Progress(total=2, done=0, jobs=1, say=said.append)
    progress.expect([u1, u2])
    progress.start(u1)
    clock[0] = 5.0
    progress.finish(u1)
    progress.start(u2)
    _status(u2, 3, 4)
    total, line = progress.estimate_from_rounds()
    assert total == pytest.approx(5.0 + 5.0 * 0.25)  # the finished unit took 5 s; the running one is three quarters done
    assert line.endswith("(a 5 s a unit; 1 at a time)")


@pytest.mark.parametrize("env, count, expected", [({"CUDA_VISIBLE_DEVICES": "3, 5"}, 8, ["3", "5"]), ({"CUDA_VISIBLE_DEVICES": ""}, 8, []),
                                                  ({}, None, None)])
def test_visible_gpus(env, count, expected):
    got = visible_gpus(env)
    if expected is None:  # this machine's own: torch's count
        import torch

        assert got == ([str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else [])
    else:
        assert got == expected


def test_each_worker_slot_gets_its_own_gpu(tmp_path):
    gpus = ["2", "3"]
    auto, cuda, pinned, cpu = (_unit(tmp_path, "a", "p", 1.0, d) for d in ("auto", "cuda", "cuda:1", "cpu"))
    assert [gpu_of(auto, slot, gpus) for slot in range(4)] == ["2", "3", "2", "3"]
    assert gpu_of(cuda, 1, gpus) == "3"
    assert gpu_of(pinned, 1, gpus) is None and gpu_of(cpu, 1, gpus) is None and gpu_of(auto, 0, []) is None


@pytest.mark.slow
def test_a_study_gives_each_worker_its_gpu_and_says_its_estimate(tmp_path):
    """``--jobs 2`` with two GPUs visible (here named, none present: the units then train on the CPU): each worker's
    units get their slot's GPU; the study says its estimate from the first rounds."""
    out, schedule = tmp_path / "grid", tmp_path / "schedule.jsonl"
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "6,7",
           "FLAMINGO_SIM_SCHEDULE": str(schedule)}
    argv = ["sensitivity", "openimage_mobilenet", "--vary", "fl.overcommit=1.0", "--set", "fl.rounds=40", "--set", "fl.participants_per_round=4",
            "--set", "fl.local_steps=2", "--set", "data.proxy.n_clients=100", "--out", str(out), "--jobs", "2"]
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "4 units, 2 at a time (processes, 1 CPU thread(s) each); each worker on its own GPU of 6, 7 (CUDA_VISIBLE_DEVICES)" in proc.stderr
    sends = [json.loads(line) for line in schedule.read_text().splitlines() if '"send"' in line]
    assert sends and all(e["gpu"] == ["6", "7"][e["slot"]] for e in sends) and {e["slot"] for e in sends} == {0, 1}
    assert any(line.startswith("estimate from the first rounds (") and " runs measured): the 4 units take about " in line
               for line in proc.stderr.splitlines()), proc.stderr
