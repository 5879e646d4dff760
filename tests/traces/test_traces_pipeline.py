"""End to end on a hand-built dump: exact counts, grid, states, shifts, and the loader on the output."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trace_helpers import T0

from flamingo_sim.cli import main
from flamingo_sim.errors import InputDataError
from flamingo_sim.traces.pipeline import PrepOptions, default_out_dir, prep_traces
from flamingo_sim.traces.select import Criteria
from flamingo_sim.traces.store import load_client_traces

N = 29 * 144 + 1  # 29 days of 10-minute samples


def _level(i):
    return 100.0 - (i % 90)  # falls 1 %/10 min for 15 h, then jumps back to 100


@pytest.fixture
def hand_dump(tmp_path):
    """Devices 10 and 11 on the grid for 29 days, 12 for 5 days; plus one row of each defect."""
    lines = ["id;device_id;timestamp;battery_level;screen_on;temperature;voltage;charger"]
    rid = 0

    def row(dev, ts, lvl, screen="1", temp="30.5", volt="3.9", charger="unplugged"):
        nonlocal rid
        rid += 1
        stamp = np.datetime64(int(ts), "s").astype(str).replace("T", " ")
        lines.append(f"{rid};{dev};{stamp};{lvl};{screen};{temp};{volt};{charger}")

    for dev, n in ((11, N), (10, N), (12, 5 * 144)):
        for i in range(n):
            row(dev, T0 + 600 * i, f"{_level(i) + (dev - 10) * 0:g}", screen="1" if i % 2 else "0",
                volt="3900" if dev == 11 else "3.9", charger="AC" if i % 90 == 89 else "unplugged")
    row(10, T0 + 600 * 5, "99")          # duplicate (device, timestamp): the first reading wins
    row(10, 5, "50")                      # 1970 clock
    row(10, T0 + 600 * 7 + 1, "150")      # level above the maximum
    row(10, T0 + 600 * 7 + 2, "NULL")     # null level
    lines.append(f"{rid + 1};11;0000-00-00 00:00:00;50;1;30;3.9;ac")  # unparseable timestamp
    (tmp_path / "samples.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "samples.csv"


def test_end_to_end_exact(hand_dump, tmp_path):
    opts = PrepOptions(n_devices=5, n_shifts=3, max_date="2026-01-01")
    rep = prep_traces(hand_dump, tmp_path / "out", opts)
    assert rep["input"]["format"] == "csv" and rep["input"]["level_scale"] == "pct"
    assert rep["drops"] == {"null_device_id": 0, "malformed_device_id": 0, "null_timestamp": 0, "unparseable_timestamp": 1,
                            "timestamp_before_min": 1, "timestamp_in_future": 0, "null_battery_level": 1,
                            "malformed_level": 1, "duplicate": 1, "shifted_row": 0}
    assert rep["rows"] == {"read": 2 * N + 720 + 5, "valid": 2 * N + 720 + 1, "unique": 2 * N + 720, "repeated_header_lines": 0}
    assert rep["devices"] == {"seen": 3, "passing": {"min_days": 2, "min_samples_per_day": 3, "max_gap": 3, "max_long_gaps": 3},
                              "passing_all": 2, "dropped_single_sample": 0, "selected": 2}
    assert rep["selected_device_ids"] == [10, 11] and rep["n_clients"] == 6
    assert rep["warnings"] == ["only 2 devices pass all criteria; 5 requested"]

    dev = pq.read_table(tmp_path / "out" / "devices.parquet")
    # parquet has no seconds unit: UTC milliseconds, on the 10-minute grid
    assert dev.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert dev.schema.field("battery_level_pct").type == pa.float32()
    assert dev.schema.field("battery_state").type == pa.int8()
    d10 = dev.filter(pa.compute.equal(dev["device_id"], 10)).to_pydict()
    ts = np.array([t.timestamp() for t in d10["timestamp"]], dtype=np.int64)
    assert ts[0] == T0 and np.all(np.diff(ts) == 600) and ts.size == N
    expected = np.array([_level(i) for i in range(N)])
    np.testing.assert_array_equal(d10["battery_level_pct"], expected)  # samples on the grid are kept exactly
    # state: -1 while falling, +1 on the jump back to 100 (i = 89 -> 90), last repeats previous
    assert d10["battery_state"][:3] == [-1, -1, -1]
    assert d10["battery_state"][89] == 1 and d10["battery_state"][90] == -1
    np.testing.assert_array_equal(d10["battery_state"], np.r_[np.sign(np.diff(expected)), np.sign(expected[-1] - expected[-2])])
    assert d10["screen_on_frac"][:4] == [0, 1, 0, 1]
    assert set(d10["charging"][85:92]) == {0.0, 1.0} and d10["charging"][89] == 1.0
    d11 = dev.filter(pa.compute.equal(dev["device_id"], 11)).to_pydict()
    assert set(np.round(d11["voltage_v"], 3)) == {3.9}  # millivolts converted

    cli = pq.read_table(tmp_path / "out" / "clients.parquet").to_pydict()
    assert cli == {"client_id": [0, 1, 2, 3, 4, 5], "device_id": [10, 10, 10, 11, 11, 11], "shift_h": [0, 1, 2, 0, 1, 2]}
    assert json.loads((tmp_path / "out" / "report.json").read_text())["n_clients"] == 6

    ct = load_client_traces(tmp_path / "out")
    # client 2 = device 10 shifted 2 h: at t it sees the device's series at t + 7200 s
    for t in (0, 3000, 86400 * 3 + 1234):
        i = (t + 7200) // 600
        assert ct.level_at(t)[2] == expected[i]
        assert ct.level_at(t)[0] == expected[t // 600]
    assert ct.horizon_s == N * 600 - 7200


def test_selection_options_and_shifts(hand_dump, tmp_path):
    rep = prep_traces(hand_dump, tmp_path / "o", PrepOptions(n_devices=1, rule="best", n_shifts=24, max_date="2026-01-01",
                                                             criteria=Criteria(min_days=4)))
    # all three pass, none has a long gap, equal max gaps (600 s): most samples per day wins:
    # device 12 has 720 samples in 719 * 600 s (144.2/day), devices 10 and 11 4177 in 29 days (144.03/day)
    assert rep["devices"]["passing_all"] == 3 and rep["selected_device_ids"] == [12]
    ct = load_client_traces(tmp_path / "o")
    assert ct.n_clients == 24 and ct.shift_s.tolist() == [3600 * k for k in range(24)]


def test_cli_prep_and_default_out_dir(hand_dump, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert default_out_dir(hand_dump) == default_out_dir("x/samples.csv")
    rc = main(["prep-traces", str(hand_dump), "--shifts", "2", "--max-date", "2026-01-01"])
    assert rc == 0
    assert "4 clients from 2 devices (2 of 3 pass)" in capsys.readouterr().err
    assert load_client_traces(tmp_path / "traces" / "samples").n_clients == 4


def test_level_scale_option_overrides_detection(hand_dump, tmp_path):
    with pytest.raises(InputDataError, match=r"no valid rows \(9079 read; dropped: malformed_level 9076, "):
        # read as a 0-1 fraction, every level (11..100) is above the maximum
        prep_traces(hand_dump, tmp_path / "f", PrepOptions(level_scale="fraction", max_date="2026-01-01"))


def test_out_dir_may_not_replace_the_input(tmp_path, capsys):
    (tmp_path / "dump" / "samples").mkdir(parents=True)
    (tmp_path / "dump" / "samples" / "part-0000.parquet").write_bytes(b"x")
    rc = main(["prep-traces", str(tmp_path / "dump"), "--out", str(tmp_path / "dump")])
    assert rc == 2 and "would replace the input" in capsys.readouterr().err
    assert (tmp_path / "dump" / "samples" / "part-0000.parquet").read_bytes() == b"x"


def test_format_override(hand_dump, tmp_path, capsys):
    rc = main(["prep-traces", str(hand_dump.parent), "--format", "csv-pages", "--out", str(tmp_path / "o")])
    assert rc == 2 and "no sample files for --format 'csv-pages'" in capsys.readouterr().err
    rc = main(["prep-traces", str(hand_dump), "--format", "parquet", "--out", str(tmp_path / "o")])
    assert rc == 2 and "samples.csv: not a readable parquet file" in capsys.readouterr().err
    rc = main(["prep-traces", str(hand_dump), "--format", "csv", "--out", str(tmp_path / "o"), "--max-date", "2026-01-01"])
    assert rc == 0


def test_public_api_is_exported():
    import flamingo_sim.traces as traces

    assert traces.load_client_traces is load_client_traces
    assert traces.SHIPPED_DIR.name == "synthetic"


def test_a_device_with_a_single_sample_is_dropped_and_counted(tmp_path, capsys):
    """Issue 22: prep-traces wrote a set that run refused ("device 999 has a single sample"): what it writes, run accepts."""
    from trace_helpers import regular_device, table_of

    lone = {"device_id": np.array([999]), "ts": np.array([T0 + 3600]), "level": np.array([80.0])}
    pq.write_table(table_of([regular_device(1, 3, 144), lone, regular_device(2, 3, 144)]), tmp_path / "g.parquet")
    loose = ["--min-days", "0", "--min-samples-per-day", "0", "--max-gap-h", "1000", "--max-long-gaps", "1000"]
    rc = main(["prep-traces", str(tmp_path / "g.parquet"), "--out", str(tmp_path / "ts"), "--shifts", "2", "--max-date", "2026-01-01", *loose])
    err = capsys.readouterr().err
    assert rc == 0
    assert "4 clients from 2 devices (3 of 3 pass; 1 dropped: a single sample)" in err
    assert "warning: 1 selected device(s) dropped: a single sample after resampling (a client needs at least two; device 999)" in err
    rep = json.loads((tmp_path / "ts" / "report.json").read_text())
    assert rep["devices"]["dropped_single_sample"] == 1 and rep["devices"]["selected"] == 2
    assert rep["selected_device_ids"] == [1, 2] and rep["n_clients"] == 4
    ct = load_client_traces(tmp_path / "ts")  # what run reads: accepted
    assert ct.n_clients == 4 and sorted(ct.device_ids.tolist()) == [1, 2]


def test_only_single_sample_devices_is_one_line_and_leaves_nothing(tmp_path, capsys):
    lone = [{"device_id": np.array([d]), "ts": np.array([T0 + 3600]), "level": np.array([80.0])} for d in (7, 8)]
    from trace_helpers import table_of

    pq.write_table(table_of(lone), tmp_path / "g.parquet")
    loose = ["--min-days", "0", "--min-samples-per-day", "0", "--max-gap-h", "1000", "--max-long-gaps", "1000"]
    rc = main(["prep-traces", str(tmp_path / "g.parquet"), "--out", str(tmp_path / "ts"), "--max-date", "2026-01-01", *loose])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1] == (f"flamingo-sim prep-traces: error: {tmp_path / 'g.parquet'}: every selected device has a single "
                                   "sample after resampling (2 devices, e.g. device 7); a client needs at least two - relax the "
                                   "criteria or add data")
    assert not (tmp_path / "ts").exists()
