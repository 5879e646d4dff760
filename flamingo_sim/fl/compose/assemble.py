"""A simulation assembled: the config of a run, and one (policy, seed) put together on a seed's parts.

:func:`resolve_config` reads the run's config (the experiment, its overrides, its seeds);
:func:`compose` puts the experiment's policy, selector and aggregator
(:mod:`flamingo_sim.fl.plugins`) on a seed's parts (:func:`~flamingo_sim.fl.compose.parts.build_components`)
and returns the :class:`~flamingo_sim.fl.sim.simulation.Simulation` that runs its rounds. Every
engine (native, FedScale, Flower), the distributed ranks and the check before a run build through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from flamingo_sim.fl.compose.parts import build_components
from flamingo_sim.fl.config import ExperimentConfig, load_experiment, with_seeds
from flamingo_sim.fl.plugins import experiment_aggregator, experiment_policy, experiment_selector, policy_name
from flamingo_sim.fl.sim.simulation import Components, Simulation

__all__ = ["compose", "resolve_config"]


def resolve_config(experiment: str | Path, overrides: Sequence[str], n_seeds: int | None) -> ExperimentConfig:
    """The run's config: the experiment with its overrides, ``n_seeds`` seeds from its first one."""
    return with_seeds(load_experiment(experiment, list(overrides)), n_seeds)


def compose(
    cfg: ExperimentConfig,
    experiment: str | Path | None,
    seed: int,
    policy: str,
    *,
    parts: Components | None = None,
    log: Callable[[str], None] = lambda _m: None,
    simulation: type[Simulation] = Simulation,
) -> Simulation:
    """A fresh simulation of ``policy`` for ``seed``: the one place a run's parts are put together.

    ``parts``: the seed's :class:`~flamingo_sim.fl.sim.simulation.Components` when already built
    (the policies of one seed share them), else built here (:func:`build_components`). The policy,
    the selector and the aggregator come from the config's sections (``policy``, ``fl.selection``
    with ``selector``, ``aggregation``); ``fl.mode: fedbuff`` gives FedBuff's
    :class:`~flamingo_sim.fl.sim.fedbuff.AsyncSimulation`, else ``simulation`` (a subclass of
    :class:`~flamingo_sim.fl.sim.simulation.Simulation`: Flower's strategy reports Flower's
    evaluation through one). Every engine (native, FedScale, Flower), the distributed ranks and
    the up-front validation (:func:`~flamingo_sim.fl.runner.plan.check_composition`) build through here.
    """
    if parts is None:
        parts = build_components(cfg, experiment, seed, log=lambda _m: None)
    selector = experiment_selector(cfg, experiment)
    built = experiment_policy(cfg, experiment, policy)
    if cfg.fl.mode == "fedbuff":
        from flamingo_sim.fl.sim.fedbuff import AsyncSimulation

        return AsyncSimulation(parts, built, policy_name(policy, built), seed, selector, log=log)
    aggregator = experiment_aggregator(cfg, experiment, [b for b, _ in parts.model.named_buffers()])
    return simulation(parts, built, policy_name(policy, built), seed, selector, log=log, aggregator=aggregator)
