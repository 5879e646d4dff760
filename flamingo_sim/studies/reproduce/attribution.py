"""Attribution (``reproduce --attribution``): the walk from the paper's readings to the simulator's default.

The walk starts with every reading of :data:`~flamingo_sim.fl.readings.READINGS` at the paper's
text and switches one reading at a time to the simulator's default, in that order (the target
first), keeping the earlier switches: each step's headline (speedup and energy efficiency to
the target, ratio of means over seeds with its paired 95 % bootstrap interval) and its *factor*,
the headline over the previous step's (how many x that reading is worth, with the same kind of
interval over the seeds the two steps share). The last step is the simulator's default.

A reading that changes the simulation (``rerun``: exploration, charge state) needs its own runs;
the target readings only read the same metrics another way. So the walk needs three sets of
runs (:func:`run_configs`): ``paper`` (every reading the paper's), ``exploration`` (exploration
switched back, the charge state still the paper's) and ``default``; each is a full
``reproduce`` study of the same tasks and seeds. Only Table 2's two policies (``baseline`` and
``flamingo``) enter a step's target, as in the paper ("the highest achieved by either").

Past the default, :mod:`~flamingo_sim.studies.reproduce.mechanisms` switches the model's own
mechanisms one at a time (interference model, energy accounting, round rule, phone mix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from flamingo_sim.fl.readings import READINGS, Reading, config_overrides, readings_overrides
from flamingo_sim.studies.reproduce.paper import TABLE2, TASKS

__all__ = ["Step", "StepResult", "WALK", "walk_steps", "run_configs", "config_of", "attribute", "per_request_first_round"]

#: The readings the walk switches, in order.
WALK: tuple[Reading, ...] = READINGS
#: Run configurations: name -> the readings switched to the default (the rest are the paper's).
_CONFIGS: dict[str, tuple[str, ...]] = {"paper": (), "exploration": ("exploration",), "charge_state": ("exploration", "charge_state"),
                                        "default": tuple(r.name for r in WALK if r.rerun)}


@dataclass(frozen=True)
class Step:
    """One point of the walk: ``values`` (reading -> value) and the run configuration it reads."""

    name: str  # "paper" or the reading switched at this step
    label: str
    values: dict[str, str]
    config: str


def walk_steps() -> list[Step]:
    """The paper's readings, then one reading switched to the default per step (cumulative)."""
    values = {r.name: r.paper for r in WALK}
    steps = [Step("paper", "the paper's readings", dict(values), "paper")]
    for r in WALK:
        values[r.name] = r.default
        steps.append(Step(r.name, f"{r.name}: {r.paper} -> {r.default}", dict(values), config_of(values)))
    return steps


def config_of(values: Mapping[str, str]) -> str:
    """The run configuration whose simulation the readings ``values`` describe."""
    switched = tuple(r.name for r in WALK if r.rerun and values[r.name] == r.default)
    for name, own in _CONFIGS.items():
        if own == switched:
            return name
    raise ValueError(f"no run configuration switches {switched}")


def run_configs() -> dict[str, tuple[str, ...]]:
    """Each run configuration's ``--set`` overrides (``paper``: the ``--readings paper`` ones; the others only
    the simulation's readings, so ``default`` is the plain run)."""
    out: dict[str, tuple[str, ...]] = {}
    for name, switched in _CONFIGS.items():
        if name == "paper":
            out[name] = readings_overrides("paper")
        else:
            out[name] = config_overrides({r.name: (r.default if r.name in switched else r.paper) for r in WALK if r.rerun})
    return out


def _rule(values: Mapping[str, str]) -> tuple[Any, Any]:
    from flamingo_sim.fl.config import TargetConfig

    return values["target"], TargetConfig(curve=values["curve"], margin=float(values["margin"]))  # type: ignore[arg-type]


def _to_target(metrics: pd.DataFrame, values: Mapping[str, str], baseline: str, policy: str) -> dict[int, dict[str, float | None]]:
    """Per seed: each policy's time and energy to the step's target (``None``: never reached)."""
    from flamingo_sim.fl.metrics.target import first_reach, target_for_seed

    target, rule = _rule(values)
    out: dict[int, dict[str, float | None]] = {}
    two = metrics[metrics["policy"].isin([baseline, policy])]
    for seed, frame in two.groupby("seed", sort=True):
        goal = target_for_seed(frame, target, rule)
        row: dict[str, float | None] = {"target": goal}
        for who in (baseline, policy):
            hit = first_reach(frame[frame["policy"] == who], goal, rule)
            row[f"{who}|time"] = None if hit is None else float(hit["time_s"])
            row[f"{who}|energy"] = None if hit is None else float(hit["energy_cum_j"])
        out[int(seed)] = row
    return out


@dataclass
class StepResult:
    """One step of one task: the headline ratios, their intervals, and the factor over the previous step."""

    task: str
    step: Step
    speedup: float | None
    speedup_ci: list[float] | None
    energy_efficiency: float | None
    energy_efficiency_ci: list[float] | None
    speedup_factor: float | None = None
    speedup_factor_ci: list[float] | None = None
    energy_factor: float | None = None
    energy_factor_ci: list[float] | None = None
    missed: list[str] = field(default_factory=list)  # "seed s: policy" that never reached the target
    per_seed: dict[int, dict[str, float | None]] = field(default_factory=dict)
    exploration: dict[str, Any] | None = None  # the exploration phase's cost where this step's runs explore


def _pairs(per_seed: Mapping[int, Mapping[str, float | None]], baseline: str, policy: str, what: str) -> tuple[np.ndarray, np.ndarray] | None:
    b = [per_seed[s][f"{baseline}|{what}"] for s in sorted(per_seed)]
    f = [per_seed[s][f"{policy}|{what}"] for s in sorted(per_seed)]
    if not b or any(v is None for v in b + f):
        return None
    return np.array(b, dtype=float), np.array(f, dtype=float)


def _factor(now: tuple[np.ndarray, np.ndarray], before: tuple[np.ndarray, np.ndarray], what: str) -> tuple[float, list[float] | None]:
    """(ratio of means now) / (ratio of means before), with a paired 95 % percentile bootstrap over seeds."""
    from scipy.stats import bootstrap

    from flamingo_sim.fl.metrics.compare import N_RESAMPLES
    from flamingo_sim.rng import rng

    def stat(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray, axis: int = -1) -> np.ndarray:
        return (a.mean(axis=axis) / b.mean(axis=axis)) / (c.mean(axis=axis) / d.mean(axis=axis))

    value = float(stat(*now, *before))
    if len(now[0]) < 2:
        return value, None
    res = bootstrap((*now, *before), stat, n_resamples=N_RESAMPLES, method="percentile", paired=True, vectorized=True,
                    confidence_level=0.95, rng=rng(0, "bootstrap", what))
    return value, [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def attribute(task: str, metrics_by_config: Mapping[str, pd.DataFrame], baseline: str = "baseline",
              policy: str = "flamingo") -> list[StepResult]:
    """The walk for one task; ``metrics_by_config``: run configuration -> its ``metrics.parquet`` (same seeds)."""
    from flamingo_sim.fl.metrics.compare import exploration_cost, ratio_of_means

    out: list[StepResult] = []
    prev: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
    for step in walk_steps():
        per_seed = _to_target(metrics_by_config[step.config], step.values, baseline, policy)
        res = StepResult(task, step, None, None, None, None, per_seed=per_seed)
        if step.values["exploration"] != "none":
            res.exploration = exploration_cost(metrics_by_config[step.config], policy, baseline)
            if res.exploration is not None:
                res.exploration["per_request"] = per_request_estimate(metrics_by_config[step.config], policy)
        res.missed = [f"seed {s}: {who}" for s, row in per_seed.items() for who in (baseline, policy) if row[f"{who}|time"] is None]
        now: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
        for what, attr in (("time", "speedup"), ("energy", "energy_efficiency")):
            pairs = now[what] = _pairs(per_seed, baseline, policy, what)
            if pairs is not None:
                r = ratio_of_means(pairs[0].tolist(), pairs[1].tolist(), f"attribution|{task}|{step.name}|{attr}")
                if r is not None:
                    setattr(res, attr, r["value"])
                    setattr(res, f"{attr}_ci", r["ci"])
            before = prev.get(what)
            if out and pairs is not None and before is not None and len(before[0]) == len(pairs[0]):
                key = "speedup_factor" if what == "time" else "energy_factor"
                value, ci = _factor(pairs, before, f"attribution|{task}|{step.name}|{key}")
                setattr(res, key, value)
                setattr(res, f"{key}_ci", ci)
        prev = now
        out.append(res)
    return out


def paper_headline(task: str) -> tuple[float, float] | None:
    """The paper's Table 2 speedup and energy efficiency of ``task``."""
    row = TABLE2.get(task)
    return None if row is None else (row.speedup, row.energy_efficiency)


def per_request_first_round(n_clients: int, selected_per_round: int, n_choices: int, p_eligible: float,
                            n_models: int, rounds: Sequence[int] = tuple(range(1, 5001))) -> int | None:
    """``exploration: per_request``: the round by which, in expectation, the first client of a phone model has had
    ``n_choices`` eligible requests (selected, idle, unplugged), so the model's profile exists.

    Each round a client is selected with probability ``selected_per_round / n_clients`` and a request is eligible
    with probability ``p_eligible``; its eligible requests after ``R`` rounds are Binomial(R, q). Among the
    ``n_clients / n_models`` clients of a model, the first to reach ``n_choices`` does so by the first ``R`` where the
    expected number of such clients reaches 1. ``None`` if not within ``rounds``.
    """
    from scipy.stats import binom

    q = selected_per_round / n_clients * p_eligible
    per_model = n_clients / n_models
    for r in rounds:
        if per_model * float(binom.sf(n_choices - 1, r, q)) >= 1.0:
            return int(r)
    return None


#: Execution choices of the shipped SoCs: SD845 (no Prime core) and SD855/SD865.
N_CHOICES = (8, 11)


def per_request_estimate(metrics: pd.DataFrame, policy: str = "flamingo") -> dict[str, Any] | None:
    """What ``exploration: per_request`` would need on this fleet, from an exploring run's first round (where no
    client has a profile): the share of requests that can explore (``p_eligible``: explorers over selected), the
    clients online, the selections per round, the phone models, and for 8 and 11 choices the round by which the first
    client of a model would have explored them all (:func:`per_request_first_round`)."""
    first = metrics[(metrics["policy"] == policy) & (metrics["round"] == 1)]
    if first.empty or not {"n_exploring", "n_selected", "n_online"} <= set(first.columns) or int(first["n_selected"].sum()) == 0:
        return None
    p = float(first["n_exploring"].sum() / first["n_selected"].sum())
    n_clients = int(first["n_online"].mean())
    selected = int(round(float(first["n_selected"].mean())))
    n_models = sum(c.startswith("interference_s_") for c in metrics.columns) or 1
    rounds = int(metrics["round"].max())
    return {"p_eligible": p, "n_clients_online": n_clients, "selected_per_round": selected, "n_models": n_models,
            "selections_per_client": rounds * selected / n_clients, "rounds": rounds,
            "first_round": {str(n): per_request_first_round(n_clients, selected, n, p, n_models) for n in N_CHOICES}}


def task_label(task: str) -> str:
    dataset, dnn = TASKS.get(task, (task, ""))
    return f"{dataset} / {dnn}" if dnn else dataset
