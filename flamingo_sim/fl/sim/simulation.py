"""The round loop: one policy, one seed, trace-driven, with real training.

Each round (numbered steps match the code):
1. who is online: the energy budget (which follows the client's battery trace, minus what
   training drew) is above the threshold;
2. select ``ceil(K x overcommit)`` of them (uniform by default; randomness from
   (seed, "selection", round));
3. each selected client's policy accepts or declines and prices its task (duration, energy,
   execution choices, interference with the owner), plus the model's download and upload
   (:mod:`flamingo_sim.fl.sim.network`: their time, and with ``network.model: traces`` the
   network each runs on and the radio's energy, which joins the task's energy);
4. settle the round (:func:`flamingo_sim.fl.sim.rounds.settle_round`): drop who declines, runs out
   of energy mid-task, is taken offline by its trace, or is slower than the K fastest;
5. train the kept clients for real (:attr:`Simulation.seam`, :mod:`flamingo_sim.fl.sim.seam`:
   in this process, or split over processes by :mod:`flamingo_sim.fl.distributed`) and aggregate them
   (:mod:`flamingo_sim.fl.strategy.aggregators`; FedAvg weighted by samples by default);
6. advance the clock and every client's battery along its trace, training energy included
   (a client on the charger, by the trace's ``charging`` column where it has one or by a rising
   level with ``traces.charge_state: level``, trains on
   the charger's power: no battery deficit, and it cannot run out mid-task);
7. evaluate every ``eval_every`` rounds, and record the round's metrics.

:meth:`Simulation.step` runs a round natively; :meth:`~Simulation.plan_round` (steps 1-4) and
:meth:`~Simulation.finish_round` (steps 6-7) are public so that another engine (FedScale's
aggregator, :mod:`flamingo_sim.integrations.fedscale`) can do step 5 itself and still share
every rule about who is online, how long a round lasts and what it costs.

All state lives in :class:`Simulation` and round-trips through ``state_dict`` so that a resumed
run continues exactly where a checkpoint left off.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np
import torch

from flamingo_sim.devices.battery import EnergyBudget, PopulationBudget
from flamingo_sim.devices.policies import Policy, TaskOutcome, decline_reasons
from flamingo_sim.devices.pricing import DevicePricing, PricedCohort
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.devices.sparse import SparseVector
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.data.base import DeviceResident, FederatedDataset
from flamingo_sim.fl.sim.fairness import jain_index
from flamingo_sim.fl.sim.limits import OUT_OF_MEMORY, device_models
from flamingo_sim.fl.sim.network import Network, Transfers
from flamingo_sim.fl.sim.population import Population, pair_index
from flamingo_sim.fl.sim.records import RoundRecord, by_phone, count_declines
from flamingo_sim.fl.sim.rounds import BATTERY_EXHAUSTED, DROP_REASONS, INTERRUPTED, REASONS, RoundSettlement, settle_round
from flamingo_sim.fl.sim.rules import RoundRules, cohort_size
from flamingo_sim.fl.sim.seam import ClientUpdates, LocalSeam, TrainingSeam, TrainJob
from flamingo_sim.fl.strategy.aggregators import Aggregator, FedAvg, checked_aggregate
from flamingo_sim.fl.strategy.selection import CoordinatorView, Selector, select_online
from flamingo_sim.fl.training.device import device_cache_bytes, resolve_device
from flamingo_sim.fl.training.trainer import CohortTrainer
from flamingo_sim.rng import rng
from flamingo_sim.traces.store import ClientTraces

#: How far ahead (in trace slots) a task may look at whether the owner uses the phone.
USAGE_SLOTS = 12
#: Temperature assumed where the traces carry none (degC).
DEFAULT_TEMPERATURE_C = 30.0


@dataclass
class Components:
    """What a simulation is made of; built once per (experiment, seed) by :mod:`flamingo_sim.fl.runner.run`."""

    cfg: ExperimentConfig
    traces: ClientTraces
    population: Population
    profiles: ProfileSet  # phones in population order
    dataset: FederatedDataset
    model: torch.nn.Module
    test_data: tuple[torch.Tensor, torch.Tensor]
    choice_labels: tuple[str, ...]
    model_size_source: str = "network.model_size_mb"  # where cfg.network.model_size_mb came from
    network: Network | None = None  # the seed's network (compose builds it); None: built from cfg.network by the simulation

    @property
    def rules(self) -> RoundRules:
        """What the round loop reads of ``cfg`` (:class:`~flamingo_sim.fl.sim.rules.RoundRules`); the
        experiment itself stays here for the adapters that translate it (FedScale's arguments,
        Flower's run guard and summary, tracking)."""
        return RoundRules.of(self.cfg)


@dataclass(frozen=True)
class RoundPlan:
    """A round after steps 1-4 (selected, priced, settled), before training and bookkeeping."""

    round: int  # the round's number, from 1
    t0_s: float  # virtual time the round starts
    n_online: int  # clients online at the start
    chosen: np.ndarray  # int64 selected clients
    outcome: TaskOutcome  # the policy's priced tasks, over ``chosen``
    comm_s: np.ndarray  # float (len(chosen),) model download + upload time
    duration_s: np.ndarray  # float (len(chosen),) compute + communication
    settled: RoundSettlement  # who counts, the share of each task that ran, what it cost, how long the round lasts
    kept: np.ndarray  # int64 clients whose updates count, fastest first
    plugged: np.ndarray  # bool (len(chosen),) on the charger at the start: the charger pays for training
    batch_size: np.ndarray | None = None  # int (len(chosen),) each client's minibatch when devices.memory shrank some; None: fl.batch_size
    transfers: Transfers | None = None  # the cohort's model transfers (network and radio energy); None in plans made elsewhere
    priced: PricedCohort[Transfers] | None = None  # the cohort as the pricing stage priced it (what the device columns read); None in plans made elsewhere
    n_unreachable: int = 0  # online clients the network rule left out of the selection (network.model: traces, unmetered_only)
    #: bool (len(chosen), USAGE_SLOTS): whether each owner uses the phone in each trace slot from ``t0_s``, read once for the
    #: pricing and the owners' foreground time (:meth:`Simulation._in_use`); None in plans made elsewhere (read again then)
    in_use: np.ndarray | None = None


def network_columns(transfers: Transfers | None = None, radio_spent_j: np.ndarray | None = None, comm_s: np.ndarray | None = None,
                    kept: np.ndarray | None = None, n_unreachable: int = 0) -> dict[str, float]:
    """A round's network columns (:data:`flamingo_sim.fl.sim.records.NETWORK_COLUMNS`); zeros without transfers (round 0):
    the radio's energy of the share of each task that ran (``radio_spent_j``), the transfer time of the client the round waited for (the
    slowest kept; 0 when none was kept), the online clients the network left out, the selected clients whose download
    started on cellular."""
    if transfers is None or radio_spent_j is None or comm_s is None or kept is None:
        return {"radio_energy_j": 0.0, "transfer_s": 0.0, "n_unreachable": 0, "n_cellular": 0}
    return {
        "radio_energy_j": float(np.asarray(radio_spent_j).sum()),
        "transfer_s": float(comm_s[kept[-1]]) if len(kept) else 0.0,
        "n_unreachable": int(n_unreachable),
        "n_cellular": int(np.count_nonzero(transfers.start_state == 2)),
    }


def _exploring(outcome: TaskOutcome, energy_spent_j: np.ndarray) -> dict[str, Any]:
    """Selected clients whose task explored an execution choice, and the energy they drew."""
    exploring = np.asarray(outcome.mode) == "explore"
    return {"n_exploring": int(exploring.sum()), "energy_exploring_j": float(energy_spent_j[exploring].sum())}


class Simulation:
    """One policy's federated job over one seed.

    ``log`` (default: stderr) gets one warning line the first time the virtual clock passes
    the trace set's wrap-free horizon (:attr:`~flamingo_sim.traces.store.ClientTraces.horizon_s`):
    past it, clients replay their traces cyclically. ``aggregator`` (default: FedAvg weighted
    by samples) turns the kept clients' states into the next global model.
    """

    def __init__(
        self,
        parts: Components,
        policy: Policy,
        policy_name: str,
        seed: int,
        selector: Selector,
        log: Callable[[str], None] | None = None,
        aggregator: Aggregator | None = None,
    ) -> None:
        self.parts = parts
        self.aggregator: Aggregator = aggregator if aggregator is not None else FedAvg()
        self.log = log or (lambda msg: print(msg, file=sys.stderr))
        self.horizon_warned = False  # said that the clock passed the traces' wrap-free horizon
        #: What this loop reads of the experiment, and all it reads (:class:`~flamingo_sim.fl.sim.rules.RoundRules`).
        self.rules = parts.rules
        self.model_size_mb: float = self.rules.model_size_mb  # one model transfer, each way
        self.policy = policy
        self.policy_name = policy_name
        #: Every reason the policy may decline with (a ``declined_<reason>`` column each).
        self.decline_reasons = decline_reasons(policy)
        self.seed = seed
        self.selector = selector
        pop = parts.population
        capacity_j = np.array([prof.phone.capacity_j for prof in parts.profiles.profiles])[pop.phone_idx]
        self.capacity_j = capacity_j
        tcfg = self.rules.traces
        # The effective budget (training drains it) and a twin that only follows the trace,
        # to tell clients lost to training from clients whose own use took them offline. The
        # twin draws nothing, so it depends only on (trace client, battery capacity): it is kept
        # once per such pair (at most trace clients x phones), not once per FL client.
        n_phones = int(pop.phone_idx.max()) + 1 if pop.n_clients else 1
        pairs, self._pair_of = pair_index(pop.trace_client, pop.phone_idx, n_phones)
        self._pair_trace = pairs // n_phones
        first = np.zeros(len(pairs), dtype=np.int64)
        first[self._pair_of[::-1]] = np.arange(pop.n_clients)[::-1]  # a client of each pair
        # Clients that never trained hold their twin's state exactly: the budget keeps only
        # the ones that deviate (PopulationBudget), so a round costs O(pairs + deviated).
        self.budget = PopulationBudget(capacity_j[first], self._pair_of, min_pct=tcfg.min_pct, reentry_pct=tcfg.reentry_level_pct)
        self.budget.reset(self._trace_levels(0.0)[self._pair_trace])
        self.policy.init(pop.n_clients, pop.phone_idx, parts.profiles)
        #: The network the transfers run on (:mod:`flamingo_sim.fl.sim.network`).
        self.network = parts.network if parts.network is not None else Network(self.rules.network, parts.traces, pop, seed, self.model_size_mb)
        #: The one place a task is priced (:mod:`flamingo_sim.devices.pricing`): memory, the policy, heat (``devices.*``,
        #: read by :mod:`flamingo_sim.fl.sim.limits`), the radio; it holds each phone's heat between tasks.
        heat = memory = None
        if self.rules.devices.enabled:
            heat, memory = device_models(self.rules.devices, parts.profiles, self.rules.fl.batch_size, parts.dataset.n_classes,
                                         app_state=self.rules.app_state)
        self.pricing = DevicePricing(policy, pop.phone_idx, pop.phone_names, self.rules.fl.batch_size, heat, memory,
                                     radio=self.rules.network.model != "lognormal", policy_name=policy_name)
        self.round = 0
        self.clock_s = 0.0
        self.energy_cum_j = 0.0
        # Per-client tallies, held only for the clients that have one (SparseVector): a round
        # touches its cohort's entries, never a whole-population array.
        self.lost_to_training = SparseVector(pop.n_clients, bool)  # lost to training at some point (budget offline, trace online)
        self.rounds_kept = SparseVector(pop.n_clients, np.int64)  # rounds each client's update counted
        self.energy_drawn_j = SparseVector(pop.n_clients, np.float64)  # training energy each client's battery paid
        fl = self.rules.fl
        self.device = resolve_device(fl.device)
        parts.model.to(self.device)
        budget = None if fl.memory_budget_gb is None else int(fl.memory_budget_gb * (1 << 30))
        self.dataset = parts.dataset  # on a GPU, wrapped so that clients' samples stay resident there
        if self.device.type == "cuda" and self.rules.device_cache_gb != 0:
            self.dataset = DeviceResident(parts.dataset, self.device, device_cache_bytes(self.device, self.rules.device_cache_gb))
        from flamingo_sim.fl.training import autotune

        tuner = autotune.tuner_for(self.device, fl.train_mode, parts.model, fl.precision, self.log)  # a GPU's auto; the CPU keeps the rule
        self.trainer = CohortTrainer(parts.model, strategy=fl.train_mode, precision=fl.precision, memory_budget_bytes=budget,
                                     cuda_graphs=fl.cuda_graphs, tuner=tuner, log=self.log)
        self.params = {k: v.detach().clone() for k, v in parts.model.state_dict().items()}
        self._test_data = tuple(t.to(self.device) for t in parts.test_data)
        #: Step 5's worker: trains jobs and evaluates (:mod:`flamingo_sim.fl.sim.seam`); the
        #: torch.distributed run replaces it with one that splits the work over processes.
        self.seam: TrainingSeam = LocalSeam(self.dataset, self.trainer, self._test_data, local_steps=fl.local_steps, batch_size=fl.batch_size,
                                          lr=fl.lr, seed=seed, precision=fl.precision, device=self.device)
        self.model_wall_s = 0.0  # wall time in local training, FedAvg and evaluation (not checkpointed)
        self.train_wall_s = 0.0  # of which local training and FedAvg (data decoding excluded)
        self.samples_trained = 0  # samples through local SGD steps (not checkpointed)

    # -- trace lookups -------------------------------------------------------------------------
    def _trace_levels(self, t_s: float) -> np.ndarray:
        """float64 level of every trace client (not FL client) at ``t_s``."""
        return self.parts.traces.level_at(t_s).astype(np.float64)

    def _trace_state(self, t_s: float, idx: np.ndarray) -> np.ndarray:
        return self.parts.traces.state_at(t_s)[self.parts.population.trace_client[idx]]

    def _price_tasks(self, t_s: float, clients: np.ndarray, plugged: np.ndarray, in_use: np.ndarray | None = None) -> PricedCohort[Transfers]:
        """``clients``' tasks starting at ``t_s``, priced by the pricing stage (memory, the policy, heat, the model's
        transfers); one round's or one FedBuff dispatch's. ``in_use``: :meth:`_in_use` of them at ``t_s`` where the
        caller has read it already (a copy: the policy is a plug-in and the caller reads it again)."""
        return self.pricing.price(
            t_s, clients,
            n_steps=self.rules.fl.local_steps,
            battery_pct=self.budget.level_pct_at(clients),
            charging=plugged,
            trace_temperature_c=self._extra("temperature_c", t_s, clients, DEFAULT_TEMPERATURE_C),
            in_use=self._in_use(t_s, clients) if in_use is None else in_use,
            slot_s=float(self.parts.traces.step_s),
            transfers=lambda compute_s: self.network.transfers(t_s, clients, compute_s),
        )

    def _plugged(self, t_s: float, idx: np.ndarray) -> np.ndarray:
        """Whether each client's phone is on the charger: the trace's ``charging`` column where it
        has one (a phone held full on the charger reads plugged although its level no longer
        rises), else a rising battery (``battery_state`` +1); only the latter with
        ``traces.charge_state: level`` (the paper's appendix A.2)."""
        state = self._trace_state(t_s, idx) > 0
        if self.rules.traces.charge_state == "level":
            return state
        values = self.parts.traces.extra_at("charging", t_s)
        if values is None:
            return state
        charger = values[self.parts.population.trace_client[idx]].astype(np.float64)
        return np.where(np.isnan(charger), state, charger > 0.5)

    def _levels_at(self, idx: np.ndarray, times_s: np.ndarray) -> np.ndarray:
        """Trace level of clients ``idx`` each at its own time ``times_s``."""
        return self.parts.traces.levels_at(self.parts.population.trace_client[idx], times_s)

    def _extra(self, name: str, t_s: float | np.ndarray, idx: np.ndarray, default: float) -> np.ndarray:
        """Trace extra ``name`` of clients ``idx`` at ``t_s`` (a time, or times broadcast against ``idx``)."""
        values = self.parts.traces.extra_of(name, self.parts.population.trace_client[idx], t_s)
        if values is None:
            return np.full(np.broadcast_shapes(np.shape(idx), np.shape(t_s)), default, dtype=np.float64)
        return values.astype(np.float64)

    def _in_use(self, t_s: float, idx: np.ndarray) -> np.ndarray:
        """bool (len(idx), USAGE_SLOTS): whether each client's owner uses the phone in each of the next slots."""
        times = t_s + np.arange(USAGE_SLOTS) * self.parts.traces.step_s
        threshold = self.rules.in_use_threshold
        return self._extra("screen_on_frac", times[None, :], np.asarray(idx)[:, None], 0.0) > threshold

    def _foreground_s(self, t_s: float, idx: np.ndarray, span_s: np.ndarray, use: np.ndarray | None = None) -> np.ndarray:
        """Seconds each client's owner uses the phone within ``[t_s, t_s + span_s)`` (the in-use slots); ``use``: their
        :meth:`_in_use` at ``t_s`` where the caller has it (a round reads it once for its pricing and both its spans)."""
        use = self._in_use(t_s, idx) if use is None else use
        step = float(self.parts.traces.step_s)
        edges = np.arange(use.shape[1]) * step
        overlap = np.clip(span_s[:, None] - edges[None, :], 0.0, step)
        overlap[:, -1] = np.maximum(span_s - edges[-1], 0.0)  # the last slot persists
        return (use * overlap).sum(axis=1)

    # -- one round -----------------------------------------------------------------------------
    def step(self) -> RoundRecord:
        """Run one round natively: plan it, train and aggregate, finish it; returns its record."""
        plan = self.plan_round()
        train_loss = self.train_round(plan)
        return self.finish_round(plan, train_loss)

    def plan_round(self) -> RoundPlan:
        """Steps 1-4: start the next round, select, price and settle it (no training yet).

        Other engines (FedScale's aggregator) call this, train ``plan.kept`` themselves, hand
        the aggregated model to :meth:`set_global_params` and then call :meth:`finish_round`.
        """
        rules, pop = self.rules, self.parts.population
        self.round += 1
        t0 = self.clock_s

        # 1. who is online (counted, not listed: a selector that draws by rank reads only its picks), and reachable
        online, n_online, n_unreachable = self._reachable_online(t0)
        # 2. selection
        k = rules.fl.participants_per_round
        n_select = cohort_size(k, rules.fl.overcommit, len(online))
        view = CoordinatorView(round=self.round, min_pct=rules.traces.min_pct, level_pct_at=self.budget.level_pct_at, n_clients=pop.n_clients)
        chosen = select_online(self.selector, online, n_select, rng(self.seed, "selection", self.round), view)

        # 3. price every selected client's task under its policy
        plugged = self._plugged(t0, chosen)
        in_use = self._in_use(t0, chosen)
        priced = self._price_tasks(t0, chosen, plugged, in_use.copy())
        outcome, batch_size, duration_s = priced.outcome, priced.batch_size, priced.duration_s

        # 4. settle: who counts, how long the round lasts, what it cost
        finish_online = self._online_at_finish(chosen, t0, duration_s)
        floor_j = rules.traces.min_pct / 100.0 * self.capacity_j[chosen]
        spare_j = self.budget.available_j_at(chosen) - floor_j - self._trace_drain_j(chosen, t0, duration_s)
        spare_j = np.where(plugged, np.inf, spare_j)  # the charger pays for training
        settled = settle_round(
            k=k,
            accepted=outcome.accepted,
            duration_s=duration_s,
            energy_j=priced.energy_j,
            spare_energy_j=spare_j,
            online_at_finish=finish_online,
            interrupted=priced.interrupted, curve=priced.timeline,
            deadline_s=rules.fl.deadline_s,
        )
        self.policy.settle(outcome, settled.done_frac)  # e.g. Flamingo books exploration that finished
        self.pricing.settle(priced, t0, settled.done_frac)
        return RoundPlan(
            round=self.round,
            t0_s=t0,
            n_online=n_online,
            chosen=chosen,
            outcome=outcome,
            comm_s=priced.comm_s,
            duration_s=duration_s,
            settled=settled,
            kept=chosen[settled.kept],
            plugged=plugged,
            batch_size=batch_size if np.any(batch_size != rules.fl.batch_size) else None,
            transfers=priced.transfers,
            n_unreachable=n_unreachable,
            priced=priced,
            in_use=in_use,
        )

    def _reachable_online(self, t0: float, busy: np.ndarray | None = None) -> tuple[Any, int, int]:
        """The online clients (less ``busy``) a task can reach at ``t0``, how many are online, and how many
        of those the network leaves out (none under the plain ``lognormal`` model: its rounds stay as they were)."""
        if not self.network.reports:
            online = self.budget.online_clients(exclude=busy)
            return online, len(online), 0
        n = self.parts.population.n_clients
        unreachable = np.flatnonzero(~self.network.reachable(t0, np.arange(n, dtype=np.int64)))
        exclude = unreachable if busy is None else np.union1d(unreachable, busy)
        online = self.budget.online_clients(exclude=exclude)
        n_online = len(self.budget.online_clients(exclude=busy)) if busy is not None and len(busy) else self.budget.online_count()
        return online, n_online, n_online - len(online)

    def train_round(self, plan: RoundPlan) -> float:
        """Step 5 (native): train the kept clients for real and aggregate with :attr:`aggregator`.

        Updates :attr:`params`; returns the kept clients' mean training loss (NaN if none).
        """
        rules = self.rules
        if not len(plan.kept):
            return float("nan")
        started = time.perf_counter()
        ids = tuple(int(c) for c in plan.kept)
        job = TrainJob(self.params, ids, ids, plan.round, self.aggregator.proximal_mu, augment_round=plan.round)
        if plan.batch_size is None:
            updates = self.seam.train(job)
            batches = np.full(len(ids), rules.fl.batch_size)
        else:
            batches = plan.batch_size[plan.settled.kept]
            updates = self._train_by_batch(job, batches)
        aggregated_from = time.perf_counter()
        n_samples = updates.n_samples
        self.params = checked_aggregate(self.aggregator, self.params, updates.params, n_samples, plan.round)
        self.train_wall_s += updates.train_s + time.perf_counter() - aggregated_from
        self.samples_trained += int(batches.sum()) * rules.fl.local_steps
        kept_s = plan.duration_s[plan.settled.kept]
        self.selector.observe(plan.round, plan.kept, n_samples.numpy(), updates.losses.detach().cpu().double().numpy(), kept_s)
        self.model_wall_s += time.perf_counter() - started
        return float(updates.losses.mean())

    def _train_by_batch(self, job: TrainJob, batches: np.ndarray) -> ClientUpdates:
        """Train ``job`` with a minibatch per client (``devices.memory: shrink_batch``): one
        sub-job per batch size, the updates put back in the job's client order."""
        if not isinstance(self.seam, LocalSeam):
            raise ConfigError("devices.memory: 'shrink_batch' trains each client with its own minibatch in one process; run without --nproc")
        parts, rows = [], []
        for b in np.unique(batches):
            mine = np.flatnonzero(batches == b)
            sub = TrainJob(job.start, tuple(job.clients[i] for i in mine), tuple(job.keys[i] for i in mine), job.round_idx, job.prox_mu,
                           job.augment_round, batch_size=int(b))
            parts.append(self.seam.train(sub))
            rows.append(mine)
        order = torch.from_numpy(np.argsort(np.concatenate(rows), kind="stable"))
        return ClientUpdates(
            {k: torch.cat([u.params[k] for u in parts])[order.to(parts[0].params[k].device)] for k in parts[0].params},
            torch.cat([u.losses for u in parts])[order.to(parts[0].losses.device)],
            torch.cat([u.n_samples for u in parts])[order],
            sum(u.train_s for u in parts),
        )

    def lose_updates(self, plan: RoundPlan, clients: np.ndarray) -> RoundPlan:
        """``plan`` with the updates of ``clients`` (some of ``plan.kept``) lost after they trained.

        Each is counted as the native engine counts a client that stops before its update counts:
        ``interrupted``. It ran its task and drew its energy (its share of the task stays 1), the
        owner felt it, but its update is not aggregated, not among ``n_kept`` and not in the
        participation counts. The round lasts as planned (the coordinator waited for the reply).
        For an engine whose clients can fail after the plan, e.g. a user's Flower ClientApp raising.
        """
        clients = np.asarray(clients, dtype=np.int64)
        if plan.round != self.round:
            raise ValueError(f"lose_updates: plan is for round {plan.round}, the simulation is at round {self.round}")
        unknown = np.setdiff1d(clients, plan.kept)
        if len(unknown):
            raise ValueError(f"lose_updates: clients {unknown.tolist()} are not among round {plan.round}'s kept clients")
        lost = np.isin(plan.kept, clients)  # plan.kept is plan.chosen[plan.settled.kept]
        reason = plan.settled.reason.copy()
        reason[plan.settled.kept[lost]] = INTERRUPTED
        settled = replace(plan.settled, reason=reason, kept=plan.settled.kept[~lost])
        return replace(plan, settled=settled, kept=plan.kept[~lost])

    def set_global_params(self, state: Mapping[str, torch.Tensor]) -> None:
        """Make ``state`` (a model ``state_dict``, the aggregate of this round's kept updates)
        the global model that :meth:`finish_round` evaluates; copied, and checked against the
        model's entries (names and shapes)."""
        if set(state) != set(self.params):
            missing, extra = sorted(set(self.params) - set(state)), sorted(set(state) - set(self.params))
            raise ValueError(f"set_global_params: entries differ from the model's (missing {missing}, unexpected {extra})")
        for name, value in state.items():
            if tuple(value.shape) != tuple(self.params[name].shape):
                raise ValueError(f"set_global_params: {name} has shape {tuple(value.shape)}, the model's is {tuple(self.params[name].shape)}")
        self.params = {k: state[k].detach().clone() for k in self.params}

    def finish_round(self, plan: RoundPlan, train_loss: float) -> RoundRecord:
        """Steps 6-7: advance the clock and batteries, evaluate :attr:`params`, return the round's record."""
        rules, pop = self.rules, self.parts.population
        if plan.round != self.round:
            raise ValueError(f"finish_round: plan is for round {plan.round}, the simulation is at round {self.round}")
        chosen, settled, outcome, kept = plan.chosen, plan.settled, plan.outcome, plan.kept
        t0 = plan.t0_s

        # 6. advance the clock and every battery along its trace
        self.clock_s = t0 + settled.duration_s
        drawn_j = np.where(plan.plugged, 0.0, settled.energy_spent_j)  # over chosen; the charger pays
        self._advance_budgets(t0, self.clock_s, chosen, drawn_j)
        self.budget.take_offline(chosen[settled.reason == BATTERY_EXHAUSTED])  # ran flat: wait for a charge
        lost_now = self.budget.lost()
        self.lost_to_training.set(lost_now, True)
        energy_j = float(settled.energy_spent_j.sum())
        self.energy_cum_j += energy_j
        self.rounds_kept.add(kept, 1)
        self.energy_drawn_j.add(chosen, drawn_j)

        # the owner feels every training step that ran, kept or not; the owner's foreground
        # time is counted over each selected client's time under the job this round
        interference_s = outcome.interference_s * settled.done_frac
        lost_s = outcome.foreground_lost_s * settled.done_frac
        span_s = np.maximum(settled.duration_s, outcome.duration_s * settled.done_frac)
        use = plan.in_use if plan.in_use is not None else self._in_use(t0, chosen)
        foreground_s = self._foreground_s(t0, chosen, span_s, use)
        # while training ran: over the whole task, scaled by the share that ran (as interference_s is)
        training_fg_s = self._foreground_s(t0, chosen, outcome.duration_s, use) * settled.done_frac

        # 7. evaluate and record
        accuracy = loss = float("nan")
        if self.round % rules.fl.eval_every == 0 or self.round == 1 or self.is_done():
            accuracy, loss = self.evaluate()
        self._check_horizon()
        counts = outcome.steps_by_choice[settled.kept].sum(axis=0) if len(kept) else None
        chosen_phone = pop.phone_idx[chosen]
        dropped = {r: settled.count(REASONS.index(r)) for r in DROP_REASONS}
        limits = None
        if self.pricing.on:
            limits = self.pricing.columns(plan.priced)
            if OUT_OF_MEMORY in set(outcome.decline_reason):  # out of memory: its own reason, not a decline
                dropped["declined"] -= int(limits[f"dropped_{OUT_OF_MEMORY}"])
        reasons = np.asarray(outcome.decline_reason, dtype=object)
        declined = count_declines(self.decline_reasons, reasons[~np.asarray(outcome.accepted, dtype=bool) & (reasons != OUT_OF_MEMORY)],
                                  self.policy_name)
        network = None
        if self.network.reports and plan.transfers is not None:
            radio_j = plan.priced.timeline.radio_spent_j(settled.done_frac) if plan.priced is not None else plan.transfers.radio_energy_j * settled.done_frac
            network = network_columns(plan.transfers, radio_j, plan.comm_s, settled.kept, plan.n_unreachable)
        return RoundRecord(
            policy=self.policy_name,
            seed=self.seed,
            round=self.round,
            time_s=self.clock_s,
            duration_s=settled.duration_s,
            accuracy=accuracy,
            loss=loss,
            train_loss=train_loss,
            n_online=plan.n_online,
            n_selected=len(chosen),
            n_kept=len(kept),
            dropped=dropped,
            declined=declined,
            energy_j=energy_j,
            energy_cum_j=self.energy_cum_j,
            interference_s=float(interference_s.sum()),
            clients_lost=len(lost_now),
            clients_lost_cum=self.lost_to_training.count_nonzero(),
            steps_by_choice={label: int(counts[j]) if counts is not None else 0 for j, label in enumerate(self.parts.choice_labels)},
            interference_s_by_phone=by_phone(interference_s, chosen_phone, pop.phone_names),
            foreground_s_by_phone=by_phone(foreground_s, chosen_phone, pop.phone_names),
            training_foreground_s_by_phone=by_phone(training_fg_s, chosen_phone, pop.phone_names),
            foreground_lost_s_by_phone=by_phone(lost_s, chosen_phone, pop.phone_names),
            jain_participation=jain_index(self.rounds_kept.values, n=pop.n_clients),
            jain_energy=jain_index(self.energy_drawn_j.values, n=pop.n_clients),
            **_exploring(outcome, settled.energy_spent_j),
            device_limits=limits,
            straggler_phone=pop.phone_names[int(chosen_phone[settled.kept[-1]])] if len(settled.kept) else "",
            network=network,
        )

    def initial_record(self) -> RoundRecord:
        """Round 0: the initial model evaluated at t = 0, nothing trained, every client as its trace has it."""
        if self.round != 0:
            raise ValueError(f"initial_record: the simulation is at round {self.round}, not 0")
        accuracy, loss = self.evaluate()
        nobody = by_phone(np.zeros(0), np.zeros(0, dtype=np.int64), self.parts.population.phone_names)
        return RoundRecord(
            policy=self.policy_name, seed=self.seed, round=0, time_s=0.0, duration_s=0.0,
            accuracy=accuracy, loss=loss, train_loss=float("nan"),
            n_online=self.budget.online_count(), n_selected=0, n_kept=0, dropped={r: 0 for r in DROP_REASONS},
            declined=dict.fromkeys(self.decline_reasons, 0),
            energy_j=0.0, energy_cum_j=0.0, interference_s=0.0, clients_lost=0, clients_lost_cum=0,
            steps_by_choice={label: 0 for label in self.parts.choice_labels},
            interference_s_by_phone=nobody, foreground_s_by_phone=nobody, training_foreground_s_by_phone=nobody,
            foreground_lost_s_by_phone=nobody,
            device_limits=self.pricing.columns() if self.pricing.on else None,
            network=network_columns() if self.network.reports else None,
        )

    @property
    def times_kept(self) -> np.ndarray:
        """int64 (n,): rounds each client's update counted (a whole-population array, built on each call)."""
        return self.rounds_kept.dense()

    @property
    def client_energy_j(self) -> np.ndarray:
        """float64 (n,): training energy each client's battery paid (built on each call)."""
        return self.energy_drawn_j.dense()

    @property
    def ever_lost(self) -> np.ndarray:
        """bool (n,): whether each client was ever lost to training (built on each call)."""
        return self.lost_to_training.dense()

    def _check_horizon(self) -> None:
        """Say once when the virtual clock passes the point where trace replay wraps."""
        horizon_s = self.parts.traces.horizon_s
        if self.horizon_warned or self.clock_s <= horizon_s:
            return
        self.horizon_warned = True
        self.log(
            f"WARNING: virtual time {self.clock_s / 3600:.1f} h passed the trace set's wrap-free horizon of {horizon_s / 3600:.1f} h "
            f"(round {self.round}); from there on clients replay their battery traces from the start"
        )

    def _online_at_finish(self, idx: np.ndarray, t0: float, duration_s: np.ndarray) -> np.ndarray:
        """Whether each client's trace alone keeps it above the threshold until it finishes."""
        return self._levels_at(idx, t0 + duration_s) >= self.rules.traces.min_pct

    def _trace_drain_j(self, idx: np.ndarray, t0: float, duration_s: np.ndarray) -> np.ndarray:
        """Energy the owner's own use drains from each client while its task runs (>= 0)."""
        start = self._levels_at(idx, np.full(len(idx), t0))
        end = self._levels_at(idx, t0 + duration_s)
        return np.maximum(start - end, 0.0) / 100.0 * self.capacity_j[idx]

    @property
    def trace_budget(self) -> EnergyBudget:
        """The trace-only budget, one entry per (trace client, phone) pair (:attr:`_pair_of` maps clients to pairs)."""
        return self.budget.twin

    def _advance_budgets(self, t0: float, t1: float, clients: np.ndarray, drawn_j: np.ndarray) -> None:
        """Draw ``drawn_j`` from ``clients`` at ``t0``, then step the budget through every trace
        grid tick in (t0, t1]. Inputs come from the validated trace set (not re-validated)."""
        step = self.parts.traces.step_s
        first = math.floor(t0 / step) + 1
        last = math.floor(t1 / step)
        traces = self.parts.traces
        self.budget.draw(traces.levels_at(self._pair_trace, np.full(len(self._pair_trace), t0)), clients, drawn_j)
        # every tick of the round in one read of each pair's trace (the same values as _trace_levels(tick * step)[_pair_trace])
        self.budget.advance_steps(traces.levels_on_ticks(self._pair_trace, first, last - first + 1))

    def evaluate(self) -> tuple[float, float]:
        started = time.perf_counter()
        result = self.seam.evaluate(self.params)
        self.model_wall_s += time.perf_counter() - started
        return result

    def is_done(self) -> bool:
        """Whether the run has ended: ``fl.rounds`` rounds done, or the clock past ``fl.horizon_h``."""
        fl = self.rules.fl
        if fl.rounds is not None and self.round >= fl.rounds:
            return True
        return fl.horizon_h is not None and self.clock_s >= fl.horizon_h * 3600.0

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The whole state; per-client tallies as their non-zero entries (:class:`SparseVector`),
        so a checkpoint grows with the clients that took part, not with the population."""
        return {
            "round": self.round,
            "clock_s": self.clock_s,
            "energy_cum_j": self.energy_cum_j,
            "ever_lost": self.lost_to_training.state_dict(),
            "times_kept": self.rounds_kept.state_dict(),
            "client_energy_j": self.energy_drawn_j.state_dict(),
            "params": {k: v.detach().cpu().clone() for k, v in self.params.items()},
            "budget": self.budget.state_dict(),
            "policy": self.policy.state_dict(),
            "aggregator": self.aggregator.state_dict(),
            "selector": self.selector.state_dict(),
            **({"limits": self.pricing.state_dict()} if self.pricing.on else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.round = int(state["round"])
        self.clock_s = float(state["clock_s"])
        self.energy_cum_j = float(state["energy_cum_j"])
        self.lost_to_training.load_state_dict(state["ever_lost"], "ever_lost")
        self.rounds_kept.load_state_dict(state["times_kept"], "times_kept")
        self.energy_drawn_j.load_state_dict(state["client_energy_j"], "client_energy_j")
        self.params = {k: v.to(self.device).clone() for k, v in state["params"].items()}
        self.budget.load_state_dict(state["budget"])
        self.policy.load_state_dict(state["policy"])
        self.aggregator.load_state_dict(state["aggregator"])
        self.selector.load_state_dict(state["selector"])
        if self.pricing.on and "limits" in state:
            self.pricing.load_state_dict(state["limits"])
