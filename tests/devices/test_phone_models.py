"""``phones.mix: from_traces``: each trace device plays the phone its model maps to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flamingo_sim.devices.phone_models import load_phone_models, map_trace_phones
from flamingo_sim.devices.soc import load_phones
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.traces.store import load_client_traces, load_device_models

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "traces" / "synthetic"


@pytest.fixture(scope="module")
def table():
    return load_phone_models(ROOT / "profiles" / "phone_models.yaml", load_phones(ROOT / "profiles"))


@pytest.mark.parametrize("model, rule, phone", [
    ("SM-G970F", "galaxy_s10e", "galaxy_s10e"), ("sm-g970u1", "galaxy_s10e", "galaxy_s10e"),
    ("SM-T865", "galaxy_tab_s6", "galaxy_tab_s6"), ("Pixel 3 XL", "pixel_3", "pixel_3"), (" pixel 3 ", "pixel_3", "pixel_3"),
    ("Pixel 3a", "fallback", "pixel_3"), ("IN2013", "oneplus_8", "oneplus_8"), ("IN2023", "sd865-class", "oneplus_8"),
    ("M2001J2G", "mi_10", "mi_10"), ("M2001J1G", "sd865-class", "oneplus_8"), ("GM1913", "sd855-class", "galaxy_s10e"),
    ("HD1907", "sd855-class", "galaxy_s10e"), ("ONEPLUS A6003", "sd845-class", "pixel_3"), ("SM-G960F", "fallback", "pixel_3"),
    ("SM-G960U", "sd845-class", "pixel_3"), ("Redmi Note 7", "fallback", "pixel_3"), (None, "fallback", "pixel_3"), ("", "fallback", "pixel_3"),
])
def test_rules(table, model, rule, phone):
    assert table.classify(model) == (rule, phone)


def test_shipped_traces_mapping_counts(table):
    """Hand-checked: the shipped set holds synthetic devices 1000 + j for the first 100 j with j % 12 < 8
    (the "good" kind), and device 1000 + j has model SYNTH_PHONES[j % 13]; 14,477 FL clients replay 2,400
    trace clients (device row r, shift k = client 24 r + k), so trace clients 0..76 (rows 0-2 whole, 5 of
    row 3) have 7 FL clients and the rest 6: 168 per device in rows 0-2, 149 in row 3, 144 elsewhere."""
    traces = load_client_traces(SHIPPED)
    per_trace, names, rep = map_trace_phones(table, traces.device_ids, load_device_models(SHIPPED), traces.client_device, 14477)
    devices = {r: e["devices"] for r, e in rep["rules"].items()}
    # j % 13 over the 100 selected j: models 0-8 and 12 eight times each, 9-11 seven times
    assert devices == {"galaxy_s10e": 15, "galaxy_tab_s6": 8, "pixel_3": 16, "oneplus_8": 8, "mi_10": 16,
                       "sd865-class": 8, "sd855-class": 7, "sd845-class": 7, "fallback": 15}
    clients = {r: e["clients"] for r, e in rep["rules"].items()}
    # row 0 = SM-G970F (galaxy_s10e), row 1 = Pixel 3, row 2 = IN2013 (oneplus_8), row 3 = Mi 10
    assert clients == {"galaxy_s10e": 14 * 144 + 168, "galaxy_tab_s6": 8 * 144, "pixel_3": 15 * 144 + 168,
                       "oneplus_8": 7 * 144 + 168, "mi_10": 15 * 144 + 149, "sd865-class": 8 * 144,
                       "sd855-class": 7 * 144, "sd845-class": 7 * 144, "fallback": 15 * 144}
    assert rep["rules"]["fallback"]["models"] == {"Redmi Note 7": 7, "moto g(7) power": 8}
    assert rep["phones"] == {"galaxy_s10e": 2184 + 1008, "pixel_3": 2328 + 1008 + 2160, "oneplus_8": 1176 + 1152,
                             "mi_10": 2309, "galaxy_tab_s6": 1152}
    assert sum(rep["phones"].values()) == 14477
    # every shift of a device plays the same phone
    assert (per_trace.reshape(100, 24) == per_trace.reshape(100, 24)[:, :1]).all()
    assert names[per_trace[0]] == "galaxy_s10e" and names[per_trace[24]] == "pixel_3"


@pytest.mark.slow
def test_main_job_runs_from_traces(tmp_path):
    out = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "run", log=lambda m: None,
                         overrides=["phones.mix=from_traces", "fl.rounds=2", "fl.participants_per_round=8", "fl.local_steps=2",
                                    "fl.eval_every=1", "data.proxy.n_clients=200", "policies=[baseline]"])
    rep = json.loads((out.out_dir / "summary.json").read_text())["phones_from_traces"]
    assert rep["table"] == "profiles/phone_models.yaml (shipped)" and rep["fallback"] == "pixel_3"
    # 200 FL clients replay trace clients 0..199: device rows 0-7 (j = 0..7, models 0..7) whole, 8 of row 8
    # (j = 12: SM-G981U)
    assert {r: e["clients"] for r, e in rep["rules"].items() if e["clients"]} == {
        "galaxy_s10e": 24, "pixel_3": 24, "oneplus_8": 24, "mi_10": 24, "galaxy_tab_s6": 24, "sd855-class": 24,
        "sd845-class": 24, "fallback": 24, "sd865-class": 8}
    assert out.summary["policies"]["baseline"]["total_energy_j"] > 0


def _table_file(tmp_path, text):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, message", [
    ("fallback: nokia_3310\nrules: []\n", "t.yaml: fallback: unknown phone 'nokia_3310'"),
    ("fallback: pixel_3\nrules: [{name: a, phone: pixel_9, patterns: [x]}]\n", "t.yaml: rules: rule 'a': unknown phone 'pixel_9'"),
    ("fallback: pixel_3\nsoc_classes: {sd855: mi_10}\nrules: []\n", "t.yaml: soc_classes.sd855: phone 'mi_10' has SoC 'sd865', not 'sd855'"),
    ("fallback: pixel_3\nrules: [{name: a, soc: sd888, patterns: [x]}]\n", "t.yaml: rules: rule 'a': soc 'sd888' is not under soc_classes (known: none)"),
    ("fallback: pixel_3\nrules: [{name: a, phone: mi_10, soc: sd865, patterns: [x]}]\n", "rule 'a': give exactly one of phone, soc"),
    ("fallback: pixel_3\nrules: [{name: fallback, phone: mi_10, patterns: [x]}]\n", "rule name 'fallback' used twice (or reserved)"),
])
def test_bad_tables(tmp_path, text, message):
    with pytest.raises(ConfigError) as exc:
        load_phone_models(_table_file(tmp_path, text), load_phones(ROOT / "profiles"))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_trace_set_without_models_is_a_config_error(tmp_path):
    import pyarrow.parquet as pq

    d = tmp_path / "traces"
    d.mkdir()
    pq.write_table(pq.read_table(SHIPPED / "devices.parquet").drop_columns(["model", "manufacturer", "brand"]), d / "devices.parquet")
    (d / "clients.parquet").write_bytes((SHIPPED / "clients.parquet").read_bytes())
    with pytest.raises(ConfigError, match=r"phones\.mix: from_traces needs device models, and trace set .* has none"):
        run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "run", log=lambda m: None,
                       overrides=["phones.mix=from_traces", f"traces.path={d}", "data.proxy.n_clients=200"])
    assert not (tmp_path / "run").exists()
