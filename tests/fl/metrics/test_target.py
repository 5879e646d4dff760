"""The time-to-target rules on hand-made accuracy curves, including the one-sample bump of issue 22.

The curves mimic the main job's last evaluations: the baseline's round-4 accuracy 0.5430 and its
last one 0.5430 or, one test sample in 2,000 higher, 0.5435.
"""

from __future__ import annotations

import pandas as pd
import pytest

from flamingo_sim.fl.config import TargetConfig
from flamingo_sim.fl.metrics.compare import compare_on_bases
from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.metrics.target import RAW, accuracy_curve, first_reach, target_curve, target_for_seed
from flamingo_sim.fl.sim.rounds import DROP_REASONS

BASE = [0.30, 0.45, 0.50, 0.543, 0.530, 0.5395, 0.5335, 0.543]
FLAM = [0.35, 0.50, 0.52, 0.535, 0.5405, 0.547, 0.546, 0.554]
STABLE = TargetConfig()  # the default: smoothed over 3 evaluations, 0.01 below the reading


def rows(policy, accs, dt_s, de_j):
    return [{"policy": policy, "seed": 0, "round": i, "time_s": dt_s * i, "accuracy": a, "energy_cum_j": de_j * i,
             "clients_lost_cum": 0, **{f"dropped_{r}": 0 for r in DROP_REASONS}} for i, a in enumerate(accs, start=1)]


def table(last_base=0.543):
    """Baseline rounds last 100 s (50 J), Flamingo's 20 s (5 J)."""
    return pd.DataFrame(rows("baseline", BASE[:-1] + [last_base], 100.0, 50.0) + rows("flamingo", FLAM, 20.0, 5.0))


def test_the_raw_rule_jumps_on_a_one_sample_bump():
    # raw highest_common: the target is the baseline's best; 0.5430 first at round 4, 0.5435 only at round 8
    before, after = summarize(table(0.543), "highest_common"), summarize(table(0.5435), "highest_common")
    assert before["target_accuracy_by_seed"] == {0: 0.543} and after["target_accuracy_by_seed"] == {0: 0.5435}
    assert before["policies"]["baseline"]["time_to_target_s"] == 400.0 and after["policies"]["baseline"]["time_to_target_s"] == 800.0
    assert before["policies"]["flamingo"]["time_to_target_s"] == after["policies"]["flamingo"]["time_to_target_s"] == 120.0
    assert before["policies"]["flamingo"]["speedup"] == pytest.approx(400 / 120)
    assert after["policies"]["flamingo"]["speedup"] == pytest.approx(800 / 120)  # doubled by one test sample
    # the printed targets tell the two apart
    assert "seed 0: 0.5430 " in format_summary(before) and "seed 0: 0.5435 " in format_summary(after)


def test_the_smoothed_curve_is_the_mean_of_the_last_three_evaluations():
    curve = accuracy_curve(pd.DataFrame(rows("baseline", BASE, 100.0, 50.0)), STABLE)["curve"].tolist()
    assert curve[:3] == pytest.approx([0.30, 0.375, (0.30 + 0.45 + 0.50) / 3])
    assert curve[5] == pytest.approx((0.543 + 0.530 + 0.5395) / 3)  # 0.5375
    assert curve[7] == pytest.approx((0.5395 + 0.5335 + 0.543) / 3)  # 0.538667, the best
    # unevaluated rounds are skipped, not averaged in
    gappy = pd.DataFrame(rows("baseline", [0.2, float("nan"), 0.4, 0.6], 1.0, 1.0))
    assert accuracy_curve(gappy, STABLE)["curve"].tolist() == pytest.approx([0.2, 0.3, 0.4])
    assert accuracy_curve(gappy, STABLE)["round"].tolist() == [1, 3, 4]


def test_the_default_rule_does_not_move_on_the_bump():
    for last, best in ((0.543, (0.5395 + 0.5335 + 0.543) / 3), (0.5435, (0.5395 + 0.5335 + 0.5435) / 3)):
        s = summarize(table(last), "highest_common", rule=STABLE)
        # target: the lower smoothed best (the baseline's, round 8) minus 0.01
        assert s["target_accuracy_by_seed"][0] == pytest.approx(best - 0.01)
        b, f = s["policies"]["baseline"], s["policies"]["flamingo"]
        # baseline smoothed: round 5 0.524333 < target 0.5287 <= round 6 0.5375; flamingo: round 4 0.518333 < target <= round 5 0.531833
        assert (b["time_to_target_s"], b["energy_to_target_j"], b["per_seed"]["0"]["target_round"]) == (600.0, 300.0, 6)
        assert (f["time_to_target_s"], f["energy_to_target_j"], f["per_seed"]["0"]["target_round"]) == (100.0, 25.0, 5)
        assert f["speedup"] == pytest.approx(6.0) and f["energy_efficiency"] == pytest.approx(12.0)
        assert s["target_rule"] == {"reading": "highest_common", "curve": "smoothed", "window": 3, "margin": 0.01,
                                    "description": s["target_rule"]["description"]}
        assert "highest_common - 0.0100 on the smoothed curve (mean of the last 3 evaluations)" in format_summary(s)
        # the at-target comparison reads the same curve
        assert s["comparisons"]["at_target"]["policies"]["baseline"]["round"] == 6


def test_the_papers_reading_says_when_the_weaker_policy_never_reaches_it():
    s = summarize(table(), "highest", rule=STABLE)
    # highest: Flamingo's smoothed best (0.547 + 0.546 + 0.554) / 3 = 0.549, minus 0.01 = 0.539
    assert s["target_accuracy_by_seed"][0] == pytest.approx(0.539)
    b, f = s["policies"]["baseline"], s["policies"]["flamingo"]
    assert b["time_to_target_s"] is None and f["speedup"] is None
    assert f["time_to_target_s"] == 120.0  # smoothed round 6: 0.540833
    text = format_summary(s)
    assert "baseline never reaches the target: seed 0: best 0.5387 < 0.5390" in text
    assert "highest: the highest accuracy any policy reaches (the paper's words)" in text
    # raw, no margin: the target is Flamingo's best evaluation, which the baseline never reaches either
    raw = summarize(table(), "highest", rule=RAW)
    assert raw["target_accuracy_by_seed"][0] == 0.554 and raw["policies"]["baseline"]["time_to_target_s"] is None


def test_a_numeric_target_is_used_as_given():
    frame = table()
    assert target_for_seed(frame, 0.5, STABLE) == 0.5
    hit = first_reach(frame[frame["policy"] == "baseline"], 0.5, STABLE)
    assert int(hit["round"]) == 5  # smoothed: round 4 0.497667, round 5 0.524333
    assert int(first_reach(frame[frame["policy"] == "baseline"], 0.5, RAW)["round"]) == 3
    assert first_reach(frame[frame["policy"] == "baseline"], 0.6, STABLE) is None


def test_the_speedup_by_target_table():
    curve = target_curve(table(), STABLE, "baseline", n_points=25)
    points = curve["points"]
    common, top = (0.5395 + 0.5335 + 0.543) / 3, (0.547 + 0.546 + 0.554) / 3
    assert points[0]["target"] == round(0.8 * common, 4) and points[-1]["target"] == round(top, 4)
    assert len(points) == 25
    # 0.4309: baseline smoothed round 4 (0.497667, 400 s), Flamingo round 3 (0.456667, 60 s)
    first = points[0]
    assert first["time_to_target_s"] == {"baseline": 400.0, "flamingo": 60.0}
    assert first["speedup"]["flamingo"] == pytest.approx(400 / 60) and first["energy_efficiency"]["flamingo"] == pytest.approx(200 / 15)
    # 0.549: only Flamingo (round 8) reaches it
    assert points[-1]["time_to_target_s"] == {"baseline": None, "flamingo": 160.0} and points[-1]["speedup"]["flamingo"] is None
    s = summarize(table(), "highest_common", rule=STABLE)
    assert s["target_curve"]["points"] == points
    assert "flamingo speedup / energy efficiency by target (summary.json target_curve): " in format_summary(s)


def test_compare_on_bases_reads_the_rules_curve():
    comp = compare_on_bases(table(), {0: 0.52}, STABLE)
    assert comp["at_target"]["policies"]["baseline"]["round"] == 5  # smoothed 0.524333
    assert compare_on_bases(table(), {0: 0.52})["at_target"]["policies"]["baseline"]["round"] == 4  # raw 0.543


# -- what mutation testing found (benchmarks/results/mutation_2cores.md) ----------------------------------
def _evals(accs, **extra):
    return pd.DataFrame([{"policy": "p", "seed": 0, "round": i, "accuracy": a, "time_s": 10.0 * i, **extra} for i, a in enumerate(accs)])


def test_the_curve_keeps_every_evaluated_round_whatever_else_is_missing():
    frame = _evals([0.1, 0.2, float("nan"), 0.4], train_loss=float("nan"))  # round 0 has no training loss; round 2 no evaluation
    assert accuracy_curve(frame, RAW)["round"].tolist() == [0, 1, 3]
    assert accuracy_curve(frame, RAW)["curve"].tolist() == [0.1, 0.2, 0.4]


def test_the_raw_curve_is_never_smoothed_and_the_smoothed_one_uses_its_window():
    frame = _evals([0.2, 0.4, 0.9])
    assert accuracy_curve(frame, TargetConfig(curve="raw", window=3))["curve"].tolist() == [0.2, 0.4, 0.9]
    assert accuracy_curve(frame, TargetConfig(curve="smoothed", window=2))["curve"].tolist() == pytest.approx([0.2, 0.3, 0.65])
    assert accuracy_curve(frame, TargetConfig(curve="smoothed", window=1))["curve"].tolist() == [0.2, 0.4, 0.9]


def test_nothing_evaluated_has_no_best_and_no_target():
    from flamingo_sim.fl.metrics.target import best_on_curve

    empty = _evals([float("nan"), float("nan")])
    assert best_on_curve(empty, RAW) is None
    assert target_for_seed(empty, "highest", RAW) is None and target_for_seed(empty, 0.5, RAW) == 0.5


def test_a_curve_at_the_target_less_the_tolerance_reaches_it():
    from flamingo_sim.fl.metrics.target import TOLERANCE

    frame = _evals([0.1, 0.5 - TOLERANCE, 0.6])
    assert first_reach(frame, 0.5, RAW)["round"] == 1
    assert first_reach(frame, 0.7, RAW) is None and first_reach(frame, None, RAW) is None


def test_a_ratio_of_means_over_a_zero_mean_has_no_value():
    from flamingo_sim.fl.metrics.target import _ratio_of_means

    assert _ratio_of_means([2.0, 4.0], [1.0, 2.0]) == 2.0
    assert _ratio_of_means([2.0], [0.0]) is None and _ratio_of_means([2.0], [None]) is None and _ratio_of_means([], []) is None


def test_the_speedup_curve_records_its_rule_and_each_policys_energy():
    smooth, raw = target_curve(table(), STABLE, "baseline"), target_curve(table(), RAW, "baseline")
    assert {k: smooth[k] for k in ("curve", "window", "baseline")} == {"curve": "smoothed", "window": 3, "baseline": "baseline"}
    assert {k: raw[k] for k in ("curve", "window", "baseline")} == {"curve": "raw", "window": 1, "baseline": "baseline"}
    first = raw["points"][0]  # the lowest target, 80 % of the common best on the raw curve: 0.8 x 0.543 = 0.4344
    assert first["target"] == 0.4344
    # the baseline reaches it at round 2 (0.45: 200 s, 100 J), Flamingo at round 2 (0.50: 40 s, 10 J)
    assert first["time_to_target_s"] == {"baseline": 200.0, "flamingo": 40.0}
    assert first["energy_to_target_j"] == {"baseline": 100.0, "flamingo": 10.0}
    assert first["speedup"] == {"flamingo": 5.0} and first["energy_efficiency"] == {"flamingo": 10.0}  # no ratio of the baseline to itself
    last = raw["points"][-1]  # the highest any policy reaches (Flamingo's 0.554): the baseline never does
    assert last["time_to_target_s"]["baseline"] is None and last["energy_to_target_j"]["baseline"] is None
    assert last["energy_to_target_j"]["flamingo"] == 40.0 and last["speedup"] == {"flamingo": None}


def test_the_rule_as_summary_json_records_it():
    from flamingo_sim.fl.metrics.target import _ratio_of_means, describe_rule, rule_dict

    raw3 = TargetConfig(curve="raw", window=3, margin=0.01)
    assert rule_dict(0.5, raw3) == {"reading": 0.5, "curve": "raw", "window": 1, "margin": 0.0,
                                    "description": "0.5000 (a number), on the raw curve (each evaluation)"}
    assert rule_dict("highest", STABLE)["window"] == 3 and rule_dict("highest", STABLE)["margin"] == 0.01
    assert describe_rule("highest_common", STABLE).startswith("highest_common - 0.0100 on the smoothed curve (mean of the last 3 evaluations); ")
    assert describe_rule("highest", TargetConfig(curve="smoothed", window=2, margin=0.0)).startswith(
        "highest on the smoothed curve (mean of the last 2 evaluations); ")
    assert describe_rule("highest", TargetConfig(curve="smoothed", window=1, margin=0.0)).startswith("highest on the raw curve (each evaluation); ")
    assert describe_rule("highest", TargetConfig(curve="raw", window=5, margin=0.0)).startswith("highest on the raw curve (each evaluation); ")
    assert target_curve(table(), raw3, "baseline")["window"] == 1
    assert _ratio_of_means([2.0], [0.5]) == 4.0  # a denominator below 1 is a denominator


def test_the_untrained_round_0_model_never_reaches_a_target():
    """A 1-round run read 0.00 h to the target: round 0's untrained model counted. Here the round-0 evaluation
    (0.60) is above every later one, so the target (highest_common on the raw curve, no margin) is never reached."""
    frame = pd.DataFrame([{"policy": p, "seed": 0, "round": r, "time_s": 100.0 * r, "accuracy": a, "energy_cum_j": 10.0 * r,
                           "clients_lost_cum": 0, **{f"dropped_{x}": 0 for x in DROP_REASONS}}
                          for p in ("baseline", "flamingo") for r, a in ((0, 0.60), (1, 0.40), (2, 0.55))])
    raw = TargetConfig(curve="raw", margin=0.0)
    assert target_for_seed(frame, "highest_common", raw) == 0.60
    assert first_reach(frame[frame["policy"] == "baseline"], 0.60, raw) is None
    hit = first_reach(frame[frame["policy"] == "baseline"], 0.50, raw)
    assert hit is not None and int(hit["round"]) == 2  # round 0's 0.60 passes 0.50 too, and does not count
    assert summarize(frame, "highest_common", rule=raw)["policies"]["baseline"]["time_to_target_s"] is None
