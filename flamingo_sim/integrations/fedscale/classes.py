"""The FedScale subclasses, built once on first use (importing FedScale then): :func:`fedscale_classes`.

The package re-exports them lazily (``flamingo_sim.integrations.fedscale.FlamingoAggregator``
etc., through its module ``__getattr__``), so importing flamingo-sim never imports FedScale.
"""

from __future__ import annotations

import types

from flamingo_sim.integrations.fedscale.aggregator import build_aggregator_class
from flamingo_sim.integrations.fedscale.executor import build_executor_classes
from flamingo_sim.integrations.fedscale.loader import load_fedscale

#: The names :func:`fedscale_classes` offers.
CLASS_NAMES = ("FlamingoTorchClient", "FlamingoExecutor", "FlamingoAggregator")

_CLASSES: types.SimpleNamespace | None = None


def fedscale_classes() -> types.SimpleNamespace:
    """``FlamingoTorchClient``, ``FlamingoExecutor`` and ``FlamingoAggregator``, built once."""
    global _CLASSES
    if _CLASSES is not None:
        return _CLASSES
    fs = load_fedscale()
    FlamingoTorchClient, FlamingoExecutor = build_executor_classes(fs)
    _CLASSES = types.SimpleNamespace(
        FlamingoTorchClient=FlamingoTorchClient,
        FlamingoExecutor=FlamingoExecutor,
        FlamingoAggregator=build_aggregator_class(fs),
    )
    return _CLASSES
