"""Executing training tasks: interference model and the control loop, vectorised over tasks.

A *task* is ``n_steps`` local steps run by one client from time 0 (the request's ``start_s``).
It runs on a ladder of execution choices (position 0 = largest footprint = fastest), with a
profiled latency and power for each rung. The owner's use of the phone is given per slot of
``slot_s`` seconds (``in_use[i, s]`` for ``[s*slot_s, (s+1)*slot_s)``; beyond the last slot the
last value persists).

Interference (:class:`InterferenceModel`, the experiment's ``policy.interference``): while the
owner uses the phone (a trace slot whose screen-on share exceeds ``in_use_threshold``), its
foreground app competes with training for cores. What that does to each execution choice's step
(how much longer it takes, how much more energy it costs, how much of the owner's foreground
work it slows) comes from :func:`flamingo_sim.devices.scheduling.contention`, per phone and
choice: Android's scheduling (``model: android``, the default) or the earlier fixed-slowdown
model (``model: fair``). :func:`run_ladder` takes those three numbers per rung
(:class:`LadderContention`) and applies them to every step that *starts* while the owner uses
the phone. ``interference_s`` counts the time the owner's app ran slowed: the part of such
steps that overlaps the owner's use (never a step's tail past it), so it is at most the owner's
foreground time under training; ``foreground_lost_s`` weighs it by the share of the owner's
work lost.

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

__all__ = ["TABLE3_PCMARK_PCT", "OWNER_LOSS_PAPER_NOTE",
           "InterferenceModel", "LadderContention", "LadderResult", "run_ladder", "in_use_seconds", "DEFAULT_SLOWDOWN",
           "DEFAULT_FOREGROUND_CORES", "APP_STATE_CPUSETS"]

#: Slowdown of a training thread that shares a core with the foreground app under ``model: fair`` where neither the
#: SoC nor the config says otherwise: two runnable threads of equal weight each get half of the core.
DEFAULT_SLOWDOWN = 2.0
#: The cores the foreground app's 1-2 busy threads run on under ``model: fair`` where the SoC does not say otherwise.
DEFAULT_FOREGROUND_CORES = (6, 7)
#: The training app's state -> the cpuset (``phones.<name>.android.cpusets``) it runs in.
APP_STATE_CPUSETS = {"foreground_service": "foreground", "top_app": "top_app", "background": "background"}
#: The paper's Table 3 (Flamingo, DistributedML '23): per phone, the change of the PCMark Work 3.0 score (%) while training
#: ran in the background, (baseline, Flamingo). A measurement: input only under ``owner_loss: paper`` (never a fit);
#: :mod:`flamingo_sim.studies.reproduce.paper` prints it beside the model's Table 3.
TABLE3_PCMARK_PCT: dict[str, tuple[float, float]] = {
    "galaxy_tab_s6": (-10.2, -5.8),
    "oneplus_8": (-12.5, 0.0),
    "pixel_3": (-27.0, -3.1),
    "galaxy_s10e": (-11.2, 0.0),
}
#: What every report of a run with ``owner_loss: paper`` says.
OWNER_LOSS_PAPER_NOTE = ("policy.interference.owner_loss=paper: the owner's loss while training runs is the paper's measured "
                         "Table 3 taken as INPUT (the baseline's PCMark loss for PyTorch's default execution, Flamingo's for a "
                         "pinned choice; phones not in the table keep the model's), so Table 3 here is not a finding")
_EPS = 1e-9  # relative tolerance for "a step starts exactly on a slot boundary / deadline"


@dataclass(frozen=True)
class InterferenceModel:
    """The owner's foreground app against training: the model and its parameters
    (:mod:`flamingo_sim.devices.scheduling` says what each does and where it comes from)."""

    #: "android": Android's scheduling of the two apps on each phone's cpusets (the default); "fair": the foreground app
    #: holds foreground_cores and a training step on one of them runs shared_core_slowdown times slower.
    model: Literal["android", "fair"] = "android"
    #: android: the training app's state: "foreground_service" (the foreground cpuset and cpu cgroup; a long background
    #: computation needs one since Android 8), "top_app" (the app on screen) or "background" (cached, or a JobScheduler job).
    app_state: Literal["foreground_service", "top_app", "background"] = "foreground_service"
    #: android: busy threads of the owner's foreground app (foreground apps mostly use 1-2, SPEC section 3).
    foreground_threads: int = 2
    #: android, Android 11 and older (one cpu cgroup for apps): the training threads' nice value (0: THREAD_PRIORITY_DEFAULT).
    training_nice: int = 0
    #: android: the owner's busy threads' nice value: the top app's UI and render threads run at THREAD_PRIORITY_TOP_APP_BOOST,
    #: -10 (android.os.Process; the activity manager sets it when an app becomes top). It weighs them against training
    #: on a shared core before Android 12 (one cpu cgroup), and inside the top-app group's share from Android 12 on.
    foreground_nice: int = -10
    #: android: the kernel's scheduler: "walt" (the paper's phones' 4.9-4.19 kernels with Qualcomm's WALT, whose vendor
    #: init turns on big-task rotation: threads stuck on little cores take turns on the big ones) or "mainline" (the same
    #: placement and balancing without rotation, as mainline EAS).
    scheduler: Literal["walt", "mainline"] = "walt"
    #: The contended step: "amdahl" (the calibration's own model: a serial part on the calling thread, the parallel part
    #: split as the runtime splits it, and a memory stall that does not speed up or slow down with the core) or
    #: "slowest_thread" (the earlier rule: each thread does an equal part at its core's speed, the slowest sets the end;
    #: always under model: fair).
    step: Literal["amdahl", "slowest_thread"] = "amdahl"
    #: android: the share of the owner's foreground work that waits on DRAM: training's memory traffic slows that share
    #: by the memory's queueing, u / (1 - u) at utilisation u (0 turns the term off). 0.34: Shingari, Arunkumar and Wu
    #: (IISWC 2015) measured web browsing up to 34 % slower beside memory-heavy co-runners on a phone, read as the share
    #: of its work that waits on memory when such co-runners double the memory's latency (u / (1 - u) = 1).
    owner_memory_share: float = 0.34
    #: The owner's loss while training runs (Table 3's intensity): "model" (from the scheduling model, the default) or
    #: "paper" (the paper's measured Table 3 as input: each phone's PCMark loss under the baseline for PyTorch's default
    #: execution and under Flamingo for a pinned choice; a phone not in the table keeps the model's). Every report of a
    #: run with "paper" says so.
    owner_loss: Literal["model", "paper"] = "model"
    #: How idle training threads wait at the barriers: "pthreadpool" (PyTorch's Android builds: spin 1e6 iterations, then
    #: sleep), "libomp" (LLVM OpenMP: spin KMP_BLOCKTIME, 200 ms) or "libgomp" (GNU OpenMP: 300,000 iterations).
    runtime: Literal["pthreadpool", "libomp", "libgomp"] = "pthreadpool"
    #: The energy of a contended step: "cpu_time" (each thread's own CPU time and its spin at its core's power, never the
    #: foreground app's share of a core) or "full_power" (the profiled power for the whole longer step, the earlier accounting).
    energy: Literal["cpu_time", "full_power"] = "cpu_time"
    #: fair: the cores the foreground app holds while the phone is in use; null: each SoC's own (phones.yaml).
    foreground_cores: tuple[int, ...] | None = None
    #: fair: how many times slower a training step runs on a core it shares with the foreground app (1 to 100: a core's
    #: fair share among a handful of runnable threads); null: each SoC's own.
    shared_core_slowdown: float | None = None
    #: A 10-minute trace slot counts as in use when the screen was on for more than this share of it.
    in_use_threshold: float = 0.5
    #: Removed (the nice-weight split "cfs_nice"): a setting here is refused with the reason.
    share: str | None = None

    def __post_init__(self) -> None:
        check_ranges(self, foreground_cores=">= 0", shared_core_slowdown="[1, 100]", in_use_threshold="[0, 1)",
                     training_nice="[-20, 19]", foreground_nice="[-20, 19]", foreground_threads="[0, 64]",
                     owner_memory_share="[0, 1]")
        if self.foreground_cores is not None and len(set(self.foreground_cores)) != len(self.foreground_cores):
            raise FieldError("foreground_cores", "each core index once", list(self.foreground_cores))
        if self.share is not None:
            raise FieldError("share", "no value: it was removed. Android does not split a core between apps by nice weights "
                             "(from Android 12 each app state has its own cpu cgroup); use model: android (the default), "
                             "or model: fair for the fixed slowdown", self.share)

    @property
    def cpuset(self) -> str:
        """The cpuset (``phones.<name>.android.cpusets`` key) the training app runs in."""
        return APP_STATE_CPUSETS[self.app_state]

    def cores_for(self, soc_cores: tuple[int, ...]) -> tuple[int, ...]:
        """``fair``: the foreground cores on a SoC whose own value is ``soc_cores``."""
        return tuple(soc_cores) if self.foreground_cores is None else tuple(self.foreground_cores)

    def slowdown_for(self, soc_slowdown: float) -> float:
        """``fair``: how many times slower a training step runs on a core it shares with the foreground app."""
        return float(soc_slowdown if self.shared_core_slowdown is None else self.shared_core_slowdown)


@dataclass(frozen=True)
class LadderContention:
    """Per task and rung ``(k, C)``: what the owner's use does to a step (:func:`flamingo_sim.devices.scheduling.contention`)."""

    latency_factor: np.ndarray  # a step that starts in use takes this many times its profiled latency
    energy_factor: np.ndarray  # and this many times its profiled energy
    foreground_loss: np.ndarray  # the share of the owner's foreground work rate it costs, in [0, 1)

    @classmethod
    def none(cls, shape: tuple[int, int]) -> "LadderContention":
        """No effect of the owner's use (a phone nobody uses, or a model switched off)."""
        return cls(np.ones(shape), np.ones(shape), np.zeros(shape))

    def take(self, rows) -> "LadderContention":
        return LadderContention(self.latency_factor[rows], self.energy_factor[rows], self.foreground_loss[rows])


@dataclass
class LadderResult:
    """Per task: ``duration_s``, ``energy_j``, ``interference_s`` (the owner's foreground time slowed),
    ``foreground_lost_s`` (that time weighed by the share of the owner's work lost), ``steps`` per
    rung ``(k, C)``, ``final_rung`` and ``end_s`` (``start_s + duration_s``)."""

    duration_s: np.ndarray
    energy_j: np.ndarray
    interference_s: np.ndarray
    foreground_lost_s: np.ndarray
    steps: np.ndarray
    final_rung: np.ndarray
    end_s: np.ndarray


def _check(latency_s, power_w, n_rungs, n_steps, in_use, controlled, contention: LadderContention | None):
    lat = np.asarray(latency_s, dtype=float)
    k, c = lat.shape
    pw = np.asarray(power_w, dtype=float)
    nr = np.asarray(n_rungs, dtype=np.int64)
    ns = np.asarray(n_steps, dtype=np.int64)
    use = np.asarray(in_use, dtype=bool)
    ctl = np.broadcast_to(np.asarray(controlled, dtype=bool), (k,))
    con = LadderContention.none((k, c)) if contention is None else contention
    shapes = {np.shape(a) for a in (pw, con.latency_factor, con.energy_factor, con.foreground_loss)}
    if shapes != {(k, c)} or nr.shape != (k,) or ns.shape != (k,):
        raise ValueError("latency_s, power_w and the contention factors must be (k, C); n_rungs, n_steps (k,)")
    if use.ndim != 2 or use.shape[0] != k or use.shape[1] < 1:
        raise ValueError("in_use must be (k, n_slots) with n_slots >= 1")
    if np.any(nr < 1) or np.any(nr > c) or np.any(ns < 0):
        raise ValueError("n_rungs must be in [1, C] and n_steps >= 0")
    return lat, pw, nr, ns, use, ctl, con


def in_use_seconds(use: np.ndarray, slot_s: float, rows: np.ndarray, start_s: np.ndarray, end_s: np.ndarray) -> np.ndarray:
    """Seconds of ``[start_s, end_s)`` in which the owner of each task ``rows`` uses the phone
    (``use[rows]``'s slots; beyond the last slot its value persists)."""
    n = use.shape[1]
    cum = np.concatenate([np.zeros((use.shape[0], 1)), np.cumsum(use, axis=1) * slot_s], axis=1)

    def upto(t: np.ndarray) -> np.ndarray:
        slot = np.minimum(np.floor(t / slot_s).astype(np.int64), n - 1)
        return cum[rows, slot] + use[rows, slot] * (t - slot * slot_s)

    return np.maximum(upto(np.maximum(end_s, 0.0)) - upto(np.maximum(start_s, 0.0)), 0.0)


def run_ladder(latency_s, power_w, n_rungs, n_steps, in_use, slot_s: float, controlled,
               contention: LadderContention | None = None, factor: float = 1.1, probe_s: float = 120.0,
               start_s=None) -> LadderResult:
    """Run ``k`` tasks on their rung ladders (module docstring), event by event, vectorised.

    ``latency_s``/``power_w`` are ``(k, C)`` (rungs beyond ``n_rungs[i]`` ignored); ``contention``
    what the owner's use does to each rung's step (default: nothing); ``controlled`` (k,) bool
    selects the control loop, otherwise a task stays on rung 0. ``start_s`` (k,) (default 0): when
    each task starts on the ``in_use`` clock (a task that continues an earlier part of a request).
    """
    lat, pw, nr, ns, use, ctl, con = _check(latency_s, power_w, n_rungs, n_steps, in_use, controlled, contention)
    k, c = lat.shape
    n_slots = use.shape[1]
    start = np.zeros(k) if start_s is None else np.asarray(start_s, dtype=float).copy()
    t = start.copy()
    mark = start.copy()
    left = ns.copy()
    rung = np.zeros(k, dtype=np.int64)
    energy = np.zeros(k)
    inter = np.zeros(k)
    lost = np.zeros(k)
    steps = np.zeros((k, c), dtype=np.int64)
    idx = np.flatnonzero(left > 0)
    while idx.size:
        ti, ri, mi = t[idx], rung[idx], mark[idx]
        slot = np.minimum(np.floor(ti / slot_s + _EPS).astype(np.int64), n_slots - 1)
        now = use[idx, slot]
        step = lat[idx, ri] * np.where(now, con.latency_factor[idx, ri], 1.0)
        ci = ctl[idx]
        detect = ci & now & (con.latency_factor[idx, ri] > factor)
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
        energy[idx] += n * lat[idx, ri] * pw[idx, ri] * np.where(now, con.energy_factor[idx, ri], 1.0)
        slowed = now & (con.foreground_loss[idx, ri] > 0)
        overlap = np.where(slowed, in_use_seconds(use, slot_s, idx, ti, ti + dur), 0.0)
        inter[idx] += overlap
        lost[idx] += overlap * np.where(slowed, con.foreground_loss[idx, ri], 0.0)
        np.add.at(steps, (idx, ri), n)
        up = can_probe & (n == n_probe)
        rung[idx] = np.where(detect, np.minimum(ri + 1, nr[idx] - 1), np.where(up, ri - 1, ri))
        mark[idx] = np.where(detect, t[idx], mi)
        idx = idx[left[idx] > 0]
    return LadderResult(t - start, energy, inter, lost, steps, rung, t)
