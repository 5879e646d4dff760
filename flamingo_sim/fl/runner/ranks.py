"""An experiment run by every process of a torchrun group: rank 0 writes, the others serve.

Each process :func:`run_distributed` is called in (by
:func:`~flamingo_sim.fl.runner.run.run_experiment`, with the same arguments everywhere) joins
the group, then checks and builds the experiment; a failure on any rank is agreed on, so a bad
config prints one line and every rank stops. Rank 0 then alone locks and writes the run
directory (metrics, checkpoints, summary, progress) and runs every (policy, seed) with its
simulation's step 5 split over the ranks (:class:`~flamingo_sim.fl.distributed.seam.DistributedSeam`);
the other ranks build the same simulations and serve rank 0's jobs
(:func:`~flamingo_sim.fl.distributed.seam.serve`). Checkpoints are rank 0's simulation state, the
same as a one-process run's, so a run resumes with any number of processes.

Failures: an error on a rank is that rank's one line (``rank R: ...``); a rank that loses
another (its connection closed, or a collective timed out) stops with a line saying so, or,
under ``flamingo-sim run --nproc`` (whose launcher names the failed rank), quietly.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.distributed.seam import DistributedSeam, prepare_trainer, serve
from flamingo_sim.fl.distributed.world import DEFAULT_TIMEOUT_S, LAUNCHER_ENV, PEER_EXIT, CollectiveError, Comm, World, start
from flamingo_sim.fl.runner.rundir import run_guard
from flamingo_sim.fl.sim.seam import LocalSeam

if TYPE_CHECKING:
    from flamingo_sim.fl.config import FLConfig

__all__ = ["run_distributed", "distribute", "announce_pending", "describe_world", "describe_traffic"]


def _quiet(_msg: str) -> None:
    return None


def _work_per_client(fl: FLConfig) -> float:
    """What one client's local training costs: ``local_steps`` x ``batch_size`` samples through the model."""
    return float(fl.local_steps * fl.batch_size)


def run_distributed(world: World, prepare: Callable[..., Any], run_all: Callable[[Any], Any], experiment: str | Path, *,
                    collective_timeout_s: float | None, log: Callable[[str], None] | None, **options: Any) -> Any:
    """This process's part of the run (see the module docstring); ``prepare`` and ``run_all`` are
    :func:`~flamingo_sim.fl.runner.run.run_experiment`'s own steps."""
    launched = os.environ.get(LAUNCHER_ENV) == "1"
    import torch

    if torch.cuda.is_available():  # each process its own GPU: "auto" and "cuda" resolve to it
        torch.cuda.set_device(world.local_rank % torch.cuda.device_count())
    comm = start(world, DEFAULT_TIMEOUT_S if collective_timeout_s is None else float(collective_timeout_s))
    try:
        prepared: dict[str, Any] = {}

        def check() -> None:
            if options.get("engine", "native") != "native":
                raise ConfigError(f"engine: {options['engine']!r} runs its own processes; a run over torchrun's processes uses the native engine")
            prepared["prep"] = prepare(experiment, log=log if world.is_main else _quiet, writes=world.is_main, **options)

        comm.agree(check)
        prep = prepared["prep"]
        prep.comm = comm
        from flamingo_sim.fl.training.device import resolve_device

        where = resolve_device(prep.cfg.fl.device)
        # NCCL for GPU tensors, one GPU per process; processes sharing a GPU (NCCL refuses) exchange through gloo
        shared = where.type == "cuda" and world.local_size > torch.cuda.device_count()
        comm.device = where if where.type == "cuda" and not shared else torch.device("cpu")
        with contextlib.ExitStack() as stack:
            comm.agree(lambda: stack.enter_context(run_guard(prep.out, prep.cfg, prep.experiment, resume=options.get("resume", False)))
                       if world.is_main else None)
            try:
                result = run_all(prep) if world.is_main else _serve_all(prep, comm)
            except CollectiveError:
                raise
            except FlamingoError as exc:
                raise FlamingoError(f"rank {world.rank}: {exc}") from None
        import torch.distributed as dist

        comm.wait("barrier at the end")  # no rank tears its connections down while another still uses them
        dist.destroy_process_group()
        return result
    except CollectiveError as exc:
        if exc.peer and launched:
            raise SystemExit(PEER_EXIT) from None
        raise
    except KeyboardInterrupt:
        if launched:  # the launcher stopped this rank because another failed (or was itself stopped): it reports
            raise SystemExit(PEER_EXIT) from None
        raise


def distribute(sim: Any, comm: Comm, say: Callable[[str], None]) -> None:
    """Rank 0: split ``sim``'s step 5 over the group."""
    local = sim.seam
    assert isinstance(local, LocalSeam)
    prepare_trainer(local, comm.world.size, say)
    comm.context = f"{sim.policy_name} seed {sim.seed}"
    sim.seam = DistributedSeam(local, comm, _work_per_client(sim.rules.fl))


def announce_pending(comm: Comm, pending: list[bool]) -> None:
    """Rank 0: tell the others which of the run's units (seeds, then policies) it will run (a
    resumed run skips the finished ones), so that every rank builds the same simulations."""
    import torch

    comm.broadcast(torch.tensor(pending, dtype=torch.int64, device=comm.device), "units to run")


def _serve_all(prep: Any, comm: Comm) -> Any:
    """A rank other than 0: the same (seed, policy) simulations as rank 0 runs, each serving its jobs."""
    import torch

    from flamingo_sim.fl.runner.compose import build_components, compose
    from flamingo_sim.fl.runner.kernels import training_on
    from flamingo_sim.fl.runner.results import RunResult

    cfg = prep.cfg
    training_on(cfg, prep.kernels[0])  # this rank's CPU threads
    order = [(seed, name) for seed in cfg.seeds for name in cfg.policies]
    pending = comm.broadcast(torch.zeros(len(order), dtype=torch.int64, device=comm.device), "units to run").cpu().tolist()
    parts_of: dict[int, Any] = {cfg.seeds[0]: prep.first_parts}
    for (seed, name), todo in zip(order, pending):
        if not todo:
            continue
        if seed not in parts_of:
            parts_of.clear()
            parts_of[seed] = build_components(cfg, prep.experiment, seed, log=_quiet)
        local = compose(cfg, prep.experiment, seed, name, parts=parts_of[seed], log=_quiet).seam
        assert isinstance(local, LocalSeam)
        prepare_trainer(local, comm.world.size, _quiet)
        comm.context = f"{name} seed {seed}"
        serve(local, comm, _work_per_client(cfg.fl))
    return RunResult(prep.out, pd.DataFrame(), {})


def describe_world(comm: Comm, training: str) -> str:
    """The line that says where the run trains, for a group."""
    via = "nccl" if comm.device.type == "cuda" else "gloo"
    return f"{comm.world.size} processes ({via}, collectives time out after {comm.timeout_s:g} s); rank 0 {training}"


def describe_traffic(comm: Comm) -> str:
    """Rank 0's time in collectives and the bytes it moved, per training job."""
    jobs = max(comm.train_jobs, 1)
    return (f"collectives on rank 0: {comm.seconds / jobs * 1e3:.1f} ms and {comm.bytes_moved / jobs / 1e6:.2f} MB a round, "
            f"{comm.wait_s / jobs * 1e3:.1f} ms waiting for the slowest share "
            f"({comm.train_jobs} training and {comm.eval_jobs} evaluation jobs over {comm.world.size} processes)")
