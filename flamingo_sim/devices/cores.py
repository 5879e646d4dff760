"""Discovering a Linux machine's CPU cores and grouping them into the simulator's core types.

The grouping feeds :class:`~flamingo_sim.devices.soc.CoreLayout`, so the profiler measures
exactly the state space the simulator uses (:func:`~flamingo_sim.devices.soc.state_space`).

Each usable core (one in ``os.sched_getaffinity(0)``) gets a *speed key*, from the first of
these sources that covers every usable core:

1. ``cpufreq``: ``<root>/cpuN/cpufreq/cpuinfo_max_freq`` (kHz), the maximum clock;
2. ``cpu_capacity``: ``<root>/cpuN/cpu_capacity`` (arm64's relative capacity, 1024 = largest);
3. ``cpuinfo``: ``/proc/cpuinfo``'s ``CPU part`` (ARM core type); parts are ranked by the id
   of their first core, since ARM SoCs number the little cores first. x86's ``cpu MHz`` is the
   *current* clock and is deliberately not used;
4. none: every core gets the same key.

Cores whose keys are within 3 % of the lowest key of a group join that group (so per-core turbo
bins of one core type stay together; a Prime core clocks about 17 % above its siblings). Then:

- one group (a homogeneous machine): every core is **big**, no low-power cores. The baseline
  (all big cores) is then all cores, which is what PyTorch uses by default, and the choices
  are the prefixes ``0, 01, ...``;
- two or more groups: the slowest group is **low-power**, all others are **big**; with three or
  more groups and a single core in the fastest group, that core is the **Prime** core
  (a 4+3+1 SD865-like machine gives the 11 choices of SPEC section 3).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from flamingo_sim.devices.soc import CoreLayout

__all__ = ["CoreDiscovery", "discover_cores", "group_cores", "SYS_CPU_ROOT", "CPUINFO_PATH", "GROUP_TOLERANCE"]

SYS_CPU_ROOT = Path("/sys/devices/system/cpu")
CPUINFO_PATH = Path("/proc/cpuinfo")
#: Keys within this fraction above a group's lowest key belong to that group.
GROUP_TOLERANCE = 0.03

KeySource = Literal["cpufreq", "cpu_capacity", "cpuinfo", "none"]


@dataclass(frozen=True)
class CoreDiscovery:
    """The discovered layout, the per-core speed keys and where they came from."""

    layout: CoreLayout
    keys: dict[int, float]
    key_source: KeySource

    def describe(self) -> str:
        """One line, e.g. ``"8 cores (cpufreq): low_power 0-3 @ 1.8 GHz, big 4-6 @ 2.42 GHz, prime 7 @ 2.84 GHz"``."""
        lay = self.layout
        parts = []
        plain_big = tuple(c for c in lay.big if c != lay.prime)
        for name, cores in (("low_power", lay.low_power), ("big", plain_big), ("prime", (lay.prime,) if lay.prime is not None else ())):
            if cores:
                parts.append(f"{name} {_ranges(cores)}{self._key_text(cores[0])}")
        return f"{lay.n_cores} cores ({self.key_source}): " + ", ".join(parts)

    def _key_text(self, core: int) -> str:
        k = self.keys.get(core)
        if self.key_source == "cpufreq" and k:
            return f" @ {k / 1e6:.3g} GHz"
        if self.key_source == "cpu_capacity" and k:
            return f" (capacity {k:g})"
        return ""


def _ranges(cores: tuple[int, ...]) -> str:
    """``(0, 1, 2, 3, 5)`` -> ``"0-3,5"``."""
    out: list[str] = []
    cs = sorted(cores)
    start = prev = cs[0]
    ends: list[int | None] = [*cs[1:], None]
    for c in ends:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        if c is not None:
            start = prev = c
    return ",".join(out)


def group_cores(keys: dict[int, float], tolerance: float = GROUP_TOLERANCE) -> CoreLayout:
    """Group cores by speed key (see the module docstring) into a :class:`CoreLayout`."""
    if not keys:
        raise ValueError("no cores to group")
    groups: list[list[int]] = []
    floor = None
    for core in sorted(keys, key=lambda c: (keys[c], c)):
        if floor is None or keys[core] > floor * (1 + tolerance):
            groups.append([])
            floor = keys[core]
        groups[-1].append(core)
    if len(groups) == 1:
        return CoreLayout(low_power=(), big=tuple(sorted(groups[0])))
    low = tuple(sorted(groups[0]))
    big = tuple(sorted(c for g in groups[1:] for c in g))
    prime = groups[-1][0] if len(groups) >= 3 and len(groups[-1]) == 1 else None
    return CoreLayout(low_power=low, big=big, prime=prime)


def _read_number(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _cpuinfo_parts(text: str) -> dict[int, str]:
    """``processor`` id -> ``CPU part`` from /proc/cpuinfo's text (ARM); {} where absent."""
    parts: dict[int, str] = {}
    proc: int | None = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "processor" and value.isdigit():
            proc = int(value)
        elif key == "cpu part" and proc is not None:
            parts[proc] = value
    return parts


def _sysfs_cores(root: Path) -> list[int]:
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if (m := re.fullmatch(r"cpu(\d+)", p.name)))


def discover_cores(root: str | Path = SYS_CPU_ROOT, cpuinfo_path: str | Path = CPUINFO_PATH,
                   allowed: set[int] | None = None) -> CoreDiscovery:
    """The cores this process may run on, grouped into core types (module docstring).

    ``root`` and ``cpuinfo_path`` are injectable for tests; ``allowed`` defaults to
    ``os.sched_getaffinity(0)`` (the cores of ``root`` when that call is missing).
    """
    root = Path(root)
    if allowed is None:
        allowed = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(_sysfs_cores(root))
    cores = sorted(allowed)
    if not cores:
        raise ValueError("no usable cores")
    freq = {c: _read_number(root / f"cpu{c}" / "cpufreq" / "cpuinfo_max_freq") for c in cores}
    if all(v and v > 0 for v in freq.values()):
        return CoreDiscovery(group_cores(freq), freq, "cpufreq")  # type: ignore[arg-type]
    cap = {c: _read_number(root / f"cpu{c}" / "cpu_capacity") for c in cores}
    if all(v and v > 0 for v in cap.values()):
        return CoreDiscovery(group_cores(cap), cap, "cpu_capacity")  # type: ignore[arg-type]
    try:
        parts = _cpuinfo_parts(Path(cpuinfo_path).read_text())
    except OSError:
        parts = {}
    if parts and all(c in parts for c in cores):
        first: dict[str, int] = {}
        for c in cores:
            first.setdefault(parts[c], c)
        rank = {part: i for i, part in enumerate(sorted(first, key=first.__getitem__))}
        keys = {c: float(2 ** rank[parts[c]]) for c in cores}  # ranks far apart: never merged by the tolerance
        return CoreDiscovery(group_cores(keys), keys, "cpuinfo")
    keys = {c: 1.0 for c in cores}
    return CoreDiscovery(group_cores(keys), keys, "none")
