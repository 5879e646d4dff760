"""Executors: where a study's units of work run (``--executor``), behind one contract.

- :mod:`~flamingo_sim.fl.runner.executors.base`         the contract (:class:`Executor`, :class:`Dispatch`) and the optional parts' defaults;
- :mod:`~flamingo_sim.fl.runner.executors.progress`     the progress every executor reports to, a failed unit's line;
- :mod:`~flamingo_sim.fl.runner.executors.local`        ``local``: this process (``jobs=1``) or a pool of workers;
- :mod:`~flamingo_sim.fl.runner.executors.pool`         the pool: long-lived worker processes forked from a preloaded parent;
- :mod:`~flamingo_sim.fl.runner.executors.revive`       the pool's processes when one dies: which, how, and a worker started anyway;
- :mod:`~flamingo_sim.fl.runner.executors.ray_cluster`  ``ray``: each unit a Ray task.

:func:`make_executor` builds one by name: a built-in name (:data:`REGISTRY`), an import path
``package.module:ClassName``, or a name registered by an installed package under the entry-point
group ``flamingo_sim.executors`` (the plug-in shape of :mod:`flamingo_sim.plugins`).
"""

from __future__ import annotations

from flamingo_sim.fl.runner.executors.base import CONTRACT, Dispatch, Executor
from flamingo_sim.fl.runner.executors.local import LocalExecutor
from flamingo_sim.fl.runner.executors.ray_cluster import RayExecutor
from flamingo_sim.plugins import Registry

__all__ = ["EXECUTORS", "REGISTRY", "Dispatch", "Executor", "make_executor"]

#: The shipped executors (neither imports its engine until it runs: Ray only for ``ray``).
REGISTRY = Registry(CONTRACT, {"local": LocalExecutor, "ray": RayExecutor})
EXECUTORS = tuple(REGISTRY.builtin)


def make_executor(name: str) -> Executor:
    """The executor called ``name`` (see the module's docstring), checked against the contract
    (a missing optional part gets its default) and ready to run here (:meth:`Executor.check`)."""
    plugin = REGISTRY.load(name, "--executor")
    if isinstance(plugin, type):  # held to the contract before it is made (a class lacking run is abstract)
        executor: Executor = REGISTRY.build(name, None, source="", key="--executor", params_key="--executor")
    else:
        executor = REGISTRY.check(plugin, name, "--executor")
    executor.check()
    return executor
