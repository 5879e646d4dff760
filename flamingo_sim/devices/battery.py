"""Energy from battery readings, and the per-client energy budget.

- :func:`discharge_intervals`: SPEC's estimate of energy from battery level/voltage samples
  (the profiler's battery meter, :mod:`flamingo_sim.devices.energy`).
- :class:`EnergyBudget`: available energy of many clients over their traces, vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flamingo_sim.devices.soc import MAH_TO_COULOMB

__all__ = ["discharge_intervals", "EnergyBudget"]


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

    def take_offline(self, clients: np.ndarray) -> None:
        """Take ``clients`` (indices) offline now, whatever their level: a phone whose training
        ran it flat waits for a charge to ``reentry_pct`` before it is online again."""
        self.online[np.asarray(clients, dtype=np.int64)] = False

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
