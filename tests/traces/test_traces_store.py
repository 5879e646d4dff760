"""ClientTraces lookups (shift arithmetic, cyclic replay, padding) and the on-disk round trip."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.shipped import SHIPPED_DIR, make_shipped
from flamingo_sim.traces.store import ClientTraces, DeviceSeries, load_client_traces, write_trace_set


def _two_devices(tmp_path):
    # device 7: 6 steps 10,20,...,60 starting 2019-01-01 00:00; device 3: 4 steps 1..4 starting 01:00
    a = DeviceSeries(7, 1546300800, np.arange(10, 70, 10, dtype=np.float32), np.array([1, 1, 1, 1, 1, 1], np.int8),
                     {"temperature_c": np.arange(6, dtype=np.float32)})
    b = DeviceSeries(3, 1546304400, np.array([4, 3, 2, 1], np.float32), np.array([-1, -1, -1, -1], np.int8),
                     {"temperature_c": np.full(4, 30.0, np.float32)})
    write_trace_set(tmp_path / "ts", [a, b], n_shifts=2, report={"n_clients": 4})
    return load_client_traces(tmp_path / "ts")


def test_round_trip_orders_devices_and_clients(tmp_path):
    ct = _two_devices(tmp_path)
    assert ct.step_s == 600
    assert ct.device_ids.tolist() == [3, 7]
    assert ct.device_length.tolist() == [4, 6]
    assert ct.device_start_s.tolist() == [1546304400, 1546300800]
    # clients: i * n_shifts + k views device i (sorted by id) shifted by k hours
    assert ct.client_ids.tolist() == [0, 1, 2, 3]
    assert ct.client_device.tolist() == [0, 0, 1, 1]
    assert ct.shift_s.tolist() == [0, 3600, 0, 3600]
    assert ct.level_pct.dtype == np.float32 and ct.state.dtype == np.int8
    assert ct.n_clients == 4 and ct.n_devices == 2 and ct.n_steps == 6


def test_short_device_is_padded_cyclically(tmp_path):
    ct = _two_devices(tmp_path)
    assert ct.level_pct[0].tolist() == [4, 3, 2, 1, 4, 3]
    assert ct.state[0].tolist() == [-1, -1, -1, -1, -1, -1]
    assert ct.extras["temperature_c"][1].tolist() == [0, 1, 2, 3, 4, 5]


def test_index_at_shift_and_wrap(tmp_path):
    ct = _two_devices(tmp_path)
    # t = 1199 s: step 1; a 1-hour shift adds 6 steps; modulo each device's own length.
    # client0: 1 % 4 = 1; client1: 7 % 4 = 3; client2: 1 % 6 = 1; client3: 7 % 6 = 1
    assert ct.index_at(1199.0).tolist() == [1, 3, 1, 1]
    assert ct.level_at(1199.0).tolist() == [3.0, 1.0, 20.0, 20.0]
    assert ct.state_at(0.0).tolist() == [-1, -1, 1, 1]
    assert ct.extra_at("temperature_c", 1200.0).tolist() == [30.0, 30.0, 2.0, 2.0]
    assert ct.extra_at("voltage_v", 0.0) is None
    # a shift of k hours at t is the unshifted client at t + k h
    for t in (0.0, 600.0, 5000.0, 123456.0):
        assert ct.level_at(t)[1] == ct.level_at(t + 3600)[0]


def test_horizon_is_shortest_span_minus_largest_shift(tmp_path):
    ct = _two_devices(tmp_path)
    assert ct.horizon_s == 4 * 600 - 3600


def test_levels_at_gives_each_client_at_its_own_time(tmp_path):
    ct = _two_devices(tmp_path)
    clients = np.array([0, 1, 2, 3, 3, 1])
    times = np.array([0.0, 600.0, 1200.0, 5000.0, 123456.0, 7199.9])
    got = ct.levels_at(clients, times)
    assert got.dtype == np.float64
    assert got.tolist() == [float(ct.level_at(t)[c]) for c, t in zip(clients, times)]


def test_levels_on_ticks_are_level_at_each_tick_whatever_the_padding(tmp_path):
    """A round's ticks read as one run per client: the values level_at gives at each tick, for runs that fit in a device's
    samples, wrap past its last one, or are longer than the grid; a grid padded with values that are no sample (a
    ClientTraces built by hand) is never read past a device's length."""
    loaded = _two_devices(tmp_path)
    level = np.array([[4, 3, 2, 1, -50, -60], [10, 20, 30, 40, 50, 60]], dtype=np.float32)  # device 0: 4 samples, then no sample
    by_hand = ClientTraces(600, np.array([3, 7]), level, np.zeros((2, 6), np.int8), {}, np.arange(5), np.array([0, 0, 1, 1, 0]),
                           np.array([0, 3600, 0, 3600, -600]), device_length=np.array([4, 6]))
    for ct, clients in ((loaded, np.array([0, 1, 2, 3, 3, 1])), (by_hand, np.array([4, 0, 1, 2, 3]))):
        for first in (0, 1, 3, 5, 11):
            for n in (0, 1, 2, 4, 6, 9):
                got = ct.levels_on_ticks(clients, first, n)
                assert got.dtype == np.float64 and got.shape == (n, len(clients))
                want = [ct.level_at(float((first + k) * 600))[clients].astype(np.float64) for k in range(n)]
                assert np.array_equal(got, np.array(want).reshape(n, len(clients))), (first, n)
    assert (by_hand.levels_on_ticks(np.array([0]), 2, 3) > 0).all()  # 2, 1, then 4 again: the padding never read


def test_extra_of_gives_each_client_at_its_own_time_in_any_shape(tmp_path):
    ct = _two_devices(tmp_path)
    clients = np.array([[0], [3], [1]])
    times = np.array([[0.0, 600.0, 4200.0, 123456.0]])  # broadcast: 3 clients x 4 times
    got = ct.extra_of("temperature_c", clients, times)
    assert got.shape == (3, 4)
    assert got.tolist() == [[float(ct.extra_at("temperature_c", t)[c]) for t in times[0]] for c in clients[:, 0]]
    assert got[0].tolist() == [30.0] * 4  # client 0 replays device 3: 30 degC throughout
    # client 3 replays device 7 (0, 1, ..., 5) an hour on: steps (t + 3600) // 600 = 6, 7, 13, 211, cyclically % 6
    assert got[1].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert ct.extra_of("screen_on_frac", clients, times) is None


def test_constructor_rejects_mismatched_shapes():
    lv = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="state must have the shape"):
        ClientTraces(600, np.array([1, 2]), lv, np.zeros((2, 2), np.int8), {}, np.array([0]), np.array([0]), np.array([0]))


def test_loader_errors_are_one_line(tmp_path):
    with pytest.raises(InputDataError, match=r"devices.parquet: not found; expected a prep-traces output directory"):
        load_client_traces(tmp_path)


def test_shipped_trace_set_loads_with_2400_clients():
    ct = load_client_traces(SHIPPED_DIR)
    assert ct.n_clients == 2400 and ct.n_devices == 100
    assert set(np.unique(ct.shift_s // 3600)) == set(range(24))
    assert ct.device_length.min() * 600 >= 28 * 86400
    assert set(ct.extras) == {"screen_on_frac", "temperature_c", "voltage_v", "charging", "network_state", "mobile_generation", "wifi_enabled",
                              "wifi_signal_dbm", "wifi_link_mbps"}
    state = ct.extras["network_state"]
    assert set(np.unique(state[~np.isnan(state)])) == {0.0, 1.0, 2.0} and 0.4 < np.mean(state == 1) < 0.6
    assert ct.horizon_s >= 28 * 86400 - 23 * 3600
    level = ct.level_at(3 * 86400.0)
    assert level.shape == (2400,) and level.dtype == np.float32
    assert np.all((ct.level_pct >= 0) & (ct.level_pct <= 100))
    assert set(np.unique(ct.state)) == {-1, 0, 1}
    size = sum(p.stat().st_size for p in SHIPPED_DIR.iterdir())
    assert size <= 8 * 1024 * 1024


@pytest.mark.slow
def test_shipped_trace_set_regenerates_bit_identically(tmp_path):
    """The same tables, schema and metadata always; the same bytes where this pyarrow is the one
    that wrote the shipped files (a parquet file names its writer, and another release may encode
    the same table differently: the tracking extra's mlflow, for one, holds pyarrow below 26)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    make_shipped(tmp_path / "again")
    assert (tmp_path / "again" / "report.json").read_bytes() == (SHIPPED_DIR / "report.json").read_bytes()
    for name in ("devices.parquet", "clients.parquet"):
        again, shipped = pq.read_table(tmp_path / "again" / name), pq.read_table(SHIPPED_DIR / name)
        # the same schema and metadata, and the same values (NaN where the network is unknown equals NaN: Arrow's
        # Table.equals holds no NaN equal to itself, pandas' DataFrame.equals does)
        assert again.schema.equals(shipped.schema, check_metadata=True), name
        assert again.to_pandas().equals(shipped.to_pandas()), name
        writer = pq.ParquetFile(SHIPPED_DIR / name).metadata.created_by
        if writer == f"parquet-cpp-arrow version {pa.__version__}":
            assert (tmp_path / "again" / name).read_bytes() == (SHIPPED_DIR / name).read_bytes(), name


def _write_raw(tmp_path, device_id, timestamps, levels, states):
    """A trace set as another tool might write it (no checks on the way out)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "other"
    out.mkdir(exist_ok=True)
    pq.write_table(pa.table({
        "device_id": pa.array(np.asarray(device_id, np.int64)),
        "timestamp": pa.array(np.asarray(timestamps, np.int64)).cast(pa.timestamp("s", tz="UTC")),
        "battery_level_pct": pa.array(np.asarray(levels, np.float32)),
        "battery_state": pa.array(np.asarray(states, np.int8)),
    }), out / "devices.parquet")
    ids = sorted(set(int(d) for d in device_id))
    pq.write_table(pa.table({"client_id": pa.array(np.arange(len(ids), dtype=np.int64)), "device_id": pa.array(np.array(ids, np.int64)),
                             "shift_h": pa.array(np.zeros(len(ids), np.int16))}), out / "clients.parquet")
    return out


T0 = 1546300800


@pytest.mark.parametrize("devices, ts, levels, states, message", [
    ([1, 1, 1], [T0, T0 + 600, T0 + 1200], [50, np.nan, 40], [0, 0, 0], r"device 1, row 2: battery_level_pct nan is not a level within \[0, 100\]"),
    ([1, 1, 1], [T0, T0 + 600, T0 + 1200], [50, np.inf, 40], [0, 0, 0], r"device 1, row 2: battery_level_pct inf is not a level"),
    ([1, 1, 2, 2], [T0, T0 + 600, T0, T0 + 600], [50, 40, 30, 101], [0, 0, 0, 0], r"device 2, row 4: battery_level_pct 101.0 is not a level"),
    ([1, 1, 1], [T0, T0 + 600, T0 + 1200], [50, 45, 40], [0, 2, 0], r"device 1, row 2: battery_state 2.0 is not -1, 0 or \+1"),
    ([1, 1, 1], [T0, T0 + 1200, T0 + 600], [50, 45, 40], [0, 0, 0], r"device 1, row 3: rows are not sorted by \(device_id, timestamp\)"),
    ([1, 1, 2], [T0, T0 + 600, T0], [50, 45, 40], [0, 0, 0], r"device 2 has a single sample; a client needs at least two"),
])
def test_trace_sets_of_other_tools_are_validated_on_load(tmp_path, devices, ts, levels, states, message):
    out = _write_raw(tmp_path, devices, ts, levels, states)
    with pytest.raises(InputDataError, match=r"^" + str(out / "devices.parquet").replace(".", r"\.") + ": " + message):
        load_client_traces(out)


def test_a_valid_trace_set_of_another_tool_loads(tmp_path):
    ct = load_client_traces(_write_raw(tmp_path, [1, 1, 2, 2], [T0, T0 + 600, T0, T0 + 600], [50, 40, 30, 100], [0, -1, 1, 0]))
    assert ct.device_length.tolist() == [2, 2] and ct.horizon_s == 1200


def test_the_traces_page_quotes_the_shipped_sets_network_shares():
    """docs/traces.md's shares of WiFi, cellular and no network are the shipped report.json's."""
    import json
    from pathlib import Path

    shares = json.loads((SHIPPED_DIR / "report.json").read_text())["network"]["slot_shares"]
    page = (Path(__file__).resolve().parents[2] / "docs" / "traces.md").read_text()
    quoted = (f"{100 * shares['wifi']:.1f} % of\nits grid points are WiFi, {100 * shares['cellular']:.1f} % cellular and "
              f"{100 * shares['none']:.1f} % without network")
    assert quoted in page and shares["unknown"] == 0.0
