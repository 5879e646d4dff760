"""Clients online on an axis that shows them: full scale while they vary, zoomed where a full-scale axis
drew a flat line (issue 50: ``clients_online`` and Figure 6 (b, c) on 0-14,000 with a few hundred of variation)."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.report.plots import FLAT_SHARE, count_ylim


def test_a_count_that_varies_keeps_the_full_scale():
    assert count_ylim([0, 500, 1000]) == (0.0, pytest.approx(1050.0))
    assert count_ylim(np.array([9000.0, 10000.0])) == (0.0, pytest.approx(10500.0))  # 10 % of the top: full scale


def test_a_nearly_flat_count_is_zoomed_onto_its_range():
    lo, hi = count_ylim([13800, 14000, 14100, np.nan])
    assert (lo, hi) == (pytest.approx(13770.0), pytest.approx(14130.0))  # padded by 10 % of the 300 range
    assert (14100 - 13800) < FLAT_SHARE * 14100
    assert count_ylim([5, 5, 5]) == (4.0, 6.0)  # constant: one client either side
    assert count_ylim([]) == (0.0, 1.0)
