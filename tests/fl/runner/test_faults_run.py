"""Runs under faults: damaged checkpoints, changed inputs, a second writer, a full disk, a signal, a report mid-way."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.runner.checkpoint import (
    MAGIC,
    ROW_TEXTS,
    CheckpointError,
    load_checkpoint,
    prev_path,
    save_checkpoint,
)
from flamingo_sim.fl.runner.run import run_experiment
from tests.cli_runs import assert_identical, cli_env, cli_run
from tests.fl.interrupt import run_interrupted
from tests.mounts import needs_mounts

ROOT = Path(__file__).resolve().parents[3]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"
TINY = ["fl.rounds=4", "checkpoint_every=1", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2", "data.proxy.n_clients=100"]
QUIET = cli_env()


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted tiny run the in-process fault cases are compared with (run in this process: its kernels)."""
    return run_experiment(EXP, out_dir=tmp_path_factory.mktemp("whole") / "run", overrides=TINY, log=lambda m: None)


@pytest.fixture(scope="module")
def whole_cli(tmp_path_factory):
    """The uninterrupted tiny run the command-line fault cases are compared with (a subprocess, as they are)."""
    return cli_run(tmp_path_factory.mktemp("whole-cli") / "run", TINY)


def _cut(tmp_path, monkeypatch, at_round=3, overrides=TINY):
    """A run stopped by Ctrl-C during flamingo's round ``at_round`` (checkpoints of rounds 1..at_round-1 on disk)."""
    return run_interrupted(monkeypatch, EXP, tmp_path / "cut", overrides, after_round=at_round - 1, policy="flamingo")


# -- checkpoints ----------------------------------------------------------------------------------
def _state() -> dict:
    """A checkpoint's content (built when a test runs: nothing at import runs a torch kernel)."""
    return {"simulation": {"round": 3, "params": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)},
                           "ever_lost": np.array([True, False]), "key": np.arange(4, dtype=np.uint32),
                           "clock_s": np.float64(12.5), "n": np.int8(-3)},
            "rows": [{"policy": "baseline", "accuracy": np.float32(0.25), "round": 1, "loss": float("nan")}]}


def test_checkpoint_round_trip_keeps_tensors_arrays_and_numpy_scalars_exactly(tmp_path):
    state = _state()
    save_checkpoint(tmp_path / "c.pt", state)
    got = load_checkpoint(tmp_path / "c.pt", log=print)
    sim = got["simulation"]
    assert torch.equal(sim["params"]["w"], state["simulation"]["params"]["w"])
    for key in ("ever_lost", "key"):
        assert sim[key].dtype == state["simulation"][key].dtype and np.array_equal(sim[key], state["simulation"][key])
    assert type(sim["clock_s"]) is np.float64 and sim["clock_s"] == 12.5 and type(sim["n"]) is np.int8 and sim["n"] == -3
    assert type(got["rows"][0]["accuracy"]) is np.float32 and got["rows"][0]["accuracy"] == np.float32(0.25)
    assert np.isnan(got["rows"][0]["loss"])
    assert load_checkpoint(tmp_path / "none.pt", log=print) is None


def test_a_run_checkpoint_holds_each_row_as_the_result_files_json_text_and_gives_back_its_rows(tmp_path):
    """The saver stores the rounds as the JSON texts the unit's result file holds (pickled as strings, not as dicts);
    loading gives the rows back as that file reads them, and a text that is not a JSON object is refused, naming the file."""
    out = tmp_path / "run"
    run_experiment(EXP, out_dir=out, overrides=[*TINY, "policies=[baseline]"], log=lambda m: None)
    ckpt = out / "checkpoints" / "baseline-seed0.pt"
    payload = ckpt.read_bytes()[len(MAGIC):].partition(b"\n")[2]
    raw = torch.load(io.BytesIO(payload), weights_only=True)
    assert "rows" not in raw and [type(t) for t in raw[ROW_TEXTS]] == [str] * 5  # rounds 0-4
    result = json.loads((out / "units" / "baseline-seed0.json").read_text())
    assert load_checkpoint(ckpt, log=print)["rows"] == result["rows"]
    prev_path(ckpt).unlink()
    save_checkpoint(ckpt, {"simulation": {}, ROW_TEXTS: ["[1, 2]"]})
    prev_path(ckpt).unlink()
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(ckpt))}: its rows are not JSON objects \(a row is not a JSON object\); no good"):
        load_checkpoint(ckpt, log=print)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flipped":
        i = len(data) - 200  # inside the stored weights
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    elif how == "extra_object":
        path.write_bytes(data + pickle.dumps({"extra": 1}))


@pytest.mark.parametrize("how, message", [
    ("truncated", r"truncated or extended checkpoint \(\d+ payload bytes, header says \d+\)"),
    ("flipped", r"checkpoint checksum mismatch \(the file was altered or damaged\)"),
    ("extra_object", r"truncated or extended checkpoint \(\d+ payload bytes, header says \d+\)"),
])
def test_damaged_checkpoint_is_named_and_the_previous_one_used(tmp_path, how, message):
    state = _state()
    path = tmp_path / "c.pt"
    first = {**state, "rows": state["rows"][:0]}
    save_checkpoint(path, first)
    save_checkpoint(path, state)
    assert prev_path(path).is_file()
    _damage(path, how)
    said: list[str] = []
    got = load_checkpoint(path, log=said.append)
    assert got["rows"] == []  # the previous checkpoint
    assert len(said) == 1 and re.fullmatch(rf"WARNING: {re.escape(str(path))}: {message}; resuming from the previous checkpoint {re.escape(str(prev_path(path)))}", said[0])
    # a damaged newest file never becomes the fallback: the next save keeps the good previous one
    save_checkpoint(path, state)
    assert load_checkpoint(prev_path(path), log=print)["rows"] == []
    # with no good checkpoint at all: one line naming the file
    _damage(path, how)
    prev_path(path).unlink()
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: {message}; no good earlier checkpoint - start the run again with another out_dir$"):
        load_checkpoint(path, log=print)


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_checkpoint_holding_code_is_refused_even_with_a_valid_checksum(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.chdir(tmp_path)
    buf = io.BytesIO()
    torch.save({"simulation": {}, "rows": [], "extra": _Payload()}, buf)
    payload = buf.getvalue()
    (tmp_path / "c.pt").write_bytes(MAGIC + f"sha256 {hashlib.sha256(payload).hexdigest()} {len(payload)}\n".encode() + payload)
    with pytest.raises(CheckpointError, match=r"c\.pt: holds more than tensors and plain data, refused \(.*\); no good earlier checkpoint"):
        load_checkpoint(tmp_path / "c.pt", log=print)
    assert not (tmp_path / "pwned").exists()


def test_a_checkpoint_is_saved_without_reading_it_back_and_verified_when_resumed_from(tmp_path, monkeypatch):
    """The save hashes the bytes in memory and never reads the new file back (nor unpickles the old one): a byte altered on
    disk afterwards is found by the checksum when a resume reads it, and the resume refuses it."""
    path = tmp_path / "c.pt"
    reads: list[str] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or real(self))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("save_checkpoint unpickled a checkpoint"))
    save_checkpoint(path, _state())
    assert reads == []  # the new file: not read back
    save_checkpoint(path, _state())
    assert reads == ["c.pt"]  # the old one: its checksum checked before it becomes the fallback, nothing unpickled
    monkeypatch.undo()
    assert load_checkpoint(path, log=print)["simulation"]["round"] == 3
    prev_path(path).unlink()
    _damage(path, "flipped")
    with pytest.raises(CheckpointError, match=r"checkpoint checksum mismatch \(the file was altered or damaged\); no good earlier checkpoint"):
        load_checkpoint(path, log=print)


def test_a_fallback_holding_code_with_a_valid_checksum_is_still_refused_at_resume(tmp_path, monkeypatch):
    """The save checks the old file's checksum only, so a file that holds code under a valid checksum can become NAME.prev;
    a resume that falls back to it still unpickles tensors and plain data only, and refuses it without running anything."""
    import hashlib

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.pt"
    buf = io.BytesIO()
    torch.save({"simulation": {}, "rows": [], "extra": _Payload()}, buf)
    payload = buf.getvalue()
    path.write_bytes(MAGIC + f"sha256 {hashlib.sha256(payload).hexdigest()} {len(payload)}\n".encode() + payload)
    save_checkpoint(path, _state())
    assert prev_path(path).is_file() and not (tmp_path / "pwned").exists()
    _damage(path, "truncated")
    with pytest.raises(CheckpointError, match=r"c\.pt: truncated or extended checkpoint .*; no good earlier checkpoint"):
        load_checkpoint(path, log=print)  # the damaged newest named, the fallback refused too
    with pytest.raises(CheckpointError, match=r"c\.pt\.prev: holds more than tensors and plain data, refused"):
        load_checkpoint(prev_path(path), log=print)
    assert not (tmp_path / "pwned").exists()


def test_resume_after_a_damaged_checkpoint_falls_back_and_equals_the_uninterrupted_run(whole, tmp_path, monkeypatch, capsys):
    cut = _cut(tmp_path, monkeypatch)
    _damage(cut / "checkpoints" / "flamingo-seed0.pt", "flipped")
    said: list[str] = []
    resumed = run_experiment(EXP, out_dir=cut, overrides=TINY, resume=True, log=said.append)
    assert any("checkpoint checksum mismatch" in s and "resuming from the previous checkpoint" in s for s in said), said
    assert_identical(resumed.metrics, whole.metrics)


# -- resume checks ---------------------------------------------------------------------------------
def test_resume_refuses_changed_inputs_and_names_the_differing_config_keys(tmp_path, monkeypatch):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    traces = tmp_path / "traces"
    shutil.copytree(ROOT / "traces" / "synthetic", traces)
    overrides = [*TINY, f"traces.path={traces}"]
    cut = _cut(tmp_path, monkeypatch, overrides=overrides)
    with pytest.raises(ConfigError, match=r"config differs from the one this run started with in fl\.rounds \(4 -> 5\), fl\.eval_every \(2 -> 1\); resume with"):
        run_experiment(EXP, out_dir=cut, overrides=[*overrides, "fl.rounds=5", "fl.eval_every=1"], resume=True, log=print)
    table = pq.read_table(traces / "devices.parquet")  # rebuilt at the same path with other content
    i = table.column_names.index("battery_level_pct")
    pq.write_table(table.set_column(i, "battery_level_pct", pc.multiply(table.column(i), 0.5)), traces / "devices.parquet")
    with pytest.raises(ConfigError, match=rf"cannot resume: input traces\.path devices\.parquet \({re.escape(str(traces / 'devices.parquet'))}\) changed since the run started"):
        run_experiment(EXP, out_dir=cut, overrides=overrides, resume=True, log=print)


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", f"from flamingo_sim.faults import run_lock\nimport time\nwith run_lock({str(out)!r}):\n print('x', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, env=QUIET)
    try:
        holder.stdout.readline()
        with pytest.raises(FlamingoError, match=rf"another flamingo-sim process \(PID {holder.pid}\) is writing this run directory"):
            run_experiment(EXP, out_dir=out, overrides=TINY, log=lambda m: None)
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # the refused writer wrote nothing


# -- report of an incomplete run -------------------------------------------------------------------
def test_report_of_an_incomplete_run_says_so(tmp_path, monkeypatch, capsys):
    cut = _cut(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["report", str(cut), "--format", "png"]) == 0
    err = capsys.readouterr().err
    assert f"flamingo-sim report: {cut}: incomplete run: 6 of 8 policy-seed rounds (2 policies x 1 seed(s) x 4 rounds)" in err
    md = (cut / "report" / "report.md").read_text()
    assert "experiment openimage_mobilenet, model mobilenet_v2" in md and "incomplete run: 6 of 8 policy-seed rounds (2 policies x 1 seed(s) x 4 rounds)" in md
    # and a --out holding the user's files is refused
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "paper.md").write_text("draft")
    assert main(["report", str(cut), "--out", str(mine)]) == 2
    assert "holds files flamingo-sim did not write" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["paper.md"]


# -- subprocesses: a full disk, SIGTERM, SIGKILL ---------------------------------------------------
def _cli(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "flamingo_sim", "run", str(EXP), "--out", str(out), *[a for s in TINY for a in ("--set", s)], *extra]


def _leftovers(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name.endswith((".tmp", ".staging", ".old")))


@pytest.mark.slow
def test_disk_full_is_one_line_naming_resume_and_the_resumed_run_is_identical(whole_cli, tmp_path):
    out = tmp_path / "run"
    limit = ("import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
             "resource.setrlimit(resource.RLIMIT_FSIZE, (40000, 40000)); sys.argv = sys.argv[1:]; "
             "runpy.run_module('flamingo_sim', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", limit, *_cli(out)[2:]], capture_output=True, text=True, env=QUIET, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    # whichever file passes the 40 kB limit first (a checkpoint, or the metrics with the device limits' columns)
    assert re.fullmatch(
        rf"flamingo-sim run: error: {re.escape(str(out))}/(checkpoints/\S+|metrics\.parquet): File too large \(EFBIG\); the disk is full \(or a quota or "
        rf"file-size limit is reached\): free space, nothing half-written was kept; continue it with: "
        + re.escape(shlex.join(["flamingo-sim", *_cli(out)[3:], "--resume"])), line), line
    assert "Traceback" not in proc.stderr and _leftovers(out) == []
    proc = subprocess.run(_cli(out, "--resume"), capture_output=True, text=True, env=QUIET, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert_identical(pd.read_parquet(out / "metrics.parquet"), whole_cli)


def _wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.slow
def test_sigterm_is_handled_like_sigint(whole_cli, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(_cli(out), stderr=subprocess.PIPE, text=True, env=QUIET)
    _wait_for(out / "checkpoints" / "baseline-seed0.pt", proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == (
        "flamingo-sim run: interrupted (SIGTERM); continue it with: " + shlex.join(["flamingo-sim", *_cli(out)[3:], "--resume"])
    )
    assert _leftovers(out) == []
    proc = subprocess.run(_cli(out, "--resume"), capture_output=True, text=True, env=QUIET, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert_identical(pd.read_parquet(out / "metrics.parquet"), whole_cli)


@pytest.mark.slow
def test_sigkill_at_ten_random_points_then_resume_is_bit_identical(whole_cli, tmp_path):
    """kill -9 at random moments of one run (the same directory, again and again), then resume to the end."""
    rng = np.random.default_rng(17)
    out = tmp_path / "run"
    kills = 0
    first = True
    while kills < 10:
        proc = subprocess.Popen(_cli(out, *([] if first else ["--resume"])), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=QUIET)
        _wait_for(out / "config.yaml", proc)
        first = False
        time.sleep(float(rng.uniform(0.0, 2.5)))
        if proc.poll() is not None:  # finished before the kill: start again from scratch
            assert proc.returncode == 0, proc.stderr.read()
            shutil.rmtree(out)
            first = True
            continue
        proc.kill()
        proc.wait()
        kills += 1
        if not (out / "config.yaml").exists():  # killed before the run directory was written
            shutil.rmtree(out, ignore_errors=True)
            first = True
    proc = subprocess.run(_cli(out, *([] if first else ["--resume"])), capture_output=True, text=True, env=QUIET, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert_identical(pd.read_parquet(out / "metrics.parquet"), whole_cli)
    assert _leftovers(out) == []


@needs_mounts
@pytest.mark.parametrize("command", [pytest.param("run", marks=pytest.mark.slow), "prep-traces", "synth-greenhub"])
def test_a_read_only_mount_is_one_line_before_any_work(tmp_path, command):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    argv = {
        "run": _cli(mnt / "run")[3:],
        "prep-traces": ["prep-traces", str(ROOT / "traces" / "synthetic" / "devices.parquet"), "--out", str(mnt / "ts")],
        "synth-greenhub": ["synth-greenhub", "--out", str(mnt / "dump")],
    }[command]
    script = f"mount -t tmpfs -o ro,size=64k tmpfs {mnt} && exec {sys.executable} -m flamingo_sim {' '.join(map(str, argv))}"
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=QUIET, timeout=120, check=False)
    assert proc.returncode == 2
    given = {"run": mnt / "run", "prep-traces": mnt / "ts", "synth-greenhub": mnt / "dump"}[command]
    # the path the user gave, then the folder that refused and why (issue 22: it named only the folder)
    assert proc.stderr.strip() == f"flamingo-sim {command}: error: {given}: cannot write in {mnt}: Read-only file system (EROFS)"


@pytest.mark.slow
@needs_mounts
def test_a_really_full_disk_mid_run_then_resume_on_more_space_is_identical(whole_cli, tmp_path):
    """A 100 KiB tmpfs fills up at the second checkpoint (ENOSPC); after growing it, --resume ends the run."""
    mnt, host = tmp_path / "disk", tmp_path / "host"
    mnt.mkdir()
    host.mkdir()
    run = " ".join(_cli(mnt / "run"))
    script = (f"mount -t tmpfs -o size=100k tmpfs {mnt} && {{ {run} 2> {host}/err1; echo $? > {host}/rc1; "
              f"ls -a {mnt}/run {mnt}/run/checkpoints > {host}/ls; mount -o remount,size=20m {mnt} && {run} --resume 2> {host}/err2; "
              f"echo $? > {host}/rc2; cp {mnt}/run/metrics.parquet {host}/; }}")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=QUIET, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    err1 = (host / "err1").read_text().strip().splitlines()[-1]
    assert (host / "rc1").read_text().strip() == "2", err1
    assert re.fullmatch(rf"flamingo-sim run: error: {re.escape(str(mnt))}/run/\S+: No space left on device \(ENOSPC\); the disk is full "
                        r".*; continue it with: " + re.escape(shlex.join(["flamingo-sim", *_cli(mnt / "run")[3:], "--resume"])), err1), err1
    assert not [n for n in (host / "ls").read_text().split() if n.endswith((".tmp", ".staging", ".old"))]  # nothing half-written
    assert (host / "rc2").read_text().strip() == "0", (host / "err2").read_text()
    assert_identical(pd.read_parquet(host / "metrics.parquet"), whole_cli)


def test_resume_accepts_a_key_added_since_the_run_started_at_its_default(tmp_path):
    # a run directory written before traces.charge_state existed: resumable as long as the key holds its
    # default (what that run did); set otherwise, it is a difference like any other
    import yaml

    from flamingo_sim.config import to_mapping
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.runner.rundir import check_run_dir

    cfg = load_experiment(EXP, TINY)
    old = to_mapping(cfg)
    del old["traces"]["charge_state"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    check_run_dir(tmp_path, cfg, resume=True)
    with pytest.raises(ConfigError, match=r"traces\.charge_state \(not in the run\)"):
        check_run_dir(tmp_path, load_experiment(EXP, [*TINY, "traces.charge_state=level"]), resume=True)
