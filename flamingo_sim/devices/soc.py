"""SoCs, phones and execution choices.

A phone's SoC has heterogeneous CPU cores: low-power cores, big ("low-latency") cores and, on
some SoCs, one Prime core among the big ones that clocks higher. An *execution choice* is the
set of cores the training process is pinned to, with one thread per core.

Phones and SoCs are described in ``profiles/phones.yaml`` (see :func:`load_phones`); a user
adds a phone there, not in code, or in a file of its own under ``profiles/phones.d/`` (same
schema; ``flamingo-sim profile`` writes the measured machine there).

State space (SPEC section 3): homogeneous cores are interchangeable and mixing low-power with
big cores never helps, so the choices are the prefixes of the low-power cores
(``0, 01, 012, 0123``) and of the big cores (``4, 45, 456, 4567``); with a Prime core the
big prefixes are taken over the non-Prime big cores, each with and without the Prime core
(``4, 45, 456, 7, 47, 457, 4567``): 8 choices without a Prime core, 11 with one.

Order (largest compute footprint first), from the paper's three rules:

1. more cores of one type beat fewer;
2. any set of big cores beats any set of low-power cores;
3. with a Prime core, sets using it beat same-size sets without it.

So the sort key is ``(uses big cores, number of cores, uses the Prime core)``, descending.
Pixel 3 (SD845): ``4567, 456, 45, 4, 0123, 012, 01, 0``; SD855/SD865:
``4567, 457, 456, 47, 45, 7, 4, 0123, 012, 01, 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from flamingo_sim.config import from_mapping, load_yaml
from flamingo_sim.devices.memory import PhoneMemory
from flamingo_sim.devices.thermal import ThermalBody, ThrottleRule
from flamingo_sim.errors import ConfigError

__all__ = [
    "CoreLayout",
    "CoreTypeModel",
    "AndroidScheduling",
    "APP_STATES",
    "SocSpec",
    "Phone",
    "Choice",
    "state_space",
    "baseline_cores",
    "load_phones",
    "PHONES_FILE",
    "PHONES_DIR",
    "MAH_TO_COULOMB",
]

#: Name of the phone/SoC catalogue inside a profiles directory.
PHONES_FILE = "phones.yaml"
#: Directory of extra phone/SoC files (same schema) inside a profiles directory.
PHONES_DIR = "phones.d"
#: 1 mAh = 3.6 C.
MAH_TO_COULOMB = 3.6


@dataclass(frozen=True)
class CoreLayout:
    """Core ids by type. ``prime`` (if not None) must be one of ``big``."""

    low_power: tuple[int, ...]
    big: tuple[int, ...]
    prime: int | None = None

    def __post_init__(self) -> None:
        if not self.low_power and not self.big:
            raise ValueError("a core layout needs at least one core")
        ids = list(self.low_power) + list(self.big)
        if len(set(ids)) != len(ids):
            raise ValueError(f"core ids must be distinct, got low_power={list(self.low_power)} big={list(self.big)}")
        if any(i < 0 for i in ids):
            raise ValueError("core ids must be non-negative")
        if self.prime is not None and self.prime not in self.big:
            raise ValueError(f"prime core {self.prime} must be one of the big cores {list(self.big)}")

    @property
    def n_cores(self) -> int:
        return len(self.low_power) + len(self.big)

    def core_type(self, core: int) -> str:
        """``'low_power'``, ``'big'`` or ``'prime'``."""
        if core == self.prime:
            return "prime"
        if core in self.big:
            return "big"
        if core in self.low_power:
            return "low_power"
        raise ValueError(f"core {core} is not in this layout")


@dataclass(frozen=True)
class CoreTypeModel:
    """One core type of a SoC: its training speed, its power, and the kernel's Energy Model inputs.

    ``speed``: sustained training throughput of one core relative to a Cortex-A76 at 2.42 GHz
    (the calibration model, :mod:`.calibrate`, and a thread the scheduler moves to this core,
    :mod:`.scheduling`). ``power_w``: power of one fully busy core above idle (the physical power
    model, :mod:`.power`). ``capacity_dmips_mhz``, ``dynamic_power_coefficient`` (uW/MHz/V^2) and
    ``max_freq_mhz``: the device tree's Energy Model inputs (optional: a measured phone may not
    know them); the kernel orders CPUs by ``capacity_dmips_mhz x max_freq_mhz``. ``min_freq_mhz``:
    the lowest operating point of the cluster's OPP table, where a governor parks a cluster whose
    threads wait (:func:`flamingo_sim.devices.power.waiting_mechanisms`).
    """

    speed: float
    power_w: float
    capacity_dmips_mhz: float | None = None
    dynamic_power_coefficient: float | None = None
    max_freq_mhz: float | None = None
    min_freq_mhz: float | None = None

    def __post_init__(self) -> None:
        if not self.speed > 0 or not self.power_w > 0:
            raise ValueError("speed and power_w must be positive")
        for key in ("capacity_dmips_mhz", "dynamic_power_coefficient", "max_freq_mhz", "min_freq_mhz"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise ValueError(f"{key} must be positive, got {value}")
        if self.min_freq_mhz is not None and self.max_freq_mhz is not None and self.min_freq_mhz > self.max_freq_mhz:
            raise ValueError(f"min_freq_mhz {self.min_freq_mhz} is above max_freq_mhz {self.max_freq_mhz}")

    @property
    def capacity(self) -> float:
        """The kernel's capacity of this core (DMIPS/MHz x MHz); its ``speed`` where the device tree's inputs are not given."""
        if self.capacity_dmips_mhz is None or self.max_freq_mhz is None:
            return self.speed
        return self.capacity_dmips_mhz * self.max_freq_mhz


#: The app states whose cpuset a phone's catalogue entry gives (``phones.<name>.android.cpusets``).
APP_STATES = ("top_app", "foreground", "background")


@dataclass(frozen=True)
class AndroidScheduling:
    """How a phone's Android schedules apps: its release and each app state's cpuset (``phones.yaml``).

    From Android 12 every app state has its own cpu cgroup and two groups sharing a core split it
    by their ``cpu.shares`` (AOSP sets none: equal); before 12 app threads share the root cgroup
    and split a core by their nice weights (:mod:`flamingo_sim.devices.scheduling`).
    """

    #: The Android release the phone runs (decides how a shared core is split).
    version: int
    #: App state -> the cpus of its cpuset (top_app, foreground, background), from the vendor's init files.
    cpusets: dict[str, tuple[int, ...]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.version < 1:
            raise ValueError(f"version must be a positive Android release, got {self.version}")
        missing = [s for s in APP_STATES if s not in self.cpusets]
        unknown = sorted(set(self.cpusets) - set(APP_STATES))
        if missing or unknown:
            raise ValueError(f"cpusets: expected the app states {', '.join(APP_STATES)}; "
                             + (f"missing {missing[0]!r}" if missing else f"unknown {unknown[0]!r}"))
        object.__setattr__(self, "cpusets", {k: tuple(sorted(set(int(c) for c in v))) for k, v in self.cpusets.items()})
        for state, cpus in self.cpusets.items():
            if not cpus or min(cpus) < 0:
                raise ValueError(f"cpusets.{state}: expected one or more core ids >= 0, got {list(cpus)}")


@dataclass(frozen=True)
class SocSpec:
    """One SoC: its core layout and the per-core-type model used to calibrate profiles."""

    name: str
    low_power: tuple[int, ...]
    big: tuple[int, ...]
    prime: int | None = None
    uncore_power_w: float = 0.0
    core_types: dict[str, CoreTypeModel] = field(default_factory=dict, hash=False)
    foreground_cores: tuple[int, ...] = ()  # where the owner's foreground app runs; () = the two highest big cores
    shared_core_slowdown: float = 2.0  # a training step sharing one of them runs this much slower
    throttle: dict[str, ThrottleRule] = field(default_factory=dict, hash=False)  # core type -> its rule (devices.thermal)

    def __post_init__(self) -> None:
        CoreLayout(self.low_power, self.big, self.prime)  # validates
        types = {"low_power", "big"} | ({"prime"} if self.prime is not None else set())
        unknown = sorted(set(self.throttle) - types)
        if unknown:
            raise ValueError(f"throttle: {unknown[0]!r} is not a core type of this SoC ({', '.join(sorted(types))})")
        if not self.foreground_cores:
            object.__setattr__(self, "foreground_cores", tuple(sorted(self.big or self.low_power)[-2:]))
        if not set(self.foreground_cores) <= set(self.low_power) | set(self.big):
            raise ValueError(f"foreground_cores {list(self.foreground_cores)} must be cores of the SoC")
        if self.shared_core_slowdown < 1.0:
            raise ValueError(f"shared_core_slowdown must be >= 1, got {self.shared_core_slowdown}")
        needed = {"low_power", "big"} | ({"prime"} if self.prime is not None else set())
        missing = needed - set(self.core_types) if self.core_types else set()
        if missing:
            raise ValueError(f"core_types lacks {sorted(missing)}")
        if self.uncore_power_w < 0:
            raise ValueError("uncore_power_w must be >= 0")

    @property
    def layout(self) -> CoreLayout:
        return CoreLayout(self.low_power, self.big, self.prime)

    def throttle_rule(self, cores: tuple[int, ...]) -> ThrottleRule | None:
        """The throttling of a step on ``cores``: capped at the lowest threshold of their clusters, then at the
        slowest cluster's speed and power (a step on several clusters runs at its slowest one's pace); None
        where a core is not this SoC's or none of their clusters has a rule."""
        try:
            types = [self.layout.core_type(c) for c in cores]
        except ValueError:
            return None
        rules = [self.throttle[t] for t in types if t in self.throttle]
        if not rules:
            return None
        slow = min(rules, key=lambda r: r.speed_frac)
        return ThrottleRule(min(r.threshold_c for r in rules), slow.speed_frac, slow.power_frac)


@dataclass(frozen=True)
class Phone:
    """A device model: name, SoC and battery. ``capacity_j`` = mAh x 3.6 x nominal voltage."""

    name: str
    display_name: str
    soc: SocSpec
    capacity_mah: float
    voltage_v: float = 3.85
    body: ThermalBody | None = None  # mass and dimensions: the thermal circuit (devices.thermal)
    memory: PhoneMemory | None = None  # RAM and the app's limit (devices.memory)
    android: AndroidScheduling | None = None  # its Android's app cpusets (the `android` interference model)

    def __post_init__(self) -> None:
        if not self.capacity_mah > 0:
            raise ValueError(f"capacity_mah must be positive, got {self.capacity_mah}")
        if not self.voltage_v > 0:
            raise ValueError(f"voltage_v must be positive, got {self.voltage_v}")
        if self.android is not None:
            cores = set(self.soc.low_power) | set(self.soc.big)
            for state, cpus in self.android.cpusets.items():
                if not set(cpus) <= cores:
                    raise ValueError(f"android.cpusets.{state}: {sorted(set(cpus) - cores)} are not cores of SoC {self.soc.name}")

    @property
    def layout(self) -> CoreLayout:
        return self.soc.layout

    @property
    def capacity_j(self) -> float:
        return self.capacity_mah * MAH_TO_COULOMB * self.voltage_v

    def state_space(self) -> list["Choice"]:
        return state_space(self.layout)


@dataclass(frozen=True, order=False)
class Choice:
    """An execution choice: the cores training is pinned to (one thread per core)."""

    cores: tuple[int, ...]
    uses_big: bool
    uses_prime: bool

    @property
    def label(self) -> str:
        """The paper's name, e.g. ``"4567"`` (core ids concatenated, ascending)."""
        return "".join(str(c) for c in self.cores)

    @property
    def n_threads(self) -> int:
        return len(self.cores)

    def sort_key(self) -> tuple[bool, int, bool]:
        """Larger is a larger compute footprint (rules 2, 1, 3)."""
        return (self.uses_big, len(self.cores), self.uses_prime)

    def __str__(self) -> str:
        return self.label


def _choice(cores: list[int], layout: CoreLayout) -> Choice:
    cs = tuple(sorted(cores))
    return Choice(cs, uses_big=any(c in layout.big for c in cs), uses_prime=layout.prime in cs)


def state_space(layout: CoreLayout) -> list[Choice]:
    """All execution choices of ``layout``, ordered by the paper's three rules (largest first)."""
    low = sorted(layout.low_power)
    plain_big = sorted(c for c in layout.big if c != layout.prime)
    out = [_choice(low[:n], layout) for n in range(1, len(low) + 1)]
    out += [_choice(plain_big[:n], layout) for n in range(1, len(plain_big) + 1)]
    if layout.prime is not None:
        out += [_choice(plain_big[:n] + [layout.prime], layout) for n in range(0, len(plain_big) + 1)]
    # Python's sort is stable; the key is total over this set, so the order is unique.
    return sorted(out, key=Choice.sort_key, reverse=True)


def baseline_cores(layout: CoreLayout) -> tuple[int, ...]:
    """PyTorch's default choice: all big cores (``4567`` on the shipped SoCs, the Prime core
    counted as big), or all low-power cores on a layout without big cores."""
    return tuple(sorted(layout.big)) or tuple(sorted(layout.low_power))


# ---------------------------------------------------------------------------------------------
# The catalogue file


@dataclass(frozen=True)
class _SocEntry:
    low_power: list[int]
    big: list[int]
    prime: int | None = None
    uncore_power_w: float = 0.0
    core_types: dict[str, CoreTypeModel] = field(default_factory=dict)
    description: str = ""
    foreground_cores: list[int] = field(default_factory=list)
    shared_core_slowdown: float = 2.0
    throttle: dict[str, ThrottleRule] = field(default_factory=dict)


@dataclass(frozen=True)
class _PhoneEntry:
    soc: str
    capacity_mah: float
    display_name: str = ""
    voltage_v: float = 3.85
    body: Optional[ThermalBody] = None
    memory: Optional[PhoneMemory] = None
    android: Optional[AndroidScheduling] = None


@dataclass(frozen=True)
class _PhonesFile:
    socs: dict[str, _SocEntry]
    phones: dict[str, _PhoneEntry]


def load_phones(profiles_dir: str | Path) -> dict[str, Phone]:
    """Read ``<profiles_dir>/phones.yaml`` and ``<profiles_dir>/phones.d/*.yaml``: SoCs and
    phones, keyed by phone name.

    A file under ``phones.d`` may use the SoCs of ``phones.yaml`` and its own; a name defined
    twice is an error. Errors (unknown keys, an unknown SoC, a bad layout) raise
    :class:`ConfigError` naming the file and the key.
    """
    path = Path(profiles_dir) / PHONES_FILE
    socs, phones = _load_phones_file(path, {})
    extra_dir = Path(profiles_dir) / PHONES_DIR
    for extra in sorted(extra_dir.glob("*.yaml")) if extra_dir.is_dir() else []:
        more_socs, more = _load_phones_file(extra, socs)
        twice = sorted(set(more) & set(phones))
        if twice:
            raise ConfigError(f"{extra}: phones.{twice[0]}: already defined in {path} or an earlier file")
        socs.update(more_socs)
        phones.update(more)
    return phones


def _load_phones_file(path: Path, known_socs: dict[str, SocSpec]) -> tuple[dict[str, SocSpec], dict[str, Phone]]:
    """The SoCs and phones of one catalogue file; its phones may use ``known_socs`` too."""
    data = from_mapping(_PhonesFile, load_yaml(path), source=str(path))
    socs: dict[str, SocSpec] = {}
    for name, e in data.socs.items():
        if name in known_socs:
            raise ConfigError(f"{path}: socs.{name}: already defined in an earlier catalogue file")
        try:
            socs[name] = SocSpec(name, tuple(e.low_power), tuple(e.big), e.prime, e.uncore_power_w, dict(e.core_types),
                                 tuple(e.foreground_cores), e.shared_core_slowdown, dict(e.throttle))
        except ValueError as exc:
            raise ConfigError(f"{path}: socs.{name}: {exc}") from None
    usable = known_socs | socs
    phones: dict[str, Phone] = {}
    for name, p in data.phones.items():
        if p.soc not in usable:
            raise ConfigError(f"{path}: phones.{name}.soc: unknown SoC {p.soc!r} (known: {', '.join(sorted(usable))})")
        try:
            phones[name] = Phone(name, p.display_name or name, usable[p.soc], p.capacity_mah, p.voltage_v, p.body, p.memory, p.android)
        except ValueError as exc:
            raise ConfigError(f"{path}: phones.{name}: {exc}") from None
    return socs, phones
