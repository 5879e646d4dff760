"""A ``--jobs 2`` study survives losing any process of its pool (:mod:`flamingo_sim.fl.runner.executors.revive`).

Each test runs ``reproduce --quick --jobs 2`` on one task, shrunk, as a user would (a process of its own), kills one
process the pool owns once a unit is part-way (found under the study's process in ``/proc``: the forkserver, a worker,
the resource tracker) with SIGKILL, as the out-of-memory killer would, and checks that the study recovered: exit 0, no
traceback, one line naming what died and how, and every result byte for byte what ``--jobs 1`` wrote. A unit whose
worker is killed twice fails with one line and the study's last line gives the command that continues it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flamingo_sim.errors import PoolLost
from flamingo_sim.fl.runner.executors import revive

ROOT = Path(__file__).resolve().parents[3]
QUIET = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
#: long enough that a unit is seen part-way (its status is written every 0.5 s) on a fast CPU too: 40 rounds ran
#: from round 2 past round 30 between two status writes on an AMD EPYC (Zen 5), so the kill never came
ROUNDS = 160
SETS = [f"fl.rounds={ROUNDS}", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=8", "data.proxy.n_clients=150", "checkpoint_every=1"]


def _argv(out: Path, jobs: int) -> list[str]:
    return ["reproduce", "--quick", "--jobs", str(jobs), "--out", str(out), "--tasks", "openimage_mobilenet",
            *[a for s in SETS for a in ("--set", s)]]


def _outputs(out: Path) -> dict[str, bytes]:
    run = out / "runs" / "openimage_mobilenet"
    return {"tables.json": (out / "tables.json").read_bytes(), "metrics.parquet": (run / "metrics.parquet").read_bytes(),
            "summary.json": (run / "summary.json").read_bytes()}


@pytest.fixture(scope="module")
def one_job(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("one-job") / "study"
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *_argv(out, 1)], capture_output=True, text=True, env=QUIET, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return _outputs(out)


def _children(pid: int) -> dict[int, tuple[int, str]]:
    """Every process below ``pid``: its parent and command line (from /proc)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        table[int(entry.name)] = (int(stat[stat.rfind(")") + 2:].split()[1]), cmd)
    below, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, cmd) in table.items():
            if ppid == parent and child not in below:
                below[child] = (ppid, cmd)
                todo.append(child)
    return below


def _part_way(out: Path, proc: subprocess.Popen, avoid: int | None = None) -> dict:
    """The status of a unit that has started and is not done (and whose worker is not ``avoid``)."""
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        for status in sorted((out / "runs" / "openimage_mobilenet" / "units").glob("*.status")) if out.is_dir() else []:
            try:
                raw = json.loads(status.read_text())
            except (OSError, ValueError):
                continue
            if 2 <= raw.get("round", -1) <= ROUNDS // 2 and raw.get("pid") != avoid:
                return {**raw, "unit": status.stem}
        time.sleep(0.02)


def _victim(kind: str, study: int, unit_pid: int) -> int:
    below = _children(study)
    if kind == "worker":
        return unit_pid
    marker = {"forkserver": "multiprocessing.forkserver import main", "tracker": "multiprocessing.resource_tracker import main"}[kind]
    found = [pid for pid, (ppid, cmd) in below.items() if ppid == study and marker in cmd]
    assert len(found) == 1, below
    if kind == "forkserver":
        assert below[unit_pid][0] == found[0]  # the unit's worker is the forkserver's child
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["forkserver", "worker", "tracker"])
def test_killing_a_process_of_the_pool_leaves_a_recovered_study(one_job, tmp_path, kind):
    out = tmp_path / "study"
    proc = subprocess.Popen([sys.executable, "-m", "flamingo_sim", *_argv(out, 2)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=QUIET)
    unit = _part_way(out, proc)
    victim = _victim(kind, proc.pid, unit["pid"])
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Warning" not in err, err
    label = f"openimage_mobilenet {unit['unit'].replace('-seed', ' seed ')}"
    lines = err.splitlines()
    if kind == "forkserver":
        assert f"the pool's forkserver (pid {victim}) was killed by SIGKILL; its workers ended with it; a new one is started" in lines, err
        assert (f"{label}: its worker went down with the pool's forkserver (pid {victim}, which was killed by SIGKILL); "
                "it runs again from its last checkpoint") in lines, err
    elif kind == "worker":
        assert f"{label}: its worker (pid {victim}) was killed by SIGKILL; it runs again from its last checkpoint" in lines, err
    assert _outputs(out) == one_job


@pytest.mark.slow
def test_a_unit_whose_worker_is_killed_twice_fails_in_one_line_and_the_same_command_finishes(one_job, tmp_path):
    out = tmp_path / "study"
    argv = _argv(out, 2)
    proc = subprocess.Popen([sys.executable, "-m", "flamingo_sim", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=QUIET)
    first = _part_way(out, proc)
    os.kill(first["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 300
    status = out / "runs" / "openimage_mobilenet" / "units" / f"{first['unit']}.status"
    while True:  # the same unit, run again on another worker
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        try:
            again = json.loads(status.read_text())
        except (OSError, ValueError):
            again = {}
        if again.get("pid") not in (None, first["pid"]) and again.get("round", ROUNDS) < ROUNDS - 10:
            break
        time.sleep(0.01)
    os.kill(again["pid"], signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 2 and "Traceback" not in err, err
    label = f"openimage_mobilenet {first['unit'].replace('-seed', ' seed ')}"
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"flamingo-sim reproduce: error: 1 of 4 units failed, first {label}: its worker \(pid {again['pid']}\) was killed by SIGKILL "
        rf"\(log \S+\.log\); the other units finished and are kept; continue it with: flamingo-sim {re.escape(shlex.join(argv))}", last), last
    done = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], capture_output=True, text=True, env=QUIET, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _outputs(out) == one_job


def test_a_forkserver_that_cannot_start_again_is_one_line(monkeypatch):
    """Starting a worker tries :data:`revive.START_TRIES` times, then names the forkserver and the last error."""
    monkeypatch.setattr(revive, "DEATH_WAIT_S", 0.05)
    monkeypatch.setattr(revive, "forkserver_pid", lambda: 4242)
    monkeypatch.setattr(revive, "how_it_ended", lambda pid: "was killed by SIGKILL")
    tries: list[int] = []

    class Unreachable:
        def start(self) -> None:
            tries.append(1)
            raise EOFError("unexpected EOF")

    with pytest.raises(PoolLost) as info:
        revive.start(Unreachable(), print)
    assert len(tries) == revive.START_TRIES
    assert str(info.value) == "the pool's forkserver (pid 4242) was killed by SIGKILL and could not be started again (EOFError: unexpected EOF)"


def test_a_forkserver_that_refuses_connections_is_forgotten_and_a_new_one_started(monkeypatch, tmp_path):
    """A server whose listener is closed while ``waitpid`` still finds it alive (a dying one's state: CI saw all three
    starts refused) is forgotten after the first refusal; the next start launches a new server, and the old one, its
    "alive" pipe closed, ends by itself."""
    import multiprocessing.forkserver
    import socket

    monkeypatch.setattr(revive, "DEATH_WAIT_S", 0.05)
    server = multiprocessing.forkserver._forkserver
    server.ensure_running()
    old = server._forkserver_pid
    refusing = str(tmp_path / "refusing.sock")
    with socket.socket(socket.AF_UNIX) as nobody:  # a socket file nobody listens on any more
        nobody.bind(refusing)
    server._forkserver_address = refusing
    proc = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(0,))
    revive.start(proc, print)
    proc.join(60)
    assert proc.exitcode == 0
    assert server._forkserver_pid not in (None, old)
    deadline = time.monotonic() + 30
    while revive.how_it_ended(old) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert revive.how_it_ended(old) == "exited with code 0"
    os.waitpid(old, 0)


def test_a_lost_pool_ends_the_study_with_the_command_that_continues_it(tmp_path, monkeypatch, capsys):
    """Lost while the study validates its runs on the workers (nothing written yet), or while its units run (then under
    the run directory's guard, which adds how to continue)."""
    from flamingo_sim.cli import main
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.runner.rundir import run_guard

    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    line = "the pool's forkserver (pid 4242) was killed by SIGKILL and could not be started again (EOFError: unexpected EOF)"

    def lost(_process, _say):
        raise PoolLost(line)

    monkeypatch.setattr(revive, "start", lost)
    out = tmp_path / "study"
    argv = ["sensitivity", "openimage_mobilenet", "--vary", "fl.overcommit=1.0", "--set", "fl.rounds=2", "--set", "data.proxy.n_clients=100",
            "--out", str(out), "--jobs", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"flamingo-sim sensitivity: error: {line}; nothing was written; run it again with: flamingo-sim {shlex.join(argv)}"]
    assert not out.exists()
    experiment = ROOT / "experiments" / "openimage_mobilenet.yaml"
    with pytest.raises(Exception) as info:
        with run_guard(tmp_path / "run", load_experiment(experiment), experiment, resume=False, how="continue it with: X"):
            raise PoolLost(line)
    assert type(info.value).__name__ == "FlamingoError" and str(info.value) == f"{line}; continue it with: X"
