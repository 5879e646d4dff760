"""A phone's heat in the loop: a first-order thermal circuit and each core cluster's throttling rule.

**The circuit.** The phone is one lumped body (battery, board, glass and frame at one
temperature, the one the battery sensor reads) with heat capacity ``C`` (J/K), coupled to the
air through a thermal resistance ``R`` (K/W): ``C dT/dt = P - (T - T_amb) / R``. With constant
``P`` and ``T_amb`` the closed form is::

    T(t) = T_amb + P R + (T(0) - T_amb - P R) exp(-t / tau),    tau = R C

The circuit is linear, so heat sources superpose: the trace's battery temperature is the
phone's temperature under everything *but* the federated job (the owner's apps, the screen,
charging, the weather), and training adds an *excess* ``dT`` that obeys the same equation with
``T_amb = 0`` and ``P`` = the power training draws above idle, the power its battery is
charged: every joule ends as heat in the phone, so heat and battery read one power per step
(energy conserved; a throttled step's lower power heats less).
The modelled temperature is ``trace + dT``; between tasks ``dT`` decays as ``exp(-t / tau)``.

``C`` and ``R`` come from the phone's public specification (:class:`ThermalBody`): ``C`` = its
mass x an effective specific heat, ``R`` = 1 / (h x its surface), with ``h`` the combined
natural-convection and radiation coefficient of a body in still air. Both coefficients are
textbook ranges, not measurements of these phones (:data:`SPECIFIC_HEAT_J_PER_GK`,
:data:`SURFACE_H_W_PER_M2K`; docs/modelling-notes.md says how they were chosen).

**Throttling** (:class:`ThrottleRule`, one per core type of the SoC): once the modelled
temperature reaches a cluster's ``threshold_c``, the cluster runs at ``speed_frac`` of its speed
and ``power_frac`` of its power for the rest of the task (the governor's hysteresis keeps it
there for a task of minutes). A step on several clusters runs at the pace of its slowest
cluster. :func:`throttled_task` prices one task under this rule in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.numeric import exp

__all__ = [
    "ThermalBody",
    "ThrottleRule",
    "ThrottledTasks",
    "SPECIFIC_HEAT_J_PER_GK",
    "SURFACE_H_W_PER_M2K",
    "rc_excess_c",
    "decayed_c",
    "time_to_excess_s",
    "throttled_task",
    "excess_after",
]

#: Effective specific heat of a phone (J per gram and kelvin): its parts' range is 0.7-1.0
#: (glass ~0.84, aluminium ~0.90, a Li-ion cell ~0.9-1.1); an assumption inside that range.
SPECIFIC_HEAT_J_PER_GK = 0.9
#: Heat transfer coefficient from the phone's surface to still air (W/m^2/K): natural convection
#: (2-25 in textbooks, ~5 for a small vertical plate 10 K above the air) plus radiation
#: (~6 at emissivity 0.9 near 300 K); an assumption, 10.
SURFACE_H_W_PER_M2K = 10.0


@dataclass(frozen=True)
class ThermalBody:
    """A phone's body from its public specification: mass and outer dimensions."""

    #: Mass (g), the vendor's specification.
    mass_g: float
    #: Height, width and thickness (mm), the vendor's specification.
    length_mm: float
    width_mm: float
    thickness_mm: float

    def __post_init__(self) -> None:
        check_ranges(self, mass_g="> 0", length_mm="> 0", width_mm="> 0", thickness_mm="> 0")

    @property
    def area_m2(self) -> float:
        """Outer surface (both faces and the four edges)."""
        a, b, c = self.length_mm / 1e3, self.width_mm / 1e3, self.thickness_mm / 1e3
        return 2.0 * (a * b + a * c + b * c)

    @property
    def heat_capacity_j_per_k(self) -> float:
        return self.mass_g * SPECIFIC_HEAT_J_PER_GK

    @property
    def resistance_k_per_w(self) -> float:
        return 1.0 / (SURFACE_H_W_PER_M2K * self.area_m2)

    @property
    def time_constant_s(self) -> float:
        return self.resistance_k_per_w * self.heat_capacity_j_per_k


@dataclass(frozen=True)
class ThrottleRule:
    """One core cluster's throttling: above ``threshold_c`` it runs at ``speed_frac`` of its
    speed and ``power_frac`` of its power."""

    #: Temperature (degC, of the lumped body the battery sensor reads) at which the cluster is capped.
    threshold_c: float
    #: Speed of the capped cluster relative to its uncapped speed (a step takes 1/speed_frac as long).
    speed_frac: float = 1.0
    #: Power of the capped cluster relative to its uncapped power.
    power_frac: float = 1.0

    def __post_init__(self) -> None:
        check_ranges(self, threshold_c="[-50, 150]", speed_frac="(0, 1]", power_frac="(0, 1]")


def rc_excess_c(t_s: np.ndarray | float, excess0_c: np.ndarray | float, power_w: np.ndarray | float,
                resistance_k_per_w: np.ndarray | float, tau_s: np.ndarray | float) -> np.ndarray:
    """Excess temperature over ambient after ``t_s`` at constant ``power_w`` (the closed form)."""
    steady = np.asarray(power_w, dtype=float) * resistance_k_per_w
    return steady + decayed_c(np.asarray(excess0_c, dtype=float) - steady, t_s, tau_s)


def decayed_c(excess_c: np.ndarray | float, t_s: np.ndarray | float, tau_s: np.ndarray | float) -> np.ndarray:
    """An excess temperature ``t_s`` later with no heat input: ``excess exp(-t / tau)``, the circuit's one decay
    (libm's exp, :func:`flamingo_sim.numeric.exp`: the same on every CPU)."""
    return np.asarray(excess_c, dtype=float) * exp(-np.asarray(t_s, dtype=float) / tau_s)


def time_to_excess_s(target_c: np.ndarray, excess0_c: np.ndarray, power_w: np.ndarray, resistance_k_per_w: np.ndarray,
                     tau_s: np.ndarray) -> np.ndarray:
    """Seconds until the excess first reaches ``target_c`` at ``power_w``: 0 if already there,
    ``inf`` if the steady state stays below it."""
    steady = np.asarray(power_w, dtype=float) * resistance_k_per_w
    target = np.asarray(target_c, dtype=float)
    x0 = np.asarray(excess0_c, dtype=float)
    out = np.full(np.broadcast_shapes(steady.shape, target.shape, x0.shape), np.inf)
    now = x0 >= target
    reach = ~now & (steady > target)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = tau_s * np.log((steady - x0) / (steady - target))
    out = np.where(reach, t, out)
    return np.where(now, 0.0, out)


@dataclass(frozen=True)
class ThrottledTasks:
    """Tasks priced under throttling (arrays over the tasks)."""

    duration_s: np.ndarray  # compute time with the throttled part slowed
    energy_j: np.ndarray
    throttled_s: np.ndarray  # time spent throttled (0: never)
    onset_s: np.ndarray  # time into the task the cluster was capped (inf: never)


def throttled_task(duration_s: np.ndarray, energy_j: np.ndarray, excess0_c: np.ndarray, threshold_excess_c: np.ndarray,
                   speed_frac: np.ndarray, power_frac: np.ndarray, resistance_k_per_w: np.ndarray, tau_s: np.ndarray) -> ThrottledTasks:
    """Price tasks of unthrottled ``duration_s`` and ``energy_j`` (mean power = energy / duration, which
    also heats the phone) that start ``excess0_c`` above ambient, when the cluster is capped at
    ``threshold_excess_c`` above ambient: the work before the onset runs as priced, the rest at
    ``speed_frac`` of the speed and ``power_frac`` of the power."""
    dur = np.asarray(duration_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        power = np.where(dur > 0, np.asarray(energy_j, dtype=float) / dur, 0.0)
    onset = time_to_excess_s(threshold_excess_c, excess0_c, power, resistance_k_per_w, tau_s)
    hit = onset < dur
    t_c = np.where(hit, onset, dur)
    slow_s = np.where(hit, (dur - t_c) / speed_frac, 0.0)
    new_dur = t_c + slow_s
    new_energy = np.where(hit, power * t_c + power * power_frac * slow_s, energy_j)
    return ThrottledTasks(new_dur, new_energy, slow_s, np.where(hit, onset, math.inf))


def excess_after(elapsed_s: np.ndarray, excess0_c: np.ndarray, tasks: ThrottledTasks, power_w: np.ndarray, power_frac: np.ndarray,
                 resistance_k_per_w: np.ndarray, tau_s: np.ndarray) -> np.ndarray:
    """Excess temperature ``elapsed_s`` into tasks priced by :func:`throttled_task` (``power_w``: their
    unthrottled mean power, charged and dissipated); past a task's end its power is 0."""
    elapsed = np.minimum(np.asarray(elapsed_s, dtype=float), tasks.duration_s)
    before = np.minimum(elapsed, tasks.onset_s)
    x = rc_excess_c(before, excess0_c, power_w, resistance_k_per_w, tau_s)
    after = np.maximum(elapsed - before, 0.0)
    return np.where(after > 0, rc_excess_c(after, x, power_w * power_frac, resistance_k_per_w, tau_s), x)
