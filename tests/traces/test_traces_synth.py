"""The synthetic dump: determinism, device kinds, and the real dump's quirks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from flamingo_sim.cli import main
from flamingo_sim.traces.synth import kind_of, samples_table, simulate_device
from flamingo_sim.traces.synth_write import LAYOUT_DIRS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    devices = [simulate_device(100 + i, kind_of(i), 3) for i in range(12)]
    return samples_table(devices, 3).to_pandas(), devices


def test_simulation_is_deterministic():
    a, b, c = simulate_device(5, "good", 1), simulate_device(5, "good", 1), simulate_device(5, "good", 2)
    assert np.array_equal(a.ts_s, b.ts_s) and np.array_equal(a.level, b.level)
    assert not np.array_equal(a.ts_s[:100], c.ts_s[:100])


def test_event_driven_sampling_and_habits(table):
    _, devices = table
    good = [d for d in devices if d.kind == "good"]
    for d in good:
        order = np.argsort(d.ts_s)
        lv, ch = d.level[order], d.charging[order]
        step = np.abs(np.diff(lv))
        # one sample per 1 % step (or a charger change, or a maintenance dip at 100 %)
        assert np.mean((step == 1) | (np.diff(ch.astype(int)) != 0)) > 0.97
        assert ch.any() and (~ch).any()
        assert 0 <= lv.min() and lv.max() <= 100
    # the screen drains: mean step interval is shorter with the screen on than off
    d = good[0]
    dt = np.diff(d.ts_s)
    on = d.screen_on[:-1].astype(bool) & ~d.charging[:-1]
    off = ~d.screen_on[:-1].astype(bool) & ~d.charging[:-1]
    assert np.median(dt[on]) < np.median(dt[off])


def test_quirks_present(table):
    df, _ = table
    assert df["id"].is_monotonic_increasing
    ts = df["timestamp"]
    assert (ts.iloc[:5] < "1971-01-01").all()  # 1970 clocks first (part-0000)
    assert (ts > "2037-01-01").sum() > 0  # far future
    assert df.duplicated(["device_id", "timestamp"]).sum() > 0
    key = df["device_id"].to_numpy() * 10**10 + ts.astype("int64").to_numpy() // 10**6
    assert not np.all(np.diff(key) >= 0)  # not sorted by (device, time)
    assert (df["battery_level"] > 100).sum() > 0 and df["battery_level"].isna().sum() > 0
    assert (df["voltage"] > 1000).sum() > 0 and (df["voltage"] == 0).sum() > 0
    assert df["temperature"].isin([-40.0, 125.0]).sum() > 0
    assert set(df["charger"].dropna().unique()) >= {"ac", "AC", "unplugged", "UNPLUGGED"}
    assert set(df["battery_state"].unique()) >= {"Charging", "charging", "Discharging"}
    assert 0.002 < df["temperature"].isna().mean() < 0.01
    assert len(df.columns) == 38


def test_cli_writes_both_default_layouts(tmp_path, capsys):
    assert main(["synth-greenhub", "--out", str(tmp_path), "--devices", "2", "--parts", "2"]) == 0
    parts = sorted((tmp_path / "kaggle" / "samples").glob("*.parquet"))
    assert [p.name for p in parts] == ["part-0000.parquet", "part-0001.parquet"]
    assert (tmp_path / "kaggle" / "devices" / "part-0000.parquet").is_file()
    pages = sorted(p.name for p in (tmp_path / "aug2020").glob("samples.query.*.csv"))
    assert pages == ["samples.query.1.csv", "samples.query.2.csv"]
    for page in pages:  # a header line on every page, NULL for nulls
        text = (tmp_path / "aug2020" / page).read_text()
        assert text.startswith("id;device_id;timestamp;battery_state;battery_level;")
    rows = sum(pq.read_metadata(p).num_rows for p in parts)
    lines = sum(len((tmp_path / "aug2020" / p).read_text().splitlines()) - 1 for p in pages)
    assert rows == lines
    assert "NULL" in (tmp_path / "aug2020" / "samples.query.1.csv").read_text() + (tmp_path / "aug2020" / "samples.query.2.csv").read_text()


def test_help_names_the_docs_page_that_describes_every_layout(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["synth-greenhub", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    pages = re.findall(r"docs/[\w-]+\.md", out)
    assert pages == ["docs/traces.md"] and "GREENHUB.md" not in out
    page = (ROOT / pages[0]).read_text()
    assert "## GreenHub layouts" in page
    for layout in LAYOUT_DIRS:  # every name --layouts takes is described there
        assert f"(`{layout}`)" in page, layout


def test_unknown_layout_is_an_error(tmp_path, capsys):
    assert main(["synth-greenhub", "--out", str(tmp_path), "--devices", "1", "--layouts", "xml"]) == 2
    assert "--layouts: 'xml' unknown" in capsys.readouterr().err


@pytest.mark.parametrize("layouts, got", [("parquet,xml", "'xml' unknown"), (",", "none given"), ("", "none given")])
def test_layouts_are_checked_before_the_first_is_written(tmp_path, capsys, layouts, got):
    """Issue 50: ``--layouts parquet,xml`` wrote the parquet layout's folder before refusing xml; ``--layouts ,`` wrote
    nothing, said nothing and exited 0."""
    out = tmp_path / "out"
    assert main(["synth-greenhub", "--out", str(out), "--devices", "1", "--layouts", layouts]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == (f"flamingo-sim synth-greenhub: error: --layouts: {got}; expected some of parquet, csv-pages, csv-tables, "
                           "csv-2019, csv-2018\n")
    assert not out.exists()


def test_synthetic_2018_dump_is_written_the_real_way(synth_dump):
    """INTO OUTFILE ... ENCLOSED BY '"': bare header, every value quoted, NULL a bare \\N (samples and battery_details)."""
    import re

    for name in ("samples.csv", "battery_details.csv", "devices.csv"):
        lines = (synth_dump / "csv2018" / name).read_text().splitlines()
        assert '"' not in lines[0] and lines[0].startswith("id,"), name
        fields = re.compile(r'^("[^"]*"|\\N)(,("[^"]*"|\\N))*$')
        assert all(fields.match(ln) for ln in lines[1:]), name
        assert all(ln.count(",") == lines[0].count(",") for ln in lines[1:]), name
    for name in ("samples.csv", "battery_details.csv"):
        assert any(re.search(r'(^|,)\\N(,|$)', ln) for ln in (synth_dump / "csv2018" / name).read_text().splitlines()[1:]), name


def test_the_network_is_written_as_the_app_writes_it(table):
    """network_type WIFI/MOBILE/unknown, network_status WIFI / the mobile type / disconnected, the link and signal only on
    WiFi (-1 and -127 off it), case flipped on some rows, the joined columns null where the other joined columns are."""
    df, devices = table
    kind = df["network_type"].dropna()
    assert set(kind.unique()) == {"WIFI", "wifi", "MOBILE", "mobile", "unknown", "UNKNOWN"} - {"UNKNOWN"}
    on_wifi = df["network_type"].str.lower() == "wifi"
    assert (df.loc[on_wifi, "wifi_link_speed"] > 0).all() and (df.loc[on_wifi, "network_status"].str.lower() == "wifi").all()
    cell = df["network_type"].str.lower() == "mobile"
    assert (df.loc[cell, "wifi_link_speed"] == -1).all() and (df.loc[cell, "wifi_signal_strength"] == -127).all()
    assert set(df.loc[cell, "network_status"].str.lower()) <= {"lte", "hspap", "hspa", "utms"}
    assert set(df.loc[df["network_type"] == "unknown", "network_status"].str.lower()) == {"disconnected"}
    assert (df["network_type"].isna() == df["temperature"].isna()).mean() > 0.99  # joined columns null together (a few temps are garbage)
    assert df["network_status"].notna().all()
    # a phone is on WiFi about half of its minutes (OpenSignal, US, Q1 2017: 43-54 %); the samples see it through battery events
    shares = np.mean([np.mean(d.network == 1) for d in devices])
    assert 0.25 < shares < 0.75


def test_the_network_does_not_move_the_battery_columns(monkeypatch):
    """The network draws from its own random stream: whatever it draws, the samples' times, levels and temperatures stay."""
    import flamingo_sim.traces.synth as synth

    before = simulate_device(11, "good", 5)
    real = synth.network_minutes

    def other(device_id, seed, *args):
        return real(device_id, seed + 1000, *args)

    monkeypatch.setattr(synth, "network_minutes", other)
    after = synth.simulate_device(11, "good", 5)
    assert not np.array_equal(before.network, after.network)
    for name in ("ts_s", "level", "screen_on", "charging", "temperature_c", "voltage_v"):
        assert np.array_equal(getattr(before, name), getattr(after, name)), name


@pytest.mark.parametrize("args, error", [
    (["--devices", "100000000"], r"--devices: 100,000,000 devices need at least 465,661 GiB while the dump is written \(about 5 MB a device\), "
                                 r"more than the [\d.]+ GiB of memory of this machine; at most [\d,]+ here"),
    (["--devices", "2", "--parts", "1000000"], r"--parts: expected at most 10,000 \(each part a file; GreenHub's Kaggle dump has 70\), got 1,000,000"),
], ids=["devices beyond memory", "a million parts"])
def test_a_dump_too_large_is_refused_before_any_work(tmp_path, capsys, args, error):
    """Issue 50: ``--devices 100000000`` generated for minutes towards 500 GB (about 5 MB a device: 2,209 MB peak at 400
    devices); ``--parts 1000000`` wrote a million files for minutes. One line now, nothing written."""
    out = tmp_path / "out"
    assert main(["synth-greenhub", "--out", str(out), *args]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.count("\n") == 1
    assert re.fullmatch(rf"flamingo-sim synth-greenhub: error: {error}\n", printed.err), printed.err
    assert not out.exists()
