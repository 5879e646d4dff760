"""Writing the reproduction report: ``report.md``, ``report.html``, ``figure6.png/.svg``, ``tables.json``.

Its content is built once as blocks (:mod:`flamingo_sim.report.document`) and rendered as Markdown and as HTML.

The report opens with Tables 1-3 and the Figure 6 analogue; then, per task, the comparison on
three bases and the exploration cost; then each task's detailed figures (the ``report`` figures
of its run, :mod:`flamingo_sim.studies.reproduce.detail`) from ``figures/<task>/``, drawn as each
task's run finished.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.figure import Figure

from flamingo_sim.devices.catalogue import ProfileDirs
from flamingo_sim.io import atomic_path, write_json
from flamingo_sim.report import document as doc
from flamingo_sim.studies.reproduce import paper
from flamingo_sim.studies.reproduce.attribution import StepResult
from flamingo_sim.studies.reproduce.figure import figure6
from flamingo_sim.studies.reproduce.mechanisms import mechanism_table, mechanisms_json, straggler_table
from flamingo_sim.studies.reproduce.tables import Table, TaskResult, bases_table, num, table1, table2, table3
from flamingo_sim.studies.reproduce.why import WHY_CAPTION, attribution_json, attribution_table, waterfall, why_lines

__all__ = ["load_results", "write_reproduction", "exploration_line", "fidelity_note", "horizon_note", "trace_horizon_s"]

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
        extra: dict = {"construction": dict((construction or {}).get(task, {})), "horizon_s": trace_horizon_s(Path(run_dir))}
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


def trace_horizon_s(run_dir: Path) -> float | None:
    """The wrap-free horizon (s) of the trace set a run replayed (:attr:`~flamingo_sim.traces.store.ClientTraces.horizon_s`;
    the run's ``inputs.json`` names its trace files); None where it names none or they are gone."""
    from flamingo_sim.fl.runner.inputs import INPUTS_FILE
    from flamingo_sim.traces.store import load_client_traces

    path = run_dir / INPUTS_FILE
    if not path.is_file():
        return None
    files = [Path(v["path"]) for k, v in json.loads(path.read_text()).items() if k.startswith("traces.path ") and isinstance(v, dict)]
    if not files or not files[0].is_file():
        return None
    return float(load_client_traces(files[0].parent).horizon_s)


def horizon_note(results: Sequence[TaskResult]) -> str:
    """One line: which runs went past their trace set's wrap-free horizon (``extra["horizon_s"]``), from which round,
    and for how many rounds, or that none did. Past it, clients replay their battery traces from the start (the run
    says so once on its log; issue 50: the quick ShuffleNetV2 task's baseline reached 709.7 h on traces of 697.3 h)."""
    past, horizons = [], set()
    for r in results:
        h = r.extra.get("horizon_s")
        if h is None:
            continue
        horizons.add(h)
        for (policy, seed), rows in r.metrics.groupby(["policy", "seed"], sort=True):
            over = rows[rows["time_s"] > h].sort_values("round")
            if len(over):
                past.append(f"{r.label}, {policy} seed {seed}, from round {int(over['round'].iloc[0])} ({len(over)} of its rounds; "
                            f"{float(rows['time_s'].max()) / 3600:.1f} h at its last against the traces' {h / 3600:.1f} h)")
    if not horizons:
        return "Trace horizon: not known (the runs' inputs.json name no trace set)."
    if not past:
        return f"Trace horizon: every run stayed within its trace set's wrap-free horizon ({', '.join(f'{h / 3600:.1f} h' for h in sorted(horizons))})."
    return (f"Trace horizon: {len(past)} run{'s' if len(past) > 1 else ''} passed the trace set's wrap-free horizon, after which "
            f"clients replay their battery traces from the start: {'; '.join(past)}. Fewer rounds (`fl.rounds`) or a longer trace "
            "set keeps a run inside it.")


def _save(fig: Figure, out: Path, stem: str) -> None:
    """``fig`` as ``out/stem.png`` and ``.svg``, each written atomically (:func:`~flamingo_sim.report.write.save_figure`)."""
    from flamingo_sim.report.write import save_figure

    with ExitStack() as stack:
        save_figure(fig, [(stack.enter_context(atomic_path(out / f"{stem}.{fmt}")), fmt) for fmt in ("png", "svg")], dpi=DPI)


def _table(t: Table) -> doc.Table:
    """A reproduction table as a block of the report (its note, its cells' footnotes and its reading under it)."""
    return doc.Table(t.title, t.columns, t.rows, (t.note, t.footnotes, t.reading) if t.footnotes else (t.note, t.reading))


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
    why: list[doc.Block] = []
    if walks:
        _save(waterfall(walks), out, "attribution")
        write_json(out / "attribution.json", attribution_json(walks))
        why = [doc.Heading(2, "Why our Table 2 differs from the paper's"), doc.Lines(why_lines(walks)),
               doc.Figure("attribution.png", "attribution", WHY_CAPTION), *(_table(attribution_table(w)) for w in walks if w)]
    mtables: list[Table] = []
    if mechanisms:
        write_json(out / "mechanisms.json", mechanisms_json(mechanisms))
        labels = {r.task: r.label for r in results}
        mtables = [mechanism_table(labels.get(task, task), steps) for task, steps in mechanisms.items()]
        why += [doc.Heading(3, "Past the readings: the model's mechanisms"), *(_table(t) for t in mtables)]
    write_json(out / "tables.json", {t.title: {"columns": t.columns, "rows": t.rows, "reading": t.reading, "paper": t.paper,
                                               **({"footnotes": t.footnotes} if t.footnotes else {})}
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
    rel = {task: {stem: [p.relative_to(out).as_posix() for p in paths] for stem, paths in figs.items()} for task, figs in details.items()}
    curves = [(r.task, rel[r.task]["speedup_vs_target"][0]) for r in results if "speedup_vs_target" in rel.get(r.task, {})]
    blocks: list[doc.Block] = [
        doc.Heading(1, "Flamingo (DistributedML '23) reproduced with flamingo-sim"), doc.Lines(head),
        _table(t1), _table(t2), *([_table(t2_ets)] if t2_ets else []), _table(stragglers), doc.Lines([fidelity, horizon_note(results)]),
        doc.Images([(png, f"speedup by target, {task}") for task, png in curves], width=680), doc.Lines([CURVE_CAPTION]), _table(t3),
        doc.Heading(3, "Figure 6 analogue"), doc.Figure("figure6.png", "figure 6", fig_caption),
        *why,
        doc.Heading(2, "Each task on three bases"),
        *(b for r, t in zip(results, per_task) for b in (_table(t), doc.Lines([f"Exploration cost: {exploration_line(r)}"]))),
        doc.Heading(2, "Detailed figures, per task"),
        *(b for r in results for b in (doc.Heading(3, r.label),
                                       doc.Images([(paths[0], stem) for stem, paths in rel.get(r.task, {}).items()], width=680))),
    ]
    md_path = out / "report.md"
    with atomic_path(md_path) as tmp:
        tmp.write_text(doc.markdown(blocks))
    with atomic_path(out / "report.html") as tmp:
        tmp.write_text(doc.html_page("Flamingo reproduced with flamingo-sim", blocks))
    return md_path
