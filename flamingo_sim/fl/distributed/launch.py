"""``flamingo-sim run EXPERIMENT --nproc N``: the one-machine shortcut for ``torchrun``.

It calls PyTorch's own launcher (:mod:`torch.distributed.run`, what ``torchrun`` runs) as
``torchrun --standalone --nproc-per-node N -m flamingo_sim run EXPERIMENT ...``: the elastic
agent starts the N processes, watches them, and when one dies or fails stops the others
(SIGTERM, then SIGKILL) and reports. This module only turns that report into one line naming
the rank and the reason, plus how to continue the run; the workers, told by
:data:`~flamingo_sim.fl.distributed.world.LAUNCHER_ENV` that the launcher reports, say nothing of
their own about being stopped.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
from typing import Callable, Sequence

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.faults import Interrupted
from flamingo_sim.fl.distributed.world import LAUNCHER_ENV, PEER_EXIT

__all__ = ["launch", "describe_failure"]

#: Exit codes of ranks that were stopped because of another one (not the cause).
_STOPPED = {PEER_EXIT, 128 + signal.SIGTERM, -signal.SIGTERM, 128 + signal.SIGINT, -signal.SIGINT}
#: The CLI's exit code for an error it already printed as one line.
_REPORTED = 2


def describe_failure(failures: dict[int, tuple[int, int]]) -> str:
    """One line naming the failed rank and why, from ``rank -> (exit code, pid)`` (negative
    codes are signals): the first rank that was not merely stopped because of another."""
    if not failures:
        return "the launcher stopped without a failed rank"
    causes = [r for r in sorted(failures) if failures[r][0] not in _STOPPED] or sorted(failures)
    rank = causes[0]
    code, pid = failures[rank]
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        why = f"was killed by {name}"
    elif code == _REPORTED:
        why = "stopped with the error above"
    elif code == PEER_EXIT:
        why = "lost contact with another rank"
    else:
        why = f"exited with code {code}"
    return f"rank {rank} (pid {pid}) {why}; every other rank was stopped"


def _quiet_agent() -> None:
    """The elastic agent logs every signal it sends and each failed rank: this launcher says it in one line instead."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("torch.distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


#: Seconds a round of the main job (the proxy task, 100 clients a round) took with one process and with two,
#: on 2 cores (``benchmarks/distributed.py``, its correctness section, in benchmarks/results/distributed_2cores.json).
PROXY_ROUND_S = {1: 0.403, 2: 0.489}


#: Seconds a round of MobileNetV2 at 32 px (8 clients a round, ``threads``) took with 2 processes of one thread
#: and with one process of 2 threads, on 2 cores (``benchmarks/distributed.py --sections speed``, medians, in
#: benchmarks/results/distributed_speed_2cores.json).
CNN_ROUND_S = {"processes": 1.700, "threads": 1.388}


def proxy_notice(nproc: int, real_data: bool, on_cpu: bool, cores: int | None = None) -> str | None:
    """The line ``run --nproc`` says before it starts where one process is faster, with the measurement: the
    proxy task on the CPU (its model is too small for the split to pay), and a CNN on a CPU with fewer than 2
    cores a rank (``cores``: the usable cores; one process then trains with those cores as threads); None elsewhere."""
    if nproc < 2 or not on_cpu:
        return None
    if real_data:
        if cores is None or cores >= 2 * nproc:
            return None
        return (f"--nproc {nproc}: on {cores} CPU cores one process with {cores} threads is likely faster (measured on 2 cores, "
                f"MobileNetV2 at 32 px, 8 clients a round: {CNN_ROUND_S['threads']:.2f} s a round in one process of 2 threads, "
                f"{CNN_ROUND_S['processes']:.2f} s in two processes of one); processes pay with cores to spare for each rank, "
                f"or GPUs; starting {nproc} processes as asked")
    one, two = PROXY_ROUND_S[1], PROXY_ROUND_S[2]
    return (f"--nproc {nproc}: one process is faster on the proxy task (measured on 2 cores: {one:.2f} s a round in one process, "
            f"{two:.2f} s in two; its model is so small that the collectives and rank 0's coordinator outweigh the training they split); "
            f"starting {nproc} processes as asked")


def launch(nproc: int, worker_args: Sequence[str], *, extra: Sequence[str] = (), log: Callable[[str], None] | None = None) -> None:
    """Run ``python -m flamingo_sim <worker_args>`` as ``nproc`` ranks of one process group.

    ``extra``: further ``torchrun`` options (e.g. ``--monitor-interval``). Returns when every
    rank finished; raises :class:`FlamingoError` (one line) when one failed.
    """
    if nproc < 1:
        raise ConfigError(f"--nproc: expected a process count >= 1, got {nproc}")
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # the agent's own files (a directory per launch, which torch leaves in the temporary folder) live and go with this call
    scratch = tempfile.TemporaryDirectory(prefix="flamingo-sim-torchrun-")
    args = torchrun.parse_args(["--standalone", f"--nproc-per-node={nproc}", f"--log-dir={scratch.name}", *extra,
                                "-m", "flamingo_sim", *worker_args])
    _quiet_agent()
    os.environ[LAUNCHER_ENV] = "1"
    try:
        torchrun.run(args)
    except ChildFailedError as exc:
        failures = {int(rank): (int(f.exitcode), int(f.pid)) for rank, f in exc.failures.items()}
        raise FlamingoError(describe_failure(failures)) from None
    except SignalException as exc:  # Ctrl-C or SIGTERM to the launcher: the agent stopped the ranks
        # reported as the signal that came (a plain KeyboardInterrupt read as SIGINT: exit 130 after a SIGTERM)
        raise Interrupted(int(exc.sigval)) from None
    finally:
        os.environ.pop(LAUNCHER_ENV, None)
        scratch.cleanup()
        sys.stdout.flush()
