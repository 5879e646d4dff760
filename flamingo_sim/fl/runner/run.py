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

import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.estimate import check_length
from flamingo_sim.fl.runner.execute import Failure, StudyPlan, auto_jobs, check_executor, describe, execute, warm_up
from flamingo_sim.fl.runner.kernels import training_on
from flamingo_sim.fl.runner.options import RunOptions
from flamingo_sim.fl.runner.prepare import PreparedRun, check_parallel, portable_experiment, prepare_run
from flamingo_sim.fl.runner.results import RunResult, finish_run, write_partial_metrics
from flamingo_sim.fl.runner.rundir import resume_command, run_guard
from flamingo_sim.fl.runner.units import UNITS_DIR, PartsCache, Unit, run_unit, unit_result


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

        return run_distributed(world, _prepare_rank, lambda prep: _run_rank0(prep, callbacks, say), experiment,
                               collective_timeout_s=opts.collective_timeout_s, log=log, out_dir=opts.out_dir, overrides=overrides,
                               n_seeds=opts.n_seeds, resume=opts.resume, engine=opts.engine, executors=opts.executors)
    if opts.collective_timeout_s is not None:
        raise ConfigError("--collective-timeout-s: applies to a run over several processes (torchrun, or --nproc N)")
    if ex.jobs != 1:
        warm_up(ex.executor, ex.jobs or 2)  # the pool's parent imports torch while this process validates the config
    run = prepare_run(experiment, overrides, opts.n_seeds, opts.out_dir, resume=opts.resume, engine=opts.engine, executors=opts.executors,
                      say=say)
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
                   engine="FedBuff" if fedbuff else {"flower": "Flower"}.get(run.engine, "FedScale"), again=again):
        here = jobs == 1 and executor == "local"  # then each unit's own progress bar shows
        failures = run_units([run], units, jobs=jobs, executor=executor, ray_address=ray_address, say=say, callbacks=callbacks,
                             keep_going=False, show=not here, shared_dir=run.out)
        if failures:
            raise FlamingoError(f"{failures[0].describe()}" + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
                                + f"; the other units finished; continue it with: {again}")
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


def run_units(
    runs: Sequence[PreparedRun], units: Sequence[Unit], *, jobs: int, executor: str, ray_address: str | None,
    say: Callable[[str], None], callbacks: Sequence[Callback] = (), keep_going: bool = True, show: bool = True,
    shared_dir: Path | None = None, comm: Any = None, on_run_done: Callable[[PreparedRun], None] | None = None,
    plan: StudyPlan | None = None,
) -> list[Failure]:
    """Run ``units`` (of ``runs``, whose directories the caller holds); the failures.

    ``on_run_done(run)``: called in this process as soon as the last of a run's units given here
    finished (while other runs' units may still be running), e.g. to write its summary meanwhile.
    ``plan``: the study's phases when these units are one of several (:class:`~flamingo_sim.fl.runner.execute.StudyPlan`).

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
        say(describe(executor, units, jobs))

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
    left = {d: sum(u.run_dir == d for u in units) for d in by_dir}

    def finished(unit: Unit) -> None:
        left[unit.run_dir] -= 1
        if left[unit.run_dir] == 0 and on_run_done is not None:
            on_run_done(by_dir[unit.run_dir])

    try:
        return execute(units, jobs=jobs, say=say, in_process=here, executor=executor, ray_address=ray_address,
                       keep_going=keep_going, show=show, shared_dir=shared_dir, on_finish=finished, plan=plan)
    except BaseException:
        for r in runs:
            try:
                write_partial_metrics(r.out, r.cfg)
            except OSError:  # the disk that stopped the run; what was written is kept
                pass
        raise
    finally:
        cache.put("", 0, None)


__all__ = ["run_experiment", "run_units"]


class Once:
    """A log that says each distinct line once (the trace-horizon warning of every run)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.said: set[str] = set()

    def __call__(self, msg: str) -> None:
        if msg not in self.said:
            self.said.add(msg)
            self.log(msg)
