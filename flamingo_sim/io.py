"""Atomic writes and progress: the only places the package touches output files and the terminal.

Every output is written to a temporary sibling and renamed into place, so an interrupted run
never leaves a half-written file; a directory of outputs is staged in a temporary sibling
directory and swapped in whole. Outputs get the permissions of a normal write (the umask).

Temporary siblings carry the writer's PID (``.NAME.PID.XXXX.tmp``, ``.NAME.PID.XXXX.staging``,
``.NAME.PID.XXXX.old``): those of a writer that is no longer alive (killed) are removed on the
next write of the same name (:func:`clean_stale`).

A directory this tool replaces as a whole (``--out`` of ``prep-traces``, ``synth-greenhub``,
``report``) holds a manifest, :data:`MANIFEST`; :func:`atomic_dir` replaces only a directory
that is empty or holds that manifest, so a user's own files are never deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from flamingo_sim.errors import FlamingoError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

__all__ = ["MANIFEST", "OutputError", "atomic_dir", "atomic_path", "check_out_dir", "clean_stale", "progress", "write_json", "as_written", "LineProgress",
           "WriteBehind"]

#: The file that marks a directory as this tool's output (its kind inside).
MANIFEST = ".flamingo-sim.json"
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.(?P<kind>tmp|staging|old)$")
_LEGACY_TEMP = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]+\.(?P<kind>tmp|staging|old)$")


class OutputError(FlamingoError):
    """An output path that would replace something this tool did not write."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is untouched. Stale temporary
    files of ``path`` left by a killed writer are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path.parent, path.name)
    tmp_path: Path | None = None
    try:  # the temporary is made inside the try: a Ctrl-C between its creation and the yield still removes it
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
        tmp_path = Path(tmp)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual permissions
        os.close(fd)
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        _name(exc, path)
        raise
    finally:
        if tmp_path is not None:
            tmp_path.unlink(missing_ok=True)


class WriteBehind:
    """Writes done one at a time in a thread of their own, so that the caller goes on while the disk works.

    For the saves a unit makes every few rounds (its result file, its checkpoint, the run's running
    ``metrics.parquet``, its progress file): the caller makes what is written (bytes, texts, rows that are
    never changed afterwards) and :meth:`submit` hands over a function that only writes it, with
    :func:`atomic_path`, so that a file is whole or as it was, whatever stops the process. :meth:`submit` first
    waits for the write before it: writes land in the order they were made, at most one in flight. :meth:`wait`
    waits for the one in flight and raises its error, if it had one, in the caller's thread (``quiet``: drops it,
    for a caller already on its way out with an error of its own). The thread is not a daemon: an interpreter
    that exits waits for its write.
    """

    def __init__(self, name: str = "write-behind") -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write: Callable[[], None]) -> None:
        """Wait for the write in flight (raising its error), then start ``write`` in a thread."""
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread by wait()
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"flamingo-sim {self.name}")
        self._thread.start()

    @property
    def busy(self) -> bool:
        """Whether a write is in flight."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, quiet: bool = False) -> None:
        """Wait for the write in flight, if any; raise its error here (``quiet``: drop it)."""
        if self._thread is not None:
            self._thread.join()  # cleared only once joined: a wait that a Ctrl-C cut short can be waited again
            self._thread = None
        error, self._error = self._error, None
        if error is not None and not quiet:
            raise error


def _name(exc: OSError, path: Path) -> None:
    """An OS error while writing ``path`` names ``path`` (not a temporary) where it names no file."""
    if exc.filename is None or _TEMP.match(Path(str(exc.filename)).name):
        exc.filename = str(path)


def check_out_dir(path: str | Path, kind: str, flag: str = "out_dir") -> Path:
    """Refuse ``path`` unless it is absent, an empty directory, or a ``kind`` output of this tool.

    Raises :class:`OutputError` with one line saying how to choose another path.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return path
    if not path.is_dir():
        raise OutputError(f"{flag} {path}: exists and is not a directory; refusing to replace it - choose a new directory path")
    entries = [p.name for p in path.iterdir()]
    if not entries:
        return path
    found = _manifest_kind(path)
    if found == kind:
        return path
    what = f"a flamingo-sim {found}, not a {kind}" if found else f"files flamingo-sim did not write (no {MANIFEST})"
    raise OutputError(f"{flag} {path}: holds {what}; refusing to replace it - choose a new or empty directory")


def _manifest_kind(path: Path) -> str | None:
    try:
        doc = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return doc.get("kind") if isinstance(doc, dict) and doc.get("written_by") == "flamingo-sim" else None


@contextlib.contextmanager
def atomic_dir(path: str | Path, kind: str, flag: str = "out_dir") -> Iterator[Path]:
    """Yield an empty staging directory; on success it replaces ``path`` as a whole.

    ``path`` must be absent, empty or an earlier ``kind`` output (:func:`check_out_dir`); the
    staged directory gets the manifest. Files already in ``path`` that the staged output does
    not contain are removed with the old directory; on an exception the staging directory is
    removed and ``path`` is untouched.
    """
    path = Path(path)
    check_out_dir(path, kind, flag)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path.parent, path.name)
    stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".staging", dir=path.parent))
    os.chmod(stage, 0o777 & ~_umask())  # mkdtemp makes 0700; outputs get the usual permissions
    try:
        yield stage
        (stage / MANIFEST).write_text(json.dumps({"written_by": "flamingo-sim", "kind": kind}) + "\n")
        check_out_dir(path, kind, flag)  # again: something may have appeared while staging
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(stage, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(stage, path)
    except OSError as exc:
        _name(exc, path)
        raise
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def clean_stale(directory: str | Path, name: str | None = None, *, recursive: bool = False, mine: bool = False) -> list[Path]:
    """Remove temporary siblings (of ``name``, else of any file) whose writer is no longer alive.

    Temporaries without a PID (written before PIDs were recorded) count as stale; with ``mine``,
    so do this process's own (a run stopped by a signal, whose writes are no longer in flight:
    one that struck inside a write's clean-up can leave its temporary). Returns the removed paths.
    """
    directory = Path(directory)
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if recursive and entry.is_dir() and not entry.name.startswith("."):
            removed += clean_stale(entry, name, recursive=True, mine=mine)
            continue
        m = _TEMP.match(entry.name)
        legacy = None if m else _LEGACY_TEMP.match(entry.name)
        match = m or legacy
        if match is None or (name is not None and match["name"] != name):
            continue
        if m is not None and _alive(int(m["pid"])) and not (mine and int(m["pid"]) == os.getpid()):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def json_item_text(item: Any) -> str:
    """``item`` as :func:`write_json` writes it as an element of a list that is a value of the top-level object: its
    own indented JSON, each line after the first shifted right by the two levels it sits at (JSON strings hold no raw
    line breaks, so every newline is one of the layout's). A writer that rewrites a growing list keeps these, so that
    each element is encoded once (:func:`write_json_with_items`)."""
    return json.dumps(item, indent=2, sort_keys=False, default=_json_default).replace("\n", "\n    ")


def write_json_with_items(path: str | Path, obj: dict[str, Any], key: str, item_texts: list[str]) -> None:
    """``write_json(path, {**obj, key: items})``, byte for byte, with the list ``obj[key]`` given as its items'
    :func:`json_item_text` (its place in ``obj`` keeps the key's order; its value there is not read); atomically.

    Why: a unit's result file is rewritten whole every few rounds with every round so far, and the indented encoder
    is pure Python: encoding only the new rounds' rows keeps that cost from growing with the run."""
    slot = f"\x00{key}\x00"  # a string no value holds: its JSON text (with the NULs escaped) appears once
    text = json.dumps({k: slot if k == key else v for k, v in obj.items()}, indent=2, sort_keys=False, default=_json_default)
    marker = json.dumps(slot)
    if key not in obj or text.count(marker) != 1:  # never with flamingo-sim's own values; still written right
        write_json(path, {**obj, key: [json.loads(t) for t in item_texts]})
        return
    items = "[\n    " + ",\n    ".join(item_texts) + "\n  ]" if item_texts else "[]"
    with atomic_path(path) as tmp:
        tmp.write_text(text.replace(marker, items) + "\n")


def as_written(obj: Any) -> Any:
    """``obj`` as :func:`write_json` writes it and ``json.load`` reads it back (numpy scalars as numbers, tuples as lists)."""
    return json.loads(json.dumps(obj, default=_json_default))


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class ProgressBar(Protocol[T_co]):
    """What callers use of a tqdm bar: iterate it, or update it by hand."""

    def __iter__(self) -> Iterator[T_co]: ...
    def update(self, n: float = 1) -> object: ...
    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...
    def close(self) -> None: ...


def progress(
    iterable: Iterable[T] | None, *, desc: str, total: int | None = None, unit: str = "it", stream: Any = None, **kwargs: Any
) -> ProgressBar[T]:
    """Progress on stderr: a tqdm bar on a terminal, plain periodic lines otherwise (a log file).

    Silent when ``FLAMINGO_SIM_QUIET`` is set. ``iterable`` None: a bar updated by hand
    (``update``), of ``total`` steps (None: unknown). Both kinds offer ``update(n)``,
    ``set_postfix_str(text)`` and ``close()``.
    """
    stream = sys.stderr if stream is None else stream
    disable = bool(os.environ.get("FLAMINGO_SIM_QUIET"))
    if not disable and not (hasattr(stream, "isatty") and stream.isatty()):
        return LineProgress(iterable, desc=desc, total=total, unit=unit, stream=stream, initial=int(kwargs.get("initial", 0)))
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=disable, file=stream, dynamic_ncols=True, **kwargs)


class LineProgress(Generic[T]):
    """Progress as whole lines, for output that is not a terminal.

    A line ``desc: n/total unit (p %) postfix`` is written each time another tenth of ``total``
    is done, or :data:`LINE_EVERY_S` seconds after the last line, and once at ``close`` if the
    count moved since the last line. With a total, a line also says the time left at the pace so
    far (``(0 %, about 27777:45:05 left)``) once it is a second or more.
    """

    def __init__(self, iterable: Iterable[T] | None, *, desc: str, total: int | None, unit: str, stream: Any, initial: int = 0) -> None:
        import time

        self._clock = time.monotonic
        self.iterable, self.desc, self.total, self.unit, self.stream = iterable, desc, total, unit, stream
        self.n = initial
        self._start_n, self._start_at = initial, self._clock()
        self.postfix = ""
        self._printed_n = initial
        self._printed_at = self._clock()
        self._closed = False

    def __iter__(self) -> Iterator[T]:
        for item in self.iterable or ():
            yield item
            self.update(1)
        self.close()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def update(self, n: float = 1) -> None:
        before = self.n
        self.n += int(n)
        tenth = (lambda k: 10 * k // self.total) if self.total else (lambda k: 0)
        if tenth(self.n) > tenth(before) or self._clock() - self._printed_at >= LINE_EVERY_S:
            self._line()

    def close(self) -> None:
        if not self._closed and self.n != self._printed_n:
            self._line()
        self._closed = True

    def _line(self) -> None:
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = ""
        if self.total:
            done, elapsed = self.n - self._start_n, self._clock() - self._start_at
            left_s = elapsed / done * (self.total - self.n) if done > 0 and self.n < self.total else 0.0
            s = int(round(left_s))
            left = f", about {s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d} left" if s >= 1 else ""
            share = f" ({100 * self.n / self.total:.0f} %{left})"
        tail = f" {self.postfix}" if self.postfix else ""
        print(f"{self.desc}: {count} {self.unit}{share}{tail}", file=self.stream, flush=True)
        self._printed_n, self._printed_at = self.n, self._clock()


#: Seconds between two progress lines when output is not a terminal (unless a tenth is done first).
LINE_EVERY_S = 30.0
