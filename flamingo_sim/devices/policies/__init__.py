"""Device-side training policies: the contract and the shipped implementations.

- :mod:`.base`: the contract, :class:`Policy` (a protocol; the optional ``settle`` has its
  default there), :class:`TaskRequest`, :class:`TaskOutcome`, :class:`PolicyConfig`, and
  :class:`PricedPolicy`, the public pricing helpers a policy is written with;
- :mod:`.baseline`: :class:`BaselinePolicy`, PyTorch's default (always ``4567``);
- :mod:`.flamingo`: :class:`FlamingoPolicy`, Flamingo's runtime;
- :mod:`.least_energy`: :class:`LeastEnergyPolicy`, the least-energy choice that fits, pinned (``eas`` before).

:func:`make_policy` builds one from :data:`POLICIES` (:class:`~flamingo_sim.plugins.Registry`): by
name (``baseline``, ``flamingo``, ``least_energy``), import path ``package.module:ClassName`` or an entry
point of group ``flamingo_sim.policies``, constructed as ``cls(config, **params)`` with the shared
:class:`PolicyConfig` and the policy's own parameters (``policy_params.<name>``, checked by its
``Params`` dataclass, e.g. :class:`~flamingo_sim.devices.policies.least_energy.LeastEnergyParams`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from flamingo_sim.devices.policies.base import (
    CONTRACT,
    DECLINE_REASONS,
    Policy,
    PolicyConfig,
    PricedPolicy,
    TaskOutcome,
    TaskRequest,
    decline_reasons,
)
from flamingo_sim.devices.policies.baseline import BaselinePolicy
from flamingo_sim.devices.policies.flamingo import FlamingoPolicy
from flamingo_sim.devices.policies.least_energy import LeastEnergyParams, LeastEnergyPolicy
from flamingo_sim.plugins import Registry

__all__ = [
    "DECLINE_REASONS", "decline_reasons", "Policy", "PolicyConfig", "PricedPolicy", "TaskOutcome", "TaskRequest",
    "BaselinePolicy", "LeastEnergyParams", "LeastEnergyPolicy", "FlamingoPolicy", "POLICIES", "make_policy", "RENAMED",
]

#: The shipped policies by name; import paths and entry points (group ``flamingo_sim.policies``) find the rest.
POLICIES = Registry(CONTRACT, {"baseline": BaselinePolicy, "flamingo": FlamingoPolicy, "least_energy": LeastEnergyPolicy})
#: Shipped policies that were renamed: old name -> (new name, why).
RENAMED = {"eas": ("least_energy", "it picks the least-energy choice from Flamingo's own profiles, which the kernel's EAS never "
                                   "sees; PyTorch's default as stock Android (EAS) schedules it is the baseline policy under the "
                                   "android interference model")}


def make_policy(spec: str, config: PolicyConfig | None = None, params: Mapping[str, Any] | None = None, *,
                source: str = "", search: Sequence[Path] = ()) -> Policy:
    """A policy by name (``baseline``, ``flamingo``, ``least_energy``, an installed entry point) or import path
    ``package.module:ClassName``, built with the shared ``config`` and its own ``params``
    (the mapping ``policy_params.<spec>``, checked by the policy's ``Params``); ``source`` (the
    experiment file) and ``search`` (folders for an import path's module) as
    :meth:`~flamingo_sim.plugins.Registry.build` takes them."""
    policy: Policy = POLICIES.build(spec, params, source=source, key="policies", params_key=f"policy_params.{spec}",
                                    search=search, args=(config,))
    return policy
