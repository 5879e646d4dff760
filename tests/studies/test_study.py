"""A study's units in parallel (``--jobs 2``, ``--executor ray``), a killed unit, an interrupted
study continued by the same command, and the study directory's guard.

One tiny sensitivity grid (the reference and one knob value, one seed: four units) is the
study throughout; every variant must write byte-identical tables, metrics and summaries.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flamingo_sim.cli import main
from flamingo_sim.faults import run_lock
from flamingo_sim.fl.sim.simulation import Simulation

ROOT = Path(__file__).resolve().parents[2]
TINY = ["fl.rounds=6", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2", "data.proxy.n_clients=100",
        "checkpoint_every=1"]
QUIET = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}


def _argv(out: Path, *extra: str) -> list[str]:
    return ["sensitivity", "openimage_mobilenet", "--vary", "fl.overcommit=1.0", *[a for s in TINY for a in ("--set", s)],
            "--out", str(out), *extra]


def _outputs(out: Path) -> dict[str, bytes]:
    files = {"sensitivity.csv": (out / "sensitivity.csv").read_bytes()}
    for run in sorted((out / "runs").iterdir()):
        for name in ("metrics.parquet", "summary.json"):
            files[f"{run.name}/{name}"] = (run / name).read_bytes()
    return files


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> dict[str, bytes]:
    """The grid run one unit after another (``--jobs 1``), by the command in a process of its own as
    the parallel variants are: a process whose torch already ran a kernel (this one) can no longer
    pin the portable CPU kernels (``fl.cpu_kernels``), and would compare other kernels' numbers."""
    out = tmp_path_factory.mktemp("sequential") / "grid"
    proc = _cli(_argv(out, "--jobs", "1"))
    assert proc.returncode == 0, proc.stderr
    return _outputs(out)


def _cli(argv: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], capture_output=True, text=True, env=env or QUIET, timeout=300,
                          check=False, **kwargs)


@pytest.mark.slow
def test_two_jobs_write_what_one_job_writes(sequential, tmp_path):
    out = tmp_path / "grid"
    schedule = tmp_path / "schedule.jsonl"
    proc = _cli(_argv(out, "--jobs", "2"), env={**QUIET, "FLAMINGO_SIM_SCHEDULE": str(schedule)})
    assert proc.returncode == 0, proc.stderr
    assert _outputs(out) == sequential
    # each unit ran in a worker process and logged there
    assert sorted(p.name for p in (out / "runs" / "reference" / "units").glob("*.log")) == ["baseline-seed0.log", "flamingo-seed0.log"]
    # two workers, each started once; each built one run's components to validate it (in parallel, before
    # anything was written) and then ran that run's units on them; a worker done with its own run's units takes
    # a unit of the other run rather than wait (building that run's components again)
    events = [json.loads(line) for line in schedule.read_text().splitlines()]
    assert sorted(e["worker"] for e in events if e["event"] == "start") == [0, 1]
    built = {e["run"]: e["worker"] for e in events if e["event"] == "built" and e["error"] is None and not e["reused"]}
    assert sorted(built) == ["fl.overcommit=1.0", "reference"] and sorted(built.values()) == [0, 1]
    done = [e for e in events if e["event"] == "done"]
    assert sorted((e["run"], e["unit"]) for e in done) == [("fl.overcommit=1.0", "baseline-seed0"), ("fl.overcommit=1.0", "flamingo-seed0"),
                                                            ("reference", "baseline-seed0"), ("reference", "flamingo-seed0")]
    assert all(e["reused"] == (e["worker"] == built[e["run"]]) for e in done)
    assert all(e["reused"] for e in done if e["unit"] == "baseline-seed0")  # the first unit of each worker: the run it built
    assert all(e["error"] is None for e in done) and max(e["at"] for e in events if e["event"] == "built") < min(
        e["at"] for e in events if e["event"] == "send" and e["kind"] == "run")


@pytest.mark.slow
def test_a_killed_units_worker_runs_it_again_and_the_study_writes_what_one_job_writes(sequential, tmp_path):
    """A worker killed by a signal (the out-of-memory killer's SIGKILL) has its unit run again from its last checkpoint,
    said in one line; the study finishes as if nothing happened (a unit killed twice: tests/fl/runner/test_pool_lost.py)."""
    out = tmp_path / "grid"
    argv = [sys.executable, "-m", "flamingo_sim", *_argv(out, "--jobs", "2")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=QUIET)
    status = out / "runs" / "reference" / "units" / "flamingo-seed0.status"
    deadline = time.monotonic() + 180
    while True:  # kill the unit's worker once the unit has started (a worker that holds the seed's components starts it at once)
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        try:
            raw = json.loads(status.read_text())
        except (OSError, ValueError):
            raw = {}
        if raw.get("round", -1) >= 0:
            break
        time.sleep(0.02)
    assert raw["round"] < 6, "the unit finished before it could be killed"
    os.kill(raw["pid"], signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"reference flamingo seed 0: its worker (pid {raw['pid']}) was killed by SIGKILL; it runs again from its last checkpoint" \
        in err.splitlines(), err
    assert "Traceback" not in err
    assert _outputs(out) == sequential


@pytest.fixture(scope="module")
def sequential_here(tmp_path_factory) -> dict[str, bytes]:
    """The same, in this process (with this process's CPU kernels), for the tests that interrupt a run in it."""
    out = tmp_path_factory.mktemp("sequential-here") / "grid"
    assert main(_argv(out, "--jobs", "1")) == 0
    return _outputs(out)


@pytest.mark.slow
def test_an_interrupted_grid_is_continued_by_the_same_command(sequential_here, tmp_path, monkeypatch, capsys):
    out = tmp_path / "grid"
    argv = _argv(out)
    real_step = Simulation.step

    def step(self):  # Ctrl-C as the second run's flamingo starts round 3
        if self.policy_name == "flamingo" and self.round == 2 and self.rules.fl.overcommit == 1.0:
            raise KeyboardInterrupt
        return real_step(self)

    monkeypatch.setattr(Simulation, "step", step)
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"flamingo-sim sensitivity: interrupted (SIGINT); finished units are kept; continue it with: flamingo-sim {shlex.join(argv)}"
    assert (out / "runs" / "reference" / "units" / "flamingo-seed0.json").is_file()
    monkeypatch.setattr(Simulation, "step", real_step)
    assert main(argv) == 0
    assert _outputs(out) == sequential_here


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install 'flamingo-sim[cluster]')")
def test_ray_on_a_local_two_cpu_instance_writes_what_one_job_writes(sequential, tmp_path):
    out = tmp_path / "grid"
    proc = _cli(_argv(out, "--executor", "ray", "--jobs", "2"))
    assert proc.returncode == 0, proc.stderr
    assert _outputs(out) == sequential
    assert not list(out.glob(".ray-probe-*"))  # the shared-filesystem probe cleans up


def test_a_directory_of_other_files_or_another_study_is_refused(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("draft")
    assert main(_argv(mine)) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"flamingo-sim sensitivity: error: {mine}: output directory holds files flamingo-sim did not write for sensitivity "
                   "(notes.txt); choose another --out")
    other = tmp_path / "other"
    other.mkdir()
    (other / "study.json").write_text(json.dumps({"command": "reproduce", "runs": []}))
    assert main(_argv(other)) == 2
    assert capsys.readouterr().err.strip().endswith("holds a reproduce study (study.json), not a sensitivity one; choose another --out")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and sorted(p.name for p in other.iterdir()) == ["study.json"]


def test_a_second_study_on_the_same_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "grid"
    with run_lock(out):
        assert main(_argv(out)) == 2
    err = capsys.readouterr().err.strip()
    assert f"{out}: another flamingo-sim process (PID {os.getpid()}) is writing" in err and "\n" not in err


def test_ray_missing_is_one_line_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    out = tmp_path / "grid"
    assert main(_argv(out, "--executor", "ray")) == 2
    assert capsys.readouterr().err.strip() == (
        "flamingo-sim sensitivity: error: --executor ray: Ray is not installed; install it with: pip install 'flamingo-sim[cluster]'")
    assert not out.exists()


def _descendants(pid: int) -> list[int]:
    """PIDs of every process started, directly or not, by ``pid`` (the study's pool and its workers)."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, parent in parents.items() if parent in frontier]
        found += kids
        frontier = kids
    return found


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


@pytest.mark.slow
def test_sigterm_stops_every_worker_and_says_how_to_continue(tmp_path):
    out = tmp_path / "grid"
    argv = [sys.executable, "-m", "flamingo_sim", *_argv(out, "--jobs", "2")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=QUIET)
    deadline = time.monotonic() + 180
    while not list((out / "runs").glob("*/units/*.status")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    workers = _descendants(proc.pid)
    assert len(workers) >= 3  # the pool's parent and two workers (and the resource tracker)
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == ("flamingo-sim sensitivity: interrupted (SIGTERM); finished units are kept; continue it with: "
                                            f"flamingo-sim {shlex.join(argv[3:])}")
    while _alive(workers) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert _alive(workers) == []


@pytest.mark.slow
def test_a_run_that_cannot_build_is_one_line_on_the_workers_too(tmp_path):
    """With workers the runs' components are built there (in parallel, kept for the units): a run
    whose build fails is the same one line as with one job, before anything is written."""
    lines = []
    for jobs in ("1", "2"):
        out = tmp_path / f"grid-{jobs}"
        argv = ["sensitivity", "openimage_mobilenet", "--vary", f"traces.path={tmp_path / 'nowhere'}",
                *[a for s in TINY for a in ("--set", s)], "--out", str(out), "--jobs", jobs]
        proc = _cli(argv)
        assert proc.returncode == 2, proc.stderr
        lines.append(proc.stderr.strip().splitlines()[-1].replace(str(out), "OUT"))
        assert not out.exists()
    assert lines[0] == lines[1]
    assert lines[0].startswith("flamingo-sim sensitivity: error: sensitivity: run traces.path=") and lines[0].endswith(
        f"traces.path: trace set '{tmp_path / 'nowhere'}' not found")
