"""One (policy, seed) simulation's rounds through Flower's simulation engine (:func:`run_flower`).

:func:`run_flower` runs a Flower ``ServerApp`` in this process (it holds the runner's
:class:`~flamingo_sim.fl.sim.simulation.Simulation`) and
:data:`~flamingo_sim.integrations.flower.client.experiment_client_app` on Flower's Ray backend,
one virtual SuperNode per flamingo-sim client. The server's strategy is
:class:`~flamingo_sim.integrations.flower.strategy.FlamingoStrategy` around
:class:`ExperimentAggregation`, the experiment's own aggregation (``aggregation:`` fedavg,
fedprox, fedadam, fedyogi: :attr:`Simulation.aggregator`), so that every rule, from who is online
to how updates are averaged, is the native engine's.

Before its first round, Flower's engine starts Ray and one actor per CPU, which takes a while:
on a terminal a line counts the seconds until round 1 ends (:class:`WaitLine`). Warnings about
how flamingo-sim itself calls Ray and Flower, which a user can do nothing about, are dropped
(:func:`quiet_third_party`); Flower's other warnings show once each, coloured only on a terminal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Strategy

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.runner.callbacks import Callback, CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.aggregators import checked_aggregate
from flamingo_sim.integrations.flower import load_flower
from flamingo_sim.integrations.flower.client import EXPERIMENT_KEY, OVERRIDES_KEY, PROX_MU_KEY, experiment_client_app
from flamingo_sim.integrations.flower.strategy import FlamingoStrategy

__all__ = ["ExperimentAggregation", "run_flower", "quiet_third_party", "WaitLine"]

#: Flower's loop needs a round count; a run bounded by ``fl.horizon_h`` alone ends by :meth:`Simulation.is_done`.
ROUND_CAP = 10**9


class ExperimentAggregation(Strategy):
    """The experiment's aggregation (:attr:`Simulation.aggregator`) as a Flower strategy.

    ``configure_train`` sends the global model and what the ClientApp needs to load the experiment
    (its file, the overrides, FedProx's mu); FlamingoStrategy addresses it to the kept clients.
    ``aggregate_train`` stacks the replies in the order given (the settled round's, fastest
    first) and aggregates them as the native engine does, weighted by ``num-examples``.
    There is no federated evaluation: the simulation evaluates the global model centrally.
    """

    weighted_by_key = "num-examples"

    def __init__(self, sim: Simulation, experiment: str | Path, overrides: Sequence[str]) -> None:
        self.sim = sim
        self.experiment = str(Path(experiment).resolve())
        self.overrides = json.dumps(list(overrides))

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid) -> Iterable[Message]:
        config["server-round"] = server_round
        config[EXPERIMENT_KEY] = self.experiment
        config[OVERRIDES_KEY] = self.overrides
        config[PROX_MU_KEY] = float(self.sim.aggregator.proximal_mu)
        node = next(iter(grid.get_node_ids()))  # any: FlamingoStrategy sends the content to the kept clients
        return [Message(RecordDict({"arrays": arrays, "config": config}), dst_node_id=node, message_type=MessageType.TRAIN)]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = [m for m in replies if not m.has_error()]
        if not replies:
            return None, None
        sim = self.sim
        states = [m.content.array_records["arrays"].to_torch_state_dict() for m in replies]
        metrics: list[Any] = [m.content.metric_records["metrics"] for m in replies]
        stacked = {name: torch.stack([s[name] for s in states]).to(sim.device) for name in sim.params}
        n_samples = torch.tensor([float(m["num-examples"]) for m in metrics], dtype=torch.float64)
        state = checked_aggregate(sim.aggregator, sim.params, stacked, n_samples, sim.round)
        losses = torch.tensor([float(m["train_loss"]) for m in metrics], dtype=torch.float32)
        mean = MetricRecord({"train_loss": float(losses.mean()), "num-examples": int(n_samples.sum())})
        return ArrayRecord({name: value.detach().cpu().contiguous() for name, value in state.items()}), mean

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid) -> Iterable[Message]:
        return []

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return None

    def summary(self) -> None:
        pass


@contextlib.contextmanager
def _flower_log_level(level: int) -> Iterator[None]:
    """Flower logs every round at INFO; the runner's progress bar says it already."""
    logger = logging.getLogger("flwr")
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


#: What Flower says about flamingo-sim's own use of it (``run_simulation``), not the user's: dropped.
_NOT_YOURS = ("The `run_simulation` function is deprecated",)


class _FlowerFilter(logging.Filter):
    """Drops Flower's records about flamingo-sim's own calls; lets every other warning through once."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(s in text for s in _NOT_YOURS):
            return False
        if record.levelno >= logging.WARNING:
            if text in self.seen:
                return False
            self.seen.add(text)
        return True


_FLOWER_FILTER = _FlowerFilter()  # one per process: a warning shown for one unit is not shown again for the next


@contextlib.contextmanager
def quiet_third_party(stream: Any = None) -> Iterator[None]:
    """Within: Ray's FutureWarning about accelerator variables (it concerns how this package starts Ray)
    is ignored, Flower's notice that ``run_simulation`` is deprecated is dropped, Flower's other
    warnings show once per process, and Flower's console colours are on only when ``stream``
    (default: stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    tty = bool(getattr(stream, "isatty", lambda: False)())
    logger = logging.getLogger("flwr")
    handlers = [h for h in logger.handlers if hasattr(h, "colored")]
    colours = [h.colored for h in handlers]
    for h in handlers:
        h.colored = tty
    logger.addFilter(_FLOWER_FILTER)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray(\.|$)")
            yield
    finally:
        logger.removeFilter(_FLOWER_FILTER)
        for h, c in zip(handlers, colours):
            h.colored = c


class WaitLine(Callback):
    """On a terminal (and not ``FLAMINGO_SIM_QUIET``), ``what`` and the seconds waited, redrawn every
    ``every_s`` until the first round ends or :meth:`close`; elsewhere nothing (the line said before
    the wait is enough in a log)."""

    def __init__(self, what: str, stream: Any = None, every_s: float = 1.0) -> None:
        self.what, self.every_s = what, every_s
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) and not os.environ.get("FLAMINGO_SIM_QUIET")
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> WaitLine:
        if self.tty:
            self.thread = threading.Thread(target=self._tick, name="flamingo-sim wait line", daemon=True)
            self.thread.start()
        return self

    def _tick(self) -> None:
        t0 = time.monotonic()
        while not self.done.wait(self.every_s):
            self.stream.write(f"\r{self.what}: {time.monotonic() - t0:.0f} s\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.done.is_set():
            return
        self.done.set()
        if self.thread is not None:
            self.thread.join()
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def on_round_end(self, sim: Simulation, record: RoundRecord) -> bool:
        self.close()
        return False


class _RoundClock(Callback):
    """Wall time (``perf_counter``) at the end of every round."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_round_end(self, sim: Simulation, record: RoundRecord) -> bool:
        self.ends.append(time.perf_counter())
        return False


def _start_ray(num_cpus: int) -> None:
    """Start Ray for Flower's backend (which then uses it, and shuts it down at the end), keeping
    this process's SIGINT/SIGTERM handlers: ``ray.init`` replaces SIGTERM's with one that ends the
    process without the host's clean-up. Ray's workers import what this process imports."""
    import ray

    if ray.is_initialized():
        return
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    path = os.pathsep.join([*sys.path, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING, runtime_env={"env_vars": {"PYTHONPATH": path}})
    except Exception as exc:  # Ray raises a bare Exception when its node does not come up (an overloaded machine)
        with contextlib.suppress(Exception):
            ray.shutdown()
        reason = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
        raise FlamingoError(f"Flower's Ray backend did not start: {reason}; try again when the machine is less busy") from None
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)


def run_flower(
    sim: Simulation,
    *,
    experiment: str | Path | None,
    overrides: Sequence[str] = (),
    callbacks: CallbackList | None = None,
    num_cpus: int | None = None,
    log: Callable[[str], None] | None = None,
    stats: dict[str, Any] | None = None,
) -> list[RoundRecord]:
    """Run ``sim`` from its current round to its end through Flower's simulation engine; returns
    the rounds' records. ``num_cpus``: Ray's CPUs, one ClientApp actor each (default: the usable
    cores). ``stats``, if given, receives ``call_wall_s`` and ``round_end_wall_s``
    (``time.perf_counter()`` values)."""
    load_flower()
    from flwr.simulation import run_simulation

    from flamingo_sim.fl.training.device import usable_cores

    if experiment is None:
        raise FlamingoError("the Flower engine needs the experiment file (its ClientApps load it)")
    if sim.is_done():
        return []
    clock = _RoundClock()
    waiting = WaitLine(f"{sim.policy_name} seed {sim.seed}: waiting for Ray and Flower's client actors to start")
    hooks = CallbackList([waiting, *(callbacks.callbacks if callbacks is not None else []), clock])
    strategy = FlamingoStrategy.for_simulation(ExperimentAggregation(sim, experiment, overrides), sim, hooks, log=log)
    rounds = ROUND_CAP if sim.rules.fl.rounds is None else sim.rules.fl.rounds - sim.round
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Any) -> None:
        initial = ArrayRecord({name: value.detach().cpu().contiguous() for name, value in sim.params.items()})
        strategy.start(grid, initial, num_rounds=rounds)

    cpus = int(num_cpus or usable_cores())
    backend: Any = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": cpus}}
    started = time.perf_counter()
    with _flower_log_level(logging.WARNING), quiet_third_party():
        try:
            waiting.start()
            _start_ray(cpus)
            run_simulation(server_app=app, client_app=experiment_client_app, num_supernodes=sim.parts.population.n_clients, backend_config=backend)
        except BaseException:  # Ctrl-C or an error: the ServerApp thread stops waiting for replies,
            strategy.stop.set()  # and Flower's worker threads stop waiting on Ray for the tasks in flight
            import ray

            with contextlib.suppress(Exception):
                ray.shutdown()
            raise
        finally:
            waiting.close()
    if stats is not None:
        stats.update(call_wall_s=started, round_end_wall_s=clock.ends)
    return strategy.records
