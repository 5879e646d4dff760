"""Reading a Linux device's energy: Intel RAPL, battery sysfs, Termux, or the battery level alone.

An :class:`EnergySource` returns :class:`Reading` s; :func:`average_power_w` turns the readings
of a time window into an average power, from whichever quantity the source gives:

- ``energy_j``: a cumulative counter (RAPL). Power = counter difference / time.
- ``power_w``: instantaneous power (battery sysfs, Termux). Power = mean of the samples.
- ``level_pct`` + ``voltage_v`` only (a battery that reports its level and nothing finer):
  power = mean over the complete 1 % discharge intervals inside the window, each priced with
  SPEC section 3's formula (:func:`~flamingo_sim.devices.battery.discharge_intervals`); None
  if the window holds no complete interval (a few steps never do: profile for minutes).

Sources, tried in this order by :func:`detect_energy_source`:

- :class:`RaplSource`: ``/sys/class/powercap/intel-rapl:N/energy_uj`` (µJ), the top-level
  zones (the ``psys`` platform zone alone when present, else the sum of the packages); a
  counter that wraps is corrected with the zone's ``max_energy_range_uj``. Often readable by
  root only.
- :class:`BatterySysfsSource`: ``/sys/class/power_supply/<bat>/`` of ``type`` Battery:
  ``power_now`` (µW) if present, else ``|voltage_now (µV) x current_now (µA)|`` (the sign of
  ``current_now`` differs between kernels, so its magnitude is used); refused while the status
  is Charging or Full (a charger feeds the load). With only ``capacity`` (%) it becomes a
  :class:`LevelOnlySource`.
- :class:`TermuxSource`: ``termux-battery-status`` JSON (Android, Termux:API): ``current``
  (µA; values under 20,000 in magnitude are taken as mA, as some phones report) times the
  nominal cell voltage 3.85 V (the JSON carries no voltage); refused unless UNPLUGGED.

Every source measures the whole device (or package), so the profiler subtracts the idle power
measured before the run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

from flamingo_sim.devices.battery import discharge_intervals

__all__ = [
    "Reading", "EnergySource", "RaplSource", "BatterySysfsSource", "LevelOnlySource", "TermuxSource",
    "Detection", "detect_energy_source", "average_power_w", "PowerMeter",
    "rapl_delta_uj", "read_battery_sysfs", "parse_termux_status",
    "POWERCAP_ROOT", "POWER_SUPPLY_ROOT", "NOMINAL_VOLTAGE_V",
]

POWERCAP_ROOT = Path("/sys/class/powercap")
POWER_SUPPLY_ROOT = Path("/sys/class/power_supply")
NOMINAL_VOLTAGE_V = 3.85


@dataclass(frozen=True)
class Reading:
    """One sample of a source at monotonic time ``time_s``; fields the source lacks are None."""

    time_s: float
    energy_j: float | None = None
    power_w: float | None = None
    level_pct: float | None = None
    voltage_v: float | None = None


class EnergySource(Protocol):
    """Something that reads a device's energy or power."""

    name: str

    def read(self) -> Reading: ...

    def describe(self) -> str: ...


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# Intel RAPL


def rapl_delta_uj(prev_uj: int, now_uj: int, max_range_uj: int) -> int:
    """Energy between two readings of a RAPL counter (µJ), across at most one wraparound."""
    delta = now_uj - prev_uj
    return delta + max_range_uj if delta < 0 else delta


def _rapl_zones(root: Path) -> list[Path]:
    """The top-level zones to sum: ``psys`` alone if present, else every package zone."""
    if not root.is_dir():
        return []
    top = sorted(p for p in root.iterdir() if p.name.startswith("intel-rapl:") and p.name.count(":") == 1)
    names = {p: _read_text(p / "name") or "" for p in top}
    psys = [p for p in top if names[p] == "psys"]
    return psys or [p for p in top if names[p] != "psys"]


class RaplSource:
    """Cumulative energy of the RAPL top-level zones under ``root`` (µJ counters, wraparound fixed)."""

    name = "rapl"

    def __init__(self, root: str | Path = POWERCAP_ROOT) -> None:
        self.zones = _rapl_zones(Path(root))
        if not self.zones:
            raise OSError(f"no RAPL zones under {root}")
        self._max = []
        self._last = []
        for z in self.zones:
            now, top = _read_int(z / "energy_uj"), _read_int(z / "max_energy_range_uj")
            if now is None or top is None:
                raise OSError(f"{z / 'energy_uj'} is not readable (RAPL counters are often root-only)")
            self._last.append(now)
            self._max.append(top)
        self._total_uj = 0
        self._lock = threading.Lock()

    def read(self) -> Reading:
        with self._lock:
            t = time.monotonic()
            for i, z in enumerate(self.zones):
                now = _read_int(z / "energy_uj")
                if now is None:
                    raise OSError(f"{z / 'energy_uj'} stopped being readable")
                self._total_uj += rapl_delta_uj(self._last[i], now, self._max[i])
                self._last[i] = now
            return Reading(t, energy_j=self._total_uj * 1e-6)

    def describe(self) -> str:
        names = [(_read_text(z / "name") or z.name) for z in self.zones]
        return f"Intel RAPL ({', '.join(names)}: {', '.join(str(z) for z in self.zones)})"


# ---------------------------------------------------------------------------------------------
# Battery sysfs


@dataclass(frozen=True)
class BatteryStatus:
    """What a battery's sysfs directory says now (None where a file is missing)."""

    status: str
    power_w: float | None
    level_pct: float | None
    voltage_v: float | None
    capacity_mah: float | None  # charge_full_design


def read_battery_sysfs(bat: str | Path) -> BatteryStatus:
    """Parse ``/sys/class/power_supply/<bat>/`` (µV, µA, µW, µAh; see the module docstring)."""
    bat = Path(bat)
    uv, ua, uw = _read_int(bat / "voltage_now"), _read_int(bat / "current_now"), _read_int(bat / "power_now")
    if uw is not None:
        power = abs(uw) / 1e6
    elif uv is not None and ua is not None:
        power = abs(uv / 1e6 * ua / 1e6)
    else:
        power = None
    level = _read_int(bat / "capacity")
    design = _read_int(bat / "charge_full_design")
    return BatteryStatus(
        status=_read_text(bat / "status") or "Unknown",
        power_w=power,
        level_pct=float(level) if level is not None else None,
        voltage_v=uv / 1e6 if uv else None,
        capacity_mah=design / 1000.0 if design else None,
    )


def _batteries(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (_read_text(p / "type") or "").lower() == "battery")


class BatterySysfsSource:
    """Instantaneous power of a sysfs battery (``power_now`` or ``voltage_now x current_now``)."""

    name = "battery-sysfs"

    def __init__(self, bat: str | Path) -> None:
        self.bat = Path(bat)

    def read(self) -> Reading:
        s = read_battery_sysfs(self.bat)
        return Reading(time.monotonic(), power_w=s.power_w, level_pct=s.level_pct, voltage_v=s.voltage_v)

    @property
    def capacity_mah(self) -> float | None:
        """The design capacity (``charge_full_design``), None if not given."""
        return read_battery_sysfs(self.bat).capacity_mah

    def describe(self) -> str:
        return f"battery sysfs {self.bat} (power_now or voltage_now x current_now)"


class LevelOnlySource:
    """A battery that gives its level (%) and maybe its voltage: the SPEC 1 % formula."""

    name = "battery-level"

    def __init__(self, read_level: Callable[[], tuple[float | None, float | None]], capacity_mah: float, where: str) -> None:
        self._read_level, self.capacity_mah, self.where = read_level, capacity_mah, where

    def read(self) -> Reading:
        level, volt = self._read_level()
        return Reading(time.monotonic(), level_pct=level, voltage_v=volt or NOMINAL_VOLTAGE_V)

    def describe(self) -> str:
        return (f"battery level of {self.where} ({self.capacity_mah:g} mAh): power over whole 1 % discharge "
                "intervals, SPEC section 3 formula")


# ---------------------------------------------------------------------------------------------
# Termux


def parse_termux_status(text: str) -> dict:
    """``termux-battery-status`` output -> {plugged, status, level_pct, current_a, power_w}.

    ``current`` is µA on most phones, mA on some: values under 20,000 in magnitude are taken
    as mA (no phone draws 20 A, none idles under 20 mA). Power uses the nominal 3.85 V.
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("termux-battery-status did not print a JSON object")
    cur = data.get("current")
    current_a = None
    if isinstance(cur, (int, float)):
        current_a = abs(cur) * (1e-3 if abs(cur) < 20_000 else 1e-6)
    return {
        "plugged": str(data.get("plugged", "UNKNOWN")),
        "status": str(data.get("status", "UNKNOWN")),
        "level_pct": float(data["percentage"]) if isinstance(data.get("percentage"), (int, float)) else None,
        "current_a": current_a,
        "power_w": current_a * NOMINAL_VOLTAGE_V if current_a is not None else None,
    }


class TermuxSource:
    """Power from ``termux-battery-status`` (current x nominal voltage)."""

    name = "termux"

    def __init__(self, command: Sequence[str] = ("termux-battery-status",), timeout_s: float = 10.0) -> None:
        self.command, self.timeout_s = list(command), timeout_s

    def status(self) -> dict:
        out = subprocess.run(self.command, capture_output=True, text=True, timeout=self.timeout_s, check=True)
        return parse_termux_status(out.stdout)

    def read(self) -> Reading:
        t = time.monotonic()
        s = self.status()
        return Reading(t, power_w=s["power_w"], level_pct=s["level_pct"])

    def describe(self) -> str:
        return f"{self.command[0]} (Termux:API): |current| x {NOMINAL_VOLTAGE_V} V nominal"


# ---------------------------------------------------------------------------------------------
# Detection


@dataclass(frozen=True)
class Detection:
    """The source found (None if none) and what was tried, for the profile's ``energy_note``."""

    source: EnergySource | None
    tried: tuple[str, ...] = field(default_factory=tuple)

    @property
    def note(self) -> str:
        return "; ".join(self.tried)


def detect_energy_source(powercap_root: str | Path = POWERCAP_ROOT, power_supply_root: str | Path = POWER_SUPPLY_ROOT,
                         termux_command: str = "termux-battery-status", capacity_mah: float | None = None) -> Detection:
    """The first readable source (module docstring order), and why each earlier one was not."""
    tried: list[str] = []
    try:
        rapl = RaplSource(powercap_root)
        rapl.read()
        return Detection(rapl, tuple(tried))
    except OSError as exc:
        tried.append(f"RAPL: {exc}")
    bats = _batteries(Path(power_supply_root))
    if not bats:
        tried.append(f"battery sysfs: no battery under {power_supply_root}")
    for bat in bats:
        s = read_battery_sysfs(bat)
        if s.status.lower() in ("charging", "full"):
            tried.append(f"battery sysfs: {bat.name} is {s.status}; unplug the charger to measure energy")
        elif s.power_w is not None:
            return Detection(BatterySysfsSource(bat), tuple(tried))
        elif s.level_pct is not None and (capacity_mah or s.capacity_mah):
            def level(bat: Path = bat) -> tuple[float | None, float | None]:
                r = read_battery_sysfs(bat)
                return r.level_pct, r.voltage_v
            return Detection(LevelOnlySource(level, float(capacity_mah or s.capacity_mah), str(bat)), tuple(tried))  # type: ignore[arg-type]
        else:
            tried.append(f"battery sysfs: {bat.name} gives neither power nor a level with a known capacity")
    if shutil.which(termux_command) is None:
        tried.append(f"Termux: no {termux_command} command")
    else:
        src = TermuxSource((termux_command,))
        try:
            termux = src.status()
            if termux["plugged"].upper() != "UNPLUGGED":
                tried.append(f"Termux: the phone is {termux['plugged']}; unplug the charger to measure energy")
            elif termux["power_w"] is not None:
                return Detection(src, tuple(tried))
            else:
                tried.append("Termux: termux-battery-status gives no current")
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            tried.append(f"Termux: {termux_command} failed: {exc}")
    return Detection(None, tuple(tried))


# ---------------------------------------------------------------------------------------------
# Windows of readings


def average_power_w(readings: Sequence[Reading], start_s: float, end_s: float, capacity_mah: float | None = None) -> float | None:
    """Average power (W) over ``[start_s, end_s]`` from ``readings`` (module docstring); None if
    the readings cannot tell (fewer than two counter readings, no power sample, no complete 1 %
    interval)."""
    if not end_s > start_s:
        raise ValueError(f"need end_s > start_s, got [{start_s}, {end_s}]")
    inside = [r for r in readings if start_s <= r.time_s <= end_s]
    counters = [r for r in inside if r.energy_j is not None]
    if len(counters) >= 2:
        a, b = counters[0], counters[-1]
        return (b.energy_j - a.energy_j) / (b.time_s - a.time_s) if b.time_s > a.time_s else None  # type: ignore[operator]
    powers = [r.power_w for r in inside if r.power_w is not None]
    if powers:
        return float(np.mean(powers))
    levels = [r for r in readings if r.level_pct is not None]
    if capacity_mah and len(levels) >= 3:
        iv = discharge_intervals([r.time_s for r in levels], [r.level_pct for r in levels],
                                 [r.voltage_v or NOMINAL_VOLTAGE_V for r in levels], capacity_mah)
        full = (iv["start_s"] >= start_s) & (iv["end_s"] <= end_s)
        if full.any():
            return float(iv["energy_j"][full].sum() / (iv["end_s"][full] - iv["start_s"][full]).sum())
    return None


class PowerMeter:
    """Samples ``source`` every ``interval_s`` in a background thread; :meth:`mark` adds a
    reading now (window boundaries), :meth:`power_w` averages a window. Use as a context manager."""

    def __init__(self, source: EnergySource, interval_s: float = 0.05, capacity_mah: float | None = None) -> None:
        self.source, self.interval_s = source, interval_s
        self.capacity_mah = capacity_mah if capacity_mah is not None else getattr(source, "capacity_mah", None)
        self.readings: list[Reading] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flamingo-power-meter", daemon=True)

    def _sample(self) -> Reading | None:
        try:
            r = self.source.read()
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            self.errors.append(str(exc))
            return None
        with self._lock:
            self.readings.append(r)
        return r

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def mark(self) -> float:
        """Take a reading now; returns the time to use as a window boundary."""
        r = self._sample()
        return r.time_s if r is not None else time.monotonic()

    def power_w(self, start_s: float, end_s: float) -> float | None:
        with self._lock:
            rs = sorted(self.readings, key=lambda r: r.time_s)
        return average_power_w(rs, start_s, end_s, self.capacity_mah)

    def __enter__(self) -> "PowerMeter":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=max(1.0, 2 * self.interval_s))
