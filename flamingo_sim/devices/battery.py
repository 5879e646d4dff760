"""Battery state, energy from battery readings, and the per-client energy budget.

- :class:`Battery`: one battery as an explicit, validated state (capacity, level, voltage);
  draws and charges are in joules and clamp at empty and full.
- :func:`energy_from_readings`: SPEC's estimate of energy from battery level/voltage samples.
- :class:`EnergyBudget`: available energy of many clients over their traces, vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flamingo_sim.devices.soc import MAH_TO_COULOMB

__all__ = ["Battery", "discharge_intervals", "energy_from_readings", "EnergyBudget"]


@dataclass
class Battery:
    """A battery: ``capacity_j`` (> 0), ``level_j`` in [0, capacity_j], ``voltage_v`` (> 0).

    :meth:`draw_j` and :meth:`charge_j` take a non-negative energy and return the energy actually
    moved: a draw never takes the level below 0, a charge never lifts it above capacity.
    """

    capacity_j: float
    level_j: float
    voltage_v: float = 3.85

    def __post_init__(self) -> None:
        if not (np.isfinite(self.capacity_j) and self.capacity_j > 0):
            raise ValueError(f"capacity_j must be positive, got {self.capacity_j}")
        if not (np.isfinite(self.level_j) and 0 <= self.level_j <= self.capacity_j):
            raise ValueError(f"level_j must be in [0, {self.capacity_j}], got {self.level_j}")
        if not (np.isfinite(self.voltage_v) and self.voltage_v > 0):
            raise ValueError(f"voltage_v must be positive, got {self.voltage_v}")

    @classmethod
    def from_mah(cls, capacity_mah: float, level_pct: float = 100.0, voltage_v: float = 3.85) -> "Battery":
        """A battery of ``capacity_mah`` at ``voltage_v`` (capacity_j = mAh x 3.6 x V)."""
        if not 0 <= level_pct <= 100:
            raise ValueError(f"level_pct must be in [0, 100], got {level_pct}")
        cap = capacity_mah * MAH_TO_COULOMB * voltage_v
        return cls(cap, cap * level_pct / 100.0, voltage_v)

    @property
    def level_pct(self) -> float:
        return 100.0 * self.level_j / self.capacity_j

    @staticmethod
    def _check(energy_j: float) -> float:
        if not (np.isfinite(energy_j) and energy_j >= 0):
            raise ValueError(f"energy must be a finite non-negative number of joules, got {energy_j}")
        return float(energy_j)

    def draw_j(self, energy_j: float) -> float:
        """Take up to ``energy_j`` out; returns what was taken (the level stops at 0)."""
        taken = min(self._check(energy_j), self.level_j)
        self.level_j -= taken
        return taken

    def charge_j(self, energy_j: float) -> float:
        """Put up to ``energy_j`` in; returns what was stored (the level stops at capacity)."""
        stored = min(self._check(energy_j), self.capacity_j - self.level_j)
        self.level_j += stored
        return stored


def discharge_intervals(times_s: Any, level_pct: Any, voltage_v: Any, capacity_mah: float) -> dict[str, np.ndarray]:
    """The discharge intervals of a battery log and their energy (SPEC section 3).

    A *drop* is a sample whose level is below the previous sample's. An interval runs from one
    drop to the next one, provided the level never rises in between (a rise is charging and
    breaks the chain). Over it the battery gave ``d`` percent (d = level at its start minus level
    at its end; 1 for the usual 1 % steps), so::

        energy_j = (V_start + V_end) / 2 * (capacity_mah * 3.6 / 100) * d
        power_w  = energy_j / (t_end - t_start)

    Returns arrays ``start_s``, ``end_s``, ``energy_j``, ``power_w``. The time before the first
    drop is not an interval: when the level reached its first value is unknown.
    """
    t = np.asarray(times_s, dtype=float)
    lv = np.asarray(level_pct, dtype=float)
    v = np.asarray(voltage_v, dtype=float)
    if not (t.ndim == lv.ndim == v.ndim == 1 and len(t) == len(lv) == len(v)):
        raise ValueError("times_s, level_pct and voltage_v must be 1-D arrays of one length")
    if len(t) > 1 and np.any(np.diff(t) <= 0):
        raise ValueError("times_s must be strictly increasing")
    if capacity_mah <= 0:
        raise ValueError("capacity_mah must be positive")
    drops = np.flatnonzero(np.diff(lv) < 0) + 1
    rises = np.concatenate([[0], np.cumsum(np.diff(lv) > 0)])  # rises seen up to each sample
    a, b = drops[:-1], drops[1:]
    ok = rises[b] == rises[a]
    a, b = a[ok], b[ok]
    q_pct_c = capacity_mah * MAH_TO_COULOMB / 100.0
    energy = (v[a] + v[b]) / 2.0 * q_pct_c * (lv[a] - lv[b])
    return {"start_s": t[a], "end_s": t[b], "energy_j": energy, "power_w": energy / (t[b] - t[a])}


def energy_from_readings(times_s: Any, level_pct: Any, voltage_v: Any, capacity_mah: float, span: tuple[float, float]) -> float:
    """Energy (J) over ``span = (start_s, end_s)``: the sum over discharge intervals overlapping it.

    An interval ``[a, b]`` overlaps the span when ``a < end_s`` and ``b > start_s``; it counts
    whole (the battery's 1 % resolution does not allow finer). See :func:`discharge_intervals`.
    """
    s0, s1 = span
    if not s1 > s0:
        raise ValueError(f"span must have end > start, got {span}")
    iv = discharge_intervals(times_s, level_pct, voltage_v, capacity_mah)
    hit = (iv["start_s"] < s1) & (iv["end_s"] > s0)
    return float(iv["energy_j"][hit].sum())


@dataclass
class EnergyBudget:
    """Energy available to training on ``n`` clients, following their battery traces.

    The model, per client, at each call of :meth:`advance` (one trace step):

    1. The trace level ``L`` (percent) is the battery of the phone without federated training.
       Training adds a *deficit* ``D`` (joules): the real phone holds
       ``available_j = clip(L/100 * capacity_j - D, 0, capacity_j)``.
    2. Charging repays the deficit: the energy the trace gains in the step,
       ``max(L_now - L_prev, 0)/100 * capacity_j``, is taken off ``D`` (the charger keeps
       delivering to a phone that is below the trace's level) -- ``D`` never goes below 0.
       Discharging in the trace lowers ``available_j`` through ``L`` and leaves ``D`` alone.
    3. Training energy of the step is then added to ``D``; ``D`` is capped at the trace's
       energy ``L/100 * capacity_j``, so ``available_j`` never goes below 0 (a phone cannot
       give more than it holds).
    4. Hysteresis: an online client whose effective level ``100 * available_j / capacity_j``
       is below ``min_pct`` goes offline; an offline client comes back only once its effective
       level is at least ``reentry_pct`` (which, since only charging raises it, means charging
       lifted it). :meth:`reset` sets ``online = level >= min_pct``.

    All arrays are ``(n,)``; ``state_dict``/``load_state_dict`` checkpoint the whole state.
    """

    capacity_j: np.ndarray
    min_pct: float = 10.0
    reentry_pct: float = 20.0
    trace_pct: np.ndarray = field(init=False, repr=False)
    deficit_j: np.ndarray = field(init=False, repr=False)
    online: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        cap = np.array(self.capacity_j, dtype=float, copy=True)
        if cap.ndim != 1 or not np.all(np.isfinite(cap)) or not np.all(cap > 0):
            raise ValueError("capacity_j must be a 1-D array of positive energies")
        if not 0 <= self.min_pct <= self.reentry_pct <= 100:
            raise ValueError(f"need 0 <= min_pct <= reentry_pct <= 100, got {self.min_pct}, {self.reentry_pct}")
        self.capacity_j = cap
        self.reset(np.full(cap.shape, 100.0))

    @property
    def n(self) -> int:
        return len(self.capacity_j)

    def _pct(self, x: Any, name: str) -> np.ndarray:
        a = np.broadcast_to(np.asarray(x, dtype=float), self.capacity_j.shape)
        if not np.all((a >= 0) & (a <= 100)):
            raise ValueError(f"{name} must be within [0, 100]")
        return a

    def reset(self, level_pct: Any) -> None:
        """Start every client at its trace level, with no deficit."""
        self.trace_pct = self._pct(level_pct, "level_pct").copy()
        self.deficit_j = np.zeros(self.n)
        self.online = self.level_pct >= self.min_pct

    def advance(self, level_prev_pct: Any, level_now_pct: Any, state_now: Any, training_energy_j: Any, check: bool = True) -> None:
        """One trace step: follow the trace, repay the deficit while charging, draw training.

        ``state_now`` is the trace's battery state (+1 charging, 0, -1 discharging), validated
        but not needed: the charging gain is the level's rise, which implies state +1.
        ``check=False`` skips the validation of the inputs and takes ``level_now_pct`` over
        without a copy: for callers whose inputs come from a validated trace set (the engine
        calls this once per trace step for every client); the results are the same.
        """
        if check:
            prev = self._pct(level_prev_pct, "level_prev_pct")
            now = self._pct(level_now_pct, "level_now_pct").copy()
            train = np.broadcast_to(np.asarray(training_energy_j, dtype=float), self.capacity_j.shape)
            if not np.all(np.isfinite(train) & (train >= 0)):
                raise ValueError("training_energy_j must be finite and >= 0")
            state = np.broadcast_to(np.asarray(state_now), self.capacity_j.shape)
            if not np.all(np.isin(state, (-1, 0, 1))):
                raise ValueError("state_now must be -1, 0 or +1")
        else:
            prev, now, train = level_prev_pct, level_now_pct, training_energy_j
        gain_j = np.maximum(now - prev, 0.0) / 100.0 * self.capacity_j
        deficit = np.maximum(self.deficit_j - gain_j, 0.0)
        deficit += train
        self.deficit_j = np.minimum(deficit, now / 100.0 * self.capacity_j, out=deficit)
        self.trace_pct = now
        lvl = self.level_pct
        self.online = np.where(self.online, lvl >= self.min_pct, lvl >= self.reentry_pct)

    def available_j_at(self, idx: np.ndarray) -> np.ndarray:
        """:attr:`available_j` of clients ``idx`` only (same numbers, no whole-population arrays)."""
        cap = self.capacity_j[idx]
        return np.clip(self.trace_pct[idx] / 100.0 * cap - self.deficit_j[idx], 0.0, cap)

    def level_pct_at(self, idx: np.ndarray) -> np.ndarray:
        """:attr:`level_pct` of clients ``idx`` only."""
        return 100.0 * self.available_j_at(idx) / self.capacity_j[idx]

    @property
    def available_j(self) -> np.ndarray:
        return np.clip(self.trace_pct / 100.0 * self.capacity_j - self.deficit_j, 0.0, self.capacity_j)

    @property
    def level_pct(self) -> np.ndarray:
        """Effective battery level (percent) after training."""
        return 100.0 * self.available_j / self.capacity_j

    def state_dict(self) -> dict[str, Any]:
        return {
            "capacity_j": self.capacity_j.copy(), "min_pct": self.min_pct, "reentry_pct": self.reentry_pct,
            "trace_pct": self.trace_pct.copy(), "deficit_j": self.deficit_j.copy(), "online": self.online.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        cap = np.asarray(state["capacity_j"], dtype=float)
        if cap.shape != self.capacity_j.shape:
            raise ValueError(f"state is for {cap.shape[0]} clients, this budget has {self.n}")
        self.capacity_j = cap.copy()
        self.min_pct, self.reentry_pct = float(state["min_pct"]), float(state["reentry_pct"])
        self.trace_pct = np.asarray(state["trace_pct"], dtype=float).copy()
        self.deficit_j = np.asarray(state["deficit_j"], dtype=float).copy()
        self.online = np.asarray(state["online"], dtype=bool).copy()
