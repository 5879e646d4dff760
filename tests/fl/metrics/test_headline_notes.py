"""The headline says what its ratios compare when a common target sits far below one policy's best, and a long
plug-in name keeps the summary table aligned (issue 44)."""

from __future__ import annotations

import copy
import json

from flamingo_sim.fl.metrics.summary import far_below_lines, format_summary
from tests.report_runs import ROOT

REFERENCE = json.loads((ROOT / "tests/fl/sim/reference/main_job_short/summary.json").read_text())


def _with_bests(baseline: float, flamingo: float, target: float) -> dict:
    s = copy.deepcopy(REFERENCE)
    s["target_accuracy_by_seed"] = {"0": target}
    s["policies"]["baseline"]["per_seed"]["0"]["best_curve_accuracy"] = baseline
    s["policies"]["flamingo"]["per_seed"]["0"]["best_curve_accuracy"] = flamingo
    return s


def test_a_target_far_below_one_policys_best_gets_a_line_saying_what_the_ratios_compare():
    """The example run: a policy topping out at 0.141 against 0.319 was reported 1.55x faster, without a word."""
    s = _with_bests(baseline=0.319, flamingo=0.141, target=0.131)
    line = ("note, seed 0: the target 0.1310 is far below baseline's best accuracy 0.3190 (under 80% of it): the speedup and energy "
            "efficiency compare the time and energy to reach a level flamingo tops out at (its best 0.1410), not how accurate the "
            "policies become; compare their final accuracies")
    assert far_below_lines(s) == [line]
    assert line in format_summary(s).splitlines()


def test_a_target_near_both_bests_gets_no_note():
    assert far_below_lines(REFERENCE) == []  # the main job's reference: 0.3748 against 0.3848 and 0.3848
    assert far_below_lines(_with_bests(0.5, 0.41, 0.401)) == []  # 0.401 is 80.2 % of 0.5
    assert len(far_below_lines(_with_bests(0.5, 0.39, 0.399))) == 1  # 79.8 %


def test_a_long_plugin_name_keeps_the_table_aligned():
    s = copy.deepcopy(REFERENCE)
    s["policies"] = {"baseline": s["policies"]["baseline"], "charging_policy:ChargingOnlyPolicy": s["policies"]["flamingo"]}
    lines = format_summary(s).splitlines()
    header, rule, *rows = lines[:4]
    assert len(rule) == len(header) and set(rule) == {"-"}
    assert [len(r) for r in rows] == [len(header)] * 2
    end = header.index("time to target") + len("time to target")
    assert [r.index(" h ") + len(" h") for r in rows] == [end, end]  # the times end under their heading
    short = format_summary(REFERENCE).splitlines()[0]
    assert short.startswith("policy        time to target")  # default names: the column as before (12 wide)


def test_the_proxy_task_is_named_without_a_contradiction():
    """Issue 44: with ``data.name: synthetic`` the run said "WARNING: data.root is null: no real synthetic data"."""
    from flamingo_sim.config import from_mapping
    from flamingo_sim.fl.compose.datasets import make_dataset
    from flamingo_sim.fl.config import ExperimentConfig

    said: list[str] = []
    make_dataset(from_mapping(ExperimentConfig, {"name": "x", "data": {"name": "synthetic", "proxy": {"n_clients": 20}}}), None, said.append)
    assert said == ["data: the generated proxy task (data.name: synthetic), not real data"]
    said.clear()
    make_dataset(from_mapping(ExperimentConfig, {"name": "x", "data": {"proxy": {"n_clients": 20}}}), None, said.append)
    assert said == ["WARNING: data.root is null, so no real openimage data is read: training the generated proxy task instead "
                    "(data.fallback: proxy); point data.root at the data to train on it"]
