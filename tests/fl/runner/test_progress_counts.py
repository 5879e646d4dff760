"""The progress of units run as processes (``--jobs N``): never more units running than jobs, even
when a worker runs the policies of one seed one after another; a resumed unit says where it resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flamingo_sim.fl.runner import execute as ex
from flamingo_sim.fl.runner.unit_files import FORMAT, Unit

ROOT = Path(__file__).resolve().parents[3]


def _units(out: Path, seeds: int) -> list[Unit]:
    return [Unit("openimage_mobilenet", (), None, str(out), policy, seed, f"{policy} seed {seed}")
            for seed in range(seeds) for policy in ("baseline", "flamingo")]


@pytest.mark.slow
def test_two_jobs_never_count_three_running(tmp_path, monkeypatch, capsys):
    """Eight units (4 seeds x 2 policies) on --jobs 2: a unit counts as running only while a worker has it."""
    from flamingo_sim.cli import main

    most: list[int] = []
    start = ex.Progress.start

    def counting_start(self, unit):  # type: ignore[no-untyped-def]
        start(self, unit)
        most.append(len(self.running))

    monkeypatch.setattr(ex.Progress, "start", counting_start)
    assert main(["run", str(ROOT / "examples/charging_only.yaml"), "--seeds", "4", "--jobs", "2", "--out", str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(most) == 8 and max(most) == 2, (most, lines)
    assert not [ln for ln in lines if "3 running" in ln or "4 running" in ln], lines
    assert any(ln.startswith("units: 8/8 done, 0 running, 0 failed") for ln in lines), lines


def test_a_unit_with_rounds_written_says_it_resumes(tmp_path):
    unit = _units(tmp_path, 1)[0]
    unit.path(".json").parent.mkdir(parents=True)
    rows = [{"round": r} for r in range(4)]
    unit.path(".json").write_text(json.dumps({"format": FORMAT, "policy": "baseline", "seed": 0, "done": False, "rows": rows}))
    lines: list[str] = []
    progress = ex.Progress(2, 0, 2, lines.append)
    progress.start(unit)
    progress.start(_units(tmp_path, 1)[1])
    assert lines == ["[1/2] baseline seed 0: resuming from round 4", "[2/2] flamingo seed 0: started"]


def test_a_unit_of_fast_rounds_shows_its_first_round_and_its_last(tmp_path, monkeypatch):
    """The status file after each round of a unit whose rounds take no time at all: round 0 when it begins, round 1
    after its first round (a study's progress, and a fault test waiting to kill the unit, see that it trains), then
    nothing new until the time between writes has passed or the unit is done."""
    from types import SimpleNamespace

    from flamingo_sim.fl.runner import units

    monkeypatch.setattr(units.time, "monotonic", lambda: 100.0)  # every round in the same instant
    path = tmp_path / "flamingo-seed0.status"
    sim = SimpleNamespace(round=0, rules=SimpleNamespace(fl=SimpleNamespace(rounds=5)))
    sim.is_done = lambda: sim.round >= 5
    status = units._Status(path)
    status.on_run_begin(sim, [])
    status.behind.wait()  # written behind the rounds: each write waited for before the file is read
    seen = [json.loads(path.read_text())["round"]]
    for r in range(1, 6):
        sim.round = r
        assert status.on_round_end(sim, None) is False  # type: ignore[arg-type]
        status.behind.wait()
        seen.append(json.loads(path.read_text())["round"])
    assert seen == [0, 1, 1, 1, 1, 5]
