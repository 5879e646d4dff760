"""The physical power model of a phone's cores, and what every profile set's power must obey.

**The model.** A core of type ``t`` fully busy draws ``core_types.<t>.power_w`` above idle
(``phones.yaml``: CoreMark power of one core at full load, SPEC.md section 3); an execution
choice whose threads keep its cores busy draws the sum over its cores, plus the SoC's
``uncore_power_w`` (0 on the shipped SoCs: no public figure): :func:`physical_power_w`, the
busy power of a choice. It is a reference for the checks and the ``public`` set, never a power a
step is charged or a phone is heated with: both take the profile's power, which for the ``paper``
set is Table 1's measurement.

**Waiting cores.** A measured choice may draw less than its cores' busy power: its threads wait
(on memory, at a barrier) for part of the step, and a waiting core draws less than a busy one.
Two mechanisms lower it (:func:`waiting_mechanisms` names the one a measurement needs):

- the *operating point*: schedutil and WALT set a cluster's frequency from its utilisation
  (``Documentation/scheduler/schedutil.rst``: ``f = 1.25 * f_max * util``), down to the lowest
  OPP of its table. The kernel's Energy Model is ``P = C V^2 f``
  (``Documentation/power/energy-model.rst``) with ``V`` never above the top OPP's, so at the lowest
  OPP a core draws at most ``f_min / f_max`` of its top power (:func:`lowest_opp_share`);
- *idle states*: a thread that sleeps (OpenMP's and pthreadpool's waits end in a futex sleep)
  lets its core enter cpuidle's WFI or retention state (``Documentation/admin-guide/pm/cpuidle.rst``),
  which draws about the idle power the measurement subtracted: a share near 0.

A choice drawing at least its lowest-OPP share is explained by the operating point alone; below
it, its cores must spend part of the step in an idle state. The paper's Table 1 (measured on idle
phones with every other service stopped, Appendix B) puts the SD855/SD865 baseline's ``4567`` on
MobileNetV2 at 0.41-0.65 of one Prime core: 0.13-0.19 of its four cores' busy power.

**Cross-check with the kernel's Energy Model.** The mainline device tree gives each core's
``dynamic-power-coefficient`` C (uW/MHz/V^2). The CoreMark power and C at the cluster's highest
OPP imply a supply voltage ``V = sqrt(P / (C f))``: :func:`implied_voltage_v`. The two public
sources agree where V lies in a real CPU's range (:data:`VOLTAGE_RANGE_V`; shipped: 0.60-1.02 V).

**The checks** (:func:`check_profile`, ``flamingo-sim profiles --check``, the report and the
tests), one :class:`Violation` per value no mechanism allows (a choice drawing no more than idle
is refused when its profile is read):

- ``above``: no choice draws more than :data:`MAX_OVER_PHYSICAL` times its cores' busy power
  (CoreMark is a lower bound for NEON-heavy training and DRAM traffic is not in it; twice covers
  both, a stated bound).

No check ever alters a value: a measurement that needs a mechanism is reported with it
(:class:`Waiting`), not overridden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from flamingo_sim.devices.profiles import Profile
from flamingo_sim.devices.soc import Phone

__all__ = ["MAX_OVER_PHYSICAL", "VOLTAGE_RANGE_V", "Violation", "Waiting", "core_power_w", "physical_power_w",
           "implied_voltage_v", "lowest_opp_share", "waiting_mechanisms", "check_profile", "check_profiles", "voltage_checks"]

#: A choice may draw at most this multiple of its cores' busy power (``above`` check; module docstring).
MAX_OVER_PHYSICAL = 2.0
#: Supply voltages of a mobile CPU core at its highest operating points (V): the implied voltage
#: of CoreMark power and the device tree's coefficient must fall here.
VOLTAGE_RANGE_V = (0.55, 1.1)
#: Relative tolerance of a share's comparisons: the profile files round to 4 significant digits.
_ROUNDING = 5e-4
#: The two mechanisms of :class:`Waiting` (module docstring).
OPERATING_POINT, IDLE_STATES = "operating point", "idle states"


@dataclass(frozen=True)
class Violation:
    """One failed check: which profile, which check, and a one-line reason."""

    phone: str
    model: str
    check: str  # "above"
    choice: str
    detail: str

    def line(self, profile_set: str = "") -> str:
        where = f"{profile_set}/" if profile_set else ""
        return f"{where}{self.phone}/{self.model} {self.check} {self.choice}: {self.detail}"


def core_power_w(phone: Phone, core: int) -> float:
    """Power of one of ``phone``'s cores, fully busy, above idle (``core_types.<type>.power_w``)."""
    return phone.soc.core_types[phone.layout.core_type(core)].power_w


def physical_power_w(phone: Phone, cores: Iterable[int]) -> float:
    """The physical model's power of a choice whose threads keep ``cores`` busy (module docstring)."""
    return phone.soc.uncore_power_w + sum(core_power_w(phone, c) for c in cores)


def implied_voltage_v(phone: Phone, core_type: str) -> float | None:
    """The voltage at which the device tree's ``P = C V^2 f`` gives the core type's ``power_w`` at
    its highest OPP; None where the catalogue lacks the device tree's inputs."""
    model = phone.soc.core_types[core_type]
    if model.dynamic_power_coefficient is None or model.max_freq_mhz is None:
        return None
    return math.sqrt(model.power_w * 1e6 / (model.dynamic_power_coefficient * model.max_freq_mhz))


def voltage_checks(phone: Phone) -> list[str]:
    """One line per core type whose implied voltage falls outside :data:`VOLTAGE_RANGE_V`."""
    lo, hi = VOLTAGE_RANGE_V
    out = []
    for name in phone.soc.core_types:
        v = implied_voltage_v(phone, name)
        if v is not None and not lo <= v <= hi:
            out.append(f"{phone.soc.name} {name}: power_w {phone.soc.core_types[name].power_w} W and the device tree's "
                       f"coefficient imply {v:.2f} V at {phone.soc.core_types[name].max_freq_mhz} MHz, outside {lo}-{hi} V")
    return out


@dataclass(frozen=True)
class Waiting:
    """A choice that draws less than its cores' busy power, and the mechanism its power needs.

    ``share``: its power over its cores' busy power; ``lowest_opp_share``: the most its cores draw at
    their clusters' lowest operating point (None where the catalogue lacks the OPP range);
    ``mechanism``: :data:`OPERATING_POINT` when ``share`` is at least that, else :data:`IDLE_STATES`."""

    phone: str
    model: str
    choice: str
    share: float
    lowest_opp_share: float | None
    mechanism: str

    def line(self, profile_set: str = "") -> str:
        where = f"{profile_set}/" if profile_set else ""
        opp = "no OPP range in the catalogue" if self.lowest_opp_share is None else f"lowest OPP {self.lowest_opp_share:.2f}"
        how = ("waiting cores at a lower operating point (schedutil/WALT)" if self.mechanism == OPERATING_POINT
               else "waiting cores in an idle state part of the step (cpuidle WFI/retention while threads sleep)")
        return f"{where}{self.phone}/{self.model} {self.choice}: {self.share:.2f} of its cores' busy power ({opp}): {how}"


def lowest_opp_share(phone: Phone, cores: Iterable[int]) -> float | None:
    """The most ``cores`` draw at their clusters' lowest operating point, as a share of their busy power:
    ``f_min / f_max`` per core (``P = C V^2 f`` with ``V`` at most the top OPP's), weighted by busy power;
    None where a core type lacks ``min_freq_mhz`` or ``max_freq_mhz``."""
    total = share = 0.0
    for c in cores:
        t = phone.soc.core_types[phone.layout.core_type(c)]
        if t.min_freq_mhz is None or t.max_freq_mhz is None:
            return None
        total += t.power_w
        share += t.power_w * t.min_freq_mhz / t.max_freq_mhz
    return share / total if total else None


def waiting_mechanisms(profile: Profile) -> list[Waiting]:
    """Every choice of ``profile`` that draws below its cores' busy power, with the mechanism it needs (module docstring)."""
    if not profile.has_power:
        return []
    out = []
    for c in profile.all_choices:
        if c.power_w is None or c.power_w <= 0:
            continue
        busy = physical_power_w(profile.phone, c.cores)
        share = float(c.power_w) / busy
        if share >= 1 - _ROUNDING:
            continue
        floor = lowest_opp_share(profile.phone, c.cores)
        mechanism = OPERATING_POINT if floor is not None and share >= floor * (1 - _ROUNDING) else IDLE_STATES
        out.append(Waiting(profile.phone.name, profile.model, c.label, share, floor, mechanism))
    return out


def check_profile(profile: Profile) -> list[Violation]:
    """Every ``above`` violation of one profile (a latency-only profile has none; a power of 0 or below is
    refused when the profile is read)."""
    if not profile.has_power:
        return []
    out: list[Violation] = []
    for c in profile.all_choices:
        if c.power_w is None:
            continue
        busy = physical_power_w(profile.phone, c.cores)
        if c.power_w > MAX_OVER_PHYSICAL * busy * (1 + _ROUNDING):
            out.append(Violation(profile.phone.name, profile.model, "above", c.label,
                                 f"{c.power_w:.4g} W is {c.power_w / busy:.2f}x its cores' busy power {busy:.4g} W "
                                 f"(at most {MAX_OVER_PHYSICAL:g}x)"))
    return out


def check_profiles(profiles: Iterable[Profile]) -> list[Violation]:
    """:func:`check_profile` over several profiles, in their order."""
    return [v for p in profiles for v in check_profile(p)]
