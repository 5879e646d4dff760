"""Figures and summaries of run directories: ``flamingo-sim report`` and the notebooks.

- :mod:`~flamingo_sim.report.data`    run directories read back; the series the figures plot.
- :mod:`~flamingo_sim.report.plots`   the figures (matplotlib, no pyplot), one paper column each.
- :mod:`~flamingo_sim.report.write`   PNG + SVG figures, ``report.md`` and ``report.html``.
- :mod:`~flamingo_sim.report.document` a report's content written once, rendered as Markdown and as HTML (this report and the reproduction's).
- :mod:`~flamingo_sim.report.traces`  what prep-traces kept, battery levels, the time-zone shifts.
- :mod:`~flamingo_sim.report.notebook` helpers the notebooks use (a small run of their own).
- :mod:`~flamingo_sim.report.fidelity` measured profiles against the shipped ones (``flamingo-sim fidelity``).
- :mod:`~flamingo_sim.report.cli`     ``flamingo-sim report`` and ``flamingo-sim fidelity``.

Nothing downstream reaches back: the report reads a run directory and never changes its data.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The public API, imported on first use (matplotlib and pandas load only when a report is made,
#: so ``flamingo-sim --help`` and argument errors stay fast).
_EXPORTS = {
    "Curve": "data",
    "Run": "data",
    "load_runs": "data",
    "mean_band": "data",
    "policy_curve": "data",
    "summary_table": "data",
    "FIGURES": "plots",
    "POLICY_COLORS": "plots",
    "make_figures": "plots",
    "policy_colors": "plots",
    "ReportResult": "write",
    "write_report": "write",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"flamingo_sim.report.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'flamingo_sim.report' has no attribute {name!r}")
