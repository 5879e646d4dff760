"""The user-experience measure of Table 3, per phone model: one function, so it can be swapped.

The paper's Table 3 is the drop of a phone's PCMark Work 3.0 score while FL training runs in the
background, baseline vs Flamingo. The simulator's nearest quantity is the device model's
user-experience score (:func:`flamingo_sim.fl.metrics.summary.ux_slowed_frac`): the share of the
owners' foreground time (``foreground_s_<phone>``: time the selected clients' owners used the
phone while a task ran) that training slowed (``interference_s_<phone>``: foreground time that
shared a core with training, all attempts, kept or not). Table 3 takes it over the rounds both
policies completed (equal rounds), pooled over seeds, in %; the improvement is
``1 - flamingo / baseline`` in %.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["UX_MEASURE", "UX_UNIT", "ux_impact_per_phone", "improvement_pct"]

#: What Table 3's baseline and Flamingo columns hold (the report prints it above the table).
UX_MEASURE = "share of the owners' foreground time slowed by training (the rounds both policies completed, all seeds pooled)"
UX_UNIT = "% of foreground time"


def _phones(metrics: pd.DataFrame) -> list[str]:
    return [c[len("interference_s_"):] for c in metrics.columns if c.startswith("interference_s_")]


def ux_impact_per_phone(metrics: pd.DataFrame, policy: str) -> dict[str, float]:
    """Per phone model: % of the owners' foreground time that ``policy``'s training slowed.

    Rounds 1..R of each seed, R the last round every policy of that seed completed; the
    slowed and foreground seconds are summed over those rounds and all seeds (0 where the
    phone's owners never used it while a task ran).
    """
    slowed = dict.fromkeys(_phones(metrics), 0.0)
    foreground = dict.fromkeys(slowed, 0.0)
    for seed in sorted(metrics["seed"].unique().tolist()):
        frame = metrics[metrics["seed"] == seed]
        last = int(frame.groupby("policy")["round"].max().min())
        rows = frame[(frame["policy"] == policy) & (frame["round"] >= 1) & (frame["round"] <= last)]
        for p in slowed:
            slowed[p] += float(rows[f"interference_s_{p}"].sum())
            foreground[p] += float(rows[f"foreground_s_{p}"].sum()) if f"foreground_s_{p}" in rows else 0.0
    return {p: 100.0 * slowed[p] / foreground[p] if foreground[p] > 0 else 0.0 for p in slowed}


def improvement_pct(baseline: float, policy: float) -> float | None:
    """How much ``policy`` cuts the baseline's impact, in % (``None`` if the baseline had none)."""
    if baseline <= 0:
        return None
    return 100.0 * (1.0 - policy / baseline)
