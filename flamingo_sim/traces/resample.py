"""Resampling one device's event-driven samples onto the fixed 10-minute UTC grid.

* ``battery_level_pct``: :class:`scipy.interpolate.PchipInterpolator` through the (deduplicated,
  strictly increasing) samples, evaluated on the grid and clipped to 0..100. PCHIP is
  shape-preserving: between two samples it never leaves their range (no overshoot).
* ``battery_state``: sign of the *forward* difference ``level[i+1] - level[i]`` (the direction
  the level moves during slot ``i``), 0 when ``|diff| <= eps``; the last point repeats the one
  before it.
* ``screen_on_frac``: ``screen_on`` is a 0/1 event sample that holds until the next sample
  (zero-order hold); the value is the fraction of the slot ``[g, g + step)`` during which the hold
  is 1 (exact, through the piecewise-linear integral of the hold).
* ``temperature_c``, ``voltage_v``: linear interpolation between valid readings (physical
  quantities that change slowly); constant beyond the first/last reading; rounded to the
  sensors' resolution (0.1 degC, 1 mV), which also makes them compress well.
* ``charging``: 1.0 when the charger (ac/usb/wireless) is plugged, 0.0 when unplugged, by
  zero-order hold of the last reading at or before the grid point.
* the network states (``network_state``, ``mobile_generation``, ``wifi_enabled``,
  ``wifi_signal_dbm``, ``wifi_link_mbps``): the last reading at or before the grid point, held at
  most ``network_hold_s`` (:func:`flamingo_sim.traces.network.hold_bounded`); unknown beyond; the
  WiFi signal and link only where the state is WiFi (:func:`flamingo_sim.traces.network.wifi_only`).

An extra with no valid reading on a device is all-NaN for that device.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from scipy.interpolate import PchipInterpolator

from flamingo_sim.traces.network import HOLD_H, NETWORK_EXTRAS, hold_bounded, wifi_only
from flamingo_sim.traces.store import STEP_S, DeviceSeries

__all__ = ["make_grid", "pchip_level", "derive_state", "hold_fraction", "hold_value", "linear", "resample_device"]


def make_grid(first_s: int, last_s: int, step_s: int = STEP_S) -> np.ndarray:
    """Grid points (UTC seconds, multiples of ``step_s``) inside ``[first_s, last_s]``."""
    start = -(-int(first_s) // step_s) * step_s
    stop = (int(last_s) // step_s) * step_s
    if stop < start:
        return np.zeros(0, dtype=np.int64)
    return np.arange(start, stop + 1, step_s, dtype=np.int64)


def pchip_level(ts_s: np.ndarray, level_pct: np.ndarray, grid_s: np.ndarray, max_pct: float = 100.0) -> np.ndarray:
    """PCHIP of ``level_pct`` over strictly increasing ``ts_s``, on ``grid_s``, clipped to 0..``max_pct``."""
    x = np.asarray(ts_s, dtype=np.float64)
    y = np.asarray(level_pct, dtype=np.float64)
    if x.size == 1:
        out = np.full(grid_s.shape, y[0])
    else:
        x0 = x[0]  # shift x for numerical accuracy (epoch seconds are ~1e9)
        out = PchipInterpolator(x - x0, y, extrapolate=True)(np.asarray(grid_s, dtype=np.float64) - x0)
    return np.clip(out, 0.0, max_pct)


def derive_state(level: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """+1/0/-1 (int8) from the sign of the forward difference of ``level``; last repeats previous."""
    level = np.asarray(level, dtype=np.float64)
    if level.size < 2:
        return np.zeros(level.shape, dtype=np.int8)
    d = np.diff(level)
    s = np.where(d > eps, 1, np.where(d < -eps, -1, 0)).astype(np.int8)
    return np.r_[s, s[-1:]].astype(np.int8)


def hold_fraction(ts_s: np.ndarray, value: np.ndarray, grid_s: np.ndarray, step_s: int = STEP_S) -> np.ndarray:
    """Fraction of each slot ``[g, g+step)`` in which the zero-order hold of ``value`` (0/1) is on.

    Before the first sample the first value holds; after the last, the last value holds.
    """
    t = np.asarray(ts_s, dtype=np.float64)
    v = np.asarray(value, dtype=np.float64)
    if t.size == 0:
        return np.full(grid_s.shape, np.nan)
    # Integral F of the hold at the sample times; F is linear between them.
    F = np.r_[0.0, np.cumsum(v[:-1] * np.diff(t))]

    def integral(x: np.ndarray) -> np.ndarray:
        out = np.interp(x, t, F)
        out = np.where(x < t[0], (x - t[0]) * v[0], out)
        return np.where(x > t[-1], F[-1] + (x - t[-1]) * v[-1], out)

    g = np.asarray(grid_s, dtype=np.float64)
    return np.clip((integral(g + step_s) - integral(g)) / step_s, 0.0, 1.0)


def hold_value(ts_s: np.ndarray, value: np.ndarray, grid_s: np.ndarray) -> np.ndarray:
    """Zero-order hold: the last value at or before each grid point (the first value before it)."""
    if len(ts_s) == 0:
        return np.full(grid_s.shape, np.nan)
    idx = np.searchsorted(ts_s, grid_s, side="right") - 1
    return np.asarray(value, dtype=np.float64)[np.clip(idx, 0, None)]


def linear(ts_s: np.ndarray, value: np.ndarray, grid_s: np.ndarray) -> np.ndarray:
    """Linear interpolation, constant beyond the ends; all-NaN without readings."""
    if len(ts_s) == 0:
        return np.full(grid_s.shape, np.nan)
    return np.interp(np.asarray(grid_s, np.float64), np.asarray(ts_s, np.float64), np.asarray(value, np.float64))


#: Interpolated sensor values are rounded to the sensors' resolution (0.1 degC, 1 mV).
_DECIMALS = {"temperature_c": 1, "voltage_v": 3}
_EXTRA_METHOD = {
    "screen_on": ("screen_on_frac", "fraction"),
    "temperature_c": ("temperature_c", "linear"),
    "voltage_v": ("voltage_v", "linear"),
    "charging": ("charging", "hold"),
    **{name: (name, "bounded") for name in NETWORK_EXTRAS},
}


def resample_device(
    device_id: int,
    ts_s: np.ndarray,
    level_pct: np.ndarray,
    extras: Mapping[str, np.ndarray] | None = None,
    *,
    step_s: int = STEP_S,
    state_eps: float = 1e-4,
    network_hold_s: float = HOLD_H * 3600.0,
) -> DeviceSeries:
    """Resample one device (``ts_s`` strictly increasing) onto the grid; extras may hold NaN gaps.

    ``extras`` keys are the cleaned input columns ``screen_on``, ``temperature_c``,
    ``voltage_v``, ``charging`` and the network states; outputs are named as in
    :data:`~flamingo_sim.traces.store.EXTRA_COLUMNS`.
    """
    grid = make_grid(int(ts_s[0]), int(ts_s[-1]), step_s)
    if grid.size == 0:  # a device sampled within one slot (only with relaxed criteria): one grid point
        grid = np.array([int(ts_s[0]) // step_s * step_s], dtype=np.int64)
    level = pchip_level(ts_s, level_pct, grid)
    out: dict[str, np.ndarray] = {}
    for name, values in (extras or {}).items():
        out_name, method = _EXTRA_METHOD[name]
        ok = ~np.isnan(values)
        t, v = ts_s[ok], values[ok]
        if method == "fraction":
            res = hold_fraction(t, v, grid, step_s)
        elif method == "hold":
            res = hold_value(t, v, grid)
        elif method == "bounded":
            res = hold_bounded(t, v, grid, network_hold_s)
        else:
            res = np.round(linear(t, v, grid), _DECIMALS[out_name])
        out[out_name] = res.astype(np.float32)
    wifi_only(out)
    return DeviceSeries(
        device_id=int(device_id),
        start_s=int(grid[0]),
        level_pct=level.astype(np.float32),
        state=derive_state(level, state_eps),
        extras=out,
    )
