"""Writing a report: every figure as PNG and SVG, plus ``report.md`` and ``report.html``.

Both files hold the same content (the runs, the summary, the requests each policy declined by reason,
the figures), built once as blocks (:mod:`flamingo_sim.report.document`) and written as Markdown and as HTML.

The report of one run goes to ``RUN_DIR/report/``; with several run directories (overlaid)
it goes to the first one's ``report/`` unless ``out_dir`` says otherwise. The directory is
staged and swapped in whole (:func:`flamingo_sim.io.atomic_dir`), so an interrupted report never
leaves a half-written image, and only an earlier report (or an empty directory) is replaced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from flamingo_sim.faults import check_writable
from flamingo_sim.fl.metrics.summary import far_below_lines
from flamingo_sim.io import atomic_dir, check_out_dir
from flamingo_sim.report import document as doc
from flamingo_sim.report.data import Run, declined_by_reason, load_runs, summary_table
from flamingo_sim.report.plots import make_figures

__all__ = ["ReportResult", "write_report", "save_figure", "CAPTIONS", "FORMATS", "DPI", "SVG_HASHSALT"]

#: The kind of output a report directory is (its manifest).
REPORT = "report"
#: Image formats written for every figure.
FORMATS = ("png", "svg")
#: PNG resolution: a 3.4-inch column at 200 dpi is 680 px wide.
DPI = 200
CAPTIONS = {
    "accuracy_vs_time": "Test accuracy against virtual time. Dashed: target accuracy; star and dotted line: when each policy first reaches it, "
    "on the curve the target is read on (with a smoothed rule: the line is the mean of the last evaluations, the points each evaluation).",
    "speedup_vs_target": "Speedup (time) and energy efficiency (training energy) of each policy over the baseline, against the target "
    "accuracy, read on the same curve as the headline; the headline's target is dotted and its ratios starred. A gap: the baseline or "
    "the policy never reaches that target in some seed. The curve's targets are the same for every seed; the headline's are each "
    "seed's own, and its star sits at their mean.",
    "clients_online": "Clients online (the trace says available and the energy budget allows) at the start of each round.",
    "clients_lost": "Distinct clients lost so far: offline only because training drained their battery.",
    "energy_cumulative": "Cumulative on-device training energy (all attempts, kept or dropped). Star: energy spent when the target was reached.",
    "choice_mix": "Share of the kept clients' local steps run on each execution choice (the CPU cores used), per round.",
    "participation": "Clients by the number of rounds their update was kept (all seeds, log scale); Jain's index of participation "
    "in the legend (1 = every client equally often).",
    "interference_per_phone": "Time training shared a big core with the owner's foreground app, per round, "
    "summed over the kept clients of each phone model (log scale).",
}
FIGURES_INTRO = ("With several seeds a curve is the mean over seeds on a common virtual-time grid (each seed linearly "
                 "interpolated, within the span every seed covers) and the band its 95 % Student-t confidence interval.")
SUMMARY_COLUMNS = {
    "run": "run",
    "policy": "policy",
    "seeds": "seeds",
    "time_to_target_h": "time to target (h)",
    "energy_to_target_kj": "energy to target (kJ)",
    "final_accuracy": "final accuracy",
    "best_accuracy": "best accuracy",
    "total_energy_kj": "total energy (kJ)",
    "clients_lost": "clients lost",
    "speedup": "speedup",
    "energy_efficiency": "energy efficiency",
    "jain_participation": "Jain (participation)",
    "jain_energy": "Jain (energy)",
}


@dataclass(frozen=True)
class ReportResult:
    """Where the report went and what it holds."""

    out_dir: Path
    figures: dict[str, list[Path]]  # stem -> [png, svg]
    markdown: Path
    html: Path


def write_report(
    run_dirs: Sequence[str | Path] | Sequence[Run],
    out_dir: str | Path | None = None,
    *,
    labels: Sequence[str] | None = None,
    formats: Sequence[str] = FORMATS,
) -> ReportResult:
    """Draw every figure of the run directories (overlaid when several) and write the report files."""
    loaded = [r for r in run_dirs if isinstance(r, Run)]
    paths = [r for r in run_dirs if not isinstance(r, Run)]
    if loaded and paths:
        raise TypeError("write_report: pass run directories or Run objects, not both")
    runs = loaded if loaded else load_runs(paths, labels)
    out = Path(out_dir) if out_dir is not None else runs[0].path / "report"
    check_out_dir(out, REPORT)  # decided before drawing: a user's directory is never replaced
    check_writable(out)
    written: dict[str, list[Path]] = {}
    with atomic_dir(out, REPORT) as stage:
        for stem, fig in make_figures(runs).items():
            save_figure(fig, [(stage / f"{stem}.{fmt}", fmt) for fmt in formats])
            written[stem] = [out / f"{stem}.{fmt}" for fmt in formats]
        blocks = _blocks(runs, summary_table(runs), written)
        title = ", ".join(dict.fromkeys(str(r.summary.get("experiment", r.label)) for r in runs))
        (stage / "report.md").write_text(doc.markdown(blocks))
        (stage / "report.html").write_text(doc.html_page(f"flamingo-sim report: {title}", blocks, max_width_em=60))
    return ReportResult(out, written, out / "report.md", out / "report.html")


#: SVG ids are hashed with this salt (matplotlib draws a random one otherwise) and no date is written: the same
#: figure gives the same file, whichever process drew it and when.
SVG_HASHSALT = "flamingo-sim"


def save_figure(fig: Figure, targets: Sequence[tuple[Path, str]], dpi: int = DPI) -> None:
    """Save ``fig`` to each ``(path, format)`` of ``targets``, in order.

    The layout (constrained) is computed once, by the first target's draw, and kept for the others;
    the files depend on nothing but the figure (no date, SVG ids from a fixed salt), so the same data
    gives byte-identical files.
    """
    from matplotlib import rc_context

    engine = fig.get_layout_engine()
    try:
        with rc_context({"svg.hashsalt": SVG_HASHSALT}):
            for i, (path, fmt) in enumerate(targets):
                fig.savefig(path, format=fmt, dpi=dpi, metadata={"Date": None} if fmt in ("svg", "pdf") else None)
                if i == 0 and engine is not None:
                    fig.set_layout_engine("none")  # placed: the other formats reuse the layout
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)


def _fmt(value: object, digits: int = 2) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def _cells(row: pd.Series) -> list[str]:
    digits = {"final_accuracy": 3, "best_accuracy": 3, "clients_lost": 0, "energy_to_target_kj": 1, "total_energy_kj": 1}
    return [_fmt(row[c], digits.get(c, 2)) for c in SUMMARY_COLUMNS]


def _run_lines(runs: Sequence[Run]) -> list[str]:
    lines = []
    for run in runs:
        s = run.summary
        rule = (s.get("target_rule") or {}).get("description", s.get("target", "?"))
        values = ", ".join(f"{float(t):.4f}" for t in s.get("target_accuracy_by_seed", {}).values() if t is not None)
        lines.append(
            f"{run.label}: `{run.path}`; experiment {s.get('experiment', '?')}, model {s.get('model', '?')}, "
            f"seeds {run.seeds}, baseline {s.get('baseline', '?')}; target accuracy {values or '-'} ({rule})"
        )
        lines += [f"  {note}" for note in far_below_lines(s)]
        if s.get("incomplete"):
            lines.append(f"  incomplete run: {s['incomplete']} (no summary.json: the numbers cover the rounds done)")
        if s.get("data"):
            lines.append(f"  data: {s['data']}")
    names = {r.summary.get("experiment") for r in runs}
    if len(names) > 1:
        lines.append(f"NOTE: these runs come from different experiments ({', '.join(sorted(map(str, names)))}); curves are overlaid as given.")
    return lines


def _blocks(runs: Sequence[Run], table: pd.DataFrame, figures: dict[str, list[Path]]) -> list[doc.Block]:
    """The report's content, once: the runs, the summary, the requests each policy declined by reason, the figures."""
    title = ", ".join(dict.fromkeys(str(r.summary.get("experiment", r.label)) for r in runs))
    blocks: list[doc.Block] = [
        doc.Heading(1, f"flamingo-sim report: {title}"), doc.Bullets(_run_lines(runs)),
        doc.Heading(2, "Summary"),
        doc.Lines(["Means over seeds; `-` where some seed never reached the target. Speedup and energy efficiency are relative to the "
                   "baseline: its mean time or energy to target over the policy's (a ratio of means over seeds). Clients lost: at the "
                   "end of each policy's own run; `flamingo-sim reproduce` compares them at equal rounds, equal time and at the target."]),
        doc.Table("", list(SUMMARY_COLUMNS.values()), [_cells(row) for _, row in table.iterrows()]),
    ]
    declined = [(run, declined_by_reason(run)) for run in runs]
    reasons = list(dict.fromkeys(r for _, d in declined for r in d.columns))
    if reasons:
        rows = [[run.label, str(policy), *[_fmt(float(d.loc[policy, r]) if r in d.columns else float("nan"), 1) for r in reasons]]
                for run, d in declined for policy in d.index]
        blocks += [doc.Heading(2, "Declined requests"),
                   doc.Lines(["Requests each policy declined over the whole run, by the reason it gave (mean over seeds; the "
                              "`declined_<reason>` columns of `metrics.parquet`, which sum to `dropped_declined`); `-`: a reason the "
                              "policy does not give."]),
                   doc.Table("", ["run", "policy", *(r.replace("_", " ") for r in reasons)], rows)]
    blocks += [doc.Heading(2, "Figures"), doc.Lines([FIGURES_INTRO])]
    for stem, paths in figures.items():
        png = next((p for p in paths if p.suffix == ".png"), paths[0])
        blocks += [doc.Heading(3, stem.replace("_", " ")), doc.Figure(png.name, stem, CAPTIONS.get(stem, ""), width=680)]
    return blocks
