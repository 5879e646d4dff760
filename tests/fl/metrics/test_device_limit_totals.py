"""The summary's per-phone device-limit counts: summed over rounds, averaged over seeds, absent without the models."""

from __future__ import annotations

import pandas as pd
import pytest

from flamingo_sim.fl.metrics.summary import decline_totals, device_limit_totals


def test_totals_per_phone_are_sums_over_rounds_averaged_over_seeds():
    rows = pd.DataFrame({
        "seed": [0, 0, 1, 1],
        "dropped_out_of_memory": [1, 2, 0, 1],
        "out_of_memory_pixel_3": [1, 2, 0, 1],
        "batch_shrunk_pixel_3": [0, 0, 0, 0],
        "declined_too_hot": [3, 0, 1, 0],
        "throttled_pixel_3": [1, 1, 2, 0],
        "throttled_s_pixel_3": [10.0, 20.0, 30.0, 0.0],
    })
    totals = device_limit_totals(rows)
    assert totals == {"out_of_memory": {"pixel_3": 2.0}, "batch_shrunk": {"pixel_3": 0.0}, "throttled": {"pixel_3": 2.0},
                      "throttled_s": {"pixel_3": pytest.approx(30.0)}}
    assert device_limit_totals(rows.drop(columns=[c for c in rows.columns if c != "seed"])) is None


def test_decline_totals_are_per_reason_sums_averaged_over_seeds_and_skip_other_policies_reasons():
    rows = pd.DataFrame({
        "seed": [0, 0, 1, 1],
        "declined_too_hot": [3, 0, 1, 0],
        "declined_not_charging": [float("nan")] * 4,  # another policy's own reason: absent from this one's rows
        "declined_in_use_exploring": [0, 5, 2, 1],
    })
    assert decline_totals(rows) == {"too_hot": 2.0, "in_use_exploring": 4.0}


def test_network_totals_are_shares_of_energy_and_round_time():
    from flamingo_sim.fl.metrics.summary import network_totals

    rows = pd.DataFrame({
        "seed": [0, 0, 0, 1, 1, 1], "round": [0, 1, 2, 0, 1, 2],
        "energy_j": [0.0, 100.0, 300.0, 0.0, 200.0, 200.0], "duration_s": [0.0, 50.0, 150.0, 0.0, 100.0, 100.0],
        "radio_energy_j": [0.0, 10.0, 30.0, 0.0, 20.0, 20.0], "transfer_s": [0.0, 5.0, 15.0, 0.0, 10.0, 10.0],
        "n_unreachable": [0, 4, 6, 0, 2, 4], "n_cellular": [0, 1, 3, 0, 2, 2],
    })
    assert network_totals(rows) == {"radio_energy_j": 40.0, "radio_energy_share": pytest.approx(0.1), "transfer_time_share": pytest.approx(0.1),
                                    "n_unreachable_per_round": 4.0, "n_cellular_per_round": 2.0}
    assert network_totals(rows.assign(staleness_mean=1.0))["transfer_time_share"] is None  # FedBuff: no round the server waits for
    assert network_totals(rows.drop(columns=["transfer_s"])) is None
