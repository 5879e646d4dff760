"""A run checked before anything is written: config, engine, device, directory and the first seed's parts.

:func:`prepare_run` finds the experiment, pins the run's CPU kernels, checks every setting the
engine, the device and the run directory could refuse, and builds the first seed's parts
(:func:`~flamingo_sim.fl.runner.compose.build_components`), so that a bad config fails in one
line before the run directory is touched. The :class:`PreparedRun` it returns lists the run's
units (:mod:`flamingo_sim.fl.runner.units`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig, load_experiment
from flamingo_sim.fl.runner.checks import check_machine
from flamingo_sim.fl.runner.compose import resolve_config
from flamingo_sim.fl.runner.engines import EngineOptions, make_engine
from flamingo_sim.fl.runner.execute import unit_threads
from flamingo_sim.fl.runner.kernels import pin_run_kernels
from flamingo_sim.fl.runner.rundir import check_run_dir, default_out_dir
from flamingo_sim.fl.runner.units import Unit
from flamingo_sim.resources import find_experiment

__all__ = ["PreparedRun", "prepare_run", "build_first_parts", "check_parallel", "default_out_dir", "portable_experiment"]


@dataclass
class PreparedRun:
    """A run validated and ready to start or continue: its config, directory and engine."""

    experiment: Path
    overrides: tuple[str, ...]
    n_seeds: int | None
    out: Path
    cfg: ExperimentConfig
    engine: str
    resumable: bool
    first_parts: Any
    label: str = ""
    executors: int = 0
    #: The CPU kernels this process runs and, where they could not be pinned as asked, a line saying so.
    kernels: tuple[str, str | None] = ("", None)
    #: A distributed run's collectives (:class:`flamingo_sim.fl.distributed.world.Comm`), set on every rank; else None.
    comm: Any = None

    def units(self, jobs: int) -> list[Unit]:
        """Its (policy, seed) units in the config's order, each with its share of the cores."""
        threads = unit_threads(self.cfg, jobs)
        gpu = str(self.cfg.fl.device).startswith("cuda")
        prefix = f"{self.label} " if self.label else ""
        experiment = portable_experiment(self.experiment)
        fl = self.cfg.fl
        cost = float((fl.rounds or 100) * fl.participants_per_round * fl.local_steps)
        return [Unit(experiment, self.overrides, self.n_seeds, str(self.out), name, seed, f"{prefix}{name} seed {seed}",
                     engine=self.engine, executors=self.executors, threads=threads, gpu=gpu, cost=cost, device=str(fl.device).strip().lower())
                for seed in self.cfg.seeds for name in self.cfg.policies]


def portable_experiment(experiment: Path) -> str:
    """How a unit names its experiment in another process or on another node: a shipped one by
    its name (the package may be installed elsewhere there), any other by its absolute path."""
    from flamingo_sim.resources import shipped

    path = experiment.resolve()
    if path.suffix == ".yaml" and path.parent == shipped("experiments").resolve():
        return path.stem
    return str(path)


def prepare_run(
    experiment: str | Path, overrides: Sequence[str], n_seeds: int | None, out_dir: str | Path | None, *, resume: bool,
    engine: str = "native", executors: int = 0, say: Callable[[str], None], label: str = "", writes: bool = True,
    build: bool = True,
) -> PreparedRun:
    """Everything a config can get wrong, checked before the run directory is touched (``writes=False``:
    a rank of a distributed run that will not write the directory does not check it; ``build=False``:
    the components of its first seed, the last check, are left to the caller (:func:`build_first_parts`,
    or a study's workers))."""
    experiment = find_experiment(experiment)
    runner = make_engine(engine, EngineOptions(executors=executors, experiment=experiment, overrides=tuple(overrides), log=say))
    if resume and not runner.resumable:
        raise ConfigError(f"resume: engine {engine!r} writes no checkpoints, so its runs cannot be resumed; start a new run")
    cfg = load_experiment(experiment, list(overrides))
    from flamingo_sim.fl.training.device import resolve_device

    # before torch runs its first kernel (the model's initialisation): it fixes the kernels for the process
    kernels = pin_run_kernels(cfg)
    # every process the run starts (a --jobs worker, a local Ray task) runs the kernels this one runs,
    # also where they could not be pinned here: the results do not depend on --jobs
    os.environ["ATEN_CPU_CAPABILITY"] = kernels[0].lower()

    where = resolve_device(cfg.fl.device)  # a GPU asked for and absent fails here, before anything is written
    check_machine(cfg, where, str(experiment))
    if cfg.fl.train_mode == "threads" and where.type != "cpu":
        raise ConfigError(f"{experiment}: fl.train_mode: 'threads' trains on the CPU's cores, but fl.device is {cfg.fl.device!r} ({where}); "
                          "use streams (or auto) on a GPU, or --device cpu")
    cfg = resolve_config(experiment, overrides, n_seeds)
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if resume and out_dir is None:
        raise ConfigError("resume: needs out_dir, the run directory to continue")
    if writes:
        check_run_dir(out, cfg, resume)
    from flamingo_sim.fl.runner.compose import build_components, check_composition

    check_composition(cfg, experiment, engine=engine, resume=resume)
    first_parts = build_components(cfg, experiment, cfg.seeds[0], log=say) if build else None
    return PreparedRun(experiment, tuple(overrides), n_seeds, out, cfg, engine, runner.resumable, first_parts, label, executors, kernels)


def build_first_parts(run: PreparedRun, say: Callable[[str], None]) -> None:
    """The check :func:`prepare_run` left out with ``build=False``: its first seed's components, built here and kept."""
    from flamingo_sim.fl.runner.compose import build_components

    run.first_parts = build_components(run.cfg, run.experiment, run.cfg.seeds[0], log=say)


def check_parallel(runs: Sequence[PreparedRun], jobs: int, executor: str) -> None:
    """Before any output: units run in parallel only on the native engine (FedScale runs its own executors)."""
    if (jobs > 1 or executor != "local") and any(r.engine != "native" for r in runs):
        raise ConfigError("--jobs/--executor run the native engine's units in parallel; FedScale runs its own executors (--executors)")
