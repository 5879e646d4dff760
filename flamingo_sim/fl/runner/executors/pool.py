"""``--jobs N`` on this machine: N long-lived worker processes, started once, fed units one at a time.

The workers are forked by multiprocessing's forkserver, a parent process that imported torch,
pandas and the package once (:data:`~flamingo_sim.fl.runner.forkserver.PRELOAD`): a worker is ready
in a fraction of a second instead of the seconds a fresh interpreter takes to import them, and a
worker that crashed is replaced as cheaply. Each worker (:func:`~flamingo_sim.fl.runner.worker.serve`)
runs the units sent to it one after another and keeps the components of the last (run, seed) it
built; the scheduler (:func:`pick`) sends a free worker the next unit of the seed it holds, else
the first unit of a seed no other worker is on, costliest first, so that a seed's components are
built about once per study.

Why this holds up as well as a process per unit did: a unit runs with its own torch thread
budget (set before each unit, ``OMP_NUM_THREADS`` and torch's threads), its randomness is its
own (per seed and round) and the components it reuses are the ones the policies of a seed share
in one process anyway (``--jobs 1``), so the results do not change. Losing a process
(:mod:`~flamingo_sim.fl.runner.executors.revive`): a worker killed by a signal, or taken down
with the forkserver, has its unit run again once, from its last checkpoint (one line says which
process died and how), on a new worker (from a new forkserver if need be); a unit whose worker
crashed otherwise, or was killed again, fails alone (its log says so) while the others go on,
and the study's last line says how to continue; a forkserver that cannot be started again ends
the study with one line naming it and how it ended (:class:`~flamingo_sim.errors.PoolLost`). On
Ctrl-C or SIGTERM every worker gets SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`; a worker
is ended by the kernel if its parent goes (``PR_SET_PDEATHSIG``), and the forkserver ends with
the study's process.

On a machine with GPUs, each worker has a slot (0, 1, ... up to the jobs; a worker that replaces
another takes its slot) and trains a unit whose ``fl.device`` is ``auto`` or ``cuda`` on the GPU of its
slot (:func:`gpu_of`: ``CUDA_VISIBLE_DEVICES`` set to one of the GPUs this process sees, the slot modulo
their number), so ``--jobs N`` on N GPUs runs one unit per GPU; a unit pinned to ``cuda:K`` is left as it is.

``FLAMINGO_SIM_SCHEDULE=PATH`` (for measurements): one JSON line per event (a worker started or
ready, with its start-up seconds; a unit sent or done, with its wall seconds, whether it reused
the seed's components or how long it took to build them, and the worker's CPU seconds so far),
each with the worker, the seconds since the pool started and the wall-clock time, appended to ``PATH``.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.connection
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.fl.runner import forkserver
from flamingo_sim.fl.runner.executors import revive
from flamingo_sim.fl.runner.executors.progress import Progress
from flamingo_sim.fl.runner.unit_files import UNITS_DIR, Unit, read_status, unit_result
from flamingo_sim.fl.runner.worker import WORKER_CACHE

__all__ = ["Pool", "pool", "close_pool", "run_pool", "pick", "warm_up", "error_of", "visible_gpus", "gpu_of", "STOP_GRACE_S", "SCHEDULE_ENV"]

#: Seconds a stopped worker gets to end on SIGTERM before it is killed.
STOP_GRACE_S = 8.0
#: The environment variable naming the schedule file (measurements only).
SCHEDULE_ENV = "FLAMINGO_SIM_SCHEDULE"
#: How many times a unit whose worker was killed (or went with the forkserver) is run again.
RERUNS = 1
#: The exit code multiprocessing reports for a worker whose forkserver is gone (it cannot read the status).
FORKSERVER_LOST = 255


def _context() -> Any:
    return forkserver.context()


def warm_up() -> None:
    """Start the forkserver (it imports :data:`~flamingo_sim.fl.runner.forkserver.PRELOAD`) without
    waiting for it: the study's process meanwhile validates its configs."""
    forkserver.start_early()


@dataclass
class _Worker:
    """One worker process, the pipe to it, what it runs and the (run, seed) pairs whose components it holds."""

    index: int
    process: Any
    conn: Any
    ready: bool = False
    unit: Unit | None = None
    kind: str = ""
    holds: list[tuple[str, int]] = field(default_factory=list)
    server: int | None = None  # the forkserver it was forked from
    slot: int = 0  # its place among the workers: which GPU it trains on


def visible_gpus(environ: dict[str, str] | None = None) -> list[str]:
    """The GPUs this process may give its workers, as ``CUDA_VISIBLE_DEVICES`` entries: that variable's entries
    where it is set, else torch's count of CUDA devices (none without CUDA)."""
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def gpu_of(unit: Unit, slot: int, gpus: Sequence[str]) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` of the worker in ``slot`` for ``unit``: its slot's GPU for a unit on ``auto`` or
    ``cuda`` when there are GPUs; None (left as it is) for a CPU unit, a unit pinned to ``cuda:K``, or no GPU."""
    if not gpus or unit.device not in ("auto", "cuda"):
        return None
    return gpus[slot % len(gpus)]


def pick(queue: Sequence[Unit], holds: Sequence[tuple[str, int]], busy: set[tuple[str, int]]) -> int:
    """Which unit of ``queue`` (costliest first) a free worker holding the seeds ``holds`` takes: the
    first of a seed it holds, else the first of a seed no worker in ``busy`` is on, else the first."""
    for i, u in enumerate(queue):
        if (u.run_dir, u.seed) in holds:
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


class Pool:
    """Up to ``jobs`` long-lived workers, started as they are needed and kept between calls (a
    study validates its runs on them, then runs its units there); :meth:`close` stops them."""

    def __init__(self) -> None:
        self.ctx = _context()
        self.log = _Schedule()
        self.workers: list[_Worker] = []
        self.started = 0
        #: Where the pool's own lines go (a lost process, a unit run again).
        self.say: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)
        self.reruns: dict[Unit, int] = {}
        self.dead_servers: dict[int, str] = {}
        self.gpus: list[str] | None = None  # what the workers may train on (read when a unit wants a GPU)

    def _grow(self, n: int) -> None:
        from flamingo_sim.fl.runner.worker import serve

        while len(self.workers) < n:
            here, there = self.ctx.Pipe()
            proc = self.ctx.Process(target=serve, args=(there, time.time()), name=f"flamingo-sim worker {self.started}", daemon=False)
            try:
                revive.start(proc, self.say)
            except BaseException:
                here.close()
                there.close()
                raise
            there.close()
            taken = {w.slot for w in self.workers}
            slot = next(i for i in range(len(self.workers) + 1) if i not in taken)
            self.workers.append(_Worker(self.started, proc, here, server=revive.forkserver_pid(), slot=slot))
            self.log("start", self.started, pid=proc.pid)
            self.started += 1

    def _send(self, w: _Worker, kind: str, unit: Unit) -> None:
        env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "OMP_NUM_THREADS": str(unit.threads)}
        if self.gpus is None and unit.device in ("auto", "cuda"):
            self.gpus = visible_gpus()
        gpu = gpu_of(unit, w.slot, self.gpus or [])
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        w.conn.send((kind, unit.to_json(), env))
        w.unit, w.kind = unit, kind
        key = (unit.run_dir, unit.seed)
        w.holds = [k for k in w.holds if k != key][-(WORKER_CACHE - 1):] + [key] if WORKER_CACHE > 1 else [key]
        self.log("send", w.index, kind=kind, unit=unit.name, run=Path(unit.run_dir).name, slot=w.slot, gpu=gpu)

    def _loop(self, queue: list[Unit], jobs: int, kind: str, answer: Callable[[Unit, str | None, dict[str, Any] | None, int | None], None],
              progress: Progress | None = None) -> None:
        """Send every unit of ``queue`` as ``kind`` to a free worker (see :func:`pick`) until all are answered."""
        while queue or any(w.unit is not None for w in self.workers):
            self._grow(min(jobs, len(queue) + sum(w.unit is not None for w in self.workers)))
            busy = {(w.unit.run_dir, w.unit.seed) for w in self.workers if w.unit is not None}
            for w in self.workers:
                if w.ready and w.unit is None and queue:
                    unit = queue.pop(pick(queue, w.holds, busy))
                    if kind == "run" and unit not in self.reruns:  # a unit run again keeps its log
                        unit.path(".log").parent.mkdir(parents=True, exist_ok=True)
                        unit.path(".log").write_text("")
                        unit.path(".status").unlink(missing_ok=True)
                    self._send(w, kind, unit)
                    busy.add((unit.run_dir, unit.seed))
                    if progress is not None:
                        progress.start(unit)
            ready = multiprocessing.connection.wait([w.conn for w in self.workers] + [w.process.sentinel for w in self.workers], timeout=0.2)
            for w in list(self.workers):
                if w.conn in ready or w.process.sentinel in ready:
                    lost = self._answer(w, answer)
                    if lost is not None:
                        queue.insert(0, lost)
            if progress is not None:
                progress.tick()

    def _lost(self, w: _Worker) -> tuple[str, bool]:
        """Why worker ``w`` ended, and whether its unit may run again: it was killed by a signal, or went with the forkserver."""
        code = w.process.exitcode
        server = w.server
        if server is not None:
            how = self.dead_servers.get(server) or revive.how_it_ended(server)
            # a worker that lost its forkserver reports 255, and may be seen to end a moment before its parent
            deadline = time.monotonic() + (2.0 if code == FORKSERVER_LOST else 0.0)
            while how is None and time.monotonic() < deadline:
                time.sleep(0.05)
                how = revive.how_it_ended(server)
            if how is not None:
                if server not in self.dead_servers:
                    self.dead_servers[server] = how
                    self.say(f"the pool's forkserver (pid {server}) {how}; its workers ended with it; a new one is started")
                return f"its worker went down with the pool's forkserver (pid {server}, which {how})", True
        if code is not None and code < 0:
            return f"its worker (pid {w.process.pid}) {revive.describe_exit(code)}", True
        return "", False

    def _answer(self, w: _Worker, answer: Callable[[Unit, str | None, dict[str, Any] | None, int | None], None]) -> Unit | None:
        """Read what worker ``w`` said (or see that it ended) and pass its unit's outcome to ``answer``; the unit to
        run again when its worker was lost to a signal or with the forkserver (at most :data:`RERUNS` times)."""
        msg = None
        try:
            if w.conn.poll():
                msg = w.conn.recv()
        except (EOFError, OSError):
            msg = None
        if msg is not None and msg[0] == "ready":
            w.ready = True
            self.log("ready", w.index, start_up_s=round(msg[1], 4))
            return None
        if msg is not None:
            kind, error, timing = msg
            unit, w.unit = w.unit, None
            assert unit is not None
            self.log("done" if kind == "run" else "built", w.index, unit=unit.name, run=Path(unit.run_dir).name, error=error, **timing)
            answer(unit, error, timing, None)
            return None
        # EOF or the process ended (crashed, killed): a new worker takes its place when needed
        w.process.join(timeout=1.0)
        if w.process.exitcode is None:
            return None
        self.workers.remove(w)
        w.conn.close()
        self.log("died", w.index, exitcode=w.process.exitcode)
        unit = w.unit
        if unit is None:
            self._lost(w)  # an idle worker: said only if the forkserver went
            return None
        why, again = self._lost(w)
        if again and self.reruns.get(unit, 0) < RERUNS:
            self.reruns[unit] = self.reruns.get(unit, 0) + 1
            what = "runs again from its last checkpoint" if w.kind == "run" else "is built again"
            self.say(f"{unit.label}: {why}; it {what}")
            return unit
        answer(unit, why or None, None, w.process.exitcode)
        return None

    def build(self, units: Sequence[Unit], jobs: int) -> dict[Unit, str]:
        """Build each unit's components on the workers (each keeps what it built); the units whose build failed, with their error lines."""
        errors: dict[Unit, str] = {}

        def answer(unit: Unit, error: str | None, timing: dict[str, Any] | None, exitcode: int | None) -> None:
            if timing is None:
                errors[unit] = error or f"its worker ended ({error_of(unit, exitcode)})"
            elif error is not None:
                errors[unit] = error

        try:
            self._loop(list(units), jobs, "build", answer)
        except BaseException:
            self.close()
            raise
        return errors

    def run(self, pending: Sequence[Unit], jobs: int, progress: Progress) -> None:
        """Run ``pending``, each unit reported to ``progress``; on an interruption every worker is stopped."""

        def answer(unit: Unit, error: str | None, timing: dict[str, Any] | None, exitcode: int | None) -> None:
            if timing is None:
                progress.fail(unit, error or error_of(unit, exitcode))
            elif error is None and unit_result(Path(unit.run_dir) / UNITS_DIR, unit.policy, unit.seed) is not None:
                progress.finish(unit)
            else:
                progress.fail(unit, error or "ended without writing its result")

        self.say = progress.say
        try:
            self._loop(_order(pending), jobs, "run", answer, progress)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every worker (see :func:`_stop`)."""
        _stop(self.workers)
        self.workers = []


_POOL: Pool | None = None


def pool() -> Pool:
    """This process's pool (started on first use, kept until :func:`close_pool` or the process ends)."""
    global _POOL
    if _POOL is None:
        _POOL = Pool()
        atexit.register(close_pool)
    return _POOL


def close_pool() -> None:
    """Stop this process's workers, if any."""
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


def run_pool(pending: Sequence[Unit], jobs: int, progress: Progress) -> None:
    """Run ``pending`` on up to ``jobs`` workers of this process's pool, each unit reported to ``progress``;
    the workers stop afterwards (their caches belong to this study)."""
    try:
        pool().run(pending, jobs, progress)
    finally:
        close_pool()


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
    deadline = time.monotonic() + STOP_GRACE_S  # one grace for all of them, not one each
    while any(w.process.is_alive() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.02)
    for w in workers:
        if w.process.is_alive():
            w.process.kill()
        w.process.join()
        w.conn.close()
