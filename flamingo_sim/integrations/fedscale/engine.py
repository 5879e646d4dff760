"""The ``fedscale`` engine: one (policy, seed) simulation's rounds on FedScale's aggregator and executors.

Registered as an entry point of group ``flamingo_sim.engines`` (``pyproject.toml``), so the runner
never names or imports this package; it is imported when ``--engine fedscale`` is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.runner.engines import EngineOptions
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.integrations.fedscale import load_fedscale, run_fedscale

__all__ = ["FedScaleEngine"]


class FedScaleEngine:
    """Rounds on FedScale's aggregator and executors (fails here, with the install command,
    if the ``fedscale`` extra is missing)."""

    resumable = False

    def __init__(self, options: EngineOptions) -> None:
        load_fedscale()
        self.options = options

    def run(self, sim: Simulation, callbacks: CallbackList, done: Sequence[RoundRecord], work_dir: Path) -> list[RoundRecord]:
        opt = self.options
        opt.log(f"{sim.policy_name} seed {sim.seed}: FedScale engine, " + (f"{opt.executors} executor processes over gRPC" if opt.executors else "in-process"))
        records = list(done)
        callbacks.on_run_begin(sim, records)
        records += run_fedscale(sim, experiment=opt.experiment, work_dir=work_dir, executors=opt.executors, overrides=opt.overrides, callbacks=callbacks)
        callbacks.on_run_end(sim, records)
        return records
