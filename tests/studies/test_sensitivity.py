"""``flamingo-sim sensitivity``: the one-at-a-time grid, its table and chart, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError
from flamingo_sim.studies.sensitivity import parse_vary, relative_changes

ROOT = Path(__file__).resolve().parents[2]
EXP = str(ROOT / "experiments" / "openimage_mobilenet.yaml")
SMALL = ["fl.rounds=4", "fl.participants_per_round=8", "fl.local_steps=4", "fl.eval_every=2", "data.proxy.n_clients=200"]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


def test_parse_vary():
    knobs = parse_vary(["fl.overcommit=1.0,1.3", "policy.share_profiles=true,false"])
    assert [(k.key, k.values) for k in knobs] == [("fl.overcommit", ("1.0", "1.3")), ("policy.share_profiles", ("true", "false"))]
    with pytest.raises(ConfigError, match=r"^--vary 'fl.overcommit=1.0,': expected KEY=V1,V2,\.\.\."):
        parse_vary(["fl.overcommit=1.0,"])
    with pytest.raises(ConfigError, match="fl.overcommit is varied twice"):
        parse_vary(["fl.overcommit=1", "fl.overcommit=2"])


@pytest.mark.slow
def test_sensitivity_grid_table_and_chart(tmp_path, capsys):
    out = tmp_path / "sens"
    sets = [x for s in SMALL for x in ("--set", s)]
    args = ["sensitivity", EXP, "--out", str(out), "--vary", "policy.interference.shared_core_slowdown=1",
            "--vary", "fl.overcommit=1.3,2.0", *sets]
    assert main(args) == 0
    table = pd.read_csv(out / "sensitivity.csv")
    assert list(table["knob"]) == ["reference", "policy.interference.shared_core_slowdown"] + ["fl.overcommit"] * 2
    # a value equal to the reference's (overcommit 1.3) reuses its run
    ref = table.iloc[0]
    assert table.loc[2, "speedup"] == ref["speedup"] and table.loc[2, "speedup_rel_change"] == 0.0
    assert table.loc[3, "speedup_rel_change"] == pytest.approx(table.loc[3, "speedup"] / ref["speedup"] - 1.0)
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["fl.overcommit=2.0", "policy.interference.shared_core_slowdown=1",
                                                               "reference"]
    # each point is a normal run whose summary gives the table's ratio
    summary = json.loads((out / "runs" / "fl.overcommit=2.0" / "summary.json").read_text())
    assert table.loc[3, "speedup"] == pytest.approx(summary["policies"]["flamingo"]["speedup"])
    assert (out / "tornado.png").read_bytes()[:4] == b"\x89PNG"
    assert "| fl.overcommit | 2.0 |" in (out / "sensitivity.md").read_text()


def test_the_change_columns_say_they_are_relative():
    table = relative_changes(pd.DataFrame([{"speedup": 4.0, "energy_efficiency": 5.0}, {"speedup": 5.0, "energy_efficiency": 4.5},
                                           {"speedup": None, "energy_efficiency": 5.0}]), {"speedup": 4.0, "energy_efficiency": 5.0})
    assert list(table.columns) == ["speedup", "energy_efficiency", "speedup_rel_change", "energy_efficiency_rel_change"]
    assert table["speedup_rel_change"].tolist()[:2] == [0.0, 0.25]
    assert pd.isna(table["speedup_rel_change"].iloc[2])
    assert table["energy_efficiency_rel_change"].tolist() == pytest.approx([0.0, -0.1, 0.0])


def test_bad_vary_value_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "sens"
    assert main(["sensitivity", EXP, "--out", str(out), "--vary", "fl.overcommit=1.3,lots"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--vary fl.overcommit=lots" in err and "expected a number" in err
    assert not out.exists()
