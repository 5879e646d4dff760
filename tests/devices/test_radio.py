"""The radio's energy: Huang et al.'s model (MobiSys 2012, Tables 3 and 4) in closed form, bounded by the phones' power profiles, by hand."""

from __future__ import annotations

import pytest

from flamingo_sim.devices.radio import LTE, WIFI, transfer_energy_j


def test_the_parameters_are_the_papers_tables_in_si_units():
    # Table 4 (mW/Mbps, mW) and Table 3 (mW, ms), as printed
    assert (LTE.alpha_up_w_per_mbps * 1000, LTE.alpha_down_w_per_mbps * 1000, LTE.beta_w * 1000) == pytest.approx((438.39, 51.97, 1288.04))
    assert (WIFI.alpha_up_w_per_mbps * 1000, WIFI.alpha_down_w_per_mbps * 1000, WIFI.beta_w * 1000) == pytest.approx((283.17, 137.01, 132.86))
    assert (LTE.promotion_w * 1000, LTE.promotion_s * 1000, LTE.tail_w * 1000, LTE.tail_s * 1000) == pytest.approx((1210.7, 260.1, 1060.0, 11576.0))
    assert (WIFI.promotion_w * 1000, WIFI.promotion_s * 1000, WIFI.tail_w * 1000, WIFI.tail_s * 1000) == pytest.approx((124.4, 79.1, 119.3, 238.1))
    # the upload's per-Mbit cost over the download's, Table 4's last column: 8.44 (LTE), 2.07 (WiFi)
    assert LTE.alpha_up_w_per_mbps / LTE.alpha_down_w_per_mbps == pytest.approx(8.44, abs=0.005)
    assert WIFI.alpha_up_w_per_mbps / WIFI.alpha_down_w_per_mbps == pytest.approx(2.07, abs=0.005)


def test_a_transfers_energy_is_the_closed_form_within_the_power_profiles_bounds():
    """ResNet-34's 87.2 MB (697.6 Mbit) uploaded over LTE at 8.65 Mbit/s: promotion, 80.65 s at Huang's
    438.39 x 8.65 + 1288.04 = 5080.1 mW, which the OnePlus 8's transmit bound (646.8 mA x 3.85 V = 2490.2 mW)
    caps, then the 11.576 s tail at 1060 mW, capped at the receive bound (200.8 mA x 3.85 V = 773.1 mW) like
    the 1210.7 mW promotion."""
    mbit, rate = 87.2 * 8, 8.65
    flow_s = mbit / rate
    down_cap = 0.2008 * 3.85
    by_hand = down_cap * 0.2601 + min(0.43839 * 8.65 + 1.28804, 0.6468 * 3.85) * flow_s + down_cap * 11.576
    assert transfer_energy_j(LTE, mbit, rate, up=True) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(0.2011 + 200.83 + 8.9494, abs=0.01)  # 210.0 J, against 422.3 J unbounded
    # the same download over WiFi at 40.11 Mbit/s: Huang's 137.01 x 40.11 + 132.86 = 5628.3 mW, capped at
    # the OnePlus 8's 177 mA x 3.3 V = 584.1 mW for 17.39 s; WiFi's promotion and tail lie below the cap
    down = 0.1244 * 0.0791 + 0.177 * 3.3 * (mbit / 40.11) + 0.1193 * 0.2381
    assert transfer_energy_j(WIFI, mbit, 40.11, up=False) == pytest.approx(down, rel=1e-12)
    assert transfer_energy_j(LTE, 0.0, 5.0, up=False) == pytest.approx(LTE.promotion_j + LTE.tail_j)
    # below the bound the linear model holds: WiFi up at 1 Mbit/s, 283.17 + 132.86 = 416.03 mW
    assert WIFI.active_w(1.0, up=True) == pytest.approx(0.41603)


def test_the_bounds_are_the_phones_power_profiles():
    from flamingo_sim.devices.radio import POWER_PROFILE_CAPS

    assert POWER_PROFILE_CAPS["wifi"] == pytest.approx((1.295, 0.5841))
    assert POWER_PROFILE_CAPS["lte"] == pytest.approx((2.49018, 0.77308))
    # no active power above them at any rate the traces' era sees (1-200 Mbit/s)
    import numpy as np

    rates = np.linspace(1.0, 200.0, 50)
    for radio in (LTE, WIFI):
        for up, cap in ((True, radio.max_up_w), (False, radio.max_down_w)):
            assert np.all(radio.active_w(rates, up) <= cap)
        assert radio.tail_power_w <= radio.max_down_w


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="rate_mbps > 0"):
        transfer_energy_j(LTE, 10.0, 0.0, up=True)
