"""Running an experiment: build the parts, run every (policy, seed), checkpoint, summarise.

The run directory holds:

- ``config.yaml``     the resolved experiment config (every default filled in);
- ``metrics.parquet`` one row per (policy, seed, round), see :data:`flamingo_sim.fl.metrics.summary.COLUMNS`;
- ``summary.json``    time to target, energy to target, speedup, energy efficiency, clients lost;
- ``inputs.json``     SHA-256 of every input file (traces, profiles, dataset mapping): a resume
  refuses to continue on changed inputs;
- ``checkpoints/``    one ``<policy>-seed<k>.pt`` per run (checksummed, the previous one kept as
  ``.prev`` until the new one is verified; :mod:`flamingo_sim.fl.runner.checkpoint`), written every
  ``checkpoint_every`` rounds and at the end, so that ``resume=True`` continues a killed run and
  produces exactly what an uninterrupted run would (native engine only);
- ``units/``          one result file per (policy, seed) (:mod:`flamingo_sim.fl.runner.units`): the units
  ``metrics.parquet`` and ``summary.json`` are gathered from, in the config's order, so that the
  (policy, seed) runs can run in parallel (``jobs``, :mod:`flamingo_sim.fl.runner.execute`) with
  the same results;
- ``.lock``           held by the one process writing the directory (:mod:`flamingo_sim.fl.runner.rundir`);
- ``fedscale/``       with ``engine="fedscale"``: FedScale's logs and the executors' output,
  one ``<policy>-seed<k>/`` per run.

Engines (:mod:`flamingo_sim.fl.runner.engines`, a registry): ``"native"`` trains in this process
(:meth:`Simulation.step`); ``"fedscale"`` runs each (policy, seed) on FedScale's aggregator and
executors (:mod:`flamingo_sim.integrations.fedscale`): in-process with ``executors=0``, else
with that many executor processes over gRPC on 127.0.0.1; ``"flower"`` runs each through
Flower's simulation engine on Ray (:mod:`flamingo_sim.integrations.flower`). All write the same
metrics and summary. The progress bar, checkpoints and the metrics file are callbacks of the run loop
(:mod:`flamingo_sim.fl.runner.callbacks`), beside any the caller passes.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.config import AggregationConfig, ExperimentConfig, load_experiment
from flamingo_sim.fl.metrics.summary import format_summary, summarize
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.engines import EngineOptions, make_engine
from flamingo_sim.fl.runner.execute import Failure, auto_jobs, check_executor, execute, unit_threads
from flamingo_sim.fl.runner.rundir import check_run_dir, run_guard
from flamingo_sim.fl.runner.tracking import check_tracking
from flamingo_sim.fl.runner.units import (
    UNITS_DIR,
    Once,
    PartsCache,
    RunResult,
    Unit,
    gather,
    pin_run_kernels,
    resolve_config,
    run_unit,
    training_on,
    unit_result,
    write_metrics,
    write_partial_metrics,
)
from flamingo_sim.fl.strategy.aggregators import make_aggregator
from flamingo_sim.fl.strategy.selection import make_selector
from flamingo_sim.io import write_json
from flamingo_sim.resources import find_experiment


def default_out_dir(cfg: ExperimentConfig) -> Path:
    return Path("runs") / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_experiment(
    experiment: str | Path,
    *,
    out_dir: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    n_seeds: int | None = None,
    resume: bool = False,
    log: Callable[[str], None] | None = None,
    engine: str = "native",
    executors: int = 0,
    callbacks: Sequence[Callback] = (),
    device: str | None = None,
    threads: int | None = None,
    jobs: int | None = 1,
    executor: str = "local",
    ray_address: str | None = None,
    collective_timeout_s: float | None = None,
) -> RunResult:
    """Run (or resume) the experiment in ``experiment`` and return its metrics and summary.

    ``callbacks`` (:mod:`flamingo_sim.fl.runner.callbacks`) are called for every (policy, seed) run
    after the built-in ones (progress bar, checkpoints, metrics file); one whose
    ``on_round_end`` returns True ends that run early. ``device`` and ``threads`` (the CLI's
    ``--device``/``--threads``) override ``fl.device`` and ``fl.threads``, like ``--set`` would.
    ``jobs`` (None: as many as the cores allow) and ``executor`` run the (policy, seed) units in
    parallel (:mod:`flamingo_sim.fl.runner.execute`); the results are the same as with one job.

    Started by ``torchrun`` (its environment names a process group), every process calls this
    with the same arguments: they join the group (collectives time out after
    ``collective_timeout_s``), rank 0 runs the experiment's units one after another and alone
    writes ``out_dir``, and the others train and evaluate their shares of rank 0's rounds
    (:mod:`flamingo_sim.fl.runner.ranks`, :mod:`flamingo_sim.fl.distributed`).
    """
    say: Callable[[str], None] = log or (lambda msg: print(msg, file=sys.stderr))
    overrides = list(overrides)
    if device is not None:
        overrides.append(f"fl.device={device}")
    if threads is not None:
        overrides.append(f"fl.threads={threads}")
    check_executor(executor)
    from flamingo_sim.fl.distributed.world import world_from_env

    world = world_from_env()
    if world is not None:
        if jobs != 1 or executor != "local":
            raise ConfigError("--jobs/--executor: a run over torchrun's processes trains each (policy, seed) over all of them, "
                              "one after another; leave --jobs at 1")
        from flamingo_sim.fl.runner.ranks import run_distributed

        return run_distributed(world, _prepare_rank, lambda prep: _run_rank0(prep, callbacks, say), experiment,
                               collective_timeout_s=collective_timeout_s, log=log, out_dir=out_dir, overrides=overrides,
                               n_seeds=n_seeds, resume=resume, engine=engine, executors=executors)
    if collective_timeout_s is not None:
        raise ConfigError("--collective-timeout-s: applies to a run over several processes (torchrun, or --nproc N)")
    run = prepare_run(experiment, overrides, n_seeds, out_dir, resume=resume, engine=engine, executors=executors, say=say)
    jobs = auto_jobs([run.cfg]) if jobs is None else jobs
    if callbacks and (jobs > 1 or executor != "local"):
        raise ConfigError("callbacks run in this process: run with jobs=1 (and the local executor) to use them")
    check_parallel([run], jobs, executor)
    units = run.units(jobs)
    with run_guard(run.out, run.cfg, run.experiment, resume=resume, resumable=run.resumable,
                   engine={"flower": "Flower"}.get(run.engine, "FedScale")):
        here = jobs == 1 and executor == "local"  # then each unit's own progress bar shows
        failures = run_units([run], units, jobs=jobs, executor=executor, ray_address=ray_address, say=say, callbacks=callbacks,
                             keep_going=False, show=not here, shared_dir=run.out)
        if failures:
            raise FlamingoError(f"{failures[0].describe()}" + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
                                + f"; the other units finished; continue it with: flamingo-sim run {run.experiment} --out {run.out} "
                                "--resume (and the same --set options)")
        return finish_run(run, say)


def _prepare_rank(experiment: str | Path, *, log: Callable[[str], None] | None, writes: bool, out_dir: str | Path | None,
                  overrides: Sequence[str], n_seeds: int | None, resume: bool, engine: str, executors: int) -> PreparedRun:
    """One rank's :func:`prepare_run` (``writes=False``: a rank that will not write the run directory does not check it)."""
    say: Callable[[str], None] = log or (lambda msg: print(msg, file=sys.stderr))
    return prepare_run(experiment, overrides, n_seeds, out_dir, resume=resume, engine=engine, executors=executors, say=say, writes=writes)


def _run_rank0(run: PreparedRun, callbacks: Sequence[Callback], say: Callable[[str], None]) -> RunResult:
    """Rank 0 of a distributed run, holding the run directory: every unit in this process, each
    simulation's step 5 split over the group; the units already finished (a resumed run) are
    announced first, so that the other ranks skip them too (:func:`~flamingo_sim.fl.runner.ranks.serve_all`)."""
    from flamingo_sim.fl.runner.ranks import announce_pending, describe_traffic

    units = run.units(1)
    announce_pending(run.comm, [unit_result(run.out / UNITS_DIR, u.policy, u.seed) is None for u in units])
    failures = run_units([run], units, jobs=1, executor="local", ray_address=None, say=say, callbacks=callbacks,
                         keep_going=False, show=False, shared_dir=run.out, comm=run.comm)
    if failures:
        raise FlamingoError(f"{failures[0].describe()}; continue it with: the same command and --resume")
    result = finish_run(run, say)
    say(describe_traffic(run.comm))
    return result


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
                     engine=self.engine, executors=self.executors, threads=threads, gpu=gpu, cost=cost)
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
) -> PreparedRun:
    """Everything a config can get wrong, checked before the run directory is touched (``writes=False``:
    a rank of a distributed run that will not write the directory does not check it)."""
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
    if cfg.fl.train_mode == "threads" and where.type != "cpu":
        raise ConfigError(f"{experiment}: fl.train_mode: 'threads' trains on the CPU's cores, but fl.device is {cfg.fl.device!r} ({where}); "
                          "use streams (or auto) on a GPU, or --device cpu")
    cfg = resolve_config(experiment, overrides, n_seeds)
    out = Path(out_dir) if out_dir is not None else default_out_dir(cfg)
    if resume and out_dir is None:
        raise ConfigError("resume: needs out_dir, the run directory to continue")
    if writes:
        check_run_dir(out, cfg, resume)
    from flamingo_sim.fl.runner.setup import build_components, make_policy

    for name in cfg.policies:
        make_policy(name, cfg)
    _check_toolkit(cfg, experiment, engine, resume)
    first_parts = build_components(cfg, experiment, cfg.seeds[0], log=say)
    return PreparedRun(experiment, tuple(overrides), n_seeds, out, cfg, engine, runner.resumable, first_parts, label, executors, kernels)


def run_units(
    runs: Sequence[PreparedRun], units: Sequence[Unit], *, jobs: int, executor: str, ray_address: str | None,
    say: Callable[[str], None], callbacks: Sequence[Callback] = (), keep_going: bool = True, show: bool = True,
    shared_dir: Path | None = None, comm: Any = None,
) -> list[Failure]:
    """Run ``units`` (of ``runs``, whose directories the caller holds); the failures.

    With one local job they run in this process, the policies of a seed sharing its components
    (the runs' first seeds are already built); else as :func:`~flamingo_sim.fl.runner.execute.execute` says.
    An interruption or an error leaves each run's ``metrics.parquet`` with the rounds written so far.
    """
    check_parallel(runs, jobs, executor)
    by_dir = {str(r.out): r for r in runs}
    cache = PartsCache()
    logs = {d: Once(say) for d in by_dir}
    if jobs == 1 and executor == "local":
        line = training_on(runs[0].cfg, runs[0].kernels[0])
        if comm is not None:
            from flamingo_sim.fl.runner.ranks import describe_world

            line = describe_world(comm, line)
        from flamingo_sim.fl.runner.ranks import distribute
        say(line)
        if runs[0].kernels[1]:
            say(runs[0].kernels[1])
    else:
        threads = max(u.threads for u in units) if units else 1
        say(f"{len(units)} units, {jobs} at a time ({'Ray' if executor == 'ray' else 'processes'}, {threads} CPU thread(s) each)")

    def here(unit: Unit) -> None:
        run = by_dir[unit.run_dir]
        if cache.key is None or cache.key[0] != unit.run_dir:
            if run.first_parts is not None:
                cache.put(unit.run_dir, run.cfg.seeds[0], run.first_parts)
                run.first_parts = None  # built once, used once: free it after its seed
        run_unit(unit, say=logs[unit.run_dir], cache=cache, callbacks=callbacks, after_write=lambda: write_partial_metrics(run.out, run.cfg),
                 split=None if comm is None else (lambda sim: distribute(sim, comm, say)))

    if jobs > 1 or executor != "local":
        for r in runs:
            r.first_parts = None  # validated; the workers build their own
    try:
        return execute(units, jobs=jobs, say=say, in_process=here, executor=executor, ray_address=ray_address,
                       keep_going=keep_going, show=show, shared_dir=shared_dir)
    except BaseException:
        for r in runs:
            try:
                write_partial_metrics(r.out, r.cfg)
            except OSError:  # the disk that stopped the run; what was written is kept
                pass
        raise
    finally:
        cache.put("", 0, None)


def check_parallel(runs: Sequence[PreparedRun], jobs: int, executor: str) -> None:
    """Before any output: units run in parallel only on the native engine (FedScale runs its own executors)."""
    if (jobs > 1 or executor != "local") and any(r.engine != "native" for r in runs):
        raise ConfigError("--jobs/--executor run the native engine's units in parallel; FedScale runs its own executors (--executors)")


def finish_run(run: PreparedRun, say: Callable[[str], None], *, print_summary: bool = True) -> RunResult:
    """Gather a run's finished units into ``metrics.parquet`` and ``summary.json``."""
    cfg, out = run.cfg, run.out
    metrics, results = gather(out, cfg)
    summary = summarize(metrics, cfg.target_accuracy, baseline=cfg.policies[0], rule=cfg.target)
    for res in results:
        summary["policies"][res["policy"]]["per_seed"][str(res["seed"])]["participation_histogram"] = res["participation_histogram"]
    first, last = results[0], results[-1]
    summary = {"experiment": cfg.name, "data": last["data"], "model": cfg.model, "seeds": cfg.seeds, "engine": run.engine,
               "cpu_kernels": run.kernels[0],
               "model_size_mb": first["model_size_mb"], "model_size_source": first["model_size_source"], **summary}
    if first.get("phones_from_traces") is not None:  # phones.mix: from_traces
        summary["phones_from_traces"] = first["phones_from_traces"]
    write_metrics(out, metrics)
    write_json(out / "summary.json", summary)
    if print_summary:
        print(format_summary(summary))
    say(f"run directory: {out}")
    return RunResult(out, metrics, summary)


def _check_toolkit(cfg: ExperimentConfig, experiment: str | Path, engine: str, resume: bool) -> None:
    """The aggregation, selection, FedBuff and tracking settings: built once, checked against the engine."""
    if engine == "fedscale" and cfg.aggregation != AggregationConfig():
        raise ConfigError(f"{experiment}: aggregation: FedScale runs only the default (fedavg, weighting: samples); run {cfg.aggregation.name!r} natively")
    if cfg.fl.mode == "fedbuff" and (engine != "native" or resume):
        raise ConfigError(f"{experiment}: fl.mode: 'fedbuff' runs natively (not on FedScale or Flower) and writes no checkpoints (no resume)")
    if engine != "native" and cfg.devices.memory == "shrink_batch":
        raise ConfigError(f"{experiment}: devices.memory: 'shrink_batch' trains each client with its own minibatch natively only; "
                          f"use 'drop' with --engine {engine}")
    if engine == "fedscale" and cfg.fl.selection == "oort":
        raise ConfigError(f"{experiment}: fl.selection: 'oort' learns from the training losses of native runs; FedScale does not report them")
    make_aggregator(cfg.aggregation, source=f"{experiment}: aggregation")
    make_selector(cfg.fl.selection, cfg.selector.parameters(), source=f"{experiment}: fl.selection")
    check_tracking(cfg, str(experiment))


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a run directory's metrics table and summary (for reports and notebooks)."""
    run_dir = Path(run_dir)
    metrics_path, summary_path = run_dir / "metrics.parquet", run_dir / "summary.json"
    if not metrics_path.is_file():
        raise FlamingoError(f"{run_dir}: no metrics.parquet - not a flamingo-sim run directory")
    import json

    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    return pd.read_parquet(metrics_path), summary


__all__ = ["run_experiment", "load_run", "RunResult", "PreparedRun", "prepare_run", "run_units", "check_parallel", "finish_run"]
