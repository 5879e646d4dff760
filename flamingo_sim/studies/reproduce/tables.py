"""The report's tables, built from profiles and run directories (nothing here is typed in by hand).

- Table 1: each phone's speedup and energy efficiency of Flamingo's chosen execution over
  ``4567``, from the profiles the runs used, beside the paper's figure.
- Table 2: time and energy to the target per task: mean over seeds with a 95 % bootstrap
  interval, the per-seed values, and the ratio of means (baseline / Flamingo) with its paired
  bootstrap interval, beside the paper's.
- Table 3: the user-experience impact per phone (:mod:`flamingo_sim.studies.reproduce.ux`), baseline vs
  Flamingo, and the improvement in %, beside the paper's range.
- One table per task of the three comparison bases (clients lost and energy on each).

A :class:`Table` holds formatted cells; the formatting functions are public so a test can
format a number read from the metrics the same way and find it in the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from flamingo_sim.devices.catalogue import ProfileDirs
from flamingo_sim.studies.reproduce import paper
from flamingo_sim.studies.reproduce.ux import UX_MEASURE, UX_UNIT, improvement_pct, ux_impact_per_phone

__all__ = ["Table", "TaskResult", "num", "ci_text", "ratio_text", "table1", "table2", "table3", "bases_table", "PHONE_NAMES"]

PHONE_NAMES = {"galaxy_tab_s6": "Galaxy Tab S6", "oneplus_8": "OnePlus 8", "pixel_3": "Google Pixel 3", "galaxy_s10e": "Samsung S10e", "mi_10": "Xiaomi Mi 10"}
MODELS = {"resnet34": "ResNet-34", "shufflenet_v2_x2": "ShuffleNetV2 x2", "mobilenet_v2": "MobileNetV2"}


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass(frozen=True)
class TaskResult:
    """One task's run read back: the summary (``summary.json``) and the metrics table."""

    task: str
    run_dir: Path
    summary: dict[str, Any]
    metrics: Any  # pandas.DataFrame
    baseline: str = "baseline"
    policy: str = "flamingo"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        dataset, dnn = paper.TASKS.get(self.task, (self.task, ""))
        return f"{dataset} / {dnn}" if dnn else dataset


def num(value: float | None, digits: int = 2, scale: float = 1.0) -> str:
    """A number as the report prints it; ``-`` for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value * scale:.{digits}f}"


def ci_text(mean: float | None, ci: Sequence[float] | None, digits: int = 2, scale: float = 1.0) -> str:
    """``mean [lo, hi]`` (or just the mean with one seed)."""
    text = num(mean, digits, scale)
    if ci:
        text += f" [{num(ci[0], digits, scale)}, {num(ci[1], digits, scale)}]"
    return text


def ratio_text(value: float | None, ci: Sequence[float] | None) -> str:
    text = "-" if value is None else f"{value:.2f}x"
    if ci:
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


def table1(profiles: ProfileDirs, phones: Sequence[str]) -> Table:
    """Table 1 from the profiles (the runs' search path): simulated / paper, speedup then energy efficiency, per model."""
    catalogue = profiles.phones()
    rows = []
    for phone in phones:
        cells = [PHONE_NAMES.get(phone, phone)]
        profs = {m: profiles.load(phone, m, phones=catalogue) for m in MODELS}
        for kind in ("speedup", "energy_efficiency"):
            for m in MODELS:
                ours = getattr(profs[m], kind)
                theirs = paper.TABLE1.get((phone, m))
                ref = "-" if theirs is None else f"{theirs[0 if kind == 'speedup' else 1]:.1f}"
                cells.append(f"{num(ours)} ({ref})")
        rows.append(cells)
    columns = ["phone"] + [f"speedup {n}" for n in MODELS.values()] + [f"energy eff. {n}" for n in MODELS.values()]
    return Table("Table 1: Flamingo's chosen execution vs PyTorch's default 4567, per phone (simulated (paper))", columns, rows,
                 "From the profiles in the runs' profiles directory; the shipped ones are calibrated to these ratios, so "
                 "agreement is by construction, not a finding.")


def table2(results: Sequence[TaskResult]) -> Table:
    rows = []
    for r in results:
        b, f = r.summary["policies"][r.baseline], r.summary["policies"][r.policy]
        for key, name, ratio, scale, digits in (
            ("time_to_target_s", "time to target (h)", "speedup", 1 / 3600, 2),
            ("energy_to_target_j", "energy to target (kJ)", "energy_efficiency", 1e-3, 1),
        ):
            lo, hi = paper.ENERGY_EFFICIENCY_RANGE
            paper_cell = "not transcribed" if ratio == "speedup" else f"{lo}-{hi:.0f}x over the 3 tasks"
            rows.append([
                r.label, name,
                ci_text(b[key], b.get(f"{key}_ci"), digits, scale), _per_seed(b, key, digits, scale),
                ci_text(f[key], f.get(f"{key}_ci"), digits, scale), _per_seed(f, key, digits, scale),
                ratio_text(f.get(ratio), f.get(f"{ratio}_ci")), paper_cell,
            ])
    columns = ["task", "quantity", "baseline mean [95 % CI]", "baseline per seed", "Flamingo mean [95 % CI]", "Flamingo per seed",
               "baseline / Flamingo (ratio of means) [95 % CI]", "paper"]
    rules = list(dict.fromkeys(str((r.summary.get("target_rule") or {}).get("description", r.summary.get("target", "?"))) for r in results))
    targets = "; ".join(f"{r.label} " + ", ".join(num(t, 4) for t in r.summary.get("target_accuracy_by_seed", {}).values()) for r in results)
    return Table("Table 2: time and training energy to the target accuracy, per task", columns, rows,
                 f"Target, per seed: {' | '.join(rules)} ({targets}). Intervals: 95 % percentile bootstrap over seeds "
                 "(paired for the ratio). The ratio is of the means, so it agrees with the means beside it. How the ratios depend "
                 "on the target: figures/speedup_vs_target.png.")


def _per_seed(entry: dict[str, Any], key: str, digits: int, scale: float) -> str:
    return ", ".join(num(s[key], digits, scale) for s in entry["per_seed"].values())


def table3(results: Sequence[TaskResult]) -> Table:
    rows = []
    lo, hi = paper.UX_IMPROVEMENT_PCT_RANGE
    for r in results:
        base = ux_impact_per_phone(r.metrics, r.baseline)
        flam = ux_impact_per_phone(r.metrics, r.policy)
        for phone in base:
            gain = improvement_pct(base[phone], flam[phone])
            rows.append([r.label, PHONE_NAMES.get(phone, phone), num(base[phone], 1), num(flam[phone], 1),
                         "-" if gain is None else f"{gain:.0f} %", f"{lo:.0f}-{hi:.0f} % (range over phones)"])
    columns = ["task", "phone", f"baseline ({UX_UNIT})", f"Flamingo ({UX_UNIT})", "improvement", "paper (PCMark score drop)"]
    return Table("Table 3: user-experience impact per phone, baseline vs Flamingo", columns, rows,
                 f"Measure: {UX_MEASURE}. The paper measured the PCMark Work 3.0 score drop on real phones; this is the "
                 "simulator's nearest quantity, comparable in direction and in the improvement %, not in units.")


def bases_table(r: TaskResult) -> Table:
    """Each policy's round, time, accuracy, energy and clients lost on the three comparison bases."""
    comp = r.summary["comparisons"]
    rows = []
    for basis, block in comp.items():
        for policy in (r.baseline, r.policy):
            e = block["policies"][policy]
            rows.append([basis.replace("_", " "), policy, num(e["round"], 1), num(e["time_s"], 2, 1 / 3600), num(e["accuracy"], 3),
                         num(e["energy_j"], 1, 1e-3), num(e["clients_lost"], 1)])
    columns = ["basis", "policy", "round", "virtual time (h)", "accuracy", "training energy (kJ)", "clients lost"]
    notes = "; ".join(f"{b.replace('_', ' ')}: {blk['description']}" for b, blk in comp.items())
    return Table(f"{r.label}: the policies compared on three bases (means over seeds)", columns, rows, notes + ".")
