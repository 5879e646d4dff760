"""The rules a federated job's round loop follows: :class:`RoundRules`.

:class:`~flamingo_sim.fl.sim.simulation.Simulation` and its FedBuff variant read these and
nothing else of the experiment: the FL job (cohort, steps, minibatch, learning rate, deadline,
evaluation cadence, rounds or horizon, the training device and strategy), the battery rule
(offline below ``traces.min_pct`` until ``traces.reentry_pct``, how charging is read), the device
limits, FedBuff's buffer, the model's transfer size, the network section (how transfers are priced,
:mod:`flamingo_sim.fl.sim.network`), the owner-in-use threshold and the training app's state. The rest of
the experiment (data, phones, policies, selection, aggregation, tracking, seeds) is turned into
the loop's parts before it starts (:func:`flamingo_sim.fl.compose.build_components`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flamingo_sim.fl.config import DevicesConfig, ExperimentConfig, FedBuffConfig, FLConfig, NetworkConfig, TracesConfig


@dataclass(frozen=True)
class RoundRules:
    """What the round loop reads of an experiment (every part frozen)."""

    fl: FLConfig  # the FL job: K, overcommit, local steps, minibatch, lr, deadline, eval_every, rounds / horizon, device, training
    traces: TracesConfig  # min_pct, reentry_pct, charge_state
    devices: DevicesConfig  # heat and memory
    fedbuff: FedBuffConfig  # with fl.mode: fedbuff
    model_size_mb: float  # one model transfer, each way (resolved: never None here)
    in_use_threshold: float  # policy.interference.in_use_threshold: the owner is using the phone above it
    device_cache_gb: float | None  # data.device_cache_gb: clients' samples kept on the GPU
    network: NetworkConfig = NetworkConfig()  # how transfers are priced, who is reachable
    app_state: str = "foreground_service"  # policy.interference.app_state: the low-memory killer's level for the training app

    @classmethod
    def of(cls, cfg: ExperimentConfig) -> RoundRules:
        """The rules of ``cfg``, whose ``network.model_size_mb`` must be resolved (``build_components`` does)."""
        if cfg.network.model_size_mb is None:
            raise ValueError("network.model_size_mb is unset; flamingo_sim.fl.compose.build_components resolves it")
        return cls(fl=cfg.fl, traces=cfg.traces, devices=cfg.devices, fedbuff=cfg.fedbuff, model_size_mb=cfg.network.model_size_mb,
                   in_use_threshold=cfg.policy.interference.in_use_threshold, device_cache_gb=cfg.data.device_cache_gb,
                   network=cfg.network, app_state=cfg.policy.interference.app_state)


def cohort_size(k: int, overcommit: float, available: int) -> int:
    """``ceil(k x overcommit)`` clients, at most the ``available`` ones: an over-commitment larger than
    the population (even one whose product overflows, ``fl.overcommit: 1e308``) selects every one available."""
    want = k * overcommit
    return available if want >= available else math.ceil(want)
