"""Latency/energy profiles per (phone, DNN model), pruning, and vectorised profile sets.

A profile file ``profiles/<phone>/<model>.yaml`` (the schema the on-device profiler writes)::

    schema: flamingo-sim/profile/v1
    phone: pixel_3                 # a key of profiles/phones.yaml
    model: resnet34
    provenance: calibrated         # or: measured
    batch_size: 16
    notes: "how the numbers were obtained"
    choices:                       # every execution choice that was profiled
      - {cores: [4, 5, 6, 7], step_latency_s: 1.95, power_w: 4.1}
      - ...

``step_latency_s`` is one local step (one minibatch forward + backward + update);
``power_w`` the average power above the idle background; ``step_energy_j`` = power x latency.

Measured profiles (written by ``flamingo-sim profile``, :mod:`.profiler`) may add optional
keys, all omitted from calibrated files: top-level ``machine`` (the device's description),
``energy_source`` (what power was read from, '' if none) and ``energy_note`` (why power is
missing or how it was derived); per choice ``n_steps`` (timed steps behind the latency). Where
the platform exposes no energy reading, ``power_w`` is ``null`` on every choice: such a profile
loads, and reports latencies, but cannot price energy, so :class:`ProfileSet` (what the
simulator uses) refuses it with a message quoting ``energy_note``.

The baseline (PyTorch's default: as many threads as big cores) is the choice of all big
cores of the layout (``4567`` on the shipped SoCs), or of all low-power cores if the layout has
no big core; see :func:`~flamingo_sim.devices.soc.baseline_cores`.

Pruning (SPEC section 3): in state-space order (largest footprint first), a choice is viable
only if its latency is strictly lower than that of every smaller choice after it; a larger
footprint that does not buy lower latency is dropped. The smallest profiled choice is always
viable, and the viable list is strictly faster toward the front, so the first viable choice is
the fastest one.

Table 1 convention: Flamingo starts at (and, without interference, stays on) the first viable
choice, so *speedup* = latency(``4567``) / latency(first viable) and *energy efficiency* =
energy(``4567``) / energy(first viable), both against the same chosen execution. This is why the
Pixel 3 ResNet-34 row is (1x, 1x) although a single big core is more energy-efficient there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import yaml

from flamingo_sim.config import from_mapping, load_yaml
from flamingo_sim.devices.soc import Phone, baseline_cores, state_space
from flamingo_sim.errors import ConfigError
from flamingo_sim.io import atomic_path

__all__ = [
    "ChoiceProfile",
    "Profile",
    "ProfileSet",
    "prune",
    "load_profile",
    "save_profile",
    "profile_path",
    "PROFILE_SCHEMA",
    "BASELINE_LABEL",
    "MODELS",
    "PROFILE_SETS",
]

PROFILE_SCHEMA = "flamingo-sim/profile/v1"
#: PyTorch's default on the shipped SoCs: as many threads as big cores (the Prime core counts
#: as big). On other layouts the baseline is :func:`~flamingo_sim.devices.soc.baseline_cores`.
BASELINE_LABEL = "4567"
#: The DNN models the shipped profiles cover.
MODELS = ("resnet34", "shufflenet_v2_x2", "mobilenet_v2")
#: Amdahl's parallel fraction ``f`` of a training step per DNN (the calibration's, :mod:`~flamingo_sim.devices.calibrate`:
#: dense convolutions 0.9, depthwise memory-bound nets 0.8), read also by the contended step's model
#: (:func:`flamingo_sim.devices.scheduling.contention`).
PARALLEL_FRACTION: dict[str, float] = {"resnet34": 0.9, "shufflenet_v2_x2": 0.8, "mobilenet_v2": 0.8}
#: ``f`` of a DNN not in :data:`PARALLEL_FRACTION`: the depthwise nets' (the lower, more conservative value).
DEFAULT_PARALLEL_FRACTION = 0.8
#: Selectable profile sets (``phones.profile_set``): ``paper`` lives in ``<profiles_dir>/<phone>/``
#: (with any measured profile), every other set in ``<profiles_dir>/<set>/<phone>/``; see
#: :mod:`flamingo_sim.devices.calibrate` for how the shipped sets differ.
PROFILE_SETS = ("paper", "anchored", "public")


@dataclass(frozen=True)
class ChoiceProfile:
    """One execution choice of a profile.

    ``power_w`` is None only in a measured profile of a device whose energy was not readable;
    ``n_steps`` (0 = not recorded) is the number of timed steps behind a measured latency.
    """

    cores: tuple[int, ...]
    step_latency_s: float
    power_w: float | None
    n_steps: int = 0

    def __post_init__(self) -> None:
        if not (self.step_latency_s > 0 and np.isfinite(self.step_latency_s)):
            raise ValueError(f"choice {self.label}: step_latency_s must be positive, got {self.step_latency_s}")
        if self.power_w is not None and not (self.power_w > 0 and np.isfinite(self.power_w)):
            raise ValueError(f"choice {self.label}: power_w must be positive, got {self.power_w}")
        if self.n_steps < 0:
            raise ValueError(f"choice {self.label}: n_steps must be >= 0, got {self.n_steps}")

    @property
    def label(self) -> str:
        return "".join(str(c) for c in self.cores)

    @property
    def step_energy_j(self) -> float | None:
        """Energy of one step (J); None where power was not measured."""
        return None if self.power_w is None else self.step_latency_s * self.power_w

    def to_mapping(self) -> dict:
        out: dict = {"cores": list(self.cores), "step_latency_s": float(self.step_latency_s),
                     "power_w": None if self.power_w is None else float(self.power_w)}
        if self.n_steps:
            out["n_steps"] = int(self.n_steps)
        return out


def prune(choices: Sequence[ChoiceProfile]) -> tuple[ChoiceProfile, ...]:
    """The viable choices of ``choices`` (given in state-space order), order kept."""
    keep: list[ChoiceProfile] = []
    best_after = np.inf
    for c in reversed(choices):
        if c.step_latency_s < best_after:
            keep.append(c)
            best_after = c.step_latency_s
    return tuple(reversed(keep))


@dataclass(frozen=True)
class Profile:
    """A (phone, DNN model) profile: every profiled choice, and the viable ones in order."""

    phone: Phone
    model: str
    provenance: Literal["calibrated", "measured"]
    batch_size: int
    all_choices: tuple[ChoiceProfile, ...]
    notes: str = ""
    machine: str = ""
    energy_source: str = ""
    energy_note: str = ""

    def __post_init__(self) -> None:
        space = {c.cores: i for i, c in enumerate(state_space(self.phone.layout))}
        idx = []
        for c in self.all_choices:
            if c.cores not in space:
                raise ValueError(f"choice {c.label} is not an execution choice of {self.phone.name} ({self.phone.soc.name})")
            idx.append(space[c.cores])
        if len(set(idx)) != len(idx):
            raise ValueError("a choice is listed twice")
        if idx != sorted(idx):  # keep state-space order whatever the file's order
            object.__setattr__(self, "all_choices", tuple(c for _, c in sorted(zip(idx, self.all_choices), key=lambda t: t[0])))
        base = baseline_cores(self.phone.layout)
        if not any(c.cores == base for c in self.all_choices):
            raise ValueError(f"the baseline choice {''.join(map(str, base))} must be profiled")
        if self.batch_size <= 0:
            raise ValueError("batch_size must be positive")
        n_power = sum(c.power_w is not None for c in self.all_choices)
        if n_power not in (0, len(self.all_choices)):
            raise ValueError("power_w must be given for every choice or for none")

    @functools.cached_property
    def choices(self) -> tuple[ChoiceProfile, ...]:
        """The viable choices, largest footprint (and fastest) first."""
        return prune(self.all_choices)

    @property
    def pruned_labels(self) -> tuple[str, ...]:
        viable = {c.label for c in self.choices}
        return tuple(c.label for c in self.all_choices if c.label not in viable)

    @property
    def has_power(self) -> bool:
        """Whether power (and so energy) was measured; False only for latency-only profiles."""
        return all(c.power_w is not None for c in self.all_choices)

    @property
    def baseline(self) -> ChoiceProfile:
        """PyTorch's default choice (``4567`` on the shipped SoCs; viable or not)."""
        base = baseline_cores(self.phone.layout)
        return next(c for c in self.all_choices if c.cores == base)

    @property
    def best(self) -> ChoiceProfile:
        """Flamingo's chosen execution without interference: the first (fastest) viable choice."""
        return self.choices[0]

    @property
    def speedup(self) -> float:
        return self.baseline.step_latency_s / self.best.step_latency_s

    @property
    def energy_efficiency(self) -> float | None:
        """energy(baseline) / energy(best); None for a latency-only profile."""
        base, best = self.baseline.step_energy_j, self.best.step_energy_j
        if base is None or best is None:  # a latency-only profile
            return None
        return base / best

    def to_mapping(self) -> dict:
        """The file's content (see the module docstring); optional keys only when set."""
        out: dict = {
            "schema": PROFILE_SCHEMA,
            "phone": self.phone.name,
            "model": self.model,
            "provenance": self.provenance,
            "batch_size": self.batch_size,
            "notes": self.notes,
        }
        for key in ("machine", "energy_source", "energy_note"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        out["choices"] = [c.to_mapping() for c in self.all_choices]
        return out


@dataclass(frozen=True)
class _ChoiceEntry:
    cores: list[int]
    step_latency_s: float
    power_w: float | None
    n_steps: int = 0


@dataclass(frozen=True)
class _ProfileFile:
    phone: str
    model: str
    provenance: Literal["calibrated", "measured"]
    choices: list[_ChoiceEntry]
    schema: str = PROFILE_SCHEMA
    batch_size: int = 16
    notes: str = ""
    machine: str = ""
    energy_source: str = ""
    energy_note: str = ""


def profile_path(profiles_dir: str | Path, phone: str, model: str, profile_set: str = "paper") -> Path:
    """``<profiles_dir>/<phone>/<model>.yaml`` for the ``paper`` set, ``<profiles_dir>/<set>/<phone>/<model>.yaml`` otherwise."""
    if profile_set not in PROFILE_SETS:
        raise ConfigError(f"unknown profile set {profile_set!r} (known: {', '.join(PROFILE_SETS)})")
    base = Path(profiles_dir) if profile_set == "paper" else Path(profiles_dir) / profile_set
    return base / phone / f"{model}.yaml"


def load_profile(profiles_dir: str | Path, phone: Phone | str, model: str, phones: dict[str, Phone] | None = None,
                 profile_set: str = "paper") -> Profile:
    """Read the profile of (phone, model) in ``profile_set`` (:func:`profile_path`); errors name the file and the key."""
    from flamingo_sim.devices.soc import load_phones

    if isinstance(phone, str):
        phones = phones if phones is not None else load_phones(profiles_dir)
        if phone not in phones:
            raise ConfigError(f"{Path(profiles_dir) / 'phones.yaml'}: unknown phone {phone!r} (known: {', '.join(sorted(phones))})")
        phone = phones[phone]
    path = profile_path(profiles_dir, phone.name, model, profile_set)
    if not path.is_file():
        raise ConfigError(f"{path}: no profile for phone {phone.name!r} and model {model!r}")
    data = from_mapping(_ProfileFile, load_yaml(path), source=str(path))
    if data.schema != PROFILE_SCHEMA:
        raise ConfigError(f"{path}: schema: expected {PROFILE_SCHEMA!r}, got {data.schema!r}")
    if data.phone != phone.name:
        raise ConfigError(f"{path}: phone: file says {data.phone!r}, expected {phone.name!r}")
    if data.model != model:
        raise ConfigError(f"{path}: model: file says {data.model!r}, expected {model!r}")
    try:
        choices = []
        for i, c in enumerate(data.choices):
            try:
                choices.append(ChoiceProfile(tuple(c.cores), c.step_latency_s, c.power_w, c.n_steps))
            except ValueError as exc:
                raise ValueError(f"choices[{i}]: {exc}") from None
        return Profile(phone, model, data.provenance, data.batch_size, tuple(choices), data.notes,
                       data.machine, data.energy_source, data.energy_note)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save_profile(profiles_dir: str | Path, profile: Profile, profile_set: str = "paper") -> Path:
    """Write ``profile`` atomically to its file in ``profile_set``; returns the path."""
    path = profile_path(profiles_dir, profile.phone.name, profile.model, profile_set)
    with atomic_path(path) as tmp:
        tmp.write_text(yaml.safe_dump(profile.to_mapping(), sort_keys=False, default_flow_style=None, width=120))
    return path


@dataclass(frozen=True, eq=False)
class ProfileSet:
    """Profiles of several phones for one DNN model, as padded arrays for vectorised pricing.

    Choices are referred to by a global label index into :attr:`labels` (the union of every
    phone's state space, in SD855/865 order). Per phone ``p`` (row) and position ``j``:

    - viable choices: ``latency_s[p, j]``, ``power_w[p, j]``, ``label_idx[p, j]`` for
      ``j < n_viable[p]`` (padding: latency/power NaN, label_idx -1);
    - the full state space in order (what exploration walks): ``space_latency_s``,
      ``space_power_w``, ``space_label_idx``, ``n_space``;
    - the baseline ``4567``: ``baseline_latency_s[p]``, ``baseline_power_w[p]``,
      ``baseline_label_idx[p]``;
    - ``batch_size[p]``: the minibatch the phone's profile was measured at.

    ``label_cores[l]`` gives the cores of label ``l``.
    """

    model: str
    phones: tuple[str, ...]
    profiles: tuple[Profile, ...]
    labels: tuple[str, ...] = field(init=False)
    label_cores: tuple[tuple[int, ...], ...] = field(init=False)
    latency_s: np.ndarray = field(init=False, repr=False)
    power_w: np.ndarray = field(init=False, repr=False)
    label_idx: np.ndarray = field(init=False, repr=False)
    n_viable: np.ndarray = field(init=False, repr=False)
    space_latency_s: np.ndarray = field(init=False, repr=False)
    space_power_w: np.ndarray = field(init=False, repr=False)
    space_label_idx: np.ndarray = field(init=False, repr=False)
    n_space: np.ndarray = field(init=False, repr=False)
    baseline_latency_s: np.ndarray = field(init=False, repr=False)
    baseline_power_w: np.ndarray = field(init=False, repr=False)
    baseline_label_idx: np.ndarray = field(init=False, repr=False)
    batch_size: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.phones) != len(self.profiles) or not self.profiles:
            raise ValueError("one profile per phone, at least one")
        for name, prof in zip(self.phones, self.profiles):
            if prof.phone.name != name or prof.model != self.model:
                raise ValueError(f"profile {prof.phone.name}/{prof.model} does not match {name}/{self.model}")
            if not prof.has_power:
                raise ValueError(f"profile {name}/{self.model} has latency only, no power "
                                 f"({prof.energy_note or 'power_w is null'}); the simulator needs power to price energy: "
                                 "measure on a device that exposes battery or RAPL readings")
        labels: list[str] = []
        cores: list[tuple[int, ...]] = []
        for prof in sorted(self.profiles, key=lambda p: -len(state_space(p.phone.layout))):
            for ch in state_space(prof.phone.layout):
                if ch.label not in labels:
                    labels.append(ch.label)
                    cores.append(ch.cores)
        index = {lab: i for i, lab in enumerate(labels)}
        n = len(self.profiles)
        n_v = max(len(p.choices) for p in self.profiles)
        n_s = max(len(p.all_choices) for p in self.profiles)

        def table(width: int, rows: list[tuple[ChoiceProfile, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            lat = np.full((n, width), np.nan)
            pw = np.full((n, width), np.nan)
            li = np.full((n, width), -1, dtype=np.int64)
            for p, row in enumerate(rows):
                for j, c in enumerate(row):
                    lat[p, j], pw[p, j], li[p, j] = c.step_latency_s, c.power_w, index[c.label]
            return lat, pw, li

        put = functools.partial(object.__setattr__, self)
        put("labels", tuple(labels))
        put("label_cores", tuple(cores))
        lat, pw, li = table(n_v, [p.choices for p in self.profiles])
        put("latency_s", lat), put("power_w", pw), put("label_idx", li)
        put("n_viable", np.array([len(p.choices) for p in self.profiles], dtype=np.int64))
        lat, pw, li = table(n_s, [p.all_choices for p in self.profiles])
        put("space_latency_s", lat), put("space_power_w", pw), put("space_label_idx", li)
        put("n_space", np.array([len(p.all_choices) for p in self.profiles], dtype=np.int64))
        put("baseline_latency_s", np.array([p.baseline.step_latency_s for p in self.profiles]))
        put("baseline_power_w", np.array([p.baseline.power_w for p in self.profiles]))
        put("baseline_label_idx", np.array([index[p.baseline.label] for p in self.profiles], dtype=np.int64))
        put("batch_size", np.array([p.batch_size for p in self.profiles], dtype=np.float64))
        for a in (self.batch_size, self.latency_s, self.power_w, self.label_idx, self.n_viable, self.space_latency_s, self.space_power_w,
                  self.space_label_idx, self.n_space, self.baseline_latency_s, self.baseline_power_w, self.baseline_label_idx):
            a.setflags(write=False)

    @classmethod
    def load(cls, profiles_dir: str | Path, phones: Sequence[str], model: str, profile_set: str = "paper") -> "ProfileSet":
        """Load each phone's profile of ``model`` in ``profile_set`` (row order = ``phones``)."""
        from flamingo_sim.devices.soc import load_phones

        catalogue = load_phones(profiles_dir)
        profs = tuple(load_profile(profiles_dir, name, model, phones=catalogue, profile_set=profile_set) for name in phones)
        try:
            return cls(model, tuple(phones), profs)
        except ValueError as exc:
            raise ConfigError(f"{profiles_dir}: {exc}") from None

    @property
    def n_phones(self) -> int:
        return len(self.phones)

    @property
    def n_labels(self) -> int:
        return len(self.labels)

    def phone_index(self, name: str) -> int:
        return self.phones.index(name)

    @property
    def step_energy_j(self) -> np.ndarray:
        """``step_energy_j[p, j]`` of the viable choices (NaN padding)."""
        return self.latency_s * self.power_w
