"""Everything but training: the per-round cost of availability, energy, selection, pricing and
bookkeeping, at 2,400, 100,000 and 1,000,000 clients, against an older version of the code.

Runs the real engine on the shipped traces and the proxy task, both policies, and subtracts the
wall time the engine itself measures in local training, FedAvg and evaluation
(``Simulation.model_wall_s``). Every measurement runs in its own subprocess, alternating between
this tree and the baseline tree (``git archive`` of ``--baseline-ref``, default ``main``, into a
temporary directory), so both see the same machine load; prints the median ms per round of
each, and their ratio. At 2,400 clients it also prints the whole round (training included)
against its own "vmap limit": a bare loop over the same cohorts, their vmapped SGD steps
(``torch.func.vmap``) and a FedAvg weighted by samples, data already gathered, timed right
after each round (goal: within 1.05x), twice: "cold" (the proxy's client data generated on first
use, as in a run's first rounds) and "warm" (every client's data generated before timing, as
after a run's first few dozen rounds at 2,400 clients); and what of the round lies outside the
limit: each client's minibatch indices (its shuffles), planning the round (selection, pricing),
finishing it (batteries, the record) and the rest (gathering the data, FedAvg in float64).

    PYTHONPATH=. python benchmarks/round_overhead.py [--rounds 20] [--repeats 3] [--baseline-ref main]
    PYTHONPATH=. python benchmarks/round_overhead.py --smoke    # seconds: 200 clients, flamingo, against HEAD
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "openimage_mobilenet.yaml"
# --smoke: every measurement once, on 200 clients, one policy, against the last commit; explicit options still win
SMOKE = {"rounds": 1, "repeats": 1, "sizes": "200", "policies": "flamingo", "participants": 10, "steps": 2, "baseline_ref": "HEAD"}

WORKER = r"""
import json, sys, time
import numpy as np, torch
torch.set_num_threads(int(sys.argv[5]))
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import make_selector
from flamingo_sim.fl.compose import build_components
from flamingo_sim.fl.plugins import experiment_policy

experiment, n_clients, policy, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
warmup = 3
overrides = [f"data.proxy.n_clients={n_clients}", f"fl.rounds={rounds + warmup + 1}", "fl.eval_every=1000000", *json.loads(sys.argv[6])]
cfg = load_experiment(experiment, overrides)
parts = build_components(cfg, experiment, 0, log=lambda _m: None)
sim = Simulation(parts, experiment_policy(cfg, None, policy), policy, 0, make_selector("uniform"))
if len(sys.argv) > 7 and sys.argv[7] == "warm":  # every client's data generated before the clock starts
    for c in range(parts.dataset.n_clients):
        parts.dataset.client_data(c)
for _ in range(warmup):
    sim.step()
limit_mode = len(sys.argv) > 7


def vmap_limit(ids, r):
    # the vmap limit: this round's kept cohort's SGD steps and a bare FedAvg (weighted by samples), data gathered beforehand
    from flamingo_sim.fl.training.batched import train_vmap
    from flamingo_sim.fl.training.trainer import minibatch_indices
    if not ids:
        return 0.0
    fl, ds = cfg.fl, parts.dataset
    datas = [ds.client_data(c) for c in ids]
    x_all, y_all = torch.cat([d[0] for d in datas]), torch.cat([d[1] for d in datas])
    sizes = torch.tensor([len(d[1]) for d in datas])
    idx = torch.stack([minibatch_indices(len(d[1]), fl.local_steps, fl.batch_size, 0, r, c) for c, d in zip(ids, datas)], 1)
    gather = idx + (torch.cumsum(sizes, 0) - sizes).view(1, -1, 1)
    t = time.perf_counter()
    stacked, _ = train_vmap(parts.model, dict(sim.params), x_all, y_all, gather, fl.lr)
    w = sizes.double() / sizes.sum()
    {k: torch.tensordot(w.to(v.dtype), v, dims=1) if v.is_floating_point() else v[0] for k, v in stacked.items()}
    return time.perf_counter() - t


parts_s = {"plan": 0.0, "indices": 0.0, "finish": 0.0}
if limit_mode:  # what of the round lies outside the limit: the minibatch indices (each client's shuffles), planning, finishing
    import flamingo_sim.fl.training.trainer as trainer_module
    name = "cohort_indices" if hasattr(trainer_module, "cohort_indices") else "minibatch_indices"
    inner = getattr(trainer_module, name)
    def timed(*a, **k):
        t0 = time.perf_counter()
        r = inner(*a, **k)
        parts_s["indices"] += time.perf_counter() - t0
        return r
    setattr(trainer_module, name, timed)
total = limit = 0.0
model_before = sim.model_wall_s
for _ in range(rounds):  # each round, then (outside its clock) its limit: both see the same machine load
    t = time.perf_counter()
    plan = sim.plan_round()
    t_plan = time.perf_counter()
    loss = sim.train_round(plan)
    t_train = time.perf_counter()
    sim.finish_round(plan, loss)
    done = time.perf_counter()
    total += done - t
    parts_s["plan"] += t_plan - t
    parts_s["finish"] += done - t_train
    if limit_mode:
        limit += vmap_limit([int(c) for c in plan.kept], plan.round)
out = {"overhead_ms": 1000.0 * (total - (sim.model_wall_s - model_before)) / rounds, "round_ms": 1000.0 * total / rounds}
if limit_mode:
    out["vmap_limit_ms"] = 1000.0 * limit / rounds
    out.update({f"{k}_ms": 1000.0 * v / rounds for k, v in parts_s.items()})
print(json.dumps(out))
"""


def baseline_tree(ref: str, into: Path) -> Path:
    """The package as it is at git ``ref``, extracted under ``into``."""
    # the package and the data its package links point at (profiles, traces, experiments)
    paths = ["flamingo_sim", "profiles", "traces", "experiments"]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, *paths], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(tree: Path, n_clients: int, policy: str, rounds: int, threads: int, overrides: list[str], limit: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads)}
    experiment = tree / EXPERIMENT.relative_to(ROOT)  # each tree's own main job
    args = [sys.executable, "-c", WORKER, str(experiment), str(n_clients), policy, str(rounds), str(threads), json.dumps(overrides)]
    args += [limit] if limit else []
    # cwd = the tree: ``python -c`` puts the working directory first on sys.path, ahead of PYTHONPATH
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"worker failed ({tree}, {n_clients}, {policy}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="2400,100000,1000000")
    parser.add_argument("--policies", default="baseline,flamingo")
    parser.add_argument("--participants", type=int, help="K (default: the main job's)")
    parser.add_argument("--steps", type=int, help="local steps (default: the main job's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baseline-ref", default="main", help="git ref of the code to compare with")
    parser.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = parser.parse_args(argv)
    if args.smoke:
        parser.set_defaults(**SMOKE)
        args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = args.policies.split(",")
    over = [f"{key}={value}" for key, value in (("fl.participants_per_round", args.participants), ("fl.local_steps", args.steps)) if value is not None]
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline_tree(args.baseline_ref, Path(tmp))
        new = ROOT
        results: dict[tuple, list[dict]] = {}
        for _ in range(args.repeats):  # interleaved: old and new see the same load
            for n in sizes:
                for policy in policies:
                    for name, tree in (("old", old), ("new", new)):
                        results.setdefault((name, n, policy), []).append(measure(tree, n, policy, args.rounds, args.threads, over))
                    if n == sizes[0]:  # the whole round against the vmap limit, data cold and warm
                        for mode in ("cold", "warm"):
                            results.setdefault((mode, n, policy), []).append(measure(new, n, policy, args.rounds, args.threads, over, mode))
    print(f"ms per round, all but training (median of {args.repeats}, {args.rounds} rounds each, {args.threads} thread(s)); old = {args.baseline_ref}")
    print(f"{'policy':<10} {'clients':>9} {'old':>9} {'new':>9} {'old/new':>8}  {'spread new':>14}")
    for n in sizes:
        for policy in policies:
            o = [r["overhead_ms"] for r in results[("old", n, policy)]]
            w = [r["overhead_ms"] for r in results[("new", n, policy)]]
            mo, mw = statistics.median(o), statistics.median(w)
            print(f"{policy:<10} {n:>9,} {mo:>9.2f} {mw:>9.2f} {mo / mw:>7.2f}x  {min(w):6.2f}-{max(w):6.2f}")
    n = sizes[0]
    print(f"whole round (training included) / vmap limit at {n:,} clients; cold: clients' data generated on first use, "
          "warm: every client's data generated before timing")
    for policy in policies:
        for mode in ("cold", "warm"):
            rows = results[(mode, n, policy)]
            ratios = [r["round_ms"] / r["vmap_limit_ms"] for r in rows]
            whole = statistics.median(r["round_ms"] for r in rows)
            limit = statistics.median(r["vmap_limit_ms"] for r in rows)
            print(f"{policy:<10} {mode}: whole round {whole:.1f} ms, vmap limit {limit:.1f} ms, "
                  f"ratio {statistics.median(ratios):.2f}x (spread {min(ratios):.2f}-{max(ratios):.2f})")
            left = {k: statistics.median(r[f"{k}_ms"] for r in rows) for k in ("indices", "plan", "finish")}
            rest = whole - limit - sum(left.values())
            print(f"{'':<10} {mode}: outside the limit {whole - limit:.1f} ms: minibatch indices {left['indices']:.1f}, planning "
                  f"{left['plan']:.1f}, finishing {left['finish']:.1f}, the rest (gathering the data, FedAvg in float64, the "
                  f"trainer's set-up) {rest:.1f} ms")


if __name__ == "__main__":
    main()
