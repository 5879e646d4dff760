"""Running units of work (:mod:`flamingo_sim.fl.runner.units`) on an executor, and each unit's share of the cores.

:func:`execute` hands the units not finished yet to the executor named by ``--executor``
(:mod:`flamingo_sim.fl.runner.executors`: ``local``, in this process with ``jobs=1`` or on a
pool of long-lived worker processes with ``jobs=N``; ``ray``, each unit a Ray task; or a
plug-in), with the :class:`~flamingo_sim.fl.runner.executors.progress.Progress` they all
report to. :func:`unit_threads` and :func:`auto_jobs` share the cores out.

Results do not depend on the executor or on the order in which units finish: each unit's
randomness is its own (per seed and round), it writes only its own files, and
:func:`~flamingo_sim.fl.runner.results.gather` reads them in the config's order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.fl.runner.executors import EXECUTORS, Dispatch, make_executor
from flamingo_sim.fl.runner.executors.progress import Failure, Progress, StudyPlan
from flamingo_sim.fl.runner.executors.ray_cluster import RAY_HINT
from flamingo_sim.fl.runner.units import UNITS_DIR, Unit, unit_result

__all__ = ["EXECUTORS", "Failure", "Progress", "StudyPlan", "check_executor", "execute", "unit_threads", "auto_jobs", "RAY_HINT", "warm_up"]


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


def warm_up(executor: str, jobs: int) -> None:
    """Let the executor start what takes time (the pool's preloaded parent) while the caller validates its configs."""
    make_executor(executor).warm_up(jobs)


def execute(
    units: Sequence[Unit],
    *,
    jobs: int,
    say: Callable[[str], None],
    in_process: Callable[[Unit], None],
    executor: str = "local",
    ray_address: str | None = None,
    keep_going: bool = True,
    show: bool = True,
    shared_dir: Path | None = None,
    on_finish: Callable[[Unit], None] | None = None,
    plan: StudyPlan | None = None,
) -> list[Failure]:
    """Run every unit not finished yet; the ones that failed (each already said through ``say``).

    ``in_process(unit)`` runs one unit in this process (``jobs=1``, local); ``keep_going=False``
    lets its first error propagate instead. ``shared_dir``: where Ray's workers must write
    (checked with a probe file before any unit starts). Ctrl-C or SIGTERM stops every unit
    started here (their finished work stays) and propagates. ``on_finish(unit)``: called in this
    process as each unit finishes. ``plan``: the study's phases, when these units are one of several
    (the progress then counts and estimates the whole study).
    """
    runner = make_executor(executor)
    pending = [u for u in units if unit_result(Path(u.run_dir) / UNITS_DIR, u.policy, u.seed) is None]
    progress = Progress(len(units), len(units) - len(pending), jobs, say, show=show, on_finish=on_finish, plan=plan)
    if not pending:
        return []
    progress.expect(list(pending))
    try:
        runner.run(pending, Dispatch(jobs, progress, in_process, keep_going, ray_address, shared_dir))
    finally:
        progress.close()
    return progress.failed


def describe(executor: str, units: Sequence[Unit], jobs: int) -> str:
    """The line said before a study's units start on ``executor``."""
    return make_executor(executor).describe(units, jobs)

