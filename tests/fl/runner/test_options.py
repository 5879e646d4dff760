"""The frozen run options: fields changed by name, the execution's fields reachable, unknown names refused."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.options import Execution, RunOptions
from flamingo_sim.fl.runner.run import run_experiment

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["fl.rounds=2", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=60", "policies=[baseline]"]


def test_options_are_frozen_and_changed_by_name() -> None:
    base = RunOptions(overrides=["fl.rounds=3"])  # type: ignore[arg-type]  # a list is kept as a tuple
    assert base.overrides == ("fl.rounds=3",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.resume = True  # type: ignore[misc]
    changed = base.with_fields(jobs=None, executor="ray", resume=True)
    assert changed.execution == Execution(jobs=None, executor="ray") and changed.resume
    assert base.execution == Execution() and not base.resume  # the original is unchanged


def test_device_and_threads_are_overrides_by_another_name() -> None:
    assert RunOptions(overrides=("a=1",), device="cpu", threads=2).all_overrides() == ["a=1", "fl.device=cpu", "fl.threads=2"]


def test_an_unknown_option_is_one_line_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"^run_experiment: unknown option 'job' \(known: .*\bexecutor, executors, jobs, n_seeds, out_dir\b"):
        RunOptions().with_fields(job=2)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Execution(jobs=0), "Execution: jobs: expected an integer >= 1, got 0"),
    (lambda: RunOptions().with_fields(jobs=0), "Execution: jobs: expected an integer >= 1, got 0"),
])
def test_numbers_out_of_range_are_one_line_naming_the_option(make, message) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        make()


@pytest.mark.slow
def test_options_object_and_keywords_run_the_same(tmp_path: Path) -> None:
    exp = ROOT / "experiments/openimage_mobilenet.yaml"
    a = run_experiment(exp, RunOptions(out_dir=tmp_path / "a", overrides=tuple(SMALL)), log=lambda _m: None)
    b = run_experiment(exp, out_dir=tmp_path / "b", overrides=SMALL, log=lambda _m: None)
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=True)
    assert len(a.metrics) == 3  # rounds 0-2 of the one policy
