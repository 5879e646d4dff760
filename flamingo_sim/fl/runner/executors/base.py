"""The executor contract: what runs a study's units (:class:`~flamingo_sim.fl.runner.unit_files.Unit`), here or elsewhere.

An executor is given the units not finished yet and a :class:`Dispatch` (how many at a time,
the progress to report to, how to run a unit in this process) and runs every one of them,
reporting each start, end and failure to :attr:`Dispatch.progress`. It must:

- run each unit with :func:`~flamingo_sim.fl.runner.units.run_unit` (in this process, through
  ``Dispatch.in_process``; in a worker process, :func:`flamingo_sim.fl.runner.worker.run_logged`;
  on a cluster), so that a unit writes the same files wherever it ran;
- report every unit it was given: :meth:`Progress.finish` once its result file says done,
  :meth:`Progress.fail` with one line otherwise (a unit that fails does not stop the others,
  unless ``keep_going`` is False and it ran in this process);
- stop everything it started when interrupted (Ctrl-C, SIGTERM: ``KeyboardInterrupt`` reaches
  :meth:`Executor.run`) and let the interruption propagate; the finished units stay.

Optional parts, with their defaults here: :meth:`Executor.check` (nothing to check),
:meth:`Executor.warm_up` (nothing to start early), :meth:`Executor.validate` (the caller builds
the runs' components itself), :meth:`Executor.close` (nothing kept), :meth:`Executor.describe`
(the units, the jobs, the threads). Results must not depend on the executor: a unit's randomness is its own and
:func:`~flamingo_sim.fl.runner.unit_files.gather` reads the units back in the config's order.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

from flamingo_sim.fl.runner.executors.progress import Progress
from flamingo_sim.fl.runner.unit_files import Unit
from flamingo_sim.fl.runner.units import InProcess
from flamingo_sim.plugins import Contract

__all__ = ["CONTRACT", "Dispatch", "Executor"]


@dataclass
class Dispatch:
    """What an executor gets besides the units: ``jobs`` units at a time at most, the
    :class:`Progress` it reports to, how this process runs a unit (``here``; ``in_process``
    runs one, what ``jobs=1`` on this machine does), ``keep_going`` (False: the first error of a
    unit run in this process propagates), ``address`` (a cluster to join, where the executor has
    one) and ``shared_dir`` (the directory every worker must be able to write: the units' results
    come back through it)."""

    jobs: int  # units at a time, at most
    progress: Progress  # what every start, end and failure is reported to
    here: InProcess  # how this process runs a unit (what it shares between units, the caller's callbacks)
    keep_going: bool = True  # False: the first error of a unit run in this process propagates
    address: str | None = None  # a cluster to join, where the executor has one
    shared_dir: Path | None = None  # the directory every worker must be able to write

    def in_process(self, unit: Unit) -> None:
        """Run ``unit`` in this process (:func:`~flamingo_sim.fl.runner.units.run_unit`)."""
        self.here.run(unit)


class Executor(abc.ABC):
    """Runs units; subclasses set :attr:`name` and implement :meth:`run`."""

    #: Its name for ``--executor``.
    name: ClassVar[str] = ""
    #: How its workers are called in the line that starts a study (``processes``, ``Ray``).
    workers: ClassVar[str] = "workers"

    def check(self) -> None:
        """Before any work: raise :class:`~flamingo_sim.errors.ConfigError` (one line) if this
        executor cannot run here (a library missing). Default: nothing to check."""
        return None

    def warm_up(self, jobs: int) -> None:
        """Start what takes time (a pool's parent process of workers) while the caller still
        validates the configs. Default: nothing; must not block for long, and must be harmless
        when :meth:`run` is never called."""
        return None

    def validate(self, units: Sequence[Unit], jobs: int) -> dict[Unit, str] | None:
        """Build each unit's components where the units will run (a study's check of its runs
        before it writes anything; what is built may be kept for the units): the units whose build
        failed, with their error lines; or None when this executor does not, and the caller builds
        them in its own process. Default: None."""
        return None

    def close(self) -> None:
        """Free what :meth:`validate` kept when the units will not run after all. Default: nothing."""
        return None

    def describe(self, units: Sequence[Unit], jobs: int) -> str:
        """The line said before the units start."""
        threads = max((u.threads for u in units), default=1)
        return f"{len(units)} units, {jobs} at a time ({getattr(self, 'workers', 'workers')}, {threads} CPU thread(s) each)"

    @abc.abstractmethod
    def run(self, pending: Sequence[Unit], dispatch: Dispatch) -> None:
        """Run every unit of ``pending``, reporting each to ``dispatch.progress`` (see the module's contract)."""


#: The executors' extension point (:mod:`flamingo_sim.plugins`): ``run`` required, the rest with the defaults above.
CONTRACT = Contract("executor", Executor, required=("run",), optional=("check", "warm_up", "validate", "close", "describe"))
