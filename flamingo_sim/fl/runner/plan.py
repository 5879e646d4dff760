"""A run's plan, checked before anything is written: config, engine, device, plug-ins, directory, first seed's parts.

Second on a run's path (after :mod:`~flamingo_sim.fl.runner.run`, or a study): :func:`prepare_run`
finds the experiment and reads it (or takes it as the command line read it): the only time a run
reads it. It pins the run's CPU kernels, checks every setting the engine, the device and the run
directory could refuse, holds every plug-in to its contract (:func:`check_composition`,
:func:`flamingo_sim.fl.plugins.build_checked`) and builds the first seed's parts
(:func:`~flamingo_sim.fl.compose.parts.build_components`), so that a bad config fails in one line
before the run directory is touched. The :class:`PreparedRun` it returns carries
what the run goes on from: the resolved config and its record (``config.yaml``,
:func:`~flamingo_sim.fl.compose.config_record`), the plug-ins its check built, the names and
parameters of the plug-ins (for the summary), and the run's units
(:class:`~flamingo_sim.fl.runner.unit_files.Unit`, each carrying the record), which
:mod:`~flamingo_sim.fl.runner.execute` hands to an executor.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.compose import Prebuilt, build_components, config_record, plugin_record, profile_dirs, resolve_config
from flamingo_sim.fl.compose.assemble import aggregator_takes
from flamingo_sim.fl.compose.checks import check_machine
from flamingo_sim.fl.config import AggregationConfig, ExperimentConfig
from flamingo_sim.fl.plugins import CheckedPlugins, build_checked
from flamingo_sim.fl.runner.engines import EngineOptions, make_engine
from flamingo_sim.fl.runner.execute import unit_threads
from flamingo_sim.fl.runner.kernels import pin_run_kernels
from flamingo_sim.fl.runner.rundir import check_run_dir, default_out_dir
from flamingo_sim.fl.runner.unit_files import RunResults, Unit
from flamingo_sim.resources import find_experiment

__all__ = ["PreparedRun", "prepare_run", "build_first_parts", "check_composition", "check_built", "default_out_dir", "portable_experiment"]


@dataclass
class PreparedRun:
    """A run validated and ready to start or continue: its config and its record, directory, engine and
    plug-ins, what flows forward to its units (a :class:`~flamingo_sim.fl.runner.units.RunPlan`)."""

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
    #: Each policy's display name (:func:`flamingo_sim.fl.plugins.policy_name`) by its name in the experiment.
    names: dict[str, str] = field(default_factory=dict)
    #: What the run directory records of ``cfg`` (``config.yaml``) and its units build from (:func:`~flamingo_sim.fl.compose.config_record`).
    record: dict[str, Any] = field(default_factory=dict)
    #: The plug-ins the simulations are built with and their parameters (:func:`~flamingo_sim.fl.compose.plugin_record`), for the summary.
    plugins: dict[str, Any] = field(default_factory=dict)
    #: The plug-ins the check built, taken by the first units of this process (:class:`~flamingo_sim.fl.compose.Prebuilt`).
    prebuilt: Prebuilt | None = None
    #: Its finished units, each read back once, and its ``metrics.parquet`` written from them.
    results: RunResults = field(init=False)

    def __post_init__(self) -> None:
        self.results = RunResults(self.out, self.cfg)

    def units(self, jobs: int) -> list[Unit]:
        """Its (policy, seed) units in the config's order, each with its share of the cores and the run's record."""
        threads = unit_threads(self.cfg, jobs)
        gpu = str(self.cfg.fl.device).startswith("cuda")
        prefix = f"{self.label} " if self.label else ""
        experiment = portable_experiment(self.experiment)
        fl = self.cfg.fl
        cost = float((fl.rounds or 100) * fl.participants_per_round * fl.local_steps)
        record = json.dumps(self.record or config_record(self.cfg, self.experiment))
        return [Unit(experiment, self.overrides, self.n_seeds, str(self.out), name, seed, f"{prefix}{self.names.get(name, name)} seed {seed}",
                     engine=self.engine, executors=self.executors, threads=threads, gpu=gpu, cost=cost, device=str(fl.device).strip().lower(),
                     config=record)
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
    build: bool = True, config: ExperimentConfig | None = None,
) -> PreparedRun:
    """Everything a config can get wrong, checked before the run directory is touched (``writes=False``:
    a rank of a distributed run that will not write the directory does not check it; ``build=False``:
    the components of its first seed, the last check, are left to the caller (:func:`build_first_parts`,
    or a study's workers)). ``config``: the experiment with ``overrides`` and ``n_seeds`` as the caller
    already read it (the command line's check before torch), else read here: once either way."""
    experiment = find_experiment(experiment)
    runner = make_engine(engine, EngineOptions(executors=executors, experiment=experiment, overrides=tuple(overrides), log=say))
    if resume and not runner.resumable:
        raise ConfigError(f"resume: engine {engine!r} writes no checkpoints, so its runs cannot be resumed; start a new run")
    cfg = resolve_config(experiment, overrides, n_seeds) if config is None else config  # the one time the run reads its experiment
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
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if resume and out_dir is None:
        raise ConfigError("resume: needs out_dir, the run directory to continue")
    if writes:
        check_run_dir(out, cfg, resume)
    checked = check_built(cfg, experiment, engine=engine, resume=resume)
    first_parts = build_components(cfg, experiment, cfg.seeds[0], log=say) if build else None
    return PreparedRun(experiment, tuple(overrides), n_seeds, out, cfg, engine, runner.resumable, first_parts, label, executors, kernels,
                       names=checked.names, record=config_record(cfg, experiment), plugins=plugin_record(cfg, experiment, checked.names),
                       prebuilt=Prebuilt(checked.policies, checked.selector, checked.aggregator))


def build_first_parts(run: PreparedRun, say: Callable[[str], None]) -> None:
    """The check :func:`prepare_run` left out with ``build=False``: its first seed's components, built here and kept."""
    run.first_parts = build_components(run.cfg, run.experiment, run.cfg.seeds[0], log=say)


def check_composition(cfg: ExperimentConfig, experiment: str | Path, *, engine: str, resume: bool = False,
                      policies: Sequence[str] | None = None) -> dict[str, str]:
    """Every part :func:`~flamingo_sim.fl.compose.assemble.compose` would build from ``cfg`` (the plug-ins: :func:`~flamingo_sim.fl.plugins.check_plugins`
    with the ``policies``, default the config's; the tracking), built once and checked against the ``engine``,
    without loading traces or data: a bad setting fails here in one line naming the key. Each policy's display name."""
    return check_built(cfg, experiment, engine=engine, resume=resume, policies=policies).names


def check_built(cfg: ExperimentConfig, experiment: str | Path, *, engine: str, resume: bool = False,
                policies: Sequence[str] | None = None) -> CheckedPlugins:
    """:func:`check_composition`, keeping the plug-ins it built (:func:`~flamingo_sim.fl.plugins.build_checked`)."""
    from flamingo_sim.fl.runner.tracking import check_tracking

    checked = build_checked(cfg, experiment, policies)
    if cfg.aggregation.weighting != AggregationConfig().weighting and not aggregator_takes(cfg, experiment, "weighting"):
        raise ConfigError(f"{experiment}: aggregation.weighting: aggregator {cfg.aggregation.name!r} takes no weighting (its constructor has "
                          "no weighting parameter), so the key would not apply; remove it")
    if engine == "fedscale" and cfg.aggregation != AggregationConfig():
        raise ConfigError(f"{experiment}: aggregation: FedScale runs only the default (fedavg, weighting: samples); run {cfg.aggregation.name!r} natively")
    if cfg.fl.mode == "fedbuff" and (engine != "native" or resume):
        raise ConfigError(f"{experiment}: fl.mode: 'fedbuff' runs natively (not on FedScale or Flower) and writes no checkpoints (no resume)")
    if engine != "native" and cfg.devices.memory == "shrink_batch" and _would_shrink(cfg, experiment):
        raise ConfigError(f"{experiment}: devices.memory: 'shrink_batch' trains each client with its own minibatch natively only, and "
                          f"fl.batch_size {cfg.fl.batch_size} does not fit every phone; use 'drop' with --engine {engine}")
    if engine == "fedscale" and cfg.fl.selection == "oort":
        raise ConfigError(f"{experiment}: fl.selection: 'oort' learns from the training losses of native runs; FedScale does not report them")
    check_tracking(cfg, str(experiment))
    return checked


def _would_shrink(cfg: ExperimentConfig, experiment: str | Path) -> bool:
    """Whether ``devices.memory`` would shrink some phone's minibatch (a 1000-class head: an upper bound on the shipped
    tasks'; the head is a few MB against limits of GiB)."""
    from flamingo_sim.fl.sim.limits import trained_input_size, training_memory_bytes

    catalogue = profile_dirs(cfg, experiment).phones()
    names = list(cfg.phones.mix) if isinstance(cfg.phones.mix, dict) else sorted(catalogue)
    size = trained_input_size(cfg.model) if cfg.devices.input_size is None else cfg.devices.input_size
    fixed, per_sample = training_memory_bytes(cfg.model, size, 1000, calibrated=True)
    need = fixed + cfg.fl.batch_size * per_sample
    memories = [catalogue[n].memory for n in names if n in catalogue]
    limits = [m.limit_bytes(cfg.policy.interference.app_state) * cfg.devices.memory_limit_factor for m in memories if m is not None]
    return any(need > limit for limit in limits)
