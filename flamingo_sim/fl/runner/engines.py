"""Engines: what runs the rounds of one (policy, seed) :class:`~flamingo_sim.fl.sim.simulation.Simulation`.

- ``"native"``: trains in this process (:meth:`Simulation.step`), resumable from checkpoints;
- ``"fedscale"``: FedScale's aggregator and executors
  (:class:`flamingo_sim.integrations.fedscale.engine.FedScaleEngine`, registered by import
  path and imported only when this engine is made):
  in-process with ``executors=0``, else that many executor processes over gRPC on 127.0.0.1;
- ``"flower"``: Flower's simulation engine on Ray, one virtual SuperNode per client
  (:class:`flamingo_sim.integrations.flower.engine.FlowerEngine`, registered by import path).

All share every rule of a round (:meth:`Simulation.plan_round` / :meth:`Simulation.finish_round`)
and call the same callbacks (:mod:`flamingo_sim.fl.runner.callbacks`). :func:`make_engine` builds one
by name from :data:`ENGINES`; :func:`register_engine` adds another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.plugins import load_object

__all__ = ["Engine", "EngineOptions", "ENGINES", "make_engine", "register_engine", "NativeEngine"]


@dataclass(frozen=True)
class EngineOptions:
    """What an engine may need besides the simulation: ``executors`` (FedScale executor
    processes, 0 = in-process), the ``experiment`` file and its ``overrides`` (which those
    processes load), and ``log`` for one-line notes."""

    executors: int = 0
    experiment: str | Path | None = None
    overrides: Sequence[str] = ()
    log: Callable[[str], None] = lambda _msg: None


class Engine(Protocol):
    """Runs one simulation to its end (or until a callback stops it)."""

    #: Whether a killed run can continue from its checkpoint (``resume=True``).
    resumable: bool

    def run(self, sim: Simulation, callbacks: CallbackList, done: Sequence[RoundRecord], work_dir: Path) -> list[RoundRecord]:
        """Run ``sim`` from its current round; ``done`` are the rounds it already ran (a resumed
        run); returns every record, ``done`` first. ``work_dir`` is this run's own directory."""
        ...


class NativeEngine:
    """Rounds in this process: :meth:`Simulation.step`, then the callbacks."""

    resumable = True

    def __init__(self, options: EngineOptions) -> None:
        if options.executors:
            raise ConfigError(f"executors: {options.executors} executor processes need engine 'fedscale', not 'native'")

    def run(self, sim: Simulation, callbacks: CallbackList, done: Sequence[RoundRecord], work_dir: Path) -> list[RoundRecord]:
        records = list(done)
        callbacks.on_run_begin(sim, records)
        while not sim.is_done():
            callbacks.on_round_begin(sim)
            records.append(sim.step())
            if callbacks.on_round_end(sim, records[-1]):
                break
        callbacks.on_run_end(sim, records)
        return records


#: Engine name -> factory, called with the :class:`EngineOptions`, or the factory's import path
#: ``package.module:Name`` (imported only when that engine is made: integrations sit above this
#: layer and may not be imported from it).
ENGINES: dict[str, Callable[[EngineOptions], Engine] | str] = {
    "native": NativeEngine,
    "fedscale": "flamingo_sim.integrations.fedscale.engine:FedScaleEngine",
    "flower": "flamingo_sim.integrations.flower.engine:FlowerEngine",
}


def register_engine(name: str, factory: Callable[[EngineOptions], Engine]) -> None:
    """Make ``factory`` available as engine ``name`` (replacing one of that name)."""
    ENGINES[name] = factory


def make_engine(name: str, options: EngineOptions = EngineOptions()) -> Engine:
    """The engine registered as ``name``; a :class:`~flamingo_sim.errors.ConfigError` naming the
    known engines if there is none, or (``fedscale``) the install command if its extra is missing."""
    if options.executors < 0:
        raise ConfigError(f"executors: expected a count >= 0, got {options.executors}")
    factory = ENGINES.get(name)
    if factory is None:
        raise ConfigError(f"engine: unknown engine {name!r}; expected one of {', '.join(map(repr, sorted(ENGINES)))}")
    if isinstance(factory, str):
        factory = load_object(factory, "engine", kind="engine", known=ENGINES)
    return factory(options)
