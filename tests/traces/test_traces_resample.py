"""PCHIP resampling, state signs and the extras' resampling rules, against hand-computed values."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import PchipInterpolator

from flamingo_sim.traces.resample import derive_state, hold_fraction, hold_value, linear, make_grid, pchip_level, resample_device

T0 = 1546300800


def test_grid_is_inside_the_sampled_period_on_multiples_of_600():
    assert make_grid(T0 + 1, T0 + 1800).tolist() == [T0 + 600, T0 + 1200, T0 + 1800]
    assert make_grid(T0, T0 + 599).tolist() == [T0]
    assert make_grid(T0 + 1, T0 + 599).size == 0


def test_pchip_matches_scipy_on_known_points():
    ts = T0 + np.array([0, 700, 1500, 4000, 4100])
    lv = np.array([50.0, 48.0, 48.0, 60.0, 61.0])
    grid = make_grid(ts[0], ts[-1])
    ref = PchipInterpolator(ts - ts[0], lv)(grid - ts[0])
    np.testing.assert_allclose(pchip_level(ts, lv, grid), ref, rtol=0, atol=1e-12)
    # at a sample, the interpolant is the sample
    assert pchip_level(ts, lv, np.array([T0 + 1500]))[0] == 48.0


def test_pchip_does_not_overshoot_between_samples():
    # a step from 20 to 80 and back: a cubic spline overshoots, PCHIP must stay in each interval's range
    ts = T0 + 600 * np.array([0, 1, 2, 3, 10, 11, 12])
    lv = np.array([20.0, 20.0, 80.0, 80.0, 80.0, 20.0, 20.0])
    grid = np.arange(ts[0], ts[-1] + 1, 60)
    out = pchip_level(ts, lv, grid)
    assert out.min() >= 20.0 and out.max() <= 80.0
    flat = (grid >= ts[2]) & (grid <= ts[4])
    assert np.all(out[flat] == 80.0)
    assert np.all(np.diff(out[(grid >= ts[1]) & (grid <= ts[2])]) >= 0)  # monotone where data is


def test_pchip_is_clipped_to_valid_range():
    ts = T0 + np.array([0, 600])
    # extrapolation beyond the last sample can leave 0..100; the result is clipped
    out = pchip_level(ts, np.array([99.0, 100.0]), np.array([T0 + 6000]))
    assert out[0] == 100.0


def test_state_signs_from_forward_difference():
    lv = np.array([50.0, 49.0, 49.0, 49.00001, 52.0, 52.0])
    # diffs: -1, 0, +1e-5 (below eps 1e-4 -> 0), +2.99999, 0; last repeats
    assert derive_state(lv).tolist() == [-1, 0, 0, 1, 0, 0]
    assert derive_state(np.array([3.0])).tolist() == [0]
    assert derive_state(lv).dtype == np.int8


def test_screen_fraction_of_zero_order_hold():
    # on at T0+300 until T0+900, off after; slots [T0, T0+600) -> 300/600, [T0+600, T0+1200) -> 300/600
    ts = np.array([T0 + 0, T0 + 300, T0 + 900, T0 + 1500])
    on = np.array([0.0, 1.0, 0.0, 1.0])
    frac = hold_fraction(ts, on, np.array([T0, T0 + 600, T0 + 1200]))
    np.testing.assert_allclose(frac, [0.5, 0.5, 0.5])  # last slot: on from T0+1500 to T0+1800
    assert hold_fraction(ts, on, np.array([T0 + 3000])).tolist() == [1.0]  # last value holds


def test_hold_and_linear():
    ts = np.array([T0, T0 + 1000])
    assert hold_value(ts, np.array([0.0, 1.0]), np.array([T0, T0 + 999, T0 + 1000, T0 + 5000])).tolist() == [0, 0, 1, 1]
    assert linear(ts, np.array([30.0, 40.0]), np.array([T0 + 500, T0 + 9999])).tolist() == [35.0, 40.0]
    assert np.isnan(linear(ts[:0], ts[:0], np.array([T0]))).all()


def test_resample_device_names_extras_and_rounds_sensors():
    ts = T0 + np.array([0, 1200, 2400])
    s = resample_device(5, ts, np.array([80.0, 79.0, 78.0]), {
        "screen_on": np.array([1.0, np.nan, 0.0]),
        "temperature_c": np.array([30.0, 31.0, 33.0]),
        "voltage_v": np.array([4.0, np.nan, 3.9]),
        "charging": np.array([0.0, 1.0, 1.0]),
    })
    assert s.start_s == T0 and len(s) == 5
    np.testing.assert_allclose(s.level_pct, [80, 79.5, 79, 78.5, 78])
    assert s.state.tolist() == [-1, -1, -1, -1, -1]
    assert s.extras["screen_on_frac"].tolist() == [1, 1, 1, 1, 0]  # NaN reading skipped: holds 1 until 2400
    np.testing.assert_allclose(s.extras["temperature_c"], [30, 30.5, 31, 32, 33])
    np.testing.assert_allclose(s.extras["voltage_v"], [4.0, 3.975, 3.95, 3.925, 3.9], atol=1e-6)
    assert s.extras["charging"].tolist() == [0, 0, 1, 1, 1]


def test_device_within_one_slot_gets_one_point():
    s = resample_device(9, np.array([T0 + 100, T0 + 200]), np.array([40.0, 39.0]))
    assert s.start_s == T0 and len(s) == 1 and s.state.tolist() == [0]
