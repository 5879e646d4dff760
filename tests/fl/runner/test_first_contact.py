"""What a new user hit first (issue 22): a network that does not fit the data, progress lines that
repeated an old accuracy, errors that took seconds because torch was imported before the arguments were read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.cli import main

ROOT = Path(__file__).resolve().parents[3]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"
TINY = ["fl.rounds=4", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=2", "data.proxy.n_clients=100"]




def test_a_network_that_fails_its_first_forward_pass_is_one_line_and_leaves_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", str(ROOT / "experiments" / "toolkit_leaf_femnist.yaml"), "--set", "data.model=byo_models:CharBag", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "Traceback" not in "\n".join(err)
    assert err[-1] == (f"flamingo-sim run: error: {ROOT / 'experiments' / 'toolkit_leaf_femnist.yaml'}: data.model: model "
                       "'byo_models:CharBag' fails on a batch of shape (2, 1, 28, 28) (input_shape (1, 28, 28), 62 classes): "
                       "RuntimeError: mat1 and mat2 shapes cannot be multiplied (3136x32 and 64x64)")
    assert not out.exists()  # no .lock, config.yaml or inputs.json to block the next run or a --resume


def test_a_network_with_the_wrong_output_is_one_line(tmp_path, capsys):
    (tmp_path / "wrong_out.py").write_text(
        "from torch import nn\n"
        "def Net(input_shape, n_classes):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(784, n_classes + 1))\n")
    exp = tmp_path / "femnist.yaml"
    exp.write_text((ROOT / "experiments" / "toolkit_leaf_femnist.yaml").read_text()
                   .replace("data/leaf_femnist_tiny", str(ROOT / "experiments" / "data" / "leaf_femnist_tiny"))
                   .replace("traces/synthetic", str(ROOT / "traces" / "synthetic"))
                   .replace("profiles_dir: profiles", f"profiles_dir: {ROOT / 'profiles'}"))
    rc = main(["run", str(exp), "--set", "data.model=wrong_out:Net", "--out", str(tmp_path / "run")])
    assert rc == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "data.model: model 'wrong_out:Net' maps a batch of shape (2, 1, 28, 28) to (2, 63); expected logits of shape (2, 62)")
    assert not (tmp_path / "run").exists()


def test_progress_lines_print_the_accuracy_only_where_it_was_measured(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FLAMINGO_SIM_QUIET", raising=False)
    assert main(["run", str(EXP), "--out", str(tmp_path / "run"), *[a for kv in TINY for a in ("--set", kv)]]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if re.match(r"(baseline|flamingo) seed 0: \d/4 round", line)]
    metrics = pd.read_parquet(tmp_path / "run" / "metrics.parquet")
    seen = 0
    for line in lines:
        policy, rnd = line.split()[0], int(line.split()[3].split("/")[0])
        acc = metrics[(metrics["policy"] == policy) & (metrics["round"] == rnd)]["accuracy"].iloc[0]
        if pd.isna(acc):
            assert "acc=" not in line, line
        else:
            assert f"acc={acc:.3f} " in line, line
        seen += 1
    rounds = {int(line.split()[3].split("/")[0]) for line in lines}
    assert seen >= 6 and 3 in rounds  # round 3 is not evaluated (eval_every 2; round 1 is, as the first)


@pytest.mark.parametrize("args,message", [
    (["--seeds", "0"], "flamingo-sim run: error: --seeds: expected a count >= 1, got 0"),
    (["--set", "fl.lr=-1"], f"flamingo-sim run: error: {EXP}: fl.lr: expected a number > 0 that fits float32, the training's dtype "
                            "(its size between 1.2e-38 and 3.4e+38, or 0), got -1.0"),
    (["--set", "target.curve=mean"], f"flamingo-sim run: error: {EXP}: target.curve: expected one of 'smoothed' or 'raw', got 'mean'"),
    (["--resume"], "flamingo-sim run: error: --resume: needs --out, the run directory to continue"),
    (["--executors", "2"], "flamingo-sim run: error: --executors: 2 executor processes need --engine 'fedscale', not 'native'"),
])
def test_run_errors_come_before_torch_is_imported(args, message, tmp_path):
    """Each error is one line, and the process never imports torch (what took 3.5-5 s)."""
    code = ("import sys; from flamingo_sim.cli import main; rc = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch imported'; raise SystemExit(rc)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLAMINGO_SIM_QUIET": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, "run", str(EXP), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60, check=False)
    took = time.perf_counter() - start
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == message
    assert took < 30  # generous on a shared machine; the torch check above is what decides
    assert list(tmp_path.iterdir()) == []


def test_help_does_not_import_torch_or_matplotlib():
    code = ("import sys, contextlib, io; from flamingo_sim.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main(['--help'])\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=60, check=True)
    assert proc.stdout.strip() == "[]"
