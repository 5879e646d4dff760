"""The Figure 6 analogue: one row per task; accuracy vs virtual time, clients available vs round and
vs hours, and the distinct clients lost to training vs round.

Every curve starts at round 0 / t = 0 (the initial model, every client as its trace has it).
Flamingo's exploration phase (rounds with a client exploring execution choices) is shaded in
the policy's colour on the accuracy panel, so a reader sees why its first hours are slow.
Accuracy is the mean over seeds with the band from the lowest to the highest seed (with 2-3
seeds a Student-t band is mostly its t quantile). Clients available are drawn on a full scale
from 0: the round-based panel shows the per-round story the paper tells ("the baseline steadily
loses devices with every passing round"), the hour-based one the same over the owners' time.

Each line carries a ``gid`` ``"<task>|<policy>|<what>"`` (``accuracy``, ``online_round``,
``online_time``, ``lost_round``, ``exploration``) so a test can compare it with the metrics.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from flamingo_sim.report.data import S_PER_H, Run, policy_curve
from flamingo_sim.report.plots import STYLE, count_ylim, policy_colors
from flamingo_sim.studies.reproduce.tables import TaskResult

__all__ = ["figure6", "mean_by_round", "seed_range"]


def mean_by_round(metrics: pd.DataFrame, policy: str, column: str) -> pd.Series:
    """``column`` of ``policy`` per round, mean over the seeds that reached that round."""
    rows = metrics[metrics["policy"] == policy]
    return rows.groupby("round")[column].mean()


def seed_range(run: Run, policy: str, column: str, grid_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest seed of ``column`` at each virtual hour of ``grid_h`` (each seed interpolated linearly)."""
    ys = []
    for seed in run.seeds:
        rows = run.rows(policy, seed).dropna(subset=[column])
        ys.append(np.interp(grid_h, rows["time_s"].to_numpy(float) / S_PER_H, rows[column].to_numpy(float)))
    stack = np.vstack(ys)
    return stack.min(axis=0), stack.max(axis=0)


def _run(r: TaskResult) -> Run:
    return Run(r.run_dir, r.task, r.metrics, r.summary)


def figure6(results: Sequence[TaskResult]) -> Figure:
    """4 columns x one row per task (see the module docstring)."""
    from matplotlib import rc_context

    policies = list(dict.fromkeys(p for r in results for p in r.metrics["policy"]))
    colors = policy_colors(policies)
    with rc_context(STYLE):
        fig = Figure(figsize=(8.8, 1.9 * len(results) + 0.6), layout="constrained")
        axes = fig.subplots(len(results), 4, squeeze=False)
        for i, r in enumerate(results):
            run = _run(r)
            acc, by_round, by_time, lost = axes[i]
            for policy in run.policies:
                color = colors[policy]
                c = policy_curve(run, policy, "accuracy")
                acc.plot(c.x, c.y, color=color, gid=f"{r.task}|{policy}|accuracy")
                if c.n_seeds > 1:
                    lo, hi = seed_range(run, policy, "accuracy", c.x)
                    acc.fill_between(c.x, lo, hi, color=color, alpha=0.2, lw=0, gid=f"{r.task}|{policy}|accuracy|range")
                x = (r.summary["policies"][policy].get("exploration") or {}).get("time_s")
                if x:
                    acc.axvspan(0, x / S_PER_H, color=color, alpha=0.12, lw=0, gid=f"{r.task}|{policy}|exploration")
                online = mean_by_round(r.metrics, policy, "n_online")
                by_round.plot(online.index, online.to_numpy(), color=color, gid=f"{r.task}|{policy}|online_round")
                c = policy_curve(run, policy, "n_online")
                by_time.plot(c.x, c.y, color=color, gid=f"{r.task}|{policy}|online_time")
                gone = mean_by_round(r.metrics, policy, "clients_lost_cum")
                lost.plot(gone.index, gone.to_numpy(), color=color, gid=f"{r.task}|{policy}|lost_round")
            targets = [t for t in r.summary.get("target_accuracy_by_seed", {}).values() if t is not None]
            if targets:
                acc.axhline(float(np.mean(targets)), color="0.35", lw=0.8, ls=(0, (4, 2)))
            acc.set_ylabel(f"{r.label}\ntest accuracy")
            for ax in (by_round, by_time):
                ax.set_ylim(*count_ylim(r.metrics["n_online"].to_numpy()))  # zoomed where a full scale would be flat
                ax.set_ylabel("clients available")
            for ax in (acc, by_time):
                ax.set_xlim(left=0)
            by_round.set_xlim(left=0)
            lost.set_xlim(left=0)
            lost.set_ylim(bottom=0)
            lost.set_ylabel("clients lost (cumulative)")
            if i == len(results) - 1:
                acc.set_xlabel("virtual time (h)")
                by_round.set_xlabel("round")
                by_time.set_xlabel("virtual time (h)")
                lost.set_xlabel("round")
            if i == 0:
                acc.set_title("(a) accuracy vs virtual time")
                by_round.set_title("(b) clients available vs round")
                by_time.set_title("(c) clients available vs time")
                lost.set_title("(d) clients lost to training")
        handles: list[Artist] = [Line2D([], [], color=c, label=p) for p, c in colors.items()]
        handles += [Line2D([], [], color="0.35", lw=0.8, ls=(0, (4, 2)), label="target accuracy"),
                    Patch(color=colors.get("flamingo", "0.6"), alpha=0.25, label="exploration phase")]
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    return fig
