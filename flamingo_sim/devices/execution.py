"""Executing training tasks: interference model and the control loop, vectorised over tasks.

A *task* is ``n_steps`` local steps run by one client from time 0 (the request's ``start_s``).
It runs on a ladder of execution choices (position 0 = largest footprint = fastest), with a
profiled latency and power for each rung. The owner's use of the phone is given per slot of
``slot_s`` seconds (``in_use[i, s]`` for ``[s*slot_s, (s+1)*slot_s)``; beyond the last slot the
last value persists).

Interference model (:class:`InterferenceModel`, per SoC in ``phones.yaml``, overridable in the
experiment): while the owner uses the phone, the foreground app holds ``foreground_cores``
(shipped SoCs: ``(6, 7)``: foreground apps mostly run 1-2 busy threads, and Android's scheduler
places the top app on the highest-capacity big cores; core 7 is the Prime core on SD855/865).
A training step whose choice shares at least one core with it runs ``shared_core_slowdown``
times (shipped: 2x, two runnable threads share a core fairly) its profiled latency: the thread on a shared core
gets half of the core and a multi-threaded step is as slow as its slowest thread. Its power stays
the profiled power (the other threads spin at the barrier), so the step's energy grows by the
same factor. The step's whole duration counts as *interference* (time training shared a big core
with the foreground app, the user-experience measure). A step's conditions are those at its
start.

``share: cfs_nice`` grounds the split of a shared core in a documented mechanism instead: Linux's
CFS gives each runnable thread ``weight / sum of weights`` of a core (:data:`CFS_WEIGHTS`, the
kernel's ``sched_prio_to_weight``), and Android runs background work at
``THREAD_PRIORITY_BACKGROUND`` (nice 10, weight 110) while the foreground app's threads run at
``THREAD_PRIORITY_DEFAULT`` (nice 0, weight 1024). Training on a shared core then runs
1134/110 = 10.3x slower and the foreground 1134/1024 = 1.107x slower (-9.7 % of its rate). The
mechanism is the kernel's, so it is the same on every SoC; whether the paper's training ran at
background priority, and what cgroup CPU shares or cpusets the vendor's Android adds, the paper
does not say, so ``fair`` (equal weights) stays the default. Neither is fitted to Table 3.

Control loop (SPEC section 3; only on "controlled" tasks). After each step, with ``L`` its
measured latency and ``P`` the profiled latency of the current rung::

    if L > factor * P:                      # interference detected (factor 1.1)
        rung = min(rung + 1, last); mark = now
    elif now - mark >= probe_s and rung > 0: # probe upward (120 s)
        rung = rung - 1                      # mark unchanged, as in the SPEC's pseudo-code

``mark`` starts at the task's start, and each task starts at rung 0. So after 2 minutes without
detected interference the loop climbs one rung per step until it hits interference again.

:func:`run_ladder` computes this exactly but event by event: within a stretch where the slot,
the rung and the probe deadline do not change, all steps are equal, so it advances every task
by a whole stretch per iteration (vectorised over tasks); the number of iterations is the
largest number of events of one task, not the number of steps. The plain per-step loop it is
tested and benchmarked against lives with the tests (``tests/devices/ladder_reference.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from flamingo_sim.config import FieldError, check_ranges

__all__ = ["InterferenceModel", "LadderResult", "run_ladder", "DEFAULT_SLOWDOWN", "DEFAULT_FOREGROUND_CORES", "CFS_WEIGHTS"]

#: Linux CFS load weight by nice value -20..19 (the kernel's ``sched_prio_to_weight`` table, kernel/sched/core.c):
#: a runnable thread gets ``weight / sum of weights`` of a core it shares. Android maps its thread priorities onto nice
#: values: ``THREAD_PRIORITY_DEFAULT`` 0, ``THREAD_PRIORITY_BACKGROUND`` 10 (android.os.Process).
CFS_WEIGHTS: dict[int, int] = dict(zip(range(-20, 20), (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991,
    1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)))

#: Slowdown of a training thread that shares a core with the foreground app where neither the
#: SoC nor the config says otherwise: Linux's fair scheduler gives each of two runnable threads
#: half of the core.
DEFAULT_SLOWDOWN = 2.0
#: The cores the foreground app's 1-2 busy threads run on where the SoC does not say otherwise.
DEFAULT_FOREGROUND_CORES = (6, 7)
_EPS = 1e-9  # relative tolerance for "a step starts exactly on a slot boundary / deadline"


@dataclass(frozen=True)
class InterferenceModel:
    """Which cores the foreground app holds while the phone is in use, and the slowdown.

    ``foreground_cores`` / ``shared_core_slowdown`` left ``None`` take each phone's SoC values
    from ``phones.yaml`` (``socs.<soc>.foreground_cores``, ``shared_core_slowdown``); set here
    they override every SoC. ``in_use_threshold``: a trace slot counts as in use when the screen
    was on for more than this share of it (GreenHub's ``screen_on_frac``).
    """

    #: The cores the foreground app holds while the phone is in use; null: each SoC's own (``phones.yaml``).
    foreground_cores: tuple[int, ...] | None = None
    #: How many times slower a training step runs on a core it shares with the foreground app; null: each SoC's own.
    shared_core_slowdown: float | None = None
    #: A 10-minute trace slot counts as in use when the screen was on for more than this share of it.
    in_use_threshold: float = 0.5
    #: How a shared core is split: "fair" (each SoC's shared_core_slowdown, for training and the foreground alike: two
    #: threads of equal weight, 2x) or "cfs_nice" (Linux CFS weights of the two threads' nice values, the same on every
    #: SoC: training slows by (w_fg + w_tr) / w_tr, the foreground by (w_fg + w_tr) / w_fg).
    share: Literal["fair", "cfs_nice"] = "fair"
    #: share cfs_nice: the training threads' nice value (10: Android's THREAD_PRIORITY_BACKGROUND).
    training_nice: int = 10
    #: share cfs_nice: the foreground app's busy threads' nice value (0: Android's THREAD_PRIORITY_DEFAULT).
    foreground_nice: int = 0

    def __post_init__(self) -> None:
        check_ranges(self, foreground_cores=">= 0", shared_core_slowdown=">= 1", in_use_threshold="[0, 1)",
                     training_nice="[-20, 19]", foreground_nice="[-20, 19]")
        if self.foreground_cores is not None and len(set(self.foreground_cores)) != len(self.foreground_cores):
            raise FieldError("foreground_cores", "each core index once", list(self.foreground_cores))

    def cores_for(self, soc_cores: tuple[int, ...]) -> tuple[int, ...]:
        """The foreground cores on a SoC whose own value is ``soc_cores``."""
        return tuple(soc_cores) if self.foreground_cores is None else tuple(self.foreground_cores)

    def slowdown_for(self, soc_slowdown: float) -> float:
        """How many times slower a training step runs on a core it shares with the foreground app."""
        if self.share == "cfs_nice":
            w_tr, w_fg = CFS_WEIGHTS[self.training_nice], CFS_WEIGHTS[self.foreground_nice]
            return (w_fg + w_tr) / w_tr
        return float(soc_slowdown if self.shared_core_slowdown is None else self.shared_core_slowdown)

    def foreground_slowdown_for(self, soc_slowdown: float) -> float:
        """How many times slower the foreground app's work runs on a core it shares with training (Table 3's intensity)."""
        if self.share == "cfs_nice":
            w_tr, w_fg = CFS_WEIGHTS[self.training_nice], CFS_WEIGHTS[self.foreground_nice]
            return (w_fg + w_tr) / w_fg
        return self.slowdown_for(soc_slowdown)


@dataclass
class LadderResult:
    """Per task: ``duration_s``, ``energy_j``, ``interference_s``, ``steps`` per rung ``(k, C)``,
    and ``end_s`` (``start_s + duration_s``)."""

    duration_s: np.ndarray
    energy_j: np.ndarray
    interference_s: np.ndarray
    steps: np.ndarray
    final_rung: np.ndarray
    end_s: np.ndarray


def _check(latency_s, power_w, shared, n_rungs, n_steps, in_use, controlled):
    lat = np.asarray(latency_s, dtype=float)
    k, c = lat.shape
    pw = np.asarray(power_w, dtype=float)
    sh = np.asarray(shared, dtype=bool)
    nr = np.asarray(n_rungs, dtype=np.int64)
    ns = np.asarray(n_steps, dtype=np.int64)
    use = np.asarray(in_use, dtype=bool)
    ctl = np.broadcast_to(np.asarray(controlled, dtype=bool), (k,))
    if pw.shape != (k, c) or sh.shape != (k, c) or nr.shape != (k,) or ns.shape != (k,):
        raise ValueError("latency_s, power_w, shared must be (k, C); n_rungs, n_steps (k,)")
    if use.ndim != 2 or use.shape[0] != k or use.shape[1] < 1:
        raise ValueError("in_use must be (k, n_slots) with n_slots >= 1")
    if np.any(nr < 1) or np.any(nr > c) or np.any(ns < 0):
        raise ValueError("n_rungs must be in [1, C] and n_steps >= 0")
    return lat, pw, sh, nr, ns, use, ctl


def _slowdowns(interference: InterferenceModel, slowdown, k: int) -> np.ndarray:
    if slowdown is not None:
        return np.broadcast_to(np.asarray(slowdown, dtype=float), (k,))
    return np.full(k, interference.slowdown_for(DEFAULT_SLOWDOWN))


def run_ladder(latency_s, power_w, shared, n_rungs, n_steps, in_use, slot_s: float, controlled,
               interference: InterferenceModel = InterferenceModel(), factor: float = 1.1,
               probe_s: float = 120.0, start_s=None, slowdown=None) -> LadderResult:
    """Run ``k`` tasks on their rung ladders (module docstring), event by event, vectorised.

    ``latency_s``/``power_w``/``shared`` are ``(k, C)`` (rungs beyond ``n_rungs[i]`` ignored;
    ``shared``: the rung's cores overlap the foreground app's); ``controlled`` (k,) bool selects
    the control loop, otherwise a task stays on rung 0. ``start_s`` (k,) (default 0): when each
    task starts on the ``in_use`` clock (a task that continues an earlier part of a request).
    ``slowdown`` (k,): each task's shared-core slowdown (default: the model's, or 2).
    """
    lat, pw, sh, nr, ns, use, ctl = _check(latency_s, power_w, shared, n_rungs, n_steps, in_use, controlled)
    k, c = lat.shape
    n_slots = use.shape[1]
    slow = _slowdowns(interference, slowdown, k)
    detects = slow > factor
    start = np.zeros(k) if start_s is None else np.asarray(start_s, dtype=float).copy()
    t = start.copy()
    mark = start.copy()
    left = ns.copy()
    rung = np.zeros(k, dtype=np.int64)
    energy = np.zeros(k)
    inter = np.zeros(k)
    steps = np.zeros((k, c), dtype=np.int64)
    idx = np.flatnonzero(left > 0)
    while idx.size:
        ti, ri, mi = t[idx], rung[idx], mark[idx]
        slot = np.minimum(np.floor(ti / slot_s + _EPS).astype(np.int64), n_slots - 1)
        s_now = use[idx, slot] & sh[idx, ri]
        step = lat[idx, ri] * np.where(s_now, slow[idx], 1.0)
        ci = ctl[idx]
        detect = ci & s_now & detects[idx]
        # Steps that start before the next slot boundary (the last slot lasts for ever).
        to_bound = np.where(slot >= n_slots - 1, np.inf, (slot + 1 - _EPS) * slot_s - ti)
        n_slot = np.maximum(np.ceil(to_bound / step), 1.0)
        # Steps until the one after which now - mark >= probe_s.
        can_probe = ci & ~detect & (ri > 0)
        n_probe = np.where(can_probe, np.maximum(np.ceil((mi + probe_s * (1 - _EPS) - ti) / step), 1.0), np.inf)
        n = np.minimum(np.minimum(left[idx].astype(float), n_slot), n_probe)
        n = np.where(detect, 1.0, n).astype(np.int64)
        dur = n * step
        t[idx] = ti + dur
        left[idx] -= n
        energy[idx] += dur * pw[idx, ri]
        inter[idx] += np.where(s_now, dur, 0.0)
        np.add.at(steps, (idx, ri), n)
        up = can_probe & (n == n_probe)
        rung[idx] = np.where(detect, np.minimum(ri + 1, nr[idx] - 1), np.where(up, ri - 1, ri))
        mark[idx] = np.where(detect, t[idx], mi)
        idx = idx[left[idx] > 0]
    return LadderResult(t - start, energy, inter, steps, rung, t)
