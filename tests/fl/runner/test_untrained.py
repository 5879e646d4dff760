"""A run that never trains says so: its summary and printed table carry a warning, and ``run`` exits 1 unless
``--allow-untrained`` (the issue's case: ``fl.deadline_s=0.001`` kept 0 clients every round and exited 0)."""

from __future__ import annotations

import json
import subprocess

import pandas as pd

from flamingo_sim.fl.runner.results import untrained_seeds
from tests.cli_runs import cli_argv, cli_env

TINY = ["fl.rounds=2", "data.proxy.n_clients=40", "fl.participants_per_round=2", "fl.eval_every=1", "fl.deadline_s=0.001"]


def test_a_run_that_never_trains_is_written_warned_and_exits_1(tmp_path):
    done = subprocess.run(cli_argv(tmp_path / "run", TINY), capture_output=True, text=True, env=cli_env(), timeout=600, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: ") and "no client trained in any round (baseline seed(s) 0; flamingo seed(s) 0)" in done.stderr
    assert "--allow-untrained" in done.stderr.splitlines()[-1]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["untrained"] == {"baseline": [0], "flamingo": [0]}
    assert "warning: baseline trained no client in seed(s) 0" in done.stdout
    asked = subprocess.run(cli_argv(tmp_path / "ok", TINY, "--allow-untrained"), capture_output=True, text=True, env=cli_env(), timeout=600, check=False)
    assert asked.returncode == 0, asked.stderr


def test_untrained_seeds_counts_only_rounds_after_0():
    m = pd.DataFrame({"policy": ["a"] * 3 + ["b"] * 3, "seed": [0, 0, 1, 0, 0, 0], "round": [0, 1, 1, 0, 1, 2], "n_kept": [5, 0, 3, 9, 0, 1]})
    assert untrained_seeds(m, ["a", "b"]) == {"a": [0]}  # a's seed 0 kept 0 after round 0; b kept one in round 2
