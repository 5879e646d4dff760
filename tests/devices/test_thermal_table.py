"""``flamingo-sim thermal``: sustained training per phone under the thermal model, by hand for the Pixel 3."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from flamingo_sim.devices.profiles import load_profile
from flamingo_sim.devices.thermal_table import sustained_rows

ROOT = Path(__file__).resolve().parents[2]


def test_pixel3_resnet34_throttles_at_the_closed_form_onset_and_mobilenet_never():
    prof = load_profile(ROOT / "profiles", "pixel_3", "resnet34")
    rows = {r["policy"]: r for r in sustained_rows([prof], ambient_c=30.0)}
    base = rows["baseline"]
    body = prof.phone.body
    assert body is not None
    # heat is the power the battery is charged: Table 1 gives 1x on the Pixel 3's ResNet-34, so 4567 at its busy power, 4 x 1.30 W
    r, tau, p = body.resistance_k_per_w, body.time_constant_s, 5.2
    assert base["heat_w"] == base["power_w"] == p
    assert base["steady_c"] == pytest.approx(30.0 + p * r)  # 52.4 degC
    assert base["onset_s"] == pytest.approx(tau * math.log(p * r / (p * r - 10.0)))  # 40 degC = 10 K above the trace
    assert base["throttled_step_latency_s"] == pytest.approx(0.503 / 0.6)
    assert base["throttled_step_energy_j"] == pytest.approx(0.503 * p * 0.5 / 0.6)
    assert base["throttled_steady_c"] == pytest.approx(30.0 + 0.5 * p * r)
    assert rows["flamingo"]["choice"] == "4567"  # 1x: Flamingo keeps the baseline's choice
    # MobileNetV2's 4567 draws 1.869 W (Table 1: 2.3x the energy efficiency at 1.6x the speed of core 4's 1.30 W):
    # 38.0 degC, below 40: never throttled
    mob = {r["policy"]: r for r in sustained_rows([load_profile(ROOT / "profiles", "pixel_3", "mobilenet_v2")], ambient_c=30.0)}
    assert mob["baseline"]["heat_w"] == 1.869 and mob["baseline"]["onset_s"] is None
    assert mob["baseline"]["steady_c"] == pytest.approx(30.0 + 1.869 * r)


@pytest.mark.parametrize("pset", ["paper", "anchored", "public"])
def test_every_row_heats_the_phone_with_the_power_it_charges(pset):
    """Energy conserved: on every phone, network and choice the heat is the power charged, so the steady state
    is the trace's temperature plus that power times the body's resistance, throttled or not."""
    from flamingo_sim.devices.profiles import MODELS
    from flamingo_sim.devices.soc import load_phones

    phones = load_phones(ROOT / "profiles")
    profiles = [load_profile(ROOT / "profiles", p, m, phones=phones, profile_set=pset) for p in phones for m in MODELS]
    rows = sustained_rows(profiles, ambient_c=30.0)
    assert len(rows) == 2 * len(profiles)
    for row in rows:
        assert row["heat_w"] == row["power_w"], row
        assert row["steady_c"] == pytest.approx(30.0 + row["power_w"] * row["resistance_k_per_w"])
        if row["onset_s"] is not None:  # throttled: energy per step at the capped power over the capped speed
            assert row["throttled_step_energy_j"] == pytest.approx(row["step_latency_s"] * row["power_w"] * 0.5 / 0.6)
