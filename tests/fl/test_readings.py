"""The paper's readings as one named setting (``--readings paper``): what it sets, and that the default sets nothing."""

from __future__ import annotations

import json

import pytest

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.readings import EXPLORE_THEN_SHARE, READINGS, config_overrides, readings_overrides
from tests.report_runs import ROOT

EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"


def test_default_sets_nothing_and_paper_sets_every_config_reading():
    assert readings_overrides("default") == ()
    assert readings_overrides("paper") == ("target_accuracy=highest", "policy.exploration=none", "traces.charge_state=level",
                                           "policy.interference.runtime=libomp", "target.curve=raw", "target.margin=0")
    # Appendix B's explore-then-share: every paper reading but exploration, which stays the default (packed, shared)
    assert EXPLORE_THEN_SHARE == ("target_accuracy=highest", "traces.charge_state=level", "policy.interference.runtime=libomp",
                                  "target.curve=raw", "target.margin=0")
    assert config_overrides({"exploration": "packed", "charge_state": "level"}) == ("traces.charge_state=level",)


def test_paper_readings_load_as_the_papers_words():
    cfg = load_experiment(EXP, readings_overrides("paper"))
    assert (cfg.target_accuracy, cfg.target.curve, cfg.target.margin) == ("highest", "raw", 0.0)
    assert cfg.policy.exploration == "none" and cfg.traces.charge_state == "level"
    assert cfg.policy.interference.runtime == "libomp"  # appendix B: PyTorch built in Termux, with OpenMP
    plain = load_experiment(EXP)
    assert len(READINGS) >= 3, [r.key for r in READINGS]
    for r in READINGS:  # each reading's default is the shipped experiment's value
        value = plain
        for part in r.key.split("."):  # a nested key (policy.interference.runtime) walks its sections
            value = getattr(value, part)
        assert str(value) == r.default or float(value) == float(r.default), r.key


def test_unknown_readings_name_is_one_line():
    with pytest.raises(ConfigError, match=r"--readings: expected one of default, paper, got 'papers'"):
        readings_overrides("papers")


def test_unknown_charge_state_names_the_key():
    with pytest.raises(ConfigError, match="charge_state"):
        load_experiment(EXP, ["traces.charge_state=sometimes"])


@pytest.mark.slow
def test_run_with_paper_readings_has_no_exploration_and_user_set_wins(tmp_path):
    from flamingo_sim.cli import main

    out = tmp_path / "run"
    args = ["run", str(EXP), "--readings", "paper", "--out", str(out), "--set", "target.margin=0.005"]
    for item in ("fl.rounds=4", "fl.participants_per_round=6", "fl.local_steps=3", "fl.eval_every=2", "data.proxy.n_clients=150"):
        args += ["--set", item]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policies"]["flamingo"]["exploration"] is None  # no client explored
    assert summary["target_rule"]["reading"] == "highest" and summary["target_rule"]["curve"] == "raw"
    assert summary["target_rule"]["margin"] == 0.005  # the user's --set comes after the readings
    import pandas as pd

    m = pd.read_parquet(out / "metrics.parquet")
    assert int(m.loc[m["policy"] == "flamingo", "n_exploring"].sum()) == 0
