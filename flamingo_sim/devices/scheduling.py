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
   *Pinned* threads (Flamingo's ``sched_setaffinity``) may run only on their choice's cores; a core outside the
   cpuset is replaced by a free core of the same type inside it (cores of one type are interchangeable, SPEC section
   3; the kernel confines affinity to the cpuset). *Unpinned* threads (PyTorch's default: one thread per big core, no
   affinity) may run anywhere in the cpuset.
2. *The owner's app*: ``foreground_threads`` busy threads (SPEC section 3: foreground apps mostly use 1-2 threads; 2)
   in the ``top_app`` cpuset and cpu cgroup, at the top app's boost (``foreground_nice``, -10:
   ``THREAD_PRIORITY_TOP_APP_BOOST``). The owner starts using the phone while training runs, so training's threads
   were placed first.
3. *One scheduler for both apps* (:func:`schedule`; issue 48): the kernel has one set of rules, and it sees threads,
   not roles. Each thread wakes on the highest-capacity idle CPU it may run on (the top app's ``prefer_idle`` takes an
   idle CPU, little ones included; training threads always overutilise their CPU, which turns EAS's energy-aware
   placement off: ``Documentation/scheduler/sched-energy.rst``, "overutilized"); the balancer moves a waiting thread
   off a shared CPU to an idle one it may use, and a thread up to an idle CPU of higher capacity (misfit migration).
   Under ``scheduler: walt`` (the default: the paper's phones ran 4.9-4.19 kernels with Qualcomm's WALT, and the
   vendor init turns on ``sched_walt_rotate_big_tasks``, :data:`WALT_ROTATION_SOURCE`) a busy thread stuck on a little
   CPU takes turns with the busy threads of big CPUs it may swap with; ``mainline`` has no rotation. A CPU several
   threads hold is split by the cpu cgroups' weights as ``calc_group_shares`` spreads them by load (Android 12 on:
   each app state its own group of 1024), and by nice weights inside a group or before Android 12.
   So the unpinned baseline pushes the owner's threads to the little cores, where they rotate with training's; a
   pinned choice cannot be swapped off its cores, so the owner stays on little cores; a one-core choice leaves the
   owner the other big cores. The owner's loss is its threads' work rate against the rate they would have alone.

**fair**: the earlier simple model: the foreground app holds each SoC's ``foreground_cores``, and
a training thread on one of them runs ``shared_core_slowdown`` times slower, as does the
foreground thread there. Nothing moves.

**The step's price.** A step of ``n`` threads ends when its slowest thread does (the threads
meet at a barrier after every operator). Thread ``i`` needs ``t_i`` of the profiled step time on
its core (1 on the slowest core of its placement without the owner, less on a faster core, more
on a slower one it was moved to) and holds a share ``s_i`` of that core (over its rotation: the mean of its CPUs' speeds
times the shares it holds), so it ends after
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

**Shared memory.** All cores share the L3 (DynamIQ DSU), the system cache and DRAM. Training's DRAM traffic
(:data:`TRAFFIC_BYTES_PER_STEP` per step, over the profiled step) uses a share ``u`` of the SoC's bandwidth
(:data:`DRAM_BANDWIDTH_GBPS`); the part of the owner's work that waits on memory (``owner_memory_share``) waits
``u / (1 - u)`` longer (one queue). Measured co-runs bound it: Shingari et al. (IISWC 2015) saw web browsing slowed up
to 34 % beside memory-heavy co-runners. Under the shipped ``paper`` profiles ``u`` stays below 1 % for the depthwise
nets (a MobileNetV2 step moves about 4.8 GiB in 15-500 s against 30-44 GB/s) and reaches 6.1 % for ResNet-34 on the
Pixel 3, so this term costs the owner at most about 2.2 %: it cannot explain a large loss where the two apps hold
separate cores (the Pixel 3's row of Table 3). L3 capacity contention (training's lines evicting the owner's) has no
public per-phone measurement and is not modelled.

``foreground_loss``: the share of the owner's foreground work rate lost while the owner uses
the phone: the mean over its threads of one minus its work rate (its CPUs' speeds times the shares it holds, over its
rotation) over the rate it would have without training. Under ``owner_loss: paper`` the paper's measured Table 3 is
taken as input instead (:data:`~flamingo_sim.devices.execution.TABLE3_PCMARK_PCT`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.devices.execution import TABLE3_PCMARK_PCT, InterferenceModel, LadderContention
from flamingo_sim.devices.power import core_power_w
from flamingo_sim.devices.profiles import DEFAULT_PARALLEL_FRACTION, PARALLEL_FRACTION, Profile, ProfileSet
from flamingo_sim.devices.soc import Phone

__all__ = ["App", "Threads", "Placement", "Contention", "ContentionTable", "schedule", "apps", "contention", "contention_table", "place",
           "REGIONS_PER_STEP", "DEFAULT_REGIONS", "RUNTIME_SPLIT", "TRAFFIC_BYTES_PER_STEP", "DRAM_BANDWIDTH_GBPS",
           "dram_utilisation", "stall_share", "spin_s", "RUNTIME_SPIN", "CFS_WEIGHTS", "GROUP_SHARES", "TOP_APP_BOOST_NICE",
           "WALT_ROTATION_SOURCE"]

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
#: DRAM traffic of one training step at minibatch 16 (bytes): every tensor autograd saves for the backward pass is
#: written in the forward and read in the backward, and its gradient written and read once (4x the saved bytes), and
#: the parameters are read twice, their gradients written, and SGD reads both and writes the parameters (6x). Saved
#: bytes counted with ``torch.autograd.graph.saved_tensors_hooks`` over one step (torch 2.14.1, torchvision 0.29.1;
#: MobileNetV2 and ShuffleNetV2 x2 at 3x224x224 with 596 classes, ResNet-34 on 1x32x32 with 35): 1,205.0, 691.9 and
#: 96.1 MiB saved; 11.4, 25.05 and 81.24 MiB of parameters. The L2 and L3 (at most a few MiB) hold none of it between
#: the passes, so all of it reaches DRAM; an upper bound where saved tensors share storage.
TRAFFIC_BYTES_PER_STEP: dict[str, float] = {m: (4 * saved + 6 * params) * 2**20 for m, (saved, params) in
                                            {"mobilenet_v2": (1205.0, 11.4), "shufflenet_v2_x2": (691.9, 25.05),
                                             "resnet34": (96.1, 81.24)}.items()}
#: Peak DRAM bandwidth per SoC (GB/s): the memory's transfer rate x the 64-bit (4 x 16-bit) bus, from the SoCs'
#: published memory (Qualcomm product briefs): SD845 LPDDR4X at 1866 MHz (3733 MT/s), SD855 LPDDR4X at 2133 MHz
#: (4266 MT/s), SD865 LPDDR5 at 2750 MHz (5500 MT/s).
DRAM_BANDWIDTH_GBPS: dict[str, float] = {"sd845": 3733e6 * 8 / 1e9, "sd855": 4266e6 * 8 / 1e9, "sd865": 5500e6 * 8 / 1e9}
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


#: Where Qualcomm's vendor init turns on WALT's big-task rotation (``/proc/sys/kernel/sched_walt_rotate_big_tasks``) for the
#: paper's SoCs: LineageOS/android_device_oneplus_sm8250-common init/init.qcom.post_boot.sh (commit a4113c8), the
#: "sdm845" case (line 5103) at line 5156, "msmnile" (SD855, line 5260) at line 5413, "kona" (SD865, line 5700) at line
#: 5737. The Pixel 3 boots Google's own init (crosshatch init.hardware.rc), not checked for it: its SD845 is given the
#: vendor script's setting.
WALT_ROTATION_SOURCE = "init.qcom.post_boot.sh lines 5156 (sdm845), 5413 (msmnile), 5737 (kona)"
#: The top app's UI and render threads run at this nice value: android.os.Process ``THREAD_PRIORITY_TOP_APP_BOOST``
#: (frameworks/base core/java/android/os/Process.java), set by the activity manager's OomAdjuster when an app becomes top.
TOP_APP_BOOST_NICE = -10


@dataclass(frozen=True)
class App:
    """One app's busy threads as the scheduler sees them. It has no role: the same rules place the training app and the
    owner's app (issue 48), so exchanging two apps' roles exchanges their placements."""

    threads: int
    cpus: tuple[int, ...]  # where its threads may run: its cpuset, narrowed by its affinity mask
    group: str  # its cpu cgroup (the app state's)
    nice: int
    pinned: bool  # its affinity was set (sched_setaffinity): the load balancer keeps it inside ``cpus``


@dataclass(frozen=True)
class Threads:
    """Where one app's threads run: each thread's home CPU and share of it, and the CPUs it rotates over
    (``slots``: (cpu, share of the time there, share of that CPU held)), whose work rate (in reference-core speeds)
    and power the step and the owner's loss are priced from."""

    home: tuple[int, ...]
    share: tuple[float, ...]
    slots: tuple[tuple[tuple[int, float, float], ...], ...]

    def rate(self, phone: Phone) -> tuple[float, ...]:
        """Each thread's work rate: the mean over its slots of the CPU's speed times the share held."""
        types, lay = phone.soc.core_types, phone.layout
        return tuple(sum(f * s * types[lay.core_type(c)].speed for c, f, s in sl) for sl in self.slots)

    def held(self) -> tuple[float, ...]:
        """Each thread's CPU time per second of wall time."""
        return tuple(sum(f * s for _, f, s in sl) for sl in self.slots)

    def power_w(self, phone: Phone) -> tuple[float, ...]:
        """Each thread's core power per CPU-second (the mean over its slots, weighed by its CPU time there)."""
        out = []
        for sl in self.slots:
            h = sum(f * s for _, f, s in sl)
            out.append(sum(f * s * core_power_w(phone, c) for c, f, s in sl) / h if h > 0 else 0.0)
        return tuple(out)


def _capacity(phone: Phone, c: int) -> float:
    return phone.soc.core_types[phone.layout.core_type(c)].capacity


def schedule(phone: Phone, apps: tuple[App, ...], rotate: bool) -> tuple[Threads, ...]:
    """Where the busy threads of ``apps`` (in the order they started) run at steady state, by one set of rules for every
    app (module docstring, "One scheduler"):

    1. *Wake-up.* Each thread takes the highest-capacity idle CPU it may run on (top-app ``prefer_idle`` and the
       overutilised system's idle-sibling search both pick an idle CPU, little ones included); with none idle, the
       allowed CPU with the fewest threads (highest capacity first).
    2. *Balancing*, until nothing moves: a thread on a shared CPU moves to the highest-capacity idle CPU it may run on
       (the thread that started earlier first: the later one woke and preempted it, so it is the one waiting); a thread
       moves up to an idle CPU of higher capacity (misfit up-migration: a busy thread fits only the largest CPUs).
    3. *Rotation* (``rotate``, WALT's ``sched_walt_rotate_big_tasks``): a busy thread stuck on a low-power CPU swaps
       with the busy thread of a big CPU where each may run on the other's CPU; the threads linked by such swaps form
       a pool, and each spends an equal share of time on every CPU of its pool (the steady state of repeated swaps).
    4. *Shares* of a CPU held by several threads (:func:`_cpu_shares`).
    """
    lay = phone.layout
    owner: list[int] = []
    where: list[int] = []
    for a, app in enumerate(apps):
        order = _order(phone, app.cpus)
        for _ in range(app.threads):
            idle = [c for c in order if c not in where]
            where.append(idle[0] if idle else min(order, key=where.count))
            owner.append(a)
    for _ in range(4 * len(where) + 1):
        moved = False
        for i, c in enumerate(where):
            free = [x for x in _order(phone, apps[owner[i]].cpus) if x not in where]
            if free and (where.count(c) > 1 or _capacity(phone, free[0]) > _capacity(phone, c)):
                where[i] = free[0]
                moved = True
                break
        if not moved:
            break
    share = _cpu_shares(phone, apps, owner, where)
    slots: list[tuple[tuple[int, float, float], ...]] = [((c, 1.0, s),) for c, s in zip(where, share)]
    if rotate:
        sole = [i for i, c in enumerate(where) if where.count(c) == 1]
        misfit = [i for i in sole if lay.core_type(where[i]) == "low_power"
                  and any(lay.core_type(x) != "low_power" for x in apps[owner[i]].cpus)]
        big = [i for i in sole if lay.core_type(where[i]) != "low_power"]
        pool = {i: {i} for i in misfit + big}  # a misfit and a big thread swap where each may run on the other's CPU
        for m in misfit:
            for b in big:
                if where[b] in apps[owner[m]].cpus and where[m] in apps[owner[b]].cpus and pool[m] is not pool[b]:
                    merged = pool[m] | pool[b]
                    for k in merged:
                        pool[k] = merged
        for members in {id(v): v for v in pool.values() if len(v) > 1}.values():
            spread = tuple((where[i], 1.0 / len(members), 1.0) for i in sorted(members))
            for i in members:
                slots[i] = spread
    out = []
    for a in range(len(apps)):
        idx = [i for i in range(len(where)) if owner[i] == a]
        out.append(Threads(tuple(where[i] for i in idx), tuple(share[i] for i in idx), tuple(slots[i] for i in idx)))
    return tuple(out)


def _cpu_shares(phone: Phone, apps: tuple[App, ...], owner: list[int], where: list[int]) -> list[float]:
    """Each thread's share of its CPU. From Android 12 every app state has its own cpu cgroup of ``GROUP_SHARES``
    (module docstring, step 3); the kernel's ``calc_group_shares`` (kernel/sched/fair.c) gives a group's entity on each
    CPU the group's weight times the group's load there over its load on all CPUs, so a group of four busy threads
    weighs a quarter of 1024 on each of its CPUs and a group of two weighs half. Inside a group, and before Android 12
    (every app thread in the root group), threads split by their nice weights (``CFS_WEIGHTS``)."""
    version = phone.android.version if phone.android is not None else 12
    w = [CFS_WEIGHTS[apps[a].nice] for a in owner]
    group = [apps[a].group for a in owner]
    total = {g: sum(wi for wi, gi in zip(w, group) if gi == g) for g in set(group)}
    out = []
    for i, c in enumerate(where):
        here = [j for j, x in enumerate(where) if x == c]
        if len(here) == 1:
            out.append(1.0)
            continue
        if version < 12 or len({group[j] for j in here}) == 1:
            out.append(w[i] / sum(w[j] for j in here))
            continue
        load = {g: sum(w[j] for j in here if group[j] == g) for g in {group[j] for j in here}}
        entity = {g: GROUP_SHARES * load[g] / total[g] for g in load}
        out.append(entity[group[i]] / sum(entity.values()) * w[i] / load[group[i]])
    return out


@dataclass(frozen=True)
class Placement:
    """Where each thread runs while the owner uses the phone (and, for training, without the owner)."""

    idle: tuple[int, ...]  # each training thread's core without the owner
    train: tuple[int, ...]  # each training thread's core while the owner uses the phone
    train_share: tuple[float, ...]  # the share of its core each training thread holds then
    foreground: tuple[int, ...]  # each of the owner's busy threads' core
    foreground_share: tuple[float, ...]  # the share of its core each of them holds
    rotation: tuple[int, ...] = ()  # the CPUs WALT rotates threads of both apps over (none: no rotation)
    alone: tuple[int, ...] = ()  # each of the owner's busy threads' core without training

    def describe(self) -> str:
        moved = [f"{a}->{b}" for a, b in zip(self.idle, self.train) if a != b]
        shared = sorted({c for c in self.train if c in self.foreground})
        return (f"training on {_cores(self.idle)}; owner's app on {_cores(self.foreground)}"
                + (f"; moved {', '.join(moved)}" if moved else "") + (f"; shared {_cores(tuple(shared))}" if shared else "")
                + (f"; rotating over {_cores(self.rotation)}" if self.rotation else ""))


@dataclass(frozen=True)
class Contention:
    """What the owner's use of the phone does to one execution choice's step (module docstring)."""

    latency_factor: float  # the step takes this many times its profiled latency
    energy_factor: float  # and this many times its profiled energy
    foreground_loss: float  # the share of the owner's foreground work rate lost, in [0, 1]
    placement: Placement
    owner_cpu_loss: float = 0.0  # the part of it from where the owner's threads run (without the shared DRAM)

    @property
    def slows_owner(self) -> bool:
        return self.foreground_loss > 0.0


def _cores(cores: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cores) or "-"


def _order(phone: Phone, cores) -> list[int]:
    """Cores by the kernel's capacity, highest first (ties: the higher id first)."""
    caps = {c: _capacity(phone, c) for c in cores}
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


def apps(phone: Phone, cores: tuple[int, ...], pinned: bool, model: InterferenceModel) -> tuple[App, App]:
    """The training app (a choice's threads, pinned or not) and the owner's foreground app, as :func:`schedule` takes them."""
    if phone.android is None:
        raise ValueError(f"phone {phone.name!r} has no android entry (cpusets) for policy.interference.model 'android'")
    sets = phone.android.cpusets
    allowed = tuple(sets[model.cpuset])
    mask = tuple(sorted(set(_realise(phone, cores, allowed)))) if pinned else allowed
    training = App(len(cores), mask, model.cpuset, model.training_nice, pinned)
    owner = App(model.foreground_threads, tuple(sets["top_app"]), "top_app", model.foreground_nice, False)
    return training, owner


def _fair(phone: Phone, cores: tuple[int, ...], model: InterferenceModel) -> tuple[Threads, Threads, Threads, Threads]:
    held = tuple(model.cores_for(phone.soc.foreground_cores))
    s = 1.0 / model.slowdown_for(phone.soc.shared_core_slowdown)
    t_share = tuple(s if c in held else 1.0 for c in cores)
    f_share = tuple(s if c in cores else 1.0 for c in held)

    def th(cs, sh):
        return Threads(tuple(cs), tuple(sh), tuple(((c, 1.0, x),) for c, x in zip(cs, sh)))

    return th(cores, (1.0,) * len(cores)), th(held, (1.0,) * len(held)), th(cores, t_share), th(held, f_share)


def _threads(phone: Phone, cores: tuple[int, ...], pinned: bool, model: InterferenceModel):
    """Training alone, the owner alone, and both (training first): :func:`schedule` of :func:`apps` (or the fair model)."""
    if model.model == "fair":
        return _fair(phone, cores, model)
    training, owner = apps(phone, cores, pinned, model)
    rotate = model.scheduler == "walt"
    (t_alone,) = schedule(phone, (training,), rotate)
    (o_alone,) = schedule(phone, (owner,), rotate)
    t_both, o_both = schedule(phone, (training, owner), rotate)
    return t_alone, o_alone, t_both, o_both


def place(phone: Phone, cores: tuple[int, ...], pinned: bool, model: InterferenceModel) -> Placement:
    """Where a choice's threads and the owner's busy threads run while the owner uses the phone (module docstring)."""
    t_alone, o_alone, t_both, o_both = _threads(phone, cores, pinned, model)
    rot = tuple(sorted({c for sl in t_both.slots + o_both.slots if len(sl) > 1 for c, _, _ in sl}, reverse=True))
    return Placement(t_alone.home, t_both.home, t_both.share, o_both.home, o_both.share, rot, o_alone.home)


#: How each runtime splits a parallel operator between its threads: PyTorch's pthreadpool (``pthreadpool_parallelize_1d``,
#: src/portable-api.c: each thread runs its own range, then steals from the others') shares the work, so the threads end
#: together; under OpenMP ATen's ``parallel_for`` (ATen/ParallelOpenMP.h ``invoke_parallel``: ``chunk_size = divup(range,
#: num_threads)``, thread ``tid`` takes chunk ``tid``) splits it statically, so the slowest thread sets the end.
RUNTIME_SPLIT: dict[str, str] = {"pthreadpool": "work_sharing", "libomp": "static", "libgomp": "static"}


def stall_share(profile: Profile, cores: tuple[int, ...]) -> float:
    """The share of a choice's profiled step its threads spend stalled on memory, as the calibration's model reads the
    profile (:mod:`~flamingo_sim.devices.calibrate`): the lowest-numbered big core's one-thread step times its speed gives
    the work ``X`` (one thread has no
    stall), Amdahl's law with the DNN's parallel fraction gives the compute ``T0`` of the choice, and the rest of its
    profiled step is stall: ``1 - T0 / L``. 0 for a choice not in the profile or a profile without a single big core."""
    lay, types = profile.phone.layout, profile.phone.soc.core_types
    f = PARALLEL_FRACTION.get(profile.model, DEFAULT_PARALLEL_FRACTION)
    by = {c.cores: c.step_latency_s for c in profile.all_choices}
    single = sorted(c for c in by if len(c) == 1 and lay.core_type(c[0]) != "low_power")  # the lowest-numbered big core
    if not single or cores not in by:
        return 0.0
    work = by[single[0]] * types[lay.core_type(single[0][0])].speed
    v = [types[lay.core_type(c)].speed for c in cores]
    t0 = work * ((1.0 - f) / max(v) + f / (len(cores) * min(v)))
    return min(max(0.0, 1.0 - t0 / by[cores]), 0.999)


def _amdahl(phone: Phone, th: Threads, f: float, k: float, split: str) -> tuple[float, list[float]]:
    """One step of unit work on ``th`` (``step: amdahl``): its wall time and each thread's busy time. A unit of work on a
    CPU of speed ``v`` takes ``1/v + k`` (compute, then the memory stall ``k``, which no core speed changes), stretched
    by the share of the CPU held; the serial part ``1 - f`` runs on the calling thread (the first), the parallel part
    ``f`` as the runtime splits it (:data:`RUNTIME_SPLIT`)."""
    types, lay = phone.soc.core_types, phone.layout
    rho = [sum(fr * sh / (1.0 / types[lay.core_type(c)].speed + k) for c, fr, sh in sl) for sl in th.slots]
    serial = (1.0 - f) / rho[0]
    if split == "work_sharing":
        par = f / sum(rho)
        busy = [par] * len(rho)
    else:
        part = f / len(rho)
        busy = [part / r for r in rho]
        par = max(busy)
    busy[0] += serial
    return serial + par, busy


def dram_utilisation(phone: Phone, dnn_model: str, step_latency_s: float) -> float:
    """The share of the SoC's peak DRAM bandwidth a step of ``step_latency_s`` uses (:data:`TRAFFIC_BYTES_PER_STEP` over
    :data:`DRAM_BANDWIDTH_GBPS`; 0 where either is unknown), at most 0.99."""
    bw = DRAM_BANDWIDTH_GBPS.get(phone.soc.name)
    traffic = TRAFFIC_BYTES_PER_STEP.get(dnn_model)
    if bw is None or traffic is None or step_latency_s <= 0:
        return 0.0
    return min(traffic / step_latency_s / (bw * 1e9), 0.99)


def _queueing(phone: Phone, dnn_model: str, step_latency_s: float) -> float:
    """How much longer a memory access waits beside training's traffic: ``u / (1 - u)`` (one queue, M/M/1)."""
    u = dram_utilisation(phone, dnn_model, step_latency_s)
    return u / (1.0 - u)


def contention(phone: Phone, cores: tuple[int, ...], pinned: bool, model: InterferenceModel, step_latency_s: float,
               dnn_model: str, stall: float = 0.0) -> Contention:
    """The price of one step of the choice ``cores`` while the owner uses the phone (module docstring); ``stall``: the
    share of its profiled step spent stalled on memory (:func:`stall_share`; ``step: amdahl`` only)."""
    t_alone, o_alone, t_both, o_both = _threads(phone, cores, pinned, model)
    rot = tuple(sorted({c for sl in t_both.slots + o_both.slots if len(sl) > 1 for c, _, _ in sl}, reverse=True))
    pl = Placement(t_alone.home, t_both.home, t_both.share, o_both.home, o_both.share, rot, o_alone.home)
    types = phone.soc.core_types
    lay = phone.layout
    if model.step == "amdahl" and model.model != "fair":  # fair is the fixed-slowdown reading: its slowest thread ends the step
        f = PARALLEL_FRACTION.get(dnn_model, DEFAULT_PARALLEL_FRACTION)
        v = [types[lay.core_type(c)].speed for c in cores]
        n = len(cores)
        t0 = (1.0 - f) / max(v) + f / (n * min(v))  # the calibration's compute time of the choice, unit work
        k = t0 * (1.0 / (1.0 - stall) - 1.0) / ((1.0 - f) + f / n)  # its stall per unit of work
        split = RUNTIME_SPLIT[model.runtime]
        unit, b0 = _amdahl(phone, t_alone, f, k, split)
        total, b1 = _amdahl(phone, t_both, f, k, split)
        w0, w1, duration = [b / unit for b in b0], [b / unit for b in b1], total / unit
    else:  # each thread does an equal part at its work rate (the slowest sets the end)
        r0, r1 = t_alone.rate(phone), t_both.rate(phone)
        unit = max(1.0 / r for r in r0)
        w0 = [1.0 / r / unit for r in r0]  # wall time of each thread's part, in profiled steps
        w1 = [1.0 / r / unit for r in r1]
        duration = max(w1)
    alone, both = o_alone.rate(phone), o_both.rate(phone)
    memory = 1.0  # shared DRAM (android only: fair is the earlier fixed-slowdown reading, kept as it was)
    if model.model == "android":
        memory = 1.0 / (1.0 + model.owner_memory_share * _queueing(phone, dnn_model, step_latency_s))
    lost = [min(1.0, max(0.0, 1.0 - b * memory / a)) for a, b in zip(alone, both)]
    loss = sum(lost) / max(len(lost), 1)
    cpu = sum(min(1.0, max(0.0, 1.0 - b / a)) for a, b in zip(alone, both)) / max(len(lost), 1)
    if model.energy == "full_power":
        return Contention(duration, duration, loss, pl, cpu)
    regions = REGIONS_PER_STEP.get(dnn_model, DEFAULT_REGIONS)

    def spun(wait: float, core: int) -> float:
        if wait <= 0:
            return 0.0
        spin = spin_s(model.runtime, types[lay.core_type(core)].max_freq_mhz or 2000.0)
        return min(wait, spin * regions / step_latency_s)  # wait and spin in profiled steps

    def energy(th: Threads, wall: list[float], total: float) -> float:
        power, held = th.power_w(phone), th.held()
        return sum(p * (w * h + spun(total - w, c)) for p, h, w, c in zip(power, held, wall, th.home))

    ratio = energy(t_both, w1, duration) / energy(t_alone, w0, 1.0)
    return Contention(duration, ratio, loss, pl, cpu)


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
            cores = profile_set.label_cores[label]
            c = contention(prof.phone, cores, pinned, model, float(profile_set.space_latency_s[p, j]), profile_set.model,
                           stall_share(prof, cores))
            lat[p, label], en[p, label], loss[p, label] = c.latency_factor, c.energy_factor, c.foreground_loss
        measured = TABLE3_PCMARK_PCT.get(prof.phone.name)
        if model.owner_loss == "paper" and measured is not None:  # Table 3 as input: the baseline's or Flamingo's loss
            loss[p, :] = -measured[1 if pinned else 0] / 100.0
    for a in (lat, en, loss):
        a.setflags(write=False)
    return ContentionTable(lat, en, loss)
