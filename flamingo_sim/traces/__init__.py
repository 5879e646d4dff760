"""GreenHub traces: readers per layout, cleaning, selection, PCHIP resampling, time-zone shifts, storage, synthetic dumps.

Public API (imported lazily, so ``flamingo-sim --help`` stays fast)::

    from flamingo_sim.traces import load_client_traces, ClientTraces      # the engine's view
    from flamingo_sim.traces import prep_traces, PrepOptions, Criteria     # the pipeline
    from flamingo_sim.traces import write_synthetic_dump, SynthOptions     # synthetic dumps
    from flamingo_sim.traces import SHIPPED_DIR                            # traces/synthetic/
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ClientTraces": "store",
    "load_client_traces": "store",
    "prep_traces": "pipeline",
    "PrepOptions": "pipeline",
    "Criteria": "select",
    "write_synthetic_dump": "synth",
    "SynthOptions": "synth",
    "SHIPPED_DIR": "shipped",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"flamingo_sim.traces.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'flamingo_sim.traces' has no attribute {name!r}")
