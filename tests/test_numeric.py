"""flamingo_sim.numeric: libm's exp and pow element-wise, equal to math's value for value, numpy's edge cases kept."""

from __future__ import annotations

import math

import numpy as np

from flamingo_sim.numeric import exp, power


def test_exp_is_libms_value_for_value_with_numpys_edges():
    z = np.random.default_rng(0).standard_normal((40, 25)) * 30.0
    out = exp(z)
    assert out.shape == z.shape and out.dtype == np.float64
    assert [float(v) for v in out.ravel()] == [math.exp(v) for v in z.ravel().tolist()]
    edges = exp(np.array([709.0, 709.79, 1e4, -1e4, np.nan]))
    assert edges[0] == math.exp(709.0) and math.isinf(edges[1]) and math.isinf(edges[2]) and edges[3] == 0.0 and math.isnan(edges[4])
    assert exp(0.0).shape == () and float(exp(1.0)) == math.e


def test_power_is_libms_value_for_value():
    a = np.abs(np.random.default_rng(1).standard_normal(1000)) * 7.0
    assert [float(v) for v in power(a, -0.6)] == [math.pow(v, -0.6) for v in a.tolist()]
    assert list(power(np.array([[4.0, 0.0]]), 0.5)[0]) == [2.0, 0.0] and math.isnan(float(power(np.nan, 2.0)))
