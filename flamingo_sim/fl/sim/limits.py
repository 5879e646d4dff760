"""The engine's hook for two device limits: heat (``devices.thermal``) and memory (``devices.memory``).

:class:`DeviceLimits` is built only when one of them is on (``devices.enabled``); with both off
the engine never calls it. Per round, the engine:

1. asks :meth:`DeviceLimits.temperature_c` for the selected clients' battery temperature: the
   trace's plus the excess their earlier training left, decayed since
   (:mod:`flamingo_sim.devices.thermal`); the policies' monitoring reads it (``too_hot``);
2. asks :meth:`DeviceLimits.batches` for each client's minibatch before the policy prices the
   tasks: a client whose training does not fit is dropped (reason ``out_of_memory``) or its
   minibatch shrinks to the largest that fits; the policy prices every step at the client's
   batch (step latency and energy scale with it: :meth:`~flamingo_sim.devices.policies.PricedPolicy.price`);
3. hands the policy's priced tasks to :meth:`DeviceLimits.apply`: the dropped clients declined,
   then heat (each task's cluster is capped once the modelled temperature passes its threshold:
   :func:`~flamingo_sim.devices.thermal.throttled_task`);
4. after settlement, :meth:`DeviceLimits.settle` books each client's excess temperature at the
   point its task stopped (the share ``done_frac`` that ran), and :meth:`DeviceLimits.columns`
   gives the round's per-phone counts (metrics columns that exist only with the model on).

A task's throttling follows the cluster of the choice it ran most steps on (a step on several
clusters runs at the pace of its slowest one: :meth:`~flamingo_sim.devices.soc.SocSpec.throttle_rule`).
Its heat is the power its battery is charged for the task: every joule a step draws ends as heat
in the phone, so the thermal circuit and the battery read one power per step (energy conserved).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from flamingo_sim.devices.memory import GIB, MEASURED_OVER_ESTIMATE, largest_batch
from flamingo_sim.devices.policies import TaskOutcome, TaskRequest
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.sparse import SparseVector
from flamingo_sim.devices.thermal import excess_after, throttled_task
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import DevicesConfig
from flamingo_sim.fl.training.memory import activation_bytes_per_sample
from flamingo_sim.numeric import exp

__all__ = ["DeviceLimits", "OUT_OF_MEMORY", "training_memory_bytes", "trained_input_size", "NETWORKS"]

#: The typed drop reason of a client whose training does not fit.
OUT_OF_MEMORY = "out_of_memory"
#: Profile model name -> the network :func:`flamingo_sim.models.build_model` builds for it (others: the same name).
NETWORKS = {"shufflenet_v2_x2": "shufflenet_v2_x2_0"}


def trained_input_size(model: str) -> int:
    """The input side (px) ``model``'s shipped profiles were priced at (224, ResNet-34's speech spectrograms 32)."""
    from flamingo_sim.devices.calibrate import DNN_MODELS

    return int(DNN_MODELS[model].input_size[-1]) if model in DNN_MODELS else 224


def training_memory_bytes(model: str, input_size: int, n_classes: int, calibrated: bool = False) -> tuple[float, float]:
    """``(fixed, per_sample)`` bytes of one client's training of ``model`` on 3 x ``input_size``^2
    inputs: the state four times over, the activations twice per sample
    (:func:`flamingo_sim.fl.training.memory.per_client_bytes` = fixed + per_sample x batch);
    ``calibrated``: both times the measured peak over this estimate at the model's operating point
    (:data:`~flamingo_sim.devices.memory.MEASURED_OVER_ESTIMATE`; 1 for a model not measured)."""
    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.models import build_model

    shape = (3, int(input_size), int(input_size))
    try:
        with torch.device("meta"):
            net = build_model(NETWORKS.get(model, model), shape, n_classes)
    except FlamingoError as exc:
        raise ConfigError(f"devices.memory: cannot estimate the training memory of model {model!r}: {exc}") from None
    state = sum(v.numel() * v.element_size() for v in net.state_dict().values())
    scale = MEASURED_OVER_ESTIMATE.get(model, 1.0) if calibrated else 1.0
    return float(4 * state) * scale, float(2 * activation_bytes_per_sample(net, shape)) * scale


class DeviceLimits:
    """Heat and memory of every client's phone (module docstring)."""

    def __init__(self, cfg: DevicesConfig, profiles: ProfileSet, phone_idx: np.ndarray, batch_size: int,
                 n_classes: int, source: str = "the phone catalogue", app_state: str = "foreground_service") -> None:
        self.cfg = cfg
        self.batch_size = int(batch_size)
        self.phone_idx = np.asarray(phone_idx, dtype=np.int64)
        self.phone_names = tuple(profiles.phones)
        phones = [prof.phone for prof in profiles.profiles]
        self.thermal = cfg.thermal != "none"
        self.memory = cfg.memory != "none"
        n = len(self.phone_idx)
        if self.thermal:
            lacking = [p.name for p in phones if p.body is None or not p.soc.throttle]
            if lacking:
                raise ConfigError(f"{source}: devices.thermal: phone {lacking[0]!r} has no body (mass, dimensions) or its SoC no throttle rules")
            self.resistance = np.array([p.body.resistance_k_per_w for p in phones if p.body is not None])
            self.tau_s = np.array([p.body.time_constant_s for p in phones if p.body is not None]) * cfg.time_constant_factor
            n_labels = len(profiles.labels)
            self.threshold_c = np.full((len(phones), n_labels), np.inf)
            self.speed_frac = np.ones((len(phones), n_labels))
            self.power_frac = np.ones((len(phones), n_labels))
            for i, p in enumerate(phones):
                for j, cores in enumerate(profiles.label_cores):
                    rule = p.soc.throttle_rule(cores)
                    if rule is None:  # a label of another phone, or clusters without a rule
                        continue
                    self.threshold_c[i, j] = rule.threshold_c if cfg.throttle_threshold_c is None else cfg.throttle_threshold_c
                    self.speed_frac[i, j], self.power_frac[i, j] = rule.speed_frac, rule.power_frac
            # excess over the trace's temperature when each client last stopped training, and when that
            # was: stored for the clients that trained only (zero for the rest), so that a run and its
            # checkpoints cost what its cohorts do, whatever the population (:mod:`flamingo_sim.devices.sparse`)
            self.excess_c = SparseVector(n, np.float64)
            self.at_s = SparseVector(n, np.float64)
        if self.memory:
            lacking = [p.name for p in phones if p.memory is None]
            if lacking:
                raise ConfigError(f"{source}: devices.memory: phone {lacking[0]!r} has no memory entry (ram_gb)")
            size = trained_input_size(profiles.model) if cfg.input_size is None else cfg.input_size
            self.fixed_bytes, self.per_sample_bytes = training_memory_bytes(profiles.model, size, n_classes, calibrated=True)
            limit = np.array([p.memory.limit_bytes(app_state) for p in phones if p.memory is not None]) * cfg.memory_limit_factor
            self.limit_bytes = limit
            self.batch_fit = largest_batch(limit, self.fixed_bytes, self.per_sample_bytes, self.batch_size)  # per phone
        self._round: dict[str, Any] = {}

    # -- per round -----------------------------------------------------------------------------
    def temperature_c(self, t_s: float, clients: np.ndarray, trace_c: np.ndarray) -> np.ndarray:
        """The selected clients' battery temperature at ``t_s``: the trace's plus their decayed excess."""
        if not self.thermal:
            self._round = {"excess0": np.zeros(len(clients))}
            return trace_c
        tau = self.tau_s[self.phone_idx[clients]]
        excess = self.excess_c[clients] * exp(-np.maximum(t_s - self.at_s[clients], 0.0) / tau)  # libm's (numeric.exp)
        self._round = {"excess0": excess}
        return trace_c + excess

    def batches(self, phone_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each request's minibatch (the largest that fits, at most ``fl.batch_size``) and whether its
        training does not fit at all (or must not shrink: ``devices.memory: drop``)."""
        ph = np.asarray(phone_idx, dtype=np.int64)
        full = np.full(len(ph), self.batch_size, dtype=np.int64)
        if not self.memory:
            return full, np.zeros(len(ph), dtype=bool)
        fit = self.batch_fit[ph]
        short = fit < self.batch_size
        oom = short & ((fit == 0) | (self.cfg.memory == "drop"))
        return np.where(short & ~oom, fit, full), oom

    def apply(self, request: TaskRequest, outcome: TaskOutcome, oom: np.ndarray | None) -> TaskOutcome:
        """The priced tasks under the memory and heat limits: ``oom`` (from :meth:`batches`) declined
        ``out_of_memory``, the rest throttled where the modelled temperature passes the threshold."""
        ph = np.asarray(request.phone_idx, dtype=np.int64)
        acc = np.asarray(outcome.accepted, dtype=bool).copy()
        reason = np.asarray(outcome.decline_reason, dtype=object).copy()
        mode = np.asarray(outcome.mode, dtype=object).copy()
        dur = np.asarray(outcome.duration_s, dtype=float).copy()
        en = np.asarray(outcome.energy_j, dtype=float).copy()
        inter = np.asarray(outcome.interference_s, dtype=float).copy()
        lost = np.asarray(outcome.foreground_lost_s, dtype=float).copy()
        steps = np.asarray(outcome.steps_by_choice).copy()
        k = len(acc)
        oom = (np.zeros(k, dtype=bool) if oom is None else np.asarray(oom, dtype=bool)) & acc
        shrunk = acc & ~oom & (np.asarray(request.batch_size) < self.batch_size) if request.batch_size is not None else np.zeros(k, dtype=bool)
        acc[oom], reason[oom], mode[oom] = False, OUT_OF_MEMORY, "declined"
        dur[oom], en[oom], inter[oom], lost[oom], steps[oom] = 0.0, 0.0, 0.0, 0.0, 0
        throttled_s = np.zeros(k)
        if self.thermal:
            excess0 = self._round["excess0"]
            label = np.argmax(steps, axis=1)
            trace_c = np.asarray(request.temperature_c, dtype=float) - excess0
            tau, res = self.tau_s[ph], self.resistance[ph]
            speed, pfrac = self.speed_frac[ph, label], self.power_frac[ph, label]
            run = acc & (dur > 0)
            power = np.where(run, en / np.where(dur > 0, dur, 1.0), 0.0)  # charged and dissipated: one power per step
            tasks = throttled_task(np.where(run, dur, 0.0), np.where(run, en, 0.0), excess0, self.threshold_c[ph, label] - trace_c,
                                   speed, pfrac, res, tau)
            dur, en, throttled_s = np.where(run, tasks.duration_s, dur), np.where(run, tasks.energy_j, en), np.where(run, tasks.throttled_s, 0.0)
            self._round.update(tasks=tasks, power=power, pfrac=pfrac, run=run, tau=tau, res=res)
        self._round.update(oom=oom, shrunk=shrunk, throttled_s=throttled_s, phone=ph)
        return TaskOutcome(acc, reason, dur, en, inter, steps, outcome.labels, mode, outcome.interrupted & acc, foreground_lost_s=lost)

    def settle(self, t0_s: float, clients: np.ndarray, done_frac: np.ndarray) -> None:
        """Book each client's excess temperature where its task stopped (``done_frac`` of it ran)."""
        if not self.thermal:
            return
        r = self._round
        tasks = r["tasks"]
        ran = r["run"] & (np.asarray(done_frac) > 0)
        elapsed = np.asarray(done_frac, dtype=float) * tasks.duration_s
        end = excess_after(elapsed, r["excess0"], tasks, r["power"], r["pfrac"], r["res"], r["tau"])
        idx = np.asarray(clients)[ran]
        self.excess_c.set(idx, end[ran])
        self.at_s.set(idx, t0_s + elapsed[ran])

    def columns(self, empty: bool = False) -> dict[str, float]:
        """The round's metrics columns (per phone; only those of the models that are on); ``empty``:
        all zero (round 0, before any request)."""
        r = self._round
        if empty:
            none = np.zeros(0, dtype=bool)
            r = {"phone": np.zeros(0, dtype=np.int64), "oom": none, "shrunk": none, "throttled_s": np.zeros(0)}
        ph = r["phone"]
        out: dict[str, float] = {}
        if self.memory:
            out[f"dropped_{OUT_OF_MEMORY}"] = int(r["oom"].sum())
            for p, name in enumerate(self.phone_names):
                out[f"out_of_memory_{name}"] = int((r["oom"] & (ph == p)).sum())
                out[f"batch_shrunk_{name}"] = int((r["shrunk"] & (ph == p)).sum())
        if self.thermal:  # the requests declined too hot are counted with every decline (declined_too_hot, in every run)
            for p, name in enumerate(self.phone_names):
                mine = ph == p
                out[f"throttled_{name}"] = int((r["throttled_s"][mine] > 0).sum())
                out[f"throttled_s_{name}"] = float(r["throttled_s"][mine].sum())
        return out

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        if not self.thermal:
            return {}
        excess, at = self.excess_c.get(self.excess_c.idx), self.at_s.get(self.excess_c.idx)
        return {"clients": self.excess_c.idx.copy(), "excess_c": excess, "at_s": at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.thermal:
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
            if self.thermal:
                entry.update(resistance_k_per_w=float(self.resistance[p]), time_constant_s=float(self.tau_s[p]))
            if self.memory:
                entry.update(app_limit_gib=float(self.limit_bytes[p] / GIB), batch_fit=int(self.batch_fit[p]),
                             training_gib=float((self.fixed_bytes + self.per_sample_bytes * self.batch_size) / GIB))
            out[name] = entry
        return out

