"""The thread default as ``run --help`` states it is what runs use (issue 44: the help said "OMP_NUM_THREADS or the
usable cores", every run on the proxy task printed "1 CPU thread(s)")."""

from __future__ import annotations

import torch

from flamingo_sim.cli import build_parser
from flamingo_sim.config import from_mapping
from flamingo_sim.fl.config import THREADS_DEFAULT, ExperimentConfig
from flamingo_sim.fl.config_reference import config_keys
from flamingo_sim.fl.runner.kernels import training_on
from flamingo_sim.fl.training.device import default_threads, usable_cores


def _run_help() -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    run = sub.choices["run"]  # type: ignore[attr-defined]
    return next(a.help for a in run._actions if "--threads" in a.option_strings)


def test_the_help_and_the_reference_state_the_rule_default_threads_follows(monkeypatch):
    assert THREADS_DEFAULT in _run_help()
    assert THREADS_DEFAULT in next(k.description for k in config_keys() if k.key == "fl.threads")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads(small_model=True) == 1  # "1 for the proxy task"
    assert default_threads(small_model=False) == usable_cores()  # "else the usable cores"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads(small_model=True) == default_threads(small_model=False) == 3  # "OMP_NUM_THREADS if set"


def test_a_proxy_run_says_the_threads_the_help_promises(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        line = training_on(from_mapping(ExperimentConfig, {"name": "x"}), "DEFAULT")
    finally:
        torch.set_num_threads(before)
    assert line == "training on cpu with 1 CPU thread(s), precision fp32, DEFAULT CPU kernels"
