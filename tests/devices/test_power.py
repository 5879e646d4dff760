"""The physical power model, the mechanisms of waiting cores, and the checks every profile set must pass (``flamingo-sim profiles --check``)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest

from flamingo_sim.devices.power import (
    IDLE_STATES,
    MAX_OVER_PHYSICAL,
    OPERATING_POINT,
    check_profile,
    implied_voltage_v,
    lowest_opp_share,
    physical_power_w,
    voltage_checks,
    waiting_mechanisms,
)
from flamingo_sim.devices.profiles import ChoiceProfile, Profile
from flamingo_sim.devices.soc import load_phones


@pytest.fixture(scope="module")
def phones(profiles_dir):
    return load_phones(profiles_dir)


def test_physical_power_is_the_busy_cores_coremark_power(phones):
    s10e, pixel = phones["galaxy_s10e"], phones["pixel_3"]
    assert physical_power_w(s10e, (4, 5, 6, 7)) == pytest.approx(3 * 0.84 + 1.08)
    assert physical_power_w(s10e, (7,)) == pytest.approx(1.08)
    assert physical_power_w(pixel, (0, 1)) == pytest.approx(2 * 0.19)


def test_device_tree_coefficients_imply_plausible_voltages(phones):
    # P = C V^2 f: SD855 A76 0.84 W at 369 uW/MHz/V^2 and 2419.2 MHz -> V = sqrt(0.84e6 / (369 x 2419.2)) = 0.970 V
    assert implied_voltage_v(phones["galaxy_s10e"], "big") == pytest.approx(math.sqrt(0.84e6 / (369 * 2419.2)))
    assert implied_voltage_v(phones["pixel_3"], "big") == pytest.approx(1.024, abs=1e-3)
    assert all(not voltage_checks(p) for p in phones.values())
    # a coefficient ten times too small implies 3 V: flagged in one line
    soc = phones["galaxy_s10e"].soc
    bad_big = dataclasses.replace(soc.core_types["big"], dynamic_power_coefficient=36.9)
    bad = dataclasses.replace(phones["galaxy_s10e"], soc=dataclasses.replace(soc, core_types={**soc.core_types, "big": bad_big}))
    assert voltage_checks(bad) == ["sd855 big: power_w 0.84 W and the device tree's coefficient imply 3.07 V at 2419.2 MHz, outside 0.55-1.1 V"]


def _profile(phone, powers: dict[str, float]) -> Profile:
    chs = tuple(ChoiceProfile(tuple(int(c) for c in label), 10.0, w) for label, w in powers.items())
    return Profile(phone, "mobilenet_v2", "measured", 16, chs)


def test_a_set_that_breaks_the_checks_says_so_one_line_each(phones):
    pixel = phones["pixel_3"]
    # 45 above twice its cores' busy power (2 x 1.3 W); 4567 under one core is no violation (waiting cores)
    lines = [v.line("mine") for v in check_profile(_profile(pixel, {"4567": 1.0, "45": 5.3, "4": 1.3}))]
    assert lines == ["mine/pixel_3/mobilenet_v2 above 45: 5.3 W is 2.04x its cores' busy power 2.6 W (at most 2x)"]
    assert check_profile(_profile(pixel, {"4567": 5.2, "45": 2.6, "4": 1.3, "0": 0.19})) == []
    assert MAX_OVER_PHYSICAL == 2.0


def test_the_lowest_operating_point_bounds_a_waiting_clusters_power(phones):
    s10e, pixel = phones["galaxy_s10e"], phones["pixel_3"]
    # the device tree's OPP tables: SD855 gold 710.4-2419.2 MHz, Prime 825.6-2841.6 MHz, weighted by busy power
    assert lowest_opp_share(s10e, (7,)) == pytest.approx(825.6 / 2841.6)
    assert lowest_opp_share(s10e, (4, 5, 6, 7)) == pytest.approx((3 * 0.84 * 710.4 / 2419.2 + 1.08 * 825.6 / 2841.6) / (3 * 0.84 + 1.08))
    assert lowest_opp_share(pixel, (4,)) == pytest.approx(300.0 / 2803.2)
    bare = dataclasses.replace(s10e.soc.core_types["big"], min_freq_mhz=None)
    unknown = dataclasses.replace(s10e, soc=dataclasses.replace(s10e.soc, core_types={**s10e.soc.core_types, "big": bare}))
    assert lowest_opp_share(unknown, (4, 5)) is None


def test_waiting_cores_are_named_with_the_mechanism_their_power_needs(phones):
    s10e = phones["galaxy_s10e"]
    # 4567 at 0.55 W: 0.153 of 3.6 W busy, below the lowest OPP's 0.29 -> idle states; 45 at 0.6 W: 0.357 -> operating point
    found = {w.choice: w for w in waiting_mechanisms(_profile(s10e, {"4567": 0.55, "45": 0.6, "7": 1.08}))}
    assert set(found) == {"4567", "45"}  # 7 draws its busy power: nothing waits
    assert found["4567"].mechanism == IDLE_STATES and found["4567"].share == pytest.approx(0.55 / 3.6)
    assert found["45"].mechanism == OPERATING_POINT and found["45"].share == pytest.approx(0.6 / 1.68)
    assert found["4567"].line("mine") == ("mine/galaxy_s10e/mobilenet_v2 4567: 0.15 of its cores' busy power (lowest OPP 0.29): "
                                          "waiting cores in an idle state part of the step (cpuidle WFI/retention while threads sleep)")


def test_profiles_check_command_exits_0_on_the_shipped_sets_and_names_the_mechanisms(tmp_path):
    env = {"FLAMINGO_SIM_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "flamingo_sim", "profiles", "--check"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1].startswith("0 violation(s) in 45 profile(s) of paper, anchored, public")
    assert ("  paper/galaxy_s10e/mobilenet_v2: idle states: 4567 0.16, 457 0.17, 456 0.17, 47 0.19, 45 0.19; "
            "operating point: 0123 0.49, 012 0.58, 01 0.72") in lines
    # the public set's power is the busy power: nothing waits, no line
    ok = subprocess.run([sys.executable, "-m", "flamingo_sim", "profiles", "--check", "--profile-set", "public"], capture_output=True,
                        text=True, env=env)
    assert ok.returncode == 0 and ok.stdout.startswith("0 violation(s) in 15 profile(s) of public")


def test_profiles_check_command_exits_1_on_a_violation(tmp_path):
    import shutil

    from tests.cli_runs import ROOT

    mine = tmp_path / "profiles"
    shutil.copytree(ROOT / "profiles", mine)
    path = mine / "pixel_3" / "mobilenet_v2.yaml"
    path.write_text(path.read_text().replace("power_w: 1.3\n", "power_w: 9.9\n", 1))
    out = subprocess.run([sys.executable, "-m", "flamingo_sim", "profiles", "--check", "--profile-set", "paper", "--profiles-dir", str(mine)],
                         capture_output=True, text=True, env={"FLAMINGO_SIM_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "paper/pixel_3/mobilenet_v2 above 4: 9.9 W is 7.62x its cores' busy power 1.3 W (at most 2x)" in out.stdout.splitlines()


# -- the survivors of .ci/mutation.py over the device model (benchmarks/results/mutation_device_model_2cores.json) ---------

def test_a_share_at_the_lowest_operating_point_within_rounding_needs_only_the_operating_point(phones):
    """The Galaxy S10e's Prime core (7) is busy at 1.08 W, and its lowest OPP draws at most 825.6 / 2841.6 = 0.29054 of
    it. A profile's 4 digits put 0.3138 W at 0.3138 / 1.08 = 0.29056 (at the floor within the 5e-4 rounding: operating
    point, and still so 3e-4 below it, 0.3137 W = 0.29046); 0.3130 W = 0.28981 is below it by more than the rounding
    (idle states)."""
    s10e = phones["galaxy_s10e"]
    for watts, mechanism in ((0.3138, OPERATING_POINT), (0.3137, OPERATING_POINT), (0.3130, IDLE_STATES)):
        (w,) = waiting_mechanisms(_profile(s10e, {"4567": 3.6, "7": watts}))  # 4567 at its busy power: not waiting
        assert w.share == pytest.approx(watts / 1.08, rel=1e-12) and w.mechanism == mechanism, watts


def test_the_lines_without_a_profile_set_and_for_the_operating_point(phones):
    s10e, pixel = phones["galaxy_s10e"], phones["pixel_3"]
    found = {w.choice: w for w in waiting_mechanisms(_profile(s10e, {"4567": 0.55, "45": 0.6, "7": 1.08}))}
    # 45: 0.6 / 1.68 = 0.357 of its busy power, above the lowest OPP's 710.4 / 2419.2 = 0.29: no set named, no prefix
    assert found["45"].line() == ("galaxy_s10e/mobilenet_v2 45: 0.36 of its cores' busy power (lowest OPP 0.29): "
                                  "waiting cores at a lower operating point (schedutil/WALT)")
    (v,) = check_profile(_profile(pixel, {"4567": 1.0, "45": 5.3, "4": 1.3}))
    assert v.line() == "pixel_3/mobilenet_v2 above 45: 5.3 W is 2.04x its cores' busy power 2.6 W (at most 2x)"
