"""An experiment's plug-ins in one place: its policies, its selector and its aggregator, named, checked and built.

Every check of a plug-in an experiment names lives here, made at the two moments it can be:

- :func:`check_names`, as the config is loaded (torch-free, nothing of the user's imported): a
  shipped policy's old name, a name that is no shipped plug-in, installed entry point or import
  path, a shipped plug-in's parameters (its ``Params``);
- :func:`check_plugins`, before a run writes anything: each plug-in imported and built once, held
  to its contract (``flamingo_sim.plugins.Registry.check``: required methods its own,
  signatures, a policy's decline reasons), its parameters checked by its ``Params``, and the
  policies' display names told apart.

The run builds them with :func:`experiment_policy`, :func:`experiment_selector` and
:func:`experiment_aggregator` (through the registries' one ``make_*`` each), and calls each policy
by :func:`policy_name`: its name in the experiment, or an import path's own ``name``
(``flamingo_sim.plugins.display_name``). An import path's module is looked for on the Python
path, then in :func:`plugin_search`'s folders: the experiment's own (and those of the files it
``extends``), then the working directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from flamingo_sim.devices.policies import POLICIES, RENAMED, Policy, make_policy
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.extends import experiment_files
from flamingo_sim.fl.strategy.parameters import AGGREGATOR_PARAMS
from flamingo_sim.fl.strategy.selection import SELECTORS, Selector, make_selector
from flamingo_sim.plugins import check_name, check_params, display_name, params_class

if TYPE_CHECKING:
    from flamingo_sim.fl.strategy.base import Aggregator

__all__ = ["check_names", "check_plugins", "CheckedPlugins", "build_checked", "experiment_policy", "experiment_selector",
           "experiment_aggregator", "policy_name", "plugin_search"]


def plugin_search(experiment: str | Path | None) -> list[Path]:
    """Folders an import path's module (``module:Class`` in the experiment) is looked for in after the
    Python path: the experiment's own, those of the files it extends, then the working directory."""
    files = [] if experiment is None else experiment_files(experiment)
    return list(dict.fromkeys([*(f.resolve().parent for f in files), Path.cwd()]))


def _source(experiment: str | Path | None) -> str:
    return "" if experiment is None else str(experiment)


def check_names(cfg: Any) -> None:
    """The config's own check of its plug-ins, torch-free (module docstring); a :class:`ValueError` naming the key."""
    for name in [*cfg.policies, *cfg.policy_params]:
        if name in RENAMED:
            new, why = RENAMED[name]
            raise ValueError(f"policies: policy {name!r} was renamed {new!r}: {why}")
    for name in cfg.policies:
        check_name("policy", name, POLICIES.builtin, "policies")
    check_name("selector", cfg.fl.selection, SELECTORS.builtin, "fl.selection")
    check_name("aggregator", cfg.aggregation.name, AGGREGATOR_PARAMS, "aggregation.name")
    for name, section in cfg.policy_params.items():
        if name in POLICIES.builtin:
            check_params(params_class(POLICIES.builtin[name]), "policy", name, section, f"policy_params.{name}")
    if cfg.fl.selection in SELECTORS.builtin:
        check_params(params_class(SELECTORS.builtin[cfg.fl.selection]), "selector", cfg.fl.selection, cfg.selector.params, "selector")
    if cfg.aggregation.name in AGGREGATOR_PARAMS:
        check_params(AGGREGATOR_PARAMS[cfg.aggregation.name], "aggregator", cfg.aggregation.name, cfg.aggregation.params, "aggregation")


def experiment_policy(cfg: Any, experiment: str | Path | None, name: str) -> Policy:
    """A fresh instance of the experiment's policy ``name``, built with its ``policy`` section and its own
    ``policy_params.<name>``; errors name the ``experiment`` file."""
    return make_policy(name, cfg.policy, cfg.policy_params.get(name), source=_source(experiment), search=plugin_search(experiment))


def experiment_selector(cfg: Any, experiment: str | Path | None) -> Selector:
    """The selector ``fl.selection`` names, with the ``selector`` section's parameters."""
    return make_selector(cfg.fl.selection, cfg.selector.parameters(), _source(experiment), search=plugin_search(experiment))


def experiment_aggregator(cfg: Any, experiment: str | Path | None, buffers: Sequence[str] = ()) -> Aggregator:
    """The aggregator of the ``aggregation`` section; ``buffers``: the model's buffer names."""
    from flamingo_sim.fl.strategy.aggregators import make_aggregator  # torch: not for a config's own check

    return make_aggregator(cfg.aggregation, buffers, _source(experiment), search=plugin_search(experiment))


def policy_name(name: str, policy: Any) -> str:
    """What the metrics, the summary and the reports call the experiment's policy ``name`` (built as ``policy``)."""
    return display_name(name, policy)


@dataclass
class CheckedPlugins:
    """What :func:`build_checked` built: each policy's display name and instance by its name in the
    experiment, the selector and the aggregator (built without the model's buffers), all unused."""

    names: dict[str, str]
    policies: dict[str, Policy]
    selector: Selector
    aggregator: Aggregator


def check_plugins(cfg: Any, experiment: str | Path | None, policies: Sequence[str] | None = None) -> dict[str, str]:
    """Every plug-in of ``cfg`` (the ``policies``, default the config's) built once and held to its
    contract, before anything is written; each policy's display name by its name in the experiment.

    Two policies may not share a display name, nor may a plug-in take a shipped policy's."""
    return build_checked(cfg, experiment, policies).names


def build_checked(cfg: Any, experiment: str | Path | None, policies: Sequence[str] | None = None) -> CheckedPlugins:
    """:func:`check_plugins`, keeping what it built (a run's first simulation in this process takes it)."""
    names: dict[str, str] = {}
    built: dict[str, Policy] = {}
    for name in cfg.policies if policies is None else policies:
        built[name] = experiment_policy(cfg, experiment, name)
        shown = policy_name(name, built[name])
        twin = next((n for n, s in names.items() if s == shown), None)
        if twin is not None or (shown != name and shown in POLICIES.builtin):
            other = f"policy {twin!r}" if twin is not None else "the shipped policy"
            where = f"{experiment}: " if experiment is not None else ""
            raise ConfigError(f"{where}policies: policy {name!r} is called {shown!r} (its name attribute), as {other} is; "
                              "give it a name of its own")
        names[name] = shown
    aggregator = experiment_aggregator(cfg, experiment)
    return CheckedPlugins(names, built, experiment_selector(cfg, experiment), aggregator)
