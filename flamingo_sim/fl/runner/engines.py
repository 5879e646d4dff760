"""Engines: what runs the rounds of one (policy, seed) :class:`~flamingo_sim.fl.sim.simulation.Simulation`.

- ``"native"``: trains in this process (:meth:`Simulation.step`), resumable from checkpoints;
- ``"fedscale"``: FedScale's aggregator and executors
  (:class:`flamingo_sim.integrations.fedscale.engine.FedScaleEngine`):
  in-process with ``executors=0``, else that many executor processes over gRPC on 127.0.0.1;
- ``"flower"``: Flower's simulation engine on Ray, one virtual SuperNode per client
  (:class:`flamingo_sim.integrations.flower.engine.FlowerEngine`).

The contract is :class:`Engine` (:data:`CONTRACT`); ``native`` is built in, the integrations'
engines sit a layer above this one and register as entry points of group
``flamingo_sim.engines`` in ``pyproject.toml``, as a third-party engine does: no code here names
them. All share every rule of a round (:meth:`Simulation.plan_round` / :meth:`Simulation.finish_round`)
and call the same callbacks (:mod:`flamingo_sim.fl.runner.callbacks`). :func:`make_engine` builds one
by name from :data:`ENGINES`; :func:`register_engine` adds another in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.plugins import Contract, Registry

__all__ = ["Engine", "EngineOptions", "CONTRACT", "ENGINES", "make_engine", "register_engine", "NativeEngine"]


@dataclass(frozen=True)
class EngineOptions:
    """What an engine may need besides the simulation: ``executors`` (FedScale executor
    processes, 0 = in-process), the ``experiment`` file and its ``overrides`` (which those
    processes load), and ``log`` for one-line notes."""

    executors: int = 0  # FedScale's executor processes (0: in-process)
    experiment: str | Path | None = None  # the experiment file (what those processes load)
    overrides: Sequence[str] = ()  # its --set overrides
    log: Callable[[str], None] = lambda _msg: None  # where one-line notes go


class Engine(Protocol):
    """Runs one simulation to its end (or until a callback stops it); built as ``factory(options)``
    with the :class:`EngineOptions`."""

    #: Optional: whether a killed run can continue from its checkpoint (``resume=True``). Default: no.
    resumable: bool = False

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


#: The engine extension point (entry-point group ``flamingo_sim.engines``).
CONTRACT = Contract("engine", Engine, required=("run",), optional=("resumable",))

#: The built-in engine; FedScale's and Flower's are entry points (``pyproject.toml``), as third-party engines are.
ENGINES = Registry(CONTRACT, {"native": NativeEngine})


def register_engine(name: str, factory: Callable[[EngineOptions], Engine]) -> None:
    """Make ``factory`` available as engine ``name`` in this process (replacing one of that name)."""
    ENGINES.builtin[name] = factory


def make_engine(name: str, options: EngineOptions = EngineOptions()) -> Engine:
    """The engine ``name`` (built in, an entry point or ``package.module:Factory``); a
    :class:`~flamingo_sim.errors.ConfigError` naming the known engines if there is none, or
    (``fedscale``, ``flower``) the install command if its extra is missing."""
    if options.executors < 0:
        raise ConfigError(f"executors: expected a count >= 0, got {options.executors}")
    engine: Engine = ENGINES.build(name, None, source="", key="engine", params_key="engine", args=(options,))
    return engine
