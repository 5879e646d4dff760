"""Faults the CLI turns into one line: OS errors, a second writer, a signal to stop.

- :func:`check_writable`: decide before any work that an output location can be written
  (not under a file, not on a read-only mount, not in ``/proc``);
- :func:`describe_os_error`: ``PATH: reason (ERRNO_NAME)``, saying so when the disk is full;
- :func:`run_lock`: one writer per run directory (``fcntl.flock`` on ``DIR/.lock``, which
  holds the writer's PID); a second writer gets one line naming that PID;
- :func:`stop_signals`: SIGTERM is handled like SIGINT (a ``KeyboardInterrupt`` that remembers
  the signal), so the same clean-up runs and the exit code says which signal it was.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flamingo_sim.errors import FlamingoError

__all__ = ["LOCK_FILE", "Interrupted", "NotWritable", "check_writable", "describe_os_error", "is_disk_full", "last_stop_signal",
           "run_lock", "stop_signals"]

LOCK_FILE = ".lock"
#: errno values that mean "no room to write" (a full disk, a quota, a file-size limit).
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: unwinds like Ctrl-C; ``signum`` says which (exit code 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The signal :func:`stop_signals` last turned into :class:`Interrupted` (0: none yet).
_last_stop = [0]


def last_stop_signal() -> int:
    """The last signal :func:`stop_signals` caught (0: none): for a ``KeyboardInterrupt`` that a
    library raised anew in place of ours (Ray's wait turns any interruption into a plain one)."""
    return _last_stop[0]


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """While active, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread."""

    def handler(signum: int, _frame: Any) -> None:
        _last_stop[0] = signum
        raise Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    _last_stop[0] = 0
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _errno_of(exc: OSError) -> int | None:
    if exc.errno is not None:
        return exc.errno
    m = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)  # pyarrow puts it in the message only
    return int(m.group(1)) if m else None


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is an OS error meaning the disk (or quota, or file-size limit) is full."""
    return isinstance(exc, OSError) and _errno_of(exc) in DISK_FULL


def describe_os_error(exc: OSError, path: str | Path | None = None) -> str:
    """``PATH: reason (ERRNO_NAME)`` of an OS error, one line; ``path`` where the error names none."""
    code = _errno_of(exc)
    where = exc.filename if exc.filename is not None else path
    if code is not None:
        reason = os.strerror(code)
    elif exc.strerror:
        reason = exc.strerror
    else:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    name = errno.errorcode.get(code, str(code)) if code is not None else type(exc).__name__
    if isinstance(exc, NotWritable):  # the path the user gave, then why: the folder that refused and the reason
        reason = f"{exc.why}: {reason}"
    line = f"{where}: {reason} ({name})" if where is not None else f"{reason} ({name})"
    if code in DISK_FULL:
        line += "; the disk is full (or a quota or file-size limit is reached): free space, nothing half-written was kept"
    return line


class NotWritable(OSError):
    """An output location that cannot be written: ``filename`` is the path the user gave, ``where`` the
    existing folder in which writing failed; :func:`describe_os_error` names both."""

    def __init__(self, code: int | None, strerror: str | None, given: str, where: Path, why: str | None = None) -> None:
        super().__init__(code, strerror, given)
        self.where = where
        self.why = why or f"cannot write in {where}"


def check_writable(path: str | Path, *, directory: bool = True) -> None:
    """Raise ``OSError`` now (before any work) unless ``path`` can be created or written.

    ``path`` is a directory to create or fill (``directory=True``) or a file to write. Creates
    and removes a probe file in the nearest existing ancestor; creates nothing else.
    """
    given = path
    path = Path(path).absolute()
    if path.exists():
        if directory and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
        if not directory and path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    probe_dir = path if directory and path.is_dir() else path.parent
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise NotWritable(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(given), probe_dir, f"{probe_dir} is a file")
    probe = probe_dir / f".flamingo-sim-probe.{os.getpid()}.w.tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise NotWritable(exc.errno, exc.strerror, str(given), probe_dir) from None
    os.close(fd)
    os.unlink(probe)


@contextlib.contextmanager
def run_lock(run_dir: str | Path) -> Iterator[Path]:
    """Hold an exclusive lock on ``run_dir`` (created if missing) while the block runs.

    A second holder is refused with :class:`FlamingoError` naming the first one's PID. The
    lock file stays (removing it would let two writers lock two different files).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / LOCK_FILE
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            for _ in range(20):  # the holder writes its PID just after locking
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                if holder:
                    break
                time.sleep(0.01)
            raise FlamingoError(
                f"{run_dir}: another flamingo-sim process (PID {holder or '?'}) is writing this run directory; "
                "wait for it to end or choose another out_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield lock
    finally:
        os.close(fd)  # releases the lock
