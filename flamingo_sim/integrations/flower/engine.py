"""The ``flower`` engine: one (policy, seed) simulation's rounds through Flower's simulation engine.

Registered as an entry point of group ``flamingo_sim.engines`` (``pyproject.toml``), so the runner
never names or imports this package; it is imported when ``--engine flower`` is asked for, and imports Flower
(:mod:`flamingo_sim.integrations.flower.simulation`) only once :func:`load_flower` found it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.runner.engines import EngineOptions
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.integrations.flower import load_flower

__all__ = ["FlowerEngine"]


class FlowerEngine:
    """Rounds through Flower's simulation engine (fails here, with the install command, if the
    ``flower`` extra is missing). Writes no checkpoints."""

    resumable = False

    def __init__(self, options: EngineOptions) -> None:
        load_flower()
        if options.executors:
            raise ConfigError(f"executors: {options.executors} executor processes need engine 'fedscale', not 'flower' (Flower runs its ClientApps on Ray)")
        self.options = options

    def run(self, sim: Simulation, callbacks: CallbackList, done: Sequence[RoundRecord], work_dir: Path) -> list[RoundRecord]:
        opt = self.options
        opt.log(f"{sim.policy_name} seed {sim.seed}: Flower engine, {sim.parts.population.n_clients} virtual SuperNodes on Ray; "
                "starting Ray and its client actors first (round 1 waits for them)")
        from flamingo_sim.integrations.flower.simulation import run_flower

        records = list(done)
        callbacks.on_run_begin(sim, records)
        records += run_flower(sim, experiment=opt.experiment, overrides=opt.overrides, callbacks=callbacks, log=opt.log)
        callbacks.on_run_end(sim, records)
        return records
