"""Hand-written files in each real GreenHub layout, quirks included (docs/traces.md, "GreenHub layouts").

The 2018 dumps: ``SELECT ... INTO OUTFILE ... FIELDS TERMINATED BY ',' ENCLOSED BY '"'`` wrote
every value in double quotes and NULL as a bare ``\\N``; the header line, written separately, is
the bare column names. ``battery_details.csv`` and ``devices.csv`` of that time are the same.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trace_helpers import regular_device

from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.pipeline import PrepOptions, prep_traces
from flamingo_sim.traces.readers import Source, _csv_header

OPTS = PrepOptions(n_devices=2, n_shifts=2, max_date="2026-01-01")


def _ts(s: int) -> str:
    return dt.datetime.fromtimestamp(int(s), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _line(values: list[object], quoted: bool, sep: str, null: str) -> str:
    out = []
    for v in values:
        if v is None:
            out.append(null)
        else:
            out.append(f'"{v}"' if quoted else str(v))
    return sep.join(out)


def _network(sid: int, ts: int) -> tuple[object, ...]:
    """(network_status, network_type, mobile_network_type, wifi_status, wifi_signal_strength, wifi_link_speed) of a sample:
    WiFi from 20:00 to 08:00 UTC, cellular by day, no network 18:00-20:00; every 11th network_details row NULL."""
    h = ts % 86400 // 3600
    if h >= 20 or h < 8:
        row: tuple[object, ...] = ("WIFI", "WIFI" if sid % 2 else "wifi", "lte", "enabled", -48, 144)
    elif h < 18:
        row = ("lte" if sid % 2 else "LTE", "MOBILE", "lte", "enabled", -127, -1)
    else:
        row = ("disconnected", "unknown", "lte", "enabled", -127, -1)
    return row if sid % 11 else (row[0], None, None, None, None, None)


def _write_dump(d: Path, *, quoted: bool, sep: str, null: str) -> tuple[int, int]:
    """samples.csv + battery_details.csv + network_details.csv + devices.csv of two 29-day devices; (rows, null levels)."""
    d.mkdir()
    devs = [regular_device(7, 29, 120), regular_device(9, 29, 120)]
    samples = ["id,device_id,timestamp,battery_state,battery_level,timezone,network_status".replace(",", sep)]
    details = ["id,sample_id,charger,health,voltage,temperature".replace(",", sep)]
    network = ["id,sample_id,network_type,mobile_network_type,wifi_status,wifi_signal_strength,wifi_link_speed".replace(",", sep)]
    sid, n_null = 0, 0
    for dev in devs:
        for ts, lvl in zip(dev["ts"], dev["level"]):
            sid += 1
            level = None if sid % 500 == 0 else f"{lvl / 100:.2f}"  # older dumps: a 0-1 fraction, 2 decimals
            n_null += level is None
            net = _network(sid, int(ts))
            samples.append(_line([sid, int(dev["device_id"][0]), _ts(ts), "Discharging", level, "Europe/Lisbon", net[0]], quoted, sep, null))
            details.append(_line([sid, sid, "unplugged", "Good", None if sid % 7 == 0 else 3.85, 31.5], quoted, sep, null))
            network.append(_line([sid, sid, *net[1:]], quoted, sep, null))
    devices = ["id,model,manufacturer,brand,os_version,is_root,created_at".replace(",", sep),
               _line([7, "SM-G970F", "samsung", "samsung", "9", 0, "2018-03-01 10:00:00"], quoted, sep, null),
               _line([8, "Pixel 3", "Google", "google", "9", 0, None], quoted, sep, null),
               _line([9, "Redmi Note 7", "Xiaomi", "xiaomi", None, 0, "2018-03-02 11:00:00"], quoted, sep, null)]
    (d / "samples.csv").write_text("\n".join(samples) + "\n")
    (d / "battery_details.csv").write_text("\n".join(details) + "\n")
    (d / "network_details.csv").write_text("\n".join(network) + "\n")
    (d / "devices.csv").write_text("\n".join(devices) + "\n")
    return sid, n_null


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    n_2018 = _write_dump(root / "d2018", quoted=True, sep=",", null="\\N")
    n_weekly = _write_dump(root / "weekly", quoted=False, sep=";", null="NULL")
    return root, n_2018, n_weekly


def test_2018_header_is_bare_and_values_are_quoted(dumps):
    root = dumps[0]
    first = (root / "d2018" / "samples.csv").read_text().splitlines()[:2]
    assert first[0] == "id,device_id,timestamp,battery_state,battery_level,timezone,network_status"
    assert first[1].startswith('"1","7","2019-01-01 00:00:00","Discharging","1.00"')
    assert (root / "d2018" / "network_details.csv").read_text().splitlines()[11] == '"11","11",\\N,\\N,\\N,\\N,\\N'
    assert (root / "d2018" / "battery_details.csv").read_text().splitlines()[7] == '"7","7","unplugged","Good",\\N,"31.5"'
    assert _csv_header(root / "d2018" / "samples.csv") == (["id", "device_id", "timestamp", "battery_state", "battery_level", "timezone",
                                                            "network_status"], ",", True)
    assert _csv_header(root / "weekly" / "samples.csv")[1:] == (";", False)


@pytest.mark.parametrize("name", ["d2018", "weekly"])
def test_per_table_dump_reads_every_row(dumps, tmp_path, name):
    root, (n_rows, n_null), _ = dumps
    rep = prep_traces(root / name, tmp_path / "out", OPTS)
    assert rep["rows"]["read"] == n_rows
    assert rep["drops"]["null_battery_level"] == n_null
    assert rep["rows"]["valid"] == n_rows - n_null
    assert rep["drops"]["malformed_device_id"] == 0
    assert rep["input"]["level_scale"] == "fraction"
    assert rep["selected_device_ids"] == [7, 9]
    assert rep["device_models"] == {
        "7": {"model": "SM-G970F", "manufacturer": "samsung", "brand": "samsung"},
        "9": {"model": "Redmi Note 7", "manufacturer": "Xiaomi", "brand": "xiaomi"},
    }
    df = pq.read_table(tmp_path / "out" / "devices.parquet").to_pandas()
    assert set(df.groupby("device_id")["model"].first().astype(str).items()) == {(7, "SM-G970F"), (9, "Redmi Note 7")}
    # battery_details joined by sample_id: voltage 3.85 V except the NULL rows, temperature 31.5 degC
    assert np.nanmax(np.abs(df["voltage_v"] - 3.85)) < 1e-5 and df["voltage_v"].notna().mean() > 0.8
    assert np.allclose(df["temperature_c"], 31.5)
    assert json.loads((tmp_path / "out" / "report.json").read_text())["input"]["device_files"] == ["devices.csv"]
    # network_details joined by sample_id (network_status of the samples where its row is NULL): the state held on the
    # grid from the last sample, 12 minutes apart, so each grid point reads the sample at or before it
    assert rep["network"]["detail_files"] == ["network_details.csv"]
    grid_h = (pq.read_table(tmp_path / "out" / "devices.parquet", columns=["timestamp"]).column(0).cast(pa.int64()).to_numpy() // 1000
              % 86400 / 3600)
    state = df["network_state"].to_numpy(np.float64)
    well_inside = lambda a, b: (grid_h >= a + 0.25) & (grid_h < b)  # noqa: E731  (a sample lies within 12 minutes after a)
    assert (state[well_inside(20, 24) | well_inside(0, 8)] == 1).all()
    assert (state[well_inside(8, 18)] == 2).all()
    assert (state[well_inside(18, 20)] == 0).all()
    assert np.isnan(state).sum() == 0
    link = df["wifi_link_mbps"].to_numpy()
    # on WiFi the link is 144 Mbit/s, except where the last reading before was the NULL row after a "no link" (-1) one
    assert set(np.unique(link[state == 1][~np.isnan(link[state == 1])])) == {144.0} and np.isnan(link[state == 1]).mean() < 0.02
    assert np.isnan(link[state != 1]).all()
    assert (df["mobile_generation"] == 4).all()


def _one_error(call) -> str:
    with pytest.raises(InputDataError) as exc:
        call()
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_values_still_quoted_is_named(tmp_path):
    """Single-quoted values survive the CSV reader: every row is dropped for one reason, said with what was seen."""
    d = tmp_path / "sq"
    d.mkdir()
    dev = regular_device(3, 2, 100)
    rows = ["device_id,timestamp,battery_level"] + [f"'3','{_ts(t)}','{lvl / 100:.2f}'" for t, lvl in zip(dev["ts"], dev["level"])]
    (d / "samples.csv").write_text("\n".join(rows) + "\n")
    msg = _one_error(lambda: prep_traces(d / "samples.csv", tmp_path / "out", OPTS))
    n = len(rows) - 1
    assert msg == (f"{d / 'samples.csv'}: every row dropped as malformed_device_id ({n} of {n}); first device_id seen: "
                   "\"'3'\": values still carry their quotes; expected an integer device id")
    assert not (tmp_path / "out").exists()


def test_all_timestamps_unparseable_is_named(tmp_path):
    f = tmp_path / "samples.csv"
    f.write_text("device_id;timestamp;battery_level\n1;0000-00-00 00:00:00;55\n1;yesterday;54\n")
    msg = _one_error(lambda: prep_traces(f, tmp_path / "out", OPTS))
    assert msg == (f"{f}: every row dropped as unparseable_timestamp (2 of 2); first timestamp seen: '0000-00-00 00:00:00'; "
                   "expected a timestamp 'YYYY-MM-DD HH:MM:SS'")


def _copy_tables(src, dest, *names):
    """A dump directory ``dest`` holding only the tables ``names`` of the dump at ``src``."""
    dest.mkdir()
    for name in names:
        (dest / name).write_text((src / name).read_text())
    return dest


def test_battery_details_all_unusable_is_named(dumps, tmp_path):
    d = _copy_tables(dumps[0] / "weekly", tmp_path / "w", "samples.csv", "devices.csv")
    (d / "battery_details.csv").write_text("id;sample_id;voltage\n1;s-1;3.9\n2;s-2;3.8\n")
    msg = _one_error(lambda: prep_traces(d, tmp_path / "out", OPTS))
    assert msg == f"{d / 'battery_details.csv'}: every row unusable: sample_id 's-1'; expected an integer sample id"


def test_devices_table_without_integer_ids_is_named(dumps, tmp_path):
    d = _copy_tables(dumps[0] / "weekly", tmp_path / "w", "samples.csv", "battery_details.csv")
    (d / "devices.csv").write_text("id;model\n'7';SM-G970F\n")
    msg = _one_error(lambda: Source.open(d).device_models([7]))
    assert msg == (f"{d / 'devices.csv'}: every row dropped: no id is an integer (first: \"'7'\": values still carry "
                   "their quotes); expected an integer device id in column id")


def test_dump_without_devices_table_has_no_model_columns(dumps, tmp_path):
    d = _copy_tables(dumps[0] / "d2018", tmp_path / "nodev", "samples.csv", "battery_details.csv")
    rep = prep_traces(d, tmp_path / "out", OPTS)
    assert rep["device_models"] == {} and rep["input"]["device_files"] == []
    assert "model" not in pq.read_schema(tmp_path / "out" / "devices.parquet").names
