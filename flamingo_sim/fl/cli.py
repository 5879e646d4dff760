"""``flamingo-sim run``: run an experiment YAML (baseline vs Flamingo by default);
``flamingo-sim pack-data``: decode an experiment's FedScale data once into a packed dataset (or verify one)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from flamingo_sim.fl.runner.options import Execution


def register(sub: argparse._SubParsersAction) -> None:
    from flamingo_sim.argtypes import number
    from flamingo_sim.fl.config import COLLECTIVE_TIMEOUT_MAX_S, MAX_SEEDS, THREADS_DEFAULT

    p = sub.add_parser(
        "run",
        help="run an FL experiment: policies compared on time to accuracy, energy and dropout",
        description="Run a trace-driven FL experiment and write metrics.parquet and summary.json into a run directory.",
    )
    p.add_argument("experiment", help="experiment YAML (e.g. experiments/openimage_mobilenet.yaml) or the name of a shipped one (e.g. openimage_mobilenet)")
    p.add_argument("--out", help="run directory (default: runs/<name>-<timestamp>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key by its dotted path, e.g. --set fl.rounds=20 (repeatable)")
    add_readings_argument(p)
    p.add_argument("--seeds", type=int, help=f"run N seeds, starting from the config's first seed (at most {MAX_SEEDS:,})")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--yes", action="store_true",
                   help="run even when its estimated wall time is over a day (without it, such a run asks on a terminal and is refused elsewhere)")
    p.add_argument("--allow-untrained", action="store_true",
                   help="exit 0 even when a policy trained no client in a seed (every round kept 0 clients); without it such a "
                        "run is written in full, says so in its summary, and exits 1")
    p.add_argument("--engine", choices=("native", "fedscale", "flower"), default="native",
                   help="native (default), fedscale: FedScale's aggregator and executors (pip install 'flamingo-sim[fedscale]'), "
                        "or flower: Flower's simulation engine on Ray (pip install 'flamingo-sim[flower]')")
    p.add_argument("--executors", type=int, default=0, metavar="N",
                   help="with --engine fedscale: N executor processes over gRPC on 127.0.0.1 (default 0: in-process; at most "
                        "fl.participants_per_round)")
    p.add_argument("--device", metavar="DEVICE",
                   help="where to train: auto (a GPU when one is visible), cpu, cuda or cuda:N (sets fl.device)")
    p.add_argument("--threads", type=int, metavar="N", help=f"torch CPU threads (sets fl.threads; default: {THREADS_DEFAULT})")
    add_parallel_arguments(p, "the (policy, seed) runs")
    p.add_argument("--nproc", type=int, metavar="N",
                   help="train over N processes on this machine (torch.distributed, started like torchrun --nproc-per-node N; "
                        "one GPU each where there are GPUs); for several hosts run torchrun yourself (docs: scaling-out)")
    p.add_argument("--collective-timeout-s", type=number(0.0, COLLECTIVE_TIMEOUT_MAX_S, low_open=True, what="number of seconds"), metavar="S",
                   help="over several processes: a collective waiting longer than S seconds for the other ranks fails (default 300; "
                        f"at most {COLLECTIVE_TIMEOUT_MAX_S:g}, a week)")
    p.set_defaults(func=_run, cli_flags={
        "n_seeds": "--seeds", "out_dir": "--out", "engine": "--engine", "executors": "--executors", "resume": "--resume", "override": "--set",
    })

    p = sub.add_parser(
        "pack-data",
        help="decode an experiment's real (FedScale) data once into a packed float16 dataset that data.root can point at",
        description="Decode every client of the dataset the experiment reads (data.root, data.image_size, data.transform, "
                    "data.max_clients, data.filter_less, data.speech_channels, ...) into --out: float16 arrays and a manifest "
                    "with their sizes and SHA-256. Then run with --set data.root=DIR. With --verify DIR: check an existing pack, "
                    "hashing every file.",
    )
    p.add_argument("experiment", nargs="?", help="experiment YAML or the name of a shipped one, as for run")
    p.add_argument("--out", help="the pack's directory (must not exist, be empty, or hold an earlier pack)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key by its dotted path, e.g. --set data.root=/data/openimage (repeatable)")
    p.add_argument("--workers", type=int, metavar="N", help="decoding threads (default: data.decode_workers, else the usable cores)")
    p.add_argument("--verify", metavar="DIR", help="verify the pack in DIR (every file's size and SHA-256, offsets, labels) and pack nothing")
    p.set_defaults(func=_pack_data, cli_flags={"out_dir": "--out", "workers": "--workers", "override": "--set"})


def add_readings_argument(p: argparse.ArgumentParser) -> None:
    """``--readings NAME``: the paper's readings as one setting (:mod:`flamingo_sim.fl.readings`), set before --set."""
    p.add_argument("--readings", choices=("default", "paper"), default="default",
                   help="'paper': every reading the paper's text decides set to its words (exploration none, charge state "
                        "from level changes, target the highest either policy reaches on the raw curve with no margin); "
                        "applied before --set (default: the simulator's own readings)")


def add_parallel_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``--jobs``, ``--executor`` and ``--ray-address``: where ``what`` (the units of work) run."""
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help=f"run {what} N at a time on N worker processes started once, each with its own share of the cores (default 1; auto: the "
                        "usable cores divided by fl.threads); the results are the same for any N")
    p.add_argument("--executor", default="local", metavar="NAME",
                   help="local (default: this machine) or ray: each unit a Ray task on the cluster at --ray-address or RAY_ADDRESS, "
                        "else on a local Ray instance; --out must be on a filesystem every node sees (pip install 'flamingo-sim[cluster]'); "
                        "or a plug-in: package.module:ClassName, or a name registered under the entry-point group flamingo_sim.executors")
    p.add_argument("--ray-address", metavar="ADDRESS", help="the Ray cluster to use with --executor ray, e.g. ray://head:10001 or auto")


def execution(args: argparse.Namespace) -> Execution:
    """The :class:`~flamingo_sim.fl.runner.options.Execution` of :func:`add_parallel_arguments`' flags (``run``,
    ``reproduce`` and ``sensitivity`` read them here, before any work): ``--ray-address`` without ``--executor ray``
    is refused, where it was ignored and the units ran on this machine (issue 50)."""
    from flamingo_sim.errors import ConfigError
    from flamingo_sim.fl.runner.options import Execution

    if args.ray_address is not None and args.executor != "ray":
        raise ConfigError(f"--ray-address: names the Ray cluster of --executor ray, and the executor is {args.executor!r}, which would "
                          "ignore it: add --executor ray, or leave --ray-address out")
    return Execution(jobs=args.jobs, executor=args.executor, ray_address=args.ray_address)


def _jobs(text: str) -> int | None:
    """``--jobs``: a count >= 1, or ``auto`` (None); anything else is argparse's one-line usage error."""
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a count >= 1 or auto, got {text!r}")
    return int(text)


def _preflight(args: argparse.Namespace) -> None:
    """The checks that need no torch, made before it is imported so a mistake is reported in well under a second:
    the counts, the experiment and its config with the overrides and ``--seeds``, and the run directory
    (run_experiment checks them all again, for callers of the library). Without ``--out``, fixes the
    timestamped default here, so that a "continue it with" line can name it."""
    from flamingo_sim.errors import ConfigError
    from flamingo_sim.fl.config import load_experiment, with_seeds
    from flamingo_sim.fl.runner.rundir import check_run_dir, default_out_dir
    from flamingo_sim.resources import find_experiment

    execution(args)  # its flags checked together
    if args.seeds is not None and args.seeds < 1:
        raise ConfigError(f"n_seeds: expected a count >= 1, got {args.seeds}")
    if args.executors < 0:
        raise ConfigError(f"executors: expected a count >= 0, got {args.executors}")
    if args.executors and args.engine == "native":
        raise ConfigError(f"executors: {args.executors} executor processes need engine 'fedscale', not 'native'")
    if args.resume and args.out is None:
        raise ConfigError("resume: needs out_dir, the run directory to continue")
    if args.nproc is not None and args.nproc < 1:
        raise ConfigError(f"--nproc: expected a process count >= 1, got {args.nproc}")
    if args.nproc is not None and args.engine != "native":
        raise ConfigError(f"--nproc: splits the native simulator's training over N processes; engine {args.engine!r} "
                          "starts processes of its own: leave --nproc out")
    if args.nproc is not None and (args.jobs != 1 or args.executor != "local"):
        raise ConfigError("--nproc trains each (policy, seed) over all its processes, one after another: leave --jobs and --executor out")
    overrides = list(args.overrides) + [f"fl.{k}={v}" for k, v in (("device", args.device), ("threads", args.threads)) if v is not None]
    cfg = with_seeds(load_experiment(find_experiment(args.experiment), overrides), args.seeds)
    k = cfg.fl.participants_per_round
    if args.executors > k:  # each a process: --executors 100000 started processes until gRPC failed, in tracebacks, then hung
        raise ConfigError(f"executors: expected at most fl.participants_per_round, {k:,} (each executor trains whole clients of a round; "
                          f"more would wait idle), got {args.executors:,}")
    # under torchrun only rank 0 writes the directory (and may already have started): the others do not check it
    rank0 = os.environ.get("RANK", "0") == "0"
    if args.out is None and "RANK" not in os.environ:
        args.default_out = str(default_out_dir(cfg))
    if args.out is not None and rank0:
        check_run_dir(Path(args.out), cfg, args.resume)
    args.config = cfg  # the run takes it: the experiment is read once


def continue_command(args: argparse.Namespace, out: str | Path) -> str:
    """The command that continues this run: the one typed (names, flags, ``--set`` as they were),
    with ``--out`` where the run directory was the default, and ``--resume``."""
    argv = list(getattr(args, "argv", []))
    if args.out is None:
        argv += ["--out", str(out)]
    if not args.resume:
        argv.append("--resume")
    return "flamingo-sim " + shlex.join(argv)


def _run(args: argparse.Namespace) -> int:
    from flamingo_sim.fl.readings import readings_overrides

    args.overrides = [*readings_overrides(args.readings), *args.overrides]  # the user's --set wins
    _preflight(args)
    out = args.out if args.out is not None else getattr(args, "default_out", None)
    if args.nproc is not None:
        return _launch(args, out)
    from flamingo_sim.fl.runner.options import RunOptions
    from flamingo_sim.fl.runner.run import run_experiment

    log = PreambleLog(None if out is None else Path(out) / "config.yaml")
    # a plug-in that breaks its contract mid-run stops it with one line and how to continue it (run_guard adds that)
    result = run_experiment(args.experiment, RunOptions(
        out_dir=out, overrides=tuple(args.overrides), n_seeds=args.seeds, resume=args.resume, engine=args.engine, executors=args.executors,
        device=args.device, threads=args.threads, execution=execution(args), collective_timeout_s=args.collective_timeout_s,
        again=None if out is None else continue_command(args, out), confirm=_confirm(args.yes, log), config=args.config,
    ), log=log)
    log.release()
    untrained = result.summary.get("untrained") if result is not None else None
    if untrained and not args.allow_untrained:
        which = "; ".join(f"{p} seed(s) {', '.join(map(str, seeds))}" for p, seeds in untrained.items())
        print(f"error: {args.experiment}: no client trained in any round ({which}): the run directory holds the untrained "
              "model's figures; pass --allow-untrained if that is what you meant", file=sys.stderr)
        return 1
    return 0


class PreambleLog:
    """The run's log lines to stderr, held until the run has started (its run directory's ``config.yaml`` written; at
    once where it was there before: a resumed run) so that a refusal made while the run is prepared (a setting
    refused while its parts are built, a run estimated too long) is the only line printed: not after "data: ..."
    and the proxy task's WARNING about a run that does not happen. :meth:`release` says the lines held (before a
    question, and at the end); lines after it pass straight on. ``started`` None: nothing is held."""

    def __init__(self, started: Path | None) -> None:
        self._started = started
        self._held: list[str] | None = [] if started is not None and not started.exists() else None

    def __call__(self, message: str) -> None:
        if self._held is not None and self._started is not None and self._started.exists():
            self.release()
        if self._held is None:
            print(message, file=sys.stderr, flush=True)
        else:
            self._held.append(message)

    def release(self) -> None:
        held, self._held = self._held or [], None
        for message in held:
            print(message, file=sys.stderr, flush=True)


def _confirm(yes: bool, log: PreambleLog) -> Callable[[str], bool] | None:
    """How a long run is confirmed: ``--yes``; else a question on a terminal (after the lines ``log`` held);
    else not at all (refused)."""
    if yes:
        return lambda _line: True
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None

    def ask(line: str) -> bool:
        log.release()
        print(line, file=sys.stderr)
        try:
            return input("run it? [y/N] ").strip().lower() in ("y", "yes")
        except EOFError:
            return False

    return ask


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _launch(args: argparse.Namespace, out: str | None) -> int:
    """``--nproc N``: the same command in N processes of one torch.distributed group (torchrun's launcher)."""
    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.distributed.launch import launch, proxy_notice
    from flamingo_sim.fl.runner.plan import prepare_run
    from flamingo_sim.resources import find_experiment

    cfg = load_experiment(find_experiment(args.experiment), args.overrides)
    # what rank 0 would refuse (a setting refused while the parts are built), refused here before the notice and the
    # launch: one line, not the notice, rank 0's line and the launcher's after it
    prepare_run(args.experiment, args.overrides, args.seeds, out, resume=args.resume, engine=args.engine, executors=args.executors,
                say=lambda _m: None, writes=False, config=args.config)
    device = str(args.device or cfg.fl.device).lower()
    on_cpu = device == "cpu" or (device == "auto" and not _has_cuda())
    from flamingo_sim.fl.training.device import usable_cores

    notice = proxy_notice(args.nproc, cfg.data.root is not None, on_cpu, usable_cores())
    if notice:
        print(notice, file=sys.stderr, flush=True)
    if out is None:  # every rank must name the same directory: fix the timestamped default here
        from flamingo_sim.fl.runner.rundir import default_out_dir

        out = str(default_out_dir(cfg))
    worker = ["run", args.experiment, "--out", out, *[a for s in args.overrides for a in ("--set", s)], "--engine", args.engine]
    for flag, value in (("--seeds", args.seeds), ("--device", args.device), ("--threads", args.threads),
                        ("--executors", args.executors or None), ("--collective-timeout-s", args.collective_timeout_s)):
        if value is not None:
            worker += [flag, str(value)]
    if args.resume:
        worker.append("--resume")
    again = f"continue it with: {continue_command(args, out)}"
    try:
        launch(args.nproc, worker)
    except FlamingoError as exc:
        resumable = (Path(out) / "config.yaml").is_file()
        raise FlamingoError(f"{exc}" + (f"; {again}" if resumable else "")) from None
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the agent stopped every rank
        exc.hint = again  # type: ignore[attr-defined]  # printed by the CLI
        raise
    return 0


def _pack_data(args: argparse.Namespace) -> int:
    import sys

    from flamingo_sim.errors import ConfigError

    if args.verify is not None:
        if args.experiment is not None or args.out is not None or args.overrides or args.workers is not None:
            raise ConfigError("--verify DIR checks a pack and takes no EXPERIMENT, --out, --set or --workers")
        from flamingo_sim.fl.data.pipeline import verify_pack

        print(verify_pack(args.verify))
        return 0
    if args.experiment is None or args.out is None:
        raise ConfigError("give an EXPERIMENT and --out DIR (or --verify DIR)")
    from flamingo_sim.fl.compose.datasets import pack_experiment

    info = pack_experiment(args.experiment, args.out, args.overrides, args.workers, log=lambda msg: print(msg, file=sys.stderr))
    print(info.describe())
    return 0
