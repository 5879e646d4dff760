"""``flamingo-sim profile``: measure a latency/energy profile of this Linux machine.

For each execution choice of the discovered core layout (:mod:`.cores`, then the simulator's
own :func:`~flamingo_sim.devices.soc.state_space`), in state-space order:

1. ``torch.set_num_threads(len(cores))`` and pin *every* thread of the process to the cores
   (``os.sched_setaffinity`` on each task of ``/proc/self/task``: on Linux the call acts on one
   thread, and torch's worker pool already exists), again after the warm-up in case the pool
   grew;
2. ``warmup_steps`` untimed training steps, then ``steps`` timed ones: forward + backward +
   SGD update of the named model on one seeded random batch (``batch_size`` images of
   ``3 x image_size x image_size``, labels among ``n_classes``);
3. ``step_latency_s`` = the **median** of the per-step wall times (robust to a stray
   scheduling hiccup); ``n_steps`` = how many were timed;
4. if an energy source was found (:mod:`.energy`): the average power over the timed steps
   minus the idle power measured for ``idle_s`` before the first choice (floored at 1 mW,
   since the schema needs a positive power, and the note says so).

Affinity and the thread count are restored afterwards, also on errors.

The result is a :class:`~flamingo_sim.devices.profiles.Profile` with ``provenance: measured``,
written to ``<profiles_dir>/<phone>/<model>.yaml`` with
:func:`~flamingo_sim.devices.profiles.save_profile`. The machine becomes a phone of the
catalogue: ``<profiles_dir>/phones.d/<phone>.yaml`` (or ``<profiles_dir>/phones.yaml`` in a
directory that has none), unless a phone of that name exists already there or in the shipped
catalogue, in which case its layout must be the one discovered. ``flamingo-sim profile``
writes to the user's profiles directory (:func:`flamingo_sim.resources.user_profiles_dir`),
which experiments search before the shipped profiles; never into the shipped ``profiles/``.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from flamingo_sim.devices.cores import CoreDiscovery, discover_cores
from flamingo_sim.devices.energy import Detection, PowerMeter, detect_energy_source
from flamingo_sim.devices.profiles import PROFILE_SCHEMA, ChoiceProfile, Profile, profile_path, save_profile
from flamingo_sim.devices.soc import PHONES_DIR, PHONES_FILE, CoreLayout, Phone, SocSpec, state_space
from flamingo_sim.errors import FlamingoError
from flamingo_sim.io import atomic_path, progress

__all__ = [
    "ProfileRequest", "ChoiceMeasurement", "Measurement", "PROFILE_MODELS", "MIN_POWER_W",
    "check_platform", "resolve_model", "measure", "to_profile", "run_profile", "default_phone_name",
]

#: Profile model name -> architecture of :func:`flamingo_sim.models.build_model`.
PROFILE_MODELS = {
    "mobilenet_v2": "mobilenet_v2",
    "shufflenet_v2_x2": "shufflenet_v2_x2_0",
    "resnet34": "resnet34",
    "mlp": "mlp",
    "logreg": "logreg",
}
#: torchvision names accepted as aliases of the profile names.
_ALIASES = {"shufflenet_v2_x2_0": "shufflenet_v2_x2"}
#: Power floor after idle subtraction (the schema needs a positive power).
MIN_POWER_W = 1e-3
#: Default battery capacity of the catalogue entry when the machine reports none.
PLACEHOLDER_CAPACITY_MAH = 4000.0


@dataclass(frozen=True)
class ProfileRequest:
    """What to measure. ``image_size`` None: 224 for torchvision models, 32 for the proxies."""

    model: str
    steps: int = 10
    warmup_steps: int = 2
    batch_size: int = 16
    image_size: int | None = None
    n_classes: int = 10
    seed: int = 0
    idle_s: float = 5.0
    lr: float = 0.01

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "n_classes"):
            if getattr(self, name) < 1:
                raise FlamingoError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0 or self.idle_s < 0:
            raise FlamingoError("warmup_steps and idle_s must be >= 0")
        if self.image_size is not None and self.image_size < 1:
            raise FlamingoError(f"image_size must be >= 1, got {self.image_size}")


@dataclass(frozen=True)
class ChoiceMeasurement:
    """One choice: per-step wall times, the median, power above idle (None: not measured)."""

    cores: tuple[int, ...]
    step_times_s: tuple[float, ...]
    power_w: float | None
    threads_pinned: int

    @property
    def label(self) -> str:
        return "".join(str(c) for c in self.cores)

    @property
    def step_latency_s(self) -> float:
        return float(statistics.median(self.step_times_s))


@dataclass(frozen=True)
class Measurement:
    """Everything one run measured, before it becomes a profile."""

    request: ProfileRequest
    model: str  # profile model name
    image_size: int
    discovery: CoreDiscovery
    choices: tuple[ChoiceMeasurement, ...]
    idle_power_w: float | None
    energy_source: str
    energy_note: str
    machine: str
    battery_capacity_mah: float | None = None  # design capacity, where the energy source knows it

    @property
    def has_power(self) -> bool:
        return all(c.power_w is not None for c in self.choices)


def check_platform() -> None:
    """Refuse (one line) unless this is Linux and this process may set its CPU affinity."""
    if not sys.platform.startswith("linux") or not hasattr(os, "sched_setaffinity"):
        raise FlamingoError(f"flamingo-sim profile needs Linux (or Android under Termux) for CPU pinning; this is {sys.platform!r}")
    try:
        os.sched_setaffinity(0, os.sched_getaffinity(0))
    except OSError as exc:
        raise FlamingoError(f"flamingo-sim profile: setting CPU affinity is not permitted here ({exc})") from None


def resolve_model(name: str) -> tuple[str, str]:
    """(profile model name, build_model architecture) of ``name``; unknown names are refused."""
    key = _ALIASES.get(name, name)
    if key not in PROFILE_MODELS:
        raise FlamingoError(f"unknown model {name!r}; known models: {', '.join(PROFILE_MODELS)}")
    return key, PROFILE_MODELS[key]


def _tasks() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def _pin(cores: set[int] | tuple[int, ...]) -> int:
    """Pin every thread of this process to ``cores``; returns how many threads were pinned."""
    n = 0
    for tid in _tasks():
        try:
            os.sched_setaffinity(tid, set(cores))
            n += 1
        except ProcessLookupError:  # the thread ended meanwhile
            continue
        except OSError as exc:
            raise FlamingoError(f"cannot pin to cores {sorted(cores)}: {exc}") from None
    return n


def _training_step(arch: str, req: ProfileRequest, image_size: int) -> Callable[[], None]:
    """A closure doing one forward + backward + SGD step on a fixed seeded random batch."""
    import torch

    from flamingo_sim.models import build_model

    shape = (3, image_size, image_size)
    model = build_model(arch, shape, req.n_classes, seed=req.seed)
    model.train()
    gen = torch.Generator().manual_seed(req.seed)
    x = torch.randn((req.batch_size, *shape), generator=gen)
    y = torch.randint(0, req.n_classes, (req.batch_size,), generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=req.lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _machine_description(discovery: CoreDiscovery) -> str:
    model_name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("model name", "hardware") and value.strip():
                model_name = value.strip()
                break
    except OSError:
        pass
    import torch

    bits = [f"{platform.node()} ({platform.machine()}, {platform.system()} {platform.release()})"]
    if model_name:
        bits.append(model_name)
    bits += [discovery.describe(), f"torch {torch.__version__}"]
    return "; ".join(bits)


def measure(req: ProfileRequest, discovery: CoreDiscovery | None = None, detection: Detection | None = None,
            log: Callable[[str], None] = lambda s: None) -> Measurement:
    """Time (and, where readable, power) every execution choice; see the module docstring."""
    import torch

    check_platform()
    model, arch = resolve_model(req.model)
    image_size = req.image_size or (32 if arch in ("mlp", "logreg") else 224)
    discovery = discovery or discover_cores()
    detection = detection or detect_energy_source()
    log(f"cores: {discovery.describe()}")
    src = detection.source
    log(f"energy: {src.describe() if src else 'not readable (' + detection.note + ')'}")
    choices = state_space(discovery.layout)
    step = _training_step(arch, req, image_size)
    original_mask, original_threads = os.sched_getaffinity(0), torch.get_num_threads()
    interval_s = 0.05 if src is not None and src.name in ("rapl", "battery-sysfs") else 1.0
    meter = PowerMeter(src, interval_s) if src is not None else None
    results: list[ChoiceMeasurement] = []
    idle_w: float | None = None
    try:
        if meter is not None:
            meter.__enter__()
            t0 = meter.mark()
            time.sleep(req.idle_s)
            idle_w = meter.power_w(t0, meter.mark()) if req.idle_s > 0 else None
            log(f"idle power: {idle_w if idle_w is not None else 'not measured'} W")
        bar = progress(choices, desc=f"profiling {model}", total=len(choices), unit="choice")
        for ch in bar:
            torch.set_num_threads(len(ch.cores))
            _pin(ch.cores)
            for _ in range(req.warmup_steps):
                step()
            n_pinned = _pin(ch.cores)
            start = meter.mark() if meter is not None else None
            times = []
            for _ in range(req.steps):
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
            power = None
            if meter is not None and start is not None:
                avg = meter.power_w(start, meter.mark())
                if avg is not None:
                    power = max(avg - (idle_w or 0.0), MIN_POWER_W)
            m = ChoiceMeasurement(ch.cores, tuple(times), power, n_pinned)
            results.append(m)
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(f"{m.label}: {m.step_latency_s:.3g} s/step")
    finally:
        if meter is not None:
            meter.__exit__(None, None, None)
        torch.set_num_threads(original_threads)
        try:
            _pin(original_mask)
        except FlamingoError:
            pass
    note = _energy_note(detection, idle_w, results, req)
    return Measurement(req, model, image_size, discovery, tuple(results), idle_w,
                       src.describe() if src is not None else "", note, _machine_description(discovery),
                       getattr(src, "capacity_mah", None))


def _energy_note(detection: Detection, idle_w: float | None, results: list[ChoiceMeasurement], req: ProfileRequest) -> str:
    if detection.source is None:
        return f"energy not readable on this machine, latency only: {detection.note or 'no energy source found'}"
    missing = [r.label for r in results if r.power_w is None]
    if missing:
        return (f"energy source {detection.source.name} gave no power for choices {', '.join(missing)} "
                f"(battery level only needs whole 1 % drops: profile with more --steps); latency only")
    floored = [r.label for r in results if r.power_w == MIN_POWER_W]
    note = (f"power = average over the timed steps minus idle power {idle_w:.4g} W measured for {req.idle_s:g} s"
            if idle_w is not None else "power = average over the timed steps, idle power not measured (not subtracted)")
    if floored:
        note += f"; choices {', '.join(floored)} measured at or below idle and were floored at {MIN_POWER_W} W"
    return note


def to_profile(m: Measurement, phone: Phone) -> Profile:
    """The measurement as a ``measured`` profile of ``phone`` (whose layout must be the discovered one)."""
    has_power = m.has_power
    choices = tuple(ChoiceProfile(c.cores, c.step_latency_s, c.power_w if has_power else None, len(c.step_times_s))
                    for c in m.choices)
    r = m.request
    notes = (f"measured by flamingo-sim profile on {time.strftime('%Y-%m-%d %H:%M:%S %z')}: median of {r.steps} timed "
             f"steps per choice after {r.warmup_steps} warm-up steps; model {m.model} on random "
             f"3x{m.image_size}x{m.image_size} inputs, {r.n_classes} classes, SGD lr {r.lr}, seed {r.seed}")
    return Profile(phone, m.model, "measured", r.batch_size, choices, notes, m.machine, m.energy_source, m.energy_note)


def default_phone_name() -> str:
    """``local_<hostname>``, lower-case, other characters as ``_``."""
    return "local_" + (re.sub(r"[^a-z0-9_]+", "_", platform.node().lower()).strip("_") or "machine")


def _known_phone(profiles_dir: Path, name: str, layout: CoreLayout) -> Phone | None:
    """The phone ``name`` of the catalogue in ``profiles_dir`` or else the shipped one, if there
    is one; its layout must be ``layout``."""
    from flamingo_sim.devices.catalogue import ProfileDirs
    from flamingo_sim.resources import shipped

    search = ProfileDirs.of([profiles_dir, shipped("profiles")])
    known = search.phones()
    if name not in known:
        return None
    have = known[name].layout
    if [c.label for c in state_space(have)] != [c.label for c in state_space(layout)]:
        raise FlamingoError(f"phone {name!r} is already in the catalogue of {search} with another core layout "
                            f"({have}); this machine has {layout}: choose another --phone")
    return known[name]


def _catalogue_phone(profiles_dir: Path, name: str, layout: CoreLayout, description: str,
                     capacity_mah: float, register: bool = True) -> tuple[Phone, Path | None]:
    """The catalogue's phone ``name`` (checked against ``layout``), or a new entry written for it (``register``;
    else the phone only, written nowhere)."""
    known = _known_phone(profiles_dir, name, layout)
    if known is not None:
        return known, None
    soc = f"{name}_soc"
    if not register:
        return Phone(name, name, SocSpec(soc, layout.low_power, layout.big, layout.prime), float(capacity_mah)), None
    if (profiles_dir / PHONES_FILE).is_file():
        path = profiles_dir / PHONES_DIR / f"{name}.yaml"
    else:  # a fresh directory: this machine is its whole catalogue
        path = profiles_dir / PHONES_FILE
    doc = {
        "socs": {soc: {"description": description, "low_power": list(layout.low_power), "big": list(layout.big),
                       "prime": layout.prime}},
        "phones": {name: {"display_name": name, "soc": soc, "capacity_mah": float(capacity_mah), "voltage_v": 3.85}},
    }
    with atomic_path(path) as tmp:
        tmp.write_text("# Written by flamingo-sim profile: this machine as a phone of the catalogue.\n"
                       + yaml.safe_dump(doc, sort_keys=False, width=120))
    phone = Phone(name, name, SocSpec(soc, layout.low_power, layout.big, layout.prime), float(capacity_mah))
    return phone, path


def _check_profile_out(path: Path) -> None:
    """Before measuring: ``out`` can be written and replaces nothing but a profile this tool wrote."""
    from flamingo_sim.faults import check_writable

    check_writable(path, directory=False)
    if path.exists():
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            doc = None
        if not (isinstance(doc, dict) and doc.get("schema") == PROFILE_SCHEMA):
            raise FlamingoError(f"out {path}: exists and is not a flamingo-sim profile; refusing to replace it - choose another file path")


def run_profile(req: ProfileRequest, profiles_dir: str | Path, phone_name: str | None = None,
                out: str | Path | None = None, capacity_mah: float | None = None,
                log: Callable[[str], None] = lambda s: None, register: bool = True, **measure_kwargs: Any) -> dict[str, Any]:
    """Measure, write the profile (and, with ``register``, the catalogue entry if new); returns a summary record.

    The profile goes to ``out`` if given, else to ``<profiles_dir>/<phone>/<model>.yaml`` where
    the simulator looks for it.
    """
    check_platform()
    resolve_model(req.model)
    profiles_dir = Path(profiles_dir)
    name = phone_name or default_phone_name()
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise FlamingoError(f"phone_name {name!r}: use letters, digits, '_', '-' and '.'")
    discovery = measure_kwargs.pop("discovery", None) or discover_cores()
    _known_phone(profiles_dir, name, discovery.layout)  # a clash is refused before measuring
    if out is not None:
        _check_profile_out(Path(out))
    else:
        from flamingo_sim.faults import check_writable

        check_writable(profile_path(profiles_dir, name, req.model).parent)  # before measuring
    m = measure(req, discovery=discovery, log=log, **measure_kwargs)
    cap = capacity_mah if capacity_mah is not None else m.battery_capacity_mah
    placeholder = False
    if cap is None:
        cap, placeholder = PLACEHOLDER_CAPACITY_MAH, True
    desc = m.machine + (f"; capacity_mah {cap:g} is a placeholder (no battery capacity known)" if placeholder else "")
    phone, catalogue = _catalogue_phone(profiles_dir, name, m.discovery.layout, desc, cap, register)
    profile = to_profile(m, phone)
    if out is None:
        path = save_profile(profiles_dir, profile)
    else:
        path = Path(out)
        with atomic_path(path) as tmp:
            tmp.write_text(yaml.safe_dump(profile.to_mapping(), sort_keys=False, default_flow_style=None, width=120))
        if path.resolve() != profile_path(profiles_dir, name, m.model).resolve() and register:
            log(f"note: the simulator reads {profile_path(profiles_dir, name, m.model)}; copy {path} there to use it")
    return {
        "profile": str(path),
        "catalogue": str(catalogue) if catalogue else None,
        "phone": name,
        "model": m.model,
        "machine": m.machine,
        "idle_power_w": m.idle_power_w,
        "energy_source": m.energy_source,
        "energy_note": m.energy_note,
        "choices": [{"label": c.label, "step_latency_s": c.step_latency_s, "power_w": c.power_w,
                     "n_steps": len(c.step_times_s), "threads_pinned": c.threads_pinned} for c in m.choices],
    }
