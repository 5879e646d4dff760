"""The network a task's transfers run on: times and radio energy by hand, network changes, pauses, the fallback, the rules."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.config import from_mapping
from flamingo_sim.devices.radio import LTE, WIFI
from flamingo_sim.fl.config import NetworkConfig
from flamingo_sim.fl.sim.network import MAX_WAIT_S, Network
from flamingo_sim.fl.sim.population import build_population
from flamingo_sim.traces.store import ClientTraces

#: Huang et al.'s powers at the scripted rates, bounded by the phones' power profiles (flamingo_sim/devices/radio.py):
#: LTE down at 10 Mbit/s 1807.7 mW -> 773.1 mW (OnePlus 8 rx, 200.8 mA x 3.85 V); LTE up at 4 Mbit/s 3041.6 mW ->
#: 2490.2 mW (its top tx level, 646.8 mA x 3.85 V); LTE's promotion (1210.7 mW) and tail (1060 mW) -> 773.1 mW;
#: WiFi down at 40 Mbit/s 5613.3 mW -> 584.1 mW (177 mA x 3.3 V); WiFi up at 20 Mbit/s 5796.3 mW -> 1295 mW (Pixel 3 tx, 350 mA x 3.7 V)
LTE_DOWN_W, LTE_UP_W, LTE_IDLE_W = min(0.05197 * 10 + 1.28804, 0.2008 * 3.85), min(0.43839 * 4 + 1.28804, 0.6468 * 3.85), 0.2008 * 3.85
WIFI_DOWN_W, WIFI_UP_W = min(0.13701 * 40 + 0.13286, 0.177 * 3.3), min(0.28317 * 20 + 0.13286, 0.350 * 3.7)

NAN = np.nan
MB = 10.0  # a 10 MB model: 80 Mbit each way
MBIT = MB * 8
# zero spread: every client has the configured means
MEANS = {"wifi_down_mbps": 40.0, "wifi_up_mbps": 20.0, "cellular_down_mbps": 10.0, "cellular_up_mbps": 4.0, "spread_sigma": 0.0}


def _traces(states: list[list[float]], link: list[list[float]] | None = None, shift_h: int = 0) -> ClientTraces:
    """One device per row of ``states`` (network_state per 10-minute slot), one client each."""
    st = np.array(states, dtype=np.float32)
    n, k = st.shape
    extras = {"network_state": st}
    if link is not None:
        extras["wifi_link_mbps"] = np.array(link, dtype=np.float32)
    return ClientTraces(step_s=600, device_ids=np.arange(n), level_pct=np.full((n, k), 80.0, np.float32), state=np.zeros((n, k), np.int8),
                        extras=extras, client_ids=np.arange(n), client_device=np.arange(n), shift_s=np.full(n, shift_h * 3600, np.int64))


def _network(traces: ClientTraces, n_clients: int | None = None, seed: int = 0, mb: float = MB, **cfg) -> Network:
    n = traces.n_clients if n_clients is None else n_clients
    conf = from_mapping(NetworkConfig, {"model": "traces", **MEANS, **cfg})
    pop = build_population(n, traces.n_clients, {"pixel_3": 1.0}, 20.0, 0.5, seed=seed)
    return Network(conf, traces, pop, seed, mb)


BIG = 100.0  # a 100 MB model: 800 Mbit, more than 10-20 s of WiFi carry
BIG_MBIT = BIG * 8


def test_download_and_upload_on_lte_a_tail_apart_by_hand():
    """On LTE all along, training 100 s: each transfer pays its promotion (0.2601 s), flows at
    alpha x rate + beta within the power profiles' bound, then its whole tail (11.576 s; both at the receive bound): the 100 s gap is longer than a tail."""
    net = _network(_traces([[2.0] * 6]))
    out = net.transfers(0.0, np.array([0]), np.array([100.0]))
    down_s, up_s = LTE.promotion_s + MBIT / 10.0, LTE.promotion_s + MBIT / 4.0
    assert out.download_s[0] == pytest.approx(down_s, rel=1e-12)
    assert out.comm_s[0] == pytest.approx(down_s + up_s, rel=1e-12)
    by_hand = (LTE_IDLE_W * 0.2601 + LTE_DOWN_W * 8.0 + LTE_IDLE_W * 11.576) + (LTE_IDLE_W * 0.2601 + LTE_UP_W * 20.0 + LTE_IDLE_W * 11.576)
    assert out.radio_energy_j[0] == pytest.approx(by_hand, rel=1e-12)
    assert not out.abandoned[0] and out.start_state[0] == 2


def test_an_upload_within_the_downloads_tail_needs_no_promotion():
    """Training 5 s, shorter than LTE's 11.576 s tail: the download's tail lasts 5 s, the upload flows at once, then one tail."""
    net = _network(_traces([[2.0] * 6]))
    out = net.transfers(0.0, np.array([0]), np.array([5.0]))
    assert out.comm_s[0] == pytest.approx(LTE.promotion_s + 8.0 + 20.0, rel=1e-12)
    by_hand = LTE_IDLE_W * 0.2601 + LTE_DOWN_W * 8.0 + LTE_IDLE_W * 5.0 + LTE_UP_W * 20.0 + LTE_IDLE_W * 11.576
    assert out.radio_energy_j[0] == pytest.approx(by_hand, rel=1e-12)


def test_a_download_that_outlasts_its_wifi_goes_on_over_cellular():
    """WiFi in slot 0, cellular from 600 s: a 100 MB download started at 590 s moves (10 - promotion) s x 40 Mbit/s on WiFi,
    the rest on LTE at 10 Mbit/s after LTE's promotion; WiFi's tail and LTE's promotion are both paid."""
    net = _network(_traces([[1.0, 2.0, 2.0, 2.0, 2.0]]), mb=BIG)
    out = net.transfers(590.0, np.array([0]), np.array([1000.0]))
    on_wifi = (10.0 - WIFI.promotion_s) * 40.0
    rest = BIG_MBIT - on_wifi
    down_s = 10.0 + LTE.promotion_s + rest / 10.0
    assert out.download_s[0] == pytest.approx(down_s, rel=1e-12)
    down_j = (WIFI.promotion_j + WIFI_DOWN_W * (10.0 - WIFI.promotion_s) + WIFI.tail_j
              + LTE.promotion_j + LTE_DOWN_W * rest / 10.0)
    # the upload, 1000 s later, on LTE: the download's tail, a promotion, the flow, the tail
    up_j = LTE.tail_j + LTE.promotion_j + LTE_UP_W * 200.0 + LTE.tail_j
    assert out.radio_energy_j[0] == pytest.approx(down_j + up_j, rel=1e-12)
    assert out.start_state[0] == 1


def test_a_transfer_pauses_without_network_and_resumes_on_the_next_one():
    """No network in slot 1: a 100 MB download started at 580 s stops at 600 s and resumes at 1200 s on WiFi (a new promotion;
    the old tail ran out during the pause)."""
    net = _network(_traces([[1.0, 0.0, 1.0, 1.0]]), mb=BIG)
    out = net.transfers(580.0, np.array([0]), np.array([0.0]))
    first = (20.0 - WIFI.promotion_s) * 40.0
    assert first < BIG_MBIT
    down_end = 1200.0 + WIFI.promotion_s + (BIG_MBIT - first) / 40.0
    assert out.download_s[0] == pytest.approx(down_end - 580.0, rel=1e-12)
    # the upload follows at once (no training), within WiFi's tail: no promotion
    assert out.comm_s[0] == pytest.approx(down_end - 580.0 + BIG_MBIT / 20.0, rel=1e-12)
    down_j = 2 * WIFI.promotion_j + WIFI_DOWN_W * (BIG_MBIT / 40.0) + WIFI.tail_j
    up_j = WIFI_UP_W * (BIG_MBIT / 20.0) + WIFI.tail_j
    assert out.radio_energy_j[0] == pytest.approx(down_j + up_j, rel=1e-12)


def test_unmetered_only_pauses_on_cellular_and_cellular_clients_are_unreachable():
    net = _network(_traces([[1.0, 2.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 1.0, 1.0]]), unmetered_only=True, mb=BIG)
    assert net.reachable(0.0, np.arange(3)).tolist() == [True, False, False]
    out = net.transfers(590.0, np.array([0]), np.array([0.0]))
    first = (10.0 - WIFI.promotion_s) * 40.0
    assert out.download_s[0] == pytest.approx(1200.0 + WIFI.promotion_s + (BIG_MBIT - first) / 40.0 - 590.0, rel=1e-12)
    plain = _network(_traces([[1.0, 2.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 1.0, 1.0]]))
    assert plain.reachable(0.0, np.arange(3)).tolist() == [True, True, False]  # no network: unreachable on any rule


def test_a_transfer_without_network_for_a_day_is_abandoned():
    slots = int(MAX_WAIT_S // 600) + 4
    net = _network(_traces([[1.0] + [0.0] * slots]), mb=BIG)
    out = net.transfers(590.0, np.array([0]), np.array([50.0]))
    assert out.abandoned[0] and out.download_abandoned[0]
    assert out.comm_s[0] == pytest.approx(10.0 + MAX_WAIT_S, rel=1e-9)  # it waited a day after its first 10 s
    # only the download's radio energy: no training, no upload
    assert out.radio_energy_j[0] == pytest.approx(WIFI.promotion_j + WIFI_DOWN_W * (10.0 - WIFI.promotion_s) + WIFI.tail_j)


def test_unknown_slots_take_each_clients_draw_and_a_set_without_states_all_of_them():
    net = _network(_traces([[NAN] * 4]), n_clients=4000, unknown_wifi_share=0.25)
    state = net.state_at(0.0, np.arange(4000))
    assert set(np.unique(state)) == {1.0, 2.0}
    assert np.mean(state == 1.0) == pytest.approx(0.25, abs=0.03)
    assert np.array_equal(net.state_at(1800.0, np.arange(4000)), state)  # each client keeps its draw
    bare = ClientTraces(step_s=600, device_ids=np.arange(1), level_pct=np.full((1, 3), 80.0, np.float32), state=np.zeros((1, 3), np.int8),
                        extras={}, client_ids=np.arange(1), client_device=np.arange(1), shift_s=np.zeros(1, np.int64))
    only_wifi = _network(bare, n_clients=50, unknown_wifi_share=1.0)
    assert not only_wifi.has_states and (only_wifi.state_at(0.0, np.arange(50)) == 1.0).all()


def test_the_wifi_link_rate_caps_the_bandwidth():
    net = _network(_traces([[1.0] * 4], link=[[8.0, 8.0, 8.0, 8.0]]))
    out = net.transfers(0.0, np.array([0]), np.array([100.0]))
    assert out.download_s[0] == pytest.approx(WIFI.promotion_s + MBIT / 8.0, rel=1e-12)  # min(40, 8)
    assert out.comm_s[0] == pytest.approx(2 * WIFI.promotion_s + MBIT / 8.0 + MBIT / 8.0, rel=1e-12)  # min(20, 8)


def test_the_spread_is_log_normal_with_the_configured_means():
    net = _network(_traces([[1.0]]), n_clients=40000, spread_sigma=0.5)
    for state, (down, up) in ((1, (40.0, 20.0)), (2, (10.0, 4.0))):
        assert net.down_mbps[:, state].mean() == pytest.approx(down, rel=0.02)
        np.testing.assert_allclose(net.up_mbps[:, state] / up, net.down_mbps[:, state] / down, rtol=1e-12)  # one factor, both directions
        assert np.log(net.down_mbps[:, state]).std() == pytest.approx(0.5, rel=0.02)
    assert not np.array_equal(net.down_mbps[:, 1] / 40.0, net.down_mbps[:, 2] / 10.0)  # a factor per network
    again = _network(_traces([[1.0]]), n_clients=40000, spread_sigma=0.5)
    assert np.array_equal(again.down_mbps, net.down_mbps)


def test_the_lognormal_model_prices_as_before_bit_for_bit():
    traces = _traces([[2.0, 0.0, 1.0]] * 3)
    conf = from_mapping(NetworkConfig, {"model": "lognormal"})
    pop = build_population(9, 3, {"pixel_3": 1.0}, 20.0, 0.5, seed=4)
    net = Network(conf, traces, pop, 4, 87.2)
    idx = np.array([0, 3, 8, 5])
    out = net.transfers(700.0, idx, np.array([10.0, 20.0, 30.0, 40.0]))
    assert np.array_equal(out.comm_s, 2.0 * 87.2 * 8.0 / pop.bandwidth_mbps[idx])  # Population.comm_s, the formula of before
    assert (out.radio_energy_j == 0).all() and not out.abandoned.any()
    assert not net.reports and net.reachable(700.0, idx).all()  # a client without network (slot 1) is still selected, as before


def test_fedscales_capacities_replace_the_bandwidths():
    traces = _traces([[2.0] * 4] * 2)
    pop = build_population(2, 2, {"pixel_3": 1.0}, 20.0, 0.5, seed=0)
    kbps = np.array([2134.5, 11250.0])
    logn = Network(from_mapping(NetworkConfig, {"model": "lognormal"}), traces, pop, 0, MB, kbps)
    assert np.array_equal(logn.transfers(0.0, np.arange(2), np.zeros(2)).comm_s, 2.0 * MB * 8.0 / (kbps / 1000.0))
    tr = Network(from_mapping(NetworkConfig, {"model": "traces"}), traces, pop, 0, MB, kbps)
    out = tr.transfers(0.0, np.arange(2), np.full(2, 100.0))
    assert out.download_s == pytest.approx(LTE.promotion_s + MBIT / (kbps / 1000.0), rel=1e-12)
