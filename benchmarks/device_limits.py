"""What the heat and memory models cost: the per-round time of everything but training with
``devices.thermal: rc`` and ``devices.memory: shrink_batch`` against both off, at 2,400 and
1,000,000 clients (issue 33's goal: within 10 % of off, and at most 20 ms a round at 10^6 clients).

Each (size, policy) runs in its own subprocess holding two simulations of the main job on the
proxy task, one with the models off and one with both on; their rounds alternate (off, on, off,
on, ...) so both see the same machine load. A round's cost is its wall time minus the time the
engine itself measures in local training, FedAvg and evaluation (``Simulation.model_wall_s``).
Prints the median ms per round of each, the spread, and the ratio on/off. The two runs diverge
(throttled and shrunk tasks change who trains and how long a round lasts, and a longer round
steps the batteries through more trace ticks), so the script also times the hook itself: the
models' four calls per round in the pricing stage (:class:`~flamingo_sim.devices.pricing.DevicePricing`: the
excess at the start, the limits, settle, columns), whose share of the off round is the models' own cost. ``--out``
writes everything as JSON.

    PYTHONPATH=. python benchmarks/device_limits.py [--rounds 20] [--repeats 3] [--out benchmarks/results/device_limits_2cores.json]
    PYTHONPATH=. python benchmarks/device_limits.py --smoke    # seconds: 200 clients, flamingo, 2 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from flamingo_sim.provenance import command_line, stamp  # each results file's commit, command and machine

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"
SMOKE = {"rounds": 2, "repeats": 1, "sizes": "200", "policies": "flamingo", "participants": 10, "steps": 2}
ON = ["devices.thermal=rc", "devices.memory=shrink_batch"]

WORKER = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.compose import build_components
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import make_selector

experiment, n_clients, policy, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
extra, on = json.loads(sys.argv[5]), json.loads(sys.argv[6])
warmup = 2
base = [f"data.proxy.n_clients={n_clients}", f"fl.rounds={rounds + warmup + 1}", "fl.eval_every=1000000", *extra]
sims = {}
for name, over in (("off", base), ("on", base + on)):
    cfg = load_experiment(experiment, over)
    parts = build_components(cfg, experiment, 0, log=lambda _m: None)
    sims[name] = Simulation(parts, experiment_policy(cfg, None, policy), policy, 0, make_selector("uniform"))
hook = [0.0]
limits = sims["on"].pricing


def timed(method):
    def call(*args, **kwargs):
        t = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            hook[0] += time.perf_counter() - t
    return call


for name in ("excess_c_at", "_limits", "settle", "columns"):
    setattr(limits, name, timed(getattr(limits, name)))
for _ in range(warmup):
    for sim in sims.values():
        sim.step()
cost = {name: [] for name in sims}
cost["hook"] = []
for _ in range(rounds):
    for name, sim in sims.items():  # alternating: off and on see the same load
        model_before, hook_before = sim.model_wall_s, hook[0]
        t = time.perf_counter()
        plan = sim.plan_round()
        sim.finish_round(plan, sim.train_round(plan))
        cost[name].append(1000.0 * (time.perf_counter() - t - (sim.model_wall_s - model_before)))
        if name == "on":
            cost["hook"].append(1000.0 * (hook[0] - hook_before))
print(json.dumps(cost))
"""


def measure(n_clients: int, policy: str, rounds: int, extra: list[str]) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "FLAMINGO_SIM_QUIET": "1"}
    args = [sys.executable, "-c", WORKER, str(EXPERIMENT), str(n_clients), policy, str(rounds), json.dumps(extra), json.dumps(ON)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"worker failed ({n_clients}, {policy}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="processes per (size, policy); rounds pooled over them")
    parser.add_argument("--sizes", default="2400,1000000")
    parser.add_argument("--policies", default="baseline,flamingo")
    parser.add_argument("--participants", type=int, help="K (default: the main job's)")
    parser.add_argument("--steps", type=int, help="local steps (default: the main job's)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    extra = [f"{key}={value}" for key, value in (("fl.participants_per_round", args.participants), ("fl.local_steps", args.steps))
             if value is not None]
    load_before = os.getloadavg()
    rows = []
    print(f"ms per round, all but training (median over {args.repeats} process(es) x {args.rounds} rounds; off and on alternate)")
    print(f"{'policy':<10} {'clients':>9} {'off':>9} {'on':>9} {'on/off':>8}  {'spread off':>15} {'spread on':>15} {'hook':>7} {'hook/off':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        for policy in args.policies.split(","):
            pooled: dict[str, list[float]] = {"off": [], "on": [], "hook": []}
            for _ in range(args.repeats):
                for name, values in measure(n, policy, args.rounds, extra).items():
                    pooled[name] += values
            off, on, hook = (statistics.median(pooled[k]) for k in ("off", "on", "hook"))
            rows.append({"policy": policy, "clients": n, "off_ms": off, "on_ms": on, "ratio": on / off, "hook_ms": hook,
                         "hook_share_of_off": hook / off, "off_ms_range": [min(pooled["off"]), max(pooled["off"])],
                         "on_ms_range": [min(pooled["on"]), max(pooled["on"])], "hook_ms_range": [min(pooled["hook"]), max(pooled["hook"])]})
            print(f"{policy:<10} {n:>9,} {off:>9.2f} {on:>9.2f} {on / off:>7.2f}x  {min(pooled['off']):6.2f}-{max(pooled['off']):7.2f} "
                  f"{min(pooled['on']):6.2f}-{max(pooled['on']):7.2f} {hook:>7.2f} {hook / off:>8.1%}")
    load_after = os.getloadavg()
    print(f"load average (1 min) before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    if args.out:
        result = {"command": "PYTHONPATH=. python benchmarks/device_limits.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "on": ON, "rounds": args.rounds, "repeats": args.repeats, "machine": platform.processor() or platform.machine(),
                  "cpus": os.cpu_count(), "load_1min": [load_before[0], load_after[0]], "rows": rows}
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        stamp([args.out], command_line())  # timings: no sources (they date with the whole tree)


if __name__ == "__main__":
    main()
