"""A new user's first hour, on a fresh clone of this repository (issue 32): the README's set-up and
command tour, its multi-seed resume after a Ctrl-C, and the Traces page's walkthrough, each command
read from the page and run as printed (shortened with ``--set``/``--seeds``), and ``git status``
clean at the end.

Commands that need what a test machine lacks are left out, by what they name: a GPU (``cuda``,
``torchrun``), a data set (``/data/``), a Ray cluster, the network (``pip install``), a dump of
one's own (``greenhub/``); and the README's second set-up command is the test suite itself.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.integrations import flower as fli

ROOT = Path(__file__).resolve().parents[1]
TINY = ["fl.rounds=4", "checkpoint_every=1", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2",
        "data.proxy.n_clients=100"]
SKIP = ("cuda", "torchrun", "/data/", "--executor ray", "pip install", "pytest", "greenhub/")


def commands(page: Path) -> list[str]:
    """The ``flamingo-sim`` commands of ``page``'s bash blocks, in order, comments dropped; the last
    command of a ``&&`` chain (the README's set-up line)."""
    text = page.read_text()
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if "flamingo-sim" not in line:
                continue
            line = line[line.rindex("flamingo-sim"):] if "&&" in line else line
            if line.startswith("flamingo-sim ") or line.startswith("torchrun "):
                found.append(line)
    return found


def _shortened(argv: list[str]) -> list[str]:
    """``argv`` (after ``flamingo-sim``) with the test's small settings: every ``run``, ``reproduce``
    and ``sensitivity`` on a tiny task (one seed for the studies)."""
    if argv[0] == "run":
        return [*argv, *[a for s in TINY for a in ("--set", s)]]
    if argv[0] == "reproduce":
        return [*argv, "--seeds", "1", *[a for s in TINY for a in ("--set", s)]]
    return argv


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("first-hour") / "flamingo-sim"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True, timeout=300)
    return where


def _env(clone: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(clone), "FLAMINGO_SIM_QUIET": "1", "OMP_NUM_THREADS": "1"}


def _run(clone: Path, argv: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", *argv], cwd=clone, env=_env(clone), capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, f"flamingo-sim {shlex.join(argv)}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _interrupted(clone: Path, argv: list[str], out: Path) -> str:
    """``flamingo-sim ARGV`` stopped by Ctrl-C once a unit has checkpointed; the line it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "flamingo_sim", *argv], cwd=clone, env=_env(clone), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not list((out / "checkpoints").glob("*.pt")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    return err.strip().splitlines()[-1]


def test_the_pages_commands_are_found():
    readme = commands(ROOT / "README.md")
    assert readme[0] == "flamingo-sim run experiments/openimage_mobilenet.yaml"
    assert "flamingo-sim run openimage_mobilenet --out runs/mnv2 --seeds 3 --resume" in readme
    assert commands(ROOT / "docs" / "traces.md")[0] == "flamingo-sim synth-greenhub --out runs/synth"


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a fresh clone's install and every README command, shortened
def test_a_new_users_first_hour_on_a_fresh_clone_leaves_the_checkout_clean(clone):
    readme = commands(clone / "README.md")
    ran = []
    for line in readme:
        if any(s in line for s in SKIP):
            continue
        argv = shlex.split(line)[1:]
        if "--engine" in argv and argv[argv.index("--engine") + 1] == "flower" and not fli.flower_available():
            continue
        if argv[:2] == ["run", "openimage_mobilenet"] and "--seeds" in argv and "--resume" not in argv:
            # the README's multi-seed run, stopped by Ctrl-C: its printed line and the README's resume both continue it
            out = clone / argv[argv.index("--out") + 1]
            last = _interrupted(clone, _shortened(argv), out)
            assert last == ("flamingo-sim run: interrupted (SIGINT); continue it with: "
                            + shlex.join(["flamingo-sim", *_shortened(argv), "--resume"]))
            ran.append(line)
            continue
        _run(clone, _shortened(argv))
        ran.append(line)
    assert "flamingo-sim run openimage_mobilenet --out runs/mnv2 --seeds 3 --resume" in ran
    metrics = pd.read_parquet(clone / "runs" / "mnv2" / "metrics.parquet")
    assert sorted(metrics["seed"].unique()) == [0, 1, 2] and metrics.groupby(["policy", "seed"])["round"].max().eq(4).all()
    assert (clone / "runs" / "mnv2" / "report" / "report.md").is_file()
    assert (clone / "runs" / "reproduce-quick" / "report.md").is_file()

    for line in commands(clone / "docs" / "traces.md"):
        if any(s in line for s in SKIP):
            continue
        _run(clone, _shortened(shlex.split(line)[1:]))
    assert (clone / "runs" / "traces" / "kaggle" / "clients.parquet").is_file()
    assert (clone / "runs" / "mnv2-kaggle" / "summary.json").is_file()

    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout
    assert status == "", status
    shutil.rmtree(clone / "runs")  # about 250 MB
