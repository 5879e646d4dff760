"""Time to target, speedup and energy efficiency against hand-computed values."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.sim.rounds import DROP_REASONS


def rows(policy, seed, accs, dt_s, de_j, lost=0):
    out = []
    for i, acc in enumerate(accs, start=1):
        out.append(
            {
                "policy": policy, "seed": seed, "round": i, "time_s": dt_s * i, "accuracy": acc,
                "energy_cum_j": de_j * i, "clients_lost_cum": lost * i,
                **{f"dropped_{r}": 1 for r in DROP_REASONS},
            }
        )
    return out


def table():
    nan = math.nan
    return pd.DataFrame(
        rows("baseline", 0, [0.1, nan, 0.3, 0.5, 0.6], dt_s=100.0, de_j=50.0, lost=2)
        + rows("flamingo", 0, [0.2, 0.4, 0.6, 0.7, nan], dt_s=40.0, de_j=10.0)
    )


def test_highest_common_target():
    s = summarize(table(), "highest_common")
    # best: baseline 0.6, flamingo 0.7 -> common target 0.6; baseline reaches it at round 5
    # (500 s, 250 J), flamingo at round 3 (120 s, 30 J).
    assert s["target_accuracy_by_seed"] == {0: 0.6}
    b, f = s["policies"]["baseline"], s["policies"]["flamingo"]
    assert (b["time_to_target_s"], b["energy_to_target_j"]) == (500.0, 250.0)
    assert (f["time_to_target_s"], f["energy_to_target_j"]) == (120.0, 30.0)
    assert f["speedup"] == pytest.approx(500 / 120)
    assert f["energy_efficiency"] == pytest.approx(250 / 30)
    assert "speedup" not in b
    assert b["clients_lost"] == 10 and f["clients_lost"] == 0
    assert b["final_accuracy"] == 0.6 and f["final_accuracy"] == 0.7
    assert b["per_seed"]["0"]["dropped"]["declined"] == 5


def test_highest_target_leaves_the_slower_policy_without_a_time():
    s = summarize(table(), "highest")
    assert s["target_accuracy_by_seed"] == {0: 0.7}
    assert s["policies"]["baseline"]["time_to_target_s"] is None
    assert s["policies"]["flamingo"]["time_to_target_s"] == 160.0
    assert s["policies"]["flamingo"]["speedup"] is None
    assert "-" in format_summary(s)


def test_numeric_target_and_seed_average():
    t = table()
    t2 = t.copy()
    t2["seed"] = 1
    t2.loc[t2["policy"] == "flamingo", "time_s"] *= 2
    s = summarize(pd.concat([t, t2]), 0.5)
    f = s["policies"]["flamingo"]
    # flamingo reaches 0.5 at round 3: 120 s (seed 0) and 240 s (seed 1); baseline at round 4: 400 s.
    assert f["time_to_target_s"] == pytest.approx(180.0)
    # a ratio of means (400 / 180), not the mean of per-seed ratios ((400/120 + 400/240) / 2 = 2.5)
    assert f["speedup"] == pytest.approx(400 / 180)
    assert f["speedup_per_seed"] == {"0": pytest.approx(400 / 120), "1": pytest.approx(400 / 240)}
    lo, hi = f["speedup_ci"]
    # resampling 2 seeds: the ratio is 400/120, 400/180 or 400/240; the 95 % interval spans them
    assert lo == pytest.approx(400 / 240) and hi == pytest.approx(400 / 120)
    lo, hi = f["time_to_target_s_ci"]
    assert lo == pytest.approx(120.0) and hi == pytest.approx(240.0)
