"""Past the readings: what the model's own mechanisms are worth, and the stragglers that set a Table 2 row.

The attribution walk (:mod:`~flamingo_sim.studies.reproduce.attribution`) ends at the simulator's
default. From there, ``reproduce --attribution`` switches one *mechanism* of the model at a time
back to a simpler alternative (:func:`mechanism_configs`), each a full study of the same tasks and
seeds, and reads each variant's headline under the default's target rule:

- ``interference``: the android scheduling model -> ``fair`` (the owner's app holds two fixed
  cores, a shared core slows both 2x);
- ``energy accounting``: ``cpu_time`` -> ``full_power`` (a contended step at its full profiled
  power for its whole duration, charging training the owner's share of a core);
- ``round rule``: over-commitment 1.3 with keep-the-K-fastest -> 1.0 (every accepted client
  kept, the round waits for the slowest);
- ``phone mix``: each phone left out in turn (the others' shares scaled up to one).

Each variant's *factor* is its headline over the default's, with a paired 95 % bootstrap
interval over the seeds (:func:`~flamingo_sim.studies.reproduce.attribution._factor`).

**Stragglers** (:func:`straggler_rows`). Under keep-the-K-fastest a round lasts as long as its
slowest kept client, so the speedup is close to the ratio of the two policies' stragglers: per
task, each policy's mean round duration over the rounds both completed, the ratio of the two
(baseline / Flamingo), and the phone model that was the slowest kept client most often
(``straggler_phone`` in ``metrics.parquet``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from flamingo_sim.studies.reproduce.attribution import Step, StepResult, _factor, _pairs, _to_target, walk_steps
from flamingo_sim.studies.reproduce.tables import PHONE_NAMES, Table, num

__all__ = ["Mechanism", "MECHANISMS", "mechanism_configs", "mechanism_steps", "mechanism_table", "mechanisms_json",
           "straggler_rows", "straggler_table"]


@dataclass(frozen=True)
class Mechanism:
    """One mechanism switched back to a simpler alternative: its name, what changes, and the ``--set`` overrides."""

    name: str
    label: str
    overrides: tuple[str, ...]


#: The mechanisms switched one at a time (the phone mix's variants come from the experiment: :func:`mechanism_configs`).
MECHANISMS: tuple[Mechanism, ...] = (
    Mechanism("interference", "interference: android -> fair (2 fixed cores, 2x)", ("policy.interference.model=fair",)),
    Mechanism("energy", "energy accounting: cpu_time -> full_power", ("policy.interference.energy=full_power",)),
    Mechanism("round_rule", "round rule: over-commit 1.3, K fastest -> 1.0, all kept", ("fl.overcommit=1.0",)),
)


def mechanism_configs(mix: Mapping[str, float]) -> dict[str, Mechanism]:
    """Every variant: the mechanisms, then each phone of ``mix`` (the experiment's ``phones.mix``) left out."""
    out = {m.name: m for m in MECHANISMS}
    total = sum(mix.values())
    for phone in mix:
        rest = {p: w / (total - mix[phone]) for p, w in mix.items() if p != phone}
        flow = "{" + ", ".join(f"{p}: {w:.6g}" for p, w in rest.items()) + "}"
        out[f"without_{phone}"] = Mechanism(f"without_{phone}", f"phone mix: without the {PHONE_NAMES.get(phone, phone)}",
                                            (f"phones.mix={flow}",))
    return out


def mechanism_steps(task: str, default: pd.DataFrame, variants: Mapping[str, pd.DataFrame], configs: Mapping[str, Mechanism],
                    baseline: str = "baseline", policy: str = "flamingo") -> list[StepResult]:
    """Each variant's headline (the default's target rule) and its factor over the default's."""
    from flamingo_sim.fl.metrics.compare import ratio_of_means

    values = walk_steps()[-1].values  # the default's readings
    ref = _to_target(default, values, baseline, policy)
    ref_pairs = {w: _pairs(ref, baseline, policy, w) for w in ("time", "energy")}
    out = []
    for name, frame in variants.items():
        per_seed = _to_target(frame, values, baseline, policy)
        res = StepResult(task, Step(name, configs[name].label, dict(values), name), None, None, None, None, per_seed=per_seed)
        res.missed = [f"seed {s}: {who}" for s, row in per_seed.items() for who in (baseline, policy) if row[f"{who}|time"] is None]
        for what, attr, key in (("time", "speedup", "speedup_factor"), ("energy", "energy_efficiency", "energy_factor")):
            pairs = _pairs(per_seed, baseline, policy, what)
            if pairs is None:
                continue
            r = ratio_of_means(pairs[0].tolist(), pairs[1].tolist(), f"mechanism|{task}|{name}|{attr}")
            if r is not None:
                setattr(res, attr, r["value"])
                setattr(res, f"{attr}_ci", r["ci"])
            before = ref_pairs[what]
            if before is not None and len(before[0]) == len(pairs[0]):
                value, ci = _factor(pairs, before, f"mechanism|{task}|{name}|{key}")
                setattr(res, key, value)
                setattr(res, f"{key}_ci", ci)
        out.append(res)
    return out


def _x(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "no ratio"
    return f"{value:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def mechanism_table(task_label: str, steps: Sequence[StepResult]) -> Table:
    rows = [[s.step.label, _x(s.speedup, s.speedup_ci), _x(s.speedup_factor, s.speedup_factor_ci), _x(s.energy_efficiency,
             s.energy_efficiency_ci), _x(s.energy_factor, s.energy_factor_ci), "; ".join(s.missed) or "-"] for s in steps]
    return Table(f"{task_label}: the model's mechanisms, one at a time from the default",
                 ["variant", "speedup [95 % CI]", "factor over the default", "energy efficiency", "factor over the default",
                  "never reached the target"], rows,
                 "Each variant switches one mechanism of the default model to a simpler alternative (every other setting the "
                 "default's), a full study of the same seeds, read under the default's target rule; factor = the variant's "
                 "headline over the default's, paired bootstrap over the seeds.")


def mechanisms_json(steps_by_task: Mapping[str, Sequence[StepResult]]) -> dict[str, Any]:
    return {task: [{"variant": s.step.name, "label": s.step.label, "speedup": s.speedup, "speedup_ci": s.speedup_ci,
                    "speedup_factor": s.speedup_factor, "speedup_factor_ci": s.speedup_factor_ci,
                    "energy_efficiency": s.energy_efficiency, "energy_efficiency_ci": s.energy_efficiency_ci,
                    "energy_factor": s.energy_factor, "energy_factor_ci": s.energy_factor_ci, "missed": s.missed} for s in steps]
            for task, steps in steps_by_task.items()}


def straggler_rows(metrics: pd.DataFrame, baseline: str = "baseline", policy: str = "flamingo") -> dict[str, Any] | None:
    """Per policy over the rounds both completed (every seed): the mean round duration (its slowest kept client's task),
    the phone that was the slowest kept client most often and how often; and the ratio of the two means."""
    if "straggler_phone" not in metrics.columns:
        return None
    rows = metrics[metrics["round"] >= 1]
    last = rows.groupby(["seed", "policy"])["round"].max().groupby("seed").min()
    both = rows[rows["round"] <= rows["seed"].map(last)]
    out: dict[str, Any] = {}
    for who in (baseline, policy):
        mine = both[(both["policy"] == who) & (both["straggler_phone"] != "")]
        if mine.empty:
            return None
        counts = mine["straggler_phone"].value_counts()
        out[who] = {"round_s": float(mine["duration_s"].mean()), "phone": str(counts.index[0]),
                    "share": float(counts.iloc[0] / len(mine)), "rounds": int(len(mine))}
    out["ratio"] = out[baseline]["round_s"] / out[policy]["round_s"]
    return out


def straggler_table(results: Sequence[Any]) -> Table:
    """One row per task: the speedup beside the ratio of the two policies' stragglers (:func:`straggler_rows`)."""
    rows = []
    for r in results:
        s = straggler_rows(r.metrics, r.baseline, r.policy)
        speedup = r.summary["policies"][r.policy].get("speedup")
        if s is None:
            rows.append([r.label, num(speedup, 2), "-", "-", "-"])
            continue
        b, f = s[r.baseline], s[r.policy]
        rows.append([r.label, num(speedup, 2), f"{s['ratio']:.2f}x",
                     f"{b['round_s'] / 3600:.2f} h; {PHONE_NAMES.get(b['phone'], b['phone'])} in {100 * b['share']:.0f} % of rounds",
                     f"{f['round_s'] / 3600:.2f} h; {PHONE_NAMES.get(f['phone'], f['phone'])} in {100 * f['share']:.0f} % of rounds"])
    return Table("What sets the speedup: each policy's slowest kept client per round", ["task", "speedup (Table 2)",
                 "straggler ratio (baseline / Flamingo)", "baseline: mean round; slowest kept client most often",
                 "Flamingo: mean round; slowest kept client most often"], rows,
                 "Under keep-the-K-fastest a round lasts as long as its slowest kept client's task, so the speedup to the target "
                 "is close to the ratio of the two policies' mean rounds (the rounds both completed, all seeds): a Table 2 row is "
                 "largely one straggler ratio, and the phone named here is the one that sets it.")
