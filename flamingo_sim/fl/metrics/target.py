"""Time to target: which accuracy curve is read, which target it is read against, and where each
policy first reaches it (the rules are argued in the documentation's "The headline and its target").

A rule has three parts:

- the *reading* of ``target_accuracy``: a number, ``"highest_common"`` (the highest accuracy every
  policy reaches: the lower of the policies' bests) or ``"highest"`` (the paper's words, "the
  highest achieved by either": the higher best, which a weaker policy may never reach);
- the *curve* (:class:`~flamingo_sim.fl.config.TargetConfig`): ``"raw"`` (each evaluation as
  measured) or ``"smoothed"`` (at each evaluated round, the mean of the last ``window``
  evaluations: trailing, so it is known at that round, and one test sample moves it by
  1 / (window x test samples));
- the *margin*: a computed reading (not a number) is lowered by ``margin`` accuracy, so that the
  target sits below the plateau where the curves flatten, and the weaker policy's time is where
  its curve rises through the target rather than wherever its noisiest evaluation on the plateau
  happens to be.

Bests, targets and first crossings are all read on the same curve; a policy reaches the target at
its first evaluated round whose curve value is at least the target. :data:`RAW` (raw curve, no
margin) is the rule of earlier versions. :func:`target_curve` reads every policy's time and
energy to a range of targets, so a reader sees how the headline ratios depend on the target.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pandas as pd

from flamingo_sim.fl.config import TargetConfig

__all__ = ["RAW", "READINGS", "TOLERANCE", "accuracy_curve", "best_on_curve", "target_for_seed", "first_reach", "describe_rule",
           "rule_dict", "target_curve", "CURVE_POINTS"]

#: The raw rule: each evaluation as measured, the target exactly at the reading.
RAW = TargetConfig(curve="raw", window=1, margin=0.0)
#: What each computed reading of ``target_accuracy`` means.
READINGS = {
    "highest_common": "the highest accuracy every policy reaches (the lower of the policies' bests)",
    "highest": "the highest accuracy any policy reaches (the paper's words); a policy that never reaches it has no time",
}
#: Accuracies within this of the target count as reaching it (float round-off of the smoothed mean).
TOLERANCE = 1e-9
#: Targets in the speedup-vs-target table.
CURVE_POINTS = 25

Target = Union[float, str]


def accuracy_curve(rows: pd.DataFrame, rule: TargetConfig) -> pd.DataFrame:
    """The evaluated rows of one (policy, seed), sorted by round, with the rule's curve in column ``curve``."""
    ev = rows.dropna(subset=["accuracy"]).sort_values("round")
    acc = ev["accuracy"].to_numpy(float)
    if rule.curve == "smoothed" and rule.window > 1:
        curve = np.array([acc[max(0, i - rule.window + 1): i + 1].mean() for i in range(len(acc))])
    else:
        curve = acc.copy()
    return ev.assign(curve=curve)


def best_on_curve(rows: pd.DataFrame, rule: TargetConfig) -> float | None:
    """The highest value of ``rows``' curve (``None`` where nothing was evaluated)."""
    curve = accuracy_curve(rows, rule)["curve"]
    return float(curve.max()) if len(curve) else None


def target_for_seed(frame: pd.DataFrame, target: Target, rule: TargetConfig = RAW) -> float | None:
    """The target accuracy of one seed (``frame``: its rows of every policy); ``None`` if no policy was evaluated.

    A number is used as given; ``highest``/``highest_common`` are read on the rule's curve and
    lowered by its margin.
    """
    if not isinstance(target, str):
        return float(target)
    bests = [b for _, rows in frame.groupby("policy", sort=False) if (b := best_on_curve(rows, rule)) is not None]
    if not bests:
        return None
    best = max(bests) if target == "highest" else min(bests)
    return float(best - rule.margin)


def first_reach(rows: pd.DataFrame, target: float | None, rule: TargetConfig = RAW) -> pd.Series | None:
    """The metrics row of the first evaluated round after round 0 whose curve value is >= ``target`` (``None``:
    never). Round 0 is the untrained model: no policy reaches a target before it has trained."""
    if target is None:
        return None
    curve = accuracy_curve(rows, rule)
    hit = curve[(curve["curve"] >= target - TOLERANCE) & (curve["round"] > 0)]
    return None if hit.empty else hit.iloc[0]


def rule_dict(target: Target, rule: TargetConfig) -> dict[str, Any]:
    """The rule as ``summary.json`` records it."""
    return {"reading": target, "curve": rule.curve, "window": rule.window if rule.curve == "smoothed" else 1,
            "margin": rule.margin if isinstance(target, str) else 0.0, "description": describe_rule(target, rule)}


def describe_rule(target: Target, rule: TargetConfig) -> str:
    """One line: the reading, the margin and the curve."""
    curve = (f"the smoothed curve (mean of the last {rule.window} evaluations)" if rule.curve == "smoothed" and rule.window > 1
             else "the raw curve (each evaluation)")
    if not isinstance(target, str):
        return f"{float(target):.4f} (a number), on {curve}"
    margin = f" - {rule.margin:.4f}" if rule.margin else ""
    return f"{target}{margin} on {curve}; {target}: {READINGS[target]}"


def _ratio_of_means(num: list[float | None], den: list[float | None]) -> float | None:
    if not num or any(v is None for v in num + den):
        return None
    d = float(np.mean([float(v) for v in den if v is not None]))
    return float(np.mean([float(v) for v in num if v is not None])) / d if d > 0 else None


def target_curve(metrics: pd.DataFrame, rule: TargetConfig, baseline: str, n_points: int = CURVE_POINTS) -> dict[str, Any]:
    """Every policy's time and energy to each of a range of targets, and the ratios to the baseline.

    The targets run evenly (rounded to 4 decimals) from 80 % of the highest common accuracy to the
    highest accuracy any policy reaches, both read on the rule's curve and averaged over seeds (no
    margin: each target is an absolute accuracy, the same for every seed). Per target: each
    policy's mean ``time_to_target_s`` and ``energy_to_target_j`` over seeds (``None`` where some
    seed never reaches it) and, for every other policy, ``speedup`` and ``energy_efficiency``
    (ratios of means, as the headline's).
    """
    policies = list(dict.fromkeys(metrics["policy"]))
    seeds = sorted(metrics["seed"].unique().tolist())
    by_seed = {s: {p: metrics[(metrics["seed"] == s) & (metrics["policy"] == p)] for p in policies} for s in seeds}
    bests: list[list[float]] = []
    for s in seeds:
        found = [best_on_curve(rows, rule) for rows in by_seed[s].values() if len(rows)]
        bests.append([b for b in found if b is not None])
    out: dict[str, Any] = {"curve": rule.curve, "window": rule.window if rule.curve == "smoothed" else 1, "baseline": baseline, "points": []}
    if not all(bests):
        return out
    common, top = float(np.mean([min(b) for b in bests])), float(np.mean([max(b) for b in bests]))
    grid = sorted({round(float(t), 4) for t in np.linspace(0.8 * common, top, n_points)})
    for t in grid:
        point: dict[str, Any] = {"target": t, "time_to_target_s": {}, "energy_to_target_j": {}, "speedup": {}, "energy_efficiency": {}}
        times: dict[str, list[float | None]] = {}
        energies: dict[str, list[float | None]] = {}
        for p in policies:
            hits = [first_reach(by_seed[s][p], t, rule) for s in seeds]
            times[p] = [None if h is None else float(h["time_s"]) for h in hits]
            energies[p] = [None if h is None else float(h["energy_cum_j"]) for h in hits]
            point["time_to_target_s"][p] = None if None in times[p] else float(np.mean(times[p]))  # type: ignore[arg-type]
            point["energy_to_target_j"][p] = None if None in energies[p] else float(np.mean(energies[p]))  # type: ignore[arg-type]
        for p in policies:
            if p != baseline and baseline in times:
                point["speedup"][p] = _ratio_of_means(times[baseline], times[p])
                point["energy_efficiency"][p] = _ratio_of_means(energies[baseline], energies[p])
        out["points"].append(point)
    return out
