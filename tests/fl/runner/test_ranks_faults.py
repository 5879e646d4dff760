"""Several ranks beyond the MLP proxy and the kill of rank 1 (tests/fl/runner/test_ranks.py): a network
with BatchNorm and dropout, FedBuff and several seeds over ranks; and the ways a run over ranks
ends early - SIGINT or SIGTERM to the launcher, rank 0 killed, a rank frozen until the collective
timeout - each with one line and no process left, then a resume onto another number of ranks
(1 -> 3, 3 -> 2, 2 -> 1) that ends bit for bit as an uninterrupted run (every run a subprocess of
the command line, so every run uses the same kernels)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.cli_runs import ROOT, assert_identical, cli_argv, cli_env, cli_run
from tests.fl.runner.test_ranks import TINY, _alive, _children

#: 40 rounds with a checkpoint every 2 (server moments in it): long enough to be cut part-way.
LONG = [*TINY[:-1], "fl.rounds=40", "checkpoint_every=2", "aggregation.name=fedyogi"]
ONE_THREAD = ("--threads", "1")


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> pd.DataFrame:
    """The uninterrupted run of LONG in one process."""
    return cli_run(tmp_path_factory.mktemp("whole") / "run", LONG, *ONE_THREAD)


def _start(out: Path, nproc: int) -> subprocess.Popen:
    extra = ["--nproc", str(nproc)] if nproc > 1 else []
    return subprocess.Popen(cli_argv(out, LONG, *ONE_THREAD, *extra), env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _after_first_checkpoint(out: Path, proc: subprocess.Popen, nproc: int) -> dict[int, int]:
    """Wait for the run's first checkpoint; its ranks (pid -> rank; empty for one process)."""
    ckpt = out / "checkpoints" / "baseline-seed0.pt"
    deadline = time.monotonic() + 300
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = _children(proc.pid) if nproc > 1 else {}
    assert proc.poll() is None, "the run ended before it could be interrupted: " + proc.communicate()[1][-2000:]
    assert sorted(workers.values()) == list(range(nproc)) if nproc > 1 else True, workers
    return workers


def _ended(proc: subprocess.Popen, workers: dict[int, int], within_s: float) -> str:
    """Wait for the launcher; check that no rank outlived it; its stderr."""
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=within_s + 30)
    assert time.monotonic() - t0 < within_s, f"took {time.monotonic() - t0:.0f} s to stop"
    time.sleep(1.0)
    assert not [pid for pid in [proc.pid, *workers] if _alive(pid)], "a process outlived the run"
    assert "Traceback" not in err, err
    return err


def _resume(out: Path, nproc: int) -> pd.DataFrame:
    return cli_run(out, LONG, *ONE_THREAD, "--resume", *(["--nproc", str(nproc)] if nproc > 1 else []))


def _continue_line(out: Path, nproc: int, *extra: str) -> str:
    """The command the run was started with (:func:`_start`, then ``extra``), ``--resume`` added, as printed to paste."""
    typed = cli_argv(out, LONG, *ONE_THREAD, *(["--nproc", str(nproc)] if nproc > 1 else []), *extra)[3:]
    return "continue it with: " + shlex.join(["flamingo-sim", *typed, "--resume"])


@pytest.mark.slow
@pytest.mark.parametrize("sig, nproc, resume_on", [(signal.SIGINT, 3, 2), (signal.SIGTERM, 1, 3), (signal.SIGTERM, 2, 1)],
                         ids=["SIGINT-3-then-2", "SIGTERM-1-then-3", "SIGTERM-2-then-1"])
def test_a_signal_to_the_launcher_is_one_line_and_the_run_resumes_on_other_ranks_identically(whole, tmp_path, sig, nproc, resume_on):
    out = tmp_path / "run"
    proc = _start(out, nproc)
    workers = _after_first_checkpoint(out, proc, nproc)
    proc.send_signal(sig)
    err = _ended(proc, workers, within_s=60)
    assert proc.returncode == 128 + sig, err
    name = signal.Signals(sig).name
    assert err.strip().splitlines()[-1] == f"flamingo-sim run: interrupted ({name}); {_continue_line(out, nproc)}", err
    assert_identical(_resume(out, resume_on), whole)


@pytest.mark.slow
def test_rank_0_killed_stops_the_others_with_one_line_and_resumes_identically(whole, tmp_path):
    out = tmp_path / "run"
    proc = _start(out, 2)
    workers = _after_first_checkpoint(out, proc, 2)
    victim = next(pid for pid, rank in workers.items() if rank == 0)
    os.kill(victim, signal.SIGKILL)
    err = _ended(proc, workers, within_s=60)
    assert proc.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("flamingo-sim run:") or "error" in line.lower()]
    assert lines == [f"flamingo-sim run: error: rank 0 (pid {victim}) was killed by SIGKILL; every other rank was stopped; "
                     f"{_continue_line(out, 2)}"], err
    assert_identical(_resume(out, 2), whole)


@pytest.mark.slow
def test_a_frozen_rank_fails_the_collective_after_the_timeout_with_one_line(whole, tmp_path):
    """A real hang: rank 1 stopped (SIGSTOP), a 5 s collective timeout; every process gone, then resume."""
    out = tmp_path / "run"
    proc = subprocess.Popen(cli_argv(out, LONG, *ONE_THREAD, "--nproc", "2", "--collective-timeout-s", "5"), env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = _after_first_checkpoint(out, proc, 2)
    frozen = next(pid for pid, rank in workers.items() if rank == 1)
    os.kill(frozen, signal.SIGSTOP)
    try:
        err = _ended(proc, workers, within_s=120)
    finally:
        if _alive(frozen):
            os.kill(frozen, signal.SIGKILL)
    assert proc.returncode == 2, err
    # two lines: the rank that timed out says which collective and why, then the launcher names it and how to continue
    error_lines = [line for line in err.splitlines() if line.startswith("flamingo-sim run: error:")]
    assert len(error_lines) == 2, err
    assert re.fullmatch(r"flamingo-sim run: error: rank 0: .* timed out after 5 s waiting for the other ranks \(--collective-timeout-s; "
                        r"a rank is stuck or gone\).*", error_lines[0]), error_lines
    assert re.fullmatch(r"flamingo-sim run: error: rank 0 \(pid \d+\) stopped with the error above; every other rank was stopped; "
                        + re.escape(_continue_line(out, 2, "--collective-timeout-s", "5")), error_lines[1]), error_lines
    assert_identical(_resume(out, 1), whole)


def _fixture(root: Path) -> Path:
    from tests.fl.data.test_data import _write_fedscale

    _write_fedscale(root, {"a": 16, "b": 20, "c": 16, "d": 18})
    return root


@pytest.mark.slow
def test_mobilenet_with_batchnorm_and_dropout_over_two_ranks_equals_one_process(tmp_path):
    """MobileNetV2 at 32 px (BatchNorm buffers, dropout) on FedScale-layout images: the MLP proxy has neither."""
    root = _fixture(tmp_path / "openimage")
    # threads: over ranks a model with dropout trains with it (per-client dropout generators); one process
    # must be told, as its default (auto) may pick vmap or sequential, whose masks differ (found by this test)
    overrides = [f"data.root={root}", "data.image_size=32", "fl.rounds=2", "fl.participants_per_round=3", "fl.local_steps=2",
                 "fl.batch_size=8", "fl.eval_every=1", "policies=[baseline]", "data.decode_workers=1", "fl.train_mode=threads"]
    two = cli_run(tmp_path / "two", overrides, *ONE_THREAD, "--nproc", "2")
    one = cli_run(tmp_path / "one", overrides, *ONE_THREAD)
    assert one["n_kept"].iloc[1:].sum() > 0 and one["accuracy"].notna().all()
    assert_identical(two, one)


@pytest.mark.slow
def test_fedbuff_and_two_seeds_over_two_ranks_equal_one_process(tmp_path):
    overrides = ["fl.rounds=4", "data.proxy.n_clients=100", "fl.local_steps=2", "fl.eval_every=2", "fedbuff.buffer_size=4",
                 "fedbuff.concurrency=10", "policies=[baseline]"]
    exp = ROOT / "experiments" / "toolkit_fedbuff.yaml"
    two = cli_run(tmp_path / "two", overrides, *ONE_THREAD, "--seeds", "2", "--nproc", "2", experiment=exp)
    one = cli_run(tmp_path / "one", overrides, *ONE_THREAD, "--seeds", "2", experiment=exp)
    assert sorted(one["seed"].unique()) == [0, 1] and one["n_kept"].sum() > 0
    assert_identical(two, one)
