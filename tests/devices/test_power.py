"""The physical power model and the checks every profile set must pass (``flamingo-sim profiles --check``)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest

from flamingo_sim.devices.power import POWER_BAND, check_profile, implied_voltage_v, physical_power_w, voltage_checks
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
    # four big cores drawing less than one: monotone broken twice (4567 < 4 and 4567 < 45); 4567 also outside the band
    lines = [v.line("mine") for v in check_profile(_profile(pixel, {"4567": 1.0, "45": 1.2, "4": 1.3}))]
    assert lines == [
        "mine/pixel_3/mobilenet_v2 monotone 4567: 1 W on 4 cores, below 45's 1.2 W on 2, a subset of its cores",
        "mine/pixel_3/mobilenet_v2 monotone 4567: 1 W on 4 cores, below 4's 1.3 W on 1, a subset of its cores",
        "mine/pixel_3/mobilenet_v2 monotone 45: 1.2 W on 2 cores, below 4's 1.3 W on 1, a subset of its cores",
        "mine/pixel_3/mobilenet_v2 band 4567: 1 W is 0.19x the physical model's 5.2 W (band 0.3-2.0x)",
    ]  # 45 at 0.46x and 4 at 1.0x lie within the band
    # physical powers pass both checks
    assert check_profile(_profile(pixel, {"4567": 5.2, "45": 2.6, "4": 1.3, "0": 0.19})) == []
    assert POWER_BAND == (0.3, 2.0)


def test_profiles_check_command_reports_each_shipped_violation_and_exits_1(tmp_path):
    out = subprocess.run([sys.executable, "-m", "flamingo_sim", "profiles", "--check"], capture_output=True, text=True,
                         env={"FLAMINGO_SIM_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    # the paper's Table 1 says four big cores of the Pixel 3 train ShuffleNetV2 at one core's power (1.8x both ways):
    # under a third of four busy cores' physical power, in both sets calibrated to it
    assert lines[:-1] == ["paper/pixel_3/shufflenet_v2_x2 band 4567: 1.443 W is 0.28x the physical model's 5.2 W (band 0.3-2.0x)",
                          "anchored/pixel_3/shufflenet_v2_x2 band 4567: 1.443 W is 0.28x the physical model's 5.2 W (band 0.3-2.0x)"]
    assert lines[-1].startswith("2 violation(s) in 45 profile(s) of paper, anchored, public")
    ok = subprocess.run([sys.executable, "-m", "flamingo_sim", "profiles", "--check", "--profile-set", "public"], capture_output=True,
                        text=True, env={"FLAMINGO_SIM_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert ok.returncode == 0 and ok.stdout.startswith("0 violation(s) in 15 profile(s) of public")
