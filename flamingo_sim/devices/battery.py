"""Energy from battery readings, and the per-client energy budget.

- :func:`discharge_intervals`: SPEC's estimate of energy from battery level/voltage samples
  (the profiler's battery meter, :mod:`flamingo_sim.devices.energy`).
- :class:`EnergyBudget`: available energy of many clients over their traces, vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flamingo_sim.devices.online import BLOCK, OnlineClients, OnlineIndex
from flamingo_sim.devices.soc import MAH_TO_COULOMB

__all__ = ["discharge_intervals", "EnergyBudget", "PopulationBudget", "population_fingerprint"]


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


def _deficit_step(capacity_j: np.ndarray, deficit_j: np.ndarray, prev: Any, now: Any, train: Any) -> np.ndarray:
    """The deficit (J) after one trace step from level ``prev`` to ``now`` (percent) drawing ``train`` (J): charging repays,
    training adds, the trace's energy caps it (see :class:`EnergyBudget`)."""
    gain_j = np.maximum(now - prev, 0.0) / 100.0 * capacity_j
    deficit = np.maximum(deficit_j - gain_j, 0.0)
    deficit += train
    return np.minimum(deficit, now / 100.0 * capacity_j, out=deficit)


def _effective_pct(capacity_j: np.ndarray, deficit_j: Any, now: Any) -> np.ndarray:
    """The effective level (percent) of a battery whose trace reads ``now`` and that owes ``deficit_j``:
    ``100 * clip(now / 100 * capacity_j - deficit_j, 0, capacity_j) / capacity_j``, evaluated in that order in one
    array (the same roundings as the expression's temporaries: a round's ticks make it tens of thousands of values)."""
    lvl = now / 100.0 * capacity_j
    lvl -= deficit_j
    np.clip(lvl, 0.0, capacity_j, out=lvl)
    lvl *= 100.0
    lvl /= capacity_j
    return lvl


def _step(
    capacity_j: np.ndarray, deficit_j: np.ndarray, online: np.ndarray, prev: Any, now: Any, train: Any, min_pct: float, reentry_pct: float
) -> tuple[np.ndarray, np.ndarray]:
    """One trace step of :class:`EnergyBudget` on plain arrays: the new ``(deficit_j, online)``.

    With :func:`_steps`, the only place the budget's arithmetic lives (both built of :func:`_deficit_step` and
    :func:`_effective_pct`), so that :class:`PopulationBudget`'s subsets compute bit for bit what a whole-population
    :class:`EnergyBudget` would.
    """
    deficit = _deficit_step(capacity_j, deficit_j, prev, now, train)
    lvl = _effective_pct(capacity_j, deficit, now)
    return deficit, np.where(online, lvl >= min_pct, lvl >= reentry_pct)


def _level_threshold(capacity_j: np.ndarray, pct: float) -> np.ndarray | None:
    """For each battery, the least trace level ``x`` (float64) whose effective level with nothing owed reaches ``pct``:
    ``_effective_pct(capacity_j, 0.0, x) >= pct`` exactly when ``x >= threshold``, for every float64 ``x`` (NaN: neither).

    The effective level is a chain of correctly rounded operations each non-decreasing in ``x``, so it is itself
    non-decreasing and the comparison flips once; it sits within a few units in the last place of ``pct``, found by
    stepping from ``pct`` to the neighbouring floats. None where that does not settle (``pct`` beyond what a level
    reaches): the caller then computes the levels themselves."""
    n = len(capacity_j)
    if pct <= 0.0:  # every level but NaN reaches it (the effective level is at least 0)
        return np.full(n, -np.inf)
    x = np.full(n, float(pct))
    reaches = _effective_pct(capacity_j, 0.0, x) >= pct
    for _ in range(64):  # down while the float below still reaches it
        below = np.nextafter(x, -np.inf)
        down = reaches & (_effective_pct(capacity_j, 0.0, below) >= pct)
        if not down.any():
            break
        x = np.where(down, below, x)
    else:
        return None
    for _ in range(64):  # up until it reaches it
        up = ~(_effective_pct(capacity_j, 0.0, x) >= pct)
        if not up.any():
            return x
        x = np.where(up, np.nextafter(x, np.inf), x)
    return None


def _steps(
    capacity_j: np.ndarray, deficit_j: np.ndarray, online: np.ndarray, before: np.ndarray, levels_pct: np.ndarray, min_pct: float,
    reentry_pct: float, thresholds: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Several trace steps that draw nothing, on plain arrays: the level goes from ``before`` (n,) to ``levels_pct[0]``,
    then to ``levels_pct[1]``, ... (steps, n); the new ``(deficit_j, online)``, bit for bit what :func:`_step` gives
    called once per step.

    Why: a round spans tens of trace ticks, and a step per call costs numpy's per-call overhead for every one of them.
    Here the deficit, the only part that carries over from one step to the next, is stepped row by row (and only while
    some client owes one: with none owed, none arises without a draw); the effective levels of every step are one
    array operation, and the hysteresis is resolved at once: a step whose level is at least ``reentry_pct`` puts a
    client online, one below ``min_pct`` takes it offline, one in between keeps its flag, so the flag after the last
    step is the one set by the last step of the first two kinds (the flag before the first step where there is none).
    ``thresholds``: :func:`_level_threshold` of ``capacity_j`` at ``min_pct`` and ``reentry_pct``; with nothing owed, the
    comparisons are then made on the trace levels themselves (the same answers, without the effective levels).
    """
    n_steps = len(levels_pct)
    if n_steps < 1:
        return deficit_j, online
    if deficit_j.any():
        deficits = np.empty_like(levels_pct, dtype=np.float64)
        deficit, prev = deficit_j, before
        for i in range(n_steps):
            deficit = deficits[i] = _deficit_step(capacity_j, deficit, prev, levels_pct[i], 0.0)
            prev = levels_pct[i]
        lvl = _effective_pct(capacity_j, deficits, levels_pct)
    else:  # nothing owed and nothing drawn: every step's deficit is the zero _deficit_step gives (x - 0.0 is x)
        deficit = _deficit_step(capacity_j, deficit_j, levels_pct[-2] if n_steps > 1 else before, levels_pct[-1], 0.0)
        if thresholds is not None:
            at_min, at_reentry = thresholds
            up = levels_pct >= at_reentry
            decided = ~(levels_pct >= at_min)
            decided |= up
            last = n_steps - 1 - np.argmax(decided[::-1], axis=0)
            cols = np.arange(levels_pct.shape[1])
            return deficit, np.where(decided[last, cols], up[last, cols], online)
        lvl = _effective_pct(capacity_j, 0.0, levels_pct)
    up = lvl >= reentry_pct
    decided = ~(lvl >= min_pct)  # a NaN level is below min_pct, as _step's comparisons have it
    decided |= up
    last = n_steps - 1 - np.argmax(decided[::-1], axis=0)  # each client's last deciding step (0 where none decides)
    cols = np.arange(levels_pct.shape[1])
    return deficit, np.where(decided[last, cols], up[last, cols], online)


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
    #: (capacity_j, min_pct, reentry_pct) -> :func:`_level_threshold` at both levels, or None (made on first use)
    _thresholds: tuple[Any, tuple[np.ndarray, np.ndarray] | None] | None = field(init=False, repr=False, compare=False, default=None)

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
        without a copy: for callers whose inputs come from a validated trace set (the round loop
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
        self.deficit_j, self.online = _step(self.capacity_j, self.deficit_j, self.online, prev, now, train, self.min_pct, self.reentry_pct)
        self.trace_pct = now

    def advance_steps(self, levels_pct: np.ndarray) -> None:
        """Several trace steps that draw nothing: from the level now (:attr:`trace_pct`) to ``levels_pct[0]``, then to
        ``levels_pct[1]``, ... (steps, n); the same state, bit for bit, as :meth:`advance` called once per step with
        ``check=False`` (its inputs come from a validated trace set, as that call's do), at the cost of a few array
        operations over all the steps instead of a dozen per step (:func:`_steps`)."""
        levels_pct = np.asarray(levels_pct, dtype=np.float64)
        if levels_pct.ndim != 2 or levels_pct.shape[1] != self.n:
            raise ValueError(f"levels_pct must be (steps, {self.n}), got {levels_pct.shape}")
        if not len(levels_pct):
            return
        self.deficit_j, self.online = _steps(self.capacity_j, self.deficit_j, self.online, self.trace_pct, levels_pct, self.min_pct,
                                             self.reentry_pct, self.level_thresholds())
        self.trace_pct = levels_pct[-1].copy()

    def level_thresholds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Each client's least trace level that reaches ``min_pct`` and ``reentry_pct`` with nothing owed
        (:func:`_level_threshold`; None where one does not settle), made once for these capacities and levels: a twin
        that only follows its trace then decides its online flags on the trace levels themselves."""
        key = (self.capacity_j, self.min_pct, self.reentry_pct)
        if self._thresholds is None or self._thresholds[0][0] is not self.capacity_j or self._thresholds[0][1:] != key[1:]:
            at_min, at_reentry = _level_threshold(self.capacity_j, self.min_pct), _level_threshold(self.capacity_j, self.reentry_pct)
            self._thresholds = (key, None if at_min is None or at_reentry is None else (at_min, at_reentry))
        return self._thresholds[1]

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


class PopulationBudget:
    """The :class:`EnergyBudget` of ``n`` FL clients that share battery traces, kept sparse.

    Many FL clients replay one trace client's battery on one phone model: a *pair* (trace
    client, battery capacity). A client that never trained holds exactly its pair's trace-only
    budget, so the state is

    - :attr:`twin`: an :class:`EnergyBudget` per pair that only follows the trace (no training);
      it is also what tells clients lost to training from clients their own use took offline;
    - the *deviated* clients, whose deficit or online flag differs from their twin's: their
      indices (sorted), deficits and online flags.

    Every step costs O(pairs + deviated clients), not O(clients): at 1,000,000 FL clients on
    a few thousand trace clients a 10-minute trace step touches a few thousand values. The
    arithmetic is :func:`_step`, element for element the one a whole-population
    :class:`EnergyBudget` runs, so the numbers are identical (``tests/devices/test_battery.py``
    checks it against one). A deviated client whose deficit is repaid and whose online flag
    agrees with its twin's again holds its twin's state exactly and rejoins it.

    Who is online is kept in an :class:`~flamingo_sim.devices.online.OnlineIndex`: counting
    them and drawing some of them (:meth:`online_clients`) costs O(blocks + deviated + drawn
    x block), not O(clients); only :attr:`online` builds the whole-population array.
    """

    def __init__(self, pair_capacity_j: Any, pair_of: Any, min_pct: float = 10.0, reentry_pct: float = 20.0, block: int = BLOCK) -> None:
        self.twin = EnergyBudget(pair_capacity_j, min_pct=min_pct, reentry_pct=reentry_pct)
        pair_of = np.asarray(pair_of)
        if pair_of.ndim != 1 or not np.issubdtype(pair_of.dtype, np.integer):
            raise ValueError("pair_of must be a 1-D integer array (each client's pair)")
        if len(pair_of) and not (0 <= pair_of.min() and pair_of.max() < self.twin.n):
            raise ValueError(f"pair_of must index the {self.twin.n} pairs")
        self.pair_of = pair_of.astype(np.int64)
        self._fingerprint: int | None = None
        self.index = OnlineIndex(self.pair_of, self.twin.n, block=block)  # ``block``: clients per index block
        self._clear()
        self.index.update(self.twin.online)

    def _clear(self) -> None:
        self._set_dev(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=bool))

    def _set_dev(self, dev: np.ndarray, deficit_j: np.ndarray, online: np.ndarray) -> None:
        self.dev = dev  # deviated clients, sorted
        self.dev_deficit_j = deficit_j
        self.dev_online = online
        self._dev_pairs = self.pair_of[dev]
        self._dev_capacity_j = self.twin.capacity_j[self._dev_pairs]

    @property
    def n(self) -> int:
        return len(self.pair_of)

    @property
    def min_pct(self) -> float:
        return self.twin.min_pct

    @property
    def reentry_pct(self) -> float:
        return self.twin.reentry_pct

    def reset(self, pair_level_pct: Any) -> None:
        """Every client at its pair's trace level, nothing drawn."""
        self.twin.reset(pair_level_pct)
        self._clear()
        self.index.update(self.twin.online)

    # -- the deviated set ---------------------------------------------------------------------
    def _find(self, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Position of each of ``clients`` in :attr:`dev` and whether it is there."""
        pos = np.searchsorted(self.dev, clients)
        hit = pos < len(self.dev)
        hit[hit] = self.dev[pos[hit]] == clients[hit]
        return pos, hit

    def _deviate(self, clients: np.ndarray) -> np.ndarray:
        """Add ``clients`` to the deviated set (with their twin's state); their positions in it."""
        clients = np.unique(np.asarray(clients, dtype=np.int64))
        pos, hit = self._find(clients)
        new = clients[~hit]
        if len(new):
            at, pairs = pos[~hit], self.pair_of[new]
            self._set_dev(np.insert(self.dev, at, new), np.insert(self.dev_deficit_j, at, self.twin.deficit_j[pairs]),
                          np.insert(self.dev_online, at, self.twin.online[pairs]))
        return np.searchsorted(self.dev, clients)

    def _rejoin(self) -> None:
        """Deviated clients that hold their twin's state again are no longer deviated. (When
        they rejoin does not change any number: such a client evolves exactly as its twin.)"""
        same = (self.dev_deficit_j == self.twin.deficit_j[self._dev_pairs]) & (self.dev_online == self.twin.online[self._dev_pairs])
        if same.any():
            keep = ~same
            self._set_dev(self.dev[keep], self.dev_deficit_j[keep], self.dev_online[keep])

    # -- steps ----------------------------------------------------------------------------------
    def draw(self, pair_level_pct: np.ndarray, clients: np.ndarray, energy_j: np.ndarray) -> None:
        """Training energy ``energy_j`` drawn by ``clients`` (distinct) at a time when the trace
        stands at ``pair_level_pct``: an :meth:`EnergyBudget.advance` step with an unchanged level,
        for every client (those that draw nothing only re-read the level; so does the twin)."""
        clients = np.asarray(clients, dtype=np.int64)
        energy_j = np.asarray(energy_j, dtype=float)
        self._rejoin()  # once per draw (a round), not per trace step
        self._deviate(clients[energy_j > 0])
        train = np.zeros(len(self.dev))
        pos, hit = self._find(clients)
        train[pos[hit]] = energy_j[hit]
        self._advance(pair_level_pct, pair_level_pct, train)

    def advance(self, pair_prev_pct: np.ndarray, pair_now_pct: np.ndarray) -> None:
        """One trace step from level ``pair_prev_pct`` to ``pair_now_pct`` (per pair), nothing drawn."""
        self._advance(pair_prev_pct, pair_now_pct, 0.0)

    def advance_steps(self, pair_levels_pct: np.ndarray) -> None:
        """Several trace steps that draw nothing: from the level now (the twin's :attr:`EnergyBudget.trace_pct`) to
        ``pair_levels_pct[0]``, then ``pair_levels_pct[1]``, ... (steps, pairs); bit for bit :meth:`advance` once per
        step, in one pass over the steps (:meth:`EnergyBudget.advance_steps`): the round loop steps its clock through
        tens of trace ticks a round, and nothing reads the budget between them. The online index follows once, at the end."""
        pair_levels_pct = np.asarray(pair_levels_pct, dtype=np.float64)
        if pair_levels_pct.ndim != 2 or pair_levels_pct.shape[1] != self.twin.n:
            raise ValueError(f"pair_levels_pct must be (steps, {self.twin.n}), got {pair_levels_pct.shape}")
        if not len(pair_levels_pct):
            return
        if len(self.dev):
            pairs = self._dev_pairs
            twin = self.twin.level_thresholds()
            self.dev_deficit_j, self.dev_online = _steps(self._dev_capacity_j, self.dev_deficit_j, self.dev_online, self.twin.trace_pct[pairs],
                                                         pair_levels_pct[:, pairs], self.min_pct, self.reentry_pct,
                                                         None if twin is None else (twin[0][pairs], twin[1][pairs]))
        self.twin.advance_steps(pair_levels_pct)
        self.index.update(self.twin.online)

    def _advance(self, pair_prev_pct: np.ndarray, pair_now_pct: np.ndarray, train: Any) -> None:
        if len(self.dev):
            pairs = self._dev_pairs
            self.dev_deficit_j, self.dev_online = _step(
                self._dev_capacity_j, self.dev_deficit_j, self.dev_online,
                pair_prev_pct[pairs], pair_now_pct[pairs], train, self.min_pct, self.reentry_pct,
            )
        self.twin.advance(pair_prev_pct, pair_now_pct, None, 0.0, check=False)
        self.index.update(self.twin.online)

    def take_offline(self, clients: Any) -> None:
        """Take ``clients`` offline now, whatever their level (see :meth:`EnergyBudget.take_offline`)."""
        clients = np.asarray(clients, dtype=np.int64)
        if len(clients):
            pos = self._deviate(clients)  # replaces the arrays: index the new ones
            self.dev_online[pos] = False

    # -- reading --------------------------------------------------------------------------------
    def _available(self, clients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(available energy, capacity) of ``clients``, in joules."""
        pairs = self.pair_of[clients]
        cap = self.twin.capacity_j[pairs]
        deficit = self.twin.deficit_j[pairs].copy()
        if len(self.dev):
            pos, hit = self._find(clients)
            deficit[hit] = self.dev_deficit_j[pos[hit]]
        return np.clip(self.twin.trace_pct[pairs] / 100.0 * cap - deficit, 0.0, cap), cap

    def available_j_at(self, clients: np.ndarray) -> np.ndarray:
        """Energy (J) available to training on ``clients``."""
        return self._available(np.asarray(clients, dtype=np.int64))[0]

    def level_pct_at(self, clients: np.ndarray) -> np.ndarray:
        """Effective battery level (percent) of ``clients``."""
        available, cap = self._available(np.asarray(clients, dtype=np.int64))
        return 100.0 * available / cap

    def online_clients(self, exclude: np.ndarray | None = None) -> OnlineClients:
        """The online clients (sorted, lazily: ``len`` and ``take`` without a whole-population
        array), less ``exclude`` (sorted, distinct client ids)."""
        return OnlineClients(self.index, self.dev, self.dev_online, exclude)

    def online_count(self) -> int:
        """How many clients are online (O(blocks + deviated))."""
        return self.index.count(self.dev, self.dev_online)

    @property
    def online(self) -> np.ndarray:
        """bool (n,): which clients are online (a whole-population array, built on each call)."""
        out = self.twin.online[self.pair_of]
        out[self.dev] = self.dev_online
        return out

    @property
    def deficit_j(self) -> np.ndarray:
        out = self.twin.deficit_j[self.pair_of]
        out[self.dev] = self.dev_deficit_j
        return out

    @property
    def level_pct(self) -> np.ndarray:
        """Effective battery level of every client (a whole-population array)."""
        return self.level_pct_at(np.arange(self.n))

    def lost(self) -> np.ndarray:
        """Clients (sorted) the trace alone keeps online but the budget has offline: lost to training."""
        return self.dev[~self.dev_online & self.twin.online[self.pair_of[self.dev]]]

    # -- checkpoints ----------------------------------------------------------------------------
    def fingerprint(self) -> int:
        """A checksum of every client's pair (computed once): what a checkpoint keeps instead of
        the whole-population array, to tell that it belongs to this population."""
        if self._fingerprint is None:
            self._fingerprint = population_fingerprint(self.pair_of)
        return self._fingerprint

    def state_dict(self) -> dict[str, Any]:
        """The twin and the deviated clients: O(pairs + deviated), whatever the population."""
        return {"twin": self.twin.state_dict(), "n_clients": self.n, "pairs_crc32": self.fingerprint(), "dev": self.dev.copy(),
                "dev_deficit_j": self.dev_deficit_j.copy(), "dev_online": self.dev_online.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "twin" not in state:
            raise ValueError("the energy budget was saved by an older flamingo-sim (one array per client); start the run afresh")
        if "pair_of" in state:  # saved before checkpoints kept the checksum
            pair_of = np.asarray(state["pair_of"], dtype=np.int64)
            same = np.array_equal(pair_of, self.pair_of)
            n = len(pair_of)
        else:
            n = int(state["n_clients"])
            same = n == self.n and int(state["pairs_crc32"]) == self.fingerprint()
        if not same:
            raise ValueError(f"the energy budget is for another population ({n} clients on other trace/phone pairs)")
        dev = np.asarray(state["dev"], dtype=np.int64)
        deficit, online = np.asarray(state["dev_deficit_j"], dtype=float), np.asarray(state["dev_online"], dtype=bool)
        if not (dev.ndim == 1 and deficit.shape == online.shape == dev.shape and np.all(np.diff(dev) > 0)
                and (not len(dev) or (dev[0] >= 0 and dev[-1] < self.n))):
            raise ValueError("the energy budget's deviated clients are malformed")
        self.twin.load_state_dict(state["twin"])
        self._set_dev(dev.copy(), deficit.copy(), online.copy())
        self.index.update(self.twin.online)


def population_fingerprint(values: np.ndarray) -> int:
    """CRC-32 of an integer array's values (as int64): a cheap identity check for checkpoints."""
    import zlib

    return zlib.crc32(np.ascontiguousarray(values, dtype=np.int64).data)
