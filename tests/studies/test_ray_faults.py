"""Ray's failure paths, run for real: a cluster address where nothing listens (one line, in
seconds, before anything is written), an address that is not one, and a Ray worker killed in the
middle of a unit on a local Ray instance (reported; the other units finish; the same command
then finishes the study with results identical to one job's), and an output directory the Ray
workers do not see (the shared-filesystem probe refuses it in one line)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from flamingo_sim.cli import main
from tests.cli_runs import EXP
from tests.mounts import needs_mounts
from tests.studies.test_study import QUIET, _argv, _cli, _outputs

ROUNDS = 80
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install 'flamingo-sim[cluster]')")


def _closed_port() -> int:
    """A local port where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_ray
@pytest.mark.parametrize("form", ["{host}:{port}", "ray://{host}:{port}"])
def test_an_unreachable_ray_address_is_one_line_in_seconds_before_anything_is_written(tmp_path, capsys, form):
    address = form.format(host="127.0.0.1", port=_closed_port())
    out = tmp_path / "run"
    t0 = time.monotonic()
    assert main(["run", str(EXP), "--out", str(out), "--executor", "ray", "--ray-address", address, "--set", "fl.rounds=1"]) == 2
    assert time.monotonic() - t0 < 60  # importing Ray included; ray.init retried such an address for over 5 minutes
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(rf"flamingo-sim run: error: --executor ray: cannot reach the Ray cluster at {re.escape(address)}: nothing accepts "
                        r"a connection at 127\.0\.0\.1:\d+ \(Connection refused, within 5 s\)", err), err
    assert not out.exists()


@needs_ray
def test_a_ray_address_that_is_no_address_is_one_line(tmp_path, capsys):
    assert main(_argv(tmp_path / "grid", "--executor", "ray", "--ray-address", "headnode")) == 2
    assert capsys.readouterr().err.strip() == ("flamingo-sim sensitivity: error: --ray-address: expected host:port, ray://host:port, auto "
                                               "or local, got 'headnode'")
    assert not (tmp_path / "grid").exists()


@needs_ray
@pytest.mark.slow
def test_a_ray_worker_killed_mid_unit_is_reported_the_others_finish_and_the_same_command_finishes(tmp_path):
    # 80 rounds: the unit writes its status after its first round, and the other 79 outlast the poll and the kill (with
    # 40 rounds and no write after the first, CI under load saw the unit's first status past round 0 only when it was done)
    longer = ("--set", f"fl.rounds={ROUNDS}")
    reference = tmp_path / "sequential"
    done = _cli(_argv(reference, "--jobs", "1", *longer))
    assert done.returncode == 0, done.stderr
    sequential = _outputs(reference)
    out = tmp_path / "grid"
    argv = [sys.executable, "-m", "flamingo_sim", *_argv(out, "--executor", "ray", "--jobs", "2", *longer)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=QUIET)
    status = out / "runs" / "reference" / "units" / "flamingo-seed0.status"
    deadline = time.monotonic() + 300
    while True:  # kill the Ray worker running the unit once the unit has checkpointed a round
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        try:
            raw = json.loads(status.read_text())
        except (OSError, ValueError):
            raw = {}
        if raw.get("round", 0) >= 1:
            break
        time.sleep(0.02)
    assert raw["round"] < ROUNDS, "the unit finished before it could be killed"
    assert raw["pid"] != proc.pid  # a Ray worker, not the command's process
    os.kill(raw["pid"], signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(
        r"flamingo-sim sensitivity: error: 1 of 4 units failed, first reference flamingo seed 0: .*(worker|Worker|died|crash|exit).*"
        r"; the other units finished and are kept; continue it with: flamingo-sim " + re.escape(shlex.join(argv[3:])), last), last
    assert (out / "runs" / "fl.overcommit=1.0" / "summary.json").is_file()  # the other run finished
    assert not (out / "sensitivity.csv").exists()
    again = _cli(argv[3:])  # the same command
    assert again.returncode == 0, again.stderr
    assert _outputs(out) == sequential


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


@needs_ray
@needs_mounts
@pytest.mark.slow
def test_an_output_directory_the_ray_workers_do_not_see_is_refused_by_the_probe_in_one_line(tmp_path):
    """A Ray cluster whose workers see another filesystem where --out is, as a node without the shared
    mount sees its own disk: a Ray head started in a mount namespace of its own with a tmpfs over the
    output's parent. The probe refuses in one line, naming the directory, before any unit runs."""
    hidden = tmp_path / "shared"
    hidden.mkdir()
    port = _closed_port()
    ray = Path(sys.executable).with_name("ray")
    # a temp dir of its own: `ray start` records its cluster in the temp dir's ray_current_cluster, and a
    # ray.init() without an address (every later local Ray of the suite) would try to join it
    temp = Path(tempfile.mkdtemp(prefix="rayp", dir="/tmp"))  # short: Ray's socket paths live under it
    current = Path("/tmp/ray/ray_current_cluster")
    before = current.read_bytes() if current.exists() else None
    script = (f"mount -t tmpfs -o size=4m tmpfs {shlex.quote(str(hidden))} && exec {shlex.quote(str(ray))} start --head --block "
              f"--port {port} --num-cpus 1 --include-dashboard=false --disable-usage-stats --temp-dir {shlex.quote(str(temp))}")
    head = subprocess.Popen(["unshare", "-rm", "sh", "-c", script], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=QUIET)
    try:
        deadline = time.monotonic() + 120
        while not _accepts(port):
            assert head.poll() is None and time.monotonic() < deadline, head.communicate()
            time.sleep(0.5)
        out = hidden / "run"
        proc = _cli(["run", str(EXP), "--out", str(out), "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                     "--set", "fl.rounds=1", "--set", "data.proxy.n_clients=40", "--set", "fl.participants_per_round=10"])
        assert proc.returncode == 2, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert re.fullmatch(rf"flamingo-sim run: error: {re.escape(str(out))}: (a Ray worker cannot write here \(.+\)|not on a filesystem "
                            r"every Ray worker sees \(.+\)); put --out on a filesystem every node mounts at the same path", last), proc.stderr
        assert not list(out.rglob("metrics.parquet")) and not list(out.rglob(".ray-probe-*"))  # no unit ran; no probe left behind
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)
    assert (current.read_bytes() if current.exists() else None) == before  # the default local cluster left as it was
