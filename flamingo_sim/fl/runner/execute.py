"""Running units of work (:mod:`flamingo_sim.fl.runner.units`): here, as processes of this machine, or on Ray.

- ``jobs=1`` (the default): one unit after another in this process, the policies of a seed
  sharing its components, as a single run always did;
- ``jobs=N``, ``executor="local"``: up to N processes at once, each running
  ``python -m flamingo_sim.fl.runner.worker`` (the same :func:`~flamingo_sim.fl.runner.units.run_unit`)
  for one unit, or for the policies of one seed when there are at least two such batches per
  job (:func:`_batches`: one process start and one build of the seed's components for both);
- ``executor="ray"``: each unit a Ray task asking for its CPUs (and a GPU where it trains on
  one), on the cluster at ``ray_address`` / ``RAY_ADDRESS`` or on a local Ray instance.

Why processes of our own command on this machine rather than a pool of reused workers
(``concurrent.futures`` or joblib/loky): a worker sets its torch thread budget before torch
starts and keeps nothing from another study's units; a worker that crashes or is killed fails
only its own units (a reused pool marks itself broken and fails every unit it holds); and the
processes to stop on Ctrl-C are exactly the ones started here, each in its own session, stopped
with SIGTERM and then SIGKILL, and killed by the kernel if this process dies first
(``PR_SET_PDEATHSIG``). The cost is the start of each process (importing torch, building the
seed's components: about 3.5 s of CPU), small against a unit's rounds. On a cluster, Ray is the engine; nothing of our own runs there but the
unit itself.

Results do not depend on the executor or on the order in which units finish: each unit's
randomness is its own (per seed and round), it writes only its own files, and
:func:`~flamingo_sim.fl.runner.results.gather` reads them in the config's order.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flamingo_sim.errors import ConfigError, FlamingoError
from flamingo_sim.fl.runner.units import UNITS_DIR, Unit, read_status, unit_result

__all__ = ["EXECUTORS", "Failure", "Progress", "check_executor", "execute", "unit_threads", "auto_jobs", "RAY_HINT"]

EXECUTORS = ("local", "ray")
RAY_HINT = "pip install 'flamingo-sim[cluster]'"
#: Seconds a stopped child gets to end on SIGTERM before it is killed.
STOP_GRACE_S = 8.0


@dataclass(frozen=True)
class Failure:
    """A unit that did not finish, and why (one line)."""

    unit: Unit
    error: str

    def describe(self) -> str:
        return f"{self.unit.label} failed: {self.error} (run directory {self.unit.run_dir}, log {self.unit.path('.log')})"


def unit_threads(cfg: Any, jobs: int) -> int:
    """The CPU threads of one unit when ``jobs`` run at once: ``fl.threads``, else
    ``OMP_NUM_THREADS``, else 1 for the proxy task, else the usable cores shared out."""
    from flamingo_sim.fl.training.device import usable_cores

    if cfg.fl.threads is not None:
        return int(cfg.fl.threads)
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return 1 if cfg.data.root is None else max(1, usable_cores() // jobs)


def auto_jobs(cfgs: Sequence[Any]) -> int:
    """``--jobs auto``: the usable cores divided by the largest run's threads (at least 1)."""
    from flamingo_sim.fl.training.device import usable_cores

    return max(1, usable_cores() // max(unit_threads(cfg, 1) for cfg in cfgs))


# -- progress ------------------------------------------------------------------------------------
def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Units done, running and failed, and the time left estimated from the finished ones.

    On a terminal, one line per running unit and a total, redrawn in place; otherwise a line
    when a unit starts, ends or fails, and the total every :attr:`every_s` seconds.
    ``show=False``: only failures are said (a single run's own progress bars show the rest).
    """

    every_s = 30.0

    def __init__(self, total: int, done: int, jobs: int, say: Callable[[str], None], *, show: bool = True,
                 stream: Any = None) -> None:
        self.total, self.done, self.jobs, self.say, self.show = total, done, jobs, say, show
        self.stream = sys.stderr if stream is None else stream
        self.tty = show and hasattr(self.stream, "isatty") and self.stream.isatty() and not os.environ.get("FLAMINGO_SIM_QUIET")
        self.failed: list[Failure] = []
        self.running: dict[Unit, float] = {}
        self.durations: list[float] = []
        self.drawn = 0
        self.last_total = time.monotonic()

    def _fraction(self, unit: Unit) -> float:
        status = read_status(unit)
        if status is None or not status[1]:
            return 0.0
        return min(1.0, status[0] / status[1])

    def eta_s(self) -> float | None:
        """Seconds left: the mean finished unit's wall time times the work left, over the jobs."""
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        queued = self.total - self.done - len(self.failed) - len(self.running)
        left = queued * mean + sum(max(0.0, mean * (1.0 - self._fraction(u))) for u in self.running)
        return left / max(1, min(self.jobs, queued + len(self.running)))

    def summary(self) -> str:
        eta = self.eta_s()
        return (f"units: {self.done}/{self.total} done, {len(self.running)} running, {len(self.failed)} failed"
                + ("" if eta is None or not (self.running or self.done < self.total) else f", about {_clock(eta)} left"))

    def _line(self, msg: str) -> None:
        self._erase()
        if self.show:
            self.say(msg)

    def start(self, unit: Unit) -> None:
        self.running[unit] = time.monotonic()
        if not self.tty:
            self._line(f"[{self.done + len(self.failed) + len(self.running)}/{self.total}] {unit.label}: started")

    def finish(self, unit: Unit) -> None:
        t0 = self.running.pop(unit, None)
        if t0 is not None:
            self.durations.append(time.monotonic() - t0)
        self.done += 1
        if not self.tty:
            self._line(f"{unit.label}: done ({self.summary()})")

    def fail(self, unit: Unit, error: str) -> None:
        self.running.pop(unit, None)
        failure = Failure(unit, error)
        self.failed.append(failure)
        self._erase()
        self.say(failure.describe())

    def tick(self) -> None:
        if not self.show:
            return
        if self.tty:
            self._draw()
        elif time.monotonic() - self.last_total >= self.every_s:
            self.last_total = time.monotonic()
            self.say(self.summary())

    def _draw(self) -> None:
        lines = []
        for unit in self.running:
            status = read_status(unit)
            where = "starting" if status is None else f"round {status[0]}" + (f"/{status[1]}" if status[1] else "")
            lines.append(f"  {unit.label}: {where}")
        lines.append(self.summary())
        self._erase()
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self.drawn = len(lines)

    def _erase(self) -> None:
        if self.tty and self.drawn:
            self.stream.write(f"\x1b[{self.drawn}F\x1b[J")
            self.stream.flush()
            self.drawn = 0

    def close(self) -> None:
        self._erase()
        if self.show and self.total > 1:
            self.say(self.summary())


# -- executors -----------------------------------------------------------------------------------
def execute(
    units: Sequence[Unit],
    *,
    jobs: int,
    say: Callable[[str], None],
    in_process: Callable[[Unit], None],
    executor: str = "local",
    ray_address: str | None = None,
    keep_going: bool = True,
    show: bool = True,
    shared_dir: Path | None = None,
) -> list[Failure]:
    """Run every unit not finished yet; the ones that failed (each already said through ``say``).

    ``in_process(unit)`` runs one unit in this process (``jobs=1``, local); ``keep_going=False``
    lets its first error propagate instead. ``shared_dir``: where Ray's workers must write
    (checked with a probe file before any unit starts). Ctrl-C or SIGTERM stops every unit
    started here (their finished work stays) and propagates.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    pending = [u for u in units if unit_result(Path(u.run_dir) / UNITS_DIR, u.policy, u.seed) is None]
    progress = Progress(len(units), len(units) - len(pending), jobs, say, show=show)
    if not pending:
        return []
    try:
        if executor == "ray":
            _run_ray(pending, jobs, ray_address, progress, shared_dir)
        elif jobs == 1:
            _run_here(pending, in_process, progress, keep_going)
        else:
            _run_local(pending, jobs, progress)
    finally:
        progress.close()
    return progress.failed


def _one_line(exc: BaseException) -> str:
    from flamingo_sim.faults import describe_os_error

    if isinstance(exc, FlamingoError):
        return str(exc)
    if isinstance(exc, OSError):
        return describe_os_error(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _run_here(pending: Sequence[Unit], in_process: Callable[[Unit], None], progress: Progress, keep_going: bool) -> None:
    for unit in pending:
        progress.start(unit)
        try:
            in_process(unit)
        except Exception as exc:
            if not keep_going:
                raise
            progress.fail(unit, _one_line(exc))
        else:
            progress.finish(unit)


def _child_env(unit: Unit) -> dict[str, str]:
    from flamingo_sim.fl.runner.worker import package_root

    env = dict(os.environ)
    env["FLAMINGO_SIM_QUIET"] = "1"
    env["OMP_NUM_THREADS"] = str(unit.threads)
    env["PYTHONPATH"] = os.pathsep.join([str(package_root()), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _error_of(unit: Unit, returncode: int) -> str:
    """Why a unit's process ended without a result: the signal that killed it, or its error line."""
    try:
        lines = [ln for ln in unit.path(".log").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    errors = [ln for ln in lines if ln.startswith("error: ")]
    if errors:
        return errors[-1][len("error: "):]
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}" + ("" if read_status(unit) is not None else " before it started")
    if returncode == 0:
        return "ended without writing its result"
    return f"exited with code {returncode}" + (f": {lines[-1]}" if lines else "")


def _batches(pending: Sequence[Unit], jobs: int) -> list[list[Unit]]:
    """What each worker process runs: the policies of one (run, seed) together when that still
    leaves two batches per job (they share the seed's components and one process start), else
    one unit each; the costliest first, so that the cheap ones fill the end."""
    by_seed: dict[tuple[str, int], list[Unit]] = {}
    for unit in pending:
        by_seed.setdefault((unit.run_dir, unit.seed), []).append(unit)
    batches = list(by_seed.values()) if len(by_seed) >= 2 * jobs else [[u] for u in pending]
    return sorted(batches, key=lambda b: -sum(u.cost for u in b))


def _run_local(pending: Sequence[Unit], jobs: int, progress: Progress) -> None:
    from flamingo_sim.fl.runner.worker import worker_command

    queue = collections.deque(_batches(pending, jobs))
    running: dict[subprocess.Popen, list[Unit]] = {}
    waiting: set[Unit] = set()  # launched, not yet started (a later unit of a batch)
    try:
        while queue or running:
            while queue and len(running) < jobs:
                batch = queue.popleft()
                for unit in batch:
                    unit.path(".log").parent.mkdir(parents=True, exist_ok=True)
                    unit.path(".log").write_text("")
                    unit.path(".status").unlink(missing_ok=True)
                with open(batch[0].path(".log"), "a") as log:  # the child holds its own descriptor
                    proc = subprocess.Popen(worker_command(batch), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=_child_env(batch[0]), start_new_session=True)
                running[proc] = batch
                progress.start(batch[0])
                waiting.update(batch[1:])
            for proc in [p for p in running if p.poll() is not None]:
                for unit in running.pop(proc):
                    waiting.discard(unit)
                    if unit_result(Path(unit.run_dir) / UNITS_DIR, unit.policy, unit.seed) is not None:
                        progress.finish(unit)
                    else:
                        progress.fail(unit, _error_of(unit, proc.returncode))
            for unit in [u for u in waiting if read_status(u) is not None]:
                waiting.discard(unit)
                progress.start(unit)
            progress.tick()
            time.sleep(0.2)
    finally:
        _stop(list(running))


def _stop(procs: Sequence[subprocess.Popen]) -> None:
    """SIGTERM to each child's session, SIGKILL to what is left after :data:`STOP_GRACE_S`; reaps them all."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in procs if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
            time.sleep(0.05)
    for p in procs:
        p.wait()


# -- Ray -----------------------------------------------------------------------------------------
def check_executor(executor: str) -> None:
    """Before any work: ``executor`` is known, and Ray is installed when it is asked for."""
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor == "ray":
        _import_ray()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray: Ray is not installed; install it with: {RAY_HINT}") from None
    return ray


def _run_ray(pending: Sequence[Unit], jobs: int, address: str | None, progress: Progress, shared_dir: Path | None) -> None:
    import logging

    from flamingo_sim.fl.runner.worker import package_root, run_logged

    ray = _import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
        if address is None:  # a local instance: its workers import this package as this process does
            os.environ["PYTHONPATH"] = os.pathsep.join([str(package_root()), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
            options["num_cpus"] = jobs * max((u.threads for u in pending), default=1)
        ours = signal.getsignal(signal.SIGTERM)
        try:
            ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"--executor ray: cannot reach the Ray cluster at {address or 'a new local instance'}: {_one_line(exc)}") from None
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, ours)  # ray.init installs its own (sys.exit): SIGTERM stays a clean stop
    refs: dict[Any, Unit] = {}
    try:
        if shared_dir is not None:
            _probe_shared(ray, shared_dir)
        task = ray.remote(run_logged)
        for unit in pending:
            unit.path(".log").parent.mkdir(parents=True, exist_ok=True)
            unit.path(".log").write_text("")
            unit.path(".status").unlink(missing_ok=True)
            ref = task.options(num_cpus=unit.threads, num_gpus=1 if unit.gpu else 0, max_retries=0, retry_exceptions=False,
                               name=unit.label).remote(unit.to_json())
            refs[ref] = unit
        queued = set(refs.values())
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                unit = refs.pop(ref)
                if unit in queued:
                    queued.discard(unit)
                    progress.start(unit)
                try:
                    error = ray.get(ref)
                except ray.exceptions.RayError as exc:  # a crashed worker, a lost node, a cancelled task
                    error = _one_line(exc)
                if error is None:
                    progress.finish(unit)
                else:
                    progress.fail(unit, error)
            for unit in [u for u in queued if read_status(u) is not None]:
                queued.discard(unit)
                progress.start(unit)
            progress.tick()
    finally:
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a task that ended meanwhile; stopping the rest matters more
                pass
        if started:
            ray.shutdown()


def _probe_shared(ray: Any, directory: Path) -> None:
    """Refuse (one line) unless a worker on every Ray node can write into ``directory`` and this
    process can read what it wrote: the units' results must come back."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from flamingo_sim.fl.runner.worker import write_probe

    directory.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
    task = ray.remote(write_probe)
    probes = {n["NodeID"]: directory / f".ray-probe-{token[:8]}-{i}" for i, n in enumerate(nodes)}
    refs = [task.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
            .remote(str(probes[n["NodeID"]]), token) for n in nodes]
    try:
        try:
            wrote = ray.get(refs, timeout=120)
        except ray.exceptions.GetTimeoutError:
            raise ConfigError("--executor ray: the Ray nodes did not answer a probe within 120 s (is the cluster busy?)") from None
        except ray.exceptions.RayError as exc:
            raise ConfigError(f"{directory}: a Ray worker cannot write here ({_one_line(exc)}); put --out on a filesystem every "
                              "node mounts at the same path") from None
        for node, host in zip(nodes, wrote):
            path = probes[node["NodeID"]]
            if not path.is_file() or path.read_text() != token:
                raise ConfigError(f"{directory}: not on a filesystem every Ray worker sees (the worker on {host} wrote {path.name}, "
                                  "this machine cannot read it); put --out on a filesystem every node mounts at the same path")
    finally:
        for path in probes.values():
            path.unlink(missing_ok=True)
