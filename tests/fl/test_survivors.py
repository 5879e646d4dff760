"""Tests for hand mutations of the round's model that no other test killed (issue 50, "Survivors that show missing
tests"): a download on WiFi with the upload on cellular, a link of 0, a target read from rounds given out of order,
and FedAvg's precision on values float16 cannot hold (the heat of a task stopped part way: tests/devices/test_survivors.py).
Expected numbers by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from flamingo_sim.config import from_mapping
from flamingo_sim.fl.config import NetworkConfig, TargetConfig
from flamingo_sim.fl.metrics.target import RAW, accuracy_curve, best_on_curve, first_reach
from flamingo_sim.fl.sim.network import Network
from flamingo_sim.fl.sim.population import build_population
from flamingo_sim.fl.strategy.aggregate import fedavg
from flamingo_sim.rng import rng
from flamingo_sim.traces.store import ClientTraces

# -- the network: download on WiFi, upload on cellular (fl/sim/network.py, devices/radio.py) --------------------------

def _network(states: list[float], link: list[float] | None = None, model_size_mb: float = 10.0) -> Network:
    st = np.array([states], dtype=np.float32)
    extras = {"network_state": st}
    if link is not None:
        extras["wifi_link_mbps"] = np.array([link], dtype=np.float32)
    traces = ClientTraces(step_s=600, device_ids=np.arange(1), level_pct=np.full(st.shape, 80.0, np.float32), state=np.zeros(st.shape, np.int8),
                          extras=extras, client_ids=np.arange(1), client_device=np.arange(1), shift_s=np.zeros(1, np.int64))
    cfg = from_mapping(NetworkConfig, {"model": "traces", "wifi_down_mbps": 40.0, "wifi_up_mbps": 20.0, "cellular_down_mbps": 10.0,
                                       "cellular_up_mbps": 4.0, "spread_sigma": 0.0})
    return Network(cfg, traces, build_population(1, 1, {"pixel_3": 1.0}, 20.0, 0.5, seed=0), 0, model_size_mb)


def test_a_download_on_wifi_and_the_upload_on_cellular_by_hand():
    """WiFi in slot 0, cellular after 600 s; a 10 MB model (80 Mbit) downloaded at 0 s, 700 s of training, the upload at
    about 702 s on LTE. Download: WiFi's promotion 0.0791 s at 0.1244 W, 80 / 40 = 2 s at min(0.13701 x 40 + 0.13286,
    0.177 A x 3.3 V) = 0.5841 W. The upload starts on another radio: WiFi's whole tail (0.2381 s at 0.1193 W = 0.0284 J),
    LTE's promotion (0.2601 s at the receive bound 0.2008 A x 3.85 V = 0.77308 W), 80 / 4 = 20 s at min(0.43839 x 4 +
    1.28804, 0.6468 A x 3.85 V) = 2.49018 W, then LTE's whole tail, 11.576 s at 0.77308 W = 8.949 J (the upload's radio's
    tail, not WiFi's 0.028 J)."""
    out = _network([1.0, 2.0, 2.0, 2.0]).transfers(0.0, np.array([0]), np.array([700.0]))
    wifi_rx, lte_rx, lte_tx = 0.177 * 3.3, 0.2008 * 3.85, 0.6468 * 3.85
    down_s, up_s = 0.0791 + 2.0, 0.2601 + 20.0
    assert out.download_s[0] == pytest.approx(down_s, rel=1e-12)
    assert out.comm_s[0] == pytest.approx(down_s + up_s, rel=1e-12)
    down_j = 0.1244 * 0.0791 + wifi_rx * 2.0
    up_j = 0.1193 * 0.2381 + lte_rx * 0.2601 + lte_tx * 20.0 + lte_rx * 11.576
    assert out.radio_energy_j[0] == pytest.approx(down_j + up_j, rel=1e-12)
    assert out.radio_energy_j[0] == pytest.approx(60.16, abs=0.01)  # 1.178 J down, 58.98 J up
    assert out.start_state[0] == 1 and not out.abandoned[0]


def test_an_upload_on_wifi_after_a_cellular_download_pays_lte_tail_once_by_hand():
    """The reverse: cellular in slot 0, WiFi after. Download on LTE: 0.2601 s promotion, 8 s at min(0.05197 x 10 + 1.28804,
    0.77308) = 0.77308 W; the upload 700 s later on WiFi: LTE's whole tail (8.949 J), WiFi's promotion, 80 / 20 = 4 s at
    min(0.28317 x 20 + 0.13286, 0.350 A x 3.7 V) = 1.295 W, and WiFi's tail."""
    out = _network([2.0, 1.0, 1.0, 1.0]).transfers(0.0, np.array([0]), np.array([700.0]))
    lte_rx, wifi_tx = 0.2008 * 3.85, 0.350 * 3.7
    assert out.comm_s[0] == pytest.approx(0.2601 + 8.0 + 0.0791 + 4.0, rel=1e-12)
    by_hand = lte_rx * 0.2601 + lte_rx * 8.0 + lte_rx * 11.576 + 0.1244 * 0.0791 + wifi_tx * 4.0 + 0.1193 * 0.2381
    assert out.radio_energy_j[0] == pytest.approx(by_hand, rel=1e-12)


# -- the target rule: rounds given out of order (fl/metrics/target.py) --------------------------------------------------

def test_the_target_is_read_in_round_order_whatever_order_the_rows_come_in():
    """Rounds 0-5 with accuracies 0.10, 0.50, 0.30, 0.70, 0.60, 0.80, handed over shuffled. Raw rule, target 0.55: first
    reached at round 3 (0.70), not at whichever row comes first. Smoothed over 2: the curve by round is 0.10, 0.30, 0.40,
    0.50, 0.65, 0.70, so a 0.60 target is reached at round 4 and the best is 0.70."""
    acc = [0.10, 0.50, 0.30, 0.70, 0.60, 0.80]
    rows = pd.DataFrame({"round": range(6), "accuracy": acc, "time_s": [0.0, 10.0, 20.0, 30.0, 40.0, 50.0],
                         "energy_cum_j": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]})
    shuffled = rows.iloc[[5, 2, 4, 0, 3, 1]]
    hit = first_reach(shuffled, 0.55, RAW)
    assert hit is not None and (int(hit["round"]), float(hit["time_s"])) == (3, 30.0)
    smooth = TargetConfig(curve="smoothed", window=2, margin=0.0)
    assert accuracy_curve(shuffled, smooth)["curve"].tolist() == pytest.approx([0.10, 0.30, 0.40, 0.50, 0.65, 0.70], abs=1e-12)
    hit = first_reach(shuffled, 0.60, smooth)
    assert hit is not None and int(hit["round"]) == 4
    assert best_on_curve(shuffled, smooth) == pytest.approx(0.70, abs=1e-12)


# -- FedAvg's precision (fl/strategy/aggregate.py) ----------------------------------------------------------------------

def test_fedavg_keeps_float32_values_that_float16_cannot_hold():
    """float16 has 10 mantissa bits: between 1 and 2 its step is 2^-10 = 0.000977, so 1.0001, 1.0003 and their mean 1.0002
    all round to 1.0 there. In float64, weights 1 and 3: (1.0001 + 3 x 1.0003) / 4 = 1.00025; a value of 3000.3 is 3000.0
    in float16 (its step there is 2)."""
    out = fedavg({"w": torch.tensor([[1.0001, 3000.3], [1.0003, 3000.7]], dtype=torch.float32)}, [1, 3])
    assert out["w"].dtype == torch.float32
    expected = torch.tensor([(np.float32(1.0001) + 3 * np.float64(np.float32(1.0003))) / 4,
                             (np.float64(np.float32(3000.3)) + 3 * np.float64(np.float32(3000.7))) / 4], dtype=torch.float32)
    assert torch.equal(out["w"], expected)
    assert out["w"][0].item() == pytest.approx(1.00025, abs=1e-6) and out["w"][1].item() == pytest.approx(3000.6, abs=1e-3)
    # float64 entries keep float64's precision: 1 + 1e-12 and 1 + 3e-12 average to 1 + 2e-12
    out64 = fedavg({"b": torch.tensor([1.0 + 1e-12, 1.0 + 3e-12], dtype=torch.float64)}, [1.0, 1.0])
    assert out64["b"].dtype == torch.float64 and out64["b"].item() == pytest.approx(1.0 + 2e-12, abs=1e-15)
    # bfloat16 entries come back in bfloat16, the mean computed before the one rounding: 1.0078125 is exact in bfloat16
    outb = fedavg({"h": torch.tensor([1.0, 1.015625], dtype=torch.bfloat16)}, [1, 1])
    assert outb["h"].dtype == torch.bfloat16 and outb["h"].item() == 1.0078125


@pytest.mark.timeout(60)  # the transfer looped for ever before the fix
def test_a_link_of_0_in_a_trace_is_no_reading_not_a_stalled_transfer():
    """A trace set written by another tool may carry the app's "no link" as 0 on WiFi (``wifi_only`` writes NaN). The
    transfer then runs at the configured WiFi bandwidth, 80 Mbit at 40 Mbit/s down and 20 up (a cap at 0 moved nothing
    and never counted as a wait: the run hung); a link of 8 Mbit/s beside it caps as before."""
    out = _network([1.0] * 4, link=[0.0] * 4).transfers(0.0, np.array([0]), np.array([100.0]))
    assert out.comm_s[0] == pytest.approx(2 * 0.0791 + 80.0 / 40.0 + 80.0 / 20.0, rel=1e-12)
    capped = _network([1.0] * 4, link=[8.0] * 4).transfers(0.0, np.array([0]), np.array([100.0]))
    assert capped.comm_s[0] == pytest.approx(2 * 0.0791 + 80.0 / 8.0 + 80.0 / 8.0, rel=1e-12)


# -- the survivors of .ci/mutation.py over the radio and the network (benchmarks/results/mutation_radio_network_2cores.json)

def test_a_model_under_one_megabit_is_transferred_by_hand():
    """A 0.1 MB model (0.8 Mbit) on WiFi both ways, 700 s of training between. Download: WiFi's promotion 0.0791 s at
    0.1244 W, 0.8 / 40 = 0.02 s at 0.5841 W (the receive bound 0.177 A x 3.3 V). Upload 700 s later, long after WiFi's
    0.2381 s tail: the whole tail (0.2381 s at 0.1193 W), a new promotion, 0.8 / 20 = 0.04 s at min(0.28317 x 20 +
    0.13286, 0.350 A x 3.7 V) = 1.295 W, and the tail again."""
    out = _network([1.0] * 4, model_size_mb=0.1).transfers(0.0, np.array([0]), np.array([700.0]))
    assert out.download_s[0] == pytest.approx(0.0791 + 0.02, rel=1e-12)
    assert out.comm_s[0] == pytest.approx(2 * 0.0791 + 0.02 + 0.04, rel=1e-12)
    by_hand = 2 * (0.1244 * 0.0791 + 0.1193 * 0.2381) + 0.177 * 3.3 * 0.02 + 0.350 * 3.7 * 0.04
    assert out.radio_energy_j[0] == pytest.approx(by_hand, rel=1e-12)


def test_each_networks_bandwidth_factors_come_from_its_own_named_stream():
    """The factors are part of a run's reproducible numbers: client i's WiFi factor is exp(sigma z_i - sigma^2 / 2) with z
    the stream (seed, "network", "wifi"), its cellular one from (seed, "network", "cellular"); sigma 0.5, seed 7."""
    st = np.ones((1, 4), dtype=np.float32)
    traces = ClientTraces(step_s=600, device_ids=np.arange(1), level_pct=np.full(st.shape, 80.0, np.float32), state=np.zeros(st.shape, np.int8),
                          extras={"network_state": st}, client_ids=np.arange(1), client_device=np.arange(1), shift_s=np.zeros(1, np.int64))
    cfg = from_mapping(NetworkConfig, {"model": "traces", "spread_sigma": 0.5})
    net = Network(cfg, traces, build_population(3, 1, {"pixel_3": 1.0}, 20.0, 0.5, seed=0), 7, 10.0)
    for state, name in ((1, "wifi"), (2, "cellular")):
        z = rng(7, "network", name).standard_normal(3)
        assert net.factor(state) == pytest.approx(np.exp(0.5 * z - 0.125), rel=1e-12), name
    assert not np.allclose(net.factor(1), net.factor(2))


def _lognormal(capacity_kbps: np.ndarray | None = None) -> Network:
    st = np.array([[0.0, 0.0]], dtype=np.float32)  # the trace says no network: not read under this model
    traces = ClientTraces(step_s=600, device_ids=np.arange(1), level_pct=np.full(st.shape, 80.0, np.float32), state=np.zeros(st.shape, np.int8),
                          extras={"network_state": st}, client_ids=np.arange(1), client_device=np.arange(1), shift_s=np.zeros(1, np.int64))
    return Network(from_mapping(NetworkConfig, {"model": "lognormal"}), traces, build_population(3, 1, {"pixel_3": 1.0}, 20.0, 0.5, seed=0), 0,
                   10.0, capacity_kbps)


def test_under_the_lognormal_model_everyone_is_reachable_as_a_bool_mask():
    """The plain ``lognormal`` model (no network columns reported) reaches every client: a bool mask, so that ``~`` of it
    is the empty set of the unreachable."""
    net = _lognormal()
    got = net.reachable(0.0, np.arange(3))
    assert got.dtype == bool and got.tolist() == [True, True, True]
    assert np.flatnonzero(~got).tolist() == []


def test_the_lognormal_models_transfers_by_hand():
    """FedScale capacities of 8,000, 4,000 and 2,000 kbit/s and a 10 MB model (80 Mbit): each way 10, 20 and 40 s, so the
    transfers take 20, 40 and 80 s, half of it the download; no radio energy, nothing abandoned (bool masks), and no network
    state reported (-1, int8)."""
    out = _lognormal(np.array([8000.0, 4000.0, 2000.0])).transfers(0.0, np.arange(3), np.full(3, 100.0))
    assert out.comm_s.tolist() == [20.0, 40.0, 80.0] and out.download_s.tolist() == [10.0, 20.0, 40.0]
    assert out.radio_energy_j.tolist() == [0.0, 0.0, 0.0]
    for mask in (out.abandoned, out.download_abandoned):
        assert mask.dtype == bool and not mask.any()
    assert out.start_state.dtype == np.int8 and out.start_state.tolist() == [-1, -1, -1]
