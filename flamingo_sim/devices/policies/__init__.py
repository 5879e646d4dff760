"""Device-side training policies: the contract and the shipped implementations.

- :mod:`.base`: the contract, :class:`Policy` (a protocol; the optional ``settle`` has its
  default there), :class:`TaskRequest`, :class:`TaskOutcome`, :class:`PolicyConfig`, and
  :class:`PricedPolicy`, the public pricing helpers a policy is written with;
- :mod:`.baseline`: :class:`BaselinePolicy`, PyTorch's default (always ``4567``);
- :mod:`.flamingo`: :class:`FlamingoPolicy`, Flamingo's runtime;
- :mod:`.eas`: :class:`EasPolicy`, Android's Energy-Aware Scheduler, as the paper compared it.

:func:`make_policy` builds one by name (``baseline``, ``flamingo``, ``eas``) or import path
``package.module:ClassName``, constructed as ``cls(config)`` with a :class:`PolicyConfig`.
"""

from __future__ import annotations

from typing import Callable

from flamingo_sim.devices.policies.base import (
    DECLINE_REASONS,
    POLICY_METHODS,
    Policy,
    PolicyConfig,
    PricedPolicy,
    TaskOutcome,
    TaskRequest,
)
from flamingo_sim.devices.policies.baseline import BaselinePolicy
from flamingo_sim.devices.policies.eas import EasPolicy
from flamingo_sim.devices.policies.flamingo import FlamingoPolicy
from flamingo_sim.errors import ConfigError
from flamingo_sim.plugins import load_object

__all__ = [
    "DECLINE_REASONS", "Policy", "PolicyConfig", "PricedPolicy", "TaskOutcome", "TaskRequest",
    "BaselinePolicy", "EasPolicy", "FlamingoPolicy", "make_policy",
]

_BUILTIN: dict[str, Callable[[PolicyConfig | None], Policy]] = {
    "baseline": BaselinePolicy, "flamingo": FlamingoPolicy, "eas": EasPolicy}


def make_policy(spec: str, config: PolicyConfig | None = None) -> Policy:
    """A policy by name (``baseline``, ``flamingo``, ``eas``) or import path ``package.module:ClassName``."""
    if spec in _BUILTIN:
        return _BUILTIN[spec](config)
    cls = load_object(spec, "policies", kind="policy", known=_BUILTIN)
    policy = cls(config)
    missing = [m for m in POLICY_METHODS if not callable(getattr(policy, m, None))]
    if missing:
        raise ConfigError(f"policy {spec!r}: lacks {', '.join(missing)} (see flamingo_sim.devices.policies.Policy; "
                          "subclass it for the default of the optional settle)")
    return policy
