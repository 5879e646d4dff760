"""Asynchronous FL: FedBuff-style buffered aggregation on the same traces, budgets and policies.

``fl.mode: fedbuff`` (Nguyen et al., "Federated Learning with Buffered Asynchronous
Aggregation", AISTATS 2022). There are no rounds: ``concurrency`` clients train at once, each
on its own virtual clock, and the server updates the model every ``buffer_size`` (M) arrivals.
An event loop in virtual time:

1. *dispatch* (a free slot at time ``t``): select one online client that is not training
   (the selector, randomness from (seed, "selection", dispatch number), sees the battery levels
   at ``t``); its policy accepts or declines and prices the task from ``t``, plus model
   download and upload, under the heat and memory models as a synchronous round of one
   (:mod:`flamingo_sim.fl.sim.limits`: throttled, a shrunk minibatch, or ``out_of_memory``); the client downloads the current model version. The task is settled
   at once by the same rules as a synchronous round (:func:`~flamingo_sim.fl.sim.rounds.settle_round`
   with K = 1): its trace takes it offline before it finishes (``unavailable``), its training
   would drain it (``battery_exhausted``, after the share its spare energy paid for), it declines
   (the slot is retried ``retry_s`` later, as for a task that could not run a step), or it arrives; the policy's ``settle`` (Flamingo's
   exploration progress) hears of the task's share that ran; the transfers and who can be reached follow
   the synchronous loop's network (:mod:`flamingo_sim.fl.sim.network`);
2. *arrival* (at dispatch time + its duration, or when it stops): every battery is advanced
   along its trace to ``t``, the client's training energy drawn (none when it was on the
   charger at dispatch: the charger pays, as in the synchronous engine); a kept client trains for real
   from the version it downloaded, and its delta (trained minus downloaded) joins the buffer
   with staleness = versions made meanwhile; the slot is dispatched again;
3. with M deltas buffered the server applies :func:`~flamingo_sim.fl.strategy.aggregate.fedbuff_step`
   with weights ``(1 + staleness) ** -staleness_exponent``; that makes one metrics row, with
   the synchronous loop's columns (``round`` = server update, ``n_selected`` = dispatches
   and ``dropped_*`` = drops since the previous update, ``duration_s`` = time since it), plus
   ``staleness_mean``; the device limits' columns (``throttled_*``, ``batch_shrunk_*``,
   ``out_of_memory_*``) count the window's arrivals; with the network columns (``network.model: traces`` or ``unmetered_only``),
   ``radio_energy_j`` and ``n_cellular`` over the window's dispatches, ``transfer_s`` their summed
   transfer time, ``n_unreachable`` at the window's last dispatch. ``fl.rounds`` and
   ``fl.horizon_h`` bound the server updates.

Runs are not checkpointed (no ``--resume``); same config and seed give the same results.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from flamingo_sim.devices.policies import Policy
from flamingo_sim.fl.sim.fairness import jain_index
from flamingo_sim.fl.sim.limits import OUT_OF_MEMORY
from flamingo_sim.fl.sim.records import NETWORK_COLUMNS, RoundRecord, count_declines
from flamingo_sim.fl.sim.rounds import BATTERY_EXHAUSTED, DECLINED, DROP_REASONS, KEPT, REASONS, settle_round
from flamingo_sim.fl.sim.rules import cohort_size
from flamingo_sim.fl.sim.seam import TrainJob
from flamingo_sim.fl.sim.simulation import Components, Simulation
from flamingo_sim.fl.strategy.aggregate import fedbuff_step, staleness_weights
from flamingo_sim.fl.strategy.selection import CoordinatorView, Selector, select_online
from flamingo_sim.rng import rng

__all__ = ["AsyncSimulation"]


@dataclass(frozen=True)
class _Task:
    """One dispatched client, settled at dispatch."""

    client: int
    dispatch: int  # dispatch number (minibatch stream and selection randomness)
    version: int  # model version downloaded
    start_s: float
    reason: int
    energy_j: float  # training energy (share run)
    battery_j: float  # of which its battery pays (none on the charger)
    duration_s: float  # priced duration of the whole task
    interference_s: float
    foreground_lost_s: float
    steps: np.ndarray  # steps per execution choice (kept tasks count)
    phone: int
    foreground_s: float  # the owner's use of the phone while the task holds it
    training_foreground_s: float  # ... while its training runs
    radio_energy_j: float = 0.0  # of energy_j: the radio's (share run)
    transfer_s: float = 0.0  # its transfers' time (share run)
    cellular: bool = False  # its download started on cellular
    declined: str = ""  # the reason its policy declined it ('' if it did not)
    batch_size: int = 0  # its minibatch (``devices.memory: shrink_batch`` may shrink it)
    limits: dict[str, float] | None = None  # the heat and memory models' columns for this task (with them on)


class AsyncSimulation(Simulation):
    """One policy's FedBuff job over one seed; :meth:`step` runs until the next server update."""

    def __init__(self, parts: Components, policy: Policy, policy_name: str, seed: int, selector: Selector, log: Callable[[str], None] | None = None) -> None:
        super().__init__(parts, policy, policy_name, seed, selector, log=log)
        fb, fl = self.rules.fedbuff, self.rules.fl
        self.concurrency = fb.concurrency or cohort_size(fl.participants_per_round, fl.overcommit, self.parts.population.n_clients)
        self.events: list[tuple[float, int, str, Any]] = []
        self.seq = 0
        self.n_dispatch = 0
        self.busy = np.zeros(0, dtype=np.int64)  # clients training now, sorted
        self.versions: dict[int, dict[str, torch.Tensor]] = {0: self.params}
        self.version_refs: dict[int, int] = {}
        self.buffer: list[tuple[_Task, int]] = []  # kept arrivals and their staleness, trained at the update
        self.budget_t_s = 0.0
        self.last_update_s = 0.0
        self._window = self._new_window()
        for _ in range(self.concurrency):
            self._push(0.0, "free", None)

    # -- events ----------------------------------------------------------------------------------
    def _push(self, t_s: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.events, (t_s, self.seq, kind, payload))
        self.seq += 1

    def _new_window(self) -> dict[str, Any]:
        n_phones = len(self.parts.population.phone_names)
        return {"dispatched": 0, "dropped": np.zeros(len(REASONS), dtype=np.int64), "declined": dict.fromkeys(self.decline_reasons, 0),
                "energy_j": 0.0, "interference_s": 0.0,
                "steps": np.zeros(len(self.parts.choice_labels), dtype=np.int64), "phone_interference_s": np.zeros(n_phones),
                "phone_foreground_s": np.zeros(n_phones), "phone_training_foreground_s": np.zeros(n_phones),
                "phone_foreground_lost_s": np.zeros(n_phones),
                "radio_energy_j": 0.0, "transfer_s": 0.0, "n_cellular": 0, "n_unreachable": 0,
                "limits": self.pricing.columns() if self.pricing.on else {}}

    def _dispatch(self, t_s: float) -> None:
        """Fill one free slot at ``t_s``: select, price and settle a client's task."""
        rules, pop = self.rules, self.parts.population
        idle, _, n_unreachable = self._reachable_online(t_s, self.busy)
        self._window["n_unreachable"] = n_unreachable
        if not len(idle):
            self._push(t_s + rules.fedbuff.retry_s, "free", None)
            return
        self.n_dispatch += 1
        view = CoordinatorView(round=self.round + 1, min_pct=rules.traces.min_pct, level_pct_at=self.budget.level_pct_at, n_clients=pop.n_clients)
        chosen = select_online(self.selector, idle, 1, rng(self.seed, "selection", self.n_dispatch), view)
        c = int(chosen[0])
        one = np.array([c], dtype=np.int64)
        plugged = self._plugged(t_s, one)
        priced = self._price_tasks(t_s, one, plugged)  # memory, heat and radio, as in a synchronous round of one
        out, batch_size, duration_s, transfers = priced.outcome, priced.batch_size, priced.duration_s, priced.transfers
        floor_j = rules.traces.min_pct / 100.0 * self.capacity_j[one]
        spare_j = self.budget.available_j_at(one) - floor_j - self._trace_drain_j(one, t_s, duration_s)
        spare_j = np.where(plugged, np.inf, spare_j)  # the charger pays for training
        settled = settle_round(k=1, accepted=out.accepted, duration_s=duration_s, energy_j=priced.energy_j, spare_energy_j=spare_j,
                               online_at_finish=self._online_at_finish(one, t_s, duration_s), interrupted=priced.interrupted, curve=priced.timeline,
                               deadline_s=rules.fl.deadline_s)
        self.policy.settle(out, settled.done_frac)  # e.g. Flamingo books exploration that finished
        self.pricing.settle(priced, t_s, settled.done_frac)
        limits = self.pricing.columns(priced) if self.pricing.on else None
        reason = int(settled.reason[0])
        declined = ""
        if reason == DECLINED and str(out.decline_reason[0]) != OUT_OF_MEMORY:  # out of memory: its own column, not a decline
            # one of the reasons it registered (else one line), counted when its slot frees
            count_declines(self.decline_reasons, out.decline_reason[:1], self.policy_name)
            declined = str(out.decline_reason[0])
        done = float(settled.done_frac[0])
        # a task that declined or ran nothing (no spare energy: its level sits at the re-entry
        # threshold) frees its slot retry_s later, not at once (the same client would be picked again)
        ran_s = float(duration_s[0]) * done
        ends = t_s + rules.fedbuff.retry_s if reason == DECLINED or ran_s <= 0 else t_s + ran_s
        spent_j = float(settled.energy_spent_j[0])
        task = _Task(c, self.n_dispatch, self.round, t_s, reason, spent_j, 0.0 if plugged[0] else spent_j, float(duration_s[0]),
                     float(out.interference_s[0] * done), float(out.foreground_lost_s[0] * done), out.steps_by_choice[0], int(pop.phone_idx[c]),
                     float(self._foreground_s(t_s, one, np.array([ends - t_s]))[0]),
                     float(self._foreground_s(t_s, one, out.duration_s)[0]) * done,
                     float(priced.timeline.radio_spent_j(settled.done_frac)[0]), float(transfers.comm_s[0]) * done, bool(transfers.start_state[0] == 2),
                     declined, int(batch_size[0]), limits)
        self.busy = np.union1d(self.busy, one)
        self.version_refs[self.round] = self.version_refs.get(self.round, 0) + 1
        self._window["dispatched"] += 1
        self._push(ends, "arrive", task)

    def _advance_to(self, t_s: float, client: int, energy_j: float) -> None:
        self._advance_budgets(self.budget_t_s, t_s, np.array([client], dtype=np.int64), np.array([energy_j]))
        self.budget_t_s = t_s
        self.lost_to_training.set(self.budget.lost(), True)

    def _arrive(self, t_s: float, task: _Task) -> None:
        c = task.client
        self._advance_to(t_s, c, task.battery_j)
        if task.reason == BATTERY_EXHAUSTED:
            self.budget.take_offline(np.array([c]))
        self.busy = self.busy[self.busy != c]
        self.energy_cum_j += task.energy_j
        self.energy_drawn_j.add([c], [task.battery_j])
        w = self._window
        w["energy_j"] += task.energy_j
        w["interference_s"] += task.interference_s
        w["phone_interference_s"][task.phone] += task.interference_s
        w["phone_foreground_s"][task.phone] += task.foreground_s
        w["phone_training_foreground_s"][task.phone] += task.training_foreground_s
        w["phone_foreground_lost_s"][task.phone] += task.foreground_lost_s
        w["radio_energy_j"] += task.radio_energy_j
        w["transfer_s"] += task.transfer_s
        w["n_cellular"] += int(task.cellular)
        if task.limits is not None:
            for k, v in task.limits.items():
                w["limits"][k] = w["limits"].get(k, 0) + v
        if task.reason == KEPT:
            self.rounds_kept.add([c], 1)
            w["steps"] += task.steps
            self.buffer.append((task, self.round - task.version))
        elif task.reason == DECLINED and not task.declined:  # out of memory (counted in the limits' columns)
            pass
        else:
            w["dropped"][task.reason] += 1
            if task.reason == DECLINED:
                w["declined"][task.declined] += 1
            self.version_refs[task.version] -= 1
        self._push(t_s, "free", None)

    def _train(self, tasks: list[_Task]) -> tuple[list[dict[str, torch.Tensor]], list[float]]:
        """Train the buffered tasks, grouped by the version they downloaded (one batched call each).

        A task's result depends only on its start model, its data and its dispatch number, so
        training at the server update gives what training at arrival would; the selector hears
        of the losses at the update.
        """
        rules = self.rules
        began = time.perf_counter()
        deltas: list[dict[str, torch.Tensor]] = [{}] * len(tasks)
        losses = [0.0] * len(tasks)
        for version, batch in sorted({(t.version, t.batch_size) for t in tasks}):
            idx = [i for i, t in enumerate(tasks) if t.version == version and t.batch_size == batch]
            start = self.versions[version]
            res = self.seam.train(TrainJob(start, tuple(tasks[i].client for i in idx), tuple(tasks[i].dispatch for i in idx), round_idx=0,
                                            augment_round=0, batch_size=None if batch == rules.fl.batch_size else batch))
            self.train_wall_s += res.train_s
            self.samples_trained += len(idx) * rules.fl.local_steps * batch
            for j, i in enumerate(idx):
                deltas[i] = {k: res.params[k][j] - start[k].to(res.params[k].device) for k in start}
                losses[i] = float(res.losses[j])
            n = res.n_samples.numpy()
            self.selector.observe(self.round, np.array([tasks[i].client for i in idx]), n, res.losses.double().cpu().numpy()[: len(idx)],
                                  np.array([tasks[i].duration_s for i in idx]))
            self.version_refs[version] -= len(idx)
        self.model_wall_s += time.perf_counter() - began
        return deltas, losses

    # -- one server update -----------------------------------------------------------------------
    def step(self) -> RoundRecord:
        """Process events until the buffer holds M deltas, apply the server update, return its row."""
        m, horizon_h = self.rules.fedbuff.buffer_size, self.rules.fl.horizon_h
        while len(self.buffer) < m:
            if horizon_h is not None and self.clock_s >= horizon_h * 3600.0:
                break  # out of time: apply what arrived (possibly nothing)
            t_s, _, kind, payload = heapq.heappop(self.events)
            self.clock_s = t_s
            if kind == "free":
                self._advance_to(t_s, 0, 0.0)
                self._dispatch(t_s)
            else:
                self._arrive(t_s, payload)
        return self._update()

    def _update(self) -> RoundRecord:
        rules, pop = self.rules, self.parts.population
        batch, self.buffer = self.buffer[: rules.fedbuff.buffer_size], self.buffer[rules.fedbuff.buffer_size :]
        staleness = [s for _, s in batch]
        deltas, losses = self._train([t for t, _ in batch])
        began = time.perf_counter()
        if batch:
            weights = staleness_weights(staleness, rules.fedbuff.staleness_exponent)
            stacked = {k: torch.stack([d[k] for d in deltas]) for k in self.params}
            self.params = fedbuff_step(self.params, stacked, weights, rules.fedbuff.server_lr)
        self.model_wall_s += time.perf_counter() - began
        self.round += 1
        self.versions[self.round] = self.params
        for v in [v for v in self.versions if v < self.round and self.version_refs.get(v, 0) == 0]:
            del self.versions[v]
        accuracy = loss = float("nan")
        if self.round % rules.fl.eval_every == 0 or self.round == 1 or self.is_done():
            accuracy, loss = self.evaluate()
        w, self._window = self._window, self._new_window()
        self._check_horizon()
        lost_now = self.budget.lost()
        record = RoundRecord(
            policy=self.policy_name,
            seed=self.seed,
            round=self.round,
            time_s=self.clock_s,
            duration_s=self.clock_s - self.last_update_s,
            accuracy=accuracy,
            loss=loss,
            train_loss=float(np.mean(losses)) if batch else float("nan"),
            n_online=self.budget.online_count(),
            n_selected=w["dispatched"],
            n_kept=len(batch),
            dropped={r: int(w["dropped"][REASONS.index(r)]) for r in DROP_REASONS},
            declined=w["declined"],
            energy_j=w["energy_j"],
            energy_cum_j=self.energy_cum_j,
            interference_s=w["interference_s"],
            clients_lost=len(lost_now),
            clients_lost_cum=self.lost_to_training.count_nonzero(),
            steps_by_choice={label: int(w["steps"][j]) for j, label in enumerate(self.parts.choice_labels)},
            interference_s_by_phone={phone: float(w["phone_interference_s"][p]) for p, phone in enumerate(pop.phone_names)},
            foreground_s_by_phone={phone: float(w["phone_foreground_s"][p]) for p, phone in enumerate(pop.phone_names)},
            training_foreground_s_by_phone={phone: float(w["phone_training_foreground_s"][p]) for p, phone in enumerate(pop.phone_names)},
            foreground_lost_s_by_phone={phone: float(w["phone_foreground_lost_s"][p]) for p, phone in enumerate(pop.phone_names)},
            # whole numbers: any order of summing gives the same; energies are summed over every client as before
            jain_participation=jain_index(self.rounds_kept.values.astype(np.float64), n=pop.n_clients),
            jain_energy=jain_index(self.client_energy_j),
            staleness_mean=float(np.mean(staleness)) if batch else float("nan"),
            network={k: w[k] for k in NETWORK_COLUMNS} if self.network.reports else None,
            device_limits=w["limits"] if self.pricing.on else None,
        )
        self.last_update_s = self.clock_s
        return record

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError("fl.mode 'fedbuff' runs are not checkpointed")
