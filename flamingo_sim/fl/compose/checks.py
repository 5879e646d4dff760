"""A config checked against where its values are used: the data, the population, the traces and the machine.

The experiment file's own ranges (:mod:`flamingo_sim.fl.config`) judge each value alone; these
checks judge it against what it meets, before the run directory is touched, each refusal one line
naming the file and the key, with the rule it broke:

- :func:`check_fit` (the data, the population, the traces; called where a seed's parts are built):
  ``fl.participants_per_round`` at most the clients; ``fedbuff.concurrency`` at most the clients;
  ``fl.batch_size`` at most the largest client's samples (a client with fewer samples than the
  batch repeats some within a batch, as :mod:`flamingo_sim.fl.training.trainer` says; a batch
  larger than every client would repeat samples in every batch of every client); and every
  client's model transfers (``network.*``) finite and no longer than the traces' wrap-free
  horizon (a round cannot outlast the traces it replays), for every seed of the run;
- :func:`check_machine` (the machine that runs it): ``fl.threads`` at most its logical CPUs (torch
  crashes the process with 100,000); ``fl.memory_budget_gb`` at most the memory of the device it
  trains on.

The run's length is judged by :mod:`flamingo_sim.fl.runner.estimate`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import ExperimentConfig

__all__ = ["check_fit", "check_machine"]

GIB = float(1 << 30)


def check_fit(cfg: ExperimentConfig, samples_per_client: np.ndarray, horizon_s: float, model_size_mb: float, src: str) -> None:
    """The sizes of ``cfg`` against its clients' ``samples_per_client``, and its transfers against the
    traces' wrap-free ``horizon_s``, for every seed in ``cfg.seeds`` (see the module docstring)."""
    n_clients = int(len(samples_per_client))
    fl = cfg.fl
    if fl.participants_per_round > n_clients:
        raise ConfigError(f"{src}: fl.participants_per_round: expected at most the {n_clients:,} clients of the data, "
                          f"got {fl.participants_per_round:,}")
    if cfg.fl.mode == "fedbuff" and cfg.fedbuff.concurrency is not None and cfg.fedbuff.concurrency > n_clients:
        raise ConfigError(f"{src}: fedbuff.concurrency: expected at most the {n_clients:,} clients of the data (each trains one "
                          f"task at a time), got {cfg.fedbuff.concurrency:,}")
    largest = int(np.max(samples_per_client))
    if fl.batch_size > largest:
        raise ConfigError(f"{src}: fl.batch_size: expected at most {largest:,}, the samples of the largest client, got {fl.batch_size:,} "
                          "(a client with fewer samples than the batch repeats some of them within a batch; a batch larger than "
                          "every client would repeat samples in every batch)")
    _check_transfers(cfg, n_clients, horizon_s, model_size_mb, src)


def _check_transfers(cfg: ExperimentConfig, n_clients: int, horizon_s: float, model_size_mb: float, src: str) -> None:
    """Every client's model transfers (down and up) take a finite time within the traces' wrap-free horizon."""
    from flamingo_sim.fl.sim.population import draw_bandwidths

    net = cfg.network
    for seed in cfg.seeds:
        bandwidth = draw_bandwidths(n_clients, net.bandwidth_mbps, net.bandwidth_sigma, seed)
        slowest = int(np.argmin(bandwidth))
        with np.errstate(divide="ignore", over="ignore"):
            transfer_s = 2.0 * model_size_mb * 8.0 / bandwidth[slowest]
        if not np.isfinite(transfer_s) or transfer_s > horizon_s:
            took = ("would never end" if not np.isfinite(transfer_s) else
                    f"would take {transfer_s / 3600:.3g} h, longer than the traces' wrap-free horizon of {horizon_s / 3600:.1f} h")
            raise ConfigError(
                f"{src}: network: client {slowest}'s model transfers (2 x {model_size_mb:.3g} MB at {bandwidth[slowest]:.3g} Mbit/s, "
                f"seed {seed}) {took}; bandwidths are log-normal around network.bandwidth_mbps {net.bandwidth_mbps:g} with log-sd "
                f"network.bandwidth_sigma {net.bandwidth_sigma:g}: lower the sigma or network.model_size_mb, or raise the bandwidth")


def check_machine(cfg: ExperimentConfig, device: Any, src: str) -> None:
    """``fl.threads`` and ``fl.memory_budget_gb`` against this machine (see the module docstring)."""
    cpus = os.cpu_count()
    if cfg.fl.threads is not None and cpus is not None and cfg.fl.threads > cpus:
        raise ConfigError(f"{src}: fl.threads: expected at most {cpus}, the logical CPUs of this machine, got {cfg.fl.threads:,}")
    from flamingo_sim.fl.training.memory import total_memory_bytes

    budget_gb = cfg.fl.memory_budget_gb
    memory = total_memory_bytes(device)
    if budget_gb is not None and memory is not None and budget_gb * GIB > memory:
        where = f"the memory of {device}" if getattr(device, "type", "cpu") == "cuda" else "this machine's RAM"
        raise ConfigError(f"{src}: fl.memory_budget_gb: expected at most {memory / GIB:.1f}, {where} in GiB, got {budget_gb:g}")
