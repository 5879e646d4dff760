from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.battery import EnergyBudget, discharge_intervals

TIMES = [0, 100, 250, 400, 700]
LEVELS = [50, 49, 49, 48, 47]
VOLTS = [3.9, 3.88, 3.87, 3.86, 3.84]


def test_discharge_intervals_hand_computed():
    # 3000 mAh -> 10800 C; 1 % = 108 C. Intervals between drops: [100, 400] and [400, 700].
    iv = discharge_intervals(TIMES, LEVELS, VOLTS, 3000)
    assert list(iv["start_s"]) == [100, 400] and list(iv["end_s"]) == [400, 700]
    assert iv["energy_j"] == pytest.approx([3.87 * 108, 3.85 * 108])  # 417.96, 415.8 J
    assert iv["power_w"] == pytest.approx([417.96 / 300, 415.8 / 300])


def test_discharge_intervals_skip_charging_and_multi_percent_drops():
    # 50 -> 49 (drop), 50 (charging), 49 (drop), 47 (a 2 % drop)
    t, lv, v = [0, 100, 200, 300, 400], [50, 49, 50, 49, 47], [3.9, 3.8, 3.9, 3.8, 3.7]
    iv = discharge_intervals(t, lv, v, 1000)  # 1 % = 36 C
    assert list(iv["start_s"]) == [300] and list(iv["end_s"]) == [400]
    assert iv["energy_j"] == pytest.approx([3.75 * 36 * 2])
    with pytest.raises(ValueError, match="increasing"):
        discharge_intervals([0, 0], [1, 1], [3.8, 3.8], 1000)


def _scalar_budget(cap, steps, min_pct=10.0, reentry_pct=20.0):
    """A plain per-client re-statement of the documented model."""
    out = []
    deficit, online = 0.0, steps[0][0] >= min_pct
    for prev, now, _state, train in steps[1:]:
        deficit = max(deficit - max(now - prev, 0) / 100 * cap, 0) + train
        deficit = min(deficit, now / 100 * cap)
        lvl = 100 * (now / 100 * cap - deficit) / cap
        online = lvl >= min_pct if online else lvl >= reentry_pct
        out.append((lvl, online))
    return out


def test_energy_budget_hand_scenario():
    b = EnergyBudget(np.array([1000.0]), min_pct=10, reentry_pct=20)
    b.reset([50])
    expect = [  # (prev, now, state, training J) -> (available J, online)
        ((50, 40, -1, 100), (300, True)),
        ((40, 20, -1, 50), (50, False)),  # 5 % < 10 %: offline
        ((20, 25, 1, 0), (150, False)),  # charging repays 50 J; 15 % < re-entry 20 %
        ((25, 35, 1, 0), (350, True)),  # repays the last 100 J; 35 % >= 20 %
        ((35, 30, -1, 400), (0, False)),  # draws more than it holds: stops at 0
        ((30, 100, 1, 0), (1000, True)),
    ]
    for args, (avail, online) in expect:
        b.advance(*[np.array([a]) for a in args])
        assert b.available_j[0] == pytest.approx(avail) and bool(b.online[0]) is online, args
    assert b.deficit_j[0] == 0


def test_energy_budget_vectorised_matches_scalar_and_resumes():
    gen = np.random.default_rng(3)
    n, steps = 500, 60
    cap = gen.uniform(3e4, 1e5, n)
    lv = np.clip(np.cumsum(gen.normal(0, 6, (steps, n)), axis=0) + 60, 0, 100)
    train = gen.uniform(0, 3000, (steps, n)) * (gen.random((steps, n)) < 0.3)
    b = EnergyBudget(cap, 10, 20)
    b.reset(lv[0])
    snapshot = None
    levels = []
    for s in range(1, steps):
        b.advance(lv[s - 1], lv[s], np.sign(lv[s] - lv[s - 1]).astype(int), train[s])
        levels.append((b.level_pct.copy(), b.online.copy()))
        if s == 30:
            snapshot = b.state_dict()
    for i in range(0, n, 50):
        ref = _scalar_budget(cap[i], [(lv[0, i], None, None, None)] + [(lv[s - 1, i], lv[s, i], 0, train[s, i]) for s in range(1, steps)])
        assert [round(x, 9) for x, _ in ref] == [round(lvl[0][i], 9) for lvl in levels]
        assert [o for _, o in ref] == [bool(lvl[1][i]) for lvl in levels]
    assert (b.level_pct >= 0).all() and (b.available_j <= cap + 1e-9).all()
    c = EnergyBudget(cap, 10, 20)
    c.load_state_dict(snapshot)
    for s in range(31, steps):
        c.advance(lv[s - 1], lv[s], 0, train[s])
    assert np.array_equal(c.level_pct, b.level_pct) and np.array_equal(c.online, b.online)


def test_energy_budget_validation():
    with pytest.raises(ValueError, match="min_pct <= reentry_pct"):
        EnergyBudget(np.array([1.0]), min_pct=30, reentry_pct=20)
    b = EnergyBudget(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="training_energy_j"):
        b.advance([50, 50], [40, 40], [0, 0], [-1, 0])
    with pytest.raises(ValueError, match="level_now_pct"):
        b.advance([50, 50], [140, 40], [0, 0], [0, 0])
