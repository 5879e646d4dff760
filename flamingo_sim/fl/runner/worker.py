"""Units of work (:class:`~flamingo_sim.fl.runner.units.Unit`) in a process of their own.

``python -m flamingo_sim.fl.runner.worker PARENT_PID UNIT_JSON...`` is what ``--jobs N`` starts
on this machine: the units given (the policies of one seed, when there are units enough to keep
every job busy: they share the seed's components, as in one run), one after the other;
:func:`run_logged` is what a Ray task calls for one unit. Both run
:func:`~flamingo_sim.fl.runner.units.run_unit`, log into ``units/<policy>-seed<k>.log`` and turn
an error into one line, ``error: ...`` last in that log (and returned by the Ray task). A unit
that fails does not stop the next one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Sequence

from flamingo_sim.errors import FlamingoError
from flamingo_sim.faults import Interrupted, describe_os_error, stop_signals
from flamingo_sim.fl.runner.units import PartsCache, Unit, run_unit

__all__ = ["run_logged", "write_probe", "worker_command", "main"]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run(unit: Unit, cache: PartsCache | None) -> str | None:
    """Run ``unit``; None when it finished, else its error in one line (a traceback goes to the log)."""
    try:
        run_unit(unit, say=_say, cache=cache, progress_bar=False)
    except FlamingoError as exc:
        return str(exc)
    except OSError as exc:
        return describe_os_error(exc)
    except Exception as exc:  # a bug or a library's error: the traceback in the log, its last line reported
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return None


def run_logged(unit_json: str, cache: PartsCache | None = None) -> str | None:
    """Run one unit with its log appended to ``units/<name>.log``; its error line or None (a Ray task's body)."""
    unit = Unit.from_json(unit_json)
    log = unit.path(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    os.environ["FLAMINGO_SIM_QUIET"] = "1"
    with open(log, "a") as fh, contextlib.redirect_stderr(fh), contextlib.redirect_stdout(fh):
        error = _run(unit, cache)
        if error is not None:
            _say(f"error: {error}")
    return error


def write_probe(path: str, token: str) -> str:
    """A Ray task's probe of the output directory: write ``token`` into ``path``; this host's name."""
    import socket

    Path(path).write_text(token)
    return socket.gethostname()


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to end this process with SIGKILL when its parent ends, however the parent
    ends (even by SIGKILL); nothing where ``prctl`` is not available (not Linux)."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent ended before the signal was armed
        os._exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """``worker PARENT_PID UNIT_JSON...``: exit 0 when every unit finished, 2 when one failed (its
    log ends with ``error: ...``), 128 + the signal when stopped by SIGINT or SIGTERM."""
    args = list(sys.argv[1:] if argv is None else argv)
    _die_with_parent(int(args[0]))
    cache = PartsCache()
    failed = False
    try:
        with stop_signals():
            for text in args[1:]:
                failed = run_logged(text, cache) is not None or failed
    except KeyboardInterrupt as exc:
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    return 2 if failed else 0


def worker_command(units: Sequence[Unit]) -> list[str]:
    """The command line that runs ``units`` in a child process of this one."""
    return [sys.executable, "-m", "flamingo_sim.fl.runner.worker", str(os.getpid()), *(u.to_json() for u in units)]


def package_root() -> Path:
    """The directory holding this ``flamingo_sim`` package (put first on a child's PYTHONPATH)."""
    return Path(__file__).resolve().parents[3]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
