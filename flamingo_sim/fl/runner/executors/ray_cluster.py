"""``--executor ray``: each unit a Ray task, on the cluster at ``--ray-address`` / ``RAY_ADDRESS`` or a local instance.

Each task asks for its unit's CPUs (and a GPU where it trains on one) and runs
:func:`~flamingo_sim.fl.runner.worker.run_logged`; nothing of our own runs on the cluster but
the unit itself. Before any unit starts, a probe checks that a worker on every node can write
the output directory and that this process reads what it wrote (the results come back
through it).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import uuid
from pathlib import Path
from typing import Any, Sequence

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.executors.base import Dispatch, Executor
from flamingo_sim.fl.runner.executors.progress import Progress, one_line
from flamingo_sim.fl.runner.unit_files import Unit, read_status

__all__ = ["RayExecutor", "RAY_HINT", "RAY_CONNECT_TIMEOUT_S", "check_ray_address"]

RAY_HINT = "pip install 'flamingo-sim[cluster]'"


class RayExecutor(Executor):
    """Units as Ray tasks (``--executor ray``)."""

    name = "ray"
    workers = "Ray"

    def check(self) -> None:
        _import_ray()

    def run(self, pending: Sequence[Unit], dispatch: Dispatch) -> None:
        _run_ray(pending, dispatch.jobs, dispatch.address, dispatch.progress, dispatch.shared_dir)


#: Seconds to wait for a Ray cluster's port to accept a connection.
RAY_CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str | None) -> None:
    """Refuse (one line) a ``host:port`` or ``ray://host:port`` address where nothing accepts a TCP
    connection within :data:`RAY_CONNECT_TIMEOUT_S`: ``ray.init`` would otherwise retry an address
    where nothing listens for minutes. ``None``, ``auto`` and ``local`` pass (Ray finds or starts its own)."""
    if address is None or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"--ray-address: expected host:port, ray://host:port, auto or local, got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(f"--executor ray: cannot reach the Ray cluster at {address}: nothing accepts a connection at {host}:{port} "
                          f"({reason}, within {RAY_CONNECT_TIMEOUT_S:g} s)") from None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray: Ray is not installed; install it with: {RAY_HINT}") from None
    return ray


def _run_ray(pending: Sequence[Unit], jobs: int, address: str | None, progress: Progress, shared_dir: Path | None) -> None:
    """Each unit a Ray task asking for its CPUs (and a GPU where it trains on one)."""
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
            raise ConfigError(f"--executor ray: cannot reach the Ray cluster at {address or 'a new local instance'}: {one_line(exc)}") from None
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
                    error = one_line(exc)
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
            raise ConfigError(f"{directory}: a Ray worker cannot write here ({one_line(exc)}); put --out on a filesystem every "
                              "node mounts at the same path") from None
        for node, host in zip(nodes, wrote):
            path = probes[node["NodeID"]]
            if not path.is_file() or path.read_text() != token:
                raise ConfigError(f"{directory}: not on a filesystem every Ray worker sees (the worker on {host} wrote {path.name}, "
                                  "this machine cannot read it); put --out on a filesystem every node mounts at the same path")
    finally:
        for path in probes.values():
            path.unlink(missing_ok=True)
