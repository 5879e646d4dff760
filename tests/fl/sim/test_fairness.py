"""Jain's index and participation histograms by hand; fairness in metrics, summary and report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.fairness import jain_index, merge_sorted, participation_histogram
from flamingo_sim.report import write_report

ROOT = Path(__file__).resolve().parents[3]


def test_jain_index_on_known_vectors():
    # (1 + 2 + 3 + 4)^2 / (4 * (1 + 4 + 9 + 16)) = 100 / 120
    assert jain_index(np.array([1, 2, 3, 4])) == pytest.approx(100 / 120)
    assert jain_index(np.array([5.0, 5.0, 5.0])) == 1.0
    assert jain_index(np.array([7.0, 0.0, 0.0, 0.0])) == pytest.approx(1 / 4)  # one client got everything
    assert math.isnan(jain_index(np.zeros(3)))
    with pytest.raises(ValueError, match="non-negative"):
        jain_index(np.array([1.0, -1.0]))


def test_participation_histogram():
    assert participation_histogram(np.array([0, 2, 0, 1, 2, 0])) == {"0": 3, "1": 1, "2": 2}


@pytest.mark.slow
def test_fairness_in_metrics_summary_and_report(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    small = ["fl.rounds=3", "fl.participants_per_round=8", "fl.local_steps=2", "fl.eval_every=3", "data.proxy.n_clients=50"]
    res = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "r", overrides=small, log=lambda m: None)
    m = res.metrics[res.metrics["round"] >= 1]  # round 0 (nothing trained yet) has no index: NaN
    assert res.metrics.loc[res.metrics["round"] == 0, "jain_participation"].isna().all()
    assert m["jain_participation"].between(0, 1).all() and m["jain_energy"].between(0, 1).all()
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    for policy in ("baseline", "flamingo"):
        entry = summary["policies"][policy]
        rows = m[m["policy"] == policy].sort_values("round")
        hist = entry["per_seed"]["0"]["participation_histogram"]
        assert sum(hist.values()) == 50  # every client counted once
        counts = np.repeat([int(k) for k in hist], list(hist.values()))
        assert sum(int(k) * n for k, n in hist.items()) == rows["n_kept"].sum()
        assert entry["jain_participation"] == pytest.approx(jain_index(counts)) == pytest.approx(rows["jain_participation"].iloc[-1])
    report = write_report([tmp_path / "r"], formats=("png",))
    assert "participation" in report.figures
    md = report.markdown.read_text()
    assert "Jain (participation)" in md


def test_jain_index_over_the_nonzero_entries_of_a_population():
    full = np.array([0.0, 3.0, 0.0, 0.0, 1.0, 2.0])
    nz = full[np.flatnonzero(full)]
    assert jain_index(nz, n=6) == pytest.approx(jain_index(full)) == pytest.approx(36 / (6 * 14))
    with pytest.raises(ValueError, match="n=2 is less than the 3 values"):
        jain_index(nz, n=2)


def test_merge_sorted_keeps_order_and_distinct_entries():
    assert merge_sorted(np.array([2, 5, 9]), np.array([9, 1, 7, 7])).tolist() == [1, 2, 5, 7, 9]
    assert merge_sorted(np.zeros(0, np.int64), np.array([3])).tolist() == [3]
