"""``flamingo-sim thermal``: sustained training per phone under the thermal model, by hand for the Pixel 3."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from flamingo_sim.devices.profiles import load_profile
from flamingo_sim.devices.thermal_table import sustained_rows

ROOT = Path(__file__).resolve().parents[2]


def test_pixel3_baseline_throttles_at_the_closed_form_onset():
    prof = load_profile(ROOT / "profiles", "pixel_3", "mobilenet_v2")
    rows = {r["policy"]: r for r in sustained_rows([prof], ambient_c=30.0)}
    base = rows["baseline"]
    body = prof.phone.body
    assert body is not None
    # heat: the physical model, four busy A75 cores at 1.30 W each (CoreMark); energy: the profile's 1.869 W
    r, tau, heat, p = body.resistance_k_per_w, body.time_constant_s, 4 * 1.30, 1.869
    assert base["heat_w"] == pytest.approx(heat) and base["power_w"] == p
    assert base["steady_c"] == pytest.approx(30.0 + heat * r)  # 52.4 degC
    assert base["onset_s"] == pytest.approx(tau * math.log(heat * r / (heat * r - 10.0)))  # 40 degC = 10 K above the trace
    assert base["throttled_step_latency_s"] == pytest.approx(49.7 / 0.6)
    assert base["throttled_step_energy_j"] == pytest.approx(49.7 * p * 0.5 / 0.6)
    assert base["throttled_steady_c"] == pytest.approx(30.0 + 0.5 * heat * r)
    # Flamingo's choice on the Pixel 3 (core 4, 1.30 W of heat) stays below 40 degC: never throttled
    assert rows["flamingo"]["choice"] == "4" and rows["flamingo"]["onset_s"] is None
    assert rows["flamingo"]["steady_c"] == pytest.approx(30.0 + 1.30 * r) and rows["flamingo"]["steady_c"] < base["steady_c"]
    assert rows["flamingo"]["throttled_step_latency_s"] == rows["flamingo"]["step_latency_s"]


@pytest.mark.parametrize("pset", ["paper", "anchored", "public"])
def test_the_baseline_runs_at_least_as_hot_as_flamingo_on_every_phone_and_network(pset):
    from flamingo_sim.devices.profiles import MODELS
    from flamingo_sim.devices.soc import load_phones

    phones = load_phones(ROOT / "profiles")
    profiles = [load_profile(ROOT / "profiles", p, m, phones=phones, profile_set=pset) for p in phones for m in MODELS]
    rows = sustained_rows(profiles, ambient_c=30.0)
    by = {(r["phone"], r["model"], r["policy"]): r for r in rows}
    for prof in profiles:
        base, flam = by[(prof.phone.name, prof.model, "baseline")], by[(prof.phone.name, prof.model, "flamingo")]
        # heat is the physical model's (busy cores at their CoreMark power), so it grows with the cores: 4567 holds Flamingo's
        assert set(flam["choice"]) <= set(base["choice"])
        assert base["steady_c"] >= flam["steady_c"], (pset, prof.phone.name, prof.model)
