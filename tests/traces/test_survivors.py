"""Tests for a hand mutation of the trace pipeline that no other test killed (issue 50, "Survivors that show missing
tests"): :func:`~flamingo_sim.traces.network.wifi_only` with a link of 0 (the app's -1, "no link"); and the survivors of
``.ci/mutation.py radio-network`` in :func:`~flamingo_sim.traces.network.clean_network`."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from flamingo_sim.traces.network import CELLULAR, NONE, WIFI, clean_network, hold_bounded, state_shares, wifi_only

NAN = np.nan


def test_wifi_only_keeps_a_link_above_0_on_wifi_and_nothing_else():
    # grid points: WiFi with a 72 Mbit/s link, WiFi with a link of 0 (no link), cellular with a leftover link, no network,
    # unknown state, WiFi with no reading
    extras = {"network_state": np.array([WIFI, WIFI, CELLULAR, NONE, NAN, WIFI], dtype=np.float32),
              "wifi_link_mbps": np.array([72.0, 0.0, 433.0, 5.0, 866.0, NAN], dtype=np.float32),
              "wifi_signal_dbm": np.array([-55.0, -60.0, -70.0, -40.0, -50.0, NAN], dtype=np.float32)}
    wifi_only(extras)
    np.testing.assert_array_equal(extras["wifi_link_mbps"], np.array([72.0, NAN, NAN, NAN, NAN, NAN], dtype=np.float32))
    # the signal has no 0 rule: a reading on WiFi is kept whatever the link says
    np.testing.assert_array_equal(extras["wifi_signal_dbm"], np.array([-55.0, -60.0, NAN, NAN, NAN, NAN], dtype=np.float32))
    assert extras["wifi_link_mbps"].dtype == np.float32


def test_wifi_only_without_a_state_column_drops_only_the_links_of_0():
    extras = {"wifi_link_mbps": np.array([0.0, 54.0, NAN, -1.0], dtype=np.float32)}
    wifi_only(extras)
    np.testing.assert_array_equal(extras["wifi_link_mbps"], np.array([NAN, 54.0, NAN, NAN], dtype=np.float32))


# -- the survivors of .ci/mutation.py over the trace pipeline's network columns (benchmarks/results/mutation_radio_network_2cores.json)

def test_unread_values_are_counted_under_their_own_column():
    """A value no rule reads is counted as ``column=value`` (the prep report lists them): the cellular technology's
    column names itself, and so does the WiFi status's; a value read (``lte``, ``enabled``) is not counted."""
    table = pa.table({"mobile_network_type": ["lte", "6g", "6g", "unknown"], "wifi_status": ["enabled", "on", "disabled", "on"]})
    unread: Counter = Counter()
    out = clean_network(table, np.ones(4, bool), unread)
    assert unread == Counter({"mobile_network_type=6g": 2, "wifi_status=on": 2})
    np.testing.assert_array_equal(out["mobile_generation"], [4.0, NAN, NAN, NAN])
    np.testing.assert_array_equal(out["wifi_enabled"], [1.0, NAN, 0.0, NAN])


def test_a_reading_holds_hold_s_after_it_and_no_longer_before_the_next():
    """Readings at 0 s (WiFi) and 100,000 s (cellular), held at most 6 h (21,600 s): the grid points 0 and 3,600 s hold
    WiFi, 30,000 s is 8.3 h after the only earlier reading (unknown), 100,000 s is the second reading, and before the first
    reading nothing is known."""
    got = hold_bounded(np.array([0, 100_000]), np.array([WIFI, CELLULAR]), np.array([-600.0, 0.0, 3_600.0, 30_000.0, 100_000.0]), 21_600.0)
    np.testing.assert_array_equal(got, [NAN, WIFI, WIFI, NAN, CELLULAR])


def test_the_shares_of_a_single_grid_point():
    """One grid point on WiFi: all of the time on WiFi; two points, one unknown: half each."""
    assert state_shares(np.array([WIFI])) == {"none": 0.0, "wifi": 1.0, "cellular": 0.0, "unknown": 0.0}
    assert state_shares(np.array([CELLULAR, NAN])) == {"none": 0.0, "wifi": 0.0, "cellular": 0.5, "unknown": 0.5}
