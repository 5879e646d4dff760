"""The user-experience measure of Table 3, per phone model: one function, so it can be swapped.

The paper's Table 3 is the drop of a phone's PCMark Work 3.0 score while FL training runs in the
background, baseline vs Flamingo. The closest quantity the metrics hold today is the time the
owner's foreground app shared a big core with training (``interference_s_<phone>``: seconds of
foreground use slowed, all training attempts, kept or not). Both policies do the same amount
of federated work per round (K aggregated updates), so the measure is that time per round, over
the rounds both policies completed (equal rounds), averaged over seeds; the improvement is
``1 - flamingo / baseline`` in %.

When the device model grows a calibrated per-phone user-experience score (issue 11), only
:func:`ux_impact_per_phone` changes: Table 3 reads nothing else.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["UX_MEASURE", "UX_UNIT", "ux_impact_per_phone", "improvement_pct"]

#: What Table 3's baseline and Flamingo columns hold (the report prints it above the table).
UX_MEASURE = "foreground use slowed by training, per round (the rounds both policies completed), mean over seeds"
UX_UNIT = "s/round"


def _phones(metrics: pd.DataFrame) -> list[str]:
    return [c[len("interference_s_"):] for c in metrics.columns if c.startswith("interference_s_")]


def ux_impact_per_phone(metrics: pd.DataFrame, policy: str) -> dict[str, float]:
    """Per phone model: seconds of the owner's foreground use slowed by ``policy``'s training per round.

    Rounds 1..R of each seed, R the last round every policy of that seed completed; mean over seeds.
    """
    phones = _phones(metrics)
    per_seed = []
    for seed in sorted(metrics["seed"].unique().tolist()):
        frame = metrics[metrics["seed"] == seed]
        last = int(frame.groupby("policy")["round"].max().min())
        rows = frame[(frame["policy"] == policy) & (frame["round"] >= 1) & (frame["round"] <= last)]
        per_seed.append([float(rows[f"interference_s_{p}"].sum()) / last for p in phones])
    mean = np.mean(per_seed, axis=0)
    return {p: float(v) for p, v in zip(phones, mean)}


def improvement_pct(baseline: float, policy: float) -> float | None:
    """How much ``policy`` cuts the baseline's impact, in % (``None`` if the baseline had none)."""
    if baseline <= 0:
        return None
    return 100.0 * (1.0 - policy / baseline)
