"""``flamingo-sim sensitivity``: how much each modelling knob moves the headline ratios.

One knob at a time around the experiment's own configuration (the reference run): for every
``--vary KEY=V1,V2,...`` and every value, the experiment runs with ``--set KEY=VALUE`` (and the
command's own ``--set`` overrides), over the same seeds. Each run is a normal run directory
under ``<out>/runs/``; a value that leaves the configuration unchanged reuses the reference run.

Written into ``<out>``:

- ``sensitivity.csv``: one row per (knob, value): the speedup and energy efficiency of the
  compared policy over the baseline (means over seeds), both policies' time and energy to the
  target, and each ratio's relative change against the reference (``speedup_rel_change``,
  ``energy_efficiency_rel_change``: value / reference - 1, so 0.25 is 25 % higher);
- ``sensitivity.md``: the same as a table, with the reference first;
- ``tornado.png``: per knob, the range of speedup (left) and energy efficiency (right) over its
  values, against the reference (vertical line), knobs sorted by how far they move speedup.

``--unknowns`` varies every unknown of the device model too (:mod:`flamingo_sim.studies.unknowns`) and writes
``range.json`` and a block of ``sensitivity.md``: each ratio's seed interval beside its range over the unknowns, and
whether that range holds the paper's figure.

Every ``--vary`` value is validated (the whole config loaded) before any run starts. Values are
parsed as YAML, like ``--set``, so a value cannot itself contain a comma.

The grid is one study (:mod:`flamingo_sim.studies.study`): its (point, seed, policy) units run
one after another, as ``--jobs N`` processes or as Ray tasks, with the same results; an
interrupted grid continues when the same command runs again (finished runs are read back), and
a grid given more ``--vary`` values later reuses the runs it already has.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from flamingo_sim.config import to_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.runner.options import Execution
from flamingo_sim.io import atomic_path
from flamingo_sim.resources import find_experiment
from flamingo_sim.studies.names import REFERENCE, point_name
from flamingo_sim.studies.unknowns import UNKNOWNS, model_range, range_markdown, unknowns_vary

__all__ = ["Knob", "parse_vary", "run_sensitivity", "relative_changes", "tornado_figure"]


@dataclass(frozen=True)
class Knob:
    """One ``--vary``: a dotted config key and the values to try."""

    key: str
    values: tuple[str, ...]


def parse_vary(items: Sequence[str]) -> list[Knob]:
    """``["fl.overcommit=1.0,1.3", ...]`` -> knobs; a malformed item is a one-line ConfigError."""
    knobs: list[Knob] = []
    for item in items:
        key, sep, raw = item.partition("=")
        values = tuple(v.strip() for v in raw.split(","))
        if not sep or not key.strip() or not raw.strip() or any(not v for v in values):
            raise ConfigError(f"--vary {item!r}: expected KEY=V1,V2,..., for example fl.overcommit=1.0,1.3,2.0")
        if key.strip() in {k.key for k in knobs}:
            raise ConfigError(f"--vary {item!r}: {key.strip()} is varied twice")
        knobs.append(Knob(key.strip(), values))
    if not knobs:
        raise ConfigError("sensitivity: name at least one --vary KEY=V1,V2,...")
    return knobs


def _ratios(summary: dict[str, Any], policy: str, baseline: str) -> dict[str, Any]:
    pol = summary["policies"].get(policy, {})
    base = summary["policies"].get(baseline, {})
    return {
        "speedup": pol.get("speedup"),
        "energy_efficiency": pol.get("energy_efficiency"),
        f"{baseline}_time_to_target_h": None if base.get("time_to_target_s") is None else base["time_to_target_s"] / 3600,
        f"{policy}_time_to_target_h": None if pol.get("time_to_target_s") is None else pol["time_to_target_s"] / 3600,
        f"{baseline}_energy_to_target_kj": None if base.get("energy_to_target_j") is None else base["energy_to_target_j"] / 1000,
        f"{policy}_energy_to_target_kj": None if pol.get("energy_to_target_j") is None else pol["energy_to_target_j"] / 1000,
    }


def run_sensitivity(
    experiment: str | Path,
    vary: Sequence[str],
    *,
    out_dir: str | Path,
    overrides: Sequence[str] = (),
    n_seeds: int | None = None,
    log: Callable[[str], None] | None = None,
    execution: Execution | None = None,
    again: str | None = None,
    unknowns: bool = False,
    paper: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Run (or continue) the one-at-a-time grid and write the table and the tornado chart (module docstring).

    ``execution`` and ``again`` as for
    :func:`~flamingo_sim.studies.study.run_study`: the grid is one study. ``unknowns``: vary every unknown of the
    device model too (:data:`~flamingo_sim.studies.unknowns.UNKNOWNS`, those ``vary`` does not name) and write the
    headline's range over them (``range.json``, a block of ``sensitivity.md``), beside ``paper``'s figures
    (``{"speedup": ..., "energy_efficiency": ...}``) where given.
    """
    from flamingo_sim.fl.runner.forkserver import start_early_for

    log = log or (lambda msg: print(msg, file=sys.stderr))
    if unknowns:
        vary = [*vary, *unknowns_vary(vary)]
    knobs = parse_vary(vary)
    ex = execution or Execution()
    start_early_for(ex.executor, ex.jobs)  # the workers' parent imports torch while this process imports the study and reads configs
    from flamingo_sim.studies.study import StudyRun, run_study

    out = Path(out_dir)
    experiment = find_experiment(experiment)
    base_cfg = load_experiment(experiment, list(overrides))
    if len(base_cfg.policies) < 2:
        raise ConfigError(f"{experiment}: policies: sensitivity compares two policies, got {base_cfg.policies}")
    reference = to_mapping(base_cfg)
    plan: list[tuple[str, str, list[str], bool]] = []
    for knob in knobs:
        for value in knob.values:
            sets = [*overrides, f"{knob.key}={value}"]
            try:
                cfg = load_experiment(experiment, sets)
            except ConfigError as exc:
                raise ConfigError(f"--vary {knob.key}={value}: {exc}") from None
            plan.append((knob.key, value, sets, to_mapping(cfg) == reference))

    runs = [StudyRun(REFERENCE, experiment, tuple(overrides), n_seeds)]
    runs += [StudyRun(point_name(key, value), experiment, tuple(sets), n_seeds) for key, value, sets, same in plan if not same]
    results = {r.name: res for r, res in zip(runs, run_study("sensitivity", out, runs, execution=execution, log=log,
                                                               again=again))}
    # the summaries call the policies by their display names (a plug-in's own name, not its import path), in the config's order
    baseline, policy = list(results[REFERENCE].summary["policies"])[:2]
    ref_ratios = _ratios(results[REFERENCE].summary, policy, baseline)
    rows = [{"knob": REFERENCE, "value": "", **ref_ratios}]
    for key, value, _sets, same in plan:
        ratios = ref_ratios if same else _ratios(results[point_name(key, value)].summary, policy, baseline)
        rows.append({"knob": key, "value": value, **ratios})
    table = relative_changes(pd.DataFrame(rows), ref_ratios)
    with atomic_path(out / "sensitivity.csv") as tmp:
        table.to_csv(tmp, index=False)
    markdown = _markdown(table, experiment, policy, baseline)
    if unknowns:
        pol = results[REFERENCE].summary["policies"][policy]
        per_seed = {ratio: list((pol.get(f"{ratio}_per_seed") or {}).values()) for ratio in ("speedup", "energy_efficiency")}
        summary = model_range(rows, per_seed, paper)
        with atomic_path(out / "range.json") as tmp:
            tmp.write_text(json.dumps({"experiment": str(experiment), "policy": policy, "baseline": baseline, "overrides": list(overrides),
                                       "unknowns": [{"name": u.name, "key": u.key, "values": list(u.values), "reason": u.reason}
                                                    for u in UNKNOWNS], **summary}, indent=2) + "\n")
        markdown += range_markdown(summary)
    with atomic_path(out / "sensitivity.md") as tmp:
        tmp.write_text(markdown)
    fig = tornado_figure(table, policy)
    with atomic_path(out / "tornado.png") as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    log(f"sensitivity: {out / 'sensitivity.md'}, {out / 'tornado.png'}")
    return table


def relative_changes(table: pd.DataFrame, reference: dict[str, Any]) -> pd.DataFrame:
    """``table`` with ``<ratio>_rel_change`` columns: each ratio over the reference's, minus 1 (None where either is missing)."""
    for col in ("speedup", "energy_efficiency"):
        ref_value = reference[col]
        table[f"{col}_rel_change"] = [None if v is None or ref_value is None else v / ref_value - 1.0 for v in table[col]]
    return table


def _fmt(value: Any, digits: int = 2, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}{suffix}"


def _markdown(table: pd.DataFrame, experiment: str | Path, policy: str, baseline: str) -> str:
    lines = [f"# Sensitivity of {experiment}: {policy} over {baseline}", "",
             ("| knob | value | speedup | change vs reference | energy efficiency | change vs reference | "
              f"{baseline} time to target | {policy} time to target |"),
             "|---|---|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        lines.append(
            f"| {r['knob']} | {r['value']} | {_fmt(r['speedup'], 2, 'x')} | {_fmt(_pct(r['speedup_rel_change']), 0, ' %')} | "
            f"{_fmt(r['energy_efficiency'], 2, 'x')} | {_fmt(_pct(r['energy_efficiency_rel_change']), 0, ' %')} | "
            f"{_fmt(r[f'{baseline}_time_to_target_h'], 2, ' h')} | {_fmt(r[f'{policy}_time_to_target_h'], 2, ' h')} |")
    return "\n".join(lines) + "\n"


def _pct(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100.0 * x


def tornado_figure(table: pd.DataFrame, policy: str = "flamingo"):
    """Per knob, the range of each ratio over its values against the reference (a matplotlib Figure)."""
    from matplotlib.figure import Figure

    ref = table[table["knob"] == REFERENCE].iloc[0]
    varied = table[table["knob"] != REFERENCE]
    knobs = list(dict.fromkeys(varied["knob"]))

    def span(knob: str, col: str) -> tuple[float, float]:
        vals = [v for v in varied.loc[varied["knob"] == knob, col] if v is not None and not pd.isna(v)]
        return (min(vals), max(vals)) if vals else (math.nan, math.nan)

    knobs.sort(key=lambda k: -(span(k, "speedup")[1] - span(k, "speedup")[0]) if not math.isnan(span(k, "speedup")[0]) else 0.0)
    fig = Figure(figsize=(11, 1.2 + 0.5 * len(knobs)))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, col, title in zip(axes, ("speedup", "energy_efficiency"), ("speedup", "energy efficiency")):
        for y, knob in enumerate(reversed(knobs)):
            lo, hi = span(knob, col)
            if not math.isnan(lo):
                ax.barh(y, hi - lo, left=lo, color="tab:blue" if col == "speedup" else "tab:green", height=0.6)
                vals = varied[varied["knob"] == knob]
                for _, r in vals.iterrows():
                    if r[col] is not None and not pd.isna(r[col]):
                        ax.annotate(str(r["value"]), (r[col], y), xytext=(0, 9), textcoords="offset points",
                                    ha="center", fontsize=7)
        if ref[col] is not None and not pd.isna(ref[col]):
            ax.axvline(ref[col], color="black", linewidth=1)
        ax.set_title(f"{policy} {title} over the baseline (x)")
        ax.set_yticks(range(len(knobs)))
        ax.set_yticklabels(list(reversed(knobs)))
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
