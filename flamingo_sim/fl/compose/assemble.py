"""A simulation assembled: the config of a run, its record, and one (policy, seed) put together on a seed's parts.

:func:`resolve_config` reads the run's config (the experiment, its overrides, its seeds) once, at the
edge; :func:`config_record` is what the run directory keeps of it (``config.yaml``) and what every unit
builds from, wherever it runs (:func:`config_from_record`), never the experiment file again;
:func:`compose` puts the experiment's policy, selector and aggregator (:mod:`flamingo_sim.fl.plugins`)
on a seed's parts (:func:`~flamingo_sim.fl.compose.parts.build_components`), taking the ones the run's
check built (:class:`Prebuilt`) where it can, and returns the
:class:`~flamingo_sim.fl.sim.simulation.Simulation` that runs its rounds; :func:`plugin_record` names
the plug-ins and their parameters as built, for the run's summary. Every engine (native, FedScale,
Flower), the distributed ranks and the check before a run build through here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from flamingo_sim.config import from_mapping, to_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.compose.parts import build_components
from flamingo_sim.fl.config import ExperimentConfig, load_experiment, with_seeds
from flamingo_sim.fl.plugins import experiment_aggregator, experiment_policy, experiment_selector, plugin_search, policy_name
from flamingo_sim.fl.sim.simulation import Components, Simulation

if TYPE_CHECKING:
    from flamingo_sim.devices.policies import Policy
    from flamingo_sim.fl.strategy.base import Aggregator, Selector

__all__ = ["compose", "resolve_config", "config_record", "config_from_record", "Prebuilt", "plugin_record", "aggregator_takes"]


def resolve_config(experiment: str | Path, overrides: Sequence[str], n_seeds: int | None) -> ExperimentConfig:
    """The run's config: the experiment with its overrides, ``n_seeds`` seeds from its first one."""
    return with_seeds(load_experiment(experiment, list(overrides)), n_seeds)


def aggregator_takes(cfg: ExperimentConfig, experiment: str | Path | None, key: str) -> bool:
    """Whether the aggregator ``aggregation.name`` is built with ``key`` (``weighting``): its constructor
    names it or takes any keyword. True when the aggregator cannot be loaded (the run's check says why)."""
    from flamingo_sim.fl.strategy.aggregators import AGGREGATORS  # torch: not for a config's own check

    try:
        factory = AGGREGATORS.load(cfg.aggregation.name, "aggregation.name", plugin_search(experiment))
        takes = inspect.signature(factory).parameters
    except (ConfigError, TypeError, ValueError):
        return True
    return key in takes or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes.values())


def config_record(cfg: ExperimentConfig, experiment: str | Path | None) -> dict[str, Any]:
    """What the run directory records of ``cfg`` (``config.yaml``) and its units build from: every key with
    the value the run uses, less a key no plug-in of the run takes, which would read as if it applied:
    ``aggregation.weighting`` of an aggregator built without one, and the whole ``aggregation`` section
    under ``fl.mode: fedbuff`` (FedBuff's own step updates the server; the section is at its default)."""
    record: dict[str, Any] = to_mapping(cfg)
    if cfg.fl.mode == "fedbuff":
        record.pop("aggregation")
    elif not aggregator_takes(cfg, experiment, "weighting"):
        record["aggregation"].pop("weighting", None)
    return record


def config_from_record(record: Mapping[str, Any], source: str) -> ExperimentConfig:
    """The run's config again from its record (:func:`config_record`); errors name ``source``."""
    return from_mapping(ExperimentConfig, dict(record), source=source)


@dataclass
class Prebuilt:
    """Plug-ins built before the simulation that uses them (the run's check,
    :func:`~flamingo_sim.fl.plugins.build_checked`), so that this process builds each once: each is
    taken at most once, by the first simulation that asks; the aggregator only by a model without
    buffers (it was built without them). A simulation builds what is not here."""

    policies: dict[str, Policy]
    selector: Selector | None = None
    aggregator: Aggregator | None = None

    def take_policy(self, name: str) -> Policy | None:
        return self.policies.pop(name, None)

    def take_selector(self) -> Selector | None:
        selector, self.selector = self.selector, None
        return selector

    def take_aggregator(self, buffers: Sequence[str]) -> Aggregator | None:
        if buffers:
            return None
        aggregator, self.aggregator = self.aggregator, None
        return aggregator


def compose(
    cfg: ExperimentConfig,
    experiment: str | Path | None,
    seed: int,
    policy: str,
    *,
    parts: Components | None = None,
    log: Callable[[str], None] = lambda _m: None,
    simulation: type[Simulation] = Simulation,
    prebuilt: Prebuilt | None = None,
) -> Simulation:
    """A fresh simulation of ``policy`` for ``seed``: the one place a run's parts are put together.

    ``parts``: the seed's :class:`~flamingo_sim.fl.sim.simulation.Components` when already built
    (the policies of one seed share them), else built here (:func:`build_components`). The policy,
    the selector and the aggregator come from the config's sections (``policy``, ``fl.selection``
    with ``selector``, ``aggregation``), taken from ``prebuilt`` where it holds them; ``fl.mode: fedbuff`` gives FedBuff's
    :class:`~flamingo_sim.fl.sim.fedbuff.AsyncSimulation`, else ``simulation`` (a subclass of
    :class:`~flamingo_sim.fl.sim.simulation.Simulation`: Flower's strategy reports Flower's
    evaluation through one). Every engine (native, FedScale, Flower), the distributed ranks and
    the up-front validation (:func:`~flamingo_sim.fl.runner.plan.check_composition`) build through here.
    """
    if parts is None:
        parts = build_components(cfg, experiment, seed, log=lambda _m: None)
    pre = prebuilt if prebuilt is not None else Prebuilt({})
    selector = pre.take_selector()
    if selector is None:
        selector = experiment_selector(cfg, experiment)
    built = pre.take_policy(policy)
    if built is None:
        built = experiment_policy(cfg, experiment, policy)
    if cfg.fl.mode == "fedbuff":
        from flamingo_sim.fl.sim.fedbuff import AsyncSimulation

        return AsyncSimulation(parts, built, policy_name(policy, built), seed, selector, log=log)
    buffers = [b for b, _ in parts.model.named_buffers()]
    aggregator = pre.take_aggregator(buffers)
    if aggregator is None:
        aggregator = experiment_aggregator(cfg, experiment, buffers)
    return simulation(parts, built, policy_name(policy, built), seed, selector, log=log, aggregator=aggregator)


def plugin_record(cfg: ExperimentConfig, experiment: str | Path | None, names: Mapping[str, str]) -> dict[str, Any]:
    """The plug-ins the run's simulations are built with, and their parameters as built: each plug-in's
    ``Params`` with its defaults filled in (a plug-in without one takes none), an aggregator's
    ``weighting`` where it takes one; the ``policy`` section, which every policy is built with, once.
    Under ``fl.mode: fedbuff`` the server's update is FedBuff's own (its section), not an aggregator's.
    ``names``: each policy's display name by its name in the experiment (what the summary's tables call it)."""
    from flamingo_sim.devices.policies import POLICIES
    from flamingo_sim.fl.strategy.aggregators import AGGREGATORS
    from flamingo_sim.fl.strategy.selection import SELECTORS

    search, source = plugin_search(experiment), "" if experiment is None else str(experiment)

    def params(registry: Any, spec: str, section: Mapping[str, Any] | None, key: str, params_key: str) -> dict[str, Any]:
        factory = registry.load(spec, key, search)
        return dict(to_mapping(registry.params(factory, spec, section, source, params_key)))

    policies = {names.get(name, name): {"name": name, "params": params(POLICIES, name, cfg.policy_params.get(name), "policies",
                                                                         f"policy_params.{name}")}
                for name in cfg.policies}
    selector = {"name": cfg.fl.selection, "params": params(SELECTORS, cfg.fl.selection, cfg.selector.parameters(), "fl.selection", "selector")}
    if cfg.fl.mode == "fedbuff":
        aggregator = {"name": "fedbuff", "params": to_mapping(cfg.fedbuff)}
    else:
        agg = cfg.aggregation
        used = params(AGGREGATORS, agg.name, agg.parameters(), "aggregation.name", "aggregation")
        if aggregator_takes(cfg, experiment, "weighting"):
            used["weighting"] = agg.weighting
        aggregator = {"name": agg.name, "params": used}
    return {"policies": policies, "policy": to_mapping(cfg.policy), "selector": selector, "aggregator": aggregator}
