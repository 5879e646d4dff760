"""FlamingoStrategy: a Flower Message API strategy run on flamingo-sim's phones.

It wraps another strategy (``inner``: Flower's ``FedAvg``, ``FedProx``, ``FedAdam``, ... or the
user's own) and decides, round by round, what Flower cannot know:

1. who is online, who is selected and which updates count: :meth:`Simulation.plan_round
   <flamingo_sim.fl.sim.simulation.Simulation.plan_round>` (traces and energy budgets, the
   experiment's selector, the policy pricing every task on its phone, declines, drop-outs,
   the deadline and the K fastest);
2. the inner strategy configures the round (its config, FedProx's ``proximal-mu``, FedAdam's
   bookkeeping); its message content goes to the kept clients' nodes only, each with a
   ``flamingo`` record (``client-id``, ``round``, ``seed``): the inner strategy sees only the
   kept nodes connected (every node, where it insists on more nodes than were kept), and its
   own sampling decides nothing;
3. the replies, in the order of the settled round (fastest first), go to the inner strategy's
   ``aggregate_train``; the selector observes them (sample counts, training losses);
4. no federated evaluation: it is refused in one line (:data:`EVALUATION_REFUSED`; a phone's
   evaluation is not priced), and the server evaluates the global model with ``evaluate_fn``;
5. after the round's evaluation :meth:`~flamingo_sim.fl.sim.simulation.Simulation.finish_round`
   advances the virtual clock, the batteries, clients lost and the per-phone UX figures and
   returns the round's metrics row.

Two ways to make one:

- a user's app: ``FlamingoStrategy(FedAvg(fraction_evaluate=0.0), experiment="openimage_mobilenet", out_dir=...)``.
  The population is the Flower federation: one flamingo-sim client per node, client ``p`` being
  the node whose ``partition-id`` is ``p`` (asked once with ``query.flamingo``, which the user's
  ClientApp answers after the optional
  :func:`~flamingo_sim.integrations.flower.client.register_partition_query`; or pass
  ``partitions``); an app that does not answer needs no change: its nodes stand for the clients
  in node-id order (random between runs), with one line saying so. Phones, traces and bandwidths are assigned as in a native run of that
  many clients; the experiment's own data is not read (its generated proxy sizes the population,
  nothing trains on it). Accuracy and loss come from the ``evaluate_fn`` given to :meth:`start`
  (keys ``accuracy``/``eval_acc`` and ``loss``/``eval_loss``). Flower's ``num_rounds`` counts the rounds. ``out_dir`` gets
  ``config.yaml``, ``metrics.parquet`` (rewritten every round) and ``summary.json``, which
  ``flamingo-sim report`` reads.
- the ``flower`` engine: :meth:`FlamingoStrategy.for_simulation` on the runner's own
  :class:`~flamingo_sim.fl.sim.simulation.Simulation`; node ``i`` in node-id order stands for client
  ``i`` and the experiment's ClientApp trains the client each message names.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.runner.callbacks import Callback, CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.integrations.flower.client import FLAMINGO_RECORD, QUERY_TYPE
from flamingo_sim.integrations.flower.grid import KeptNodes, RunEnds, StoppableGrid
from flamingo_sim.io import atomic_path, write_json

__all__ = ["FlamingoStrategy"]

NAN = float("nan")
#: Why federated evaluation is refused (said in one line when an inner strategy asks for it).
EVALUATION_REFUSED = ("federated evaluation is not offered: flamingo-sim prices training on the phones (profiled training steps), "
                      "not evaluation, so evaluating phones would spend no time and no battery; set fraction_evaluate=0.0 and "
                      "give start() an evaluate_fn (the global model evaluated on the server, as flamingo-sim's own runs do)")
#: What Flower's reply says when a ClientApp has no handler for the partition query.
NO_QUERY = "No query function registered with name 'flamingo'"


class _ReportedSimulation(Simulation):
    """A simulation whose model lives in the user's Flower app: :meth:`evaluate` returns what Flower measured."""

    reported: tuple[float, float] = (NAN, NAN)

    def evaluate(self) -> tuple[float, float]:
        return self.reported


def _metric(record: Any, keys: Sequence[str]) -> float:
    for key in keys:
        if record is not None and key in record:
            return float(record[key])
    return NAN


def _reason(message: Message) -> str:
    """The last line of an error reply's reason (Flower puts the ClientApp's traceback there)."""
    lines = (message.error.reason or "").strip().splitlines()
    return lines[-1] if lines else "no reason given"


def _reply_metrics(message: Message) -> Any:
    """The reply's MetricRecord (the first one), or None."""
    return next(iter(message.content.metric_records.values()), None)


class FlamingoStrategy(Strategy):
    """Flower strategy ``inner`` run on flamingo-sim's phones (see the module docstring).

    User app: ``experiment`` (a shipped experiment's name or a YAML path) with ``overrides``
    (``key=value`` as ``--set``), ``policy`` (default: the experiment's last, e.g. ``flamingo``;
    ``baseline``, ``least_energy``, ...) and ``seed`` (default: the experiment's first); ``out_dir`` for the
    run directory (``None``: no files); ``partitions`` maps node ids to partition ids (default:
    asked with ``query.flamingo``); ``num_nodes`` how many nodes to wait for (default: as many as
    have connected once the count holds for a second).
    """

    def __init__(
        self,
        inner: Strategy,
        experiment: str | Path | None = None,
        *,
        overrides: Sequence[str] = (),
        policy: str | None = None,
        seed: int | None = None,
        out_dir: str | Path | None = None,
        partitions: Mapping[int, int] | None = None,
        num_nodes: int | None = None,
        accuracy_keys: Sequence[str] = ("accuracy", "eval_acc"),
        loss_keys: Sequence[str] = ("loss", "eval_loss"),
        callbacks: Sequence[Callback] = (),
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(inner, Strategy):
            raise TypeError(f"FlamingoStrategy wraps a flwr.serverapp.strategy.Strategy, got {type(inner).__name__}")
        fraction = getattr(inner, "fraction_evaluate", 0.0)
        if isinstance(fraction, (int, float)) and fraction > 0:
            raise ConfigError(f"FlamingoStrategy: {type(inner).__name__}(fraction_evaluate={fraction}): {EVALUATION_REFUSED}")
        self.inner = inner
        self.log = log or (lambda msg: print(msg, file=sys.stderr))
        self.callbacks = CallbackList(list(callbacks))
        self.accuracy_keys, self.loss_keys = tuple(accuracy_keys), tuple(loss_keys)
        self.records: list[RoundRecord] = []  # every round's metrics row, round 0 first (user app)
        self.sim: Simulation | None = None
        self.node_of: np.ndarray | None = None  # node id of each flamingo-sim client
        self.client_of: dict[int, int] = {}
        self._engine = False  # made by for_simulation: the runner owns the run directory and round 0
        self._plan: Any = None
        self._train_loss = NAN
        self._client_eval: Any = None
        self._grid: Grid | None = None
        self.stop = threading.Event()  # set (by whoever runs the simulation) to end the run at the next reply wait
        self._partitions = None if partitions is None else {int(k): int(v) for k, v in partitions.items()}
        self._num_nodes = num_nodes
        self.out_dir = None if out_dir is None else Path(out_dir)
        if experiment is None:
            return  # for_simulation fills in the rest
        from flamingo_sim.fl.config import load_experiment
        from flamingo_sim.fl.runner.plan import check_composition
        from flamingo_sim.fl.runner.rundir import check_run_dir
        from flamingo_sim.resources import find_experiment

        self.experiment = find_experiment(experiment)
        self.overrides = ["fl.eval_every=1", *overrides]  # Flower evaluates every round: record it every round
        cfg = load_experiment(self.experiment, self.overrides)
        if cfg.fl.mode != "sync":
            raise ConfigError(f"{self.experiment}: fl.mode: {cfg.fl.mode!r} is not offered under Flower (rounds only)")
        self.policy = policy if policy is not None else cfg.policies[-1]
        check_composition(cfg, self.experiment, engine="flower", policies=[self.policy])  # a bad setting fails here, before any work
        self.seed = cfg.seeds[0] if seed is None else int(seed)
        if self.out_dir is not None:
            check_run_dir(self.out_dir, cfg, resume=False)

    @classmethod
    def for_simulation(cls, inner: Strategy, sim: Simulation, callbacks: CallbackList, log: Callable[[str], None] | None = None) -> FlamingoStrategy:
        """The ``flower`` engine's strategy: ``sim`` (built by the runner) decides the rounds; node
        ``i`` in node-id order stands for client ``i``; :attr:`records` gets rounds 1, 2, ..."""
        strategy = cls(inner, log=log)
        strategy.sim, strategy.callbacks, strategy._engine = sim, callbacks, True
        strategy._num_nodes = sim.parts.population.n_clients
        return strategy

    # -- the run -------------------------------------------------------------------------------------
    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Flower's round loop (:meth:`Strategy.start`) with flamingo-sim deciding each round; on a
        user's app, the run directory is written as the rounds finish."""
        grid = StoppableGrid(grid, self.stop)
        self._grid, self._timeout = grid, timeout
        self._user_evaluate = evaluate_fn
        self._last_arrays = initial_arrays
        self._ensure_ready()
        with ExitStack() as stack:
            if not self._engine and self.out_dir is not None:
                from flamingo_sim.fl.runner.rundir import run_guard

                assert self.sim is not None
                stack.enter_context(run_guard(self.out_dir, self.sim.parts.cfg, self.experiment, resume=False, resumable=False, engine="Flower"))
            try:
                result = super().start(grid, initial_arrays, num_rounds, timeout, train_config, evaluate_config, self._evaluate)
            except RunEnds:
                result = Result()
                result.arrays = self._last_arrays
            if not self._engine:
                self._write_summary()
        return result

    def summary(self) -> None:
        sim = self.sim
        if sim is not None:
            self.log(f"FlamingoStrategy: {sim.policy_name} seed {sim.seed}, {sim.parts.population.n_clients} phones, "
                     f"K = {sim.rules.fl.participants_per_round} (overcommit {sim.rules.fl.overcommit}) around {type(self.inner).__name__}")
        self.inner.summary()

    # -- training ------------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid) -> Iterable[Message]:
        """Plan the round (steps 1-4 of the round loop); the inner strategy's training message, sent to the kept clients' nodes."""
        self._grid = grid
        sim = self._ensure_ready()
        if self._plan is not None:
            raise FlamingoError(f"FlamingoStrategy: round {self._plan.round} was never finished; run it with FlamingoStrategy.start()")
        self.callbacks.on_round_begin(sim)
        plan = self._plan = sim.plan_round()
        self._train_loss, self._client_eval = NAN, None
        if not len(plan.kept):
            return []
        assert self.node_of is not None
        kept_nodes = [int(self.node_of[c]) for c in plan.kept]
        # the inner strategy samples from the kept nodes where it may (Flower's FedAvg waits for at
        # least min_available_nodes / min_train_nodes: fewer kept than that, it sees every node)
        need = max(int(getattr(self.inner, "min_available_nodes", 0) or 0), int(getattr(self.inner, "min_train_nodes", 0) or 0))
        view = KeptNodes(grid, kept_nodes) if isinstance(grid, StoppableGrid) and len(kept_nodes) >= need else grid
        template = next(iter(self.inner.configure_train(server_round, arrays, config, view)), None)
        if template is None:
            raise FlamingoError(f"FlamingoStrategy: the inner strategy {type(self.inner).__name__} configured no training in round {server_round} "
                                "(is its fraction_train 0?)")
        messages = []
        for client in plan.kept:
            content = RecordDict(dict(template.content.items()))
            content[FLAMINGO_RECORD] = ConfigRecord({"client-id": int(client), "round": int(plan.round), "seed": int(sim.seed)})
            messages.append(Message(content, dst_node_id=int(self.node_of[client]), message_type=template.metadata.message_type))
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The kept clients' replies, fastest first, aggregated by the inner strategy; the selector observes them."""
        plan, sim = self._plan, self.sim
        assert plan is not None and sim is not None
        replies = list(replies)
        if not replies:
            return None, None
        rank = {int(c): i for i, c in enumerate(plan.kept)}
        good = sorted((m for m in replies if not m.has_error()), key=lambda m: rank[self.client_of[m.metadata.src_node_id]])
        failed = [m for m in replies if m.has_error()]
        for m in failed:
            what = f"Flower client {self.client_of.get(m.metadata.src_node_id, '?')} (node {m.metadata.src_node_id}) failed in round {plan.round}: {_reason(m)}"
            if self._engine:
                raise FlamingoError(what)
            self.log(f"WARNING: {what}; its update is lost: counted as interrupted, as the native engine counts a client "
                     "whose update never arrives")
        if failed:  # the row counts them as dropped (interrupted), not kept; the selector observes only the good ones
            lost = [self.client_of[m.metadata.src_node_id] for m in failed if m.metadata.src_node_id in self.client_of]
            self._plan = sim.lose_updates(plan, np.array(lost, dtype=np.int64))
        arrays, metrics = self.inner.aggregate_train(server_round, good + failed)
        if good:
            clients = np.array([self.client_of[m.metadata.src_node_id] for m in good], dtype=np.int64)
            weight_key = getattr(self.inner, "weighted_by_key", "num-examples")
            n_samples = np.array([_metric(_reply_metrics(m), (weight_key,)) for m in good])
            losses = np.array([_metric(_reply_metrics(m), ("train_loss",)) for m in good])
            kept_s = plan.duration_s[plan.settled.kept][[rank[int(c)] for c in clients]]
            sim.selector.observe(plan.round, clients, n_samples, losses, kept_s)
        self._train_loss = _metric(metrics, ("train_loss",))
        if arrays is not None:
            self._last_arrays = arrays
            if self._engine:
                sim.set_global_params(arrays.to_torch_state_dict())
        return arrays, metrics

    # -- evaluation ----------------------------------------------------------------------------------
    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid) -> Iterable[Message]:
        """No federated evaluation (:data:`EVALUATION_REFUSED`): an inner strategy that asks for some stops the run here."""
        messages = list(self.inner.configure_evaluate(server_round, arrays, config, grid))
        if messages:
            raise FlamingoError(f"FlamingoStrategy: {type(self.inner).__name__} asked {len(messages)} nodes to evaluate in round {server_round}: "
                                f"{EVALUATION_REFUSED}")
        return []

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        self._client_eval = self.inner.aggregate_evaluate(server_round, replies)
        return self._client_eval

    def _evaluate(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """Flower's ``evaluate_fn`` slot, called after every round (and before the first): the
        user's own ``evaluate_fn``, then step 6-7 of the round loop (finish_round)."""
        result = self._user_evaluate(server_round, arrays) if self._user_evaluate is not None else None
        sim = self._ensure_ready()
        if isinstance(sim, _ReportedSimulation):
            source = result if result is not None else self._client_eval
            sim.reported = (_metric(source, self.accuracy_keys), _metric(source, self.loss_keys))
        if server_round == 0:
            if not self._engine:
                self._append(sim.initial_record())
            return result
        if self._plan is None:
            raise FlamingoError(f"FlamingoStrategy: round {server_round} evaluated before it was trained")
        plan, self._plan = self._plan, None
        record = sim.finish_round(plan, self._train_loss)
        self._append(record)
        if self.callbacks.on_round_end(sim, record) or (self._engine and sim.is_done()):
            raise RunEnds
        return result

    # -- clients and nodes ---------------------------------------------------------------------------
    def _ensure_ready(self) -> Simulation:
        """The simulation, and the map between clients and Flower nodes (made once, on first use)."""
        if self.node_of is not None:
            assert self.sim is not None
            return self.sim
        if self._grid is None:
            raise FlamingoError("FlamingoStrategy: run it with strategy.start(grid, ...) (it needs the grid to find the nodes)")
        nodes = self._wait_for_nodes(self._grid)
        if self._engine:
            assert self.sim is not None
            n = self.sim.parts.population.n_clients
            node_of = np.array(nodes[:n], dtype=np.uint64)
        else:
            partitions = self._partitions if self._partitions is not None else self._ask_partitions(self._grid, nodes)
            if partitions is None:  # the ClientApp has no partition query: the nodes in node-id order
                self.log(f"FlamingoStrategy: the ClientApp does not say its nodes' partition-id, so the {len(nodes)} nodes stand for "
                         "flamingo-sim's clients in node-id order (Flower draws node ids at random: which data partition is which "
                         "phone changes from run to run; register_partition_query(app) or partitions= keeps it fixed)")
                partitions = {node: i for i, node in enumerate(nodes)}
            got = sorted(partitions.values())
            if got != list(range(len(got))) or set(partitions) != set(nodes):
                raise FlamingoError(f"FlamingoStrategy: the nodes' partition ids must be 0..{len(nodes) - 1}, one per node; got "
                                    f"{len(got)} ids for {len(nodes)} nodes ({', '.join(map(str, got[:5]))}{', ...' if len(got) > 5 else ''})")
            node_of = np.zeros(len(nodes), dtype=np.uint64)
            for node, pid in partitions.items():
                node_of[pid] = node
            self.sim = self._build_simulation(len(nodes))
        self.node_of = node_of
        self.client_of = {int(node): c for c, node in enumerate(node_of)}
        assert self.sim is not None
        return self.sim

    def _wait_for_nodes(self, grid: Grid, limit_s: float = 120.0) -> list[int]:
        """The connected nodes' ids, sorted: ``num_nodes`` of them, or (unset) as many as hold steady for a second."""
        deadline = time.monotonic() + limit_s
        seen, steady_since = -1, time.monotonic()
        while True:
            nodes = sorted(int(n) for n in grid.get_node_ids())
            now = time.monotonic()
            if self._num_nodes is not None and len(nodes) >= self._num_nodes:
                return nodes
            if len(nodes) != seen:
                seen, steady_since = len(nodes), now
            elif self._num_nodes is None and nodes and now - steady_since >= 1.0:
                return nodes
            if now > deadline:
                want = self._num_nodes if self._num_nodes is not None else "any"
                raise FlamingoError(f"FlamingoStrategy: {len(nodes)} Flower nodes connected after {limit_s:.0f} s, waiting for {want}")
            time.sleep(0.05)

    def _ask_partitions(self, grid: Grid, nodes: list[int]) -> dict[int, int] | None:
        """Each node's partition id, asked once with ``query.flamingo``; None when no node's ClientApp
        has the query (every reply says so: the app was written without :func:`register_partition_query`)."""
        asked = [Message(RecordDict(), dst_node_id=node, message_type=QUERY_TYPE) for node in nodes]
        replies = list(grid.send_and_receive(asked, timeout=self._timeout))
        if replies and all(m.has_error() and NO_QUERY in (m.error.reason or "") for m in replies):
            return None
        partitions = {}
        for m in replies:
            if m.has_error():
                raise FlamingoError(f"FlamingoStrategy: node {m.metadata.src_node_id} did not say its partition-id ({_reason(m)}); "
                                    "call flamingo_sim.integrations.flower.register_partition_query(app) on your ClientApp, or pass partitions=")
            answer: Any = m.content.config_records[FLAMINGO_RECORD]
            partitions[int(m.metadata.src_node_id)] = int(answer["partition-id"])
        if len(partitions) != len(nodes):
            raise FlamingoError(f"FlamingoStrategy: {len(partitions)} of {len(nodes)} nodes answered the partition query within {self._timeout:.0f} s")
        return partitions

    def _build_simulation(self, n_clients: int) -> Simulation:
        """The user app's simulation: the experiment's phones, traces and policy for ``n_clients`` clients."""
        from flamingo_sim.fl.compose import compose
        from flamingo_sim.fl.config import load_experiment

        sized = [*self.overrides, "data.root=null", "data.fallback=proxy", f"data.proxy.n_clients={n_clients}", "fl.device=cpu"]
        cfg = load_experiment(self.experiment, sized)
        self.log(f"FlamingoStrategy: {n_clients} Flower nodes are {n_clients} phones of {cfg.name} ({self.policy}, seed {self.seed})")
        return compose(cfg, self.experiment, self.seed, self.policy, log=self.log, simulation=_ReportedSimulation)

    # -- the run directory (user app) ----------------------------------------------------------------
    def _append(self, record: RoundRecord) -> None:
        self.records.append(record)
        if not self._engine and self.out_dir is not None:
            with atomic_path(self.out_dir / "metrics.parquet") as tmp:
                self.metrics().to_parquet(tmp, index=False)

    def metrics(self) -> pd.DataFrame:
        """The rounds so far as flamingo-sim's metrics table (one row per round)."""
        return pd.DataFrame([r.to_row() for r in self.records])

    def _write_summary(self) -> None:
        if self.out_dir is None or not self.records or self.sim is None:
            return
        from flamingo_sim.fl.metrics.summary import summarize

        cfg = self.sim.parts.cfg
        summary = summarize(self.metrics(), cfg.target_accuracy, baseline=self.sim.policy_name)
        summary = {"experiment": cfg.name, "data": "the Flower app's own", "model": cfg.model, "seeds": [self.sim.seed], "engine": "flower",
                   "model_size_mb": cfg.network.model_size_mb, "inner_strategy": type(self.inner).__name__, **summary}
        write_json(self.out_dir / "summary.json", summary)
