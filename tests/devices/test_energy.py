"""Energy sources parsed from fixture sysfs/powercap trees and Termux output; window averages."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from flamingo_sim.devices.energy import (
    BatterySysfsSource,
    LevelOnlySource,
    PowerMeter,
    RaplSource,
    Reading,
    TermuxSource,
    average_power_w,
    detect_energy_source,
    parse_termux_status,
    rapl_delta_uj,
    read_battery_sysfs,
)


def _write(d: Path, **files: object) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, value in files.items():
        (d / name).write_text(f"{value}\n")
    return d


def _rapl_tree(root: Path, psys: bool = False) -> Path:
    _write(root / "intel-rapl:0", name="package-0", energy_uj=1_000_000, max_energy_range_uj=262143328850)
    _write(root / "intel-rapl:0:0", name="core", energy_uj=5, max_energy_range_uj=262143328850)  # a sub-zone: ignored
    _write(root / "intel-rapl:1", name="psys" if psys else "package-1", energy_uj=2_000_000, max_energy_range_uj=10_000_000)
    return root


def test_rapl_delta_wraps_around():
    assert rapl_delta_uj(100, 350, 1000) == 250
    assert rapl_delta_uj(900, 100, 1000) == 200  # 900 -> 1000 (wrap) -> 100


def test_rapl_source_sums_packages_and_survives_wraparound(tmp_path):
    root = _rapl_tree(tmp_path)
    src = RaplSource(root)
    assert [z.name for z in src.zones] == ["intel-rapl:0", "intel-rapl:1"]
    assert src.read().energy_j == 0.0
    _write(root / "intel-rapl:0", energy_uj=4_000_000)  # +3 J
    _write(root / "intel-rapl:1", energy_uj=500_000)    # wrapped: +8.5 J
    assert src.read().energy_j == pytest.approx(11.5)
    assert "package-0" in src.describe()


def test_rapl_prefers_psys_alone(tmp_path):
    src = RaplSource(_rapl_tree(tmp_path, psys=True))
    assert [z.name for z in src.zones] == ["intel-rapl:1"]


def test_rapl_unreadable_is_reported(tmp_path):
    root = _rapl_tree(tmp_path)
    (root / "intel-rapl:0" / "energy_uj").unlink()  # what a root-only file looks like to a user
    det = detect_energy_source(root, tmp_path / "no_supply", termux_command="no-such-termux-cmd")
    assert det.source is None
    assert "RAPL" in det.note and "not readable" in det.note and "no battery" in det.note and "Termux" in det.note


def test_battery_sysfs_voltage_times_current_either_sign(tmp_path):
    bat = _write(tmp_path / "battery", type="Battery", status="Discharging", voltage_now=3_850_000,
                 current_now=-500_000, capacity=87, charge_full_design=3_000_000)
    s = read_battery_sysfs(bat)
    assert s.power_w == pytest.approx(3.85 * 0.5)
    assert (s.level_pct, s.voltage_v, s.capacity_mah) == (87.0, 3.85, 3000.0)
    _write(bat, current_now=500_000)
    assert read_battery_sysfs(bat).power_w == pytest.approx(1.925)
    _write(bat, power_now=2_500_000)  # power_now wins where present
    assert read_battery_sysfs(bat).power_w == pytest.approx(2.5)


def test_detect_battery_sysfs_skips_mains_and_refuses_charging(tmp_path):
    supply = tmp_path / "power_supply"
    _write(supply / "AC", type="Mains", online=1)
    bat = _write(supply / "BAT0", type="Battery", status="Charging", voltage_now=4_000_000, current_now=1_000_000)
    det = detect_energy_source(tmp_path / "no_powercap", supply, termux_command="no-such-termux-cmd")
    assert det.source is None and "BAT0 is Charging; unplug" in det.note
    _write(bat, status="Discharging")
    det = detect_energy_source(tmp_path / "no_powercap", supply, termux_command="no-such-termux-cmd")
    assert isinstance(det.source, BatterySysfsSource)
    assert det.source.read().power_w == pytest.approx(4.0)


def test_detect_level_only_battery(tmp_path):
    supply = tmp_path / "power_supply"
    _write(supply / "battery", type="Battery", status="Discharging", capacity=50, charge_full_design=2_915_000)
    det = detect_energy_source(tmp_path / "none", supply, termux_command="no-such-termux-cmd")
    assert isinstance(det.source, LevelOnlySource)
    assert det.source.capacity_mah == 2915.0
    r = det.source.read()
    assert (r.level_pct, r.voltage_v) == (50.0, 3.85)  # no voltage_now: the nominal voltage


def test_parse_termux_status_units():
    doc = {"health": "GOOD", "percentage": 81, "plugged": "UNPLUGGED", "status": "DISCHARGING",
           "temperature": 29.1, "current": -412000}
    s = parse_termux_status(json.dumps(doc))
    assert s["current_a"] == pytest.approx(0.412) and s["power_w"] == pytest.approx(0.412 * 3.85)
    assert s["level_pct"] == 81.0 and s["plugged"] == "UNPLUGGED"
    assert parse_termux_status(json.dumps(doc | {"current": 412}))["current_a"] == pytest.approx(0.412)  # mA phones
    assert parse_termux_status(json.dumps({"percentage": 5}))["power_w"] is None
    with pytest.raises(ValueError):
        parse_termux_status("[1, 2]")


def _fake_termux(tmp_path: Path, doc: dict) -> str:
    cmd = tmp_path / "termux-battery-status"
    cmd.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(doc)}\nEOF\n")
    cmd.chmod(cmd.stat().st_mode | stat.S_IEXEC)
    return str(cmd)


def test_detect_termux(tmp_path):
    cmd = _fake_termux(tmp_path, {"percentage": 60, "plugged": "UNPLUGGED", "status": "DISCHARGING", "current": -300000})
    det = detect_energy_source(tmp_path / "a", tmp_path / "b", termux_command=cmd)
    assert isinstance(det.source, TermuxSource)
    assert det.source.read().power_w == pytest.approx(0.3 * 3.85)
    cmd = _fake_termux(tmp_path, {"percentage": 60, "plugged": "PLUGGED_USB", "status": "CHARGING", "current": 300000})
    det = detect_energy_source(tmp_path / "a", tmp_path / "b", termux_command=cmd)
    assert det.source is None and "PLUGGED_USB; unplug" in det.note


def test_average_power_from_counter_and_samples():
    counter = [Reading(0.0, energy_j=10.0), Reading(1.0, energy_j=12.0), Reading(3.0, energy_j=16.0), Reading(9.0, energy_j=99.0)]
    assert average_power_w(counter, 0.0, 3.0) == pytest.approx(2.0)
    samples = [Reading(0.0, power_w=1.0), Reading(0.5, power_w=3.0), Reading(2.0, power_w=100.0)]
    assert average_power_w(samples, 0.0, 1.0) == pytest.approx(2.0)
    assert average_power_w(samples, 0.6, 1.0) is None
    with pytest.raises(ValueError):
        average_power_w(samples, 1.0, 1.0)


def test_average_power_from_level_uses_spec_formula():
    # 1000 mAh at 4 V: 1 % = 36 C x 4 V = 144 J; drops at t=10, 110, 210 -> two 100 s intervals
    rs = [Reading(t, level_pct=lv, voltage_v=4.0) for t, lv in [(0, 80), (10, 79), (60, 79), (110, 78), (210, 77)]]
    assert average_power_w(rs, 0.0, 300.0, capacity_mah=1000) == pytest.approx(1.44)
    assert average_power_w(rs, 0.0, 150.0, capacity_mah=1000) == pytest.approx(1.44)  # one whole interval
    assert average_power_w(rs, 20.0, 150.0, capacity_mah=1000) is None                # no whole interval
    assert average_power_w(rs, 0.0, 300.0) is None                                   # capacity unknown


def test_power_meter_samples_in_background():
    class Constant:
        name = "const"

        def read(self) -> Reading:
            import time
            return Reading(time.monotonic(), power_w=2.5)

        def describe(self) -> str:
            return "constant 2.5 W"

    import time
    with PowerMeter(Constant(), interval_s=0.01) as meter:
        t0 = meter.mark()
        time.sleep(0.05)
        t1 = meter.mark()
    assert len(meter.readings) >= 3
    assert meter.power_w(t0, t1) == pytest.approx(2.5)


# --- what mutation testing found (.ci/mutation.py core): survivors these tests kill ---


def test_battery_sysfs_powers_are_exact_unit_conversions(tmp_path):
    """µW and µV x µA to W exactly (pytest.approx's 1e-6 let a divisor of 1,000,001 through)."""
    bat = _write(tmp_path / "battery", type="Battery", status="Discharging", voltage_now=3_850_000, current_now=-500_000, capacity=87)
    assert read_battery_sysfs(bat).power_w == 3_850_000 / 1e6 * 500_000 / 1e6
    _write(bat, power_now=2_500_000)
    assert read_battery_sysfs(bat).power_w == 2.5
    r = BatterySysfsSource(bat).read()  # the level and voltage reach the reading
    assert (r.power_w, r.level_pct, r.voltage_v) == (2.5, 87.0, 3.85)


def test_parse_termux_status_without_plugged_or_status_says_unknown():
    s = parse_termux_status(json.dumps({"percentage": 40, "current": -100000}))
    assert (s["plugged"], s["status"], s["level_pct"]) == ("UNKNOWN", "UNKNOWN", 40.0)
    assert parse_termux_status(json.dumps({"status": "DISCHARGING"}))["status"] == "DISCHARGING"


def test_a_failing_termux_command_is_an_error_not_an_empty_reading(tmp_path):
    import subprocess

    cmd = tmp_path / "termux-battery-status"
    cmd.write_text("#!/bin/sh\necho '{\"percentage\": 50}'\nexit 3\n")
    cmd.chmod(cmd.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(subprocess.CalledProcessError):
        TermuxSource([str(cmd)]).status()


def test_power_meter_takes_the_sources_capacity():
    class Source:
        name, capacity_mah = "fake", 2915.0

        def read(self):
            return Reading(0.0, power_w=1.0)

        def describe(self):
            return "fake"

    assert PowerMeter(Source(), interval_s=0.05).capacity_mah == 2915.0
    assert PowerMeter(Source(), interval_s=0.05, capacity_mah=4000.0).capacity_mah == 4000.0


def test_rapl_describes_its_zones_by_name_and_path(tmp_path):
    root = _rapl_tree(tmp_path)
    src = RaplSource(root)
    zones = ", ".join(str(z) for z in src.zones)
    assert src.describe() == f"Intel RAPL (package-0, package-1: {zones})" and len(src.zones) == 2
