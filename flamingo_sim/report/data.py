"""Report data: run directories read back and turned into the series the figures plot.

Nothing here draws; :mod:`flamingo_sim.report.plots` draws exactly what these functions return,
so tests and notebooks can compare a figure with the metrics table it came from.

Several seeds are summarised as a mean curve with a 95 % confidence band. Seeds do not share
round times (each seed's rounds last differently), so every seed's series is linearly
interpolated onto a common virtual-time grid first: the sorted union of all seeds' time points,
clipped to the span every seed covers (no extrapolation). The band is the Student-t interval
``mean +- t(0.975, n-1) * sd / sqrt(n)`` over the n seeds at each grid point. With one seed the
curve is that seed's own points, unchanged, and there is no band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.config import TargetConfig

__all__ = [
    "Run",
    "Curve",
    "load_runs",
    "mean_band",
    "policy_curve",
    "choice_columns",
    "choice_mix",
    "phone_columns",
    "interference_per_phone",
    "energy_unit",
    "summary_table",
    "dropped_by_reason",
    "declined_by_reason",
    "target_accuracy",
    "target_rule",
    "rule_curve",
    "speedup_by_target",
    "time_to_target_h",
    "participation_histogram",
    "S_PER_H",
]

#: Seconds per hour: every time axis is in hours of virtual time.
S_PER_H = 3600.0


@dataclass(frozen=True)
class Run:
    """One run directory read back: its metrics table, summary and a short label."""

    path: Path
    label: str
    metrics: pd.DataFrame
    summary: dict[str, Any]

    @property
    def policies(self) -> list[str]:
        """Policies in the order the run compared them (the baseline first)."""
        return list(dict.fromkeys(self.metrics["policy"]))

    @property
    def seeds(self) -> list[int]:
        return sorted(int(s) for s in self.metrics["seed"].unique())

    def rows(self, policy: str, seed: int | None = None) -> pd.DataFrame:
        """The rows of ``policy`` (and ``seed``), sorted by round."""
        m = self.metrics[self.metrics["policy"] == policy]
        if seed is not None:
            m = m[m["seed"] == seed]
        return m.sort_values(["seed", "round"])


@dataclass(frozen=True)
class Curve:
    """A plotted series: ``x`` (virtual hours), mean ``y``; ``lo``/``hi`` the 95 % band (several seeds)."""

    x: np.ndarray
    y: np.ndarray
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    n_seeds: int = 1


def load_runs(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[Run]:
    """Read run directories (``metrics.parquet`` and ``summary.json``); labels default to the directory names."""
    from flamingo_sim.fl.runner.results import load_run

    if not run_dirs:
        raise FlamingoError("no run directory given")
    paths = [Path(p) for p in run_dirs]
    if labels is not None and len(labels) != len(paths):
        raise FlamingoError(f"labels: got {len(labels)} label(s) for {len(paths)} run directories")
    given = list(labels or ())
    twice = [label for i, label in enumerate(given) if label in given[:i]]
    if twice:  # the legends and the summary's rows would not say which run is which
        raise FlamingoError(f"labels: {twice[0]!r} given twice; each run directory needs its own legend label")
    if labels is None:
        labels = [p.resolve().name for p in paths]
        if len(set(labels)) < len(labels):  # same names in different folders: add the parent
            labels = [f"{p.resolve().parent.name}/{p.resolve().name}" for p in paths]
    runs = []
    for path, label in zip(paths, labels):
        if not path.is_dir():
            raise FlamingoError(f"{path}: no such run directory")
        try:
            metrics, summary = load_run(path)
        except FlamingoError:
            raise
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid and json's JSONDecodeError are ValueErrors
            raise FlamingoError(f"{path}: cannot read the run's metrics or summary ({type(exc).__name__}: {exc})") from None
        if metrics.empty:
            raise FlamingoError(f"{path}: metrics.parquet has no rows - the run has not finished a round")
        if not summary:
            summary = incomplete_summary(path, metrics)
        runs.append(Run(path, str(label), metrics, summary))
    return runs


def incomplete_summary(path: Path, metrics: pd.DataFrame) -> dict[str, Any]:
    """The summary of a run stopped before its end (no ``summary.json``), from its ``config.yaml``.

    Holds what the finished summary holds, computed from the rounds done, plus ``incomplete``:
    ``"N of M rounds"`` (rounds done over all (policy, seed), of the rounds the config asks for).
    """
    import yaml

    from flamingo_sim.fl.metrics.summary import summarize

    try:
        cfg = yaml.safe_load((path / "config.yaml").read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise FlamingoError(f"{path}: no summary.json and no readable config.yaml - not a flamingo-sim run directory ({exc})") from None
    if not isinstance(cfg, dict):
        raise FlamingoError(f"{path}/config.yaml: not an experiment config")
    policies, seeds = list(cfg.get("policies") or []), list(cfg.get("seeds") or [])
    rounds = (cfg.get("fl") or {}).get("rounds")
    done = int((metrics["round"] >= 1).sum())  # rounds trained (round 0 is the initial model)
    runs = f"{len(policies)} policies x {len(seeds)} seed(s)"
    expected = (f"{done} of {int(rounds) * len(policies) * len(seeds)} policy-seed rounds ({runs} x {int(rounds)} rounds)" if rounds
                else f"{done} policy-seed rounds (of fl.horizon_h)")
    baseline = policies[0] if policies else str(metrics["policy"].iloc[0])
    target = cfg.get("target_accuracy", "highest_common")
    return {
        "experiment": cfg.get("name", "?"), "model": cfg.get("model", "?"), "seeds": seeds, "incomplete": expected,
        **summarize(metrics, target, baseline=baseline, rule=_target_rule(path, cfg.get("target"))),
    }


def _target_rule(path: Path, raw: Any) -> TargetConfig:
    """The run's ``target`` section from its config.yaml (absent in runs of earlier versions: the raw rule)."""
    from flamingo_sim.config import from_mapping
    from flamingo_sim.fl.metrics.target import RAW

    if raw is None:
        return RAW
    return from_mapping(TargetConfig, raw, f"{path}/config.yaml", "target")


def mean_band(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> Curve:
    """Mean and 95 % Student-t band of several series on a common grid (see the module docstring)."""
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(xs, ys) if len(x)]
    if not pairs:
        return Curve(np.zeros(0), np.zeros(0), n_seeds=0)
    if len(pairs) == 1:
        return Curve(pairs[0][0], pairs[0][1])
    lo_x = max(x.min() for x, _ in pairs)
    hi_x = min(x.max() for x, _ in pairs)
    grid = np.unique(np.concatenate([x for x, _ in pairs]))
    grid = grid[(grid >= lo_x) & (grid <= hi_x)]
    stack = np.vstack([np.interp(grid, x, y) for x, y in pairs])
    n = stack.shape[0]
    mean = stack.mean(axis=0)
    half = _t975(n - 1) * stack.std(axis=0, ddof=1) / math.sqrt(n)
    return Curve(grid, mean, mean - half, mean + half, n_seeds=n)


def _t975(dof: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


def policy_curve(run: Run, policy: str, column: str, *, scale: float = 1.0) -> Curve:
    """``column`` x ``scale`` of ``policy`` against virtual time (h), one point per row; NaNs (unevaluated rounds) skipped."""
    xs, ys = [], []
    for seed in run.seeds:
        rows = run.rows(policy, seed).dropna(subset=[column])
        if len(rows):
            xs.append(rows["time_s"].to_numpy(float) / S_PER_H)
            ys.append(rows[column].to_numpy(float) * scale)
    return mean_band(xs, ys)


def choice_columns(metrics: pd.DataFrame) -> list[str]:
    """The execution-choice labels (``steps_<label>`` columns), in the table's (ladder) order."""
    return [c[len("steps_"):] for c in metrics.columns if c.startswith("steps_")]


def choice_mix(run: Run, policy: str) -> pd.DataFrame:
    """Share of the kept clients' local steps run on each execution choice, per round (mean over seeds).

    Index: round (from 1: round 0, the initial model, trains nothing); columns: choice labels;
    rows sum to 1 (0 where a round kept nobody).
    """
    labels = choice_columns(run.metrics)
    rows = run.rows(policy)
    rows = rows[rows["round"] >= 1]
    steps = rows[[f"steps_{c}" for c in labels]].to_numpy(float)
    total = steps.sum(axis=1, keepdims=True)
    share = np.divide(steps, total, out=np.zeros_like(steps), where=total > 0)
    frame = pd.DataFrame(share, columns=labels)
    frame["round"] = rows["round"].to_numpy()
    return frame.groupby("round").mean()


def phone_columns(metrics: pd.DataFrame) -> list[str]:
    """The phone models with an ``interference_s_<phone>`` column, in the table's order."""
    return [c[len("interference_s_"):] for c in metrics.columns if c.startswith("interference_s_")]


def interference_per_phone(run: Run, policy: str) -> pd.DataFrame:
    """Interference per round (s, summed over the kept clients of each phone): mean and 95 % half-width over seeds.

    Index: phone; columns ``mean_s`` and ``ci_s`` (0 with one seed).
    """
    phones = phone_columns(run.metrics)
    trained = [run.rows(policy, s) for s in run.seeds]
    trained = [rows[rows["round"] >= 1] for rows in trained]  # round 0 (the initial model) trains nothing
    per_seed = np.array([[rows[f"interference_s_{p}"].mean() for p in phones] for rows in trained])
    n = per_seed.shape[0]
    half = _t975(n - 1) * per_seed.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(len(phones))
    return pd.DataFrame({"mean_s": per_seed.mean(axis=0), "ci_s": half}, index=pd.Index(phones, name="phone"))


def energy_unit(max_j: float) -> tuple[str, float]:
    """The unit an energy axis uses for values up to ``max_j`` joules: (name, multiplier from J)."""
    if max_j >= 1e7:
        return "MJ", 1e-6
    if max_j >= 1e4:
        return "kJ", 1e-3
    return "J", 1.0


def summary_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per (run, policy): the summary's headline numbers in report units (h, kJ)."""

    def num(value: Any, scale: float = 1.0) -> float:
        return float("nan") if value is None else float(value) * scale

    records = []
    for run in runs:
        for policy, e in run.summary.get("policies", {}).items():
            records.append({
                "run": run.label,
                "policy": policy,
                "seeds": len(e.get("per_seed", {})) or len(run.seeds),
                "time_to_target_h": num(e.get("time_to_target_s"), 1 / S_PER_H),
                "energy_to_target_kj": num(e.get("energy_to_target_j"), 1e-3),
                "final_accuracy": num(e.get("final_accuracy")),
                "best_accuracy": num(e.get("best_accuracy")),
                "total_energy_kj": num(e.get("total_energy_j"), 1e-3),
                "clients_lost": num(e.get("clients_lost")),
                "speedup": num(e.get("speedup")),
                "energy_efficiency": num(e.get("energy_efficiency")),
                "jain_participation": num(e.get("jain_participation")),
                "jain_energy": num(e.get("jain_energy")),
            })
    return pd.DataFrame.from_records(records)


def target_accuracy(run: Run) -> float | None:
    """The run's target accuracy (mean over seeds of each seed's target), or ``None``."""
    targets = [t for t in run.summary.get("target_accuracy_by_seed", {}).values() if t is not None]
    return float(np.mean(targets)) if targets else None


def target_rule(run: Run) -> TargetConfig:
    """The rule the run's time to target was read with (``summary.json``'s ``target_rule``; absent: the raw rule)."""
    from flamingo_sim.fl.metrics.target import RAW

    r = run.summary.get("target_rule")
    if not r:
        return RAW
    return TargetConfig(curve=r["curve"], window=int(r["window"]), margin=float(r["margin"]))


def rule_curve(run: Run, policy: str) -> Curve:
    """The accuracy curve time to target is read on (raw or smoothed, :func:`target_rule`) against virtual hours."""
    from flamingo_sim.fl.metrics.target import accuracy_curve

    rule = target_rule(run)
    xs, ys = [], []
    for seed in run.seeds:
        c = accuracy_curve(run.rows(policy, seed), rule)
        if len(c):
            xs.append(c["time_s"].to_numpy(float) / S_PER_H)
            ys.append(c["curve"].to_numpy(float))
    return mean_band(xs, ys)


def speedup_by_target(run: Run) -> pd.DataFrame:
    """Speedup and energy efficiency over a range of target accuracies (``summary.json``'s ``target_curve``,
    recomputed from the metrics for runs of earlier versions). Index: target; columns ``<ratio>|<policy>``
    (NaN where the baseline or the policy never reaches that target in some seed)."""
    from flamingo_sim.fl.metrics.target import target_curve

    table = run.summary.get("target_curve")
    if not table:
        table = target_curve(run.metrics, target_rule(run), str(run.summary.get("baseline", run.policies[0])))
    records = []
    for point in table["points"]:
        row: dict[str, float] = {"target": float(point["target"])}
        for ratio in ("speedup", "energy_efficiency"):
            for policy, value in point[ratio].items():
                row[f"{ratio}|{policy}"] = float("nan") if value is None else float(value)
        records.append(row)
    return pd.DataFrame.from_records(records, index="target") if records else pd.DataFrame()


def time_to_target_h(run: Run, policy: str) -> float | None:
    """Mean virtual hours to the target (the summary's), or ``None`` if some seed never reached it."""
    t_s = run.summary.get("policies", {}).get(policy, {}).get("time_to_target_s")
    return None if t_s is None else float(t_s) / S_PER_H


def _by_reason(run: Run, prefix: str) -> pd.DataFrame:
    """The columns ``<prefix><reason>`` summed over each (policy, seed), averaged over seeds: reasons as columns,
    policies as rows; NaN where a policy has no such column (another policy's own decline reason)."""
    reasons = [c for c in run.metrics.columns if c.startswith(prefix)]
    totals = run.metrics.groupby(["policy", "seed"])[reasons].sum(min_count=1).groupby("policy").mean()
    totals.columns = [c[len(prefix):] for c in reasons]
    return totals.reindex(run.policies)


def dropped_by_reason(run: Run) -> pd.DataFrame:
    """Selected clients dropped over the whole run, by reason (columns) and policy (rows); mean over seeds."""
    return _by_reason(run, "dropped_")


def declined_by_reason(run: Run) -> pd.DataFrame:
    """Requests declined over the whole run, by the reason the policy gave (columns) and policy (rows); mean over
    seeds; NaN for a reason a policy does not give (another policy's own)."""
    return _by_reason(run, "declined_")


def participation_histogram(run: Run, policy: str) -> pd.Series:
    """Clients by the number of rounds they were kept, summed over seeds (empty for runs without it)."""
    per_seed = run.summary.get("policies", {}).get(policy, {}).get("per_seed", {})
    total: dict[int, int] = {}
    for entry in per_seed.values():
        for k, n in entry.get("participation_histogram", {}).items():
            total[int(k)] = total.get(int(k), 0) + int(n)
    return pd.Series(total, dtype=np.int64, name="clients").sort_index()
