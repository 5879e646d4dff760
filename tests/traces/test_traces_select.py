"""Per-device statistics and the four criteria on constructed devices whose verdict is known."""

from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import DAY, T0, regular_device

from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.select import Criteria, choose, device_stats, evaluate, pack_keys, sort_dedup, unpack_keys

MIN_S = 1508025600  # 2017-10-15


def _stats(devices):
    dev = np.concatenate([d["device_id"] for d in devices])
    ts = np.concatenate([d["ts"] for d in devices])
    keys, dups = sort_dedup(pack_keys(dev, ts, MIN_S))
    return device_stats(keys, MIN_S, 6 * 3600), dups


def test_keys_round_trip_and_dedup():
    dev = np.array([5, 2, 5, 2, 5])
    ts = np.array([T0 + 10, T0, T0 + 10, T0 + 5, T0])
    keys, dups = sort_dedup(pack_keys(dev, ts, MIN_S))
    assert dups == 1
    d, t = unpack_keys(keys, MIN_S)
    assert d.tolist() == [2, 2, 5, 5] and t.tolist() == [T0, T0 + 5, T0, T0 + 10]


def test_stats_hand_computed():
    a = {"device_id": np.array([1, 1, 1, 1]), "ts": T0 + np.array([0, 3600, 3600 * 8, 3600 * 9])}
    b = {"device_id": np.array([2, 2]), "ts": T0 + 100 * DAY + np.array([0, 60])}
    st, _ = _stats([b, a])
    assert st.device_id.tolist() == [1, 2]
    assert st.n_samples.tolist() == [4, 2]
    assert st.max_gap_s.tolist() == [7 * 3600, 60]  # the gap between devices does not count
    assert st.n_long_gaps.tolist() == [1, 0]
    np.testing.assert_allclose(st.span_days, [9 / 24, 60 / DAY])
    np.testing.assert_allclose(st.samples_per_day, [4 / (9 / 24), 2 / (60 / DAY)])


@pytest.mark.parametrize(
    "device, verdict",
    [
        (regular_device(1, 28.0, 110), {"min_days": True, "min_samples_per_day": True, "max_gap": True, "max_long_gaps": True}),
        (regular_device(2, 27.9, 110), {"min_days": False, "min_samples_per_day": True, "max_gap": True, "max_long_gaps": True}),
        (regular_device(3, 30.0, 99), {"min_days": True, "min_samples_per_day": False, "max_gap": True, "max_long_gaps": True}),
        # a 25-hour hole fails the max-gap rule (and is one long gap)
        (regular_device(4, 30.0, 150, gaps=((10, 25),)), {"min_days": True, "min_samples_per_day": True, "max_gap": False, "max_long_gaps": True}),
        # 15 holes of 7 h pass, 16 fail
        (regular_device(5, 30.0, 150, gaps=tuple((d, 7) for d in range(1, 16))), {"min_days": True, "min_samples_per_day": True, "max_gap": True, "max_long_gaps": True}),
        (regular_device(6, 30.0, 150, gaps=tuple((d, 7) for d in range(1, 17))), {"min_days": True, "min_samples_per_day": True, "max_gap": True, "max_long_gaps": False}),
    ],
)
def test_criteria_verdicts(device, verdict):
    st, _ = _stats([device])
    masks = evaluate(st, Criteria())
    assert {k: bool(v[0]) for k, v in masks.items() if k != "all"} == verdict
    assert bool(masks["all"][0]) == all(verdict.values())


def test_gap_of_exactly_24h_passes():
    d = {"device_id": np.array([1, 1, 1]), "ts": T0 + np.array([0, DAY, DAY + 10])}
    st, _ = _stats([d])
    assert evaluate(st, Criteria())["max_gap"].tolist() == [True]
    assert evaluate(st, Criteria(max_gap_h=23.99))["max_gap"].tolist() == [False]


def test_choose_rules():
    devices = [regular_device(i, 30.0, per_day, gaps=tuple((d, 7) for d in range(g))) for i, per_day, g in
               [(10, 200, 3), (11, 120, 0), (12, 150, 0), (13, 300, 1), (14, 120, 0)]]
    st, _ = _stats(devices)
    passing = evaluate(st, Criteria())["all"]
    assert choose(st, passing, 2, "first", 0).tolist() == [10, 11]
    # best: fewest long gaps (11, 12, 14), then smallest max gap (12: 576 s; 11, 14: 720 s), then id
    assert choose(st, passing, 2, "best", 0).tolist() == [11, 12]
    r1 = choose(st, passing, 3, "random", 42)
    assert r1.tolist() == choose(st, passing, 3, "random", 42).tolist() and len(r1) == 3
    assert {tuple(choose(st, passing, 3, "random", s)) for s in range(10)} != {tuple(r1)}  # seed matters
    assert choose(st, passing, 99, "first", 0).tolist() == [10, 11, 12, 13, 14]
    with pytest.raises(InputDataError, match=r"^rule 'worst': unknown; expected one of "):
        choose(st, passing, 2, "worst", 0)
