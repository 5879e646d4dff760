"""Figures and summaries of run directories: ``flamingo-sim report`` and the notebooks.

- :mod:`~flamingo_sim.report.data`    run directories read back; the series the figures plot.
- :mod:`~flamingo_sim.report.plots`   the figures (matplotlib, no pyplot), one paper column each.
- :mod:`~flamingo_sim.report.write`   PNG + SVG figures, ``report.md`` and ``report.html``.
- :mod:`~flamingo_sim.report.traces`  what prep-traces kept, battery levels, the time-zone shifts.
- :mod:`~flamingo_sim.report.notebook` helpers the notebooks use (a small run of their own).

Nothing downstream reaches back: the report reads a run directory and never changes its data.
"""

from flamingo_sim.report.data import Curve, Run, load_runs, mean_band, policy_curve, summary_table
from flamingo_sim.report.plots import FIGURES, POLICY_COLORS, make_figures, policy_colors
from flamingo_sim.report.write import ReportResult, write_report

__all__ = [
    "Curve",
    "Run",
    "load_runs",
    "mean_band",
    "policy_curve",
    "summary_table",
    "FIGURES",
    "POLICY_COLORS",
    "make_figures",
    "policy_colors",
    "ReportResult",
    "write_report",
]
