"""The network columns: cleaned as the app wrote them, held on the grid within a bound, kept by prep-traces in every layout."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trace_helpers import DAY, T0

from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.network import CELLULAR, NONE, WIFI, clean_network, hold_bounded
from flamingo_sim.traces.pipeline import PrepOptions, prep_traces
from flamingo_sim.traces.store import load_client_traces


def test_clean_network_reads_the_apps_values_in_any_case():
    table = pa.table({
        "network_type": ["WIFI", "wifi", "MOBILE", "mobile_hipri", "unknown", "VPN", None, None, None, "Ethernet", "satellite"],
        "network_status": ["WIFI", "WIFI", "lte", "LTE", "disconnected", "connected", "wifi", "hspap", "connecting", "lte", "x"],
        "mobile_network_type": ["lte", "LTE", "hspap", "utms", "20", "unknown", "edge", None, "13", "nr", "lte"],
        "wifi_status": ["enabled", "ENABLED", "disabled", "enabling", "unknown", None, "enabled", "disabled", "x", "enabled", "enabled"],
        "wifi_signal_strength": [-55, -127, -127, 0, -60, None, -1, -126, -200, -40, -50],
        "wifi_link_speed": [433.0, -1.0, -1.0, 72.0, 0.0, None, 866.0, -1.0, 1.0, 1000.0, 5.0],
    })
    unread: Counter = Counter()
    out = clean_network(table, np.ones(table.num_rows, bool), unread)
    nan = np.nan
    np.testing.assert_array_equal(out["network_state"], [WIFI, WIFI, CELLULAR, CELLULAR, NONE, nan, WIFI, CELLULAR, NONE, WIFI, nan])
    np.testing.assert_array_equal(out["mobile_generation"], [4, 4, 3, 3, 5, nan, 2, nan, 4, 5, 4])
    np.testing.assert_array_equal(out["wifi_enabled"], [1, 1, 0, nan, nan, nan, 1, 0, nan, 1, 1])
    np.testing.assert_array_equal(out["wifi_signal_dbm"], [-55, nan, nan, nan, -60, nan, -1, -126, nan, -40, -50])
    np.testing.assert_array_equal(out["wifi_link_mbps"], [433, 0, 0, 72, 0, nan, 866, 0, 1, 1000, 5])  # -1: no link, a reading
    # "satellite" and the status "x" are no value the app writes: counted, the row's state unknown
    assert unread == Counter({"network_type=satellite": 1, "wifi_status=x": 1})


def test_clean_network_reads_text_numbers_and_keeps_only_the_kept_rows():
    table = pa.table({"network_type": ["WIFI", "MOBILE", "unknown"], "wifi_link_speed": [" 72", "-1", "NULL"]})
    out = clean_network(table, np.array([True, False, True]))
    np.testing.assert_array_equal(out["network_state"], [WIFI, NONE])
    np.testing.assert_array_equal(out["wifi_link_mbps"], [72.0, np.nan])
    assert set(out) == {"network_state", "wifi_link_mbps"}  # only what the table can give


def test_hold_bounded_by_hand():
    ts = np.array([100, 700, 5000])
    val = np.array([1.0, 2.0, 0.0])
    grid = np.array([0, 100, 600, 700, 1300, 1900, 4999, 5000, 5600, 6201])
    # bound 1200 s: 700 holds until 1900; 5000 holds until 6200
    np.testing.assert_array_equal(hold_bounded(ts, val, grid, 1200.0), [np.nan, 1, 1, 2, 2, 2, np.nan, 0, 0, np.nan])
    assert np.isnan(hold_bounded(np.array([], np.int64), np.array([]), grid, 10.0)).all()


def _ts(s: int) -> str:
    return dt.datetime.fromtimestamp(int(s), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _network_rows(days: float = 29, every_s: int = 720, silent: tuple[float, float] = (10.0, 8.0)) -> dict[str, list]:
    """One device sampled every ``every_s``: WiFi at night (0-8 h), cellular by day (8-18 h), no network 18-20 h, WiFi after;
    case varies; the network columns NULL for ``silent`` = (day, hours) (the battery samples go on)."""
    n = int(days * DAY / every_s) + 1
    ts = T0 + np.arange(n) * every_s
    rows: dict[str, list] = {k: [] for k in ("device_id", "timestamp", "battery_level", "network_status", "network_type",
                                             "mobile_network_type", "wifi_status", "wifi_signal_strength", "wifi_link_speed")}
    for i, t in enumerate(ts):
        h = (t - T0) % DAY / 3600
        quiet = silent[0] * DAY <= t - T0 < silent[0] * DAY + silent[1] * 3600
        if quiet:
            kind = status = mobile = wifi = rssi = link = None
        elif h < 8 or h >= 20:
            kind, status, mobile, wifi, rssi, link = ("WIFI" if i % 3 else "wifi"), "WIFI", "lte", "enabled", -52, 433
        elif h < 18:
            kind, status, mobile, wifi, rssi, link = ("MOBILE" if i % 2 else "mobile"), ("lte" if i % 2 else "LTE"), "lte", "enabled", -127, -1
        else:
            kind, status, mobile, wifi, rssi, link = "unknown", "disconnected", "lte", "enabled", -127, -1
        rows["device_id"].append(5)
        rows["timestamp"].append(int(t))
        rows["battery_level"].append(float(100 - i % 80))
        for k, v in zip(("network_status", "network_type", "mobile_network_type", "wifi_status", "wifi_signal_strength", "wifi_link_speed"),
                        (status, kind, mobile, wifi, rssi, link)):
            rows[k].append(v)
    return rows


def _expected(rows: dict[str, list], grid: np.ndarray, hold_s: float) -> np.ndarray:
    """The network state on the grid, by hand: the last known reading at or before each point, if at most ``hold_s`` old."""
    code = {"wifi": 1.0, "mobile": 2.0, "unknown": 0.0}
    out = []
    for g in grid:
        last = None
        for t, kind in zip(rows["timestamp"], rows["network_type"]):
            if t > g:
                break
            if kind is not None:
                last = (t, code[kind.lower()])
        out.append(last[1] if last is not None and g - last[0] <= hold_s else np.nan)
    return np.array(out)


@pytest.fixture(scope="module")
def hand_rows():
    return _network_rows()


def _check(out_dir, rows, hold_h=6.0):
    df = pq.read_table(out_dir / "devices.parquet").to_pandas()
    grid = pq.read_table(out_dir / "devices.parquet", columns=["timestamp"]).column(0).cast(pa.int64()).to_numpy() // 1000
    want = _expected(rows, grid, hold_h * 3600)
    np.testing.assert_array_equal(df["network_state"].to_numpy(np.float64), want)
    on_wifi = want == 1
    np.testing.assert_array_equal(df["wifi_link_mbps"].to_numpy()[on_wifi], 433.0)
    assert np.isnan(df["wifi_link_mbps"].to_numpy()[want == 2]).all()
    assert set(np.unique(df["mobile_generation"].dropna())) == {4.0}
    # the silent stretch: six hours held, then unknown until the next reading
    assert np.isnan(want).sum() > 0
    return df


def test_kaggle_parquet_keeps_the_network(tmp_path, hand_rows):
    rows = dict(hand_rows)
    table = pa.table({**{k: v for k, v in rows.items() if k != "timestamp"},
                      "timestamp": pa.array(rows["timestamp"], type=pa.int64()).cast(pa.timestamp("s")).cast(pa.timestamp("us"))})
    pq.write_table(table, tmp_path / "samples.parquet")
    rep = prep_traces(tmp_path / "samples.parquet", tmp_path / "out", PrepOptions(n_devices=1, n_shifts=1, max_date="2026-01-01"))
    _check(tmp_path / "out", rows)
    assert rep["network"]["columns"] == ["network_state", "mobile_generation", "wifi_enabled", "wifi_signal_dbm", "wifi_link_mbps"]
    shares = rep["network"]["slot_shares"]
    assert shares["unknown"] > 0 and abs(sum(shares.values()) - 1) < 1e-9


def test_aug2020_csv_page_keeps_the_network(tmp_path, hand_rows):
    rows = hand_rows
    names = list(rows)
    lines = [";".join(names)]
    for i in range(len(rows["timestamp"])):
        cells = [_ts(rows[c][i]) if c == "timestamp" else ("NULL" if rows[c][i] is None else str(rows[c][i])) for c in names]
        lines.append(";".join(cells))
    d = tmp_path / "aug"
    d.mkdir()
    (d / "samples.query.1.csv").write_text("\n".join(lines) + "\n")
    prep_traces(d, tmp_path / "out", PrepOptions(n_devices=1, n_shifts=1, max_date="2026-01-01", server_clock="utc"))
    _check(tmp_path / "out", rows)


def test_the_hold_bound_is_an_option(tmp_path, hand_rows):
    table = pa.table({**{k: v for k, v in hand_rows.items() if k != "timestamp"},
                      "timestamp": pa.array(hand_rows["timestamp"], type=pa.int64()).cast(pa.timestamp("s"))})
    pq.write_table(table, tmp_path / "s.parquet")
    rep = prep_traces(tmp_path / "s.parquet", tmp_path / "out", PrepOptions(n_devices=1, n_shifts=1, max_date="2026-01-01", network_hold_h=1.0))
    assert rep["parameters"]["network_hold_h"] == 1.0
    _check(tmp_path / "out", hand_rows, hold_h=1.0)


def test_a_trace_set_without_network_columns_loads_with_the_network_unknown(tmp_path):
    rows = _network_rows(days=2)
    table = pa.table({"device_id": rows["device_id"], "battery_level": rows["battery_level"],
                      "timestamp": pa.array(rows["timestamp"], type=pa.int64()).cast(pa.timestamp("s"))})
    pq.write_table(table, tmp_path / "s.parquet")
    rep = prep_traces(tmp_path / "s.parquet", tmp_path / "out",
                      PrepOptions(n_devices=1, n_shifts=1, max_date="2026-01-01", criteria=_relaxed()))
    assert rep["network"] == {"columns": [], "detail_files": [], "slot_shares": None, "unread_values": {}}
    traces = load_client_traces(tmp_path / "out")
    assert traces.extra_at("network_state", 0.0) is None


def _relaxed():
    from flamingo_sim.traces.select import Criteria

    return Criteria(min_days=1.0)


def test_a_network_state_no_tool_writes_is_refused_on_load(tmp_path):
    rows = _network_rows(days=2)
    table = pa.table({**{k: v for k, v in rows.items() if k != "timestamp"},
                      "timestamp": pa.array(rows["timestamp"], type=pa.int64()).cast(pa.timestamp("s"))})
    pq.write_table(table, tmp_path / "s.parquet")
    prep_traces(tmp_path / "s.parquet", tmp_path / "out", PrepOptions(n_devices=1, n_shifts=1, max_date="2026-01-01", criteria=_relaxed()))
    dev = pq.read_table(tmp_path / "out" / "devices.parquet")
    state = dev.column("network_state").to_numpy(zero_copy_only=False).copy()
    state[3] = 7.0
    dev = dev.set_column(dev.column_names.index("network_state"), "network_state", pa.array(state, type=pa.float32()))
    pq.write_table(dev, tmp_path / "out" / "devices.parquet")
    with pytest.raises(InputDataError) as exc:
        load_client_traces(tmp_path / "out")
    assert str(exc.value) == (f"{tmp_path / 'out' / 'devices.parquet'}: device 5, row 4: network_state 7.0 is not 0 (none), 1 (WiFi), "
                              "2 (cellular) or NaN (unknown)")
