"""Selectors: battery-aware probabilities and Oort's utilities by hand, config errors, resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.config import from_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.strategy.selection import (
    BatterySelector,
    CoordinatorView,
    OortSelector,
    UniformSelector,
    battery_weights,
    make_selector,
    select_online,
)
from tests.cli_runs import assert_identical
from tests.fl.interrupt import run_interrupted

ROOT = Path(__file__).resolve().parents[3]


def view(levels, rnd=1):
    return CoordinatorView(round=rnd, battery_pct=np.asarray(levels, dtype=np.float64), min_pct=10.0)


def test_battery_weights_by_hand():
    # share above 10 %: (10 -> 0), (55 -> 0.5), (100 -> 1), (5 -> 0, clipped); weight 0.1 + 0.9 share
    w = battery_weights(np.array([10.0, 55.0, 100.0, 5.0]), min_pct=10.0, floor=0.1)
    assert w.tolist() == pytest.approx([0.1, 0.55, 1.0, 0.1])


def test_battery_selection_probabilities_match_the_weights():
    levels = [10.0, 55.0, 100.0, 5.0]
    online = np.arange(4)
    sel = BatterySelector(floor=0.1)
    p = np.array([0.1, 0.55, 1.0, 0.1]) / 1.75  # one draw: 0.0571, 0.3143, 0.5714, 0.0571
    n = 20000
    firsts = np.bincount([sel.select(online, 1, np.random.default_rng(i), view(levels))[0] for i in range(n)], minlength=4) / n
    assert firsts == pytest.approx(p, abs=0.01)
    # two draws without replacement: P({1, 2}) = p1 * w2 / (S - w1) + p2 * w1 / (S - w2) = 0.4779
    pair = 0.55 / 1.75 * 1.0 / (1.75 - 0.55) + 1.0 / 1.75 * 0.55 / (1.75 - 1.0)
    got = np.mean([sel.select(online, 2, np.random.default_rng(i), view(levels)).tolist() == [1, 2] for i in range(n)])
    assert got == pytest.approx(pair, abs=0.01)


def test_oort_utility_by_hand():
    oort = OortSelector(exploration=0.2, straggler_penalty=2.0)
    clients = np.array([0, 1, 2, 3])
    oort.observe(1, clients, np.array([10, 20, 30, 40]), np.array([1.0, 0.5, 2.0, 1.0]), np.array([100.0, 200.0, 400.0, 50.0]))
    # T = median(100, 200, 400, 50) = 150; slower than T -> times (150 / t)^2
    assert oort.utility(clients).tolist() == pytest.approx([10.0, 10.0 * (150 / 200) ** 2, 60.0 * (150 / 400) ** 2, 40.0])
    online = np.arange(10)
    picks = [oort.select(online, 3, np.random.default_rng(i), view([50.0] * 10)) for i in range(2000)]
    for p in picks:  # ceil(0.2 * 3) = 1 never-seen client, 2 seen ones
        assert len(p) == 3 and (p >= 4).sum() == 1
    freq = np.bincount(np.concatenate(picks), minlength=10)[:4] / 2000
    assert freq[3] > freq[0] > freq[2] > freq[1]  # utilities 40 > 10 > 8.4 > 5.6
    # too few seen: the unseen fill the slots
    assert (oort.select(online, 8, np.random.default_rng(0), view([50.0] * 10)) >= 4).sum() == 4


def test_oort_state_round_trip():
    a = OortSelector()
    a.observe(1, np.array([2, 5]), np.array([10, 10]), np.array([1.0, 2.0]), np.array([10.0, 20.0]))
    b = OortSelector()
    b.load_state_dict(a.state_dict())
    online = np.arange(8)
    assert np.array_equal(a.select(online, 3, np.random.default_rng(3), view([50.0] * 8)), b.select(online, 3, np.random.default_rng(3), view([50.0] * 8)))


def test_uniform_is_unchanged_and_registry():
    online = np.arange(100)
    assert np.array_equal(UniformSelector().select(online, 5, np.random.default_rng(1), view([0] * 100)), np.sort(np.random.default_rng(1).choice(online, 5, replace=False)))
    assert isinstance(make_selector("battery", {"floor": 0.3}), BatterySelector)
    with pytest.raises(ConfigError, match=r"^fl\.selection: unknown selector 'greedy'; expected one of 'uniform', 'battery', 'oort'"):
        make_selector("greedy")


@pytest.mark.parametrize(
    "data, message",
    [
        ({"selector": {"floor": 0.2}}, "exp.yaml: selector: selector 'uniform' takes no parameters (it declares no Params), got floor"),
        ({"fl": {"selection": "battery"}, "selector": {"floor": 0.0}}, "exp.yaml: selector.floor: expected a number in (0, 1], got 0.0"),
        ({"fl": {"selection": "oort"}, "selector": {"exploration": 1.5}}, "exp.yaml: selector.exploration: expected a number in [0, 1], got 1.5"),
        ({"fl": {"selection": "oort"}, "selector": {"floor": 0.5}}, "exp.yaml: unknown key 'selector.floor' (known here: exploration, preferred_duration_s, straggler_penalty)"),
    ],
)
def test_bad_selector_sections(data, message):
    with pytest.raises(ConfigError) as exc:
        from_mapping(ExperimentConfig, {"name": "x", **data}, source="exp.yaml")
    assert str(exc.value) == message


SMALL = ["fl.rounds=4", "fl.participants_per_round=8", "fl.local_steps=4", "fl.eval_every=2", "data.proxy.n_clients=200", "policies=[baseline]", "checkpoint_every=2"]


@pytest.mark.slow
def test_oort_run_resumes_bit_identical_and_battery_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    exp = ROOT / "experiments/toolkit_oort.yaml"
    whole = run_experiment(exp, out_dir=tmp_path / "whole", overrides=SMALL, log=lambda m: None)
    run_interrupted(monkeypatch, exp, tmp_path / "cut", SMALL, after_round=3)
    resumed = run_experiment(exp, out_dir=tmp_path / "cut", overrides=SMALL, resume=True, log=lambda m: None)
    assert_identical(resumed.metrics, whole.metrics)
    battery = run_experiment(ROOT / "experiments/toolkit_battery_selection.yaml", out_dir=tmp_path / "b", overrides=SMALL, log=lambda m: None)
    assert battery.metrics["n_kept"].sum() > 0


def test_coordinator_view_reads_levels_lazily_and_selects_as_a_full_array_would():
    levels = np.array([5.0, 50.0, 90.0, 30.0, 70.0])
    calls = []

    def reader(idx):
        calls.append(len(idx))
        return levels[idx]

    lazy = CoordinatorView(round=1, min_pct=10.0, level_pct_at=reader, n_clients=5)
    assert lazy.battery_pct_at(np.array([2, 0])).tolist() == [90.0, 5.0] and calls == [2]
    online = np.array([1, 2, 3, 4])
    for seed in range(5):  # the battery selector reads only the online clients' levels
        got = BatterySelector().select(online, 2, np.random.default_rng(seed), lazy)
        assert got.tolist() == BatterySelector().select(online, 2, np.random.default_rng(seed), view(levels)).tolist()
    assert calls == [2] + [4] * 5
    assert lazy.battery_pct.tolist() == levels.tolist() and lazy.battery_pct is lazy.battery_pct  # built once, on first use
    assert calls[-1] == 5 and len(calls) == 7
    with pytest.raises(ValueError, match="needs battery_pct or level_pct_at \\(exactly one\\)"):
        CoordinatorView(round=1, min_pct=10.0)
    with pytest.raises(ValueError, match="level_pct_at needs n_clients"):
        CoordinatorView(round=1, min_pct=10.0, level_pct_at=reader)


class _Sorted:
    """An OnlineSet over a plain sorted array (what the budget's lazy set answers)."""

    def __init__(self, members: np.ndarray) -> None:
        self.m = members
        self.taken = 0

    def __len__(self) -> int:
        return len(self.m)

    def take(self, positions):
        self.taken += len(positions)
        return self.m[np.asarray(positions)]

    def members(self) -> np.ndarray:
        raise AssertionError("a uniform draw of a few must not list every online client")


@pytest.mark.parametrize("pool,n", [(50, 7), (20_000, 13), (20_000, 1_300), (30, 30), (30, 40)])
def test_uniform_select_online_draws_the_cohort_select_draws(pool, n):
    # numpy's choice without replacement has two algorithms (Floyd's for a few of many, a tail
    # shuffle when n > pool / 50 above 10,000): both draw positions from len(pool) alone
    members = np.sort(np.random.default_rng(pool).choice(10 * pool, size=pool, replace=False))
    sel = UniformSelector()
    view = CoordinatorView(round=1, battery_pct=np.zeros(10 * pool))
    expected = sel.select(members, n, np.random.default_rng(9), view)
    lazy = _Sorted(members)
    if n >= pool:
        lazy.members = lambda: members  # type: ignore[method-assign]
    got = select_online(sel, lazy, n, np.random.default_rng(9), view)
    assert np.array_equal(got, expected) and got.dtype == np.int64
    assert lazy.taken == (0 if n >= pool else n)


def test_select_online_falls_back_to_select_on_the_whole_array():
    members = np.arange(0, 40, 3)
    lazy = _Sorted(members)
    lazy.members = lambda: members  # type: ignore[method-assign]
    view = CoordinatorView(round=1, battery_pct=np.linspace(0, 100, 40))
    expected = BatterySelector().select(members, 4, np.random.default_rng(2), view)
    assert np.array_equal(select_online(BatterySelector(), lazy, 4, np.random.default_rng(2), view), expected)


# -- what mutation testing found (benchmarks/results/mutation_2cores.md) ----------------------------------
def test_oort_defaults_explore_a_fifth_of_the_cohort_among_the_unseen():
    oort = OortSelector()
    assert (oort.exploration, oort.penalty, oort.preferred_s) == (0.2, 2.0, None)
    online = np.arange(20)
    oort.observe(1, np.arange(15), np.full(15, 10.0), np.full(15, 1.0), np.full(15, 30.0))  # 15 seen, 5 unseen
    view = CoordinatorView(round=2, battery_pct=np.full(20, 80.0), min_pct=10.0, n_clients=20)
    for seed in range(5):
        picked = oort.select(online, 10, np.random.default_rng(seed), view)
        assert len(picked) == 10 and len(set(picked.tolist())) == 10 and picked.dtype == np.int64
        assert int((picked >= 15).sum()) == 2  # ceil(0.2 x 10) unseen, the rest exploited among the seen


def test_oort_explores_every_unseen_client_when_too_few_are_seen():
    oort = OortSelector(exploration=0.0)
    oort.observe(1, np.array([0, 1]), np.ones(2), np.ones(2), np.ones(2))
    picked = oort.select(np.arange(6), 4, np.random.default_rng(0), CoordinatorView(round=2, battery_pct=np.full(6, 80.0), min_pct=10.0, n_clients=6))
    assert {0, 1} <= set(picked.tolist()) and len(picked) == 4  # n - seen = 2 unseen, both seen exploited


def test_oort_system_utility_against_the_median_or_the_preferred_duration():
    oort = OortSelector(straggler_penalty=2.0)
    oort.observe(1, np.array([0, 1, 2]), np.array([10.0, 10.0, 10.0]), np.array([0.5, 1.0, 2.0]), np.array([10.0, 20.0, 40.0]))
    # statistical utility n x loss = 5, 10, 20; t_pref = the median 20 s: only the 40 s client is penalised, (20/40)^2
    assert oort.utility(np.array([0, 1, 2])).tolist() == [5.0, 10.0, 20.0 * 0.25]
    fixed = OortSelector(straggler_penalty=1.0, preferred_duration_s=10.0)
    fixed.observe(1, np.array([0, 1]), np.array([1.0, 1.0]), np.array([1.0, 1.0]), np.array([10.0, 40.0]))
    assert fixed.utility(np.array([0, 1])).tolist() == [1.0, 0.25]


def test_oort_learns_from_a_single_report_and_adds_no_phantom_client():
    oort = OortSelector(exploration=0.0)
    oort.observe(1, np.array([3]), np.array([4.0]), np.array([0.5]), np.array([12.0]))  # one client reported
    assert oort.stat[3] == 2.0 and oort.duration_s[3] == 12.0 and len(oort.stat) == 4
    seen_all = OortSelector(exploration=0.0)
    seen_all.observe(1, np.arange(6), np.ones(6), np.arange(1.0, 7.0), np.full(6, 5.0))
    view6 = CoordinatorView(round=2, battery_pct=np.full(6, 80.0), min_pct=10.0, n_clients=6)
    for seed in range(5):  # nothing to explore, and (below) nothing to exploit: exactly n clients, no extra 0
        assert len(seen_all.select(np.arange(1, 6), 3, np.random.default_rng(seed), view6)) == 3
        assert len(OortSelector(exploration=1.0).select(np.arange(1, 6), 3, np.random.default_rng(seed), view6)) == 3


def test_selector_parameters_reach_the_selector_and_their_ranges_are_checked():
    assert BatterySelector().floor == 0.1
    oort = make_selector("oort", {"exploration": 0.5, "straggler_penalty": 3.0, "preferred_duration_s": 60.0})
    assert (oort.exploration, oort.penalty, oort.preferred_s) == (0.5, 3.0, 60.0)
    with pytest.raises(ConfigError, match="straggler_penalty"):
        make_selector("oort", {"straggler_penalty": -0.5})
    with pytest.raises(ConfigError, match="preferred_duration_s"):
        make_selector("oort", {"preferred_duration_s": 0.0})
