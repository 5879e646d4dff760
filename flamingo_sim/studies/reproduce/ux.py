"""The user-experience measures of Table 3, per phone model: two functions, so either can be swapped.

The paper's Table 3 is the change of a phone's PCMark Work 3.0 score while FL training runs in
the background, baseline vs Flamingo: how much the owner's foreground work slows *while
training runs* (an intensity). The simulator offers two measures, pooled over the rounds both
policies completed (equal rounds) and over seeds:

- **intensity** (:func:`ux_intensity_per_phone`, what the paper measured): the change in the
  rate of the owner's foreground work over the foreground time that overlapped training
  (``training_foreground_s_<phone>``): ``-foreground_lost_s / training_foreground_s``, in %, where
  ``foreground_lost_s_<phone>`` is the time the owner's app ran slowed weighed by the share of its
  work lost (:func:`flamingo_sim.devices.scheduling.contention`: the share of a core the owner's
  threads gave up to training). Both count only the owner's use while training ran, so the
  share lies in [-100 %, 0]. No parameter is fitted: the intensity is not converted to PCMark
  points.
- **exposure** (:func:`ux_impact_per_phone`): the share of the owners' foreground time under
  the job (``foreground_s_<phone>``, transfers included) that training slowed; it also depends
  on how long training runs against the rest of the task.

The improvement is ``1 - flamingo / baseline`` in %, for either.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["UX_MEASURE", "UX_UNIT", "INTENSITY_MEASURE", "INTENSITY_UNIT", "ux_impact_per_phone", "ux_intensity_per_phone",
           "improvement_pct"]

#: What Table 3's exposure columns hold.
UX_MEASURE = "share of the owners' foreground time slowed by training (the rounds both policies completed, all seeds pooled)"
UX_UNIT = "% of foreground time"
#: What Table 3's intensity columns hold.
INTENSITY_MEASURE = ("change in the rate of the owners' foreground work while training ran (the share of a core the "
                     "owner's threads gave up to training, over their use while training ran; same rounds and seeds)")
INTENSITY_UNIT = "% foreground rate"


def _phones(metrics: pd.DataFrame) -> list[str]:
    return [c[len("interference_s_"):] for c in metrics.columns if c.startswith("interference_s_")]


def _sums(metrics: pd.DataFrame, policy: str, columns: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per column prefix and phone: the sum over rounds 1..R of each seed (R the last round every
    policy of that seed completed) and over seeds; 0 where the column is absent."""
    out = {c: dict.fromkeys(_phones(metrics), 0.0) for c in columns}
    for seed in sorted(metrics["seed"].unique().tolist()):
        frame = metrics[metrics["seed"] == seed]
        last = int(frame.groupby("policy")["round"].max().min())
        rows = frame[(frame["policy"] == policy) & (frame["round"] >= 1) & (frame["round"] <= last)]
        for c in columns:
            for p in out[c]:
                out[c][p] += float(rows[f"{c}{p}"].sum()) if f"{c}{p}" in rows else 0.0
    return out


def ux_impact_per_phone(metrics: pd.DataFrame, policy: str) -> dict[str, float]:
    """Exposure, per phone model: % of the owners' foreground time that ``policy``'s training slowed
    (0 where the phone's owners never used it while a task ran)."""
    s = _sums(metrics, policy, ("interference_s_", "foreground_s_"))
    slowed, fg = s["interference_s_"], s["foreground_s_"]
    return {p: 100.0 * slowed[p] / fg[p] if fg[p] > 0 else 0.0 for p in slowed}


def ux_intensity_per_phone(metrics: pd.DataFrame, policy: str) -> dict[str, float | None]:
    """Intensity, per phone model: the change (%, in [-100, 0]) in the rate of the owners' foreground work
    while ``policy``'s training ran. 0 where the owners never used the phone while training ran (nothing
    was slowed); ``None`` where the metrics predate the ``foreground_lost_s_<phone>`` column."""
    s = _sums(metrics, policy, ("foreground_lost_s_", "training_foreground_s_"))
    lost, during = s["foreground_lost_s_"], s["training_foreground_s_"]
    out: dict[str, float | None] = {}
    for p in lost:
        if f"foreground_lost_s_{p}" not in metrics.columns:
            out[p] = None
            continue
        out[p] = -100.0 * lost[p] / during[p] + 0.0 if during[p] > 0 else 0.0  # + 0.0: no '-0.0'
    return out


def improvement_pct(baseline: float | None, policy: float | None) -> float | None:
    """How much ``policy`` cuts the baseline's impact, in % (``None`` if the baseline had none).
    Works for exposure (>= 0) and intensity (<= 0) alike."""
    if baseline is None or policy is None or baseline == 0:
        return None
    return 100.0 * (1.0 - policy / baseline)
