"""Core discovery and grouping on fixture sysfs trees (and once on this machine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flamingo_sim.devices.cores import discover_cores, group_cores
from flamingo_sim.devices.soc import state_space

SD865_KHZ = [1804800] * 4 + [2419200] * 3 + [2841600]
SD845_KHZ = [1766400] * 4 + [2803200] * 4


def _cpufreq_tree(root: Path, khz: list[int | None], capacity: list[int] | None = None) -> Path:
    for i, f in enumerate(khz):
        d = root / f"cpu{i}"
        d.mkdir(parents=True)
        if f is not None:
            (d / "cpufreq").mkdir()
            (d / "cpufreq" / "cpuinfo_max_freq").write_text(f"{f}\n")
        if capacity is not None:
            (d / "cpu_capacity").write_text(f"{capacity[i]}\n")
    (root / "cpufreq").mkdir(exist_ok=True)  # not a core
    return root


def test_sd865_like_4_3_1_gives_prime_and_11_choices(tmp_path):
    d = discover_cores(_cpufreq_tree(tmp_path, SD865_KHZ), allowed=set(range(8)))
    assert d.key_source == "cpufreq"
    assert (d.layout.low_power, d.layout.big, d.layout.prime) == ((0, 1, 2, 3), (4, 5, 6, 7), 7)
    labels = [c.label for c in state_space(d.layout)]
    assert labels == ["4567", "457", "456", "47", "45", "7", "4", "0123", "012", "01", "0"]
    assert d.describe() == "8 cores (cpufreq): low_power 0-3 @ 1.8 GHz, big 4-6 @ 2.42 GHz, prime 7 @ 2.84 GHz"


def test_sd845_like_4_4_has_no_prime_and_8_choices(tmp_path):
    d = discover_cores(_cpufreq_tree(tmp_path, SD845_KHZ), allowed=set(range(8)))
    assert (d.layout.low_power, d.layout.big, d.layout.prime) == ((0, 1, 2, 3), (4, 5, 6, 7), None)
    assert [c.label for c in state_space(d.layout)] == ["4567", "456", "45", "4", "0123", "012", "01", "0"]


def test_homogeneous_cores_are_all_big_within_tolerance(tmp_path):
    # turbo bins 2 % apart stay one type; all cores are "big", so the baseline is all cores
    d = discover_cores(_cpufreq_tree(tmp_path, [4900000, 5000000, 4900000, 4950000]), allowed={0, 1, 2, 3})
    assert (d.layout.low_power, d.layout.big, d.layout.prime) == ((), (0, 1, 2, 3), None)
    assert [c.label for c in state_space(d.layout)] == ["0123", "012", "01", "0"]


def test_only_allowed_cores_are_used(tmp_path):
    d = discover_cores(_cpufreq_tree(tmp_path, SD865_KHZ), allowed={0, 1, 4, 7})
    assert (d.layout.low_power, d.layout.big, d.layout.prime) == ((0, 1), (4, 7), 7)
    assert [c.label for c in state_space(d.layout)] == ["47", "7", "4", "01", "0"]


def test_group_cores_two_groups_single_fast_core_is_big_not_prime():
    lay = group_cores({0: 1.0, 1: 1.0, 2: 2.0})
    assert (lay.low_power, lay.big, lay.prime) == ((0, 1), (2,), None)


def test_cpu_capacity_fallback(tmp_path):
    root = _cpufreq_tree(tmp_path, [None] * 8, capacity=[325] * 4 + [871] * 3 + [1024])
    d = discover_cores(root, cpuinfo_path=tmp_path / "missing", allowed=set(range(8)))
    assert d.key_source == "cpu_capacity"
    assert (d.layout.low_power, d.layout.prime) == ((0, 1, 2, 3), 7)


def test_proc_cpuinfo_cpu_part_fallback(tmp_path):
    root = _cpufreq_tree(tmp_path / "sys", [None] * 6)
    blocks = [f"processor\t: {i}\nBogoMIPS\t: 38.40\nCPU part\t: {'0xd05' if i < 4 else '0xd0b'}\n" for i in range(6)]
    (tmp_path / "cpuinfo").write_text("\n".join(blocks) + "\nHardware\t: Qualcomm\n")
    d = discover_cores(root, cpuinfo_path=tmp_path / "cpuinfo", allowed=set(range(6)))
    assert d.key_source == "cpuinfo"
    assert (d.layout.low_power, d.layout.big, d.layout.prime) == ((0, 1, 2, 3), (4, 5), None)


def test_no_information_means_one_type(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\ncpu MHz\t: 2600.0\n\nprocessor\t: 1\ncpu MHz\t: 1400.0\n")
    d = discover_cores(tmp_path / "nosys", cpuinfo_path=tmp_path / "cpuinfo", allowed={0, 1})
    assert d.key_source == "none"  # x86's current "cpu MHz" is not a core type
    assert [c.label for c in state_space(d.layout)] == ["01", "0"]


def test_this_machine():
    d = discover_cores()
    assert set(d.layout.low_power) | set(d.layout.big) == os.sched_getaffinity(0)
    assert len(state_space(d.layout)) >= 1


def test_group_cores_needs_cores():
    with pytest.raises(ValueError):
        group_cores({})
