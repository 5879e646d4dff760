"""Writing the reproduction report: ``report.md``, ``report.html``, ``figure6.png/.svg``, ``tables.json``.

The report opens with Tables 1-3 and the Figure 6 analogue; then, per task, the comparison on
three bases and the exploration cost; then each task's detailed figures (the ``report`` figures
of its run, :mod:`flamingo_sim.studies.reproduce.detail`) from ``figures/<task>/``, drawn as each
task's run finished.
"""

from __future__ import annotations

import html
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.figure import Figure

from flamingo_sim.devices.catalogue import ProfileDirs
from flamingo_sim.io import atomic_path, write_json
from flamingo_sim.studies.reproduce import paper
from flamingo_sim.studies.reproduce.attribution import StepResult
from flamingo_sim.studies.reproduce.figure import figure6
from flamingo_sim.studies.reproduce.mechanisms import mechanism_table, mechanisms_json, straggler_table
from flamingo_sim.studies.reproduce.tables import Table, TaskResult, bases_table, num, table1, table2, table3
from flamingo_sim.studies.reproduce.why import WHY_CAPTION, attribution_json, attribution_table, waterfall, why_lines

__all__ = ["load_results", "write_reproduction", "exploration_line", "fidelity_note"]

DPI = 200
#: Caption of the speedup-by-target figure set beside Table 2.
CURVE_CAPTION = ("Speedup and energy efficiency of Flamingo over the baseline against the target accuracy, one figure per task, "
                 "read on the same curve as Table 2 (star: Table 2's ratios at its target, the mean of each seed's own; shaded: "
                 "targets some policy never reaches in some seed, where the curve, one target for every seed, has no ratio).")


def load_results(run_dirs: Sequence[tuple[str, Path]], construction: Mapping[str, Mapping[str, Any]] | None = None) -> list[TaskResult]:
    """Read each ``(task, run directory)`` back; ``construction``: task -> phone -> what Table 3's row owes to the model
    (kept in ``extra["construction"]``)."""
    from flamingo_sim.fl.runner.results import load_run

    out = []
    for task, run_dir in run_dirs:
        metrics, summary = load_run(run_dir)
        extra: dict = {"construction": dict((construction or {}).get(task, {}))}
        out.append(TaskResult(task, Path(run_dir), summary, metrics, baseline=summary.get("baseline", "baseline"), extra=extra))
    return out


def exploration_line(r: TaskResult) -> str:
    x = r.summary["policies"][r.policy].get("exploration")
    if not x:
        return f"{r.label}: no client explored execution choices."
    return (f"{r.label}: exploration lasted rounds 1-{x['rounds']:.0f} (mean over seeds), {num(x['time_s'], 2, 1 / 3600)} h of virtual time "
            f"and {num(x['energy_j'], 1, 1e-3)} kJ of training energy ({num(x['exploring_energy_j'], 1, 1e-3)} kJ by the exploring "
            f"clients); the baseline's same rounds took {num(x['baseline_time_s'], 2, 1 / 3600)} h and {num(x['baseline_energy_j'], 1, 1e-3)} kJ.")


def fidelity_note(results: Sequence[TaskResult]) -> str:
    proxy = [r.label for r in results if "NOT real data" in str(r.summary.get("data", ""))]
    if not proxy:
        return "All tasks trained on real data (data.root set)."
    return (f"Fidelity: {', '.join(proxy)} trained the generated proxy task (real data absent), the same 60-feature "
            "non-IID classification with a small MLP for every model: device time and energy are priced by each DNN's "
            "phone profiles, but accuracy per round is the proxy's, so model-specific convergence (how many rounds "
            "MobileNetV2, ShuffleNetV2 or ResNet-34 need) cannot show, and time and energy to target differ between tasks "
            "only through the device model and the task's population and model size. Set data.root "
            "(`--set TASK:data.root=DIR`) to train the real DNNs.")


def _save(fig: Figure, out: Path, stem: str) -> None:
    """``fig`` as ``out/stem.png`` and ``.svg``, each written atomically (:func:`~flamingo_sim.report.write.save_figure`)."""
    from flamingo_sim.report.write import save_figure

    with ExitStack() as stack:
        save_figure(fig, [(stack.enter_context(atomic_path(out / f"{stem}.{fmt}")), fmt) for fmt in ("png", "svg")], dpi=DPI)


def _md_table(t: Table) -> list[str]:
    out = [f"### {t.title}", ""]
    out.append("| " + " | ".join(t.columns) + " |")
    out.append("|" + "---|" * len(t.columns))
    out += ["| " + " | ".join(row) + " |" for row in t.rows]
    for line in (t.note, t.reading):
        if line:
            out += ["", line]
    return out + [""]


def _html_table(t: Table) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in t.columns)
    body = "\n".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    note = "".join(f"<p>{e(line)}</p>" for line in (t.note, t.reading) if line)
    return f"<h3>{e(t.title)}</h3>\n<table><tr>{head}</tr>\n{body}\n</table>\n{note}"


def write_reproduction(results: Sequence[TaskResult], out_dir: str | Path, *, quick: bool, profiles: ProfileDirs,
                       details: Mapping[str, Mapping[str, Sequence[Path]]],
                       overrides: Mapping[str, Sequence[str]] | None = None, profile_set: str = "paper",
                       readings: str = "default", walks: Sequence[Sequence[StepResult]] | None = None,
                       mechanisms: Mapping[str, Sequence[StepResult]] | None = None,
                       explore_then_share: Sequence[TaskResult] | None = None) -> Path:
    """Write the report into ``out_dir``; returns the Markdown file. ``details``: task -> its detailed figures by stem
    (their files, PNG first; :func:`~flamingo_sim.studies.reproduce.detail.ensure_task_figures`); ``overrides``: task ->
    the ``--set`` list it ran with; ``profile_set``: the runs' ``phones.profile_set`` (Table 1 reads it); ``readings``:
    the named readings the runs used; ``walks``: the attribution walk of each task
    (:mod:`~flamingo_sim.studies.reproduce.attribution`), written as "Why our Table 2 differs from the paper's" with
    ``attribution.png/.svg`` and ``attribution.json``; ``mechanisms``: task -> the model's mechanisms one at a time
    (:mod:`~flamingo_sim.studies.reproduce.mechanisms`, into the same section and ``mechanisms.json``);
    ``explore_then_share``: the same tasks under Appendix B's reading of exploration (``--readings paper``), its Table 2
    beside the main one."""
    out = Path(out_dir)
    phones = list(dict.fromkeys(c[len("interference_s_"):] for r in results for c in r.metrics.columns if c.startswith("interference_s_")))
    t1, t2, t3 = table1(profiles, phones, profile_set), table2(results), table3(results)
    t2_ets = None
    if explore_then_share is not None:
        t2_ets = table2(explore_then_share)
        t2_ets = Table(t2_ets.title + ", under Appendix B's explore-then-share (the first client of a phone model benchmarks it, "
                       "the coordinator shares the profile)", t2_ets.columns, t2_ets.rows, t2_ets.note, t2_ets.reading, t2_ets.paper)
        t2 = Table(t2.title + ", under section 5.1's profiles benchmarked beforehand (exploration: none)", t2.columns, t2.rows,
                   t2.note, t2.reading, t2.paper)
    stragglers = straggler_table(results)
    per_task = [bases_table(r) for r in results]
    _save(figure6(results), out, "figure6")
    why_md: list[str] = []
    why_html: list[str] = []
    if walks:
        _save(waterfall(walks), out, "attribution")
        write_json(out / "attribution.json", attribution_json(walks))
        wtables = [attribution_table(w) for w in walks if w]
        why_md = ["## Why our Table 2 differs from the paper's", "", *why_lines(walks), "", "![attribution](attribution.png)", "",
                  WHY_CAPTION, ""]
        for t in wtables:
            why_md += _md_table(t)
        why_html = ["<h2>Why our Table 2 differs from the paper's</h2>", *(f"<p>{html.escape(x)}</p>" for x in why_lines(walks)),
                    f'<figure><img src="attribution.png" width="900" alt="attribution"><figcaption>{html.escape(WHY_CAPTION)}'
                    "</figcaption></figure>", *(_html_table(t) for t in wtables)]
    mtables: list[Table] = []
    if mechanisms:
        write_json(out / "mechanisms.json", mechanisms_json(mechanisms))
        labels = {r.task: r.label for r in results}
        mtables = [mechanism_table(labels.get(task, task), steps) for task, steps in mechanisms.items()]
        why_md += ["### Past the readings: the model's mechanisms", ""]
        for t in mtables:
            why_md += _md_table(t)
        why_html += ["<h3>Past the readings: the model's mechanisms</h3>", *(_html_table(t) for t in mtables)]
    write_json(out / "tables.json", {t.title: {"columns": t.columns, "rows": t.rows, "reading": t.reading, "paper": t.paper}
                                     for t in (t1, t2, *([t2_ets] if t2_ets else []), stragglers, t3, *per_task)})

    seeds = sorted({int(s) for r in results for s in r.metrics["seed"].unique()})
    head = [
        f"Mode: {'quick (fewer rounds, 2 seeds by default)' if quick else 'full'}; seeds {seeds}; baseline = PyTorch's default "
        "(4567 unpinned, as stock Android schedules it; no monitoring) vs Flamingo, on the same traces, phones, data and seeds. "
        "Paper: " + paper.SOURCE + ".",
        "Runs: " + ", ".join(f"`{r.run_dir}`" for r in results) + f"; profile set `{profile_set}`; readings `{readings}`"
        + (" (exploration both ways: section 5.1's benchmarked profiles and Appendix B's explore-then-share)."
           if explore_then_share is not None else "."),
        paper.NOT_FITTED,
    ]
    if overrides and any(overrides.values()):
        head.append("Overrides: " + "; ".join(f"{task}: {', '.join(f'`{o}`' for o in own)}" for task, own in overrides.items() if own) + ".")
    fidelity = fidelity_note(results)
    fig_caption = ("Figure 6 analogue. (a) test accuracy vs virtual time (mean over seeds; band: lowest to highest seed; dashed: target; shaded: "
                   "Flamingo's exploration phase); (b) clients available (online: trace and energy budget allow) at each "
                   "round's start vs round, on a full scale; (c) the same vs virtual time; (d) distinct clients lost to training "
                   "(offline only because training drained them) vs round. Every curve starts at round 0, t = 0.")
    md = ["# Flamingo (DistributedML '23) reproduced with flamingo-sim", ""] + head + [""]
    rel = {task: {stem: [p.relative_to(out).as_posix() for p in paths] for stem, paths in figs.items()} for task, figs in details.items()}
    curves = [(r.task, rel[r.task]["speedup_vs_target"][0]) for r in results if "speedup_vs_target" in rel.get(r.task, {})]
    md += _md_table(t1) + _md_table(t2) + (_md_table(t2_ets) if t2_ets else []) + _md_table(stragglers)
    md += [fidelity, ""] + [f"![speedup by target, {task}]({png})" for task, png in curves]
    md += ["", CURVE_CAPTION, ""]
    md += _md_table(t3)
    md += ["### Figure 6 analogue", "", "![figure 6](figure6.png)", "", fig_caption, ""]
    md += why_md
    md += ["## Each task on three bases", ""]
    for r, t in zip(results, per_task):
        md += _md_table(t) + [f"Exploration cost: {exploration_line(r)}", ""]
    md += ["## Detailed figures, per task", ""]
    for r in results:
        md += [f"### {r.label}", "", *(f"![{stem}]({paths[0]})" for stem, paths in rel.get(r.task, {}).items()), ""]
    md_path = out / "report.md"
    with atomic_path(md_path) as tmp:
        tmp.write_text("\n".join(md))

    e = html.escape
    body = "\n".join([
        "<h1>Flamingo (DistributedML '23) reproduced with flamingo-sim</h1>",
        *(f"<p>{e(line.replace('`', ''))}</p>" for line in head),
        _html_table(t1), _html_table(t2), *([_html_table(t2_ets)] if t2_ets else []), _html_table(stragglers), f"<p>{e(fidelity)}</p>",
        *(f'<figure><img src="{e(png)}" width="680" alt="speedup by target, {e(task)}"></figure>' for task, png in curves),
        f"<p>{e(CURVE_CAPTION)}</p>",
        _html_table(t3),
        f'<h3>Figure 6 analogue</h3><figure><img src="figure6.png" width="900" alt="figure 6"><figcaption>{e(fig_caption)}</figcaption></figure>',
        *why_html,
        "<h2>Each task on three bases</h2>",
        *(_html_table(t) + f"<p>Exploration cost: {e(exploration_line(r))}</p>" for r, t in zip(results, per_task)),
        "<h2>Detailed figures, per task</h2>",
        *(f"<h3>{e(r.label)}</h3>" + "".join(f'<figure><img src="{e(paths[0])}" width="680" alt="{e(stem)}"></figure>'
                                               for stem, paths in rel.get(r.task, {}).items()) for r in results),
    ])
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Flamingo reproduced with flamingo-sim</title>
<style>body{{font-family:sans-serif;max-width:75em;margin:2em auto}} table{{border-collapse:collapse;margin:0.5em 0}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}} figure{{margin:1.5em 0}}</style></head>
<body>
{body}
</body></html>
"""
    with atomic_path(out / "report.html") as tmp:
        tmp.write_text(page)
    return md_path
