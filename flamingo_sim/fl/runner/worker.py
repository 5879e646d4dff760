"""Units of work (:class:`~flamingo_sim.fl.runner.unit_files.Unit`) in a process other than the study's.

:func:`serve` is a long-lived worker of ``--jobs N`` on this machine
(:mod:`flamingo_sim.fl.runner.executors.pool`): forked with torch and the package already
imported, it runs unit after unit sent to it, keeping the last seed's components;
:func:`run_logged` is what it and a Ray task call for one unit. Both run
:func:`~flamingo_sim.fl.runner.units.run_unit`, log into ``units/<policy>-seed<k>.log`` and turn
an error into one line, ``error: ...`` last in that log (and returned to the study's process).
A unit that fails does not stop the next one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

from flamingo_sim.errors import FlamingoError
from flamingo_sim.faults import Interrupted, describe_os_error, stop_signals
from flamingo_sim.fl.runner.forkserver import PRELOAD
from flamingo_sim.fl.runner.unit_files import Unit
from flamingo_sim.fl.runner.units import PartsCache, run_unit, unit_parts

__all__ = ["run_logged", "write_probe", "serve", "PRELOAD", "package_root"]


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


@contextlib.contextmanager
def _into_log(path: Path) -> Iterator[None]:
    """Standard output and error, at the descriptor level (torch's C++ warnings too), into ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(path, "a") as fh:
            os.dup2(fh.fileno(), 1)
            os.dup2(fh.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def _check_kernels(env: dict[str, str]) -> str | None:
    """None when this process runs the CPU kernels the parent runs (``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``), else why not."""
    wanted = env.get("ATEN_CPU_CAPABILITY")
    if not wanted:
        return None
    import torch

    from flamingo_sim.fl.training.device import PORTABLE_MKL_BRANCH, portable_mkl_pinned

    used = torch.backends.cpu.get_cpu_capability()
    if used.lower() != wanted.lower():
        return f"this worker runs {used} CPU kernels, the run asks for {wanted} (a kernel ran before the worker could pin them)"
    if env.get("MKL_CBWR") == PORTABLE_MKL_BRANCH and not portable_mkl_pinned():
        return f"this worker's MKL runs its own code path, the run asks for MKL_CBWR={PORTABLE_MKL_BRANCH} (a product ran before the worker could pin it)"
    return None


def _build(unit_json: str, cache: PartsCache) -> str | None:
    """Build (and keep) a unit's components, as a study's validation of its run; its error line or None."""
    try:
        unit_parts(Unit.from_json(unit_json), cache)
    except FlamingoError as exc:
        return str(exc)
    except OSError as exc:
        return describe_os_error(exc)
    except Exception as exc:  # a bug or a library's error: the traceback to the worker's error stream
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return None


#: The (run, seed) components a worker keeps: a study's validation may leave it two seeds to start from.
WORKER_CACHE = 2


def serve(conn: Any, started: float) -> None:
    """A long-lived worker of ``--jobs N`` (:mod:`flamingo_sim.fl.runner.executors.pool`), forked from
    the pool's parent process with :data:`PRELOAD` imported.

    Protocol over ``conn`` (a :func:`multiprocessing.Pipe`): first this worker sends
    ``("ready", start_up_s)``; then it receives ``(kind, unit_json, env)`` (``env``: the command's
    environment, applied first) and answers ``(kind, error_or_None, timing)``: ``"build"`` builds
    the unit's components (a study validating its runs before it writes anything), ``"run"`` runs
    the unit (``timing``: its wall seconds, whether it reused its seed's components or the seconds
    it took to build them, this worker's CPU seconds so far); until it receives None or the pipe
    closes. The components of the last :data:`WORKER_CACHE` (run, seed) pairs stay cached
    (:class:`~flamingo_sim.fl.runner.units.PartsCache`): a unit of such a seed does not build them
    again. SIGINT and SIGTERM end the worker with 128 + the signal; it ends with SIGKILL when
    its parent does (``PR_SET_PDEATHSIG``), and on its own when the study's process goes (the pipe closes).
    """
    os.setsid()  # Ctrl-C at the terminal reaches the study's process, which stops the workers
    _die_with_parent(os.getppid())
    cache = PartsCache(WORKER_CACHE)
    conn.send(("ready", time.time() - started))
    checked = False
    try:
        with stop_signals():
            while True:
                try:
                    msg = conn.recv()
                except EOFError:  # the study's process is gone
                    _leave(0)
                if msg is None:
                    _leave(0)
                kind, unit_json, env = msg
                os.environ.update(env)
                unit = Unit.from_json(unit_json)
                t0 = time.perf_counter()
                hit = cache.get(unit.run_dir, unit.seed) is not None
                error = None if checked else _check_kernels(env)
                checked = error is None
                if error is None and kind == "build":
                    error = _build(unit_json, cache)
                elif error is None:
                    with _into_log(unit.path(".log")):
                        error = run_logged(unit_json, cache)
                elif kind == "run":
                    with _into_log(unit.path(".log")):
                        _say(f"error: {error}")
                cpu = os.times()
                conn.send((kind, error, {"wall_s": round(time.perf_counter() - t0, 4), "reused": hit,
                                         "build_s": 0.0 if hit else round(cache.built_s, 4), "cpu_s": round(cpu.user + cpu.system, 3)}))
    except KeyboardInterrupt as exc:
        _leave(128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT))


def _leave(code: int) -> None:
    """End this worker now: every file it wrote is complete (written atomically), and a library's
    non-daemon thread (a thread pool of the data loaders) must not hold the exit for seconds."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def package_root() -> Path:
    """The directory holding this ``flamingo_sim`` package (put first on a child's PYTHONPATH)."""
    return Path(__file__).resolve().parents[3]
