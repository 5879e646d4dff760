"""``--executor local`` (the default): units in this process (``jobs=1``) or on a pool of worker processes.

- ``jobs=1``: one unit after another in the study's process, the policies of a seed sharing
  its components, as a single run always did; a unit's error propagates when ``keep_going`` is False;
- ``jobs=N``: up to N at once on long-lived worker processes of this machine
  (:mod:`flamingo_sim.fl.runner.executors.pool`), which also build the runs' components to
  validate them (:meth:`LocalExecutor.validate`) and keep them for the units.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Sequence

from flamingo_sim.fl.runner.executors.base import Dispatch, Executor
from flamingo_sim.fl.runner.executors.progress import Progress, one_line
from flamingo_sim.fl.runner.unit_files import Unit

__all__ = ["LocalExecutor"]


class LocalExecutor(Executor):
    """This machine: in this process, or on a pool of workers."""

    name = "local"
    workers = "processes"

    def warm_up(self, jobs: int) -> None:
        if jobs > 1:
            from flamingo_sim.fl.runner.executors.pool import warm_up

            warm_up()

    def validate(self, units: Sequence[Unit], jobs: int) -> dict[Unit, str] | None:
        """With workers: each builds the components of the units it is given, in parallel, and keeps them for their units."""
        if jobs == 1:
            return None
        from flamingo_sim.fl.runner.executors.pool import close_pool, pool

        errors = pool().build(units, jobs)
        if errors:
            close_pool()
        return errors

    def close(self) -> None:
        from flamingo_sim.fl.runner.executors.pool import close_pool

        close_pool()

    def describe(self, units: Sequence[Unit], jobs: int) -> str:
        """The units, the jobs, the threads, and with several jobs the GPUs the workers train on (one each)."""
        line = super().describe(units, jobs)
        if jobs > 1 and any(u.device in ("auto", "cuda") for u in units):
            from flamingo_sim.fl.runner.executors.pool import visible_gpus

            gpus = visible_gpus()
            if gpus:
                line += f"; each worker on its own GPU of {', '.join(gpus)} (CUDA_VISIBLE_DEVICES)"
        return line

    def run(self, pending: Sequence[Unit], dispatch: Dispatch) -> None:
        if dispatch.jobs > 1:
            from flamingo_sim.fl.runner.executors.pool import run_pool

            run_pool(pending, dispatch.jobs, dispatch.progress)
            return
        progress = dispatch.progress
        with _estimating(progress):
            for unit in pending:
                progress.start(unit)
                try:
                    dispatch.in_process(unit)
                except Exception as exc:
                    if not dispatch.keep_going:
                        raise
                    progress.fail(unit, one_line(exc))
                else:
                    progress.finish(unit)


@contextlib.contextmanager
def _estimating(progress: Progress, every_s: float = 1.0) -> Iterator[None]:
    """While units run in this process: a thread that says the study's estimate from the first rounds (once a run)."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(every_s):
            progress.estimate_once()

    thread = threading.Thread(target=watch, name="study-estimate", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
