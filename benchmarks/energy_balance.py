"""Energy charged against heat received over the main job: each phone's thermal circuit integrated apart from the engine.

For every task of every round (both policies, the main job as shipped: heat and memory on), the power its battery was
charged is read off the battery's side alone (:meth:`~flamingo_sim.devices.pricing.PowerTimeline.spent_j`, the energy
a share of the task drew, differenced over a grid of 200 steps and every change of power), and fed to the phone's
first-order circuit step by step (the closed form per step, :func:`~flamingo_sim.devices.thermal.rc_excess_c`). Where
the circuit ends is compared with the excess the pricing stage booked for that phone. Prints and writes, per policy:
the energy charged and the heat the circuits received (kJ), the largest difference between the integrated and the
booked excess (K), the tasks that ran throttled and those that ran part way while throttled or on the radio (where a
share of the task's energy differs from its share of the time: the charge of that part, against the share rule).

    PYTHONPATH=. python benchmarks/energy_balance.py [--set KEY=VALUE ...] [--json docs/results/energy_balance.json]
    PYTHONPATH=. python benchmarks/energy_balance.py --smoke     # seconds: 3 rounds on 200 clients
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"
SMOKE = ["fl.rounds=3", "fl.participants_per_round=10", "fl.local_steps=2", "fl.eval_every=1", "data.proxy.n_clients=200"]
GRID = 200
SOURCES = ["flamingo_sim/devices/pricing.py", "flamingo_sim/devices/thermal.py", "flamingo_sim/fl/sim/rounds.py", "flamingo_sim/fl/sim/limits.py"]


def integrate(cohort, done: np.ndarray, before: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each task's circuit fed the power its battery was charged, from ``before`` to where it stopped; and the energy."""
    from flamingo_sim.devices.pricing import PowerTimeline
    from flamingo_sim.devices.thermal import rc_excess_c

    tl, h = cohort.timeline, cohort.heat
    k = len(done)
    edges = np.minimum(np.cumsum(tl.segment_s, axis=1) / np.where(tl.clock_s > 0, tl.clock_s, 1.0)[:, None], done[:, None])
    grid = np.sort(np.concatenate([np.linspace(0.0, 1.0, GRID + 1)[None, :] * done[:, None], edges], axis=1), axis=1)
    curve = PowerTimeline(tl.segment_s, tl.segment_w, tl.clock_s, tl.energy_j, np.zeros(k, dtype=bool))  # the curve, never the share rule
    energy = np.stack([curve.spent_j(grid[:, j]) for j in range(grid.shape[1])], axis=1)
    x = before.astype(float).copy()
    for j in range(grid.shape[1] - 1):
        dt = (grid[:, j + 1] - grid[:, j]) * tl.clock_s
        de = energy[:, j + 1] - energy[:, j]
        power = np.where(dt > 0, de / np.where(dt > 0, dt, 1.0), 0.0)
        x = np.where(dt > 0, rc_excess_c(dt, x, power, h.resistance_k_per_w, h.tau_s), x)
    # past the task's end the circuit only decays, as between tasks
    from flamingo_sim.devices.thermal import decayed_c

    x = decayed_c(x, np.maximum(done * tl.clock_s - tl.segment_s.sum(axis=1), 0.0), h.tau_s)
    return x, energy[:, -1]


def run_policy(policy: str, sets: list[str]) -> dict[str, float]:
    import torch

    from flamingo_sim.fl.compose import build_components
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.plugins import experiment_policy
    from flamingo_sim.fl.sim.simulation import Simulation
    from flamingo_sim.fl.strategy.selection import make_selector

    torch.set_num_threads(1)
    cfg = load_experiment(EXPERIMENT, sets)
    parts = build_components(cfg, EXPERIMENT, 0, log=lambda _m: None)
    sim = Simulation(parts, experiment_policy(cfg, None, policy), policy, 0, make_selector("uniform"), log=lambda _m: None)
    pricing = sim.pricing
    if pricing.heat is None:
        raise SystemExit("energy_balance: devices.thermal is off in this configuration: no circuit to integrate")
    settle = pricing.settle
    out = {"charged_j": 0.0, "heat_j": 0.0, "max_excess_diff_k": 0.0, "tasks": 0, "throttled": 0, "partial_uneven": 0,
           "partial_uneven_charge_j": 0.0, "partial_uneven_share_rule_j": 0.0}

    def record(cohort, t0_s, done):
        done = np.asarray(done, dtype=float)
        clients = np.asarray(cohort.request.client_idx)
        before = pricing.excess_c_at(t0_s, clients)
        settle(cohort, t0_s, done)
        ran = (done > 0) & (cohort.timeline.energy_j > 0)
        if not ran.any():
            return
        x, heat = integrate(cohort, done, before)
        booked = pricing.excess_c[clients]
        out["max_excess_diff_k"] = max(out["max_excess_diff_k"], float(np.abs(x - booked)[ran].max()))
        out["heat_j"] += float(heat[ran].sum())
        out["tasks"] += int(ran.sum())
        out["throttled"] += int((ran & (cohort.throttled_s > 0)).sum())
        uneven = ran & (done < 1.0) & ~cohort.timeline.linear
        out["partial_uneven"] += int(uneven.sum())
        out["partial_uneven_charge_j"] += float(cohort.timeline.spent_j(done)[uneven].sum())
        out["partial_uneven_share_rule_j"] += float((cohort.energy_j * done)[uneven].sum())

    pricing.settle = record  # type: ignore[method-assign]
    while not sim.is_done():
        plan = sim.plan_round()
        out["charged_j"] += float(plan.settled.energy_spent_j.sum())
        sim.finish_round(plan, sim.train_round(plan))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override the main job's configuration")
    ap.add_argument("--json", type=Path, help="write the figures here (stamped with their commit, command and sources)")
    ap.add_argument("--smoke", action="store_true", help="3 rounds on 200 clients: the same code path in seconds")
    args = ap.parse_args(argv)
    sets = [*(SMOKE if args.smoke else []), *args.set]
    started = time.perf_counter()
    result = {"experiment": "experiments/openimage_mobilenet.yaml", "sets": sets, "grid_steps": GRID, "policies": {}}
    from flamingo_sim.errors import FlamingoError

    for policy in ("baseline", "flamingo"):
        try:
            r = run_policy(policy, sets)
        except FlamingoError as exc:
            print(f"energy_balance: {exc}", file=sys.stderr)
            return 2
        result["policies"][policy] = r
        ratio = r["heat_j"] / r["charged_j"] if r["charged_j"] > 0 else float("nan")
        print(f"{policy}: charged {r['charged_j'] / 1e3:.3f} kJ, heat received {r['heat_j'] / 1e3:.3f} kJ: heat / charged {ratio:.9f}x "
              f"(difference {r['heat_j'] - r['charged_j']:+.3g} J); integrated vs booked excess within {r['max_excess_diff_k']:.2g} K "
              f"over {r['tasks']:,} tasks ({r['throttled']} throttled); {r['partial_uneven']} ran part way at an uneven power: "
              f"charged {r['partial_uneven_charge_j']:.1f} J, the share rule would say {r['partial_uneven_share_rule_j']:.1f} J")
    result["wall_s"] = time.perf_counter() - started
    if args.json is not None:
        from flamingo_sim.provenance import command_line, stamp

        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        stamp([args.json], command_line(sys.argv if argv is None else ["benchmarks/energy_balance.py", *argv],
                                        program="PYTHONPATH=. python benchmarks/energy_balance.py"), SOURCES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
