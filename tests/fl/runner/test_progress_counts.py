"""The progress of units run as processes (``--jobs N``): never more units running than jobs, even
when a worker runs the policies of one seed one after another; a resumed unit says where it resumes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flamingo_sim.fl.runner import execute as ex
from flamingo_sim.fl.runner import worker
from flamingo_sim.fl.runner.units import FORMAT, Unit

# a worker that, for each unit it is given, says it started, works a little and writes its result
FAKE = """
import json, os, sys, time
from pathlib import Path
for raw in sys.argv[1:]:
    u = json.loads(raw)
    d = Path(u["run_dir"]) / "units"
    name = f"{u['policy']}-seed{u['seed']}"
    (d / f"{name}.status").write_text(json.dumps({"round": 1, "rounds": 2, "pid": os.getpid()}))
    time.sleep(0.6)
    (d / f"{name}.json").write_text(json.dumps({"format": %d, "policy": u["policy"], "seed": u["seed"], "done": True, "rows": []}))
time.sleep(0.6)
""" % FORMAT


def _units(out: Path, seeds: int) -> list[Unit]:
    return [Unit("openimage_mobilenet", (), None, str(out), policy, seed, f"{policy} seed {seed}")
            for seed in range(seeds) for policy in ("baseline", "flamingo")]


@pytest.mark.slow
def test_two_jobs_never_count_three_running(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "worker_command", lambda units: [sys.executable, "-c", FAKE, *(u.to_json() for u in units)])
    most = []
    start = ex.Progress.start

    def counting_start(self, unit):  # type: ignore[no-untyped-def]
        start(self, unit)
        most.append(len(self.running))

    monkeypatch.setattr(ex.Progress, "start", counting_start)
    lines: list[str] = []
    units = _units(tmp_path, 4)  # 4 seeds for 2 jobs: each worker runs a seed's two policies
    assert [len(b) for b in ex._batches(units, 2)] == [2, 2, 2, 2]
    failures = ex.execute(units, jobs=2, say=lines.append, in_process=lambda u: None)
    assert failures == []
    assert len(most) == 8 and max(most) == 2, (most, lines)
    assert not [ln for ln in lines if "3 running" in ln or "4 running" in ln], lines
    assert lines[-1].startswith("units: 8/8 done, 0 running, 0 failed")
    assert sum(ln.endswith(": started") for ln in lines) == 8


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
