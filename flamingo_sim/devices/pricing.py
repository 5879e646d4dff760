"""The one place a cohort's tasks are priced: memory, the policy's choice, contention, time, power and
energy, heat, radio, in one pass, into one typed record.

Every engine (the round loop, FedBuff, FedScale's and Flower's adapters through it) prices the tasks
it hands out here, in this order:

1. **memory** (:class:`MemoryFit`): each client's minibatch, the largest that fits its phone
   (``devices.memory``), and who cannot train at all (reason ``out_of_memory``);
2. **the policy's choice** (:meth:`~flamingo_sim.devices.policies.Policy.run_tasks`): accept or
   decline, the execution choices, and through them contention with the owner's app, time, power and
   energy of the compute (:class:`~flamingo_sim.devices.policies.PricedPolicy.price`: the step's
   latency and energy scale with the client's minibatch);
3. **heat** (:class:`HeatModel`): the phone's modelled temperature at the start (its trace's plus
   the excess its earlier tasks left, decayed since), and each task's cluster capped once it passes
   its throttle threshold (:func:`~flamingo_sim.devices.thermal.throttled_task`, the throttle rule
   :meth:`~flamingo_sim.devices.soc.SocSpec.throttle_rule`);
4. **radio** (the model's download and upload, priced by the engine's network and handed in as
   :class:`Links`): their time joins the task's, their energy the battery's (``network.model:
   traces``; none under ``lognormal``).

The result is a :class:`PricedCohort`: what the battery, the thermal state, the metrics and the
reports read, and all they read. After the engine settles the round (who counts, the share of each
task that ran), :meth:`DevicePricing.settle` books each phone's heat where its task stopped: the heat
a phone receives is the electrical power its battery is charged, one number per step (energy
conserved, for the part of a task that ran too: :class:`PowerTimeline`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Generic, Protocol, TypeVar

import numpy as np

from flamingo_sim.devices.execution import OWNER_LOSS_PAPER_NOTE, TABLE3_PCMARK_PCT  # re-exported: the engines reach the device model here
from flamingo_sim.devices.memory import GIB, largest_batch
from flamingo_sim.devices.policies import Policy, TaskOutcome, TaskRequest, decline_reasons
from flamingo_sim.devices.policies.base import check_outcome
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.sparse import SparseVector
from flamingo_sim.devices.thermal import ThrottledTasks, decayed_c, excess_after, rc_excess_c, throttled_task
from flamingo_sim.errors import ConfigError

__all__ = ["OWNER_LOSS_PAPER_NOTE", "TABLE3_PCMARK_PCT",
           "OUT_OF_MEMORY", "transfer_s", "HeatModel", "MemoryFit", "Links", "PricedCohort", "DevicePricing", "PowerTimeline"]

#: The typed drop reason of a client whose training does not fit.
OUT_OF_MEMORY = "out_of_memory"


def transfer_s(mbit: np.ndarray | float, rate_mbps: np.ndarray | float) -> np.ndarray:
    """Seconds to move ``mbit`` megabits at ``rate_mbps``: every transfer time of a run is this one division."""
    return np.asarray(mbit, dtype=float) / rate_mbps


@dataclass(frozen=True)
class HeatModel:
    """Each phone's thermal circuit and, per execution choice, its throttle rule (arrays by phone, and by phone x label)."""

    resistance_k_per_w: np.ndarray  # (n_phones,)
    tau_s: np.ndarray  # (n_phones,) the circuit's time constant
    threshold_c: np.ndarray  # (n_phones, n_labels) inf: no rule for that label on that phone
    speed_frac: np.ndarray  # (n_phones, n_labels)
    power_frac: np.ndarray  # (n_phones, n_labels)

    @classmethod
    def of(cls, profiles: ProfileSet, time_constant_factor: float = 1.0, threshold_c: float | None = None,
           source: str = "the phone catalogue") -> "HeatModel":
        """From each phone's body (:class:`~flamingo_sim.devices.thermal.ThermalBody`) and its SoC's rules;
        ``threshold_c`` overrides every rule's threshold (``devices.throttle_threshold_c``)."""
        phones = [prof.phone for prof in profiles.profiles]
        lacking = [p.name for p in phones if p.body is None or not p.soc.throttle]
        if lacking:
            raise ConfigError(f"{source}: devices.thermal: phone {lacking[0]!r} has no body (mass, dimensions) or its SoC no throttle rules")
        resistance = np.array([p.body.resistance_k_per_w for p in phones if p.body is not None])
        tau = np.array([p.body.time_constant_s for p in phones if p.body is not None]) * time_constant_factor
        shape = (len(phones), len(profiles.labels))
        threshold, speed, power = np.full(shape, np.inf), np.ones(shape), np.ones(shape)
        for i, p in enumerate(phones):
            for j, cores in enumerate(profiles.label_cores):
                rule = p.soc.throttle_rule(cores)
                if rule is None:  # a label of another phone, or clusters without a rule
                    continue
                threshold[i, j] = rule.threshold_c if threshold_c is None else threshold_c
                speed[i, j], power[i, j] = rule.speed_frac, rule.power_frac
        return cls(resistance, tau, threshold, speed, power)


@dataclass(frozen=True)
class MemoryFit:
    """Which minibatch each phone's training fits (``devices.memory``): the largest up to ``batch_size``."""

    batch_size: int
    limit_bytes: np.ndarray  # (n_phones,) what one training app may hold
    fixed_bytes: float  # one client's training: fixed + per_sample x batch
    per_sample_bytes: float
    drop: bool = False  # a client whose batch does not fit is dropped, never shrunk

    @cached_property
    def batch_fit(self) -> np.ndarray:
        """int64 (n_phones,): the largest minibatch that fits each phone (0: none)."""
        return largest_batch(self.limit_bytes, self.fixed_bytes, self.per_sample_bytes, self.batch_size)

    def batches(self, phone_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each task's minibatch and whether its training does not fit at all (or must not shrink)."""
        ph = np.asarray(phone_idx, dtype=np.int64)
        fit = self.batch_fit[ph]
        short = fit < self.batch_size
        oom = short & ((fit == 0) | self.drop)
        return np.where(short & ~oom, fit, np.full(len(ph), self.batch_size, dtype=np.int64)), oom


class Links(Protocol):
    """A cohort's model transfers as the engine's network priced them (:class:`flamingo_sim.fl.sim.network.Transfers`)."""

    @property
    def comm_s(self) -> np.ndarray: ...  # download + upload time, waits included

    @property
    def download_s(self) -> np.ndarray: ...  # of which the download

    @property
    def radio_energy_j(self) -> np.ndarray: ...  # the radio's energy (0 where not modelled)

    @property
    def abandoned(self) -> np.ndarray: ...  # bool: a transfer found no network and gave up

    @property
    def download_abandoned(self) -> np.ndarray: ...  # bool: of them, those whose download never finished (nothing trained)


#: The engine's own transfers type (the record hands it back as it came).
L = TypeVar("L", bound=Links)


@dataclass(frozen=True)
class _Heat:
    """A cohort's heat at pricing: what :meth:`DevicePricing.settle` needs to book it (arrays over the tasks)."""

    excess0_c: np.ndarray  # excess over the trace's temperature at the start
    tasks: ThrottledTasks  # the compute under the throttle rule
    power_w: np.ndarray  # unthrottled mean compute power (charged and dissipated)
    power_frac: np.ndarray  # the throttled cluster's share of it
    run: np.ndarray  # bool: tasks that ran some compute
    resistance_k_per_w: np.ndarray
    tau_s: np.ndarray


@dataclass(frozen=True)
class PricedCohort(Generic[L]):
    """A cohort's tasks, priced once (arrays over the ``k`` tasks; module docstring)."""

    request: TaskRequest  # what the policy was asked (the modelled temperature and the minibatch included)
    outcome: TaskOutcome  # what it answered, under the memory and heat limits; compute only
    out_of_memory: np.ndarray  # bool: dropped, its training does not fit (declined ``out_of_memory``)
    shrunk: np.ndarray  # bool: trains a smaller minibatch than asked
    throttled_s: np.ndarray  # time each task ran throttled (0: never)
    transfers: L  # the model's download and upload, as the engine's network priced them
    comm_s: np.ndarray  # their time
    duration_s: np.ndarray  # compute + transfers
    energy_j: np.ndarray  # compute + radio (an abandoned download computed nothing): what the battery is charged
    radio_energy_j: np.ndarray  # of which the radio's (0 under a network that does not price it)
    interrupted: np.ndarray  # bool: given up mid-task (by the policy, or by a transfer that found no network)
    timeline: PowerTimeline  # each task's power as it runs: what a share of it draws, and heats
    heat: _Heat | None = None  # None: devices.thermal off

    @property
    def batch_size(self) -> np.ndarray:
        """int64 (k,): each task's minibatch."""
        return np.asarray(self.request.batch_size, dtype=np.int64)

    @property
    def phone_idx(self) -> np.ndarray:
        return np.asarray(self.request.phone_idx, dtype=np.int64)


@dataclass(frozen=True)
class PowerTimeline:
    """Each task's electrical power as it runs, one timeline for the battery and the heat (arrays over the ``k`` tasks).

    Four segments of constant power on the task's own clock: ``download | compute before the throttle | compute
    after it | upload``. Under a network whose radio is priced (``network.model: traces``) the clock is the task's
    whole duration and the radio's energy is spread evenly over the transfers' time; otherwise the transfers draw no
    modelled power and the clock is the compute's (a share ``f`` of the task is ``f`` of its compute, as the round's
    rules count it). What a task that stops at a share ``f`` has drawn (:meth:`spent_j`) is what its phone has
    received as heat (:meth:`DevicePricing.settle`): energy conserved, for the part of a task that ran too."""

    segment_s: np.ndarray  # (k, 4) each segment's length
    segment_w: np.ndarray  # (k, 4) each segment's power
    clock_s: np.ndarray  # (k,) what a share of 1 is on the task's clock
    energy_j: np.ndarray  # (k,) the whole task's energy, what a task that runs whole is charged (exactly)
    linear: np.ndarray  # (k,) bool: one power over the whole clock: a share f draws f x energy_j (bit for bit as ever)

    def _elapsed(self, share: np.ndarray) -> np.ndarray:
        return np.asarray(share, dtype=float) * self.clock_s

    def _within(self, elapsed_s: np.ndarray) -> np.ndarray:
        """(k, 4): the time spent in each segment ``elapsed_s`` into each task."""
        start = np.cumsum(self.segment_s, axis=1) - self.segment_s
        return np.clip(np.asarray(elapsed_s, dtype=float)[:, None] - start, 0.0, self.segment_s)

    def spent_j(self, share: np.ndarray) -> np.ndarray:
        """Energy drawn by each task stopped at ``share`` of its clock (in [0, 1])."""
        share = np.asarray(share, dtype=float)
        linear = self.energy_j * share
        if self.linear.all():
            return linear
        curve = (self.segment_w * self._within(self._elapsed(share))).sum(axis=1)
        return np.where(self.linear, linear, np.where(share >= 1.0, self.energy_j, curve))

    def radio_spent_j(self, share: np.ndarray) -> np.ndarray:
        """Of :meth:`spent_j`, the radio's (the transfer segments')."""
        within = self._within(self._elapsed(share))
        return self.segment_w[:, 0] * within[:, 0] + self.segment_w[:, 3] * within[:, 3]

    def share_at_j(self, energy_j: np.ndarray) -> np.ndarray:
        """The share of each task's clock at which it has drawn ``energy_j`` (1 for a task that draws less in all)."""
        energy = np.asarray(energy_j, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            linear = np.where(self.energy_j > 0, energy / self.energy_j, 1.0)
        if self.linear.all():
            return linear
        seg_j = self.segment_w * self.segment_s
        before_j = np.cumsum(seg_j, axis=1) - seg_j
        into_j = np.clip(energy[:, None] - before_j, 0.0, seg_j)
        with np.errstate(divide="ignore", invalid="ignore"):
            seg_t = np.where(self.segment_w > 0, into_j / np.where(self.segment_w > 0, self.segment_w, 1.0), 0.0)
        # a segment is passed through whole once the energy reaches past it (zero-power segments included)
        passed = energy[:, None] >= before_j + seg_j
        reached = energy[:, None] > before_j
        elapsed = np.where(passed, self.segment_s, np.where(reached, seg_t, 0.0)).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            curve = np.where(self.clock_s > 0, elapsed / self.clock_s, 1.0)
        return np.where(self.linear, linear, np.where(energy >= self.energy_j, 1.0, curve))

    def excess_c(self, share: np.ndarray, excess0_c: np.ndarray, resistance_k_per_w: np.ndarray, tau_s: np.ndarray) -> np.ndarray:
        """The thermal circuit's excess ``share`` into each task, fed the timeline's power, and left to decay past its end."""
        elapsed = self._elapsed(share)
        within = self._within(elapsed)
        x = np.asarray(excess0_c, dtype=float)
        for j in range(self.segment_s.shape[1]):
            x = np.where(within[:, j] > 0, rc_excess_c(within[:, j], x, self.segment_w[:, j], resistance_k_per_w, tau_s), x)
        return decayed_c(x, np.maximum(elapsed - self.segment_s.sum(axis=1), 0.0), tau_s)


class DevicePricing:
    """Prices every task of one (policy, seed) run, and holds its phones' heat between tasks (module docstring).

    ``heat``/``memory``: None where that model is off. ``radio``: whether the network's radio energy is the task's
    (``network.model: traces``); under ``lognormal`` the transfers add time only.
    """

    def __init__(self, policy: Policy, phone_idx: np.ndarray, phone_names: tuple[str, ...], batch_size: int,
                 heat: HeatModel | None = None, memory: MemoryFit | None = None, radio: bool = False, policy_name: str | None = None) -> None:
        self.policy = policy
        self.policy_name: str = policy_name or str(getattr(policy, "name", type(policy).__name__))
        self.decline_reasons = decline_reasons(policy)
        self.phone_idx = np.asarray(phone_idx, dtype=np.int64)
        self.phone_names = tuple(phone_names)
        self.batch_size = int(batch_size)
        self.heat, self.memory, self.radio = heat, memory, radio
        n = len(self.phone_idx)
        # excess over the trace's temperature when each client last stopped training, and when that was: stored for the
        # clients that trained only (zero for the rest), so that a run and its checkpoints cost what its cohorts do
        self.excess_c = SparseVector(n, np.float64)
        self.at_s = SparseVector(n, np.float64)

    # -- pricing --------------------------------------------------------------------------------
    def excess_c_at(self, t_s: float, clients: np.ndarray) -> np.ndarray:
        """The excess earlier tasks left each of ``clients`` at ``t_s``, decayed since (0 with the heat model off)."""
        if self.heat is None:
            return np.zeros(len(clients))
        tau = self.heat.tau_s[self.phone_idx[clients]]
        return decayed_c(self.excess_c[clients], np.maximum(t_s - self.at_s[clients], 0.0), tau)

    def price(self, t_s: float, clients: np.ndarray, *, n_steps: int, battery_pct: np.ndarray, charging: np.ndarray,
              trace_temperature_c: np.ndarray, in_use: np.ndarray, slot_s: float,
              transfers: Callable[[np.ndarray], L]) -> PricedCohort[L]:
        """Price the tasks of ``clients`` starting at ``t_s`` (module docstring, steps 1-4); ``transfers(compute_s)``:
        the network's pricing of their model transfers around ``compute_s`` of compute."""
        clients = np.asarray(clients, dtype=np.int64)
        ph = self.phone_idx[clients]
        k = len(clients)
        # 1. memory
        if self.memory is not None:
            batch, oom = self.memory.batches(ph)
        else:
            batch, oom = np.full(k, self.batch_size, dtype=np.int64), np.zeros(k, dtype=bool)
        # 2. the policy's choice, at the modelled temperature
        excess0 = self.excess_c_at(t_s, clients)
        temperature = trace_temperature_c + excess0 if self.heat is not None else trace_temperature_c
        request = TaskRequest(client_idx=clients, phone_idx=ph, n_steps=n_steps, start_s=t_s, battery_pct=battery_pct, charging=charging,
                              temperature_c=temperature, in_use=in_use, slot_s=slot_s, batch_size=batch)
        asked = check_outcome(self.policy_name, request, self.policy.run_tasks(request), self.decline_reasons)  # the policy's seam
        # 3. memory's drops and heat's throttling
        outcome, oom, shrunk, throttled_s, heat = self._limits(request, asked, oom, excess0, trace_temperature_c)
        # 4. radio
        links = transfers(outcome.duration_s)
        comm_s = np.asarray(links.comm_s, dtype=np.float64)
        interrupted = np.asarray(outcome.interrupted, dtype=bool)
        computed = np.ones(k, dtype=bool)
        if self.radio:
            radio_j = np.asarray(links.radio_energy_j, dtype=np.float64)
            computed = ~np.asarray(links.download_abandoned, dtype=bool)  # an abandoned download computed nothing
            energy = np.where(computed, outcome.energy_j, 0.0) + radio_j
            interrupted = interrupted | np.asarray(links.abandoned, dtype=bool)
        else:
            radio_j, energy = np.zeros(k), outcome.energy_j
        duration = outcome.duration_s + comm_s
        timeline = self._timeline(outcome, heat, throttled_s, computed, links, comm_s, radio_j, duration, energy)
        return PricedCohort(request, outcome, oom, shrunk, throttled_s, links, comm_s, duration, energy, radio_j, interrupted, timeline, heat)

    def _timeline(self, outcome: TaskOutcome, heat: _Heat | None, throttled_s: np.ndarray, computed: np.ndarray, links: Links,
                  comm_s: np.ndarray, radio_j: np.ndarray, duration_s: np.ndarray, energy_j: np.ndarray) -> PowerTimeline:
        """The tasks' :class:`PowerTimeline`: the compute at its priced power up to the throttle's onset and at the capped
        power after it; the radio (where priced) over the transfers around it."""
        k = len(duration_s)
        compute_s = np.where(computed, np.asarray(outcome.duration_s, dtype=float), 0.0)
        after_s = np.where(computed, throttled_s, 0.0)
        before_s = compute_s - after_s
        if heat is not None:
            power = np.where(computed, heat.power_w, 0.0)
            capped = power * heat.power_frac
        else:
            dur = np.asarray(outcome.duration_s, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                power = np.where(computed & (dur > 0), np.asarray(outcome.energy_j, dtype=float) / np.where(dur > 0, dur, 1.0), 0.0)
            capped = power
        if self.radio:
            down_s = np.minimum(np.asarray(links.download_s, dtype=float), comm_s)
            with np.errstate(divide="ignore", invalid="ignore"):
                radio_w = np.where(comm_s > 0, radio_j / np.where(comm_s > 0, comm_s, 1.0), 0.0)
            segment_s = np.stack([down_s, before_s, after_s, comm_s - down_s], axis=1)
            segment_w = np.stack([radio_w, power, capped, radio_w], axis=1)
            clock_s, linear = np.asarray(duration_s, dtype=float), np.asarray(energy_j) == 0
        else:
            zero = np.zeros(k)
            segment_s = np.stack([zero, before_s, after_s, zero], axis=1)
            segment_w = np.stack([zero, power, capped, zero], axis=1)
            clock_s, linear = compute_s, (after_s == 0) | (np.asarray(energy_j) == 0)
        return PowerTimeline(segment_s, segment_w, clock_s, np.asarray(energy_j, dtype=float), linear)

    def _limits(self, request: TaskRequest, outcome: TaskOutcome, oom: np.ndarray, excess0: np.ndarray,
                trace_c: np.ndarray) -> tuple[TaskOutcome, np.ndarray, np.ndarray, np.ndarray, _Heat | None]:
        """The policy's priced tasks under the memory and heat limits: ``oom`` declined ``out_of_memory``, the rest
        throttled where the modelled temperature passes the threshold of the choice they ran most steps on."""
        k = len(np.asarray(outcome.accepted))
        throttled_s = np.zeros(k)
        if self.memory is None and self.heat is None:
            return outcome, np.zeros(k, dtype=bool), np.zeros(k, dtype=bool), throttled_s, None
        ph = np.asarray(request.phone_idx, dtype=np.int64)
        acc = np.asarray(outcome.accepted, dtype=bool).copy()
        reason = np.asarray(outcome.decline_reason, dtype=object).copy()
        mode = np.asarray(outcome.mode, dtype=object).copy()
        dur = np.asarray(outcome.duration_s, dtype=float).copy()
        en = np.asarray(outcome.energy_j, dtype=float).copy()
        inter = np.asarray(outcome.interference_s, dtype=float).copy()
        lost = np.asarray(outcome.foreground_lost_s, dtype=float).copy()
        steps = np.asarray(outcome.steps_by_choice).copy()
        oom = np.asarray(oom, dtype=bool) & acc
        shrunk = acc & ~oom & (np.asarray(request.batch_size) < self.batch_size)
        acc[oom], reason[oom], mode[oom] = False, OUT_OF_MEMORY, "declined"
        dur[oom], en[oom], inter[oom], lost[oom], steps[oom] = 0.0, 0.0, 0.0, 0.0, 0
        heat = None
        if self.heat is not None:
            h = self.heat
            label = np.argmax(steps, axis=1)
            tau, res = h.tau_s[ph], h.resistance_k_per_w[ph]
            speed, pfrac = h.speed_frac[ph, label], h.power_frac[ph, label]
            run = acc & (dur > 0)
            power = np.where(run, en / np.where(dur > 0, dur, 1.0), 0.0)  # charged and dissipated: one power per step
            tasks = throttled_task(np.where(run, dur, 0.0), np.where(run, en, 0.0), excess0, h.threshold_c[ph, label] - trace_c,
                                   speed, pfrac, res, tau)
            dur, en, throttled_s = np.where(run, tasks.duration_s, dur), np.where(run, tasks.energy_j, en), np.where(run, tasks.throttled_s, 0.0)
            heat = _Heat(excess0, tasks, power, pfrac, run, res, tau)
        out = TaskOutcome(acc, reason, dur, en, inter, steps, outcome.labels, mode, outcome.interrupted & acc, foreground_lost_s=lost)
        return out, oom, shrunk, throttled_s, heat

    # -- after the round is settled ------------------------------------------------------------
    def settle(self, cohort: PricedCohort[Any], t0_s: float, done_frac: np.ndarray) -> None:
        """Book each phone's excess temperature where its task stopped (``done_frac`` of it ran): the circuit fed the
        task's :class:`PowerTimeline` up to there, the heat it receives the energy its battery was charged."""
        h = cohort.heat
        if h is None:
            return
        clients = np.asarray(cohort.request.client_idx)
        done = np.asarray(done_frac, dtype=float)
        if self.radio:
            tl = cohort.timeline
            end = tl.excess_c(done, h.excess0_c, h.resistance_k_per_w, h.tau_s)
            elapsed = done * tl.clock_s
            ran = (tl.energy_j > 0) & (done > 0)
        else:  # the compute alone, on its own clock (transfers draw no modelled power)
            elapsed = done * h.tasks.duration_s
            end = excess_after(elapsed, h.excess0_c, h.tasks, h.power_w, h.power_frac, h.resistance_k_per_w, h.tau_s)
            ran = h.run & (done > 0)
        idx = clients[ran]
        self.excess_c.set(idx, end[ran])
        self.at_s.set(idx, t0_s + elapsed[ran])

    def columns(self, cohort: PricedCohort[Any] | None = None) -> dict[str, float]:
        """The round's metrics columns (per phone; only those of the models that are on); ``None``: all zero (round 0)."""
        if cohort is None:
            ph, oom, shrunk, throttled = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), np.zeros(0, dtype=bool), np.zeros(0)
        else:
            ph, oom, shrunk, throttled = cohort.phone_idx, cohort.out_of_memory, cohort.shrunk, cohort.throttled_s
        out: dict[str, float] = {}
        if self.memory is not None:
            out[f"dropped_{OUT_OF_MEMORY}"] = int(oom.sum())
            for p, name in enumerate(self.phone_names):
                out[f"out_of_memory_{name}"] = int((oom & (ph == p)).sum())
                out[f"batch_shrunk_{name}"] = int((shrunk & (ph == p)).sum())
        if self.heat is not None:  # the requests declined too hot are counted with every decline (declined_too_hot, in every run)
            for p, name in enumerate(self.phone_names):
                mine = ph == p
                out[f"throttled_{name}"] = int((throttled[mine] > 0).sum())
                out[f"throttled_s_{name}"] = float(throttled[mine].sum())
        return out

    @property
    def on(self) -> bool:
        """Whether a device limit is on (heat or memory): the run's metrics then carry their columns."""
        return self.heat is not None or self.memory is not None

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        if self.heat is None:
            return {}
        excess, at = self.excess_c.get(self.excess_c.idx), self.at_s.get(self.excess_c.idx)
        return {"clients": self.excess_c.idx.copy(), "excess_c": excess, "at_s": at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.heat is None:
            return
        clients = np.asarray(state["clients"], dtype=np.int64)
        excess, at = np.asarray(state["excess_c"], dtype=np.float64), np.asarray(state["at_s"], dtype=np.float64)
        n = self.excess_c.n
        if not (excess.shape == at.shape == clients.shape and clients.ndim == 1 and np.all(np.diff(clients) > 0)
                and (not len(clients) or (clients[0] >= 0 and clients[-1] < n))):
            raise ValueError(f"the heat model's state: expected sorted client ids below {n:,} with an excess and a time each")
        self.excess_c, self.at_s = SparseVector(n, np.float64), SparseVector(n, np.float64)
        self.excess_c.set(clients, excess)
        self.at_s.set(clients, at)

    def describe(self) -> dict[str, Any]:
        """Per phone: the circuit's constants and the memory fit (the run's summary shows them)."""
        out: dict[str, Any] = {}
        for p, name in enumerate(self.phone_names):
            entry: dict[str, Any] = {}
            if self.heat is not None:
                entry.update(resistance_k_per_w=float(self.heat.resistance_k_per_w[p]), time_constant_s=float(self.heat.tau_s[p]))
            if self.memory is not None:
                m = self.memory
                entry.update(app_limit_gib=float(m.limit_bytes[p] / GIB), batch_fit=int(m.batch_fit[p]),
                             training_gib=float((m.fixed_bytes + m.per_sample_bytes * self.batch_size) / GIB))
            out[name] = entry
        return out
