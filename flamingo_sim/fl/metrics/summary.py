"""Per-round metrics and the run summary (time to target accuracy, speedup, energy efficiency).

One row per (policy, seed, round) in ``metrics.parquet``; columns documented in ``COLUMNS``,
plus ``declined_<reason>`` (requests the policy declined with each reason it may give, the shipped
``too_hot``, ``in_use_exploring`` and ``low_battery_in_use`` and a plug-in's own, summing to
``dropped_declined``: :data:`DECLINED_PREFIX`), ``steps_<choice>`` (local steps the kept clients ran on each execution choice, e.g.
``steps_4567``), ``interference_s_<phone>`` (interference per phone model, all attempts),
``foreground_s_<phone>`` (the owners' foreground time of that phone model's selected clients
while the round ran) and ``training_foreground_s_<phone>`` (the part of it while their
training ran); with ``network.model: traces`` or ``network.unmetered_only``, the network columns
:data:`NETWORK_COLUMN_DOCS`. The summary is a pure function of that table, so ``flamingo-sim report`` and
notebooks can recompute it. Its per-policy ``ux_slowed_frac`` maps each phone model to the
user-experience score: the share of the owners' foreground time slowed by training, summed
over rounds and seeds (:func:`ux_slowed_frac`; the reproduce report's Table 3). Its per-policy
``declined`` holds each decline reason's total per seed (:func:`decline_totals`).
"""

from __future__ import annotations

import math
from typing import Any, Union

import numpy as np
import pandas as pd

from flamingo_sim.fl.config import TargetConfig
from flamingo_sim.fl.metrics.target import RAW, best_on_curve, first_reach, rule_dict, target_curve, target_for_seed
from flamingo_sim.fl.sim.records import LIMIT_PREFIXES
from flamingo_sim.fl.sim.rounds import DROP_REASONS

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
    "n_exploring": "selected clients that ran an exploring task this round (execution-choice profiling)",
    "energy_exploring_j": "training energy those exploring clients drew this round (J)",
    "jain_participation": "Jain's index over all clients of the rounds each was kept so far (1 = all equal)",
    "jain_energy": "Jain's index over all clients of the training energy each has paid so far",
    "straggler_phone": "phone model of the round's slowest kept client, whose task sets the round's duration ('' if none kept)",
}

#: The prefix of the per-reason decline columns, ``declined_<reason>``.
DECLINED_PREFIX = "declined_"

#: The network's columns (only with ``network.model: traces`` or ``network.unmetered_only``; ``energy_j`` then includes the radio's).
NETWORK_COLUMN_DOCS = {
    "radio_energy_j": "of energy_j: the radio's energy for the model transfers (Huang et al.'s model), share of each task that ran (J)",
    "transfer_s": "download + upload time of the client the round waited for (the slowest kept; 0 when none was kept) (s)",
    "n_unreachable": "online clients the network rule left out of the selection (no network; with unmetered_only, cellular too)",
    "n_cellular": "selected clients whose download started on cellular",
}


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


def decline_totals(rows: pd.DataFrame) -> dict[str, float]:
    """Per seed, averaged: the requests declined with each reason (its ``declined_<reason>`` column summed)."""
    n_seeds = max(int(rows["seed"].nunique()), 1)
    return {c[len(DECLINED_PREFIX):]: float(rows[c].sum()) / n_seeds for c in rows.columns
            if c.startswith(DECLINED_PREFIX) and rows[c].notna().any()}  # another policy's own reason: not this one's


def device_limit_totals(rows: pd.DataFrame) -> dict[str, Any] | None:
    """Per seed, averaged: clients dropped out of memory and shrunk per phone, tasks throttled and
    their throttled seconds per phone (None without the device models; the requests declined too hot
    are in :func:`decline_totals`)."""
    cols = [c for c in rows.columns if c.startswith(LIMIT_PREFIXES)]
    if not cols:
        return None
    n_seeds = max(int(rows["seed"].nunique()), 1)
    totals = rows[cols].sum() / n_seeds
    out: dict[str, Any] = {}
    for key, prefix in (("out_of_memory", "out_of_memory_"), ("batch_shrunk", "batch_shrunk_"), ("throttled", "throttled_"),
                        ("throttled_s", "throttled_s_")):
        found = {c[len(prefix):]: float(totals[c]) for c in cols if c.startswith(prefix) and (key == "throttled_s" or not c.startswith("throttled_s_"))}
        if found:
            out[key] = found
    return out


def network_totals(rows: pd.DataFrame) -> dict[str, Any] | None:
    """Per seed, averaged: the radio's energy, its share of all energy drawn, the share of the rounds' time the client each
    round waited for spent on its transfers (synchronous rounds), clients left unreachable and selected on cellular per
    round; None without the network columns."""
    if not all(c in rows.columns for c in NETWORK_COLUMN_DOCS):
        return None
    done = rows[rows["round"] > 0]
    n_seeds = max(int(done["seed"].nunique()), 1)
    energy, duration = float(done["energy_j"].sum()), float(done["duration_s"].sum())
    out: dict[str, Any] = {
        "radio_energy_j": float(done["radio_energy_j"].sum()) / n_seeds,
        "radio_energy_share": float(done["radio_energy_j"].sum()) / energy if energy > 0 else None,
        "transfer_time_share": None,
        "n_unreachable_per_round": float(done["n_unreachable"].mean()) if len(done) else None,
        "n_cellular_per_round": float(done["n_cellular"].mean()) if len(done) else None,
    }
    if "staleness_mean" not in rows.columns and duration > 0:
        out["transfer_time_share"] = float(done["transfer_s"].sum()) / duration
    return out


def summarize(metrics: pd.DataFrame, target: Union[float, str], baseline: str = "baseline", rule: TargetConfig = RAW) -> dict[str, Any]:
    """Summary per policy, averaged over seeds; ``None`` where a seed did not reach the target.

    ``target`` (a number, ``"highest_common"`` or ``"highest"``) is read on ``rule``'s curve with its
    margin (:mod:`flamingo_sim.fl.metrics.target`; the default :data:`~flamingo_sim.fl.metrics.target.RAW`
    reads each evaluation as measured); ``target_rule`` records it, ``target_curve`` holds the
    ratios over a range of targets (:func:`~flamingo_sim.fl.metrics.target.target_curve`).

    ``network`` (with the network columns): :func:`network_totals`.

    ``speedup`` = mean baseline time to target / mean policy time to target (a ratio of means,
    so it agrees with the printed mean times); ``energy_efficiency`` likewise with training
    energy to target. Beside each: ``<name>_ci``, the 95 % paired bootstrap interval over seeds
    (``None`` with one seed), and ``<name>_per_seed``. Every mean has a ``<key>_ci`` too.
    ``comparisons`` holds every policy's state on three bases (equal rounds, equal virtual time,
    at the target: :func:`flamingo_sim.fl.metrics.compare.compare_on_bases`); ``exploration`` the cost
    of each non-baseline policy's exploration phase (:func:`~flamingo_sim.fl.metrics.compare.exploration_cost`).
    """
    from flamingo_sim.fl.metrics.compare import bootstrap_ci, compare_on_bases, exploration_cost, ratio_of_means

    policies = list(dict.fromkeys(metrics["policy"]))
    seeds = sorted(metrics["seed"].unique().tolist())
    per_seed: dict[str, dict[int, dict[str, Any]]] = {p: {} for p in policies}
    targets = {}
    for seed in seeds:
        frame = metrics[metrics["seed"] == seed]
        targets[seed] = target_for_seed(frame, target, rule)
        for policy in policies:
            rows = frame[frame["policy"] == policy]
            if rows.empty:
                continue
            evaluated = rows.dropna(subset=["accuracy"]).sort_values("round")
            hit = first_reach(rows, targets[seed], rule)
            per_seed[policy][seed] = {
                "target_accuracy": targets[seed],
                "time_to_target_s": None if hit is None else float(hit["time_s"]),
                "energy_to_target_j": None if hit is None else float(hit["energy_cum_j"]),
                "target_round": None if hit is None else int(hit["round"]),
                "best_curve_accuracy": best_on_curve(rows, rule),
                "final_accuracy": float(evaluated["accuracy"].iloc[-1]) if len(evaluated) else None,
                "best_accuracy": float(evaluated["accuracy"].max()) if len(evaluated) else None,
                "rounds": int(rows["round"].max()),
                "virtual_time_s": float(rows["time_s"].max()),
                "total_energy_j": float(rows["energy_cum_j"].iloc[-1]),
                "clients_lost": int(rows.sort_values("round")["clients_lost_cum"].iloc[-1]),
                "dropped": {r: int(rows[f"dropped_{r}"].sum()) for r in DROP_REASONS},
                "declined": {r: int(n) for r, n in decline_totals(rows).items()},
                **_last(rows, ("jain_participation", "jain_energy")),
            }

    summary: dict[str, Any] = {"target": target, "target_rule": rule_dict(target, rule), "target_accuracy_by_seed": targets,
                               "baseline": baseline, "policies": {}}
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
        entry["declined"] = decline_totals(metrics[metrics["policy"] == policy])
        limits = device_limit_totals(metrics[metrics["policy"] == policy])
        if limits is not None:
            entry["device_limits"] = limits
        network = network_totals(metrics[metrics["policy"] == policy])
        if network is not None:
            entry["network"] = network
        for key in ("time_to_target_s", "energy_to_target_j"):
            entry[f"{key}_ci"] = bootstrap_ci([r[key] for r in runs.values()], f"{policy}|{key}") if entry[key] is not None else None
        entry["per_seed"] = {str(s): r for s, r in runs.items()}
        if policy != baseline and baseline in per_seed:
            base = per_seed[baseline]
            for name, key in (("speedup", "time_to_target_s"), ("energy_efficiency", "energy_to_target_j")):
                pairs = [(base.get(s, {}).get(key), r[key]) for s, r in runs.items()]
                entry[f"{name}_per_seed"] = {str(s): _ratio(b, v) for s, (b, v) in zip(runs, pairs)}
                ratio = None
                nums = [float(b) for b, _ in pairs if b is not None]
                dens = [float(v) for _, v in pairs if v is not None]
                if pairs and len(nums) == len(dens) == len(pairs):
                    ratio = ratio_of_means(nums, dens, f"{policy}|{name}")
                entry[name] = ratio["value"] if ratio else None
                entry[f"{name}_ci"] = ratio["ci"] if ratio else None
            entry["exploration"] = exploration_cost(metrics, policy, baseline)
        summary["policies"][policy] = entry
    summary["comparisons"] = compare_on_bases(metrics, targets, rule)
    summary["target_curve"] = target_curve(metrics, rule, baseline)
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a fixed-width table for the terminal."""

    def fmt(value: Any, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return f"{value / scale:.{digits}f}{unit}"

    width = max([12, *(len(p) for p in summary["policies"])])  # a long plug-in name widens the column, not the row
    header = f"{'policy':<{width}} {'time to target':>15} {'energy to target':>17} {'final acc':>9} {'lost@end':>8} {'speedup':>8} {'energy eff':>10}"
    lines = [header, "-" * len(header)]
    for policy, e in summary["policies"].items():
        lines.append(
            f"{policy:<{width}} {fmt(e['time_to_target_s'], 3600, 2, ' h'):>15} {fmt(e['energy_to_target_j'], 1000, 1, ' kJ'):>17} "
            f"{fmt(e['final_accuracy'], 1, 3):>9} {fmt(e['clients_lost'], 1, 0):>8} "
            f"{fmt(e.get('speedup'), 1, 2, 'x'):>8} {fmt(e.get('energy_efficiency'), 1, 2, 'x'):>10}"
        )
    ux = {p: e.get("ux_slowed_frac") or {} for p, e in summary["policies"].items()}
    if any(ux.values()):
        lines.append("owners' foreground time slowed by training: " + "; ".join(
            f"{p} " + ", ".join(f"{ph} {fmt(v, 0.01, 0, '%')}" for ph, v in fr.items()) for p, fr in ux.items()))
    for p, e in summary["policies"].items():
        lim = e.get("device_limits")
        if lim:
            parts = [f"{name.replace('_', ' ')} " + ", ".join(f"{ph} {fmt(v, 1, 0)}" for ph, v in lim[name].items())
                     for name in ("out_of_memory", "batch_shrunk", "throttled") if name in lim]
            lines.append(f"device limits ({p}, per seed): " + "; ".join(parts))
    for p, e in summary["policies"].items():
        declined = e.get("declined")
        if declined:
            lines.append(f"declined ({p}, per seed): " + ", ".join(f"{r.replace('_', ' ')} {fmt(v, 1, 0)}" for r, v in declined.items()))
    for p, e in summary["policies"].items():
        net = e.get("network")
        if net:
            lines.append(f"network ({p}, per seed): radio {fmt(net['radio_energy_j'], 1000, 1, ' kJ')} "
                         f"({fmt(net['radio_energy_share'], 0.01, 1, '%')} of the energy); transfers "
                         f"{fmt(net['transfer_time_share'], 0.01, 1, '%')} of the round time; per round "
                         f"{fmt(net['n_unreachable_per_round'], 1, 1)} unreachable, {fmt(net['n_cellular_per_round'], 1, 1)} selected on cellular")
    if summary.get("owner_loss_input"):  # Table 3 as input: the printed block says so too
        lines.append(f"note: {summary['owner_loss_input']}")
    for policy, seeds in summary.get("untrained", {}).items():
        lines.append(f"warning: {policy} trained no client in seed(s) {', '.join(map(str, seeds))}: every round kept 0 clients, "
                     "so its figures describe the untrained model (deadline, energy threshold or availability too strict?)")
    targets = {s: t for s, t in summary["target_accuracy_by_seed"].items()}
    rule = summary.get("target_rule") or {"description": str(summary["target"])}
    lines.append("target accuracy " + ", ".join(f"seed {s}: {fmt(t, 1, 4)}" for s, t in targets.items()) + f" ({rule['description']})")
    for policy, e in summary["policies"].items():
        missed = {s: r for s, r in e.get("per_seed", {}).items() if r.get("time_to_target_s") is None and r.get("target_accuracy") is not None}
        if missed:
            lines.append(f"{policy} never reaches the target: " + ", ".join(
                f"seed {s}: best {fmt(r.get('best_curve_accuracy'), 1, 4)} < {fmt(r['target_accuracy'], 1, 4)}" for s, r in missed.items()))
    lines += far_below_lines(summary)
    lines += _curve_lines(summary)
    if summary.get("train_mode"):  # train_mode auto on a GPU (the CPU's rule records nothing)
        tm = summary["train_mode"]
        lines.append(f"train_mode auto chose {tm['chosen']} ({tm['why']}); bound: {tm['bound']['rule']} "
                     f"({tm['bound']['floor']:.1e} -> {tm['bound']['value']:.1e}), checked on {tm['checked_on']}")
    for policy, e in summary["policies"].items():
        for name in ("speedup", "energy_efficiency"):
            if e.get(f"{name}_ci"):
                lo, hi = e[f"{name}_ci"]
                lines.append(f"{policy} {name.replace('_', ' ')}: {e[name]:.2f}x (ratio of means; 95 % bootstrap CI {lo:.2f}-{hi:.2f}x)")
    for basis, block in summary.get("comparisons", {}).items():
        cells = []
        for policy, e in block["policies"].items():
            cells.append(f"{policy} {fmt(e['clients_lost'], 1, 0)} lost, {fmt(e['energy_j'], 1000, 1, ' kJ')}, "
                         f"{fmt(e['time_s'], 3600, 2, ' h')}, round {fmt(e['round'], 1, 0)}")
        lines.append(f"{basis.replace('_', ' ')}: " + "; ".join(cells))
    for policy, e in summary["policies"].items():
        x = e.get("exploration")
        if x:
            lines.append(
                f"exploration ({policy}): rounds 1-{x['rounds']:.0f}, {fmt(x['time_s'], 3600, 2, ' h')} and {fmt(x['energy_j'], 1000, 1, ' kJ')} "
                f"({fmt(x['exploring_energy_j'], 1000, 1, ' kJ')} by exploring clients); the baseline's same rounds: "
                f"{fmt(x['baseline_time_s'], 3600, 2, ' h')}, {fmt(x['baseline_energy_j'], 1000, 1, ' kJ')}"
            )
    return "\n".join(lines)


#: A target below this share of a policy's best accuracy is "far below" it (:func:`far_below_lines`).
FAR_BELOW = 0.8


def far_below_lines(summary: dict[str, Any]) -> list[str]:
    """Where a seed's target sits far below a policy's best (under :data:`FAR_BELOW` of it), the line that says what
    the ratios then compare: the time and energy to a level the weakest policy tops out at, not how accurate the
    policies become (a target common to all policies falls to the lower best; the main job's sits within 5 % of both)."""
    policies = summary.get("policies") or {}
    out = []
    for seed, target in (summary.get("target_accuracy_by_seed") or {}).items():
        bests = {p: e.get("per_seed", {}).get(str(seed), {}).get("best_curve_accuracy") for p, e in policies.items()}
        bests = {p: b for p, b in bests.items() if b is not None}
        if target is None or len(bests) < 2:
            continue
        high = max(bests, key=lambda p: bests[p])
        low = min(bests, key=lambda p: bests[p])
        if target < FAR_BELOW * bests[high]:
            out.append(f"note, seed {seed}: the target {target:.4f} is far below {high}'s best accuracy {bests[high]:.4f} (under "
                       f"{FAR_BELOW:.0%} of it): the speedup and energy efficiency compare the time and energy to reach a level {low} "
                       f"tops out at (its best {bests[low]:.4f}), not how accurate the policies become; compare their final accuracies")
    return out


#: Targets of the speedup-vs-target table the terminal shows (every 6th; summary.json holds them all).
CURVE_LINE_EVERY = 6


def _curve_lines(summary: dict[str, Any]) -> list[str]:
    """One line per non-baseline policy: speedup / energy efficiency at a few targets of ``target_curve``."""
    points = (summary.get("target_curve") or {}).get("points") or []
    if not points:
        return []
    shown = points[::-CURVE_LINE_EVERY][::-1]  # always ending at the highest target
    out = []
    for policy in points[0]["speedup"]:
        cells = []
        for p in shown:
            sp, ee = p["speedup"].get(policy), p["energy_efficiency"].get(policy)
            cells.append(f"{p['target']:.4f}: " + ("-" if sp is None else f"{sp:.2f}x") + " / " + ("-" if ee is None else f"{ee:.2f}x"))
        lines_head = f"{policy} speedup / energy efficiency by target (summary.json target_curve): "
        out.append(lines_head + "; ".join(cells))
    return out
