"""The device model's unknowns (flamingo_sim.studies.unknowns): each a valid range with its reason; a headline's range
over them beside its seed interval and the paper's figure; ``sensitivity --unknowns`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.cli import main
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.studies.unknowns import UNKNOWNS, model_range, range_markdown, unknowns_vary

ROOT = Path(__file__).resolve().parents[2]
EXP = ROOT / "experiments" / "openimage_mobilenet.yaml"
TINY = ["fl.rounds=2", "fl.participants_per_round=4", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=100"]


@pytest.mark.parametrize("unknown", UNKNOWNS, ids=[u.key for u in UNKNOWNS])
def test_every_value_of_every_unknown_is_a_valid_configuration_with_a_reason(unknown):
    assert len(unknown.values) >= 2 and len(set(unknown.values)) == len(unknown.values)
    assert len(unknown.reason) > 60  # a reason, not a label
    for value in unknown.values:
        load_experiment(EXP, [f"{unknown.key}={value}"])


def test_the_user_s_own_vary_of_an_unknown_wins():
    items = unknowns_vary(["policy.interference.runtime=libomp", "fl.overcommit=1.0"])
    assert not any(i.startswith("policy.interference.runtime=") for i in items)
    assert len(items) == len(UNKNOWNS) - 1 and "network.model=lognormal,traces" in items


def _rows(speedups, efficiencies, knobs):
    return [{"knob": k, "value": "", "speedup": s, "energy_efficiency": e} for k, s, e in zip(knobs, speedups, efficiencies)]


def test_the_range_by_hand():
    rows = _rows([6.0, 4.0, 9.0, 100.0, None], [5.0, 5.5, 3.0, 1.0, 2.0],
                 ["reference", "policy.interference.runtime", "network.model", "fl.overcommit", "phones.profile_set"])
    got = model_range(rows, {"speedup": [5.0, 7.5, 5.5], "energy_efficiency": [4.0, 6.0]}, {"speedup": 23.3, "energy_efficiency": 5.2})
    # fl.overcommit is no unknown of the device model: its 100x is outside the range; a missing ratio (None) is skipped
    assert got["speedup"] == {"reference": 6.0, "seed_interval": [5.0, 7.5], "n_seeds": 3, "model_range": [4.0, 9.0], "n_points": 3,
                              "paper": 23.3, "range_holds_paper": False}
    assert got["energy_efficiency"]["model_range"] == [2.0, 5.5] and got["energy_efficiency"]["range_holds_paper"] is True
    text = range_markdown(got)
    assert "| speedup | 6.00x | 5.00-7.50x (3 seeds) | 4.00-9.00x (3 points) | 23.3x | no |" in text
    assert "| energy efficiency | 5.00x | 4.00-6.00x (2 seeds) | 2.00-5.50x (4 points) | 5.2x | yes |" in text
    assert all(f"`{u.key}`" in text for u in UNKNOWNS)


@pytest.mark.slow
def test_sensitivity_with_the_unknowns_writes_the_range(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    out = tmp_path / "range"
    sets = [x for s in TINY for x in ("--set", s)]
    # two unknowns left at one value each (theirs given by --vary), the rest at their whole range
    args = ["sensitivity", str(EXP), "--out", str(out), "--unknowns", "--vary", "phones.profile_set=public",
            "--vary", "policy.interference.foreground_threads=1", "--jobs", "2", *sets]
    assert main(args) == 0
    got = json.loads((out / "range.json").read_text())
    table = pd.read_csv(out / "sensitivity.csv")
    unknown_rows = table[table["knob"].isin([u.key for u in UNKNOWNS]) | (table["knob"] == "reference")]
    speedups = [v for v in unknown_rows["speedup"] if pd.notna(v)]
    assert got["speedup"]["model_range"] == [min(speedups), max(speedups)]
    assert got["speedup"]["paper"] == 23.3 and got["energy_efficiency"]["paper"] == 7.0
    assert [u["key"] for u in got["unknowns"]] == [u.key for u in UNKNOWNS]
    assert "## The headline over the model's unknowns" in (out / "sensitivity.md").read_text()
