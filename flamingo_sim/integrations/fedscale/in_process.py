"""The in-process driver (:func:`run_in_process`): FedScale's aggregator and executors in this process.

The executors' gRPC stub is replaced by direct calls to the aggregator's servicer methods and
every party is pumped in turn: no threads, no sockets, deterministic.
"""

from __future__ import annotations

import time
import types
from pathlib import Path
from typing import Any, Callable

from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.integrations.fedscale.classes import fedscale_classes
from flamingo_sim.integrations.fedscale.settings import fedscale_args, rank_args


class _DirectCall:
    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self._fn = fn

    def __call__(self, request: Any) -> Any:
        return self._fn(request, None)

    def future(self, request: Any) -> Any:
        response = self._fn(request, None)
        return types.SimpleNamespace(result=lambda: response, add_done_callback=lambda cb: cb(types.SimpleNamespace(result=lambda: response)))


class _DirectStub:
    """What ``JobServiceStub`` offers, calling the aggregator's servicer methods directly."""

    def __init__(self, aggregator: Any) -> None:
        self.CLIENT_REGISTER = _DirectCall(aggregator.CLIENT_REGISTER)
        self.CLIENT_PING = _DirectCall(aggregator.CLIENT_PING)
        self.CLIENT_EXECUTE_COMPLETION = _DirectCall(aggregator.CLIENT_EXECUTE_COMPLETION)


class _NoChannel:
    def close(self) -> None:
        pass


def run_in_process(
    sim: Any,
    *,
    work_dir: str | Path,
    n_executors: int = 1,
    weighted: bool = True,
    stats: dict[str, Any] | None = None,
    callbacks: CallbackList | None = None,
) -> list[RoundRecord]:
    """Run ``sim`` (a fresh or resumed :class:`~flamingo_sim.fl.sim.simulation.Simulation`) to its end on
    FedScale's aggregator and ``n_executors`` executors in this process; returns the rounds' records.

    Deterministic: the executors are pumped in turn, no threads, no sockets. ``stats``, if
    given, receives ``start_wall_s`` and ``round_end_wall_s`` (``time.perf_counter()`` values);
    ``callbacks`` are called around each round (:mod:`flamingo_sim.fl.runner.callbacks`).
    """
    start = time.perf_counter()
    cls = fedscale_classes()
    args = fedscale_args(sim.parts.cfg, log_dir=work_dir, num_executors=n_executors)
    aggregator = cls.FlamingoAggregator(args, sim, n_executors=n_executors, weighted=weighted, callbacks=callbacks)
    executors = []
    for rank in range(1, n_executors + 1):
        exe = cls.FlamingoExecutor(rank_args(args, rank), sim.parts.dataset, sim.parts.model)
        exe.aggregator_communicator.stub = _DirectStub(aggregator)
        exe.aggregator_communicator.channel = _NoChannel()
        executors.append(exe)
    for exe in executors:
        exe.client_register()
    idle = 0
    while not all(e.received_stop_request for e in executors):
        busy = aggregator.poll_once()
        for exe in executors:
            busy = exe.poll_once() or busy
        idle = 0 if busy else idle + 1
        if idle > 3:  # everything is synchronous here: a pass without progress is a stall
            raise RuntimeError(f"FedScale in-process run stalled in round {sim.round}")
    aggregator.stop()
    if aggregator.log_writer is not None:
        aggregator.log_writer.close()
    if stats is not None:
        stats.update(start_wall_s=start, round_end_wall_s=list(aggregator.round_end_wall_s))
    return aggregator.records
