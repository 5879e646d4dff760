"""Every GreenHub layout in docs/traces.md yields the same selection and (near-)identical series."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from flamingo_sim.traces.pipeline import PrepOptions, prep_traces
from flamingo_sim.traces.readers import detect_format

OPTS = PrepOptions(n_devices=8, max_date="2026-01-01")


@pytest.fixture(scope="module")
def outputs(synth_dump, tmp_path_factory):
    out = tmp_path_factory.mktemp("layouts")
    res = {}
    for name in ("kaggle", "single.parquet", "aug2020", "weekly", "csv2019", "csv2018"):
        rep = prep_traces(synth_dump / name, out / name, OPTS)
        res[name] = (rep, pq.read_table(out / name / "devices.parquet").to_pandas())
    return res


def test_layouts_are_detected(synth_dump):
    assert detect_format(synth_dump / "kaggle") == "parquet-parts"
    assert detect_format(synth_dump / "kaggle" / "samples") == "parquet-parts"
    assert detect_format(synth_dump / "single.parquet") == "parquet"
    assert detect_format(synth_dump / "aug2020") == "csv-pages"
    for d in ("weekly", "csv2019", "csv2018"):
        assert detect_format(synth_dump / d) == "csv-tables"
    assert detect_format(synth_dump / "weekly" / "samples.csv") == "csv"


def test_same_selection_in_every_layout(outputs):
    ref = outputs["kaggle"][0]["selected_device_ids"]
    assert len(ref) == 8
    for name, (rep, _) in outputs.items():
        assert rep["selected_device_ids"] == ref, name
        assert rep["extras"] == ["screen_on_frac", "temperature_c", "voltage_v", "charging", "network_state", "mobile_generation",
                                 "wifi_enabled", "wifi_signal_dbm", "wifi_link_mbps"], name
        assert rep["n_clients"] == 8 * 24


def test_level_scale_detected_per_layout(outputs):
    scales = {name: rep["input"]["level_scale"] for name, (rep, _) in outputs.items()}
    assert scales == {"kaggle": "pct", "single.parquet": "pct", "aug2020": "pct", "weekly": "fraction",
                      "csv2019": "fraction", "csv2018": "fraction"}


def test_identical_data_gives_identical_series(outputs):
    ref = outputs["kaggle"][1]
    for name in ("single.parquet", "weekly", "csv2019"):
        df = outputs[name][1]
        assert df["timestamp"].equals(ref["timestamp"]), name
        np.testing.assert_allclose(df["battery_level_pct"], ref["battery_level_pct"], atol=1e-4, err_msg=name)
        assert (df["battery_state"] == ref["battery_state"]).mean() > 0.999, name
        for col in ("screen_on_frac", "temperature_c", "voltage_v", "charging"):  # joined from battery_details
            np.testing.assert_allclose(df[col], ref[col], atol=1e-4, err_msg=f"{name} {col}")
    assert outputs["kaggle"][0]["drops"] == outputs["weekly"][0]["drops"] == outputs["csv2019"][0]["drops"]


NETWORK = ("network_state", "mobile_generation", "wifi_enabled", "wifi_signal_dbm", "wifi_link_mbps")


def test_the_network_survives_every_layout(outputs):
    """Kaggle and Aug-2020 carry the network columns in the samples; the per-table dumps in network_details.csv
    (network_status stays in samples): every layout gives the Kaggle layout's network states, grid point for grid point."""
    ref = outputs["kaggle"][1]
    state = ref["network_state"].to_numpy()
    assert set(np.unique(state[~np.isnan(state)])) == {0.0, 1.0, 2.0}
    assert 0.3 < np.mean(state == 1) < 0.7  # the generator's phones are on WiFi about half of the time
    for name, (rep, df) in outputs.items():
        assert rep["network"]["detail_files"] == (["network_details.csv"] if name in ("weekly", "csv2019", "csv2018") else []), name
        if len(df) != len(ref):
            continue
        for col in NETWORK:
            a, b = df[col].to_numpy(), ref[col].to_numpy()
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            # rows the 2018 dump loses to its 0000-00-00 clocks, and the Aug-2020 page's shifted rows, move a few points
            assert same.mean() > (0.995 if name in ("aug2020", "csv2018") else 1 - 1e-12), f"{name} {col}"


def test_layout_quirks_are_counted(outputs):
    aug = outputs["aug2020"][0]
    assert aug["drops"]["shifted_row"] == 2
    assert aug["rows"]["read"] == outputs["kaggle"][0]["rows"]["read"]
    assert outputs["csv2019"][0]["rows"]["repeated_header_lines"] > 0
    assert outputs["csv2018"][0]["drops"]["unparseable_timestamp"] > 0  # 0000-00-00 00:00:00
    # rows lost to those quirks change a few grid points at most
    for name in ("aug2020", "csv2018"):
        df, ref = outputs[name][1], outputs["kaggle"][1]
        assert len(df) == len(ref)
        assert np.mean(np.abs(df["battery_level_pct"] - ref["battery_level_pct"]) < 1e-3) > 0.97, name


def test_report_counts(outputs, synth_dump):
    rep = outputs["kaggle"][0]
    rows = pq.read_table(synth_dump / "single.parquet", columns=["device_id"]).num_rows
    assert rep["rows"]["read"] == rows
    assert rep["rows"]["valid"] == rows - sum(v for k, v in rep["drops"].items() if k not in ("duplicate", "shifted_row"))
    assert rep["rows"]["unique"] == rep["rows"]["valid"] - rep["drops"]["duplicate"]
    for reason in ("timestamp_before_min", "timestamp_in_future", "malformed_level", "null_battery_level", "duplicate"):
        assert rep["drops"][reason] > 0, reason
    # 24 devices: 16 good + 2 of each failing kind, each failing exactly one criterion
    assert rep["devices"] == {"seen": 24, "passing": {"min_days": 22, "min_samples_per_day": 22, "max_gap": 22,
                                                      "max_long_gaps": 22}, "passing_all": 16, "dropped_single_sample": 0, "selected": 8}
    on_disk = json.loads((Path(rep["output"]) / "report.json").read_text())
    assert on_disk["selected_device_ids"] == rep["selected_device_ids"]
    assert on_disk["drops"] == rep["drops"]


def test_devices_table_read_in_every_layout(outputs):
    """Kaggle devices/part-0000.parquet, devices.query.1.csv, devices.csv (';', ',', 2018-quoted)."""
    from flamingo_sim.traces.synth_write import SYNTH_PHONES

    ref = outputs["kaggle"][0]
    expected = {str(d): dict(zip(("model", "manufacturer", "brand"), SYNTH_PHONES[(d - 1000) % len(SYNTH_PHONES)]))
                for d in ref["selected_device_ids"]}
    assert ref["device_models"] == expected
    assert ref["input"]["device_files"] == ["devices/part-0000.parquet"]
    for name in ("aug2020", "weekly", "csv2019", "csv2018"):
        assert outputs[name][0]["device_models"] == expected, name
    assert outputs["single.parquet"][0]["device_models"] == {}  # a lone parquet file has no devices table
    df = outputs["csv2018"][1]
    assert set(df.groupby("device_id")["model"].first().astype(str).items()) == {(int(k), v["model"]) for k, v in expected.items()}
