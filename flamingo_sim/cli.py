"""The ``flamingo-sim`` command line: parses arguments, calls the library, prints errors as one line.

An OS error is ``error: PATH: reason (ERRNO_NAME)`` with exit code 2; SIGTERM is handled as
SIGINT (the same clean-up, a line saying how to continue, exit code 128 + the signal).

Each subpackage owns the arguments of its own commands in its ``cli`` module, which exposes
``register(subparsers)``; the heavy imports happen inside the handlers, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, NoReturn, Sequence

from flamingo_sim import __version__
from flamingo_sim.errors import FlamingoError, in_cli_terms
from flamingo_sim.faults import Interrupted, describe_os_error, last_stop_signal, stop_signals
from flamingo_sim.resources import name_shipped

#: Modules whose ``register(subparsers)`` adds commands, in the order ``--help`` lists them.
COMMAND_MODULES = (
    "flamingo_sim.traces.cli",
    "flamingo_sim.devices.cli",
    "flamingo_sim.fl.cli",
    "flamingo_sim.report.cli",
    "flamingo_sim.studies.cli",
)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one line, ``PROG: error: MESSAGE`` with exit code 2, like every other
    refusal: argparse prints the usage block (up to 16 lines for ``prep-traces``) before it, which buries the line that
    says what was wrong. Subparsers are of the parent's class, so every command's flags get this."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = OneLineParser(
        prog="flamingo-sim",
        description="Trace-driven federated-learning simulator for real phones (battery, energy, CPU cores).",
    )
    parser.add_argument("--version", action="version", version=f"flamingo-sim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command in ``argv`` (default: this process's arguments); the exit code.

    As the process's own entry point (``argv`` None), the command leaves through :func:`_leave`:
    the interpreter's own end (other threads joined, ``atexit`` handlers run, output flushed) without
    the native libraries' tear-down after it, where their thread pools can abort a process whose
    command has finished (Arrow's parquet thread pool: "terminate called without an active
    exception", SIGABRT, apache/arrow#34314; Ray's threads: a segmentation fault after a SIGTERM),
    replacing the exit code the command chose."""
    code = _main(argv)
    if argv is None:
        _leave(code)
    return code


def _leave(code: int) -> None:
    """Join this process's other (non-daemon) threads as the interpreter does (after threading's own exit
    calls, which e.g. wake ``concurrent.futures`` workers), run the ``atexit`` handlers, flush, and leave
    with ``code`` before the native tear-down (:func:`main`). After Ray (``--executor ray``,
    ``--engine flower``): stop Ray if it is up and leave at once, as Ray's own exit handlers and
    threads can crash the process after a SIGTERM (a segmentation fault, found by a test)."""
    import atexit
    import os
    import threading

    try:
        ray: Any = sys.modules.get("ray")
        if ray is not None:
            if ray.is_initialized():
                ray.shutdown()
        else:  # the interpreter's own two steps, in its order: threading's exit calls, then the join; then atexit
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed (a broken pipe)
                pass
        os._exit(code)


#: What precedes a command to paste in a message: that command is left as it is.
_AGAIN = "continue it with: "


def _user_terms(message: str, args: argparse.Namespace) -> str:
    """``message`` in the terms of the command line: flags for parameter names (:func:`in_cli_terms`) and
    shipped experiments by name, except in a command given to paste, which is already the user's own."""
    head, sep, command = message.partition(_AGAIN)
    return name_shipped(in_cli_terms(head, getattr(args, "cli_flags", {}))) + sep + command


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a study's "continue it with" repeats its command
    try:
        with stop_signals():
            return int(args.func(args) or 0)
    except FlamingoError as exc:
        print(f"flamingo-sim {args.command}: error: {_user_terms(str(exc), args)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `flamingo-sim profiles --json | head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # a full disk, a read-only mount, a permission: one line, never a traceback
        print(f"flamingo-sim {args.command}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (docker stop, a batch scheduler)
        signum = exc.signum if isinstance(exc, Interrupted) else (last_stop_signal() or signal.SIGINT)
        hint = getattr(exc, "hint", None)
        hint = _user_terms(hint, args) if hint else None
        name = signal.Signals(signum).name
        import os

        from flamingo_sim.fl.distributed.world import LAUNCHER_ENV

        if signum == signal.SIGTERM and os.environ.get(LAUNCHER_ENV) == "1":  # a rank the launcher stopped: it says so, once
            return 128 + signum
        print(f"flamingo-sim {args.command}: interrupted ({name})" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
