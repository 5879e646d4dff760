"""Training beside the owner's foreground app: where each thread runs, and what a step then costs.

While the owner uses the phone, its foreground app competes with training for cores. This
module decides, per phone and execution choice, what happens then (:func:`contention`), as one
of two models (``policy.interference.model``):

**android** (the default): Android's scheduling, every parameter from the phone's catalogue entry
(``phones.<name>.android``: its release and the cpuset of each app state, cited in
``phones.yaml``) or a documented kernel or AOSP default.

1. *Where training runs.* The training app runs in an app state (``app_state``): by default a
   foreground service, which Android gives ``SCHED_GROUP_DEFAULT`` and so the ``foreground``
   cpuset and cpu cgroup (AOSP OomAdjuster: ``"fg-service"`` -> ``PERCEPTIBLE_APP_ADJ``,
   ``SCHED_GROUP_DEFAULT``; ``SCHED_GROUP_DEFAULT`` -> ``SP_FOREGROUND`` -> ``CPUSET_SP_FOREGROUND``).
   A long-running computation in the background needs one since Android 8's background limits; a
   process holding only a WakeLock falls to the cached state (``background``), a JobScheduler
   job is bound ``BIND_NOT_FOREGROUND`` (``background`` too), an app on screen is ``top_app``.
   *Pinned* threads (Flamingo's ``sched_setaffinity``) run on their choice's cores; a core
   outside the cpuset is replaced by a free core of the same type inside it (cores of one type
   are interchangeable, SPEC section 3; the kernel confines affinity to the cpuset), and threads
   beyond the cpuset's cores of that type double up. *Unpinned* threads (PyTorch's default: one
   thread per big core, no affinity) are placed by the kernel on the highest-capacity CPUs of the
   cpuset (capacity = the device tree's ``capacity-dmips-mhz`` x its highest frequency). EAS's
   energy-aware placement does not apply: it is disabled as soon as one CPU runs above 80 % of
   its capacity (``Documentation/scheduler/sched-energy.rst``, "overutilized"), which training
   threads always do, and the capacity-aware load balancer places them instead.
2. *Where the owner's app runs.* Its ``foreground_threads`` busy threads (SPEC section 3:
   foreground apps mostly use 1-2 threads; 2) run in the ``top_app`` cpuset. Android boosts
   the top app (the Pixel 3's init: ``schedtune.boost 10`` and ``prefer_idle 1`` for top-app),
   so its threads take the highest-capacity *idle* big or Prime core first, and only when none
   is idle a core training holds (the highest-capacity one).
3. *Who yields.* A core both want: an unpinned training thread is moved by the load balancer to
   a free CPU of its cpuset, if one is free (highest capacity first), and runs there at that
   core's speed (``core_types.<type>.speed``); a pinned thread cannot move. Where no CPU is free
   or the thread is pinned, CFS splits the core: on Android 12 and later each app state has its
   own cpu cgroup and AOSP sets no ``cpu.shares`` (each 1024), so the two groups split it by
   those weights (equal); before 12 every app thread is in the root cgroup and CFS splits it by
   the threads' nice weights (``training_nice``, ``foreground_nice``; the kernel's
   ``sched_prio_to_weight``).

**fair**: the earlier simple model: the foreground app holds each SoC's ``foreground_cores``, and
a training thread on one of them runs ``shared_core_slowdown`` times slower, as does the
foreground thread there. Nothing moves.

**The step's price.** A step of ``n`` threads ends when its slowest thread does (the threads
meet at a barrier after every operator). Thread ``i`` needs ``t_i`` of the profiled step time on
its core (1 on the slowest core of its placement without the owner, less on a faster core, more
on a slower one it was moved to) and holds a share ``s_i`` of that core, so it ends after
``t_i / s_i``; the step lasts ``D = max_i t_i / s_i`` (``latency_factor``). Energy
(``energy``):

- ``cpu_time`` (default): each thread is charged its own CPU time at its core's power, never the
  foreground app's share of a shared core, plus its wait at the barriers as the runtime waits:
  PyTorch's Android builds use no OpenMP (``scripts/build_android.sh``: ``-DUSE_OPENMP=OFF``)
  and run operators on pthreadpool, whose idle workers spin 1,000,000 iterations of a ``yield``
  loop (``PTHREADPOOL_SPIN_WAIT_ITERATIONS``, ``src/threadpool-common.h`` line 43) and then
  sleep on a futex (no power above idle). A step runs ``regions`` parallel operators (ATen
  operators of one training step, counted with a dispatch hook: :data:`REGIONS_PER_STEP`), so a
  thread waiting ``w`` seconds in a step spins ``min(1, spin_s x regions / w)`` of it.
  ``spin_s`` is the runtime's (``runtime``): ``pthreadpool`` 1e6 iterations at about 4 cycles
  each (an estimate) at the core's highest frequency; ``libomp`` LLVM OpenMP's ``KMP_BLOCKTIME``
  default, 200 ms; ``libgomp`` GNU OpenMP's ``GOMP_SPINCOUNT`` default, 300,000 iterations.
  A core's power is split between its threads by the physical model's per-core power
  (:mod:`~flamingo_sim.devices.power`), and the step's energy is normalised so that the step
  without the owner costs exactly its profiled energy.
- ``full_power`` (the earlier accounting): the step runs at its full profiled power for all of
  ``D`` (the other threads spin the whole time), which charges training the foreground app's
  share of a shared core.

``foreground_loss``: the share of the owner's foreground work rate lost while the owner uses
the phone, the mean over its threads of one minus the share of its core it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.devices.execution import InterferenceModel, LadderContention
from flamingo_sim.devices.power import core_power_w
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.soc import Phone

__all__ = ["Placement", "Contention", "ContentionTable", "contention", "contention_table", "place", "REGIONS_PER_STEP", "DEFAULT_REGIONS", "spin_s",
           "RUNTIME_SPIN", "CFS_WEIGHTS", "GROUP_SHARES"]

#: Linux CFS load weight by nice value -20..19 (the kernel's ``sched_prio_to_weight`` table, kernel/sched/core.c).
CFS_WEIGHTS: dict[int, int] = dict(zip(range(-20, 20), (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991,
    1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)))
#: ``cpu.shares`` of an app state's cpu cgroup from Android 12 on: AOSP creates the groups (android-12.0.0_r1
#: rootdir/init.rc lines 151-157) and sets no shares on them, so each keeps the kernel's default, 1024.
GROUP_SHARES = 1024

#: Parallel operators in one training step (forward, backward and the SGD update at batch 2), counted by running
#: each network under a ``TorchDispatchMode`` that counts ATen operator calls (torchvision 0.29.1); an upper bound
#: on the parallel regions, so the smallest wait per region and the largest spin share.
REGIONS_PER_STEP: dict[str, int] = {"mobilenet_v2": 784, "shufflenet_v2_x2": 1057, "resnet34": 628}
#: Regions per step of a model not in :data:`REGIONS_PER_STEP`.
DEFAULT_REGIONS = 800
#: How each runtime's idle workers wait: (spin iterations or None, seconds if given directly, cycles per iteration).
RUNTIME_SPIN: dict[str, tuple[float | None, float | None, float]] = {
    "pthreadpool": (1_000_000, None, 4.0),  # PTHREADPOOL_SPIN_WAIT_ITERATIONS, a yield-check-branch loop
    "libomp": (None, 0.2, 0.0),  # KMP_BLOCKTIME default 200 ms
    "libgomp": (300_000, None, 4.0),  # GOMP_SPINCOUNT default when OMP_WAIT_POLICY is unset
}


def spin_s(runtime: str, freq_mhz: float) -> float:
    """How long an idle worker of ``runtime`` spins before it sleeps, on a core at ``freq_mhz``."""
    iterations, seconds, cycles = RUNTIME_SPIN[runtime]
    if seconds is not None:
        return seconds
    return float(iterations or 0.0) * cycles / (freq_mhz * 1e6)


def _split(phone: Phone, model: InterferenceModel, k_train: int, k_owner: int) -> tuple[float, float]:
    """How CFS splits one core between ``k_train`` training threads and ``k_owner`` of the owner's busy
    threads (module docstring, step 3): each training thread's share of the core, and the share of
    the core the owner's threads keep together (1 without training)."""
    if k_train == 0 or k_owner == 0:
        return (1.0 / k_train if k_train else 0.0), 1.0
    version = phone.android.version if phone.android is not None else 12
    if version >= 12 and model.app_state != "top_app":  # two cpu cgroups, GROUP_SHARES each
        train_group = GROUP_SHARES / (2.0 * GROUP_SHARES)
        return train_group / k_train, 1.0 - train_group
    w_t, w_f = CFS_WEIGHTS[model.training_nice], CFS_WEIGHTS[model.foreground_nice]  # one group: the threads' nice weights
    total = k_train * w_t + k_owner * w_f
    return w_t / total, k_owner * w_f / total


@dataclass(frozen=True)
class Placement:
    """Where each thread runs while the owner uses the phone (and, for training, without the owner)."""

    idle: tuple[int, ...]  # each training thread's core without the owner
    train: tuple[int, ...]  # each training thread's core while the owner uses the phone
    train_share: tuple[float, ...]  # the share of its core each training thread holds then
    foreground: tuple[int, ...]  # each of the owner's busy threads' core
    foreground_share: tuple[float, ...]  # the share of its core each of them holds

    def describe(self) -> str:
        moved = [f"{a}->{b}" for a, b in zip(self.idle, self.train) if a != b]
        shared = sorted({c for c in self.train if c in self.foreground})
        return (f"training on {_cores(self.idle)}; owner's app on {_cores(self.foreground)}"
                + (f"; moved {', '.join(moved)}" if moved else "") + (f"; shared {_cores(tuple(shared))}" if shared else ""))


@dataclass(frozen=True)
class Contention:
    """What the owner's use of the phone does to one execution choice's step (module docstring)."""

    latency_factor: float  # the step takes this many times its profiled latency
    energy_factor: float  # and this many times its profiled energy
    foreground_loss: float  # the share of the owner's foreground work rate lost, in [0, 1)
    placement: Placement

    @property
    def slows_owner(self) -> bool:
        return self.foreground_loss > 0.0


def _cores(cores: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cores) or "-"


def _order(phone: Phone, cores) -> list[int]:
    """Cores by the kernel's capacity, highest first (ties: the higher id first)."""
    caps = {c: phone.soc.core_types[phone.layout.core_type(c)].capacity for c in cores}
    return sorted(caps, key=lambda c: (-caps[c], -c))


def _realise(phone: Phone, cores: tuple[int, ...], allowed: tuple[int, ...]) -> list[int]:
    """A pinned choice's threads inside the cpuset: its own cores where allowed, else free cores of the same type."""
    lay = phone.layout
    out: list[int | None] = [c if c in allowed else None for c in cores]
    for i, c in enumerate(cores):
        if out[i] is not None:
            continue
        same = [a for a in sorted(allowed) if lay.core_type(a) == lay.core_type(c)]
        free = [a for a in same if a not in out]
        pool = free or same or sorted(allowed)
        out[i] = pool[0] if free else pool[i % len(pool)]
    return [int(c) for c in out if c is not None]


def place(phone: Phone, cores: tuple[int, ...], pinned: bool, model: InterferenceModel) -> Placement:
    """Where a choice's threads and the owner's busy threads run while the owner uses the phone (module docstring)."""
    if model.model == "fair":
        held = tuple(model.cores_for(phone.soc.foreground_cores))
        s = 1.0 / model.slowdown_for(phone.soc.shared_core_slowdown)
        return Placement(tuple(cores), tuple(cores), tuple(s if c in held else 1.0 for c in cores), held,
                         tuple(s if c in cores else 1.0 for c in held))
    if phone.android is None:
        raise ValueError(f"phone {phone.name!r} has no android entry (cpusets) for policy.interference.model 'android'")
    sets = phone.android.cpusets
    allowed = sets[model.cpuset]
    n = len(cores)
    if pinned:
        idle = _realise(phone, cores, allowed)
    else:
        order = _order(phone, allowed)
        idle = [order[i % len(order)] for i in range(n)]
    lay = phone.layout
    fitting = [c for c in _order(phone, sets["top_app"]) if lay.core_type(c) != "low_power"] or _order(phone, sets["top_app"])
    train = list(idle)
    fg: list[int] = []
    for _ in range(model.foreground_threads):
        idle_fit = [c for c in fitting if c not in train and c not in fg]
        busy_fit = [c for c in fitting if c not in fg]
        fg.append((idle_fit or busy_fit or fitting)[0])
    if not pinned:  # the load balancer moves an unpinned thread off the owner's core to a free CPU of its cpuset
        for i, c in enumerate(train):
            if c in fg:
                free = [a for a in _order(phone, allowed) if a not in train and a not in fg]
                if free:
                    train[i] = free[0]
    t_share = [_split(phone, model, train.count(c), fg.count(c))[0] for c in train]
    f_share = [_split(phone, model, train.count(c), fg.count(c))[1] for c in fg]
    return Placement(tuple(idle), tuple(train), tuple(t_share), tuple(fg), tuple(f_share))


def contention(phone: Phone, cores: tuple[int, ...], pinned: bool, model: InterferenceModel, step_latency_s: float,
               dnn_model: str) -> Contention:
    """The price of one step of the choice ``cores`` while the owner uses the phone (module docstring)."""
    pl = place(phone, cores, pinned, model)
    types = phone.soc.core_types
    lay = phone.layout

    def speed(c: int) -> float:
        return types[lay.core_type(c)].speed

    # Without the owner: each thread's time, its core's own threads sharing it, the slowest sets the profiled step.
    idle_share = [1.0 / pl.idle.count(c) for c in pl.idle]
    idle_wall = [1.0 / speed(c) / s for c, s in zip(pl.idle, idle_share)]
    unit = max(idle_wall)
    t0 = [1.0 / speed(c) / unit for c in pl.idle]  # CPU time of each thread, in profiled steps
    w0 = [t / s for t, s in zip(t0, idle_share)]
    t1 = [1.0 / speed(c) / unit for c in pl.train]
    w1 = [t / s for t, s in zip(t1, pl.train_share)]
    duration = max(w1)
    loss = sum(1.0 - s for s in pl.foreground_share) / max(len(pl.foreground_share), 1)
    if model.energy == "full_power":
        return Contention(duration, duration, loss, pl)
    regions = REGIONS_PER_STEP.get(dnn_model, DEFAULT_REGIONS)

    def spun(wait: float, core: int) -> float:
        if wait <= 0:
            return 0.0
        spin = spin_s(model.runtime, types[lay.core_type(core)].max_freq_mhz or 2000.0)
        return min(wait, spin * regions / step_latency_s)  # wait and spin in profiled steps

    def energy(threads, cpu, wall, total) -> float:
        return sum(core_power_w(phone, c) * (t + spun(total - w, c)) for c, t, w in zip(threads, cpu, wall))

    ratio = energy(pl.train, t1, w1, duration) / energy(pl.idle, t0, w0, 1.0)
    return Contention(duration, ratio, loss, pl)


@dataclass(frozen=True)
class ContentionTable:
    """:func:`contention` for every (phone, label) of a profile set, as arrays ``(n_phones, n_labels)``
    (a label outside a phone's state space: no effect)."""

    latency_factor: np.ndarray
    energy_factor: np.ndarray
    foreground_loss: np.ndarray

    def at(self, phone_idx: np.ndarray, label_idx: np.ndarray) -> LadderContention:
        """The rungs ``label_idx`` (k, C; -1 padding) of tasks on phones ``phone_idx`` (k,)."""
        ph = np.asarray(phone_idx, dtype=np.int64)[:, None]
        lab = np.asarray(label_idx, dtype=np.int64)
        safe = np.maximum(lab, 0)
        pad = lab < 0
        return LadderContention(np.where(pad, 1.0, self.latency_factor[ph, safe]), np.where(pad, 1.0, self.energy_factor[ph, safe]),
                                np.where(pad, 0.0, self.foreground_loss[ph, safe]))


def contention_table(profile_set: ProfileSet, model: InterferenceModel, pinned: bool) -> ContentionTable:
    """:func:`contention` of every choice of every phone of ``profile_set`` (threads pinned or not)."""
    shape = (profile_set.n_phones, profile_set.n_labels)
    lat, en, loss = np.ones(shape), np.ones(shape), np.zeros(shape)
    for p, prof in enumerate(profile_set.profiles):
        for j in range(int(profile_set.n_space[p])):
            label = int(profile_set.space_label_idx[p, j])
            c = contention(prof.phone, profile_set.label_cores[label], pinned, model, float(profile_set.space_latency_s[p, j]),
                           profile_set.model)
            lat[p, label], en[p, label], loss[p, label] = c.latency_factor, c.energy_factor, c.foreground_loss
    for a in (lat, en, loss):
        a.setflags(write=False)
    return ContentionTable(lat, en, loss)
