"""An experiment run by every process of a torchrun group: rank 0 writes, the others serve.

Each process :func:`run_distributed` is called in (by
:func:`~flamingo_sim.fl.runner.run.run_experiment`, with the same arguments everywhere) joins
the group, then plans the run (:func:`~flamingo_sim.fl.runner.plan.prepare_run`: the one time it
reads the experiment); a failure on any rank is agreed on, so a bad config prints one line and every
rank stops, and so does a rank whose resolved config differs from rank 0's record (the file changed
while the ranks read it; :func:`agree_on_record`), so that every rank builds from one record, never
the file again. Rank 0 then alone locks
and writes the run directory (metrics, checkpoints, summary, progress) and runs every (policy,
seed) down the same path as a one-process run (:func:`~flamingo_sim.fl.runner.execute.run_units`,
then :func:`~flamingo_sim.fl.runner.results.finish_run`), each simulation's step 5 split over the
ranks (:func:`~flamingo_sim.fl.distributed.seam.split_over`); the other ranks build the same
simulations and serve rank 0's jobs (:func:`~flamingo_sim.fl.distributed.seam.serve`). Checkpoints are rank 0's simulation state, the
same as a one-process run's, so a run resumes with any number of processes.

Failures: an error on a rank is that rank's one line (``rank R: ...``); a rank that loses
another (its connection closed, or a collective timed out) stops with a line saying so, or,
under ``flamingo-sim run --nproc`` (whose launcher names the failed rank), quietly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.distributed.seam import prepare_trainer, serve, work_per_client
from flamingo_sim.fl.distributed.world import DEFAULT_TIMEOUT_S, LAUNCHER_ENV, PEER_EXIT, CollectiveError, Comm, World, start
from flamingo_sim.fl.runner.callbacks import Callback
from flamingo_sim.fl.runner.execute import run_units
from flamingo_sim.fl.runner.options import RunOptions
from flamingo_sim.fl.runner.plan import PreparedRun, prepare_run
from flamingo_sim.fl.runner.results import RunResult, finish_run
from flamingo_sim.fl.runner.rundir import run_guard
from flamingo_sim.fl.sim.seam import LocalSeam

__all__ = ["run_distributed", "announce_pending", "describe_traffic", "agree_on_record"]


def _quiet(_msg: str) -> None:
    return None


def run_distributed(world: World, experiment: str | Path, opts: RunOptions, *, callbacks: Sequence[Callback] = (),
                    log: Callable[[str], None] | None = None) -> RunResult:
    """This process's part of the run (see the module docstring), with
    :func:`~flamingo_sim.fl.runner.run.run_experiment`'s ``options`` and ``callbacks`` (rank 0's)."""
    say: Callable[[str], None] = log or (lambda msg: print(msg, file=sys.stderr))
    collective_timeout_s = opts.collective_timeout_s
    launched = os.environ.get(LAUNCHER_ENV) == "1"
    import torch

    if torch.cuda.is_available():  # each process its own GPU: "auto" and "cuda" resolve to it
        torch.cuda.set_device(world.local_rank % torch.cuda.device_count())
    comm = start(world, DEFAULT_TIMEOUT_S if collective_timeout_s is None else float(collective_timeout_s))
    try:
        prepared: dict[str, Any] = {}

        def check() -> None:
            if opts.engine != "native":
                raise ConfigError(f"engine: {opts.engine!r} runs its own processes; a run over torchrun's processes uses the native engine")
            prepared["prep"] = prepare_run(experiment, opts.all_overrides(), opts.n_seeds, opts.out_dir, resume=opts.resume, engine=opts.engine,
                                           executors=opts.executors, say=say if world.is_main else _quiet, writes=world.is_main,
                                           config=opts.config)

        comm.agree(check)
        prep = prepared["prep"]
        prep.comm = comm
        from flamingo_sim.fl.training.device import resolve_device

        where = resolve_device(prep.cfg.fl.device)
        # NCCL for GPU tensors, one GPU per process; processes sharing a GPU (NCCL refuses) exchange through gloo
        shared = where.type == "cuda" and world.local_size > torch.cuda.device_count()
        comm.device = where if where.type == "cuda" and not shared else torch.device("cpu")
        agree_on_record(comm, prep)
        with contextlib.ExitStack() as stack:
            comm.agree(lambda: stack.enter_context(run_guard(prep.out, prep.cfg, prep.experiment, resume=opts.resume, record=prep.record))
                       if world.is_main else None)
            try:
                result = _run_rank0(prep, callbacks, say) if world.is_main else _serve_all(prep, comm)
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


def agree_on_record(comm: Comm, prep: PreparedRun) -> None:
    """Every rank's resolved config is rank 0's record (a digest of it broadcast from rank 0), else every rank stops
    with one line: each read the experiment as it started, and a file changed meanwhile would build two runs."""
    import torch

    digest = list(hashlib.sha256(json.dumps(prep.record, sort_keys=True).encode()).digest())
    mine = torch.tensor(digest, dtype=torch.uint8)
    theirs = comm.broadcast(mine.clone().to(comm.device), "the run's config").cpu()

    def check() -> None:
        if not torch.equal(theirs, mine):
            raise ConfigError(f"{prep.experiment}: the experiment changed while the ranks read it (rank {comm.world.rank}'s config is not "
                              "rank 0's); run it again")

    comm.agree(check)


def _run_rank0(run: PreparedRun, callbacks: Sequence[Callback], say: Callable[[str], None]) -> RunResult:
    """Rank 0, holding the run directory: every unit in this process, each simulation's step 5 split
    over the group; the units already finished (a resumed run) are announced first, so that the
    other ranks skip them too (:func:`_serve_all`)."""
    units = run.units(1)
    announce_pending(run.comm, [not run.results.take(u.policy, u.seed) for u in units])
    failures = run_units([run], units, jobs=1, executor="local", ray_address=None, say=say, callbacks=callbacks,
                         keep_going=False, show=False, shared_dir=run.out, comm=run.comm)
    if failures:
        raise FlamingoError(f"{failures[0].describe()}; continue it with: the same command and --resume")
    result = finish_run(run, say)
    say(describe_traffic(run.comm))
    return result


def announce_pending(comm: Comm, pending: list[bool]) -> None:
    """Rank 0: tell the others which of the run's units (seeds, then policies) it will run (a
    resumed run skips the finished ones), so that every rank builds the same simulations."""
    import torch

    comm.broadcast(torch.tensor(pending, dtype=torch.int64, device=comm.device), "units to run")


def _serve_all(prep: PreparedRun, comm: Comm) -> RunResult:
    """A rank other than 0: the same (seed, policy) simulations as rank 0 runs, each serving its jobs."""
    import torch

    from flamingo_sim.fl.compose import build_components, compose
    from flamingo_sim.fl.runner.kernels import training_on

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
        local = compose(cfg, prep.experiment, seed, name, parts=parts_of[seed], log=_quiet, prebuilt=prep.prebuilt).seam
        assert isinstance(local, LocalSeam)
        prepare_trainer(local, comm.world.size, _quiet)
        comm.context = f"{name} seed {seed}"
        serve(local, comm, work_per_client(cfg.fl))
    return RunResult(prep.out, pd.DataFrame(), {})


def describe_traffic(comm: Comm) -> str:
    """Rank 0's time in collectives and the bytes it moved, per training job."""
    jobs = max(comm.train_jobs, 1)
    return (f"collectives on rank 0: {comm.seconds / jobs * 1e3:.1f} ms and {comm.bytes_moved / jobs / 1e6:.2f} MB a round, "
            f"{comm.wait_s / jobs * 1e3:.1f} ms waiting for the slowest share "
            f"({comm.train_jobs} training and {comm.eval_jobs} evaluation jobs over {comm.world.size} processes)")
