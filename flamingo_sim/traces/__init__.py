"""GreenHub traces: readers per layout, cleaning, selection, PCHIP resampling, time-zone shifts, storage, synthetic dumps.

- :mod:`~flamingo_sim.traces.readers`      readers for every GreenHub layout in circulation;
- :mod:`~flamingo_sim.traces.clean`        raw sample chunks into typed columns, every dropped row counted by reason;
- :mod:`~flamingo_sim.traces.clock`        the GreenHub server clock (UTC, then Europe/Lisbon wall time);
- :mod:`~flamingo_sim.traces.select`       per-device statistics and the paper's four selection criteria;
- :mod:`~flamingo_sim.traces.resample`     one device's samples onto the 10-minute UTC grid (PCHIP);
- :mod:`~flamingo_sim.traces.network`      the network columns as the app wrote them, as states held on the grid;
- :mod:`~flamingo_sim.traces.pipeline`     ``prep-traces``: dump -> selected, resampled, shifted client traces;
- :mod:`~flamingo_sim.traces.store`        prepared trace sets on disk, and the view the simulator uses;
- :mod:`~flamingo_sim.traces.synth`, :mod:`~flamingo_sim.traces.synth_write`  synthetic samples tables, written in each layout;
- :mod:`~flamingo_sim.traces.shipped`      the shipped trace set, regenerated bit-identically;
- :mod:`~flamingo_sim.traces.cli`          ``prep-traces`` and ``synth-greenhub``.

Public API (imported lazily, so ``flamingo-sim --help`` stays fast)::

    from flamingo_sim.traces import load_client_traces, ClientTraces      # the simulator's view
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
