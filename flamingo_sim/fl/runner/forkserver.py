"""The preloaded parent of a ``--jobs N`` pool's workers (multiprocessing's forkserver), started as early as a command can.

:data:`PRELOAD` is what it imports once, before it forks any worker; :func:`start_early` starts it
without waiting, from a command that has only checked its arguments: the forkserver imports torch
and the package on one core while the command's own process imports what it needs and reads its
configs on another. This module imports nothing of the package's, so that a command can start the
forkserver before it imports torch itself.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
from typing import Any

__all__ = ["PRELOAD", "context", "start_early", "start_early_for"]

#: What the pool's parent process (multiprocessing's forkserver) imports once, before it forks
#: any worker: torch, pandas and the modules a unit runs (no torch kernel runs at import, so a
#: worker still chooses its CPU kernels).
PRELOAD = ("torch", "numpy", "pandas", "pyarrow.parquet", "scipy.interpolate", "flamingo_sim.fl.runner.worker",
           "flamingo_sim.fl.compose", "flamingo_sim.fl.sim.simulation", "flamingo_sim.fl.training.trainer")


def context() -> Any:
    """multiprocessing's forkserver context, its forkserver set to preload :data:`PRELOAD`."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def start_early() -> None:
    """Start the forkserver (it imports :data:`PRELOAD`) without waiting for it; nothing if it runs already."""
    context()
    multiprocessing.forkserver.ensure_running()


def start_early_for(executor: str, jobs: int | None) -> None:
    """:func:`start_early` when the units will run on a local pool (``--executor local``, ``--jobs`` other than 1)."""
    if executor == "local" and jobs != 1:
        start_early()
