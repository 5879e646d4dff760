"""Comparisons a reviewer accepts: ratios of means with bootstrap intervals, on stated bases.

- :func:`bootstrap_ci` and :func:`ratio_of_means`: a mean (or a ratio of two means) over seeds
  with a 95 % percentile bootstrap interval (``scipy.stats.bootstrap``, ``method="percentile"``);
  seeds are resampled *paired* for a ratio (the baseline and the policy of one seed share
  traces, phones and data).
- :func:`compare_on_bases`: every policy's state at three points, each seed on its own:

  ``equal_rounds``  after round R, the last round every policy of that seed completed;
  ``equal_time``    at virtual time T, the end of the shortest policy run of that seed (the last
                    round finished by T: rounds, accuracy, energy and clients lost so far);
  ``at_target``     when the policy first reaches the seed's target accuracy.

  A policy's time to target is a different instant for each policy, so clients lost and
  energy at the target compare what each policy paid to get there; at equal rounds they
  compare the same amount of training, at equal time the same span of the owners' lives.
- :func:`exploration_cost`: rounds, virtual time and energy in which some selected client was
  exploring execution choices (``n_exploring`` > 0), against the baseline's same rounds.

All are pure functions of the metrics table (``metrics.parquet``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from flamingo_sim.fl.config import TargetConfig
from flamingo_sim.fl.metrics.target import RAW, first_reach
from flamingo_sim.rng import rng

__all__ = ["BASES", "N_RESAMPLES", "bootstrap_ci", "ratio_of_means", "compare_on_bases", "exploration_cost", "row_at_time"]

#: The comparison bases, in report order, with the sentence that says what each one means.
BASES = {
    "equal_rounds": "after the same number of rounds (the last round every policy completed)",
    "equal_time": "at the same virtual time (the end of the shortest policy run)",
    "at_target": "when each policy first reaches the target accuracy",
}
#: Bootstrap resamples (percentile interval); the draws come from ``rng(0, "bootstrap", what)``.
N_RESAMPLES = 2000
#: Per-row quantities reported on every basis: output name -> metrics column.
QUANTITIES = {"round": "round", "time_s": "time_s", "accuracy": "accuracy", "energy_j": "energy_cum_j", "clients_lost": "clients_lost_cum"}


def _percentile_bootstrap(samples: tuple[np.ndarray, ...], statistic: Any, what: str) -> tuple[float, float]:
    """95 % percentile interval of ``statistic`` over :data:`N_RESAMPLES` paired resamples
    (``scipy.stats.bootstrap``; the draws come from ``rng(0, "bootstrap", what)``)."""
    from scipy.stats import bootstrap

    res = bootstrap(samples, statistic, n_resamples=N_RESAMPLES, method="percentile", paired=len(samples) > 1,
                    confidence_level=0.95, vectorized=True, rng=rng(0, "bootstrap", what))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return x.mean(axis=axis)


def _ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return a.mean(axis=axis) / b.mean(axis=axis)


def bootstrap_ci(values: Sequence[float], what: str = "mean") -> tuple[float, float] | None:
    """95 % percentile bootstrap interval of the mean of ``values``; ``None`` with fewer than 2 values."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return None
    return _percentile_bootstrap((x,), _mean, what)


def ratio_of_means(num: Sequence[float], den: Sequence[float], what: str = "ratio") -> dict[str, Any] | None:
    """``mean(num) / mean(den)`` with a paired 95 % bootstrap interval over seeds; ``None`` if undefined.

    The interval needs every ``den`` value positive (times, energies), so that every resample's
    ratio is defined; otherwise ``ci`` is ``None``.
    """
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if len(a) == 0 or len(a) != len(b) or b.mean() <= 0:
        return None
    out: dict[str, Any] = {"value": float(a.mean() / b.mean()), "ci": None}
    if len(a) >= 2 and (b > 0).all():
        out["ci"] = list(_percentile_bootstrap((a, b), _ratio, what))
    return out


def row_at_time(rows: pd.DataFrame, t_s: float) -> pd.Series:
    """The state at virtual time ``t_s``: the last row that finished by then (sorted by round)."""
    rows = rows.sort_values("round")
    done = rows[rows["time_s"] <= t_s + 1e-9]
    return done.iloc[-1] if len(done) else rows.iloc[0]


def _state(rows: pd.DataFrame, row: pd.Series) -> dict[str, float]:
    """The quantities of :data:`QUANTITIES` at ``row``; accuracy is the last one evaluated by then."""
    evaluated = rows[(rows["round"] <= row["round"])].dropna(subset=["accuracy"])
    out = {name: float(row[col]) for name, col in QUANTITIES.items() if name != "accuracy"}
    out["accuracy"] = float(evaluated.sort_values("round")["accuracy"].iloc[-1]) if len(evaluated) else float("nan")
    out["round"] = int(out["round"])
    out["clients_lost"] = int(out["clients_lost"])
    return out


def compare_on_bases(metrics: pd.DataFrame, targets: dict[int, float | None], rule: TargetConfig = RAW) -> dict[str, Any]:
    """Each policy's state on each basis of :data:`BASES`: mean over seeds and per-seed values.

    ``targets`` maps seed -> target accuracy (``None``: no target, so no ``at_target`` state),
    reached on ``rule``'s curve (:func:`~flamingo_sim.fl.metrics.target.first_reach`).
    Returns ``{basis: {"description", "point_by_seed", "policies": {policy: {quantity: mean,
    "per_seed": {seed: {quantity: value}}}}}}``; a mean is ``None`` where some seed has no state.
    """
    policies = list(dict.fromkeys(metrics["policy"]))
    out: dict[str, Any] = {}
    for basis, text in BASES.items():
        per_seed: dict[str, dict[str, dict[str, float]]] = {p: {} for p in policies}
        points: dict[str, float | None] = {}
        for seed in sorted(metrics["seed"].unique().tolist()):
            frame = metrics[metrics["seed"] == seed]
            by_policy = {p: frame[frame["policy"] == p].sort_values("round") for p in policies if (frame["policy"] == p).any()}
            if basis == "equal_rounds":
                point: float | None = float(min(int(r["round"].max()) for r in by_policy.values()))
            elif basis == "equal_time":
                point = min(float(r["time_s"].max()) for r in by_policy.values())
            else:
                point = targets.get(seed)
            points[str(seed)] = point
            for p, rows in by_policy.items():
                if basis == "equal_rounds":
                    row = rows[rows["round"] == point].iloc[0]
                elif basis == "equal_time":
                    row = row_at_time(rows, float(point))  # type: ignore[arg-type]
                else:
                    hit = first_reach(rows, point, rule)
                    if hit is None:
                        continue
                    row = hit
                per_seed[p][str(seed)] = _state(rows, row)
        n_seeds = metrics["seed"].nunique()
        entries = {}
        for p in policies:
            seeds = per_seed[p]
            entry: dict[str, Any] = {
                q: (float(np.mean([s[q] for s in seeds.values()])) if len(seeds) == n_seeds and seeds else None) for q in QUANTITIES
            }
            entry["per_seed"] = seeds
            entries[p] = entry
        out[basis] = {"description": text, "point_by_seed": points, "policies": entries}
    return out


def exploration_cost(metrics: pd.DataFrame, policy: str, baseline: str) -> dict[str, Any] | None:
    """The exploration phase of ``policy``: rounds with an exploring client, their virtual time and energy.

    Per seed: ``rounds`` (the last round with ``n_exploring`` > 0), ``time_s`` and ``energy_j``
    spent up to the end of that round, ``exploring_energy_j`` (what the exploring clients spent),
    and the baseline's ``baseline_time_s`` / ``baseline_energy_j`` over the same rounds. Means
    over seeds beside them; ``None`` if the table has no ``n_exploring`` column or no exploration.
    """
    if "n_exploring" not in metrics.columns:
        return None
    per_seed: dict[str, dict[str, float]] = {}
    for seed in sorted(metrics["seed"].unique().tolist()):
        frame = metrics[metrics["seed"] == seed]
        rows = frame[frame["policy"] == policy].sort_values("round")
        exploring = rows[rows["n_exploring"] > 0]
        if exploring.empty:
            continue
        last = int(exploring["round"].max())
        end = rows[rows["round"] == last].iloc[0]
        base = frame[(frame["policy"] == baseline) & (frame["round"] <= last)].sort_values("round")
        per_seed[str(seed)] = {
            "rounds": last,
            "time_s": float(end["time_s"]),
            "energy_j": float(end["energy_cum_j"]),
            "exploring_energy_j": float(rows.loc[rows["round"] <= last, "energy_exploring_j"].sum()),
            "baseline_time_s": float(base["time_s"].iloc[-1]) if len(base) else float("nan"),
            "baseline_energy_j": float(base["energy_cum_j"].iloc[-1]) if len(base) else float("nan"),
        }
    if not per_seed:
        return None
    keys = next(iter(per_seed.values())).keys()
    return {**{k: float(np.mean([s[k] for s in per_seed.values()])) for k in keys}, "per_seed": per_seed}
