"""A run's (or a study's) units handed to an executor, and each unit's share of the cores.

Third on a run's path, after :mod:`~flamingo_sim.fl.runner.plan`: :func:`run_units` says where
the units train, sets up how this process runs the ones it runs itself
(:class:`~flamingo_sim.fl.runner.units.InProcess`: the components a seed's policies share, the
caller's callbacks, the metrics refreshed as units write) and calls :func:`execute`, which hands
the units not finished yet to the executor named by ``--executor``
(:mod:`flamingo_sim.fl.runner.executors`: ``local``, in this process with ``jobs=1`` or on a
pool of long-lived worker processes with ``jobs=N``; ``ray``, each unit a Ray task; or a
plug-in), with the :class:`~flamingo_sim.fl.runner.executors.progress.Progress` they all
report to. The executor runs each unit with :func:`~flamingo_sim.fl.runner.units.run_unit`.
:func:`unit_threads` and :func:`auto_jobs` share the cores out.

Results do not depend on the executor or on the order in which units finish: each unit's
randomness is its own (per seed and round), it builds from the run's record (never the experiment
file), it writes only its own files, and this process reads each back once as it finishes into its
run's :class:`~flamingo_sim.fl.runner.unit_files.RunResults`, which writes ``metrics.parquet`` in the
config's order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.executors import EXECUTORS, Dispatch, make_executor
from flamingo_sim.fl.runner.executors.progress import Failure, Progress, StudyPlan
from flamingo_sim.fl.runner.executors.ray_cluster import RAY_HINT
from flamingo_sim.fl.runner.kernels import training_on
from flamingo_sim.fl.runner.unit_files import UNITS_DIR, Unit, unit_result, write_partial_metrics
from flamingo_sim.fl.runner.units import InProcess, RunPlan

#: A run as :func:`run_units` takes it (:class:`~flamingo_sim.fl.runner.plan.PreparedRun`, a layer above, is one).
R = TypeVar("R", bound=RunPlan)

__all__ = ["EXECUTORS", "Failure", "Progress", "StudyPlan", "check_executor", "check_parallel", "execute", "run_units", "unit_threads", "auto_jobs",
           "RAY_HINT", "warm_up"]


def unit_threads(cfg: Any, jobs: int) -> int:
    """The CPU threads of one unit when ``jobs`` run at once: ``fl.threads``, else
    ``OMP_NUM_THREADS``, else 1 for the proxy task, else the usable cores shared out."""
    from flamingo_sim.fl.training.device import usable_cores

    if cfg.fl.threads is not None:
        return int(cfg.fl.threads)
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return 1 if cfg.data.root is None else max(1, usable_cores() // jobs)


def auto_jobs(cfgs: Sequence[Any]) -> int:
    """``--jobs auto``: the usable cores divided by the largest run's threads (at least 1)."""
    from flamingo_sim.fl.training.device import usable_cores

    return max(1, usable_cores() // max(unit_threads(cfg, 1) for cfg in cfgs))


def check_executor(executor: str, ray_address: str | None = None) -> None:
    """Before any work: ``executor`` is known and can run here (Ray installed when it is asked for),
    and the Ray cluster at ``ray_address`` (or ``RAY_ADDRESS``) answers on its port."""
    make_executor(executor)
    if executor == "ray":
        from flamingo_sim.fl.runner.executors.ray_cluster import check_ray_address

        check_ray_address(ray_address or os.environ.get("RAY_ADDRESS") or None)


def check_parallel(runs: Sequence[RunPlan], jobs: int, executor: str) -> None:
    """Before any output: units run in parallel only on the native engine (FedScale runs its own executors)."""
    if (jobs > 1 or executor != "local") and any(r.engine != "native" for r in runs):
        raise ConfigError("--jobs/--executor run the native engine's units in parallel; FedScale runs its own executors (--executors)")


def warm_up(executor: str, jobs: int) -> None:
    """Let the executor start what takes time (the pool's preloaded parent) while the caller validates its configs."""
    make_executor(executor).warm_up(jobs)


def run_units(
    runs: Sequence[R], units: Sequence[Unit], *, jobs: int, executor: str, ray_address: str | None,
    say: Callable[[str], None], callbacks: Sequence[Callback] = (), keep_going: bool = True, show: bool = True,
    shared_dir: Path | None = None, comm: Any = None, on_run_done: Callable[[R], None] | None = None,
    plan: StudyPlan | None = None,
) -> list[Failure]:
    """Run ``units`` (of ``runs``, whose directories the caller holds); the failures.

    ``on_run_done(run)``: called in this process as soon as the last of a run's units given here
    finished (while other runs' units may still be running), e.g. to write its summary meanwhile.
    ``plan``: the study's phases when these units are one of several (:class:`~flamingo_sim.fl.runner.executors.progress.StudyPlan`).

    With one local job they run in this process on their runs' plans (configs, the plug-ins their
    checks built, the runs' first seeds already built), the policies of a seed sharing its
    components; else as :func:`execute` says. ``comm``: rank 0 of a distributed run. Each unit that
    finishes is read back once into its run's results, and its run's ``metrics.parquet`` written once;
    an interruption or an error leaves each run's ``metrics.parquet`` with the rounds written so far.
    """
    check_parallel(runs, jobs, executor)
    by_dir = {str(r.out): r for r in runs}
    here = InProcess(say, callbacks=callbacks, runs={d: r for d, r in by_dir.items()}, comm=comm)
    if jobs == 1 and executor == "local":
        line = training_on(runs[0].cfg, runs[0].kernels[0])
        if comm is not None:
            from flamingo_sim.fl.distributed.world import describe_world

            line = describe_world(comm, line)
        say(line)
        if runs[0].kernels[1]:
            say(runs[0].kernels[1])
        for r in runs:
            here.cache.offer(str(r.out), r.cfg.seeds[0], r.first_parts)
    else:
        say(describe(executor, units, jobs))
        for r in runs:
            r.prebuilt = None  # the workers build their own
    for r in runs:
        r.first_parts = None  # offered to this process's units, or built by the workers themselves
    left = {d: sum(u.run_dir == d for u in units) for d in by_dir}

    def finished(unit: Unit) -> None:
        results = by_dir[unit.run_dir].results
        results.take(unit.policy, unit.seed)
        results.write()
        left[unit.run_dir] -= 1
        if left[unit.run_dir] == 0 and on_run_done is not None:
            on_run_done(by_dir[unit.run_dir])

    def done(unit: Unit) -> bool:
        return by_dir[unit.run_dir].results.take(unit.policy, unit.seed)

    try:
        return execute(units, jobs=jobs, say=say, here=here, executor=executor, ray_address=ray_address,
                       keep_going=keep_going, show=show, shared_dir=shared_dir, on_finish=finished, plan=plan, done=done)
    except BaseException:
        for r in runs:
            try:
                write_partial_metrics(r.out, r.cfg)
            except OSError:  # the disk that stopped the run; what was written is kept
                pass
        raise
    finally:
        here.close()


def execute(
    units: Sequence[Unit],
    *,
    jobs: int,
    say: Callable[[str], None],
    here: InProcess,
    executor: str = "local",
    ray_address: str | None = None,
    keep_going: bool = True,
    show: bool = True,
    shared_dir: Path | None = None,
    on_finish: Callable[[Unit], None] | None = None,
    plan: StudyPlan | None = None,
    done: Callable[[Unit], bool] | None = None,
) -> list[Failure]:
    """Run every unit not finished yet (``done``, default: its result file says so); the ones that
    failed (each already said through ``say``).

    ``here`` runs a unit in this process (``jobs=1``, local); ``keep_going=False`` lets its first
    error propagate instead. ``shared_dir``: where Ray's workers must write
    (checked with a probe file before any unit starts). Ctrl-C or SIGTERM stops every unit
    started here (their finished work stays) and propagates. ``on_finish(unit)``: called in this
    process as each unit finishes. ``plan``: the study's phases, when these units are one of several
    (the progress then counts and estimates the whole study).
    """
    runner = make_executor(executor)
    finished = done or (lambda u: unit_result(Path(u.run_dir) / UNITS_DIR, u.policy, u.seed) is not None)
    pending = [u for u in units if not finished(u)]
    progress = Progress(len(units), len(units) - len(pending), jobs, say, show=show, on_finish=on_finish, plan=plan)
    if not pending:
        return []
    progress.expect(list(pending))
    try:
        runner.run(pending, Dispatch(jobs, progress, here, keep_going, ray_address, shared_dir))
    finally:
        progress.close()
    return progress.failed


def describe(executor: str, units: Sequence[Unit], jobs: int) -> str:
    """The line said before a study's units start on ``executor``."""
    return make_executor(executor).describe(units, jobs)

