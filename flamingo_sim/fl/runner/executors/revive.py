"""The pool's own processes, when one dies: which it was, how it ended, and starting a worker anyway.

A ``--jobs N`` pool (:mod:`flamingo_sim.fl.runner.executors.pool`) owns three kinds of process:
multiprocessing's forkserver (the preloaded parent every worker is forked from), its workers,
and multiprocessing's resource tracker. Any of them can be killed from outside (the
out-of-memory killer picks the forkserver as readily as a worker):

- a worker: :func:`how_it_ended` reads its signal from its exit code;
- the forkserver: its workers end with it (they asked the kernel for ``SIGKILL`` when their parent
  goes) and report exit code 255; :func:`forkserver_ended` says how the forkserver itself ended
  (from ``/proc`` while it is a zombie, which only the pool's process may reap);
  :func:`start` starts the next worker, which starts a new forkserver (multiprocessing does when
  it finds the old one dead), waiting for the old one to be gone first (a worker's death can be
  seen a moment before its parent's) and trying again a few times;
- the resource tracker: multiprocessing starts a new one at the next worker's start with a
  two-line warning, which :func:`start` turns into one line of its own.

Nothing of the study's is lost with any of them: a unit's progress is in its checkpoint.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import signal
import time
import warnings
from typing import Any, Callable

from flamingo_sim.errors import PoolLost

__all__ = ["forkserver_pid", "forkserver_ended", "how_it_ended", "describe_exit", "start", "START_TRIES", "DEATH_WAIT_S"]

#: Attempts at starting a worker when the forkserver cannot be reached.
START_TRIES = 3
#: Seconds to wait for a dead forkserver to be gone before starting a new one.
DEATH_WAIT_S = 5.0


def forkserver_pid() -> int | None:
    """The process id of this process's forkserver (None before it starts)."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    return getattr(server, "_forkserver_pid", None)


def describe_exit(status: int | None) -> str:
    """A ``waitpid``-style status, or a negative exit code (multiprocessing's), as words."""
    if status is None:
        return "ended"
    if status < 0:
        return f"was killed by {_signal_name(-status)}"
    if os.WIFSIGNALED(status):
        return f"was killed by {_signal_name(os.WTERMSIG(status))}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return "ended"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def how_it_ended(pid: int) -> str | None:
    """None while ``pid`` runs; else how it ended ("was killed by SIGKILL", "exited with code 1", or "ended"
    where it is already gone). Reads ``/proc/<pid>/stat``; where there is none (not Linux), whether it still exists."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return "ended"
    except OSError:  # no /proc: alive while a signal 0 reaches it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "ended"
        except PermissionError:
            return None
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if not fields or fields[0] not in ("Z", "X"):
        return None
    try:
        return describe_exit(int(fields[49]))  # field 52 of stat: the exit status, as waitpid reports it
    except (IndexError, ValueError):
        return "ended"


def forkserver_ended() -> str | None:
    """None while the forkserver runs (or never started); else a line naming it and how it ended."""
    pid = forkserver_pid()
    if pid is None:
        return None
    how = how_it_ended(pid)
    return None if how is None else f"the pool's forkserver (pid {pid}) {how}"


def _forget(pid: int) -> None:
    """multiprocessing's forkserver state cleared where it still names the server ``pid``, so that the next start
    launches a new one whatever the old one's state: a server that refuses connections has closed its listener (a
    running one never does), although ``waitpid`` may still find it alive while it exits; one that another waiter
    reaped makes every ``waitpid`` of multiprocessing's fail. Closing its end of the "alive" pipe also ends an old
    server that still runs. A zombie is reaped here where it is one already."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    lock = getattr(server, "_lock", None)
    if server is None or lock is None or getattr(server, "_forkserver_pid", None) != pid:
        return
    with lock:
        if getattr(server, "_forkserver_pid", None) != pid:
            return
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        alive = getattr(server, "_forkserver_alive_fd", None)
        server._forkserver_pid = server._forkserver_address = server._forkserver_alive_fd = None
        if alive is not None:
            try:
                os.close(alive)
            except OSError:
                pass


def start(process: Any, say: Callable[[str], None]) -> None:
    """``process.start()`` (a forkserver context's process), surviving a dead forkserver or resource tracker.

    A forkserver that cannot be reached is waited for until gone (at most :data:`DEATH_WAIT_S`), forgotten where it
    refused the connection or is gone (:func:`_forget`), and the start tried again (multiprocessing then starts a new
    forkserver), :data:`START_TRIES`
    times in all; then :class:`~flamingo_sim.errors.PoolLost` names the forkserver, how it
    ended and the last error. A relaunched resource tracker is said in one line.
    """
    for attempt in range(1, START_TRIES + 1):
        pid = forkserver_pid()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                process.start()
            for w in caught:
                if "resource_tracker" in str(w.message):
                    say("the pool's resource tracker had died; multiprocessing started a new one")
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return
        except (EOFError, OSError) as exc:
            deadline = time.monotonic() + DEATH_WAIT_S
            while pid is not None and how_it_ended(pid) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid is not None and (isinstance(exc, (ConnectionRefusedError, ChildProcessError)) or how_it_ended(pid) is not None):
                _forget(pid)
            if attempt == START_TRIES:
                what = forkserver_ended() or (f"the pool's forkserver (pid {pid}) did not answer" if pid else "the pool's forkserver did not start")
                reason = f"{type(exc).__name__}: {exc}".rstrip(": ") if str(exc) else type(exc).__name__
                raise PoolLost(f"{what} and could not be started again ({reason})") from None
