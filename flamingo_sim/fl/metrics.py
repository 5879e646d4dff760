"""Per-round metrics and the run summary (time to target accuracy, speedup, energy efficiency).

One row per (policy, seed, round) in ``metrics.parquet``; columns documented in ``COLUMNS``,
plus ``steps_<choice>`` (local steps the kept clients ran on each execution choice, e.g.
``steps_4567``), ``interference_s_<phone>`` (interference per phone model, all attempts) and
``foreground_s_<phone>`` (the owners' foreground time of that phone model's selected clients
while the round ran). The summary is a pure function of that table, so ``flamingo-sim report``
and notebooks can recompute it. Its per-policy ``ux_slowed_frac`` maps each phone model to the
user-experience score: the share of the owners' foreground time slowed by training, summed
over rounds and seeds (:func:`ux_slowed_frac`; the reproduce report's Table 3).
"""

from __future__ import annotations

import math
from typing import Any, Union

import numpy as np
import pandas as pd

from flamingo_sim.fl.rounds import DROP_REASONS

COLUMNS = {
    "policy": "policy name",
    "seed": "seed of this run",
    "round": "round index, from 1",
    "time_s": "virtual time at the end of the round (s)",
    "duration_s": "virtual duration of the round (s)",
    "accuracy": "test accuracy after the round (NaN where not evaluated)",
    "loss": "test loss after the round (NaN where not evaluated)",
    "train_loss": "mean local training loss of the kept clients",
    "n_online": "clients online (energy budget above threshold) at the round's start",
    "n_selected": "clients selected (participants x over-commitment)",
    "n_kept": "updates aggregated",
    **{f"dropped_{r}": f"selected clients dropped: {r.replace('_', ' ')}" for r in DROP_REASONS},
    "energy_j": "training energy drawn from phones this round, all attempts (J)",
    "energy_cum_j": "cumulative training energy (J)",
    "interference_s": "time training shared a core with the owner's foreground app this round, all attempts (s)",
    "clients_lost": "clients offline now only because training drained them",
    "clients_lost_cum": "distinct clients that have been lost so far",
    "jain_participation": "Jain's index over all clients of the rounds each was kept so far (1 = all equal)",
    "jain_energy": "Jain's index over all clients of the training energy each has paid so far",
}


def target_for_seed(frame: pd.DataFrame, target: Union[float, str]) -> float | None:
    """The target accuracy for one seed's rows of all policies."""
    if not isinstance(target, str):
        return float(target)
    best = frame.groupby("policy")["accuracy"].max().dropna()
    if best.empty:
        return None
    return float(best.max() if target == "highest" else best.min())


def time_to_target(rows: pd.DataFrame, target: float | None) -> tuple[float | None, float | None]:
    """(virtual seconds, cumulative training joules) when ``rows`` first reach ``target``."""
    if target is None:
        return None, None
    hit = rows[rows["accuracy"] >= target - 1e-12].sort_values("round")
    if hit.empty:
        return None, None
    first = hit.iloc[0]
    return float(first["time_s"]), float(first["energy_cum_j"])


def _mean_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    if not values or len(known) < len(values):
        return None
    return float(np.mean(known))


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return float(num / den)


def _last(rows: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, float | None]:
    """The last round's value of each column the table has (None where NaN)."""
    last = rows.sort_values("round").iloc[-1]
    return {c: (None if pd.isna(last[c]) else float(last[c])) for c in columns if c in rows.columns}


def ux_slowed_frac(rows: pd.DataFrame) -> dict[str, float | None]:
    """Per phone model: sum of ``interference_s_<phone>`` / sum of ``foreground_s_<phone>`` over
    ``rows`` (None where the owners never used their phones while selected)."""
    out: dict[str, float | None] = {}
    for col in rows.columns:
        if col.startswith("foreground_s_"):
            phone = col[len("foreground_s_"):]
            fg = float(rows[col].sum())
            out[phone] = float(rows[f"interference_s_{phone}"].sum()) / fg if fg > 0 else None
    return out


def summarize(metrics: pd.DataFrame, target: Union[float, str], baseline: str = "baseline") -> dict[str, Any]:
    """Summary per policy, averaged over seeds; ``None`` where a seed did not reach the target.

    ``speedup`` = baseline time to target / policy time to target; ``energy_efficiency`` =
    baseline training energy to target / policy training energy to target.
    """
    policies = list(dict.fromkeys(metrics["policy"]))
    seeds = sorted(metrics["seed"].unique().tolist())
    per_seed: dict[str, dict[int, dict[str, Any]]] = {p: {} for p in policies}
    targets = {}
    for seed in seeds:
        frame = metrics[metrics["seed"] == seed]
        targets[seed] = target_for_seed(frame, target)
        for policy in policies:
            rows = frame[frame["policy"] == policy]
            if rows.empty:
                continue
            evaluated = rows.dropna(subset=["accuracy"]).sort_values("round")
            t_s, e_j = time_to_target(rows, targets[seed])
            per_seed[policy][seed] = {
                "target_accuracy": targets[seed],
                "time_to_target_s": t_s,
                "energy_to_target_j": e_j,
                "final_accuracy": float(evaluated["accuracy"].iloc[-1]) if len(evaluated) else None,
                "best_accuracy": float(evaluated["accuracy"].max()) if len(evaluated) else None,
                "rounds": int(rows["round"].max()),
                "virtual_time_s": float(rows["time_s"].max()),
                "total_energy_j": float(rows["energy_cum_j"].iloc[-1]),
                "clients_lost": int(rows.sort_values("round")["clients_lost_cum"].iloc[-1]),
                "dropped": {r: int(rows[f"dropped_{r}"].sum()) for r in DROP_REASONS},
                **_last(rows, ("jain_participation", "jain_energy")),
            }

    summary: dict[str, Any] = {"target": target, "target_accuracy_by_seed": targets, "baseline": baseline, "policies": {}}
    for policy in policies:
        runs = per_seed[policy]
        entry: dict[str, Any] = {
            key: _mean_or_none([r[key] for r in runs.values()])
            for key in ("time_to_target_s", "energy_to_target_j", "final_accuracy", "best_accuracy", "total_energy_j")
        }
        for key in ("jain_participation", "jain_energy"):
            if any(key in r for r in runs.values()):
                entry[key] = _mean_or_none([r.get(key) for r in runs.values()])
        entry["clients_lost"] = _mean_or_none([r["clients_lost"] for r in runs.values()])
        entry["ux_slowed_frac"] = ux_slowed_frac(metrics[metrics["policy"] == policy])
        entry["per_seed"] = {str(s): r for s, r in runs.items()}
        if policy != baseline and baseline in per_seed:
            base = per_seed[baseline]
            speedups = [_ratio(base.get(s, {}).get("time_to_target_s"), r["time_to_target_s"]) for s, r in runs.items()]
            effs = [_ratio(base.get(s, {}).get("energy_to_target_j"), r["energy_to_target_j"]) for s, r in runs.items()]
            entry["speedup"] = _mean_or_none(speedups)
            entry["energy_efficiency"] = _mean_or_none(effs)
        summary["policies"][policy] = entry
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a fixed-width table for the terminal."""

    def fmt(value: Any, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return f"{value / scale:.{digits}f}{unit}"

    header = f"{'policy':<12} {'time to target':>15} {'energy to target':>17} {'final acc':>9} {'lost':>6} {'speedup':>8} {'energy eff':>10}"
    lines = [header, "-" * len(header)]
    for policy, e in summary["policies"].items():
        lines.append(
            f"{policy:<12} {fmt(e['time_to_target_s'], 3600, 2, ' h'):>15} {fmt(e['energy_to_target_j'], 1000, 1, ' kJ'):>17} "
            f"{fmt(e['final_accuracy'], 1, 3):>9} {fmt(e['clients_lost'], 1, 0):>6} "
            f"{fmt(e.get('speedup'), 1, 2, 'x'):>8} {fmt(e.get('energy_efficiency'), 1, 2, 'x'):>10}"
        )
    ux = {p: e.get("ux_slowed_frac") or {} for p, e in summary["policies"].items()}
    if any(ux.values()):
        lines.append("owners' foreground time slowed by training: " + "; ".join(
            f"{p} " + ", ".join(f"{ph} {fmt(v, 0.01, 0, '%')}" for ph, v in fr.items()) for p, fr in ux.items()))
    targets = {s: t for s, t in summary["target_accuracy_by_seed"].items()}
    lines.append(f"target accuracy ({summary['target']}): " + ", ".join(f"seed {s}: {fmt(t, 1, 3)}" for s, t in targets.items()))
    return "\n".join(lines)
