"""Running an experiment, top of a run's path: plan it, hold its directory, run its units, summarise.

:func:`run_experiment` (what ``flamingo-sim run`` calls) goes down the path once: the plan
(:func:`~flamingo_sim.fl.runner.plan.prepare_run`: every check, before anything is written), the
run directory's guard (:func:`~flamingo_sim.fl.runner.rundir.run_guard`), the units handed to an
executor (:func:`~flamingo_sim.fl.runner.execute.run_units`, which runs each with
:func:`~flamingo_sim.fl.runner.units.run_unit`: its simulation's rounds on an engine), then the
results (:func:`~flamingo_sim.fl.runner.results.finish_run`). Nothing it calls calls back into it.
Under ``torchrun`` it hands the whole path to :mod:`flamingo_sim.fl.runner.ranks` instead.

The run directory holds:

- ``config.yaml``     the resolved experiment config (every default filled in; a key no plug-in of the run takes
  left out), read from the experiment once: what every unit builds from, wherever it runs;
- ``metrics.parquet`` one row per (policy, seed, round), see :data:`flamingo_sim.fl.metrics.summary.COLUMNS`;
- ``summary.json``    time to target, energy to target, speedup, energy efficiency, clients lost;
- ``inputs.json``     SHA-256 of every input file (traces, profiles, dataset mapping): a resume
  refuses to continue on changed inputs;
- ``checkpoints/``    one ``<policy>-seed<k>.pt`` per run (checksummed, the previous one kept as
  ``.prev`` until the new one is verified; :mod:`flamingo_sim.fl.runner.checkpoint`), written every
  ``checkpoint_every`` rounds and at the end, so that ``resume=True`` continues a killed run and
  produces exactly what an uninterrupted run would (native engine only);
- ``units/``          one result file per (policy, seed) (:mod:`flamingo_sim.fl.runner.unit_files`): the units
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

import sys
from pathlib import Path
from typing import Callable, Sequence

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.estimate import check_length
from flamingo_sim.fl.runner.execute import auto_jobs, check_executor, check_parallel, run_units, warm_up
from flamingo_sim.fl.runner.options import RunOptions
from flamingo_sim.fl.runner.plan import portable_experiment, prepare_run
from flamingo_sim.fl.runner.results import RunResult, finish_run
from flamingo_sim.fl.runner.rundir import resume_command, run_guard

__all__ = ["run_experiment"]


def run_experiment(
    experiment: str | Path,
    options: RunOptions | None = None,
    *,
    callbacks: Sequence[Callback] = (),
    log: Callable[[str], None] | None = None,
    **changes: object,
) -> RunResult:
    """Run (or resume) the experiment in ``experiment`` and return its metrics and summary.

    ``options`` (:class:`~flamingo_sim.fl.runner.options.RunOptions`, default: all defaults) say
    where and how it runs; ``changes`` change single fields of them by name (``out_dir=...``,
    ``jobs=...``; an unknown name is an error naming it). ``callbacks``
    (:mod:`flamingo_sim.fl.runner.callbacks`) are called for every (policy, seed) run after the
    built-in ones (progress bar, checkpoints, metrics file); one whose ``on_round_end`` returns
    True ends that run early. The units run as ``options.execution`` says
    (:mod:`flamingo_sim.fl.runner.execute`); the results are the same as with one job.

    Started by ``torchrun`` (its environment names a process group), every process calls this
    with the same arguments: they join the group (collectives time out after
    ``collective_timeout_s``), rank 0 runs the experiment's units one after another and alone
    writes ``out_dir``, and the others train and evaluate their shares of rank 0's rounds
    (:mod:`flamingo_sim.fl.runner.ranks`, :mod:`flamingo_sim.fl.distributed`).

    The line an interruption or a failure prints says how to continue: ``options.again`` (the command
    line passes the command typed), else a command built from these options.
    """
    opts = (options or RunOptions()).with_fields(**changes)
    say: Callable[[str], None] = log or (lambda msg: print(msg, file=sys.stderr))
    overrides = opts.all_overrides()
    ex = opts.execution
    check_executor(ex.executor, ex.ray_address)
    from flamingo_sim.fl.distributed.world import world_from_env

    world = world_from_env()
    if world is not None:
        if not ex.here:
            raise ConfigError("--jobs/--executor: a run over torchrun's processes trains each (policy, seed) over all of them, "
                              "one after another; leave --jobs at 1")
        from flamingo_sim.fl.runner.ranks import run_distributed

        return run_distributed(world, experiment, opts, callbacks=callbacks, log=log)
    if opts.collective_timeout_s is not None:
        raise ConfigError("--collective-timeout-s: applies to a run over several processes (torchrun, or --nproc N)")
    if ex.jobs != 1:
        warm_up(ex.executor, ex.jobs or 2)  # the pool's parent imports torch while this process validates the config
    run = prepare_run(experiment, overrides, opts.n_seeds, opts.out_dir, resume=opts.resume, engine=opts.engine, executors=opts.executors,
                      say=say, config=opts.config)
    jobs = auto_jobs([run.cfg]) if ex.jobs is None else ex.jobs
    executor, ray_address = ex.executor, ex.ray_address
    if callbacks and (jobs > 1 or executor != "local"):
        raise ConfigError("callbacks run in this process: run with jobs=1 (and the local executor) to use them")
    check_parallel([run], jobs, executor)
    units = run.units(jobs)
    if not opts.resume and run.first_parts is not None:
        check_length(run.cfg, run.first_parts, min(jobs, len(units)), str(run.experiment), opts.confirm, say)
    again = opts.again or resume_command(portable_experiment(run.experiment), run.out, overrides, opts.n_seeds, opts.engine,
                                         opts.executors, ex.jobs)
    fedbuff = run.cfg.fl.mode == "fedbuff"  # FedBuff's runs keep no checkpoints either
    with run_guard(run.out, run.cfg, run.experiment, resume=opts.resume, resumable=run.resumable and not fedbuff,
                   engine="FedBuff" if fedbuff else {"flower": "Flower"}.get(run.engine, "FedScale"), again=again, record=run.record):
        here = jobs == 1 and executor == "local"  # then each unit's own progress bar shows
        failures = run_units([run], units, jobs=jobs, executor=executor, ray_address=ray_address, say=say, callbacks=callbacks,
                             keep_going=False, show=not here, shared_dir=run.out)
        if failures:
            raise FlamingoError(f"{failures[0].describe()}" + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
                                + f"; the other units finished; continue it with: {again}")
        return finish_run(run, say)
