"""Comparison bases, bootstrap intervals and exploration cost against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from flamingo_sim.fl.metrics.compare import bootstrap_ci, compare_on_bases, exploration_cost, ratio_of_means
from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.sim.rounds import DROP_REASONS

NAN = math.nan


def rows(policy, seed, times, accs, energy, lost, exploring=None):
    out = []
    for i, (t, a, e, gone) in enumerate(zip(times, accs, energy, lost)):
        out.append({
            "policy": policy, "seed": seed, "round": i, "time_s": float(t), "accuracy": a, "energy_cum_j": float(e),
            "clients_lost_cum": gone, "n_exploring": (exploring or [0] * len(times))[i], "energy_exploring_j": 0.0,
            **{f"dropped_{r}": 0 for r in DROP_REASONS},
        })
    return out


def table():
    # round 0 at t = 0 for both; the baseline's rounds last 100 s, Flamingo's first (exploring) 300 s, then 40 s
    base = rows("baseline", 0, [0, 100, 200, 300, 400], [0.1, 0.3, NAN, 0.5, 0.6], [0, 50, 100, 150, 200], [0, 2, 4, 6, 8])
    flam = rows("flamingo", 0, [0, 300, 340, 380], [0.1, 0.2, 0.6, NAN], [0, 20, 30, 40], [0, 0, 1, 1], exploring=[0, 5, 0, 0])
    flam[1]["energy_exploring_j"] = 15.0
    return pd.DataFrame(base + flam)


def test_three_bases_hand_computed():
    comp = compare_on_bases(table(), {0: 0.6})
    b, f = (comp["equal_rounds"]["policies"][p] for p in ("baseline", "flamingo"))
    # equal rounds: Flamingo ran 3 rounds -> both at round 3; the baseline's accuracy there is round 3's 0.5
    assert comp["equal_rounds"]["point_by_seed"] == {"0": 3.0}
    assert (b["round"], b["time_s"], b["accuracy"], b["energy_j"], b["clients_lost"]) == (3, 300.0, 0.5, 150.0, 6)
    assert (f["round"], f["time_s"], f["accuracy"], f["energy_j"], f["clients_lost"]) == (3, 380.0, 0.6, 40.0, 1)
    # equal time: Flamingo ends at 380 s; the baseline has finished round 3 by then
    b, f = (comp["equal_time"]["policies"][p] for p in ("baseline", "flamingo"))
    assert comp["equal_time"]["point_by_seed"] == {"0": 380.0}
    assert (b["round"], b["energy_j"], b["clients_lost"]) == (3, 150.0, 6)
    assert (f["round"], f["energy_j"], f["clients_lost"]) == (3, 40.0, 1)
    # at target 0.6: the baseline at round 4 (400 s), Flamingo at round 2 (340 s)
    b, f = (comp["at_target"]["policies"][p] for p in ("baseline", "flamingo"))
    assert (b["round"], b["time_s"], b["energy_j"], b["clients_lost"]) == (4, 400.0, 200.0, 8)
    assert (f["round"], f["time_s"], f["energy_j"], f["clients_lost"]) == (2, 340.0, 30.0, 1)


def test_no_target_leaves_the_at_target_basis_empty():
    comp = compare_on_bases(table(), {0: None})
    assert comp["at_target"]["policies"]["baseline"]["time_s"] is None
    assert comp["at_target"]["policies"]["baseline"]["per_seed"] == {}


def test_exploration_cost_hand_computed():
    x = exploration_cost(table(), "flamingo", "baseline")
    assert x["rounds"] == 1 and x["time_s"] == 300.0 and x["energy_j"] == 20.0 and x["exploring_energy_j"] == 15.0
    assert x["baseline_time_s"] == 100.0 and x["baseline_energy_j"] == 50.0
    assert exploration_cost(table(), "baseline", "baseline") is None
    assert exploration_cost(table().drop(columns=["n_exploring"]), "flamingo", "baseline") is None


def test_bootstrap_interval():
    assert bootstrap_ci([3.0]) is None
    lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 10.0])
    assert 1.0 <= lo < np.mean([1, 2, 3, 10]) < hi <= 10.0
    assert bootstrap_ci([1.0, 2.0, 3.0, 10.0]) == (lo, hi)  # deterministic
    assert bootstrap_ci([5.0, 5.0]) == (5.0, 5.0)


def test_bootstrap_ci_hand_computed_on_four_resamples(monkeypatch):
    # rng(0, "bootstrap", "tiny").integers(0, 3, (4, 3)) draws the rows [2 2 2], [2 2 2], [0 1 2],
    # [0 0 2]: with x = [1, 4, 10] the resample means are 10, 10, 5, 4; sorted 4, 5, 10, 10.
    # Percentiles (linear between order statistics, position p/100 x 3): 2.5 % at 0.075 ->
    # 4 + 0.075 x (5 - 4) = 4.075; 97.5 % at 2.925 -> 10 + 0.925 x 0 = 10.
    from flamingo_sim.fl.metrics import compare

    monkeypatch.setattr(compare, "N_RESAMPLES", 4)
    lo, hi = bootstrap_ci([1.0, 4.0, 10.0], "tiny")
    assert lo == pytest.approx(4.075, abs=1e-12) and hi == pytest.approx(10.0, abs=1e-12)


def test_ratio_of_means_paired_interval_hand_computed_on_four_resamples(monkeypatch):
    # rng(0, "bootstrap", "tiny-ratio").integers(0, 3, (4, 3)) draws [0 1 2], [2 2 0], [2 2 2], [1 1 1];
    # each row resamples both sequences at the same seeds (paired). a = [2, 6, 12], b = [1, 3, 4]:
    # ratios of the means 20/8 = 2.5, 26/9, 12/4 = 3, 6/3 = 2; sorted 2, 2.5, 26/9, 3.
    # 2.5 %: 2 + 0.075 x 0.5 = 2.0375; 97.5 %: 26/9 + 0.925 x (3 - 26/9) = 2.991666...
    from flamingo_sim.fl.metrics import compare

    monkeypatch.setattr(compare, "N_RESAMPLES", 4)
    r = ratio_of_means([2.0, 6.0, 12.0], [1.0, 3.0, 4.0], "tiny-ratio")
    assert r["value"] == pytest.approx(20 / 8)
    assert r["ci"] == pytest.approx([2.0375, 26 / 9 + 0.925 * (3 - 26 / 9)], abs=1e-12)


def test_bootstrap_matches_the_percentile_definition_at_full_size():
    # The definition, written out: N_RESAMPLES rows of seed indices, the statistic per row, the
    # 2.5th and 97.5th percentiles (numpy's linear interpolation), paired rows for the ratio.
    from flamingo_sim.fl.metrics.compare import N_RESAMPLES
    from flamingo_sim.rng import rng

    a = np.array([7.1, 3.2, 9.9, 4.4, 6.0, 12.5, 5.3])
    b = np.array([2.0, 1.1, 3.9, 2.2, 1.7, 4.1, 2.6])
    idx = rng(0, "bootstrap", "m").integers(0, 7, size=(N_RESAMPLES, 7))
    assert bootstrap_ci(a, "m") == pytest.approx(tuple(np.percentile(a[idx].mean(axis=1), [2.5, 97.5])), rel=1e-12)
    idx = rng(0, "bootstrap", "r").integers(0, 7, size=(N_RESAMPLES, 7))
    want = np.percentile(a[idx].mean(axis=1) / b[idx].mean(axis=1), [2.5, 97.5])
    assert ratio_of_means(a, b, "r")["ci"] == pytest.approx(list(want), rel=1e-12)
    assert ratio_of_means([1.0, 2.0], [1.0, 0.0])["ci"] is None  # a resample with a zero denominator


def test_ratio_of_means():
    r = ratio_of_means([400.0, 400.0], [120.0, 240.0])
    assert r["value"] == pytest.approx(400 / 180)
    assert ratio_of_means([1.0], [0.0]) is None
    assert ratio_of_means([2.0], [1.0]) == {"value": 2.0, "ci": None}


def test_summary_prints_every_basis_and_the_exploration_line():
    s = summarize(table(), 0.6)
    text = format_summary(s)
    assert "equal rounds: baseline 6 lost, 0.1 kJ, 0.08 h, round 3; flamingo 1 lost, 0.0 kJ, 0.11 h, round 3" in text
    assert "at target: baseline 8 lost" in text
    assert "exploration (flamingo): rounds 1-1, 0.08 h and 0.0 kJ" in text
