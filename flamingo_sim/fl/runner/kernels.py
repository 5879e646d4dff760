"""The CPU kernels and threads of a run's process: pinned before its first kernel, and the line that says where it trains.

:func:`pin_run_kernels` is called by every process that trains for a run (the run's own, a
``--jobs`` worker that did not inherit them, a Ray task on another node, Flower's client), so
their results do not depend on where they ran; :func:`training_on` sets the threads.
"""

from __future__ import annotations

from flamingo_sim.fl.config import ExperimentConfig

__all__ = ["pin_run_kernels", "training_on"]


def pin_run_kernels(cfg: ExperimentConfig) -> tuple[str, str | None]:
    """Pin the CPU kernels ``fl.cpu_kernels`` asks for (portable for the proxy task by default), before
    this process's first kernel; the capability in use and, where it could not be pinned, a line saying so."""
    from flamingo_sim.fl.training.device import pin_cpu_kernels, portable_kernels

    return pin_cpu_kernels(portable_kernels(cfg.fl.cpu_kernels, real_data=cfg.data.root is not None))


def training_on(cfg: ExperimentConfig, capability: str) -> str:
    """Set torch's CPU threads for the run; the line that says where it trains."""
    from flamingo_sim.fl.training.device import resolve_device, set_threads

    n_threads = set_threads(cfg.fl.threads, small_model=cfg.data.root is None)
    where = resolve_device(cfg.fl.device)
    import torch

    hardware = f"({torch.cuda.get_device_name(where)})" if where.type == "cuda" else f"with {n_threads} CPU thread(s)"
    return f"training on {where} {hardware}, precision {cfg.fl.precision}, {capability} CPU kernels"
