"""Figures of one or several run directories, drawn from :mod:`flamingo_sim.report.data`.

Every function takes a list of :class:`~flamingo_sim.report.data.Run` and returns a matplotlib
:class:`~matplotlib.figure.Figure` made without pyplot (no global state, no GUI backend), sized
for one paper column (3.4 in wide, 7-8 pt text). Policies keep one colour everywhere
(:data:`POLICY_COLORS`); several runs are told apart by line style (:data:`RUN_STYLES`) or,
for bars, by hatching.

Each plotted artist carries a ``gid`` ``"<run label>|<policy>|<what>"`` so tests and notebooks
can find a series and compare it with the metrics table: ``what`` is the column for time series
(``accuracy``, ``n_online``, ``clients_lost_cum``, ``energy_cum_j``), ``time_to_target``,
``mix|<choice>`` (top edge of that choice's band: the cumulative share) or ``interference``.
Where a run reads time to target on a smoothed curve, the accuracy panel draws the evaluations as
points (``accuracy``) and that curve as a line (``accuracy_curve``), and the star sits on it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
from matplotlib import rc_context
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from flamingo_sim.report.data import (
    Curve,
    Run,
    choice_columns,
    choice_mix,
    energy_unit,
    interference_per_phone,
    participation_histogram,
    phone_columns,
    policy_curve,
    rule_curve,
    speedup_by_target,
    target_accuracy,
    target_rule,
    time_to_target_h,
)

if TYPE_CHECKING:  # matplotlib.typing arrived in matplotlib 3.8; the declared minimum is 3.7
    from matplotlib.typing import RcKeyType

__all__ = [
    "count_ylim",
    "POLICY_COLORS",
    "RUN_STYLES",
    "FIGURES",
    "policy_colors",
    "choice_colors",
    "experiment_groups",
    "accuracy_vs_time",
    "clients_online",
    "clients_lost",
    "participation_figure",
    "energy_cumulative",
    "choice_mix_figure",
    "interference_figure",
    "speedup_vs_target",
    "make_figures",
]

#: One colour per policy, the same in every figure (others get :data:`EXTRA_COLORS` in order).
POLICY_COLORS = {"baseline": "#3A6EA5", "flamingo": "#E8743B"}
#: Colours for policies not in :data:`POLICY_COLORS` (Paul Tol's "bright", minus blue and red).
EXTRA_COLORS = ("#228833", "#AA3377", "#CCBB44", "#66CCEE", "#777777")
#: Categorical colours of execution choices (Paul Tol's "muted" and "bright", distinct hues), in ladder order.
CHOICE_COLORS = ("#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499",
                 "#EE7733", "#BBBBBB", "#000000")
#: Line style of the 1st, 2nd, ... run directory when several are overlaid.
RUN_STYLES = ("-", "--", ":", "-.")
RUN_HATCHES = ("", "///", "...", "xx")
#: One paper column.
COLUMN_IN = (3.4, 2.8)
STYLE: dict[RcKeyType, Any] = {
    "figure.dpi": 150,  # on screen (notebooks); files use write.DPI
    "font.size": 8,
    "axes.labelsize": 8,
    "axes.titlesize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.4,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
}
PHONE_NAMES = {"galaxy_tab_s6": "Galaxy Tab S6", "oneplus_8": "OnePlus 8", "pixel_3": "Pixel 3", "galaxy_s10e": "Galaxy S10e", "mi_10": "Mi 10"}
TIME_LABEL = "virtual time (h)"


def policy_colors(policies: Sequence[str]) -> dict[str, str]:
    """Colour of each policy: :data:`POLICY_COLORS`, then :data:`EXTRA_COLORS` in order of appearance."""
    extra = iter(EXTRA_COLORS * (1 + len(policies) // len(EXTRA_COLORS)))
    return {p: POLICY_COLORS[p] if p in POLICY_COLORS else next(extra) for p in dict.fromkeys(policies)}


def choice_colors(labels: Sequence[str]) -> dict[str, str]:
    """One categorical colour per execution choice, in ladder order (:data:`CHOICE_COLORS`, repeated if needed)."""
    return {c: CHOICE_COLORS[j % len(CHOICE_COLORS)] for j, c in enumerate(labels)}


def _all_policies(runs: Sequence[Run]) -> list[str]:
    return list(dict.fromkeys(p for run in runs for p in run.policies))


@contextlib.contextmanager
def _figure(nrows: int = 1, ncols: int = 1, size_in: tuple[float, float] = COLUMN_IN) -> Iterator[tuple[Figure, np.ndarray]]:
    with rc_context(STYLE):
        fig = Figure(figsize=size_in, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
        yield fig, axes


def _legend(fig: Figure, runs: Sequence[Run], colors: dict[str, str], *, extra: Sequence = ()) -> None:
    """Policies (colours), runs (line styles, where a panel overlays several) and ``extra`` handles, below the axes."""
    handles = [Line2D([], [], color=c, label=p) for p, c in colors.items()]
    for members in experiment_groups(runs).values():
        if len(members) > 1:
            handles += [Line2D([], [], color="0.3", ls=RUN_STYLES[k % len(RUN_STYLES)], label=r.label) for k, (_, r) in enumerate(members)]
    handles += list(extra)
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, len(handles)), handlelength=1.8, columnspacing=1.2)


def experiment_groups(runs: Sequence[Run]) -> dict[str, list[tuple[int, Run]]]:
    """Runs grouped by experiment name (in order), each with its index among ``runs`` (its line style)."""
    groups: dict[str, list[tuple[int, Run]]] = {}
    for i, run in enumerate(runs):
        groups.setdefault(str(run.summary.get("experiment", run.label)), []).append((i, run))
    return groups


#: A count whose range over a run is below this share of its largest value is drawn on a zoomed axis.
FLAT_SHARE = 0.1


def count_ylim(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """The y range of a count (clients online): from 0 while it varies by at least :data:`FLAT_SHARE` of its
    largest value; zoomed onto its range otherwise, where a full-scale axis would draw a flat line (a few
    hundred of 14,000 clients), the zoomed axis then labelled by its ticks."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    if hi <= 0 or hi - lo >= FLAT_SHARE * hi:
        return 0.0, max(hi, 1.0) * 1.05
    pad = max(0.1 * (hi - lo), 1.0)
    return max(lo - pad, 0.0), hi + pad


def _time_series(runs: Sequence[Run], column: str, ylabel: str, title: str, *, scale: float = 1.0, marker: str = "",
                 mark_target: str | None = None, from_zero: bool | str = False) -> Figure:
    """One line per (run, policy) of ``column`` x ``scale`` against virtual time, with a band for several seeds.

    Runs of different experiments get one panel each (titled by the experiment); runs of one
    experiment are overlaid in one panel, told apart by line style. ``from_zero`` starts the
    y axis at 0 (full scale); ``"count"``: :func:`count_ylim`.
    """
    colors = policy_colors(_all_policies(runs))
    groups = experiment_groups(runs)
    size = COLUMN_IN if len(groups) == 1 else (min(7.0, 2.4 * len(groups)), COLUMN_IN[1])
    with _figure(1, len(groups), size) as (fig, axes):
        extra: list = []
        for g, (name, members) in enumerate(groups.items()):
            ax = axes[0, g]
            for k, (_, run) in enumerate(members):
                ls = RUN_STYLES[k % len(RUN_STYLES)]
                smoothed = column == "accuracy" and target_rule(run).curve == "smoothed" and target_rule(run).window > 1
                for policy in run.policies:
                    c = policy_curve(run, policy, column, scale=scale)
                    color = colors[policy]
                    if smoothed:  # the evaluations as points, the curve the target is read on as the line
                        ax.plot(c.x, c.y, color=color, ls="", marker=".", ms=3, alpha=0.45, gid=f"{run.label}|{policy}|{column}")
                        c = rule_curve(run, policy)
                        ax.plot(c.x, c.y, color=color, ls=ls, gid=f"{run.label}|{policy}|accuracy_curve")
                    else:
                        ax.plot(c.x, c.y, color=color, ls=ls, marker=marker if c.n_seeds == 1 else "", ms=2.5, gid=f"{run.label}|{policy}|{column}")
                    if c.lo is not None and c.hi is not None:  # series are >= 0, accuracy <= 1: clip the band, not the mean
                        lo, hi = np.maximum(c.lo, 0.0), (np.minimum(c.hi, 1.0) if column == "accuracy" else c.hi)
                        ax.fill_between(c.x, lo, hi, color=color, alpha=0.2, lw=0, gid=f"{run.label}|{policy}|{column}|band")
                    if mark_target:
                        _mark_time_to_target(ax, run, policy, color, c, label_time=len(members) == 1)
            ax.set_xlabel(TIME_LABEL)
            if g == 0:
                ax.set_ylabel(ylabel)
            ax.set_title(title if len(groups) == 1 else name.replace("_", " "))
            ax.set_xlim(left=0)
            if from_zero == "count":
                ax.set_ylim(*count_ylim(np.concatenate([np.asarray(line.get_ydata(), dtype=float) for line in ax.lines])))
            elif from_zero:
                ax.set_ylim(bottom=0)
            if column == "accuracy":
                handles = _target_lines(ax, [run for _, run in members], label_value=len(groups) == 1)
                extra = extra or handles
        if len(groups) > 1:
            fig.suptitle(title)
        n_seeds = max(len(r.seeds) for r in runs)
        if n_seeds > 1:
            extra.append(Patch(color="0.6", alpha=0.4, label=f"95 % CI ({n_seeds} seeds)"))
        _legend(fig, runs, colors, extra=extra)
    return fig


def _target_lines(ax, runs: Sequence[Run], label_value: bool = True) -> list:
    handles = []
    for i, run in enumerate(runs):
        target = target_accuracy(run)
        if target is None:
            continue
        ax.axhline(target, color="0.35", lw=0.8, ls=(0, (4, 2)), gid=f"{run.label}|target")
        if i == 0:
            handles.append(Line2D([], [], color="0.35", lw=0.8, ls=(0, (4, 2)), label=f"target {target:.4f}" if label_value else "target accuracy"))
    if runs and target_rule(runs[0]).curve == "smoothed" and target_rule(runs[0]).window > 1:
        handles.append(Line2D([], [], color="0.3", marker=".", ls="", alpha=0.45, label="evaluations"))
        handles.append(Line2D([], [], color="0.3", label=f"mean of last {target_rule(runs[0]).window}"))
    handles.append(Line2D([], [], color="0.3", marker="*", ls="", ms=7, label="time to target"))
    return handles


def _mark_time_to_target(ax, run: Run, policy: str, color: str, curve: Curve, *, label_time: bool = True) -> None:
    """A star on the plotted ``curve`` where ``policy`` reaches the target (the summary's mean time), a dotted
    drop line and the time in hours."""
    t_h = time_to_target_h(run, policy)
    if t_h is None or not len(curve.x):
        return
    y = float(np.interp(t_h, curve.x, curve.y))
    ax.plot([t_h], [y], marker="*", ms=8, color=color, mec="black", mew=0.4, ls="", zorder=5, gid=f"{run.label}|{policy}|time_to_target")
    ax.axvline(t_h, color=color, lw=0.8, ls=":", zorder=1)
    if label_time:
        ax.annotate(f"{t_h:.1f} h", (t_h, y), xytext=(3, -9), textcoords="offset points", fontsize=7, color=color)


def accuracy_vs_time(runs: Sequence[Run]) -> Figure:
    """Test accuracy against virtual time per policy; target line dashed, time to target starred (Fig. 6 a-c)."""
    return _time_series(runs, "accuracy", "test accuracy", "Accuracy vs virtual time", marker="o", mark_target="accuracy")


def clients_online(runs: Sequence[Run]) -> Figure:
    """Clients online (trace and energy budget allow) at each round's start (Fig. 6 d)."""
    return _time_series(runs, "n_online", "clients online", "Clients online", from_zero="count")


def clients_lost(runs: Sequence[Run]) -> Figure:
    """Distinct clients lost so far because training drained their battery (Fig. 6 e)."""
    return _time_series(runs, "clients_lost_cum", "clients lost (cumulative)", "Clients lost to training", from_zero=True)


def energy_cumulative(runs: Sequence[Run]) -> Figure:
    """Cumulative on-device training energy against virtual time; energy to target starred."""
    unit, scale = energy_unit(max(float(r.metrics["energy_cum_j"].max()) for r in runs))
    return _time_series(runs, "energy_cum_j", f"training energy ({unit}, cumulative)", "Training energy", scale=scale, mark_target="energy")


def choice_mix_figure(runs: Sequence[Run]) -> Figure:
    """Share of local steps on each execution choice (CPU cores) per round: one panel per (run, policy)."""
    policies = _all_policies(runs)
    labels = choice_columns(runs[0].metrics)
    used = [c for c in labels if any(r.metrics[f"steps_{c}"].sum() > 0 for r in runs)]
    color = choice_colors(labels)
    width = min(7.0, 1.9 * len(policies) + 0.3)
    with _figure(len(runs), len(policies), (width, 1.7 * len(runs) + 0.8)) as (fig, axes):
        for i, run in enumerate(runs):
            for j, policy in enumerate(policies):
                ax = axes[i, j]
                ax.grid(False)
                if policy not in run.policies:
                    ax.set_axis_off()
                    continue
                mix = choice_mix(run, policy)
                x = mix.index.to_numpy(float)
                cum = mix[labels].cumsum(axis=1)
                below = np.zeros(len(x))
                for c in labels:
                    top = cum[c].to_numpy()
                    if c in used:
                        ax.fill_between(x, below, top, color=color[c], lw=0, step="mid")
                        ax.plot(x, top, color="white", lw=0.4, drawstyle="steps-mid", gid=f"{run.label}|{policy}|mix|{c}")
                    below = top
                ax.set_ylim(0, 1)
                ax.set_xlim(x.min() - 0.5, x.max() + 0.5)
                ax.set_title(policy if len(runs) == 1 else f"{policy}\n{run.label}")
                ax.set_xlabel("round")
                if j == 0:
                    ax.set_ylabel("share of local steps")
        handles = [Patch(color=color[c], label=f"cores {c}") for c in used]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), title="execution choice (CPU cores)")
    return fig


def interference_figure(runs: Sequence[Run]) -> Figure:
    """Interference with the owner's foreground app per round, per phone model and policy (log scale)."""
    policies = _all_policies(runs)
    colors = policy_colors(policies)
    phones = phone_columns(runs[0].metrics)
    groups = [(i, r, p) for i, r in enumerate(runs) for p in r.policies]
    bar_w = 0.8 / max(len(groups), 1)
    with _figure() as (fig, axes):
        ax = axes[0, 0]
        x = np.arange(len(phones), dtype=float)
        for k, (i, run, policy) in enumerate(groups):
            table = interference_per_phone(run, policy).reindex(phones)
            mean = table["mean_s"].to_numpy()
            err = table["ci_s"].to_numpy() if len(run.seeds) > 1 else None
            pos = x + (k - (len(groups) - 1) / 2) * bar_w
            for xi, v in zip(pos, mean):
                if v == 0:  # invisible on a log axis: say so
                    ax.annotate("0", (xi, 0), xycoords=("data", "axes fraction"), xytext=(0, 2), textcoords="offset points",
                                ha="center", fontsize=6, color=colors[policy])
            ax.bar(pos, mean, bar_w, yerr=err, color=colors[policy],
                   hatch=RUN_HATCHES[i % len(RUN_HATCHES)], edgecolor="white", lw=0.3, ecolor="0.2", capsize=1.5, error_kw={"elinewidth": 0.8},
                   label=f"{run.label}|{policy}|interference", gid=f"{run.label}|{policy}|interference")
        ax.set_xticks(x, [PHONE_NAMES.get(p, p.replace("_", " ")) for p in phones], rotation=25, ha="right")
        if any(float(r.metrics[f"interference_s_{p}"].max()) > 0 for r in runs for p in phones):
            ax.set_yscale("log")
        ax.set_xlabel("phone model")
        ax.set_ylabel("interference per round (s)")
        ax.set_title("User-experience impact per phone")
        ax.grid(axis="x", visible=False)
        handles = [Patch(color=c, label=p) for p, c in colors.items()]
        if len(runs) > 1:
            handles += [Patch(facecolor="0.7", hatch=RUN_HATCHES[i % len(RUN_HATCHES)], edgecolor="white", label=r.label) for i, r in enumerate(runs)]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)))
    return fig


def participation_figure(runs: Sequence[Run]) -> Figure:
    """How many clients were kept 0, 1, 2, ... times (all seeds), per (run, policy); Jain's index in the legend."""
    groups = [(i, r, p) for i, r in enumerate(runs) for p in r.policies]
    colors = policy_colors(_all_policies(runs))
    bar_w = 0.8 / max(len(groups), 1)
    with _figure() as (fig, axes):
        ax = axes[0, 0]
        drawn = False
        for k, (i, run, policy) in enumerate(groups):
            hist = participation_histogram(run, policy)
            if hist.empty:
                continue
            jain = run.summary["policies"][policy].get("jain_participation")
            label = f"{run.label}|{policy}" if len(runs) > 1 else policy
            label += f" (Jain {jain:.2f})" if jain is not None else ""
            pos = hist.index.to_numpy(dtype=float) + (k - (len(groups) - 1) / 2) * bar_w
            ax.bar(pos, hist.to_numpy(), bar_w, color=colors[policy], hatch=RUN_HATCHES[i % len(RUN_HATCHES)], edgecolor="white", lw=0.3,
                   label=label, gid=f"{run.label}|{policy}|participation")
            drawn = True
        if drawn:
            ax.set_yscale("log")
            fig.legend(loc="outside lower center", ncols=min(3, len(groups)))
        else:
            ax.text(0.5, 0.5, "no participation counts in these runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("rounds a client was kept")
        ax.set_ylabel("clients")
        ax.set_title("Participation")
        ax.grid(axis="x", visible=False)
    return fig


def speedup_vs_target(runs: Sequence[Run]) -> Figure:
    """Speedup (solid) and energy efficiency (dashed) of each policy over the baseline against the target
    accuracy, one panel per experiment; the headline's target dotted, its ratios starred."""
    colors = policy_colors(_all_policies(runs))
    groups = experiment_groups(runs)
    size = COLUMN_IN if len(groups) == 1 else (min(7.0, 2.4 * len(groups)), COLUMN_IN[1])
    with _figure(1, len(groups), size) as (fig, axes):
        for g, (name, members) in enumerate(groups.items()):
            ax = axes[0, g]
            for _, run in members:
                table = speedup_by_target(run)
                target = target_accuracy(run)
                for col in table.columns:
                    ratio, policy = col.split("|", 1)
                    ax.plot(table.index.to_numpy(float), table[col].to_numpy(float), color=colors[policy],
                            ls="-" if ratio == "speedup" else "--", marker="o" if ratio == "speedup" else "^", ms=2.5,
                            gid=f"{run.label}|{policy}|{ratio}_by_target")
                    headline = run.summary["policies"].get(policy, {}).get(ratio)
                    if target is not None and headline is not None:
                        ax.plot([target], [headline], marker="*", ms=8, color=colors[policy], mec="black", mew=0.4, ls="", zorder=5,
                                gid=f"{run.label}|{policy}|{ratio}_headline")
                if target is not None:
                    ax.axvline(target, color="0.35", lw=0.8, ls=":", gid=f"{run.label}|target")
                finite = table.notna().all(axis=1).to_numpy() if len(table) else np.zeros(0, bool)
                if len(finite) and not finite[-1] and finite.any():  # above the last target every policy reaches
                    last = int(np.flatnonzero(finite)[-1])
                    ax.axvspan(float(table.index[last]), float(table.index[-1]), color="0.85", alpha=0.5, lw=0, gid=f"{run.label}|unreached")
            ax.axhline(1.0, color="0.6", lw=0.6)
            ax.set_xlabel("target accuracy")
            if g == 0:
                ax.set_ylabel("baseline / policy (x)")
            ax.set_title("Speedup and energy efficiency by target" if len(groups) == 1 else name.replace("_", " "))
        handles: list[Artist] = [Line2D([], [], color=c, label=p) for p, c in colors.items()
                                 if all(p != r.summary.get("baseline", "baseline") for r in runs)]
        handles += [Line2D([], [], color="0.3", marker="o", ms=3, label="speedup"),
                    Line2D([], [], color="0.3", ls="--", marker="^", ms=3, label="energy efficiency"),
                    Line2D([], [], color="0.3", marker="*", ls="", ms=7, label="headline"),
                    Patch(color="0.85", alpha=0.5, label="not reached by all")]
        fig.legend(handles=handles, loc="outside lower center", ncols=3, handlelength=1.8)
    return fig


#: Figure file stem -> function; the order of the report.
FIGURES: dict[str, Callable[[Sequence[Run]], Figure]] = {
    "accuracy_vs_time": accuracy_vs_time,
    "clients_online": clients_online,
    "clients_lost": clients_lost,
    "energy_cumulative": energy_cumulative,
    "speedup_vs_target": speedup_vs_target,
    "choice_mix": choice_mix_figure,
    "interference_per_phone": interference_figure,
    "participation": participation_figure,
}


def make_figures(runs: Sequence[Run]) -> dict[str, Figure]:
    """Every report figure of ``runs``, by file stem."""
    return {name: fn(runs) for name, fn in FIGURES.items()}
