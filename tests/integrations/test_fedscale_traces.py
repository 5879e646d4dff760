"""FedScale's trace files from our traces and profiles, and back (no FedScale needed, except one check)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.errors import InputDataError
from flamingo_sim.fl.sim.population import build_population
from flamingo_sim.integrations.fedscale_traces import (
    availability_grid,
    client_of_key,
    device_avail,
    device_conf,
    export_fedscale_traces,
    key_of_client,
    online_grid,
    read_device_avail,
    read_device_conf,
    write_pickle,
)
from flamingo_sim.traces.store import ClientTraces, load_client_traces

ROOT = Path(__file__).resolve().parents[2]
STEP = 600


def scripted_traces() -> ClientTraces:
    # levels per 10-minute slot; min 10 %, back online at 20 %
    levels = np.array(
        [
            [50, 50, 50, 50, 50, 50],  # always online
            [50, 9, 15, 25, 50, 50],  # offline at slot 1, back at slot 3 (>= 20 %), not at 15 %
            [5, 5, 5, 5, 5, 5],  # never online
            [5, 30, 30, 5, 30, 30],  # online slots 1-2 and 4-5
        ],
        dtype=np.float32,
    )
    return ClientTraces(
        step_s=STEP,
        device_ids=np.arange(4),
        level_pct=levels,
        state=np.zeros_like(levels, dtype=np.int8),
        extras={},
        client_ids=np.arange(5),
        client_device=np.array([0, 1, 2, 3, 1]),
        shift_s=np.array([0, 0, 0, 0, 2 * STEP]),  # client 4 replays device 1 two slots ahead
    )


def test_keys_follow_fedscales_lookup():
    n = 5
    # FedScale's client c (ours c - 1) reads key c mod n
    for ours in range(n):
        assert key_of_client(ours, n) == (ours + 1) % n
        assert client_of_key(key_of_client(ours, n), n) == ours
    assert client_of_key(0, n) == n - 1
    assert np.array_equal(client_of_key(key_of_client(np.arange(n), n), n), np.arange(n))


def test_online_grid_by_hand():
    grid, length = online_grid(scripted_traces(), min_pct=10, reentry_pct=20)
    assert length.tolist() == [6, 6, 6, 6, 6]
    assert grid.astype(int).tolist() == [
        [1, 1, 1, 1, 1, 1],
        [1, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 0],
        [0, 1, 1, 0, 1, 1],
        [1, 1, 1, 1, 1, 0],  # device 1 from slot 2: 15 (>= 10 at the start: online), ..., 9
    ]


def test_device_avail_windows_by_hand(tmp_path):
    avail = device_avail(scripted_traces(), min_pct=10, reentry_pct=20)
    assert list(avail) == [0, 1, 2, 3, 4]  # insertion order is what FedScale indexes
    by_client = {int(client_of_key(k, 5)): v for k, v in avail.items()}
    assert by_client[0] == {"active": [0.0], "inactive": [3600.0], "finish_time": 3600.0}
    assert by_client[1]["active"] == [0.0, 1800.0] and by_client[1]["inactive"] == [600.0, 3600.0]
    assert by_client[2] == {"active": [3600.0], "inactive": [3600.0], "finish_time": 3600.0}  # never online
    assert by_client[3]["active"] == [600.0, 2400.0] and by_client[3]["inactive"] == [1800.0, 3600.0]
    path = write_pickle(tmp_path / "avail.pkl", avail)
    with open(path, "rb") as fh:
        assert pickle.load(fh) == avail  # a plain pickle, as FedScale reads it


@pytest.mark.slow
def test_device_avail_round_trips_on_the_shipped_traces(tmp_path):
    traces = load_client_traces(ROOT / "traces/synthetic")
    grid, length = online_grid(traces, 10, 20)
    assert grid.any() and not grid.all()
    path = write_pickle(tmp_path / "avail.pkl", device_avail(traces, 10, 20))
    back = availability_grid(read_device_avail(path), traces.step_s)
    assert back.shape == grid.shape
    assert np.array_equal(back, grid)


def test_device_conf_prices_tasks_like_our_profiles(tmp_path):
    profiles = ProfileSet.load(ROOT / "profiles", ["pixel_3", "mi_10"], "mobilenet_v2")
    pop = build_population(7, 7, {"pixel_3": 0.5, "mi_10": 0.5}, 20.0, 0.5, seed=3)
    conf = device_conf(pop, profiles)
    assert sorted(conf) == list(range(7))
    got = read_device_conf(write_pickle(tmp_path / "conf.pkl", conf))
    steps, batch, model_mb = 20, 16, 14.0
    for i in range(7):
        prof = profiles.profiles[pop.phone_idx[i]]
        # FedScale's ClientMetadata.get_completion_time, by hand
        compute_s = 3.0 * batch * steps * got["ms_per_sample"][i] / 1000.0
        comm_s = 2 * model_mb * 8 * 1000 / got["kbps"][i]
        assert compute_s == pytest.approx(steps * prof.baseline.step_latency_s)
        assert comm_s == pytest.approx(pop.comm_s(model_mb, np.array([i]))[0])
    best = read_device_conf(write_pickle(tmp_path / "best.pkl", device_conf(pop, profiles, "best")))
    assert np.all(best["ms_per_sample"] <= got["ms_per_sample"])


@pytest.mark.slow
def test_export_from_an_experiment(tmp_path):
    conf, avail = export_fedscale_traces(
        ROOT / "experiments/openimage_mobilenet.yaml", tmp_path, overrides=["data.proxy.n_clients=300"]
    )
    assert len(read_device_conf(conf)["kbps"]) == 300
    assert len(read_device_avail(avail)) == load_client_traces(ROOT / "traces/synthetic").n_clients


def test_bad_files_are_one_line_errors(tmp_path):
    with pytest.raises(InputDataError, match="not found"):
        read_device_conf(tmp_path / "missing.pkl")
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(InputDataError, match="cannot read device_avail_file"):
        read_device_avail(tmp_path / "junk.pkl")
    write_pickle(tmp_path / "list.pkl", {0: {"active": [1.0], "finish_time": 5.0}})
    with pytest.raises(InputDataError, match="entry 0"):
        read_device_avail(tmp_path / "list.pkl")
    write_pickle(tmp_path / "conf.pkl", {0: {"computation": 1.0}})
    with pytest.raises(InputDataError, match="device_conf_file"):
        read_device_conf(tmp_path / "conf.pkl")


def test_fedscales_own_availability_check_agrees_when_walked_in_order():
    fedscale = pytest.importorskip("flamingo_sim.integrations.fedscale")
    if not fedscale.fedscale_available():
        pytest.skip("FedScale's extra is not installed: pip install 'flamingo-sim[fedscale]'")
    fedscale.load_fedscale()
    from fedscale.cloud.internal.client_metadata import ClientMetadata

    traces = scripted_traces()
    grid, _ = online_grid(traces, 10, 20)
    avail = device_avail(traces, 10, 20)
    keys = list(avail)
    for ours in range(traces.n_clients):
        fedscale_id = ours + 1
        meta = ClientMetadata(0, fedscale_id, {"computation": 1.0, "communication": 1.0}, avail[keys[fedscale_id % len(keys)]])
        # FedScale's check moves a cursor one window per call and is inclusive at window ends:
        # probe mid-slot, in order, as its round loop does
        seen = [meta.is_active(j * STEP + STEP / 2) for j in range(grid.shape[1])]
        assert seen == grid[ours].tolist(), ours
