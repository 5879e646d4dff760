"""The report's section "Why our Table 2 differs from the paper's": the attribution walk as a table, a
waterfall figure and a few generated sentences (:mod:`flamingo_sim.studies.reproduce.attribution`).

The waterfall has one column per task and two rows (speedup, energy efficiency), on a log scale:
the first bar rises from 1 to the first step with a ratio (the paper's readings where defined), each later bar floats from the
previous step's headline to its own (green up, red down), with the step's 95 % interval as an
error bar and its factor printed above; the dashed line is the paper's Table 2 figure. A bar
carries the ``gid`` ``"<task>|<quantity>|<step>"`` so a test can compare it with the table.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from flamingo_sim.fl.readings import READINGS
from flamingo_sim.report.plots import STYLE
from flamingo_sim.studies.names import REFERENCE, point_name
from flamingo_sim.studies.reproduce.attribution import StepResult, paper_headline, task_label
from flamingo_sim.studies.reproduce.tables import Table, current_table3, ratio_text

__all__ = ["attribution_table", "waterfall", "walks_from_json", "log_ticks", "LEGEND", "why_lines", "attribution_json", "WHY_CAPTION",
           "headline_md", "walk_md", "readings_md", "stragglers_md", "mechanisms_md", "fill_doc", "DOC_BLOCK", "DOC_VALUE", "doc_value",
           "sensitivity_effects", "table2_md", "table3_md", "points_md"]

#: Caption of the waterfall in the report.
WHY_CAPTION = ("From the paper's readings (left) to the simulator's default (right), one reading switched per step, per task: "
               "speedup (top) and energy efficiency (bottom) of Flamingo over the baseline to the target, log scale; a bar "
               "floats from the previous step's ratio to its own (green up, red down), labelled with its factor; error bars: "
               "95 % bootstrap interval over seeds; dashed: the paper's Table 2. 'no ratio': a policy never reached that "
               "step's target in some seed.")

_WORDS = {r.name: f"{r.words} ({r.section})" for r in READINGS}
_QUANTITIES = (("speedup", "speedup"), ("energy_efficiency", "energy efficiency"))


def _factor_text(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "-"
    return f"x{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def attribution_table(walk: Sequence[StepResult]) -> Table:
    """One task's walk: each step's headline and factor, and the paper's words for the reading switched."""
    rows = []
    for res in walk:
        s = res.step
        rows.append([s.label, ratio_text(res.speedup, res.speedup_ci), _factor_text(res.speedup_factor, res.speedup_factor_ci),
                     ratio_text(res.energy_efficiency, res.energy_efficiency_ci),
                     _factor_text(res.energy_factor, res.energy_factor_ci), s.config,
                     "; ".join(res.missed) or "-", _WORDS.get(s.name, "every reading as the paper's text decides it")])
    columns = ["step", "speedup [95 % CI]", "factor over the previous step", "energy efficiency [95 % CI]",
               "factor over the previous step (energy)", "runs", "never reached the target", "the paper's words (section)"]
    task = walk[0].task if walk else ""
    theirs = paper_headline(task)
    note = ("Each step switches one more reading from the paper's text to the simulator's default (the earlier switches "
            "kept); the last row is the default. Ratios of means over seeds, paired 95 % bootstrap intervals over seeds; "
            "a factor is a step's ratio over the previous step's, with its interval over the same seeds. "
            + (f"The paper's Table 2: {theirs[0]:.1f}x, {theirs[1]:.1f}x." if theirs else ""))
    return Table(f"{task_label(task)}: from the paper's readings to our default, one reading at a time", columns, rows, note)


def why_lines(walks: Sequence[Sequence[StepResult]]) -> list[str]:
    """A sentence per task: the two ends of the walk and the reading worth most (in x, either way)."""
    out = []
    for walk in walks:
        if not walk:
            continue
        first, last = walk[0], walk[-1]
        steps = [r for r in walk[1:] if r.speedup_factor is not None]
        text = (f"{task_label(first.task)}: {ratio_text(first.speedup, None) if first.speedup is not None else 'no ratio'} under the paper's readings, "
                f"{ratio_text(last.speedup, None)} under our default")
        theirs = paper_headline(first.task)
        if theirs:
            text += f" (the paper: {theirs[0]:.1f}x)"
        if first.speedup is None and first.missed:
            text += (f"; under the paper's target ('highest') {', '.join(first.missed)} never reached it, so the paper's "
                     "literal reading has no ratio here")
        if steps:
            top = max(steps, key=lambda r: abs(np.log(r.speedup_factor or 1.0)))
            text += f"; the reading worth most: {top.step.name} (x{top.speedup_factor:.2f} on the speedup)"
        x = next((r.exploration for r in walk if r.exploration), None)
        if x:
            text += (f". Discovering the profiles on this fleet (the exploring runs, exploration packed) took rounds "
                     f"1-{x['rounds']:.0f}, {x['time_s'] / 3600:.2f} h of virtual time and {x['energy_j'] / 1e3:.1f} kJ of "
                     f"Flamingo's training energy (the baseline's same rounds: {x['baseline_time_s'] / 3600:.2f} h); under "
                     "exploration none that one-time cost is paid before the job")
            pr = x.get("per_request")
            if pr:
                fr = pr["first_round"]
                text += (f". Under exploration per_request a client explores one choice per request: with {pr['selected_per_round']} "
                         f"of {pr['n_clients_online']:,} clients selected a round, {pr['p_eligible']:.0%} of requests able to explore "
                         f"(idle, unplugged) and {pr['n_models']} phone models, the first client of a model would have explored 8 "
                         f"choices by round {fr['8'] or '-'} and 11 by round {fr['11'] or '-'} (a client is selected "
                         f"{pr['selections_per_client']:.2f} times in {pr['rounds']} rounds), so such a run measures Flamingo "
                         "without a profile")
        out.append(text + ".")
    return out


def attribution_json(walks: Sequence[Sequence[StepResult]]) -> dict[str, Any]:
    """Every step of every task, as ``attribution.json`` keeps it."""
    return {walk[0].task: [{
        "step": r.step.name, "label": r.step.label, "readings": r.step.values, "runs": r.step.config,
        "speedup": r.speedup, "speedup_ci": r.speedup_ci, "speedup_factor": r.speedup_factor, "speedup_factor_ci": r.speedup_factor_ci,
        "energy_efficiency": r.energy_efficiency, "energy_efficiency_ci": r.energy_efficiency_ci,
        "energy_factor": r.energy_factor, "energy_factor_ci": r.energy_factor_ci, "missed": r.missed, "exploration": r.exploration,
        "per_seed": {str(s): v for s, v in r.per_seed.items()},
    } for r in walk] for walk in walks if walk}


#: What the waterfall's colours and lines mean, in its legend (the figure reads without the caption).
LEGEND = (("bar", "0.55", "first step with a ratio: from 1 to it"), ("bar", "tab:green", "a reading that raises the ratio (x factor)"),
          ("bar", "tab:red", "a reading that lowers it (x factor)"), ("errorbar", "0.2", "95 % bootstrap interval over seeds"),
          ("dashed", "0.3", "the paper's Table 2"))
#: "Nice" tick values of a decade on the log axes: every panel gets ticks it can be read by, also one spanning less than a decade.
_NICE = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)


def walks_from_json(doc: dict[str, Any]) -> list[list[StepResult]]:
    """The walks an ``attribution.json`` (:func:`attribution_json`) holds, to draw its waterfall again."""
    from flamingo_sim.studies.reproduce.attribution import walk_steps

    steps = {s.name: s for s in walk_steps()}
    return [[StepResult(task, steps[r["step"]], r["speedup"], r["speedup_ci"], r["energy_efficiency"], r["energy_efficiency_ci"],
                        r["speedup_factor"], r["speedup_factor_ci"], r["energy_factor"], r["energy_factor_ci"], list(r["missed"]))
             for r in rows] for task, rows in doc.items()]


def log_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Round values between ``lo`` and ``hi`` (> 0) for a log axis: at least two where the range allows, at most ``most``."""
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in _NICE if lo <= m * 10.0 ** e <= hi]
    for subset in ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)):  # the sparsest that reads
        pick = [t for t in ticks if round(t / 10.0 ** np.floor(np.log10(t)), 6) in subset]
        if len(pick) >= 3 or (len(pick) >= 2 and subset[-1] == 7.0):
            ticks = pick
            break
    while len(ticks) > most:
        ticks = ticks[::2]
    return ticks


def waterfall(walks: Sequence[Sequence[StepResult]]) -> Figure:
    """The walk of every task as a waterfall (module docstring), with a legend: it reads without the report's caption.

    Every panel has ticks (:func:`log_ticks`), a step without a ratio says "no ratio" inside the plot
    at its place (a text with the ``gid`` ``"<task>|<quantity>|<step>|no ratio"``), and a factor's
    label sits above its bar and its error bar."""
    from matplotlib import rc_context
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, NullLocator

    walks = [w for w in walks if w]
    with rc_context(STYLE):
        fig = Figure(figsize=(3.4 * max(len(walks), 1) + 0.4, 6.9), layout="constrained")
        axes = fig.subplots(2, max(len(walks), 1), squeeze=False)
        for j, walk in enumerate(walks):
            names = [r.step.name for r in walk]
            theirs = paper_headline(walk[0].task)
            for i, (attr, title) in enumerate(_QUANTITIES):
                ax = axes[i, j]
                prev, first = 1.0, True
                shown = [1.0] + ([theirs[i]] if theirs else [])
                missing = []
                for x, r in enumerate(walk):
                    value = getattr(r, attr)
                    if value is None:
                        missing.append((x, r))
                        continue
                    lo, hi = sorted((prev, value))
                    color = "0.55" if first else ("tab:green" if value >= prev else "tab:red")
                    ax.bar(x, hi - lo, bottom=lo, color=color, width=0.7, gid=f"{r.task}|{attr}|{r.step.name}")
                    ci = getattr(r, f"{attr}_ci")
                    top = hi
                    if ci:
                        ax.errorbar(x, value, yerr=[[value - ci[0]], [ci[1] - value]], color="0.2", lw=0.8, capsize=2)
                        top = max(hi, ci[1])
                        shown += [ci[0], ci[1]]
                    factor = getattr(r, "speedup_factor" if attr == "speedup" else "energy_factor")
                    label = f"{value:.1f}x" if first or factor is None else f"x{factor:.2f}"
                    ax.annotate(label, (x, top), textcoords="offset points", xytext=(0, 3), ha="center", va="bottom", fontsize=7, zorder=4,
                                bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85},
                                gid=f"{r.task}|{attr}|{r.step.name}|label")
                    shown += [lo, hi]
                    prev, first = value, False
                if theirs:
                    ax.axhline(theirs[i], color="0.3", ls=(0, (4, 2)), lw=0.8)
                ax.set_yscale("log")
                lo_y, hi_y = min(shown) / 1.25, max(shown) * 1.6  # room above for the labels
                ax.set_ylim(lo_y, hi_y)
                ax.yaxis.set_major_locator(FixedLocator(log_ticks(lo_y, hi_y)))
                ax.yaxis.set_minor_locator(NullLocator())
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
                ax.set_xlim(-0.6, len(walk) - 0.4)
                for x, r in missing:  # in the plot, at the step's place, not along an axis
                    ax.text(x, 0.5, "no\nratio", transform=ax.get_xaxis_transform(), ha="center", va="center", fontsize=7,
                            color="0.3", bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "0.6", "lw": 0.6}, zorder=5,
                            gid=f"{r.task}|{attr}|{r.step.name}|no ratio")
                ax.set_xticks(range(len(walk)), names, rotation=40, ha="right", fontsize=7)
                heading = title + (f" (paper {theirs[i]:.1f}x, dashed)" if theirs else "")
                ax.set_title(f"{task_label(walk[0].task)}\n{heading}" if i == 0 else heading, fontsize=8)
                if j == 0:
                    ax.set_ylabel(f"Flamingo over baseline, {title} (x)")
        handles = [Patch(color=c, label=text) if kind == "bar" else
                   Line2D([], [], color=c, lw=0.8, ls=(0, (4, 2)) if kind == "dashed" else "-", marker="_" if kind == "errorbar" else None,
                          markersize=6, label=text) for kind, c, text in LEGEND]
        handles.append(Patch(facecolor="white", edgecolor="0.6", label="no ratio: a policy never reached that step's target in some seed"))
        fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return fig


# -- the documentation's tables, rendered from the committed results files (a test compares the page with them) ---------

def _cell(value: float | None, ci: Sequence[float] | None = None, factor: bool = False) -> str:
    if value is None:
        return "-"
    text = f"x{value:.2f}" if factor else f"{value:.2f}x"
    return text + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def headline_md(attribution: dict[str, Any]) -> list[str]:
    """Markdown: per task, the default's and the paper's readings' headline beside the paper's Table 2 (from ``attribution.json``)."""
    out = ["| task | speedup, our default [95 % CI] | speedup, the paper's readings | speedup, paper's readings with our target rule "
           "| paper | energy efficiency, our default | energy efficiency, paper's readings with our target rule | paper |",
           "|---|---|---|---|---|---|---|---|"]
    for task, steps in attribution.items():
        by = {s["step"]: s for s in steps}
        theirs = paper_headline(task)
        first, default, target = by["paper"], steps[-1], by["target"]
        literal = _cell(first["speedup"], first["speedup_ci"])
        if first["speedup"] is None:
            literal = "no ratio (" + "; ".join(first["missed"]) + " never reached)"
        paper_cells = [f"{theirs[0]:.1f}x", f"{theirs[1]:.1f}x"] if theirs else ["-", "-"]
        out.append(f"| {task_label(task)} | {_cell(default['speedup'], default['speedup_ci'])} | {literal} | "
                   f"{_cell(target['speedup'], target['speedup_ci'])} | {paper_cells[0]} | "
                   f"{_cell(default['energy_efficiency'], default['energy_efficiency_ci'])} | "
                   f"{_cell(target['energy_efficiency'], target['energy_efficiency_ci'])} | {paper_cells[1]} |")
    return out


def walk_md(attribution: dict[str, Any]) -> list[str]:
    """Markdown: the walk, one row per step, one speedup column and one factor column per task."""
    tasks = list(attribution)
    out = ["| step | runs | " + " | ".join(f"{task_label(t)}: speedup | factor" for t in tasks) + " |",
           "|---|---|" + "---|---|" * len(tasks)]
    for i, step in enumerate(attribution[tasks[0]]):
        cells = []
        for t in tasks:
            s = attribution[t][i]
            cells += [_cell(s["speedup"], s["speedup_ci"]), _cell(s["speedup_factor"], s["speedup_factor_ci"], factor=True)]
        out.append(f"| {step['label']} | {step['runs']} | " + " | ".join(cells) + " |")
    return out


def readings_md(attribution: dict[str, Any], sensitivity: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Markdown: every reading: the option, the paper's words, our default and why, and its measured effect on the
    speedup per task (the attribution's factor; for the choices the paper does not make, ``sensitivity`` rows:
    ``{"key", "value", "effect"}``, the main job's speedup with the value over the reference's)."""
    from flamingo_sim.fl.readings import SILENT

    tasks = list(attribution)
    out = ["| reading | option (paper / our default) | the paper's words (section) | our default, and why | measured effect on the "
           "speedup (" + ", ".join(task_label(t) for t in tasks) + ") |", "|---|---|---|---|---|"]
    for r in READINGS:
        if r.key.startswith("reproduce."):
            effect = "Table 3 only (Table 2 unchanged): the report prints both comparisons"
        else:
            steps = [next(s for s in attribution[t] if s["step"] == r.name) for t in tasks]
            effect = " / ".join(_cell(s["speedup_factor"], s["speedup_factor_ci"], factor=True) for s in steps)
            if all(s["speedup_factor"] is None for s in steps):
                effect = "the paper's reading has no ratio where a policy never reaches the target (see the walk)"
        out.append(f"| {r.name} | `{r.key}`: `{r.paper}` / `{r.default}` | {r.words} ({r.section}) | `{r.default}`: {r.why} | {effect} |")
    for key, (default, what) in SILENT.items():
        rows = [s for s in sensitivity if s["key"] == key or s["key"].startswith(key + ".")]  # a knob of the model counts too
        effect = "; ".join(f"`{s['key'][len(key) + 1:] + ': ' if s['key'] != key else ''}{s['value']}`: x{s['effect']:.2f}"
                           for s in rows) if rows else "not measured here"
        out.append(f"| {what} | `{key}` | not in the paper | `{default}` | {effect} |")
    return out


#: A generated block of a documentation page: ``<!-- results: FILE KIND [FILE2] -->`` ... ``<!-- end results -->``.
DOC_BLOCK = re.compile(r"(<!-- results: (\S+) (\w+)(?: (\S+))? -->\n)(.*?)(<!-- end results -->)", re.S)


def _md_rows(t: dict[str, Any], cols: Sequence[int] | None = None, keep: Callable[[list[str]], bool] = lambda r: True) -> list[str]:
    cols = list(range(len(t["columns"]))) if cols is None else list(cols)
    out = ["| " + " | ".join(t["columns"][c] for c in cols) + " |", "|" + "---|" * len(cols)]
    return out + ["| " + " | ".join(r[c] for c in cols) + " |" for r in t["rows"] if keep(r)]


def table2_md(tables: dict[str, Any]) -> list[str]:
    """Markdown: every Table 2 of a report's ``tables.json`` (one per exploration reading under ``--readings paper``), the
    ratios beside the paper's, and each one's reading line; with more than one, each under its title."""
    titles = [t for t in tables if t.startswith("Table 2")]
    if not titles:
        raise ValueError("no Table 2 in the results file")
    out: list[str] = []
    for title in titles:
        t = tables[title]
        cols = [0, 1, len(t["columns"]) - 2, len(t["columns"]) - 1]
        head = [f"*{title.partition(', under ')[2] or title}:*", ""] if len(titles) > 1 else []
        out += [*([""] if out else []), *head, *_md_rows(t, cols), "", t["reading"]]
    return out


def table3_md(tables: dict[str, Any]) -> list[str]:
    """Markdown: Table 3 of a report's ``tables.json`` (in today's form, :func:`~flamingo_sim.studies.reproduce.tables.current_table3`),
    the first task's rows, the line that says once what the "by construction" column's markers stand for, and its reading line."""
    (title,) = [t for t in tables if t.startswith("Table 3")]
    t = current_table3(tables[title])
    task = t["rows"][0][0]
    notes = ["", t["footnotes"]] if t["footnotes"] else []
    return [f"{task}:", "", *_md_rows(t, range(1, len(t["columns"])), lambda r: r[0] == task), *notes, "", t["reading"]]


def stragglers_md(tables: dict[str, Any]) -> list[str]:
    """Markdown: a report's straggler table (each policy's slowest kept client per round)."""
    (title,) = [t for t in tables if t.startswith("What sets the speedup")]
    return _md_rows(tables[title])


def mechanisms_md(mechanisms: dict[str, Any]) -> list[str]:
    """Markdown: a reproduction's ``mechanisms.json`` (``--attribution``): per task, each mechanism of the default switched
    to a simpler alternative, its speedup and energy efficiency and their factors over the default's."""
    def x(value: float | None, ci: Sequence[float] | None) -> str:
        return "no ratio" if value is None else f"{value:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")

    out = ["| task | variant | speedup [95 % CI] | factor over the default | energy efficiency [95 % CI] | factor over the default |",
           "|---|---|---|---|---|---|"]
    for task, steps in mechanisms.items():
        label = task_label(task)
        for s in steps:
            out.append(f"| {label} | {s['label']} | {x(s['speedup'], s['speedup_ci'])} | {x(s['speedup_factor'], s['speedup_factor_ci'])} "
                       f"| {x(s['energy_efficiency'], s['energy_efficiency_ci'])} | {x(s['energy_factor'], s['energy_factor_ci'])} |")
    return out


def range_md(summary: dict[str, Any], rows: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Markdown: a ``sensitivity --unknowns`` grid's ``range.json`` (each ratio's seed interval beside its range over the
    device model's unknowns and the paper's figure), then, from its ``sensitivity.csv`` (``rows``), each unknown's values."""
    def x(value: Any) -> str:
        return "-" if value is None or value == "" or (isinstance(value, float) and math.isnan(value)) else f"{float(value):.2f}x"

    out = ["| ratio | reference | seed interval | range over the unknowns | paper | range holds the paper's |", "|---|---|---|---|---|---|"]
    for ratio in ("speedup", "energy_efficiency"):
        e = summary[ratio]
        seeds = "-" if e["seed_interval"] is None else f"{e['seed_interval'][0]:.2f}-{e['seed_interval'][1]:.2f}x ({e['n_seeds']} seeds)"
        span = "-" if e["model_range"] is None else f"{e['model_range'][0]:.2f}-{e['model_range'][1]:.2f}x ({e['n_points']} points)"
        holds = ("yes" if e["range_holds_paper"] else "no") if "range_holds_paper" in e else "-"
        out.append(f"| {ratio.replace('_', ' ')} | {x(e['reference'])} | {seeds} | {span} | "
                   f"{'-' if 'paper' not in e else format(e['paper'], '.1f') + 'x'} | {holds} |")
    if rows:
        names = {u["key"]: u["name"] for u in summary["unknowns"]}
        out += ["", "| unknown | value | speedup | energy efficiency |", "|---|---|---|---|"]
        for r in rows:
            if r["knob"] == "reference":
                out.append(f"| reference (the run's own values) | | {x(r['speedup'])} | {x(r['energy_efficiency'])} |")
            elif r["knob"] in names:
                out.append(f"| {names[r['knob']]} (`{r['knob']}`) | {r['value']} | {x(r['speedup'])} | {x(r['energy_efficiency'])} |")
    return out


def _point_cell(pol: dict[str, Any], key: str, scale: float, fmt: str) -> str:
    value = pol.get(key)
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) else format(value / scale, fmt)


def points_md(rows: Sequence[dict[str, Any]], summary: Callable[[str], dict[str, Any]]) -> list[str]:
    """Markdown: a sensitivity grid's points (``sensitivity.csv``'s rows, each point's ``summary.json`` by
    ``summary(NAME)``, NAME ``reference`` or the point's run directory,
    :func:`~flamingo_sim.studies.names.point_name`): Flamingo's speedup and energy efficiency over the
    baseline with their 95 % bootstrap intervals over seeds, and after the whole run both policies' clients lost
    (means over seeds), training energy, and the rounds Flamingo's exploration lasted."""
    out = ["| point | speedup [95 % CI] | energy efficiency [95 % CI] | clients lost, baseline / Flamingo "
           "| training energy, baseline / Flamingo | Flamingo's exploration over by |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        name = REFERENCE if r["knob"] == REFERENCE else point_name(r["knob"], r["value"])
        pols = summary(name)["policies"]
        base, flam = pols["baseline"], pols["flamingo"]
        exploration = flam.get("exploration")
        if not exploration:
            over = "no exploration"
        else:  # a seed still exploring in its last round never finished
            ran = {s: int(v["rounds"]) for s, v in flam.get("per_seed", {}).items()}
            unfinished = [s for s, v in exploration["per_seed"].items() if int(v["rounds"]) >= ran.get(s, 1 << 30)]
            over = (f"never: exploring in the last round in {len(unfinished)} of {len(ran)} seeds" if unfinished
                    else f"round {exploration['rounds']:.1f} (mean)")
        point = "reference (no knob varied)" if name == REFERENCE else f"`{r['knob']}: {r['value']}`"
        out.append(f"| {point} | {ratio_text(flam.get('speedup'), flam.get('speedup_ci'))} "
                   f"| {ratio_text(flam.get('energy_efficiency'), flam.get('energy_efficiency_ci'))} "
                   f"| {_point_cell(base, 'clients_lost', 1, ',.0f')} / {_point_cell(flam, 'clients_lost', 1, ',.0f')} "
                   f"| {_point_cell(base, 'total_energy_j', 1e6, '.1f')} / {_point_cell(flam, 'total_energy_j', 1e6, '.1f')} MJ | {over} |")
    return out


def sensitivity_effects(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``sensitivity.csv``'s rows (as dicts) as the readings table takes them: each varied value's speedup over the reference's."""
    out = []
    for r in rows:
        change = r.get("speedup_rel_change", r.get("speedup_change"))  # its name before and since sensitivity.csv named it relative
        if r["knob"] != REFERENCE and change not in (None, "") and float(change) == float(change):
            out.append({"key": r["knob"], "value": r["value"], "effect": float(change) + 1.0})
    return out


def fill_doc(page: str, load: Callable[[str], Any]) -> str:
    """``page`` with every generated block re-rendered from its results files (``load(FILE)``: the parsed JSON, or a
    CSV's rows as dicts). KIND ``headline``, ``walk`` or ``readings`` (:func:`headline_md`, :func:`walk_md`,
    :func:`readings_md`) of an ``attribution.json``; ``readings`` takes a ``sensitivity.csv`` as FILE2 for the choices
    the paper does not make; ``table2``, ``table3``, ``stragglers`` (:func:`table2_md`, :func:`table3_md`, :func:`stragglers_md`) of a report's
    ``tables.json``; ``mechanisms`` (:func:`mechanisms_md`) of a ``mechanisms.json``; ``range`` (:func:`range_md`) of a
    ``sensitivity --unknowns`` grid's ``range.json`` and its ``sensitivity.csv``; ``points``
    (:func:`points_md`) of a ``sensitivity.csv`` and its points' ``summary.json`` beside it. A page equal to its
    ``fill_doc`` quotes exactly what its files hold."""
    def one(m: re.Match) -> str:
        kind, data = m.group(3), load(m.group(2))
        if kind == "headline":
            lines = headline_md(data)
        elif kind == "walk":
            lines = walk_md(data)
        elif kind == "readings":
            lines = readings_md(data, sensitivity_effects(load(m.group(4))) if m.group(4) else ())
        elif kind == "table3":
            lines = table3_md(data)
        elif kind == "table2":
            lines = table2_md(data)
        elif kind == "stragglers":
            lines = stragglers_md(data)
        elif kind == "mechanisms":
            lines = mechanisms_md(data)
        elif kind == "range":  # FILE: a range.json, its sensitivity.csv beside it
            folder = m.group(2).rpartition("/")[0]
            lines = range_md(data, load(f"{folder}/sensitivity.csv"))
        elif kind == "points":  # FILE: a sensitivity.csv, each point's summary.json beside it
            folder = m.group(2).rpartition("/")[0]
            lines = points_md(data, lambda name: load(f"{folder}/{name}.summary.json"))
        else:
            raise ValueError(f"unknown generated block kind {kind!r} (expected headline, walk, readings, points, range, table2, "
                             "table3, stragglers or mechanisms)")
        return m.group(1) + "\n".join(lines) + "\n" + m.group(6)

    def value(m: re.Match) -> str:
        return m.group(1) + doc_value(load(m.group(2)), m.group(3), m.group(4)) + m.group(6)

    return DOC_VALUE.sub(value, DOC_BLOCK.sub(one, page))


#: A generated value inside a sentence: ``<!-- results-value: FILE TASK FIELD -->VALUE<!-- end -->``.
DOC_VALUE = re.compile(r"(<!-- results-value: (\S+) (\w+) (\w+) -->)(.*?)(<!-- end -->)", re.S)


def doc_value(attribution: dict[str, Any], task: str, name: str) -> str:
    """One figure of ``attribution.json`` as a page quotes it: ``first_round_8``, ``first_round_11`` or
    ``selections_per_client`` of the task's ``exploration: per_request`` estimate."""
    step = next(s for s in attribution[task] if s.get("exploration") and s["exploration"].get("per_request"))
    pr = step["exploration"]["per_request"]
    if name.startswith("first_round_"):
        return str(pr["first_round"][name[len("first_round_"):]])
    if name == "selections_per_client":
        return f"{pr['selections_per_client']:.2f}"
    raise ValueError(f"unknown generated value {name!r}")
