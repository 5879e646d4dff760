"""Writing a report: every figure as PNG and SVG, plus ``report.md`` and ``report.html``.

The report of one run goes to ``RUN_DIR/report/``; with several run directories (overlaid)
it goes to the first one's ``report/`` unless ``out_dir`` says otherwise. The directory is
staged and swapped in whole (:func:`flamingo_sim.io.atomic_dir`), so an interrupted report never
leaves a half-written image, and only an earlier report (or an empty directory) is replaced.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure

from flamingo_sim.faults import check_writable
from flamingo_sim.fl.metrics.summary import far_below_lines
from flamingo_sim.io import atomic_dir, check_out_dir
from flamingo_sim.report.data import Run, load_runs, summary_table
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
        table = summary_table(runs)
        (stage / "report.md").write_text(_markdown(runs, table, written))
        (stage / "report.html").write_text(_html(runs, table, written))
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


def _markdown(runs: Sequence[Run], table: pd.DataFrame, figures: dict[str, list[Path]]) -> str:
    title = ", ".join(dict.fromkeys(str(r.summary.get("experiment", r.label)) for r in runs))
    out = [f"# flamingo-sim report: {title}", ""]
    out += [f"- {line}" if not line.startswith("  ") else f"  {line.strip()}" for line in _run_lines(runs)]
    out += ["", "## Summary", "", "Means over seeds; `-` where some seed never reached the target. "
            "Speedup and energy efficiency are relative to the baseline: its mean time or energy to target over the policy's "
            "(a ratio of means over seeds). Clients lost: at the end of each policy's own run; `flamingo-sim reproduce` compares "
            "them at equal rounds, equal time and at the target.", ""]
    out.append("| " + " | ".join(SUMMARY_COLUMNS.values()) + " |")
    out.append("|" + "---|" * len(SUMMARY_COLUMNS))
    for _, row in table.iterrows():
        out.append("| " + " | ".join(_cells(row)) + " |")
    out += ["", "## Figures", "", "With several seeds a curve is the mean over seeds on a common virtual-time grid (each seed linearly "
            "interpolated, within the span every seed covers) and the band its 95 % Student-t confidence interval.", ""]
    for stem, paths in figures.items():
        png = next((p for p in paths if p.suffix == ".png"), paths[0])
        out += [f"### {stem.replace('_', ' ')}", "", CAPTIONS.get(stem, ""), "", f"![{stem}]({png.name})", ""]
    return "\n".join(out)


def _html(runs: Sequence[Run], table: pd.DataFrame, figures: dict[str, list[Path]]) -> str:
    e = html.escape
    title = ", ".join(dict.fromkeys(str(r.summary.get("experiment", r.label)) for r in runs))
    rows = "\n".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in _cells(row)) + "</tr>" for _, row in table.iterrows())
    head = "".join(f"<th>{e(c)}</th>" for c in SUMMARY_COLUMNS.values())
    figs = "\n".join(
        f'<figure><img src="{e(next((p for p in paths if p.suffix == ".png"), paths[0]).name)}" alt="{e(stem)}" width="680">'
        f"<figcaption>{e(CAPTIONS.get(stem, ''))}</figcaption></figure>"
        for stem, paths in figures.items()
    )
    items = "".join(f"<li>{e(line.strip())}</li>" for line in _run_lines(runs))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>flamingo-sim report: {e(title)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}} figure{{margin:1.5em 0}}</style></head>
<body><h1>flamingo-sim report: {e(title)}</h1>
<ul>{items}</ul>
<h2>Summary</h2>
<p>Means over seeds; - where some seed never reached the target. Speedup and energy efficiency are relative to the baseline
(a ratio of means over seeds). Clients lost: at the end of each policy's own run.</p>
<table><tr>{head}</tr>
{rows}
</table>
<h2>Figures</h2>
{figs}
</body></html>
"""
