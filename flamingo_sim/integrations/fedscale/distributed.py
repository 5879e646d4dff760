"""The distributed driver: FedScale's aggregator here over gRPC, its executors in other processes.

- :func:`run_distributed`: serve gRPC on ``ps_ip:ps_port`` (a free port if 0), start N executor
  processes on this machine (or wait for them to connect from other hosts), end every process
  on exit, error, Ctrl-C or SIGTERM; executors started here also die with this process when it
  is killed outright (``PR_SET_PDEATHSIG``);
- :func:`executor_command`: the command line of one executor process;
- :func:`main`: that process (``python -m flamingo_sim.integrations.fedscale executor ...``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.runner.callbacks import CallbackList
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.integrations.fedscale.classes import fedscale_classes
from flamingo_sim.integrations.fedscale.settings import fedscale_args, rank_args


def executor_command(
    experiment: str | Path,
    *,
    seed: int,
    ps_ip: str,
    ps_port: int,
    rank: int,
    num_executors: int,
    log_dir: str | Path,
    overrides: Sequence[str] = (),
) -> list[str]:
    """The command line of one executor process (also what to run on another host)."""
    cmd = [
        sys.executable, "-m", "flamingo_sim.integrations.fedscale", "executor", str(experiment),
        "--seed", str(seed), "--ps-ip", ps_ip, "--ps-port", str(ps_port),
        "--rank", str(rank), "--num-executors", str(num_executors), "--log-dir", str(log_dir),
    ]
    for item in overrides:
        cmd += ["--set", item]
    return cmd


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """``preexec_fn`` of an executor: the kernel sends it SIGKILL when this process ends, however it
    ends (even by SIGKILL, when no clean-up runs). None where ``prctl`` is not available (not Linux):
    there the parent's clean-up alone ends the executors."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(1)

    return arm


def _terminate(procs: list[subprocess.Popen], timeout_s: float = 10.0) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def run_distributed(
    sim: Any,
    *,
    experiment: str | Path,
    work_dir: str | Path,
    n_executors: int,
    overrides: Sequence[str] = (),
    weighted: bool = True,
    ps_ip: str = "127.0.0.1",
    ps_port: int = 0,
    spawn: bool = True,
    timeout_s: float | None = None,
    on_start: Callable[[int, list[subprocess.Popen]], None] | None = None,
    stats: dict[str, Any] | None = None,
    callbacks: CallbackList | None = None,
) -> list[RoundRecord]:
    """Run ``sim`` with FedScale's aggregator here, serving gRPC on ``ps_ip:ps_port`` (0: a free
    port), and ``n_executors`` executor processes; returns the rounds' records.

    With ``spawn`` the executors are started here (loopback) and always ended before return;
    without it, they are expected to connect from elsewhere (see :func:`executor_command`).
    ``on_start(port, processes)`` is called once they are started (tests use it); ``stats`` as
    in :func:`~flamingo_sim.integrations.fedscale.in_process.run_in_process`; ``callbacks``
    after each finished round (the progress bar).
    """
    start = time.perf_counter()
    if n_executors < 1:
        raise FlamingoError(f"n_executors: need at least 1 executor, got {n_executors}")
    cls = fedscale_classes()
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    args = fedscale_args(sim.parts.cfg, log_dir=work, ps_ip=ps_ip, ps_port=ps_port, num_executors=n_executors)
    aggregator = cls.FlamingoAggregator(args, sim, n_executors=n_executors, weighted=weighted, callbacks=callbacks)
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        aggregator.init_control_communication()
        port = int(aggregator.bound_port)
        if spawn:
            env = dict(os.environ)
            root = str(Path(__file__).resolve().parents[3])  # the checkout holding flamingo_sim/
            env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
            # the executors share this machine's cores: one share each, not all of them each
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n_executors)))
            die_with_parent = _die_with_parent(os.getpid())
            for rank in range(1, n_executors + 1):
                log = work / f"executor-{rank}.log"
                logs.append(log)
                cmd = executor_command(
                    experiment, seed=sim.seed, ps_ip=ps_ip, ps_port=port, rank=rank,
                    num_executors=n_executors, log_dir=work, overrides=overrides,
                )
                with open(log, "wb") as fh:
                    procs.append(subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                                  start_new_session=True, preexec_fn=die_with_parent))
        if on_start is not None:
            on_start(port, procs)
        started = time.monotonic()

        def watch() -> None:
            for rank, p in enumerate(procs, 1):
                code = p.poll()
                if code is not None and not aggregator.finished.is_set():
                    raise FlamingoError(f"FedScale executor {rank} exited with code {code} before the run ended:\n{_tail(logs[rank - 1])}")
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise FlamingoError(f"FedScale run did not finish within {timeout_s:g} s")

        aggregator.event_monitor(watch=watch)
        for p in procs:  # the executors stop on their shutdown event; give them a moment
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
    finally:
        aggregator.stop()
        _terminate(procs)
        if aggregator.log_writer is not None:
            aggregator.log_writer.close()
    if stats is not None:
        stats.update(start_wall_s=start, round_end_wall_s=list(aggregator.round_end_wall_s))
    return aggregator.records


# -- the executor process ---------------------------------------------------------------------
def _executor_main(ns: argparse.Namespace) -> int:
    from flamingo_sim.fl.compose import build_components
    from flamingo_sim.fl.config import load_experiment

    cfg = load_experiment(ns.experiment, ns.overrides)
    parts = build_components(cfg, ns.experiment, ns.seed, log=lambda _m: None)
    cls = fedscale_classes()
    args = fedscale_args(
        cfg, log_dir=ns.log_dir,
        ps_ip=ns.ps_ip, ps_port=ns.ps_port, this_rank=ns.rank, num_executors=ns.num_executors,
    )
    from flamingo_sim.fl.training.device import set_threads

    set_threads(cfg.fl.threads)
    executor = cls.FlamingoExecutor(rank_args(args, ns.rank), parts.dataset, parts.model)
    executor.setup_communication()
    executor.event_monitor()
    print(f"executor {ns.rank}: trained {len(executor.trained)} client tasks; stopped", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flamingo_sim.integrations.fedscale executor EXPERIMENT --ps-ip H --ps-port P ...``"""
    parser = argparse.ArgumentParser(prog="python -m flamingo_sim.integrations.fedscale")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("executor", help="one FedScale executor process of a flamingo-sim run")
    p.add_argument("experiment")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--ps-ip", default="127.0.0.1")
    p.add_argument("--ps-port", type=int, required=True)
    p.add_argument("--rank", type=int, required=True, help="1..N, unique per executor")
    p.add_argument("--num-executors", type=int, required=True)
    p.add_argument("--log-dir", default=tempfile.gettempdir())
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ns = parser.parse_args(argv)
    try:
        return _executor_main(ns)
    except FlamingoError as exc:
        print(f"flamingo-sim fedscale executor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
