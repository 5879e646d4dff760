"""The built-in aggregators' names and parameters, in a module without torch, so that an experiment
config is checked (:class:`~flamingo_sim.fl.config.AggregationConfig`) before torch is imported."""

from __future__ import annotations

#: The parameters each registered aggregator takes besides ``weighting``, with their defaults.
AGGREGATOR_PARAMETERS: dict[str, dict[str, float]] = {
    "fedavg": {},
    "fedprox": {"mu": 0.01},
    "fedadam": {"server_lr": 0.01, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3},
    "fedyogi": {"server_lr": 0.01, "beta1": 0.9, "beta2": 0.99, "tau": 1e-3},
}
