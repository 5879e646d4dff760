"""Executors: where a study's units of work run (``--executor``), behind one contract.

- :mod:`~flamingo_sim.fl.runner.executors.base`         the contract (:class:`Executor`, :class:`Dispatch`) and the optional parts' defaults;
- :mod:`~flamingo_sim.fl.runner.executors.progress`     the progress every executor reports to, a failed unit's line;
- :mod:`~flamingo_sim.fl.runner.executors.local`        ``local``: this process (``jobs=1``) or a pool of workers;
- :mod:`~flamingo_sim.fl.runner.executors.pool`         the pool: long-lived worker processes forked from a preloaded parent;
- :mod:`~flamingo_sim.fl.runner.executors.ray_cluster`  ``ray``: each unit a Ray task.

:func:`make_executor` builds one by name: a built-in name (:data:`BUILTIN`), an import path
``package.module:ClassName``, or a name registered by an installed package under the entry-point
group ``flamingo_sim.executors``.
"""

from __future__ import annotations

from typing import Any

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.executors.base import Dispatch, Executor

__all__ = ["BUILTIN", "EXECUTORS", "ENTRY_POINTS", "Dispatch", "Executor", "make_executor"]

#: The shipped executors: name -> ``module:Class``.
BUILTIN = {
    "local": "flamingo_sim.fl.runner.executors.local:LocalExecutor",
    "ray": "flamingo_sim.fl.runner.executors.ray_cluster:RayExecutor",
}
EXECUTORS = tuple(BUILTIN)
#: The entry-point group where an installed package registers its executors.
ENTRY_POINTS = "flamingo_sim.executors"


def _entry_point(name: str) -> Any:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        if ep.name == name:
            try:
                return ep.load()
            except Exception as exc:  # noqa: BLE001 - a plug-in's own import error, said in one line
                raise ConfigError(f"--executor {name!r}: the entry point {ep.value!r} ({ENTRY_POINTS}) cannot be loaded: {exc}") from None
    return None


def make_executor(name: str) -> Executor:
    """The executor called ``name`` (see the module's docstring); its :meth:`~Executor.check` has run."""
    from flamingo_sim.plugins import load_object

    cls: Any = None
    if name in BUILTIN:
        cls = load_object(BUILTIN[name], "--executor", kind="executor", known=BUILTIN)
    elif ":" not in name:
        cls = _entry_point(name)
    if cls is None:
        cls = load_object(name, "--executor", kind="executor", known=BUILTIN)
    executor = cls() if isinstance(cls, type) else cls
    if not isinstance(executor, Executor):
        raise ConfigError(f"--executor {name!r}: expected a subclass of {Executor.__module__}.Executor, got {type(executor).__name__}")
    executor.check()
    return executor
