"""Tests for a hand mutation of the trace pipeline that no other test killed (issue 50, "Survivors that show missing
tests"): :func:`~flamingo_sim.traces.network.wifi_only` with a link of 0 (the app's -1, "no link")."""

from __future__ import annotations

import numpy as np

from flamingo_sim.traces.network import CELLULAR, NONE, WIFI, wifi_only

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
