"""Atomic writes and progress: the only places the package touches output files and the terminal.

Every output is written to a temporary sibling and renamed into place, so an interrupted run
never leaves a half-written file; a directory of outputs is staged in a temporary sibling
directory and swapped in whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

__all__ = ["atomic_path", "atomic_dir", "write_json", "progress"]


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory; on success it replaces ``path`` as a whole.

    Files already in ``path`` that the staged output does not contain are removed with the old
    directory; on an exception the staging directory is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".staging", dir=path.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(stage, 0o777 & ~umask)  # mkdtemp makes 0700; outputs get the usual permissions
    try:
        yield stage
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(stage, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(stage, path)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


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


def progress(iterable: Iterable[T] | None, *, desc: str, total: int | None = None, unit: str = "it", **kwargs: Any) -> ProgressBar[T]:
    """A progress bar on stderr (tqdm); silent when ``FLAMINGO_SIM_QUIET`` is set.

    ``iterable`` None: a bar updated by hand (``update``), of ``total`` steps (None: unknown).
    """
    from tqdm.auto import tqdm

    disable = bool(os.environ.get("FLAMINGO_SIM_QUIET"))
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=disable, file=sys.stderr, dynamic_ncols=True, **kwargs)
