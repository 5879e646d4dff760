"""Past the readings: each mechanism variant's factor over the default by hand, and the stragglers that set a row."""

from __future__ import annotations

import pandas as pd
import pytest

from flamingo_sim.studies.reproduce.mechanisms import MECHANISMS, mechanism_configs, mechanism_steps, straggler_rows
from tests.studies.reproduce.test_attribution import frame


def test_variants_switch_one_mechanism_each_and_leave_each_phone_out():
    configs = mechanism_configs({"a": 0.5, "b": 0.25, "c": 0.25})
    assert [m.name for m in MECHANISMS] == ["interference", "energy", "round_rule"]
    assert configs["interference"].overrides == ("policy.interference.model=fair",)
    assert configs["energy"].overrides == ("policy.interference.energy=full_power",)
    assert configs["round_rule"].overrides == ("fl.overcommit=1.0",)
    # the others' shares scaled up to one
    assert configs["without_a"].overrides == ("phones.mix={b: 0.5, c: 0.5}",)
    assert configs["without_b"].overrides == ("phones.mix={a: 0.666667, c: 0.333333}",)
    assert list(mechanism_configs({})) == ["interference", "energy", "round_rule"]


def test_each_variant_by_hand_against_the_default():
    # default rule (highest_common, smoothed over 3, margin 0.01): in frame(), baseline and Flamingo reach 0.4567 at rounds
    # 4 and 3; a variant whose Flamingo rounds take twice as long and cost twice the energy is worth x0.5 on both
    default, slower = frame(4.0, 2.0), frame(8.0, 4.0)
    configs = mechanism_configs({})
    got = {s.step.name: s for s in mechanism_steps("openimage_mobilenet", default, {"interference": slower, "energy": default}, configs)}
    assert got["interference"].speedup_factor == pytest.approx(0.5) and got["interference"].energy_factor == pytest.approx(0.5)
    assert got["interference"].speedup_factor_ci == pytest.approx([0.5, 0.5])
    assert got["energy"].speedup_factor == pytest.approx(1.0) and got["energy"].speedup == pytest.approx(60 / 12)  # baseline 40, 80 s; Flamingo 12 s
    assert got["interference"].step.label == "interference: android -> fair (2 fixed cores, 2x)"


def test_stragglers_over_the_rounds_both_policies_completed():
    rows = []
    for seed in (0, 1):
        for r in range(0, 4):
            rows.append({"policy": "baseline", "seed": seed, "round": r, "duration_s": 100.0 * r, "straggler_phone": "s10e" if r else ""})
        for r in range(0, 3 + seed):  # seed 0: Flamingo stops at round 2; seed 1 at round 3
            rows.append({"policy": "flamingo", "seed": seed, "round": r, "duration_s": 10.0, "straggler_phone": ("pixel" if r % 2 else "mi")
                         if r else ""})
    got = straggler_rows(pd.DataFrame(rows))
    assert got is not None
    # seed 0 compares rounds 1-2, seed 1 rounds 1-3: the baseline's mean round (100 + 200 + 100 + 200 + 300) / 5
    assert got["baseline"] == {"round_s": 180.0, "phone": "s10e", "share": 1.0, "rounds": 5}
    assert got["flamingo"]["round_s"] == 10.0 and got["flamingo"]["phone"] == "pixel" and got["flamingo"]["share"] == pytest.approx(3 / 5)
    assert got["ratio"] == pytest.approx(18.0)
    assert straggler_rows(pd.DataFrame(rows).drop(columns="straggler_phone")) is None
