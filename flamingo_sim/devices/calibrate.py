"""Calibrated profiles: a small physical model of CPU training, anchored in public measurements.

The paper's raw per-choice measurements are not public; only Table 1's ratios are (SPEC.md
section 3). This module derives every number of the shipped calibrated profiles from the model
below and writes them deterministically, as two selectable *profile sets*::

    python -m flamingo_sim.devices.calibrate [--profiles-dir profiles]

- ``paper`` (``profiles/<phone>/<model>.yaml``, the default of ``phones.profile_set``): every
  Table 1 ratio matched; the absolute scale anchored in measurements; the contention Table 1
  demands (up to 39x between ``4567`` and one big core) is confined to the big-core choices.
- ``anchored`` (``profiles/anchored/<phone>/<model>.yaml``): the same model with every choice
  held within the plausibility bound :data:`MAX_CONTENTION`; Table 1 is matched where that
  bound allows and approached as closely as it allows elsewhere.
- ``public`` (``profiles/public/<phone>/<model>.yaml``, :func:`public_profile`): nothing fitted
  to the paper. Only the big-core choices: one big core as in the other sets, more threads
  faster by Amdahl's law with the parallel fraction that gives the *measured* multi-thread
  speed-up of public mobile inference benchmarks on that SoC (:data:`PUBLIC_SCALING`: Paddle-Lite
  on the SD855 and SD845 for MobileNetV2 and ShuffleNetV2, ncnn's ResNet-18 on the SD855+; the
  two-thread figures check it), where one exists; where none does (SD865; ResNet-34 on the SD845)
  the scaling is assumed and the notes say so. Power is the physical model's
  (:mod:`~flamingo_sim.devices.power`: the sum of the pinned cores' CoreMark power). Low-power
  choices are left out: no public figure measures training on A55 cores.

Both sets cannot be one: Table 1's depthwise rows on SD855/SD865 (13.9x-39x) exceed any
public thread-scaling measurement (a 4-thread step is at most ~2x slower than one thread).

The model, for an execution choice with ``n`` threads pinned to cores with speeds ``s_i`` and
busy powers ``p_i`` (per core type, from ``phones.yaml``; speed 1 = one Cortex-A76 at 2.42 GHz):

- Work. ``W`` = 3 x forward FLOPs of one sample at the trained input size x batch 16
  (:data:`DNN_MODELS`, counted with ``torch.utils.flop_counter``), run at ``g`` GFLOP/s
  sustained on one reference core (per DNN class; anchored on the Raspberry Pi 5 figures).
- Compute time (Amdahl with parallel fraction ``f``; the slowest thread sets the end)::

      T0 = W / g * ((1 - f) / max(s_i) + f / (n * min(s_i)))

- Memory contention (cache thrashing), per cluster (``kappa_big`` for choices on big cores,
  ``kappa_little`` on low-power cores)::

      m = 1 + kappa * (n - 1),      step_latency_s = T0 * m

  Linear in the number of other threads: with it, the paper's Pixel 3 observations hold together
  (ShuffleNetV2 fastest on one big core and ``4567`` 1.8x slower than it); a quadratic penalty
  cannot give both.

- Power above idle: an uncore/DRAM floor ``U`` (``uncore_power_w``, 0 on the shipped SoCs: no
  public figure) plus each pinned core's busy power while it computes (a fraction ``1/m`` of the
  step) and a fraction ``sigma`` of it while stalled::

      power_w = U + sum(p_i) * (1/m + sigma * (1 - 1/m)),   step_energy_j = power_w * step_latency_s

Fitting (per phone and model). ``kappa_big`` is the value at which the speedup of the fastest
viable choice over ``4567`` equals Table 1 (bisection; the speedup rises with ``kappa``);
``sigma`` in [0, 1] then matches the energy efficiency (bisection): Table 1 is a measurement and
the set reproduces it. ``sigma`` is the power a core draws while its thread waits, as a share of
its busy power: 1 for a core that spins at its top operating point, lower where the governor
drops a stalled cluster to a lower operating point (schedutil and WALT scale the frequency with
utilisation) and lowest where the waiting threads sleep and their cores enter an idle state
(cpuidle's WFI and retention states). Where Table 1's energy efficiency is below its speedup
(Flamingo's one core draws more than the baseline's four: the SD855/SD865 depthwise rows, 0.41-0.65
of one Prime core), the baseline's cores spent most of the step waiting at low power; the paper
measured exactly that, on idle phones with every other service stopped (Appendix B).
``flamingo-sim profiles --check`` names, per choice, which of the two mechanisms its power needs
(:func:`flamingo_sim.devices.power.waiting_mechanisms`); it never alters a value.
``kappa_little`` is the model's default, capped so that no low-power choice exceeds the
plausibility bound. In the ``anchored`` set ``kappa_big`` is capped the same way. Where Table 1
gives 1x (Pixel 3 ResNet-34) ``kappa`` keeps the default, which leaves ``4567`` the fastest
choice and one big core the most energy-efficient, as the paper's Figures 2-3 show. Numbers are
rounded to 4 significant digits in the files.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import yaml

from flamingo_sim.devices.profiles import (
    MODELS,
    PARALLEL_FRACTION,
    PROFILE_SETS,
    ChoiceProfile,
    Profile,
    profile_path,
    save_profile,
)
from flamingo_sim.devices.soc import Choice, Phone, load_phones, state_space

__all__ = ["DnnModel", "DNN_MODELS", "TABLE1", "MAX_CONTENTION", "BATCH", "model_choice", "contention_bound",
           "calibrate_profile", "public_profile", "calibrate_all", "main", "PUBLIC_SCALING"]

#: Minibatch of a local step (the paper's).
BATCH = 16
#: Plausibility bound: no choice is slower than one core of its slowest type by more than this
#: factor. Public thread-scaling measurements of depthwise networks show multi-thread steps at
#: most about as slow as one thread; the paper's own Pixel 3 rows (the phone of its Figures
#: 2-3) show at most 1.8x between ``4567`` and the best choice. 2x covers both.
MAX_CONTENTION = 2.0


@dataclass(frozen=True)
class DnnModel:
    """Per-DNN-model constants of the calibration model."""

    name: str
    fwd_gflop: float  # forward FLOPs of one sample at ``input_size`` (torch.utils.flop_counter)
    input_size: tuple[int, int, int]
    gflops: float  # g: sustained training GFLOP/s of one reference core (A76 @ 2.42 GHz)
    parallel_fraction: float  # f
    default_kappa: float
    default_sigma: float
    derivation: str

    @property
    def work_gflop(self) -> float:
        """W: FLOPs of one training step (3x forward, batch :data:`BATCH`)."""
        return 3.0 * BATCH * self.fwd_gflop

    @property
    def work_s(self) -> float:
        """Seconds of one step on one reference core at full parallel efficiency."""
        return self.work_gflop / self.gflops


# g from the Raspberry Pi 5 (4x A76 @ 2.4 GHz, PyTorch, batch 16 at 224 px, full training):
# MobileNetV2 7.2 s/step, ResNet-34 11.0 s/step. With 4 threads T = W/g * ((1-f) + f/4), so
# g = W * ((1-f) + f/4) / T. Depthwise nets (f = 0.8): 28.82 * 0.4 / 7.2 = 1.6 GFLOP/s;
# dense ResNet-34 (f = 0.9): 351.7 * 0.325 / 11.0 = 10.4 GFLOP/s (its 224 px work; the same g is
# used for its 32x32 speech input, whose small maps, if anything, run less efficiently).
DNN_MODELS: dict[str, DnnModel] = {
    "resnet34": DnnModel(
        "resnet34", 0.1496, (3, 32, 32), 10.4, PARALLEL_FRACTION["resnet34"], 0.1, 1.0,
        "torchvision ResNet-34 (stride-2 stem) on 32x32 speech spectrograms: 0.1496 GFLOP fwd per sample "
        "(torch.utils.flop_counter) x3 x16 = 7.18 GFLOP per step; dense convolutions at g=10.4 GFLOP/s per A76 "
        "(Raspberry Pi 5: 11.0 s/step at 224 px on 4x A76), f=0.9"),
    "shufflenet_v2_x2": DnnModel(
        "shufflenet_v2_x2", 1.1649, (3, 224, 224), 1.6, PARALLEL_FRACTION["shufflenet_v2_x2"], 0.5, 0.3,
        "ShuffleNetV2 x2.0 at 224x224: 1.165 GFLOP fwd per sample (torch.utils.flop_counter) x3 x16 = 55.9 GFLOP "
        "per step; depthwise and memory-bound like MobileNetV2, so its g=1.6 GFLOP/s per A76, f=0.8"),
    "mobilenet_v2": DnnModel(
        "mobilenet_v2", 0.6005, (3, 224, 224), 1.6, PARALLEL_FRACTION["mobilenet_v2"], 0.5, 0.3,
        "MobileNetV2 at 224x224: 0.6005 GFLOP fwd per sample (torch.utils.flop_counter) x3 x16 = 28.8 GFLOP per "
        "step; depthwise, memory-bound: g=1.6 GFLOP/s per A76 (Raspberry Pi 5: 7.2 s/step on 4x A76), f=0.8"),
}

#: SPEC.md Table 1: (speedup, energy efficiency) of Flamingo's chosen execution over 4567.
TABLE1: dict[tuple[str, str], tuple[float, float]] = {
    ("galaxy_tab_s6", "resnet34"): (1.9, 1.9),
    ("galaxy_tab_s6", "shufflenet_v2_x2"): (21.0, 12.2),
    ("galaxy_tab_s6", "mobilenet_v2"): (14.5, 9.4),
    ("oneplus_8", "resnet34"): (2.1, 2.4),
    ("oneplus_8", "shufflenet_v2_x2"): (17.0, 8.5),
    ("oneplus_8", "mobilenet_v2"): (13.9, 7.5),
    ("pixel_3", "resnet34"): (1.0, 1.0),
    ("pixel_3", "shufflenet_v2_x2"): (1.8, 1.8),
    ("pixel_3", "mobilenet_v2"): (1.6, 2.3),
    ("galaxy_s10e", "resnet34"): (1.9, 2.1),
    ("galaxy_s10e", "shufflenet_v2_x2"): (39.0, 39.0),
    ("galaxy_s10e", "mobilenet_v2"): (31.8, 17.4),
    ("mi_10", "resnet34"): (2.1, 2.2),
    ("mi_10", "shufflenet_v2_x2"): (17.2, 7.8),
    ("mi_10", "mobilenet_v2"): (14.0, 5.8),
}


def model_choice(phone: Phone, choice: Choice, dnn: DnnModel, kappa_big: float, kappa_little: float,
                 sigma: float) -> ChoiceProfile:
    """The model's step latency and power for one execution choice (module docstring)."""
    soc = phone.soc
    types = [phone.layout.core_type(c) for c in choice.cores]
    speeds = [soc.core_types[t].speed for t in types]
    powers = [soc.core_types[t].power_w for t in types]
    n = len(choice.cores)
    f = dnn.parallel_fraction
    t0 = dnn.work_s * ((1.0 - f) / max(speeds) + f / (n * min(speeds)))
    kappa = kappa_big if choice.uses_big else kappa_little
    m = 1.0 + kappa * (n - 1)
    power = soc.uncore_power_w + sum(powers) * (1.0 / m + sigma * (1.0 - 1.0 / m))
    return ChoiceProfile(choice.cores, t0 * m, power)


def contention_bound(profile: Profile) -> dict[str, float]:
    """Per choice: its latency over that of one core of its slowest type (<= MAX_CONTENTION is plausible)."""
    layout = profile.phone.layout
    by = {c.label: c.step_latency_s for c in profile.all_choices}
    single = {"low_power": by[str(min(layout.low_power))], "big": by[str(min(c for c in layout.big if c != layout.prime))]}
    out = {}
    for c in profile.all_choices:
        slowest = "low_power" if any(x in layout.low_power for x in c.cores) else "big"
        out[c.label] = c.step_latency_s / single[slowest]
    return out


def _profile(phone: Phone, dnn: DnnModel, kb: float, kl: float, sigma: float, notes: str = "") -> Profile:
    chs = tuple(model_choice(phone, c, dnn, kb, kl, sigma) for c in state_space(phone.layout))
    return Profile(phone, dnn.name, "calibrated", BATCH, chs, notes)


def _bisect(fn, lo: float, hi: float, target: float, iters: int = 200) -> float:
    """x in [lo, hi] with fn(x) == target for a monotone fn (either direction); clipped to the
    nearer end where the target lies outside [fn(lo), fn(hi)]."""
    f_lo, f_hi = fn(lo) - target, fn(hi) - target
    if f_lo == 0:
        return lo
    if f_lo * f_hi > 0:
        return lo if abs(f_lo) <= abs(f_hi) else hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        f_mid = fn(mid) - target
        if f_mid == 0:
            return mid
        if (f_mid > 0) == (f_hi > 0):
            hi, f_hi = mid, f_mid
        else:
            lo, f_lo = mid, f_mid
    return 0.5 * (lo + hi)


def _max_kappa(phone: Phone, dnn: DnnModel, big: bool) -> float:
    """The largest kappa of one cluster at which its choices stay within MAX_CONTENTION."""
    def worst(k: float) -> float:
        prof = _profile(phone, dnn, k if big else 0.0, 0.0 if big else k, dnn.default_sigma)
        bound = contention_bound(prof)
        return max(v for c, v in zip(prof.all_choices, bound.values()) if any(x in phone.layout.big for x in c.cores) == big)

    if worst(1e3) <= MAX_CONTENTION:
        return 1e3
    return _bisect(worst, 0.0, 1e3, MAX_CONTENTION * (1 - 1e-6))


def _round(p: Profile, digits: int = 4) -> Profile:
    def r(x: float) -> float:
        return float(f"{x:.{digits}g}")

    def r_opt(x: float | None) -> float | None:
        return None if x is None else r(x)

    chs = tuple(ChoiceProfile(c.cores, r(c.step_latency_s), r_opt(c.power_w)) for c in p.all_choices)
    return Profile(p.phone, p.model, p.provenance, p.batch_size, chs, p.notes)


def _efficiency(p: Profile) -> float:
    """The energy efficiency of a calibrated profile (which always has power)."""
    eff = p.energy_efficiency
    if eff is None:
        raise ValueError(f"calibrated profile {p.phone.name}/{p.model} has no power")
    return eff


@dataclass(frozen=True)
class Scaling:
    """A public measurement of multi-thread speed-up on one SoC's big cores (the ``public`` set).

    ``speedup_4``: 4 threads over 1 (the midpoint of the source's range over its versions);
    ``speedup_2``: 2 threads over 1, the check (None where not measured); ``one_core``: the core
    type the 1-thread run used."""

    speedup_4: float
    speedup_2: float | None
    one_core: str
    source: str


_PADDLE = ("Paddle-Lite docs/benchmark/benchmark.md, armv8 fp32, 1/2/4 threads, midpoint of its five versions "
           "(commits 68baf043, 0969ec34, eee7b063, b3e49501, 92a2da23; 2020-02 to 2021-06); 1 thread pinned to cpu7, "
           "2 and 4 unpinned (lite/core/device_info.cc at 92a2da23)")
_NCNN = ("ncnn benchmark/README.md, 'Qualcomm SM8150-AC Snapdragon 855+', resnet18, ./benchncnn 8 4 2 and 8 1 2 (big cores), "
         "midpoint of its five versions (commits c384bc10, ae14ca91, 7b222a19, eeb969ad, e389a158; 2020-06 to 2024-06); "
         "the 1-thread run is not pinned within the big cores (src/cpu.cpp lines 1760-1797 at a4d2ea1d): the scheduler "
         "places a lone busy thread on the highest-capacity core, the Prime")
#: Measured multi-thread speed-ups of mobile CNN inference per (SoC, model) (module docstring; no public
#: figure measures training at 1 vs 4 threads on these SoCs). Models and SoCs missing here are assumed.
PUBLIC_SCALING: dict[tuple[str, str], Scaling] = {
    ("sd855", "mobilenet_v2"): Scaling(2.89, 1.73, "prime", f"MobileNetV2 on a Xiaomi Mi 9 (SD855): 4 threads 2.69-3.09x, "
                                                            f"2 threads 1.63-1.83x; {_PADDLE}"),
    ("sd855", "shufflenet_v2_x2"): Scaling(2.055, 1.515, "prime", f"ShuffleNetV2 (x1.0) on a Xiaomi Mi 9 (SD855): 4 threads "
                                                                  f"1.67-2.44x, 2 threads 1.41-1.62x; {_PADDLE}"),
    ("sd845", "mobilenet_v2"): Scaling(2.965, 1.775, "big", f"MobileNetV2 on a Xiaomi Mi 8 (SD845): 4 threads 2.76-3.17x, "
                                                           f"2 threads 1.75-1.80x; {_PADDLE}"),
    ("sd845", "shufflenet_v2_x2"): Scaling(2.33, 1.595, "big", f"ShuffleNetV2 (x1.0) on a Xiaomi Mi 8 (SD845): 4 threads "
                                                               f"2.08-2.58x, 2 threads 1.50-1.69x; {_PADDLE}"),
    ("sd855", "resnet34"): Scaling(2.02, None, "prime", f"ResNet-18 (the same basic blocks as ResNet-34) on a OnePlus 7T "
                                                       f"(SD855+): 4 threads 1.90-2.14x; {_NCNN}"),
}
#: SoCs with no public multi-thread measurement that take another SoC's (the same 1+3+4 layout).
PUBLIC_STAND_IN = {"sd865": "sd855"}


#: Where each figure of the ``public`` set comes from (SPEC.md section 3, "Public measurements that
#: bound the absolute scale"); :func:`public_profile` writes the ones it uses into the notes.
PUBLIC_SOURCES = {
    "work": "work per step: 3x the forward FLOPs of one sample at the trained input size (torch.utils.flop_counter) x batch 16",
    "pi5": "Raspberry Pi 5, 4x Cortex-A76 @ 2.4 GHz (the SD855's big core), PyTorch, batch 16 at 224 px, full training: "
           "MobileNetV2 7.2 s/step, ResNet-34 11.0 s/step (federated-embedded-vision benchmark)",
    "one_core": "one big core as in the paper and anchored sets: W/g with g the per-A76 rate that the Pi 5 step implies "
                "at parallel fraction f",
    "speeds": "core speeds of profiles/phones.yaml, the same one big core as the other sets (SD855 Prime 2.84/2.42 GHz; "
              "SD845 big 0.58: Pixel 3 about 1.7x slower than SD855 phones on four big cores, TFLite, AI-Benchmark CPU 2324 "
              "vs 4046; SD865 A77 1.15 and Prime 1.35 from Arm's IPC figure and the clocks, the one speed not in SPEC.md's list)",
    "power": "power above idle: the physical model (flamingo_sim.devices.power), the sum of the pinned cores' CoreMark power at "
             "full load (SD855 A76 0.84 W, Prime 1.08 W; SD845 A75 1.30 W; SD865 A77 0.71 W, Prime 0.98 W), a lower bound "
             "for NEON-heavy training; no uncore/DRAM term (no public figure measures it)",
}


def _amdahl_fraction(phone: Phone, scaling: Scaling) -> float:
    """The parallel fraction f at which :func:`model_choice` (no contention) gives ``scaling.speedup_4``
    between one core of type ``scaling.one_core`` and all big cores (module docstring), in [0, 1]."""
    soc = phone.soc
    speeds = [soc.core_types[phone.layout.core_type(c)].speed for c in phone.layout.big]
    one = 1.0 / soc.core_types[scaling.one_core].speed
    serial, parallel = 1.0 / max(speeds), 1.0 / (len(speeds) * min(speeds))
    return min(1.0, max(0.0, (serial - one / scaling.speedup_4) / (serial - parallel)))


def public_scaling(phone: Phone, model: str) -> tuple[float, str]:
    """The parallel fraction of ``model`` on ``phone``'s SoC in the ``public`` set, and where it comes from."""
    soc = phone.soc.name
    stand_in = PUBLIC_STAND_IN.get(soc, soc)
    scaling = PUBLIC_SCALING.get((stand_in, model))
    dnn = DNN_MODELS[model]
    if scaling is None:
        return dnn.parallel_fraction, (f"thread scaling ASSUMED: no public multi-thread measurement of {model} on {soc}; "
                                       f"Amdahl's law with the model's parallel fraction f={dnn.parallel_fraction}")
    f = _amdahl_fraction(phone, scaling)
    where = scaling.source if stand_in == soc else (f"ASSUMED from {stand_in} (no public multi-thread measurement on {soc}; "
                                                    f"the same 1+3+4 layout): {scaling.source}")
    check = ""
    if scaling.speedup_2 is not None:
        two = _profile_f(phone, dnn, f)
        one_label = str(phone.layout.prime if scaling.one_core == "prime" else min(c for c in phone.layout.big if c != phone.layout.prime))
        two_label = f"4{phone.layout.prime}" if scaling.one_core == "prime" else "45"
        pred = two[one_label] / two[two_label]
        check = f"; check: 2 threads ({two_label}) {pred:.2f}x against the measured {scaling.speedup_2}x"
    return f, f"thread scaling from a measured {scaling.speedup_4}x at 4 threads: Amdahl's law with f={f:.4g}{check}; {where}"


def _profile_f(phone: Phone, dnn: DnnModel, f: float) -> dict[str, float]:
    """Latency per big-core label at parallel fraction ``f``, no contention."""
    import dataclasses

    d = dataclasses.replace(dnn, parallel_fraction=f)
    return {c.label: model_choice(phone, c, d, 0.0, 0.0, 1.0).step_latency_s for c in state_space(phone.layout) if c.uses_big}


def public_profile(phone: Phone, model: str) -> Profile:
    """The ``public`` profile of (phone, model): the big-core choices, measured thread scaling, physical power.

    Each choice is :func:`model_choice` with no contention term (``kappa = 0``) and the parallel
    fraction f that gives the SoC's measured 4-thread speed-up (:func:`public_scaling`): the step
    of ``n`` threads is ``W / g * ((1 - f) / max(s) + f / (n * min(s)))``, one big core as in the
    other sets; power is the physical model's (the sum of the pinned cores' CoreMark power,
    ``uncore_power_w`` set to 0).
    """
    import dataclasses

    f, how = public_scaling(phone, model)
    dnn = dataclasses.replace(DNN_MODELS[model], parallel_fraction=f)
    soc = dataclasses.replace(phone.soc, uncore_power_w=0.0)
    bare = dataclasses.replace(phone, soc=soc)
    chs = tuple(model_choice(bare, c, dnn, 0.0, 0.0, 1.0) for c in state_space(phone.layout) if c.uses_big)
    four, one = chs[0], next(c for c in reversed(chs) if c.cores[0] != phone.layout.prime)
    notes = (
        f"public set, built only from public measurements (flamingo_sim.devices.calibrate.public_profile; nothing fitted "
        f"to the paper's Table 1). Big-core choices only: no public figure measures training on the low-power cores. "
        f"W={dnn.work_gflop:.4g} GFLOP ({PUBLIC_SOURCES['work']}); g={dnn.gflops} GFLOP/s ({PUBLIC_SOURCES['pi5']}); "
        f"{PUBLIC_SOURCES['one_core']}; {PUBLIC_SOURCES['speeds']}. Threads: {how}; so all big cores ({four.label}: "
        f"{four.step_latency_s:.4g} s) train {one.step_latency_s / four.step_latency_s:.3g}x faster than one ({one.label}: "
        f"{one.step_latency_s:.4g} s). {PUBLIC_SOURCES['power']}."
    )
    return _round(Profile(phone, dnn.name, "calibrated", BATCH, chs, notes))


def calibrate_profile(phone: Phone, model: str, profile_set: str = "paper") -> tuple[Profile, float, float]:
    """The calibrated profile of (phone, model) in ``profile_set``, with its ``kappa_big`` and ``sigma``
    (the ``public`` set: :func:`public_profile`, kappa 0 and sigma 1)."""
    if profile_set not in PROFILE_SETS:
        raise ValueError(f"unknown profile set {profile_set!r} (known: {', '.join(PROFILE_SETS)})")
    if profile_set == "public":
        return public_profile(phone, model), 0.0, 1.0
    dnn = DNN_MODELS[model]
    target = TABLE1.get((phone.name, model))
    kl = min(dnn.default_kappa, _max_kappa(phone, dnn, big=False))
    kb, sigma = dnn.default_kappa, dnn.default_sigma
    if target is not None:
        speedup, eff = target
        if abs(_profile(phone, dnn, kb, kl, sigma).speedup - speedup) > 1e-9:
            kb = _bisect(lambda k: _profile(phone, dnn, k, kl, sigma).speedup, 0.0, 1e4, speedup)
        if profile_set == "anchored":
            kb = min(kb, _max_kappa(phone, dnn, big=True))
        if abs(_efficiency(_profile(phone, dnn, kb, kl, sigma)) - eff) > 1e-9:
            sigma = _bisect(lambda s: _efficiency(_profile(phone, dnn, kb, kl, s)), 0.0, 1.0, eff)
    prof = _profile(phone, dnn, kb, kl, sigma)
    src = (f"Table 1 target speedup {target[0]}x, energy efficiency {target[1]}x; reached "
           f"{prof.speedup:.3g}x, {_efficiency(prof):.3g}x" if target else "no Table 1 target: model defaults")
    notes = (
        f"calibrated by flamingo_sim.devices.calibrate, profile set {profile_set!r} (kappa_big={kb:.6g}, "
        f"kappa_little={kl:.6g}, sigma={sigma:.6g}; {src}). W={dnn.work_gflop:.4g} GFLOP, g={dnn.gflops} GFLOP/s, "
        f"f={dnn.parallel_fraction}: {dnn.derivation}"
    )
    return _round(_profile(phone, dnn, kb, kl, sigma, notes)), kb, sigma


def _is_measured(path: Path) -> bool:
    try:
        return path.is_file() and (yaml.safe_load(path.read_text()) or {}).get("provenance") == "measured"
    except yaml.YAMLError:
        return False


def calibrate_all(profiles_dir: str | Path, models: tuple[str, ...] = MODELS,
                  profile_sets: tuple[str, ...] = PROFILE_SETS) -> list[Path]:
    """Regenerate every phone's calibrated profiles of ``phones.yaml``, in every profile set.

    A file whose provenance is ``measured`` is never overwritten.
    """
    phones = load_phones(profiles_dir)
    out = []
    for pset in profile_sets:
        for name in sorted(phones):
            for model in models:
                if _is_measured(profile_path(profiles_dir, name, model, pset)):
                    continue
                prof, _, _ = calibrate_profile(phones[name], model, pset)
                out.append(save_profile(profiles_dir, prof, pset))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flamingo_sim.devices.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--profiles-dir", default="profiles", help="directory holding phones.yaml (default: profiles)")
    args = ap.parse_args(argv)
    for path in calibrate_all(args.profiles_dir):
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
