"""``--jobs N`` on this machine: N long-lived worker processes, started once, fed units one at a time.

The workers are forked by multiprocessing's forkserver, a parent process that imported torch,
pandas and the package once (:data:`~flamingo_sim.fl.runner.worker.PRELOAD`): a worker is ready
in a fraction of a second instead of the seconds a fresh interpreter takes to import them, and a
worker that crashed is replaced as cheaply. Each worker (:func:`~flamingo_sim.fl.runner.worker.serve`)
runs the units sent to it one after another and keeps the components of the last (run, seed) it
built; the scheduler (:func:`pick`) sends a free worker the next unit of the seed it holds, else
the first unit of a seed no other worker is on, costliest first, so that a seed's components are
built about once per study.

Why this holds up as well as a process per unit did: a unit runs with its own torch thread
budget (set before each unit, ``OMP_NUM_THREADS`` and torch's threads), its randomness is its
own (per seed and round) and the components it reuses are the ones the policies of a seed share
in one process anyway (``--jobs 1``), so the results do not change; a worker that crashes or is
killed fails only the unit it held (its log says so) and another worker takes its place; on
Ctrl-C or SIGTERM every worker gets SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`; a worker
is ended by the kernel if its parent goes (``PR_SET_PDEATHSIG``), and the forkserver ends with
the study's process.

``FLAMINGO_SIM_SCHEDULE=PATH`` (for measurements): one JSON line per event (a worker started or
ready, with its start-up seconds; a unit sent or done, with its wall seconds, whether it reused
the seed's components or how long it took to build them, and the worker's CPU seconds so far),
each with the worker, the seconds since the pool started and the wall-clock time, appended to ``PATH``.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from flamingo_sim.fl.runner.executors.progress import Progress
from flamingo_sim.fl.runner.units import UNITS_DIR, Unit, read_status, unit_result

__all__ = ["run_pool", "pick", "warm_up", "error_of", "STOP_GRACE_S", "SCHEDULE_ENV"]

#: Seconds a stopped worker gets to end on SIGTERM before it is killed.
STOP_GRACE_S = 8.0
#: The environment variable naming the schedule file (measurements only).
SCHEDULE_ENV = "FLAMINGO_SIM_SCHEDULE"


def _context() -> Any:
    from flamingo_sim.fl.runner.worker import PRELOAD

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def warm_up() -> None:
    """Start the forkserver (it imports :data:`~flamingo_sim.fl.runner.worker.PRELOAD`) without
    waiting for it: the study's process meanwhile validates its configs."""
    _context()
    multiprocessing.forkserver.ensure_running()


@dataclass
class _Worker:
    """One worker process, the pipe to it, the unit it runs and the (run, seed) whose components it holds."""

    index: int
    process: Any
    conn: Any
    ready: bool = False
    unit: Unit | None = None
    holds: tuple[str, int] | None = None
    sent_at: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)


def pick(queue: Sequence[Unit], holds: tuple[str, int] | None, busy: set[tuple[str, int]]) -> int:
    """Which unit of ``queue`` (costliest first) a free worker holding ``holds`` takes: the first
    of its own seed, else the first of a seed no worker in ``busy`` is on, else the first."""
    for i, u in enumerate(queue):
        if (u.run_dir, u.seed) == holds:
            return i
    for i, u in enumerate(queue):
        if (u.run_dir, u.seed) not in busy:
            return i
    return 0


def error_of(unit: Unit, exitcode: int | None) -> str:
    """Why a unit's worker ended without a result: its error line, else the signal that killed it or its exit code."""
    try:
        lines = [ln for ln in unit.path(".log").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    errors = [ln for ln in lines if ln.startswith("error: ")]
    if errors:
        return errors[-1][len("error: "):]
    if exitcode is not None and exitcode < 0:
        return f"killed by {signal.Signals(-exitcode).name}" + ("" if read_status(unit) is not None else " before it started")
    if exitcode == 0:
        return "ended without writing its result"
    return f"exited with code {exitcode}" + (f": {lines[-1]}" if lines else "")


class _Schedule:
    """The events of the pool, appended to ``$FLAMINGO_SIM_SCHEDULE`` when it is set."""

    def __init__(self) -> None:
        self.path = os.environ.get(SCHEDULE_ENV) or None
        self.t0 = time.monotonic()

    def __call__(self, event: str, worker: int, **data: Any) -> None:
        if self.path is not None:
            line = {"event": event, "worker": worker, "t_s": round(time.monotonic() - self.t0, 4), "at": round(time.time(), 4), **data}
            with open(self.path, "a") as fh:
                fh.write(json.dumps(line) + "\n")


def _order(pending: Sequence[Unit]) -> list[Unit]:
    """The costliest seed first, a seed's units together, otherwise in the config's order."""
    groups: dict[tuple[str, int], list[Unit]] = {}
    for unit in pending:
        groups.setdefault((unit.run_dir, unit.seed), []).append(unit)
    return [u for g in sorted(groups.values(), key=lambda g: -max(u.cost for u in g)) for u in g]


def run_pool(pending: Sequence[Unit], jobs: int, progress: Progress) -> None:
    """Run ``pending`` on up to ``jobs`` workers; each unit reported to ``progress``."""
    ctx = _context()
    log = _Schedule()
    queue = _order(pending)
    workers: list[_Worker] = []
    started = 0
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1"}
    try:
        while queue or any(w.unit is not None for w in workers):
            while len(workers) < min(jobs, len(queue) + sum(w.unit is not None for w in workers)):
                here, there = ctx.Pipe()
                from flamingo_sim.fl.runner.worker import serve

                proc = ctx.Process(target=serve, args=(there, time.time()), name=f"flamingo-sim worker {started}", daemon=False)
                proc.start()
                there.close()
                workers.append(_Worker(started, proc, here))
                log("start", started, pid=proc.pid)
                started += 1
            busy = {w.holds for w in workers if w.unit is not None and w.holds is not None}
            for w in workers:
                if w.ready and w.unit is None and queue:
                    unit = queue.pop(pick(queue, w.holds, busy))
                    for suffix in (".log", ".status"):
                        unit.path(suffix).parent.mkdir(parents=True, exist_ok=True)
                    unit.path(".log").write_text("")
                    unit.path(".status").unlink(missing_ok=True)
                    env["OMP_NUM_THREADS"] = str(unit.threads)
                    w.conn.send((unit.to_json(), dict(env)))
                    w.unit, w.holds, w.sent_at = unit, (unit.run_dir, unit.seed), time.monotonic()
                    busy.add(w.holds)
                    progress.start(unit)
                    log("send", w.index, unit=unit.name, run=Path(unit.run_dir).name)
            ready = multiprocessing.connection.wait([w.conn for w in workers] + [w.process.sentinel for w in workers], timeout=0.2)
            for w in list(workers):
                if w.conn in ready or w.process.sentinel in ready:
                    _answer(w, workers, progress, log)
            progress.tick()
    finally:
        _stop(workers)


def _answer(w: _Worker, workers: list[_Worker], progress: Progress, log: _Schedule) -> None:
    """Read what worker ``w`` said (or see that it ended) and report its unit."""
    msg = None
    try:
        if w.conn.poll():
            msg = w.conn.recv()
    except (EOFError, OSError):
        msg = None
    if msg is not None and msg[0] == "ready":
        w.ready = True
        log("ready", w.index, start_up_s=round(msg[1], 4))
        return
    if msg is not None and msg[0] == "done":
        _, error, timing = msg
        unit, w.unit = w.unit, None
        assert unit is not None
        log("done", w.index, unit=unit.name, run=Path(unit.run_dir).name, error=error, **timing)
        if error is None and unit_result(Path(unit.run_dir) / UNITS_DIR, unit.policy, unit.seed) is not None:
            progress.finish(unit)
        else:
            progress.fail(unit, error or "ended without writing its result")
        return
    # EOF or the process ended (crashed, killed): its unit fails alone; a new worker takes its place when needed
    w.process.join(timeout=1.0)
    if w.process.exitcode is None:
        return
    workers.remove(w)
    w.conn.close()
    log("died", w.index, exitcode=w.process.exitcode)
    if w.unit is not None:
        progress.fail(w.unit, error_of(w.unit, w.process.exitcode))


def _stop(workers: Sequence[_Worker]) -> None:
    """Idle workers are told to stop; busy ones get SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`; all are reaped."""
    for w in workers:
        if w.unit is None:
            try:
                w.conn.send(None)
            except (OSError, ValueError):
                pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [w for w in workers if w.unit is not None and w.process.is_alive()]
        for w in alive:
            try:
                os.killpg(w.process.pid, sig)  # the worker leads its own session: its children too
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while any(w.process.is_alive() for w in alive) and time.monotonic() < deadline:
            time.sleep(0.05)
    for w in workers:
        w.process.join(timeout=STOP_GRACE_S)
        if w.process.is_alive():
            w.process.kill()
            w.process.join()
        w.conn.close()
