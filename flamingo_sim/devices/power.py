"""The physical power model of a phone's cores, and the consistency checks every profile set must pass.

**The model.** A core of type ``t`` fully busy draws ``core_types.<t>.power_w`` above idle
(``phones.yaml``: CoreMark power of one core at full load, SPEC.md section 3); an execution
choice whose threads keep its cores busy draws the sum over its cores, plus the SoC's
``uncore_power_w`` (0 on the shipped SoCs: no public figure). A core stalled on memory keeps its
clock running, so the model counts it as busy: the physical power of a choice does not depend on
how well its threads scale. This is what heats the phone (:mod:`flamingo_sim.fl.sim.limits`),
never the power a profile set fitted to energy ratios.

**Cross-check with the kernel's Energy Model.** The mainline device tree gives each core's
``dynamic-power-coefficient`` C (uW/MHz/V^2) and the kernel's simple model is ``P = C V^2 f``
(``Documentation/power/energy-model.rst``). The CoreMark power and C at the cluster's highest
OPP imply a supply voltage ``V = sqrt(P / (C f))``: :func:`implied_voltage_v`. The two public
sources agree where V lies in a real CPU's range (:data:`VOLTAGE_RANGE_V`; shipped: 0.60-1.02 V).

**The checks** (:func:`check_profile`, ``flamingo-sim profiles --check``, the report and the
tests), one :class:`Violation` per failure:

- ``monotone``: power does not fall as cores are added: for two choices of the state space
  with ``a``'s cores a subset of ``b``'s (cores of one cluster added, or the Prime core),
  ``power(b) >= power(a)`` (to the files' 4 significant digits);
- ``band``: each choice's power lies within :data:`POWER_BAND` of the physical model's.

The band is stated, not measured: below, a core whose pipeline waits for memory still clocks,
so a multi-core choice drawing under 30 % of its cores' busy power would mean its threads mostly
sleep; above, CoreMark is a lower bound for NEON-heavy training and DRAM traffic is not in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from flamingo_sim.devices.profiles import Profile
from flamingo_sim.devices.soc import Phone, state_space

__all__ = ["POWER_BAND", "VOLTAGE_RANGE_V", "Violation", "core_power_w", "physical_power_w", "implied_voltage_v",
           "check_profile", "check_profiles", "voltage_checks"]

#: A choice's power over the physical model's must lie in this range (``band`` check; module docstring).
POWER_BAND = (0.3, 2.0)
#: Supply voltages of a mobile CPU core at its highest operating points (V): the implied voltage
#: of CoreMark power and the device tree's coefficient must fall here.
VOLTAGE_RANGE_V = (0.55, 1.1)
#: Relative tolerance of the ``monotone`` check: the profile files round to 4 significant digits.
_ROUNDING = 5e-4


@dataclass(frozen=True)
class Violation:
    """One failed check: which profile, which check, and a one-line reason."""

    phone: str
    model: str
    check: str  # "monotone" or "band"
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


def check_profile(profile: Profile) -> list[Violation]:
    """Every ``monotone`` and ``band`` violation of one profile (a latency-only profile has none)."""
    if not profile.has_power:
        return []
    phone = profile.phone
    power = {c.cores: float(c.power_w) for c in profile.all_choices if c.power_w is not None}
    out: list[Violation] = []
    space = [c.cores for c in state_space(phone.layout) if c.cores in power]
    for big in space:
        for small in space:
            if small != big and set(small) < set(big) and power[big] < power[small] * (1 - _ROUNDING):
                out.append(Violation(phone.name, profile.model, "monotone", _label(big),
                                     f"{power[big]:.4g} W on {len(big)} cores, below {_label(small)}'s {power[small]:.4g} W on "
                                     f"{len(small)}, a subset of its cores"))
    lo, hi = POWER_BAND
    for cores in space:
        ratio = power[cores] / physical_power_w(phone, cores)
        if not lo <= ratio <= hi:
            out.append(Violation(phone.name, profile.model, "band", _label(cores),
                                 f"{power[cores]:.4g} W is {ratio:.2f}x the physical model's {physical_power_w(phone, cores):.4g} W "
                                 f"(band {lo}-{hi}x)"))
    return out


def check_profiles(profiles: Iterable[Profile]) -> list[Violation]:
    """:func:`check_profile` over several profiles, in their order."""
    return [v for p in profiles for v in check_profile(p)]


def _label(cores: tuple[int, ...]) -> str:
    return "".join(str(c) for c in cores)
